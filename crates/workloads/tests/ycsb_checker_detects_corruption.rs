//! The YCSB checker rejects torn, altered, missing and misplaced rows, and `verify_acks`
//! rejects a lost write: a checker that never fails is worth nothing.

mod common;

use common::{assert_check_fails, read, tamper};
use storage::Engine;
use workloads::testing::MemEngine;
use workloads::ycsb::{Ycsb, YcsbConfig, TABLE};
use workloads::{Ack, Workload};

fn setup() -> (Ycsb, MemEngine, u32) {
    let cfg = YcsbConfig { record_count: 500, ..YcsbConfig::preset("a").unwrap() };
    let w = Ycsb::new(cfg).unwrap();
    let e = common::loaded(&w);
    common::run(&w, &e, 1, 300, 1);
    w.check(&e).expect("clean database must pass");
    let t = common::table(&e, TABLE);
    (w, e, t)
}

#[test]
fn altered_field_fails_the_checksum() {
    let (w, e, t) = setup();
    let key = w.config().key_of(5);
    let row = read(&e, t, key).unwrap();
    tamper(&e, |txn| assert!(txn.update(t, key, 100, &[row[100] ^ 0x40]).unwrap()));
    assert_check_fails(&w, &e, "checksum");
}

#[test]
fn torn_version_fails_the_checksum() {
    let (w, e, t) = setup();
    let key = w.config().key_of(6);
    // The version word persisted, the checksum did not.
    tamper(&e, |txn| assert!(txn.update(t, key, 8, &77u64.to_le_bytes()).unwrap()));
    assert_check_fails(&w, &e, "checksum");
}

#[test]
fn missing_record_is_reported() {
    let (w, e, t) = setup();
    tamper(&e, |txn| assert!(txn.delete(t, w.config().key_of(7)).unwrap()));
    assert_check_fails(&w, &e, "record 7");
}

#[test]
fn misplaced_row_is_reported() {
    let (w, e, t) = setup();
    let (k3, k4) = (w.config().key_of(3), w.config().key_of(4));
    let row3 = read(&e, t, k3).unwrap();
    tamper(&e, |txn| {
        assert!(txn.delete(t, k4).unwrap());
        txn.insert(t, k4, &row3).unwrap();
    });
    assert_check_fails(&w, &e, "belongs at key");
}

#[test]
fn zeroed_row_is_reported() {
    let (w, e, t) = setup();
    let key = w.config().key_of(8);
    tamper(&e, |txn| assert!(txn.update(t, key, 0, &[0u8; 1024]).unwrap()));
    assert_check_fails(&w, &e, "checksum");
}

#[test]
fn lost_write_fails_ack_verification() {
    let (w, e, t) = setup();
    let key = w.config().key_of(9);
    let ok = Ack { table: t, key, value: 1 };
    w.verify_acks(&e, &[ok]).unwrap();
    let lost = Ack { table: t, key, value: 1_000_000 };
    assert!(w.verify_acks(&e, &[ok, lost]).unwrap_err().contains("lost"));
    let gone = Ack { table: t, key: w.config().key_of(1_000_000), value: 1 };
    assert!(w.verify_acks(&e, &[gone]).unwrap_err().contains("missing"));
    let _ = e.name();
}

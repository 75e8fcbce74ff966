//! The TATP checker rejects broken references (call forwarding without its special facility,
//! rows of subscribers that do not exist, subscribers without access info) and missing
//! subscribers or index entries; `verify_acks` rejects a lost subscriber update.

mod common;

use common::{assert_check_fails, tamper};
use workloads::tatp::*;
use workloads::testing::MemEngine;
use workloads::{Ack, Workload};

const SUBSCRIBERS: u64 = 300;

fn setup() -> (Tatp, MemEngine) {
    let w = Tatp::new(TatpConfig { subscribers: SUBSCRIBERS, ..TatpConfig::default() }).unwrap();
    let e = common::loaded(&w);
    common::run(&w, &e, 1, 500, 1);
    w.check(&e).expect("clean database must pass");
    (w, e)
}

fn delete(e: &MemEngine, table: &str, key: u64) {
    let t = common::table(e, table);
    tamper(e, |txn| assert!(txn.delete(t, key).unwrap(), "nothing at {key:#x}"));
}

#[test]
fn call_forwarding_without_its_facility() {
    let (w, e) = setup();
    let cf = common::table(&e, CALL_FORWARDING_TABLE);
    let key = common::first_keys(&e, cf, 0, 1)[0];
    delete(&e, SPECIAL_FACILITY_TABLE, key >> 2);
    assert_check_fails(&w, &e, "does not exist");
}

#[test]
fn missing_subscriber() {
    let (w, e) = setup();
    delete(&e, SUBSCRIBER_TABLE, 5);
    assert_check_fails(&w, &e, "subscriber 5");
}

#[test]
fn missing_index_entry() {
    let (w, e) = setup();
    delete(&e, SUB_NBR_TABLE, 9);
    assert_check_fails(&w, &e, "sub_nbr index");
}

#[test]
fn subscriber_without_access_info() {
    let (w, e) = setup();
    let ai = common::table(&e, ACCESS_INFO_TABLE);
    for key in common::first_keys(&e, ai, access_info_key(3, 1), 4) {
        if key >> 2 == 3 {
            delete(&e, ACCESS_INFO_TABLE, key);
        }
    }
    assert_check_fails(&w, &e, "subscriber 3 has 0 access-info");
}

#[test]
fn row_of_a_subscriber_that_does_not_exist() {
    let (w, e) = setup();
    let sf = common::table(&e, SPECIAL_FACILITY_TABLE);
    let mut row = vec![0u8; 24];
    row[..8].copy_from_slice(&(SUBSCRIBERS + 1).to_le_bytes());
    row[8] = 1;
    tamper(&e, |txn| txn.insert(sf, special_facility_key(SUBSCRIBERS + 1, 1), &row).unwrap());
    assert_check_fails(&w, &e, "does not exist");
}

#[test]
fn lost_update_fails_ack_verification() {
    let (w, e) = setup();
    let t = common::table(&e, SUBSCRIBER_TABLE);
    w.verify_acks(&e, &[Ack { table: t, key: 1, value: 1 }]).unwrap();
    let lost = Ack { table: t, key: 1, value: 1_000 };
    assert!(w.verify_acks(&e, &[lost]).unwrap_err().contains("lost"));
}

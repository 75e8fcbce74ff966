//! The TPC-B checker rejects balances that disagree in total, money moved between branches or
//! accounts without history, and a hole in a worker's history; `verify_acks` rejects a lost
//! history row.

mod common;

use common::{assert_check_fails, read, tamper};
use workloads::testing::MemEngine;
use workloads::tpcb::{Tpcb, TpcbConfig, ACCOUNT_TABLE, BRANCH_TABLE, HISTORY_TABLE};
use workloads::{Ack, Workload};

fn setup() -> (Tpcb, MemEngine) {
    let cfg = TpcbConfig { branches: 2, accounts_per_branch: 200, ..TpcbConfig::default() };
    let w = Tpcb::new(cfg).unwrap();
    let e = common::loaded(&w);
    common::run(&w, &e, 2, 200, 1);
    w.check(&e).expect("clean database must pass");
    (w, e)
}

/// Adds `delta` to the i64 balance at `offset` of a row.
fn add(e: &MemEngine, table: &str, key: u64, offset: usize, delta: i64) {
    let t = common::table(e, table);
    let row = read(e, t, key).unwrap();
    let balance = i64::from_le_bytes(row[offset..offset + 8].try_into().unwrap()) + delta;
    tamper(e, |txn| assert!(txn.update(t, key, offset as u32, &balance.to_le_bytes()).unwrap()));
}

#[test]
fn branch_balance_off_by_one() {
    let (w, e) = setup();
    add(&e, BRANCH_TABLE, 0, 8, 1);
    assert_check_fails(&w, &e, "balances disagree");
}

#[test]
fn money_moved_between_branches() {
    let (w, e) = setup();
    add(&e, BRANCH_TABLE, 0, 8, 100);
    add(&e, BRANCH_TABLE, 1, 8, -100);
    assert_check_fails(&w, &e, "branch 0");
}

#[test]
fn money_moved_between_accounts() {
    let (w, e) = setup();
    add(&e, ACCOUNT_TABLE, 10, 16, 100);
    add(&e, ACCOUNT_TABLE, 11, 16, -100);
    assert_check_fails(&w, &e, "account 1");
}

#[test]
fn hole_in_history() {
    let (w, e) = setup();
    let t = common::table(&e, HISTORY_TABLE);
    // Worker 0's second history row.
    tamper(&e, |txn| assert!(txn.delete(t, (1 << 40) | 1).unwrap()));
    assert_check_fails(&w, &e, "not contiguous");
}

#[test]
fn lost_history_row_fails_ack_verification() {
    let (w, e) = setup();
    let t = common::table(&e, HISTORY_TABLE);
    let row = read(&e, t, 1 << 40).unwrap();
    let delta = i64::from_le_bytes(row[24..32].try_into().unwrap());
    let ok = Ack { table: t, key: 1 << 40, value: delta as u64 };
    w.verify_acks(&e, &[ok]).unwrap();
    let lost = Ack { table: t, key: (1 << 40) | 100_000, value: 5 };
    assert!(w.verify_acks(&e, &[lost]).unwrap_err().contains("lost"));
    let wrong = Ack { value: delta.wrapping_add(1) as u64, ..ok };
    assert!(w.verify_acks(&e, &[wrong]).is_err());
}

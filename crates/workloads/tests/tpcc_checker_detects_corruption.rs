//! The TPC-C checker rejects violations of each consistency condition (§3.3.2.1-6) and of the
//! two index tables; `verify_acks` rejects a lost order.

mod common;

use common::{assert_check_fails, read, tamper};
use workloads::testing::MemEngine;
use workloads::tpcc::schema::*;
use workloads::tpcc::{Tpcc, TpccConfig};
use workloads::{Ack, Workload};

fn setup() -> (Tpcc, MemEngine) {
    let cfg = TpccConfig {
        warehouses: 1,
        items: 500,
        customers_per_district: 100,
        ..TpccConfig::default()
    };
    let w = Tpcc::new(cfg).unwrap();
    let e = common::loaded(&w);
    common::run(&w, &e, 1, 300, 1);
    w.check(&e).expect("clean database must pass");
    (w, e)
}

fn write_u32(e: &MemEngine, table: &str, key: u64, offset: usize, f: impl Fn(u32) -> u32) {
    let t = common::table(e, table);
    let row = read(e, t, key).unwrap();
    let v = f(u32::from_le_bytes(row[offset..offset + 4].try_into().unwrap()));
    tamper(e, |txn| assert!(txn.update(t, key, offset as u32, &v.to_le_bytes()).unwrap()));
}

fn delete(e: &MemEngine, table: &str, key: u64) {
    let t = common::table(e, table);
    tamper(e, |txn| assert!(txn.delete(t, key).unwrap(), "nothing to delete at {key:#x}"));
}

/// The oldest undelivered order of warehouse 1, district `d`.
fn oldest_new_order(e: &MemEngine, d: u32) -> u32 {
    let t = common::table(e, NEW_ORDER_TABLE);
    split_order_key(common::first_keys(e, t, order_key(1, d, 0), 1)[0]).2
}

#[test]
fn condition_1_warehouse_ytd() {
    let (w, e) = setup();
    let t = common::table(&e, WAREHOUSE_TABLE);
    let row = read(&e, t, 1).unwrap();
    let ytd = i64::from_le_bytes(row[warehouse::YTD..warehouse::YTD + 8].try_into().unwrap());
    tamper(&e, |txn| {
        txn.update(t, 1, warehouse::YTD as u32, &(ytd + 1).to_le_bytes()).unwrap();
    });
    assert_check_fails(&w, &e, "condition 1");
}

#[test]
fn condition_2_next_order_id() {
    let (w, e) = setup();
    write_u32(&e, DISTRICT_TABLE, district_key(1, 3), district::NEXT_O_ID, |v| v + 1);
    assert_check_fails(&w, &e, "condition 2");
}

#[test]
fn condition_3_new_order_hole() {
    let (w, e) = setup();
    let o = oldest_new_order(&e, 2);
    delete(&e, NEW_ORDER_TABLE, order_key(1, 2, o + 1));
    assert_check_fails(&w, &e, "condition 3");
}

#[test]
fn condition_4_lost_order_line() {
    let (w, e) = setup();
    delete(&e, ORDER_LINE_TABLE, order_line_key(1, 4, 10, 1));
    assert_check_fails(&w, &e, "condition 4");
}

#[test]
fn condition_5_carrier_without_delivery() {
    let (w, e) = setup();
    let o = oldest_new_order(&e, 5);
    write_u32(&e, ORDER_TABLE, order_key(1, 5, o), order::CARRIER_ID, |_| 7);
    assert_check_fails(&w, &e, "condition 5");
}

#[test]
fn condition_6_line_counts_swapped() {
    let (w, e) = setup();
    // Sum of O_OL_CNT unchanged (condition 4 holds); two orders' counts are wrong.
    write_u32(&e, ORDER_TABLE, order_key(1, 6, 20), order::OL_CNT, |v| v + 1);
    write_u32(&e, ORDER_TABLE, order_key(1, 6, 21), order::OL_CNT, |v| v - 1);
    assert_check_fails(&w, &e, "condition 6");
}

#[test]
fn name_index_entry_missing() {
    let (w, e) = setup();
    let t = common::table(&e, CUSTOMER_NAME_TABLE);
    let key = common::first_keys(&e, t, customer_name_key(1, 7, 0, 0), 1)[0];
    delete(&e, CUSTOMER_NAME_TABLE, key);
    assert_check_fails(&w, &e, "name index");
}

#[test]
fn order_index_entry_missing() {
    let (w, e) = setup();
    let t = common::table(&e, ORDER_CUSTOMER_TABLE);
    let key = common::first_keys(&e, t, order_customer_key(1, 8, 1, u32::MAX), 1)[0];
    delete(&e, ORDER_CUSTOMER_TABLE, key);
    assert_check_fails(&w, &e, "order index");
}

#[test]
fn lost_order_fails_ack_verification() {
    let (w, e) = setup();
    let orders = common::table(&e, ORDER_TABLE);
    let row = read(&e, orders, order_key(1, 1, 5)).unwrap();
    let ol_cnt = u32::from_le_bytes(row[order::OL_CNT..order::OL_CNT + 4].try_into().unwrap());
    let ok = Ack { table: orders, key: order_key(1, 1, 5), value: ol_cnt as u64 };
    w.verify_acks(&e, &[ok]).unwrap();
    let lost = Ack { table: orders, key: order_key(1, 1, 100_000), value: 5 };
    assert!(w.verify_acks(&e, &[lost]).unwrap_err().contains("lost"));
    // A delivery ack for an order that is still undelivered.
    let o = oldest_new_order(&e, 1);
    let new_order = common::table(&e, NEW_ORDER_TABLE);
    let undelivered = Ack { table: new_order, key: order_key(1, 1, o), value: 3 };
    assert!(w.verify_acks(&e, &[undelivered]).unwrap_err().contains("undelivered"));
}

//! Committed rows survive `shutdown` and reopening; aborted ones do not. Would catch a peer that
//! acknowledges commits it never made durable, or loses its table catalog across a reopen.

mod common;

use common::open;
use peers::{PeerDurability, PEERS};
use std::collections::BTreeMap;
use storage::{DbError, Engine, TableSpec};

fn row(key: u64, salt: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (key as u8).wrapping_mul(13) ^ (i as u8) ^ salt).collect()
}

fn rows(engine: &dyn Engine, table: u32) -> BTreeMap<u64, Vec<u8>> {
    let mut txn = engine.begin(0).expect("begin");
    let mut seen = BTreeMap::new();
    txn.scan(table, 0, u64::MAX, usize::MAX, &mut |k, r| {
        seen.insert(k, r.to_vec());
        true
    })
    .expect("scan");
    txn.commit().expect("commit");
    seen
}

/// Writes, commits, aborts, shuts down; returns the expected contents of both tables.
fn populate(engine: &dyn Engine) -> [BTreeMap<u64, Vec<u8>>; 2] {
    let specs = [
        TableSpec { name: "accounts".into(), row_bytes: 100, expected_rows: 500 },
        TableSpec { name: "history".into(), row_bytes: 16, expected_rows: 500 },
    ];
    for (i, s) in specs.iter().enumerate() {
        assert_eq!(engine.create_table(s).expect("create_table"), i as u32);
    }
    let mut model = [BTreeMap::new(), BTreeMap::new()];
    let mut txn = engine.begin(0).expect("begin");
    for k in 0..300u64 {
        let key = k * 7 + (k % 3) * (1 << 62);
        txn.insert(0, key, &row(key, 0, 100)).expect("insert");
        model[0].insert(key, row(key, 0, 100));
        txn.insert(1, k, &row(k, 1, 16)).expect("insert");
        model[1].insert(k, row(k, 1, 16));
    }
    let token = txn.commit().expect("commit");
    engine.wait_durable(token).expect("wait_durable");

    let mut txn = engine.begin(0).expect("begin");
    for k in (0..300u64).step_by(5) {
        assert!(txn.update(1, k, 4, &[0xEE; 8]).expect("update"));
        model[1].get_mut(&k).expect("row")[4..12].copy_from_slice(&[0xEE; 8]);
        if k % 2 == 0 {
            assert!(txn.delete(1, k + 1).expect("delete"));
            model[1].remove(&(k + 1));
        }
    }
    let token = txn.commit().expect("commit");
    engine.wait_durable(token).expect("wait_durable");

    let mut txn = engine.begin(0).expect("begin");
    txn.insert(1, 10_000, &row(1, 9, 16)).expect("insert");
    assert!(txn.update(1, 0, 0, &[1; 16]).expect("update"));
    txn.abort().expect("abort");
    // The last commit is left to shutdown to make durable.
    let mut txn = engine.begin(0).expect("begin");
    txn.insert(1, 20_000, &row(2, 9, 16)).expect("insert");
    model[1].insert(20_000, row(2, 9, 16));
    txn.commit().expect("commit");
    engine.shutdown().expect("shutdown");
    model
}

fn reopen_keeps_rows(peer: &str, durability: PeerDurability) {
    let dir = common::scratch();
    let path = dir.path().join(peer);
    std::fs::create_dir(&path).unwrap();
    let engine = open(peer, &path, durability, 2).expect("open");
    assert!(engine.recovery_report().formatted, "{peer}: a new directory is formatted");
    let model = populate(&*engine);
    drop(engine);

    let engine = open(peer, &path, durability, 2).expect("reopen");
    let report = engine.recovery_report();
    assert!(!report.formatted, "{peer}: reopen must not format");
    assert_eq!(engine.table("accounts"), Some(0));
    assert_eq!(engine.table("history"), Some(1));
    assert_eq!(engine.tables().len(), 2);
    assert_eq!(engine.tables()[1].row_bytes, 16);
    for (table, want) in model.iter().enumerate() {
        assert_eq!(&rows(&*engine, table as u32), want, "{peer}: table {table} after reopen");
    }
    let integrity = engine.check_integrity().expect("check_integrity");
    assert_eq!(integrity.tables, 2);
    assert_eq!(integrity.rows, (model[0].len() + model[1].len()) as u64);
    // New writes after reopen work and land after the old ones.
    let mut txn = engine.begin(1).expect("begin");
    txn.insert(0, u64::MAX, &row(5, 5, 100)).expect("insert");
    txn.commit().expect("commit");
    engine.shutdown().expect("shutdown");
}

#[test]
fn durable_peers_keep_committed_rows() {
    for peer in PEERS {
        reopen_keeps_rows(peer, PeerDurability::Durable);
    }
}

#[test]
fn relaxed_peers_keep_rows_after_clean_shutdown() {
    for peer in PEERS {
        reopen_keeps_rows(peer, PeerDurability::Relaxed);
    }
}

#[test]
fn a_directory_belongs_to_one_peer() {
    let dir = common::scratch();
    let engine = open("sqlite", dir.path(), PeerDurability::Durable, 1).expect("open");
    engine.shutdown().expect("shutdown");
    drop(engine);
    match open("lmdb", dir.path(), PeerDurability::Durable, 1) {
        Err(DbError::Format(_)) => {}
        Err(e) => panic!("opening a sqlite directory as lmdb: want Format, got {e}"),
        Ok(_) => panic!("opening a sqlite directory as lmdb must fail"),
    }
    match open("nosuch", dir.path(), PeerDurability::Durable, 1) {
        Err(DbError::Invalid(_)) => {}
        Err(e) => panic!("unknown peer: want Invalid, got {e}"),
        Ok(_) => panic!("an unknown peer must not open"),
    }
}

#[test]
fn workers_are_bounded_and_run_one_transaction_each() {
    for peer in PEERS {
        let dir = common::scratch();
        let engine = open(peer, dir.path(), PeerDurability::Durable, 2).expect("open");
        assert!(matches!(engine.begin(2), Err(DbError::Invalid(_))), "{peer}: worker 2 of 2");
        let first = engine.begin(1).expect("begin");
        assert!(
            matches!(engine.begin(1), Err(DbError::Invalid(_))),
            "{peer}: a second transaction on worker 1"
        );
        drop(first);
        engine.begin(1).expect("worker 1 is free again").commit().expect("commit");
        assert!(engine.region().is_none());
        engine.shutdown().expect("shutdown");
    }
}

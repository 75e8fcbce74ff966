//! Guards the error a library user sees when a transaction keeps conflicting (issue 39: it
//! named an internal table id and key and said "retry it" after 200 retries, and was not
//! retryable): it names the user's table and the `DbOptions` field to raise, names no engine
//! table or key, and stays retryable, for closures and for held write handles.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbError, DbOptions, RetryOptions};
use std::time::Duration;

/// A database whose catalog root node is exclusively locked by an engine transaction on slot 2
/// (the table layer uses slots 0 and 1), and that engine transaction.
fn db_with_catalog_locked(retry: RetryOptions) -> Db {
    let region = nvmdb::pmem::Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    let mut engine_options = DbOptions::default().engine_options;
    engine_options.workers = 3;
    let engine = nvmdb::engines::open("inplace", region, &engine_options).unwrap();
    let db = Db::from_engine(engine, 2, retry);
    db.write(|tx| tx.open_table::<u64>("accounts")?.insert(1, b"x")).unwrap();
    db
}

/// Runs `f` while an engine transaction holds an exclusive lock on the catalog's root node.
fn with_catalog_locked<T>(db: &Db, f: impl FnOnce() -> T) -> T {
    let nodes = db.engine().table("nvmdb.nodes").expect("the layer's node table");
    let mut holder = db.engine().begin(2).unwrap();
    let mut row = Vec::new();
    assert!(holder.read(nodes, 0, &mut row).unwrap());
    assert!(holder.update(nodes, 0, 0, &row[..8]).unwrap());
    let out = f();
    holder.abort().unwrap();
    out
}

/// No engine table id, node key or engine table name in a user-facing message.
fn assert_no_engine_internals(msg: &str) {
    assert!(!msg.contains("nvmdb.nodes"), "an engine table leaked: {msg}");
    assert!(!msg.contains("lock conflict on table"), "the engine's text leaked: {msg}");
    assert!(!msg.contains(" key 0"), "an engine node key leaked: {msg}");
}

#[test]
fn a_persistent_conflict_names_the_users_table_and_the_retry_option() {
    let retry = RetryOptions {
        max_attempts: 3,
        backoff_first: Duration::from_micros(10),
        backoff_max: Duration::from_micros(100),
    };
    let db = db_with_catalog_locked(retry);
    let err = with_catalog_locked(&db, || {
        db.write(|tx| tx.open_table::<u64>("accounts")?.insert(2, b"y")).unwrap_err()
    });
    let msg = err.to_string();
    assert!(msg.contains("table `accounts`"), "{msg}");
    assert!(msg.contains("after 3 attempts"), "{msg}");
    assert!(msg.contains("DbOptions::retry.max_attempts"), "{msg}");
    assert_no_engine_internals(&msg);
    assert!(err.is_retryable(), "a conflict stays retryable: {err:?}");
    // Once the lock is gone the same write succeeds.
    db.write(|tx| tx.open_table::<u64>("accounts")?.insert(2, b"y")).unwrap();
}

#[test]
fn a_held_write_handles_conflict_names_the_users_table_and_the_retry_option() {
    let db = db_with_catalog_locked(RetryOptions::default());
    let tx = db.begin_write().unwrap();
    let (op, commit) = with_catalog_locked(&db, || {
        let op = tx.open_table::<u64>("accounts").map(drop).unwrap_err();
        (op, tx.commit().unwrap_err())
    });
    for err in [op, commit] {
        let msg = err.to_string();
        assert!(matches!(err, DbError::Peer { engine: "nvmdb", .. }), "{err:?}");
        assert!(msg.contains("table `accounts`"), "{msg}");
        assert!(msg.contains("DbOptions::retry"), "{msg}");
        assert_no_engine_internals(&msg);
        assert!(err.is_retryable(), "a conflict stays retryable: {err:?}");
    }
    // The rolled-back handle left nothing behind: a new one writes.
    let tx = db.begin_write().unwrap();
    tx.open_table::<u64>("accounts").unwrap().insert(3, b"z").unwrap();
    tx.commit().unwrap();
}

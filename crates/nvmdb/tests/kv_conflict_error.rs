//! Guards the error a library user sees when a transaction keeps conflicting (issue 39: it
//! named an internal table id and said "retry it" after 200 retries): it says how many
//! attempts were made and which `DbOptions` field to raise, and names no engine table.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbOptions, RetryOptions};
use std::time::Duration;

#[test]
fn a_persistent_conflict_names_the_retry_option_not_a_table_id() {
    let region = nvmdb::pmem::Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    let mut engine_options = DbOptions::default().engine_options;
    engine_options.workers = 3;
    let engine = nvmdb::engines::open("inplace", region, &engine_options).unwrap();
    let retry = RetryOptions {
        max_attempts: 3,
        backoff_first: Duration::from_micros(10),
        backoff_max: Duration::from_micros(100),
    };
    // The table layer uses slots 0 and 1; slot 2 is ours.
    let db = Db::from_engine(engine, 2, retry);
    db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x")).unwrap();
    // Hold an exclusive lock on the catalog's root node for the whole attempt.
    let nodes = db.engine().table("nvmdb.nodes").expect("the layer's node table");
    let mut holder = db.engine().begin(2).unwrap();
    let mut row = Vec::new();
    assert!(holder.read(nodes, 0, &mut row).unwrap());
    assert!(holder.update(nodes, 0, 0, &row[..8]).unwrap());
    let err = db.write(|tx| tx.open_table::<u64>("t")?.insert(2, b"y")).unwrap_err();
    holder.abort().unwrap();
    let msg = err.to_string();
    assert!(msg.contains("after 3 attempts"), "{msg}");
    assert!(msg.contains("DbOptions::retry.max_attempts"), "{msg}");
    assert!(!msg.contains("table "), "an engine table id leaked: {msg}");
    // Once the lock is gone the same write succeeds.
    db.write(|tx| tx.open_table::<u64>("t")?.insert(2, b"y")).unwrap();
}

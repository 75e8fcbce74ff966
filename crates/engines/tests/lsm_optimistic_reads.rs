//! `lsm` point reads write nothing shared (issue 35): a read-only transaction makes no
//! lock-table request, takes no shard mutex, no engine-wide lock and bumps no shared counter
//! (counted), whether its rows are in the memtable or in runs; a writer is never blocked by a
//! reader, and a read overwritten before its transaction commits makes that commit fail.
//! Would catch: reads that take shared key locks or the engine-wide state lock again (each a
//! write to a cache line every thread shares), or reads not validated before the commit point.

use engines::{lsm::Lsm, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::lock::{lock_table_requests, shard_locks_taken};
use storage::{Engine, TableSpec};

/// 2,000 rows (even keys), a memtable small enough that most are in runs.
fn db() -> (Lsm, u32) {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 2, ..Default::default() };
    opts.lsm.memtable_bytes = 64 << 10;
    let db = Lsm::open(region, &opts).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    for chunk in 0..20u64 {
        let mut txn = db.begin(0).expect("begin");
        for key in chunk * 100..(chunk + 1) * 100 {
            txn.insert(t, key * 2, &key.to_le_bytes().repeat(2)).expect("insert");
        }
        txn.commit().expect("commit");
    }
    (db, t)
}

fn counter(db: &Lsm, name: &str) -> u64 {
    db.activity().into_iter().find(|a| a.0 == name).map_or(0, |a| a.1)
}

#[test]
fn a_read_only_lsm_transaction_takes_no_lock_and_writes_nothing_shared() {
    let (db, t) = db();
    assert!(counter(&db, "memtable_flushes") > 0, "every row still in the memtable");
    let (requests, shards) = (lock_table_requests(), shard_locks_taken());
    let shared = ["shared_lock_acquires", "shared_counter_rmws"].map(|c| counter(&db, c));
    let optimistic = counter(&db, "optimistic_reads");
    // Both workers: each has its own reader word.
    for worker in 0..2 {
        let mut txn = db.begin(worker).unwrap();
        let mut row = Vec::new();
        for key in 0..4000u64 {
            let found = txn.read(t, key, &mut row).unwrap();
            assert_eq!(found, key % 2 == 0, "key {key}");
            if found {
                assert_eq!(row, (key / 2).to_le_bytes().repeat(2));
            }
        }
        txn.commit().unwrap();
    }
    assert_eq!(lock_table_requests(), requests, "reads went to the lock table");
    assert_eq!(shard_locks_taken(), shards, "reads took lock-table shard mutexes");
    let after = ["shared_lock_acquires", "shared_counter_rmws"].map(|c| counter(&db, c));
    assert_eq!(after, shared, "begin, reads or commit wrote an engine-wide lock or counter");
    assert_eq!(counter(&db, "optimistic_reads") - optimistic, 8000);
}

#[test]
fn a_read_write_lsm_transaction_whose_read_was_overwritten_fails_its_commit() {
    let (db, t) = db();
    let mut row = Vec::new();
    // The reader reads key 10 and writes another key; a writer overtakes the read (not blocked
    // by it) and commits first.
    let mut reader = db.begin(0).unwrap();
    assert!(reader.read(t, 10, &mut row).unwrap());
    assert!(reader.update(t, 12, 0, &[5; 8]).unwrap());
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 10, 0, &[9; 8]).unwrap(), "a reader blocked the writer");
    writer.commit().unwrap();
    let failures = counter(&db, "validation_failures");
    assert!(reader.commit().unwrap_err().is_retryable(), "a stale read committed (write skew)");
    assert!(counter(&db, "validation_failures") > failures);
    // Its write was not applied; the writer's was.
    let mut check = db.begin(0).unwrap();
    assert!(check.read(t, 12, &mut row).unwrap());
    assert_eq!(row, 6u64.to_le_bytes().repeat(2), "an aborted commit's write is visible");
    assert!(check.read(t, 10, &mut row).unwrap());
    assert_eq!(&row[..8], &[9; 8]);
    check.commit().unwrap();
    // A later read of the same transaction revalidates too (it never sees two moments).
    let mut reader = db.begin(0).unwrap();
    assert!(reader.read(t, 20, &mut row).unwrap());
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 20, 0, &[8; 8]).unwrap());
    writer.commit().unwrap();
    assert!(reader.read(t, 22, &mut row).unwrap_err().is_retryable());
    drop(reader);
    // A reader whose keys nobody wrote commits beside a writer of other keys.
    let mut reader = db.begin(0).unwrap();
    assert!(reader.read(t, 30, &mut row).unwrap());
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 32, 0, &[7; 8]).unwrap());
    writer.commit().unwrap();
    reader.commit().unwrap();
}

#[test]
fn an_lsm_read_modify_write_loses_no_update() {
    let (db, t) = db();
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut a = db.begin(0).unwrap();
    let mut b = db.begin(1).unwrap();
    a.read(t, 0, &mut ra).unwrap();
    b.read(t, 0, &mut rb).unwrap();
    assert!(a.update(t, 0, 0, &[1; 8]).unwrap());
    // b (younger) waits for a's lock, bounded, then dies; once a commits, b's read is stale.
    assert!(b.update(t, 0, 0, &[2; 8]).unwrap_err().is_retryable());
    a.commit().unwrap();
    assert!(b.update(t, 0, 0, &[2; 8]).unwrap_err().is_retryable(), "lost update allowed");
    drop(b);
    // An aborted writer leaves the versions as they were: a read before it stays valid.
    let mut reader = db.begin(0).unwrap();
    assert!(reader.read(t, 40, &mut ra).unwrap());
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 40, 0, &[3; 8]).unwrap());
    writer.abort().unwrap();
    reader.commit().unwrap();
}

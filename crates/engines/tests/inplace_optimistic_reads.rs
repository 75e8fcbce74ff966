//! A read-only transaction writes nothing shared (issue 35): no lock-table request, no page
//! latch; a writer is never blocked by a reader, and the reader it overtook fails validation.
//! Would catch: a read path that takes key locks or latches again (each one a write to a cache
//! line every thread shares), or reads that are not validated before the commit point.

use engines::{inplace::InPlace, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::lock::lock_table_requests;
use storage::pages::shared_latches_taken;
use storage::{Engine, TableSpec};

fn db() -> (InPlace, u32) {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).expect("dram region");
    let db = InPlace::open(region, &EngineOptions { workers: 2, ..Default::default() }).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut txn = db.begin(0).expect("begin");
    for key in 0..2000u64 {
        txn.insert(t, key * 2, &key.to_le_bytes().repeat(2)).expect("insert");
    }
    txn.commit().expect("commit");
    (db, t)
}

fn counter(db: &InPlace, name: &str) -> u64 {
    db.activity().into_iter().find(|a| a.0 == name).map_or(0, |a| a.1)
}

#[test]
fn a_read_only_transaction_takes_no_lock_and_no_latch() {
    let (db, t) = db();
    let (requests, latches) = (lock_table_requests(), shared_latches_taken());
    let optimistic = counter(&db, "optimistic_reads");
    let mut txn = db.begin(0).unwrap();
    let mut row = Vec::new();
    for key in 0..4000u64 {
        let found = txn.read(t, key, &mut row).unwrap();
        assert_eq!(found, key % 2 == 0, "key {key}");
        if found {
            assert_eq!(row, (key / 2).to_le_bytes().repeat(2));
        }
    }
    txn.commit().unwrap();
    assert_eq!(lock_table_requests(), requests, "reads went to the lock table");
    assert_eq!(shared_latches_taken(), latches, "reads took page latches");
    assert_eq!(counter(&db, "optimistic_reads") - optimistic, 4000);
}

#[test]
fn a_writer_overtakes_a_reader_and_the_reader_fails_validation() {
    let (db, t) = db();
    let mut reader = db.begin(0).unwrap();
    let mut row = Vec::new();
    assert!(reader.read(t, 10, &mut row).unwrap());
    // The writer is not blocked by the read (no-wait 2PL with a shared lock refused it).
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 10, 0, &[9; 8]).unwrap());
    writer.commit().unwrap();
    // Any later read revalidates, and so does the commit.
    assert!(reader.read(t, 12, &mut row).unwrap_err().is_retryable());
    assert!(reader.commit().unwrap_err().is_retryable(), "a stale read committed");
    let failures = counter(&db, "validation_failures");
    assert!(failures >= 2, "{failures} validation failures counted");
    // A reader whose keys nobody wrote commits.
    let mut reader = db.begin(0).unwrap();
    assert!(reader.read(t, 20, &mut row).unwrap());
    let mut writer = db.begin(1).unwrap();
    assert!(writer.update(t, 22, 0, &[9; 8]).unwrap());
    writer.commit().unwrap();
    reader.commit().unwrap();
}

#[test]
fn a_read_then_write_loses_no_update() {
    // Two read-modify-writes of one counter, interleaved: the second to commit must fail.
    let (db, t) = db();
    let mut a = db.begin(0).unwrap();
    let mut b = db.begin(1).unwrap();
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    a.read(t, 0, &mut ra).unwrap();
    b.read(t, 0, &mut rb).unwrap();
    assert!(a.update(t, 0, 0, &[1; 8]).unwrap());
    // b's write conflicts with a's lock (no-wait); after a commits, b's read is stale.
    assert!(b.update(t, 0, 0, &[2; 8]).unwrap_err().is_retryable());
    a.commit().unwrap();
    drop(b);
    let mut b = db.begin(1).unwrap();
    b.read(t, 0, &mut rb).unwrap();
    assert_eq!(&rb[..8], &[1; 8]);
    b.commit().unwrap();
}

/// `wal` and `group` run `inplace` on a staging copy: their reads are optimistic too, and their
/// activity reports the lock table's counters (issue 35: contention as numbers in bench rows).
#[test]
fn wal_and_group_reads_are_optimistic_and_counted() {
    for name in ["wal", "group"] {
        let options = EngineOptions { workers: 2, ..Default::default() };
        let bytes = engines::min_region_bytes(name, &options).unwrap() + (8 << 20);
        let region = Region::open(&RegionOptions::new(Medium::Dram, bytes)).expect("dram region");
        let db: Box<dyn Engine> = match name {
            "wal" => Box::new(engines::wal::Wal::open(region, &options).unwrap()),
            _ => Box::new(engines::group::Group::open(region, &options).unwrap()),
        };
        let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 0 };
        let t = db.create_table(&spec).unwrap();
        let mut txn = db.begin(0).unwrap();
        for key in 0..100u64 {
            txn.insert(t, key, &[7; 16]).unwrap();
        }
        let token = txn.commit().unwrap();
        db.wait_durable(token).unwrap();
        let requests = lock_table_requests();
        let mut txn = db.begin(0).unwrap();
        let mut row = Vec::new();
        for key in 0..100u64 {
            assert!(txn.read(t, key, &mut row).unwrap(), "{name}: key {key}");
        }
        txn.commit().unwrap();
        assert_eq!(lock_table_requests(), requests, "{name}: reads went to the lock table");
        let activity: std::collections::BTreeMap<_, _> = db.activity().into_iter().collect();
        assert!(
            activity.get("optimistic_reads").is_some_and(|&n| n >= 100),
            "{name}: {activity:?}"
        );
        assert!(activity.contains_key("lock_waits"), "{name}: {activity:?}");
    }
}

/// A read of a key the transaction itself wrote is counted as `reads_own_lock`, not as the
/// contention counter `reads_locked` (issue 35: the 16-core table read `reads_locked` as other
/// transactions' writers in the way); a read that meets another transaction's write is.
#[test]
fn reading_its_own_write_is_not_counted_as_contention() {
    let (db, t) = db();
    let (locked, own) = (counter(&db, "reads_locked"), counter(&db, "reads_own_lock"));
    let mut txn = db.begin(0).unwrap();
    let mut row = Vec::new();
    assert!(txn.update(t, 20, 0, &[7; 8]).unwrap());
    assert!(txn.read(t, 20, &mut row).unwrap());
    assert_eq!(&row[..8], &[7; 8]);
    assert_eq!(counter(&db, "reads_own_lock") - own, 1);
    assert_eq!(counter(&db, "reads_locked") - locked, 0);
    let mut other = db.begin(1).unwrap();
    assert!(other.read(t, 20, &mut row).is_err(), "another's write: no-wait conflict");
    assert_eq!(counter(&db, "reads_locked") - locked, 1);
    drop(other);
    txn.commit().unwrap();
}

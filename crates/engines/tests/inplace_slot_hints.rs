//! `inplace`'s slot hints (`--engine-opt index_hints`): a worker's guesses of where keys' rows
//! are, checked against the slot before use. Would catch: a hinted read that returns a row the
//! key no longer has (deleted, re-inserted elsewhere, or its slot reused for another key,
//! by another worker or by the transaction itself), hints that are never used (the index
//! searched on every read anyway), or hints left on where the papers' engines are reproduced.

use engines::inplace::InPlace;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use storage::{Engine, TableId, TableSpec};

fn open(hints: bool) -> InPlace {
    open_timed(Some(hints), TimingOptions::default())
}

/// With `timing.read_ns` > 0 the read model counts index latches (`activity`).
fn open_timed(hints: Option<bool>, timing: TimingOptions) -> InPlace {
    let region =
        Region::open(&RegionOptions { timing, ..RegionOptions::new(Medium::Dram, 16 << 20) })
            .expect("region");
    let mut opts = EngineOptions { workers: 2, node_capacity: 8, ..Default::default() };
    if let Some(on) = hints {
        opts.inplace.index_hints = on;
    }
    InPlace::open(region, &opts).expect("open")
}

fn table(db: &InPlace) -> TableId {
    db.create_table(&TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 0 })
        .expect("table")
}

fn read(db: &InPlace, worker: usize, t: TableId, key: u64) -> Option<Vec<u8>> {
    let mut txn = db.begin(worker).expect("begin");
    let mut out = Vec::new();
    let found = txn.read(t, key, &mut out).expect("read");
    txn.commit().expect("commit");
    found.then_some(out)
}

fn write(db: &InPlace, worker: usize, f: impl FnOnce(&mut dyn storage::Txn)) {
    let mut txn = db.begin(worker).expect("begin");
    f(txn.as_mut());
    txn.commit().expect("commit");
}

fn index_latches(db: &InPlace) -> u64 {
    db.activity().into_iter().find(|(k, _)| *k == "index_latches").map_or(0, |(_, v)| v)
}

#[test]
fn a_hinted_read_does_not_search_the_index_and_without_hints_every_read_does() {
    // `None`: the defaults.
    for (hints, searched) in [(Some(true), false), (Some(false), true), (None, true)] {
        let db = open_timed(hints, TimingOptions { read_ns: 1, ..Default::default() });
        let t = table(&db);
        write(&db, 0, |txn| {
            for key in 0..200u64 {
                txn.insert(t, key, &[key as u8; 64]).unwrap();
            }
        });
        assert_eq!(read(&db, 0, t, 77), Some(vec![77; 64]));
        let before = index_latches(&db);
        assert!(before > 0, "the read model counts");
        assert_eq!(read(&db, 0, t, 77), Some(vec![77; 64]));
        let after = index_latches(&db);
        assert_eq!(after > before, searched, "{hints:?}: index latches {before} -> {after}");
        // Hints are the worker's own: another worker's first read searches the index.
        assert_eq!(read(&db, 1, t, 77), Some(vec![77; 64]));
        assert!(index_latches(&db) > after, "{hints:?}: {after} -> {}", index_latches(&db));
    }
}

#[test]
fn another_workers_delete_reinsert_and_slot_reuse_never_return_a_stale_row() {
    let db = open(true);
    let t = table(&db);
    write(&db, 1, |txn| {
        for key in 0..100u64 {
            txn.insert(t, key, &[1; 64]).unwrap();
        }
    });
    assert_eq!(read(&db, 0, t, 5), Some(vec![1; 64]), "worker 0 now hints key 5");
    // Deleted and inserted again, elsewhere: the old slot is free.
    write(&db, 1, |txn| assert!(txn.delete(t, 5).unwrap()));
    assert_eq!(read(&db, 0, t, 5), None, "a deleted key's freed slot is not its row");
    write(&db, 1, |txn| txn.insert(t, 5, &[2; 64]).unwrap());
    assert_eq!(read(&db, 0, t, 5), Some(vec![2; 64]));
    // Key 6's slot freed and taken by a new key (worker 1's slot cache hands it out next).
    assert_eq!(read(&db, 0, t, 6), Some(vec![1; 64]));
    write(&db, 1, |txn| assert!(txn.delete(t, 6).unwrap()));
    write(&db, 1, |txn| txn.insert(t, 1_000, &[3; 64]).unwrap());
    assert_eq!(read(&db, 0, t, 6), None, "the slot now holds key 1000");
    assert_eq!(read(&db, 0, t, 1_000), Some(vec![3; 64]));
    // An update through a hint writes the key's row, not the old slot.
    write(&db, 0, |txn| assert!(txn.update(t, 5, 0, &[4; 8]).unwrap()));
    let mut want = vec![2; 64];
    want[..8].copy_from_slice(&[4; 8]);
    assert_eq!(read(&db, 1, t, 5), Some(want));
    assert!(db.check_integrity().is_ok());
}

#[test]
fn a_transaction_that_deletes_and_reinserts_a_key_reads_its_new_row() {
    let db = open(true);
    let t = table(&db);
    write(&db, 0, |txn| txn.insert(t, 9, &[1; 64]).unwrap());
    assert_eq!(read(&db, 0, t, 9), Some(vec![1; 64]));
    // The old slot still holds key 9, used, until this commit frees it.
    let mut txn = db.begin(0).expect("begin");
    let mut out = Vec::new();
    assert!(txn.read(t, 9, &mut out).unwrap());
    assert!(txn.delete(t, 9).unwrap());
    assert!(!txn.read(t, 9, &mut out).unwrap(), "deleted in this transaction");
    txn.insert(t, 9, &[2; 64]).unwrap();
    assert!(txn.read(t, 9, &mut out).unwrap());
    assert_eq!(out, vec![2; 64]);
    assert!(txn.update(t, 9, 8, &[3; 8]).unwrap());
    txn.commit().expect("commit");
    let mut want = vec![2; 64];
    want[8..16].copy_from_slice(&[3; 8]);
    assert_eq!(read(&db, 0, t, 9), Some(want.clone()));
    assert_eq!(read(&db, 1, t, 9), Some(want));
    // Rolled back: the key's row is the committed one again.
    let mut txn = db.begin(0).expect("begin");
    assert!(txn.delete(t, 9).unwrap());
    txn.insert(t, 9, &[5; 64]).unwrap();
    assert!(txn.read(t, 9, &mut out).unwrap());
    txn.abort().expect("abort");
    assert_eq!(read(&db, 0, t, 9).map(|r| r[0]), Some(2));
    assert!(db.check_integrity().is_ok());
}

//! `wal` recovery on `sim` crash images: committed work survives (redo), a transaction in
//! flight at the crash is rolled back (undo), also across checkpoints and after the log wraps
//! around its area many times; a crash right after recovery recovers the same state.
//! Would catch: redo that misses records, a checkpoint that truncates needed log, a wrap-around
//! bug, or a recovery whose work is not durable when open returns.

use engines::wal::Wal;
use engines::EngineOptions;
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

fn options() -> EngineOptions {
    EngineOptions {
        workers: 1,
        node_capacity: 8,
        wal: engines::wal::Options { log_bytes: 6 << 20, max_dirty_pages: 0, ..Default::default() },
        ..Default::default()
    }
}

fn reopen(image: &[u8]) -> (Region, Wal) {
    let region = Region::from_image(image, &RegionOptions::default()).unwrap();
    let engine = Wal::open(region.clone(), &options()).unwrap();
    (region, engine)
}

fn value(e: &Wal, key: u64) -> Option<u64> {
    let t = e.table("t").unwrap();
    let mut txn = e.begin(0).unwrap();
    let mut out = Vec::new();
    let found = txn.read(t, key, &mut out).unwrap();
    txn.commit().unwrap();
    found.then(|| u64::from_le_bytes(out[..8].try_into().unwrap()))
}

#[test]
fn commits_survive_and_the_transaction_in_flight_rolls_back_after_log_wraps() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 32 << 20)).unwrap();
    let e = Wal::open(region.clone(), &options()).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    // Many small commits: the 6 MiB log wraps several times, with checkpoints in between.
    for round in 0..70000u64 {
        let mut txn = e.begin(0).unwrap();
        let key = round % 200;
        let mut row = [0u8; 64];
        row[..8].copy_from_slice(&round.to_le_bytes());
        if !txn.update(t, key, 0, &row[..8]).unwrap() {
            txn.insert(t, key, &row).unwrap();
        }
        txn.commit().unwrap();
    }
    let (checkpoints, _, _, _, forced) = e.totals();
    assert!(forced > 2 * (6 << 20), "the log wrapped: {forced} bytes forced");
    assert!(checkpoints > 2, "{checkpoints} checkpoints");
    // In flight at the crash: updates and an insert, never committed.
    let mut open = e.begin(0).unwrap();
    for key in 0..50 {
        assert!(open.update(t, key, 0, &u64::MAX.to_le_bytes()).unwrap());
    }
    // Steal: a checkpoint writes its uncommitted pages (and its undo log) to NVRAM.
    e.checkpoint().unwrap();
    open.insert(t, 5000, &[7u8; 64]).unwrap();
    let image = region.crash_image(CrashPolicy::Evict, 3).unwrap();
    drop(open);

    let (again, recovered) = reopen(&image);
    assert_eq!(recovered.recovery_report().txns_rolled_back, 1);
    for key in 0..200u64 {
        let last = (0..70000u64).filter(|r| r % 200 == key).max().unwrap();
        assert_eq!(value(&recovered, key), Some(last), "key {key}");
    }
    assert_eq!(value(&recovered, 5000), None);
    recovered.check_integrity().unwrap();

    // A crash right after recovery: the same state comes back.
    let image = again.crash_image(CrashPolicy::Persisted, 4).unwrap();
    let (_, twice) = reopen(&image);
    assert_eq!(value(&twice, 199), Some(69999));
    assert_eq!(value(&twice, 5000), None);
    twice.check_integrity().unwrap();
}

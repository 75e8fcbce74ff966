//! `wal` with a distributed log (Wang & Johnson, VLDB 2014): a region keeps the log layout it
//! was formatted with, and opening it with another is a clear error, never a panic; commits on
//! every layout survive a clean reopen and a damaged layout line is `Corrupt`.
//! Would catch: a layout line that is not checked on open, or logs read with the wrong geometry.

use engines::wal::{Cache, LogLayout, Wal};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::{DbError, Engine, TableSpec};

fn options(log: LogLayout, cache: Cache) -> EngineOptions {
    EngineOptions {
        workers: 1,
        node_capacity: 8,
        log_bytes: 24 << 20,
        max_dirty_pages: 0,
        log,
        cache,
        ..Default::default()
    }
}

fn commit_rows(e: &Wal, from: u64, n: u64) {
    let t = e.table("t").unwrap();
    for key in from..from + n {
        let mut txn = e.begin(0).unwrap();
        txn.insert(t, key, &key.to_le_bytes()).unwrap();
        let token = txn.commit().unwrap();
        e.wait_durable(token).unwrap();
    }
}

fn rows(e: &Wal) -> usize {
    let t = e.table("t").unwrap();
    let mut txn = e.begin(0).unwrap();
    let n = txn.scan(t, 0, u64::MAX, usize::MAX, &mut |_, _| true).unwrap();
    txn.commit().unwrap();
    n
}

#[test]
fn every_layout_keeps_its_commits_across_a_reopen() {
    for (log, cache) in [
        (LogLayout::Central, Cache::Volatile),
        (LogLayout::Txn(3), Cache::Volatile),
        (LogLayout::Page(4), Cache::Volatile),
        (LogLayout::Page(2), Cache::Durable),
    ] {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
        {
            let e = Wal::open(region.clone(), &options(log, cache)).unwrap();
            let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 100 };
            e.create_table(&spec).unwrap();
            commit_rows(&e, 0, 300);
        }
        let e = Wal::open(region.clone(), &options(log, cache)).unwrap();
        assert_eq!(rows(&e), 300, "{log} {cache:?}");
        commit_rows(&e, 300, 10);
        assert_eq!(rows(&e), 310, "{log} {cache:?}");
    }
}

#[test]
fn opening_with_another_layout_is_an_error_that_says_which() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    drop(Wal::open(region.clone(), &options(LogLayout::Page(4), Cache::Volatile)).unwrap());
    for (log, cache) in [
        (LogLayout::Central, Cache::Volatile),
        (LogLayout::Txn(4), Cache::Volatile),
        (LogLayout::Page(2), Cache::Volatile),
        (LogLayout::Page(4), Cache::Durable),
    ] {
        match Wal::open(region.clone(), &options(log, cache)) {
            Err(DbError::Invalid(m)) => assert!(m.contains("log=page:4"), "{m}"),
            Err(e) => panic!("{log}: {e}"),
            Ok(_) => panic!("{log} {cache:?} opened a page:4 region"),
        }
    }
    let central = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    drop(Wal::open(central.clone(), &options(LogLayout::Central, Cache::Volatile)).unwrap());
    match Wal::open(central, &options(LogLayout::Txn(2), Cache::Volatile)) {
        Err(DbError::Invalid(m)) => assert!(m.contains("log=central"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("txn:2 opened a central region"),
    }
}

#[test]
fn a_damaged_layout_line_is_corrupt_not_a_panic() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    drop(Wal::open(region.clone(), &options(LogLayout::Txn(2), Cache::Volatile)).unwrap());
    // The line's log count (control page 2, extension at byte 64, count at +16).
    let at = 2 * 8192 + 64 + 16;
    for bad in [0u64, 65, u64::MAX] {
        let copy =
            Region::dram_copy(region.read(0, region.len() as usize), &Default::default()).unwrap();
        copy.write_u64(at, bad);
        match Wal::open(copy, &options(LogLayout::Txn(2), Cache::Volatile)) {
            Err(DbError::Corrupt(_)) => {}
            Err(e) => panic!("{bad}: {e}"),
            Ok(_) => panic!("{bad}: opened"),
        }
    }
}

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
        wal: engines::wal::Options {
            log_bytes: 24 << 20,
            max_dirty_pages: 0,
            log,
            cache,
            ..Default::default()
        },
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

// Offsets in the control page (page 2): the horizon word and the two copies of the redo points,
// each `[seq][point of log 0..N][crc]` (docs/format.md).
const CONTROL: u64 = 2 * 8192;
const HORIZON: u64 = CONTROL + 128;
const REDO_COPIES: [u64; 2] = [CONTROL + 256, CONTROL + 1024];

fn copy_of(region: &Region) -> Region {
    Region::dram_copy(region.read(0, region.len() as usize), &Default::default()).unwrap()
}

/// A txn:2 region with 200 acknowledged rows, closed cleanly.
fn region_with_rows() -> Region {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    let e = Wal::open(region.clone(), &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 100 };
    e.create_table(&spec).unwrap();
    commit_rows(&e, 0, 200);
    drop(e);
    region
}

fn assert_corrupt(copy: Region, what: &str) {
    match Wal::open(copy, &options(LogLayout::Txn(2), Cache::Volatile)) {
        Err(DbError::Corrupt(m)) => assert!(!m.is_empty()),
        Err(e) => panic!("{what}: {e}"),
        Ok(_) => panic!("{what}: opened"),
    }
}

#[test]
fn a_damaged_gsn_horizon_is_corrupt_not_a_panic() {
    let region = region_with_rows();
    let word = region.read_u64(HORIZON);
    assert_ne!(word & ((1 << 48) - 1), 0, "the horizon never moved: the test would prove nothing");
    // A flipped bit in H (low, high) or in its check bits, a zeroed and an all-ones word.
    for (i, bad) in [word ^ 1, word ^ (1 << 40), word ^ (1 << 50), 0, u64::MAX].iter().enumerate() {
        let copy = copy_of(&region);
        copy.write_u64(HORIZON, *bad);
        assert_corrupt(copy, &format!("horizon damage {i}"));
    }
    // The undamaged copy opens: the damage, not the copying, is what fails.
    let e = Wal::open(copy_of(&region), &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    assert_eq!(rows(&e), 200);
}

#[test]
fn a_redo_point_damaged_in_both_copies_is_corrupt_and_in_one_is_survived() {
    let region = region_with_rows();
    // Log 1's redo point (word 2 of each copy), then the sequence number (word 0).
    for word in [2u64, 0] {
        let copy = copy_of(&region);
        for at in REDO_COPIES {
            copy.write_u64(at + 8 * word, copy.read_u64(at + 8 * word) ^ 0x100);
        }
        assert_corrupt(copy, &format!("redo word {word} damaged in both copies"));
        for at in REDO_COPIES {
            let copy = copy_of(&region);
            copy.write_u64(at + 8 * word, copy.read_u64(at + 8 * word) ^ 0x100);
            let e = Wal::open(copy, &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
            assert_eq!(rows(&e), 200, "one copy at {at} damaged");
            let notes = e.recovery_report().notes.join("; ");
            assert!(notes.contains("did not verify"), "{notes}");
        }
    }
}

#[test]
fn a_torn_horizon_update_opens_to_a_correct_state() {
    // The daemon's next horizon did not persist (the word is the hardware's atomic unit, so a
    // torn update leaves the old word): the records above it are retired, the state is the
    // consistent one the old horizon describes, and nothing fails.
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    let e = Wal::open(region.clone(), &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 100 };
    e.create_table(&spec).unwrap();
    commit_rows(&e, 0, 100);
    let old_word = region.read_u64(HORIZON);
    commit_rows(&e, 100, 100);
    let image = copy_of(&region);
    drop(e);
    assert_ne!(image.read_u64(HORIZON), old_word, "the horizon did not move");
    image.write_u64(HORIZON, old_word);
    let e = Wal::open(image, &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    e.check_integrity().unwrap();
    let n = rows(&e);
    assert!((100..=200).contains(&n), "{n} rows");
    let notes = e.recovery_report().notes.join("; ");
    assert!(!notes.contains(" 0 records above the GSN horizon"), "nothing retired: {notes}");
}

#[test]
fn a_torn_checkpoint_of_the_redo_points_uses_the_other_copy() {
    // A crash while copy 0 of the redo points was being rewritten: some of its words new, some
    // old, copy 1 still the old set (the logs are truncated only after both copies persist).
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).unwrap();
    let e = Wal::open(region.clone(), &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 100 };
    e.create_table(&spec).unwrap();
    commit_rows(&e, 0, 100);
    let old: Vec<u8> = region.read(REDO_COPIES[1], 32).to_vec();
    e.checkpoint().unwrap();
    let new: Vec<u8> = region.read(REDO_COPIES[0], 32).to_vec();
    assert_ne!(old, new, "the checkpoint did not move the redo points");
    commit_rows(&e, 100, 50);
    let image = copy_of(&region);
    drop(e);
    // Copy 0: its sequence number and log 0's point new, log 1's point and the crc old.
    image.write(REDO_COPIES[0], &new[..16]);
    image.write(REDO_COPIES[0] + 16, &old[16..]);
    image.write(REDO_COPIES[1], &old);
    let e = Wal::open(image, &options(LogLayout::Txn(2), Cache::Volatile)).unwrap();
    e.check_integrity().unwrap();
    assert_eq!(rows(&e), 150);
    let notes = e.recovery_report().notes.join("; ");
    assert!(notes.contains("did not verify"), "{notes}");
}

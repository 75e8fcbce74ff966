//! `cow io=fs` (N-Store's CoW, §3.2) reads its nodes through the file (issue 36): a lookup in
//! the worker's DRAM page cache, `pread` of the page on a miss, as N-Store's file-mode
//! `cow_btree` does. Would catch: node reads that still go through the mapping (no
//! `file_reads`), a page cache that serves a page's contents from before the page was freed
//! and reused (stale rows), and a `pread` charged to the CPU-cache read model differently from
//! the lines it copied.

use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use storage::{Engine, TableSpec};

const PAGE: u64 = storage::format::PAGE_SIZE as u64;

/// A scratch file in /dev/shm, removed on drop (`io=fs` needs a file).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn open(
    name: &str,
    opts: &[(&str, &str)],
    timing: TimingOptions,
) -> (Scratch, Region, Box<dyn Engine>) {
    let pairs: BTreeMap<String, String> =
        opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let base = EngineOptions { workers: 1, ..Default::default() };
    let options = engines::registry::get("cow").unwrap().options(base, &pairs).expect("options");
    let scratch =
        Scratch(PathBuf::from(format!("/dev/shm/nvmdb-cow-io-fs-{}-{name}", std::process::id())));
    let mut region_options = RegionOptions { timing, ..RegionOptions::new(Medium::Shm, 64 << 20) };
    region_options.path = Some(scratch.0.clone());
    let region = Region::open(&region_options).expect("region");
    let db = engines::open("cow", region.clone(), &options).expect("open");
    (scratch, region, db)
}

fn activity(db: &dyn Engine, name: &str) -> u64 {
    db.activity().into_iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| v)
}

fn load(db: &dyn Engine, rows: u64, row_bytes: u32) -> storage::TableId {
    let spec = TableSpec { name: "t".into(), row_bytes, expected_rows: rows };
    let t = db.create_table(&spec).expect("table");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin(0).expect("begin");
        for &key in chunk {
            txn.insert(t, key, &vec![key as u8; row_bytes as usize]).expect("insert");
        }
        txn.commit().expect("commit");
    }
    t
}

/// Reads go through the file, whole pages at a time, and the page cache serves repeats.
#[test]
fn node_reads_pread_pages_and_the_page_cache_serves_repeats() {
    let (_s, _region, db) = open("repeats", &[("io", "fs")], TimingOptions::default());
    let t = load(db.as_ref(), 2_000, 200);
    let (reads0, hits0) =
        (activity(db.as_ref(), "file_reads"), activity(db.as_ref(), "page_cache_hits"));
    let mut out = Vec::new();
    for round in 0..2 {
        for key in 0..2_000u64 {
            let mut txn = db.begin(0).expect("begin");
            assert!(txn.read(t, key, &mut out).expect("read"), "key {key} missing");
            assert_eq!(out, vec![key as u8; 200], "key {key}, round {round}");
            txn.commit().expect("commit");
        }
    }
    let reads = activity(db.as_ref(), "file_reads") - reads0;
    let hits = activity(db.as_ref(), "page_cache_hits") - hits0;
    assert!(reads > 0, "no node read went through the file");
    assert_eq!(
        activity(db.as_ref(), "file_read_bytes"),
        activity(db.as_ref(), "file_reads") * PAGE
    );
    // 2,000 rows of 200 B are ~60 leaves: all fit the default 512-page cache, so the second
    // round reads nothing from the file.
    assert!(reads < 200, "{reads} preads for ~60 leaves read twice");
    assert!(hits > 2 * 2_000, "{hits} page-cache hits for 4,000 root-to-leaf reads");

    // Without a cache every node read is a pread.
    let (_s, _r, db) =
        open("nocache", &[("io", "fs"), ("fs_cache_pages", "0")], TimingOptions::default());
    let t = load(db.as_ref(), 2_000, 200);
    let before = activity(db.as_ref(), "file_reads");
    for key in 0..500u64 {
        let mut txn = db.begin(0).expect("begin");
        assert!(txn.read(t, key, &mut out).expect("read"));
        txn.commit().expect("commit");
    }
    assert!(activity(db.as_ref(), "file_reads") - before >= 2 * 500, "at least root and leaf");
    assert_eq!(activity(db.as_ref(), "page_cache_hits"), 0);
}

/// Regression guard for the incarnation check: with a 4-page cache and writers that free and
/// reuse pages on every commit, every read must return the latest row. Fails (stale or wrong
/// rows, or a node of another level) if a cached page were used after its page was reused.
#[test]
fn a_page_reused_after_it_was_cached_is_read_again() {
    let (_s, _region, db) =
        open("reuse", &[("io", "fs"), ("fs_cache_pages", "4")], TimingOptions::default());
    let rows = 400u64;
    let t = load(db.as_ref(), rows, 300);
    let mut latest: Vec<u8> = (0..rows).map(|k| k as u8).collect();
    let mut out = Vec::new();
    for i in 0..4_000u64 {
        let key = i * 7919 % rows;
        let value = (i % 251) as u8;
        let mut txn = db.begin(0).expect("begin");
        assert!(txn.update(t, key, 0, &[value; 300]).expect("update"));
        txn.commit().expect("commit");
        latest[key as usize] = value;
        // Read a few keys, some written long ago (their pages cached, then replaced and reused).
        for probe in [key, (key + 1) % rows, i * 31 % rows, i * 101 % rows] {
            let mut txn = db.begin(0).expect("begin");
            assert!(txn.read(t, probe, &mut out).expect("read"), "key {probe} missing");
            assert_eq!(out, vec![latest[probe as usize]; 300], "key {probe} after update {i}");
            txn.commit().expect("commit");
        }
    }
    assert!(activity(db.as_ref(), "pages_reclaimed") > 1_000, "pages were not reused");
    assert!(activity(db.as_ref(), "page_cache_hits") > 0);
    assert!(db.check_integrity().is_ok());
}

/// A `pread` copies the whole page from the device, so the CPU-cache read model charges its
/// lines (those not already in the simulated cache) and a page-cache hit charges nothing.
#[test]
fn a_pread_is_charged_its_lines_and_a_hit_nothing() {
    let timing = TimingOptions { read_ns: 1, cpu_cache_bytes: 16 << 10, ..Default::default() };
    let (_s, region, db) = open("charges", &[("io", "fs")], timing);
    region.set_timing_enabled(false);
    let t = load(db.as_ref(), 2_000, 200);
    region.set_timing_enabled(true);
    let read_all = || {
        let mut out = Vec::new();
        let (lines, preads) =
            (region.stats().lines_read_charged, activity(db.as_ref(), "file_reads"));
        for key in 0..2_000u64 {
            let mut txn = db.begin(0).expect("begin");
            assert!(txn.read(t, key, &mut out).expect("read"));
            txn.commit().expect("commit");
        }
        (region.stats().lines_read_charged - lines, activity(db.as_ref(), "file_reads") - preads)
    };
    let (lines, preads) = read_all();
    assert!(preads > 0);
    assert!(lines > 0 && lines <= preads * PAGE / 64, "{lines} lines for {preads} preads");
    // Everything is in the page cache now: no pread, nothing charged.
    let (lines, preads) = read_all();
    assert_eq!((lines, preads), (0, 0));
}

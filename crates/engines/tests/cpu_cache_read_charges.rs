//! Guards N-Store's read model on every engine (issue 36): with a CPU cache smaller than the
//! working set and a read latency, a read-only workload charges lines read; without the cache
//! it charges none. Would catch: an engine whose reads bypass the region's load path (before
//! issue 36 only `inplace`'s page store charged reads: the N-Store TPC-C rows had
//! `lines_read_charged` = 0 on `cow` and `lsm`) or a page borrow charged in full.

use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use storage::TableSpec;

const ROWS: u64 = 3_000;
const ROW_BYTES: u32 = 200;
/// 16 KiB: a fraction of the 600 KB of rows.
const CACHE_BYTES: u64 = 16 << 10;

/// A scratch file in /dev/shm, removed on drop (the `io=fs` engines need a file).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Lines charged by `ROWS` point reads after loading the rows, and the lines a read charged at
/// most (an 8 KiB page borrow charged in full would be 128).
fn lines_charged(engine: &str, opts: &[(&str, &str)], cpu_cache_bytes: u64) -> (u64, u64) {
    let pairs: BTreeMap<String, String> =
        opts.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let base = EngineOptions { workers: 1, ..Default::default() };
    let mut options =
        engines::registry::get(engine).unwrap().options(base, &pairs).expect("options");
    if engine == "lsm" {
        // Small memtables: most rows reach runs, which `io=fs` reads from the file's mapping.
        options.lsm.memtable_bytes = 64 << 10;
    }
    let timing = TimingOptions { read_ns: 1, cpu_cache_bytes, ..Default::default() };
    let fs = pairs.get("io").is_some_and(|io| io == "fs");
    let scratch = Scratch(PathBuf::from(format!(
        "/dev/shm/nvmdb-cpu-cache-{}-{engine}-{}-{cpu_cache_bytes}",
        std::process::id(),
        opts.iter().map(|(k, v)| format!("{k}{v}")).collect::<String>()
    )));
    let medium = if fs { Medium::Shm } else { Medium::Dram };
    // `wal` lays a 64 MiB log out beside its image.
    let bytes = if engine == "wal" { 160 << 20 } else { 64 << 20 };
    let mut region_options = RegionOptions { timing, ..RegionOptions::new(medium, bytes) };
    if fs {
        region_options.path = Some(scratch.0.clone());
    }
    let region = Region::open(&region_options).expect("region");
    let db = engines::open(engine, region.clone(), &options).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: ROW_BYTES, expected_rows: ROWS };
    region.set_timing_enabled(false);
    let t = db.create_table(&spec).expect("table");
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
        let mut txn = db.begin(0).expect("begin");
        for &key in chunk {
            txn.insert(t, key, &[key as u8; ROW_BYTES as usize]).expect("insert");
        }
        txn.commit().expect("commit");
    }
    region.set_timing_enabled(true);
    let before = region.stats().lines_read_charged;
    let mut most = 0;
    let mut out = Vec::new();
    for i in 0..ROWS {
        let key = i * 7919 % ROWS;
        let at = region.stats().lines_read_charged;
        let mut txn = db.begin(0).expect("begin");
        assert!(txn.read(t, key, &mut out).expect("read"), "{engine}: key {key} missing");
        assert_eq!(out[0], key as u8, "{engine}: key {key} read wrong bytes");
        txn.commit().expect("commit");
        most = most.max(region.stats().lines_read_charged - at);
    }
    (region.stats().lines_read_charged - before, most)
}

fn check(engine: &str, opts: &[(&str, &str)]) {
    let (charged, most) = lines_charged(engine, opts, CACHE_BYTES);
    assert!(charged >= ROWS, "{engine} {opts:?}: {charged} lines charged for {ROWS} cold reads");
    assert!(most < 64, "{engine} {opts:?}: one read charged {most} lines (a whole page?)");
    let (off, _) = lines_charged(engine, opts, 0);
    assert_eq!(off, 0, "{engine} {opts:?}: charged without the CPU cache");
}

#[test]
fn inplace_reads_are_charged_through_the_cpu_cache() {
    check("inplace", &[]);
}

#[test]
fn cow_reads_are_charged_through_the_cpu_cache() {
    check("cow", &[]);
}

#[test]
fn cow_pointers_reads_are_charged_through_the_cpu_cache() {
    check("cow", &[("layout", "pointers")]);
}

#[test]
fn lsm_reads_are_charged_through_the_cpu_cache() {
    check("lsm", &[]);
}

#[test]
fn lsm_io_fs_reads_of_its_file_are_charged_through_the_cpu_cache() {
    check("lsm", &[("io", "fs")]);
}

/// N-Store's InP reads NVM like every other engine (all of its testbed's memory is NVM), so
/// `wal`'s buffer pool is charged with `pool_reads=nvm`, through the device's one cache; by
/// default it is Pelley's DRAM and free. Would catch: the pool's charges lost (counted on the
/// pool, whose statistics no row reads, or not at all) or charged by default.
#[test]
fn wal_pool_reads_are_charged_only_with_pool_reads_nvm() {
    check("wal", &[("io", "fs"), ("pool_reads", "nvm")]);
    check("wal", &[("pool_reads", "nvm")]);
    let (free, _) = lines_charged("wal", &[("io", "fs")], CACHE_BYTES);
    assert_eq!(free, 0, "wal's DRAM buffer pool charged {free} lines by default");
}

// `cow io=fs` reads whole pages through the file into a DRAM page cache (a pread charges the
// page's lines, a hit nothing): `cow_io_fs_reads.rs` checks its charges.

/// Guards against double charging: Pelley's page-cache model and N-Store's CPU cache are
/// alternatives, so `inplace` refuses a region with a CPU cache when `cache_pages` is given.
#[test]
fn both_read_models_at_once_are_refused() {
    let timing = TimingOptions { read_ns: 1, cpu_cache_bytes: CACHE_BYTES, ..Default::default() };
    let region =
        Region::open(&RegionOptions { timing, ..RegionOptions::new(Medium::Dram, 8 << 20) })
            .expect("region");
    let options = EngineOptions { workers: 1, cache_pages: Some(8), ..Default::default() };
    match engines::open("inplace", region, &options) {
        Err(storage::DbError::Invalid(why)) => assert!(why.contains("cache_pages"), "{why}"),
        Err(e) => panic!("expected Invalid, got {e}"),
        Ok(_) => panic!("both read models accepted"),
    }
}

//! Regression (issue 37): `crashtest`, `fuzz` and `bench` failed at setup on `wal`, `group` and
//! `lsm` with their defaults because nothing knew how large a region an engine needs. Guards
//! `engines::min_region_bytes`: a region of that size formats, one page less is refused with a
//! `RegionFull` error, for every engine, with its defaults and with variants.
//! Would catch: a minimum that drifts from an engine's own format check.

use engines::{EngineOptions, ENGINES};
use pmem::{Medium, Region, RegionOptions};
use storage::format::PAGE_SIZE_U64;
use storage::DbError;

fn variants() -> Vec<(&'static str, EngineOptions)> {
    let mut out = Vec::new();
    for engine in ENGINES {
        out.push((*engine, EngineOptions { workers: 1, ..EngineOptions::default() }));
        out.push((*engine, EngineOptions::default()));
    }
    let mut txn2 = EngineOptions { workers: 2, ..EngineOptions::default() };
    txn2.wal.log = engines::wal::LogLayout::parse("txn:2").unwrap();
    txn2.wal.log_bytes = engines::wal::default_log_bytes(&txn2);
    out.push(("wal", txn2));
    out.push((
        "wal",
        EngineOptions {
            workers: 1,
            wal: engines::wal::Options { log_bytes: 6 << 20, ..Default::default() },
            ..Default::default()
        },
    ));
    out.push((
        "group",
        EngineOptions {
            workers: 1,
            group: engines::group::Options { staging_bytes: 4 << 20, ..Default::default() },
            ..Default::default()
        },
    ));
    let mut lsm = EngineOptions::default();
    lsm.lsm.memtable_bytes = 1 << 20;
    out.push(("lsm", lsm));
    out
}

fn format(engine: &str, bytes: u64, options: &EngineOptions) -> storage::Result<()> {
    let region = Region::open(&RegionOptions::new(Medium::Dram, bytes)).unwrap();
    engines::open(engine, region, options)?.shutdown()
}

#[test]
fn min_region_bytes_formats_and_one_page_less_is_region_full() {
    for (engine, options) in variants() {
        let min = engines::min_region_bytes(engine, &options).unwrap();
        let what = format!("{engine} {:?} log_bytes={}", options.wal.log, options.wal.log_bytes);
        format(engine, min, &options).unwrap_or_else(|e| panic!("{what}: {min} bytes: {e}"));
        match format(engine, min - PAGE_SIZE_U64, &options) {
            Err(DbError::RegionFull(_)) => {}
            other => panic!("{what}: one page under {min} bytes: {other:?}"),
        }
        let area = engines::area_bytes(engine, &options).unwrap();
        assert!(area < min, "{what}: area {area} of {min}");
        if matches!(engine, "inplace" | "cow") {
            assert_eq!(area, 0, "{what}");
        }
    }
}

//! The Engine conformance suite on `wal` with distributed logs (transaction- and
//! page-partitioned, volatile and durable caches). Would catch: a commit token the daemon never
//! acknowledges, a GSN capture that breaks stores, or a layout that breaks the trait's semantics.

use engines::wal::{Cache, LogLayout, Wal};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(log: LogLayout, cache: Cache) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 96 << 20)).expect("region");
    let opts = EngineOptions {
        workers: 4,
        node_capacity: 8,
        wal: engines::wal::Options {
            log_bytes: 48 << 20,
            max_dirty_pages: 8,
            log,
            cache,
            ..Default::default()
        },
        ..Default::default()
    };
    Box::new(Wal::open(region, &opts).expect("open"))
}

#[test]
fn conformance_with_txn_partitioned_logs() {
    run_all(&|| make(LogLayout::Txn(2), Cache::Volatile), Writers::KeyLocks);
}

#[test]
fn conformance_with_page_partitioned_logs_and_durable_caches() {
    run_all(&|| make(LogLayout::Page(3), Cache::Durable), Writers::KeyLocks);
}

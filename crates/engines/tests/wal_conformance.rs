//! The Engine conformance suite on NVRAM Disk-Replacement (`wal`), on `dram` and on `sim`, with
//! both page-flush methods and both flushers. Would catch: a buffer pool, log force or
//! checkpoint that breaks the trait's semantics (locks, abort, scans, errors).

use engines::wal::{Flusher, PageFlush, Wal};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium, page_flush: PageFlush, flusher: Flusher) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 48 << 20)).expect("region");
    let opts = EngineOptions {
        workers: 4,
        node_capacity: 8,
        wal: engines::wal::Options {
            log_bytes: 16 << 20,
            max_dirty_pages: 8,
            page_flush,
            flusher,
            ..Default::default()
        },
        ..Default::default()
    };
    Box::new(Wal::open(region, &opts).expect("open"))
}

#[test]
fn conformance_on_dram_with_paper_page_flush() {
    run_all(&|| make(Medium::Dram, PageFlush::Paper, Flusher::Checkpoint), Writers::KeyLocks);
}

#[test]
fn conformance_on_sim_with_direct_page_flush() {
    run_all(&|| make(Medium::Sim, PageFlush::Direct, Flusher::Checkpoint), Writers::KeyLocks);
}

/// Guards Pelley's flusher (issue 38): oldest-first write-back keeps the trait's semantics.
#[test]
fn conformance_on_sim_with_pelleys_flusher() {
    run_all(&|| make(Medium::Sim, PageFlush::Paper, Flusher::Pelley), Writers::KeyLocks);
}

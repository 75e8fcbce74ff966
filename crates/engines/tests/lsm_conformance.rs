//! The Engine conformance suite on the log-structured engine (`lsm`), NVM-Log on `dram` and
//! `sim`, with a memtable small enough that the checks' rows are flushed into runs and merged.
//! Would catch: any deviation from the trait's semantics (locks, abort, scans, errors).

use engines::{lsm::Lsm, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 16 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 4, ..Default::default() };
    opts.lsm.memtable_bytes = 64 << 10;
    Box::new(Lsm::open(region, &opts).expect("open"))
}

#[test]
fn lsm_conformance_on_dram() {
    run_all(&|| make(Medium::Dram), Writers::KeyLocks);
}

#[test]
fn lsm_conformance_on_sim() {
    run_all(&|| make(Medium::Sim), Writers::KeyLocks);
}

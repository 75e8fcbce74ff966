//! The Engine conformance suite on NVRAM Group Commit, on `dram` and on `sim`.
//! Would catch: a batch gate or commit token that breaks the trait's semantics (locks, abort,
//! scans, errors, durability tokens that never become durable).

use engines::{group::Group, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 32 << 20)).expect("region");
    let opts = EngineOptions {
        workers: 4,
        node_capacity: 8,
        group: engines::group::Options {
            staging_bytes: 8 << 20,
            batch_period_ms: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    Box::new(Group::open(region, &opts).expect("open"))
}

#[test]
fn conformance_on_dram() {
    run_all(&|| make(Medium::Dram), Writers::KeyLocks);
}

#[test]
fn conformance_on_sim() {
    run_all(&|| make(Medium::Sim), Writers::KeyLocks);
}

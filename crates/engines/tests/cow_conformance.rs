//! The Engine conformance suite on Copy-on-Write Updates (`cow`), a one-writer engine (LMDB's
//! rules: snapshot readers never wait, a second writer waits or retries), on `dram` and `sim`,
//! with tiny nodes (splits and root collapses on every few keys), with leaves of one row, and
//! with grouped commits. Would catch: a writer changing a page a snapshot can see, lost splits
//! or prunes, a broken single-writer rule, or a group commit whose token never becomes durable.

use engines::cow::Cow;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium, node_capacity: u32, group_commit_ms: u64) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 16 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 4, node_capacity, ..Default::default() };
    opts.cow.group_commit_ms = group_commit_ms;
    Box::new(Cow::open(region, &opts).expect("open"))
}

#[test]
fn cow_conformance_on_dram_with_small_nodes() {
    run_all(&|| make(Medium::Dram, 4, 0), Writers::One);
}

#[test]
fn cow_conformance_on_sim_with_full_nodes() {
    run_all(&|| make(Medium::Sim, storage::btree::MAX_NODE_ENTRIES as u32, 0), Writers::One);
}

#[test]
fn cow_conformance_with_group_commit() {
    run_all(&|| make(Medium::Dram, 4, 2), Writers::One);
}

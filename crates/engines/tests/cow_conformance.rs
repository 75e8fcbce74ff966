//! The Engine conformance suite on Copy-on-Write Updates (`cow`), a one-writer engine (LMDB's
//! rules: snapshot readers never wait, a second writer waits or retries), on `dram` and `sim`,
//! with tiny nodes (splits and root collapses on every few keys), with leaves of one row, and
//! with grouped commits. Would catch: a writer changing a page a snapshot can see, lost splits
//! or prunes, a broken single-writer rule, or a group commit whose token never becomes durable.

use engines::cow::{Cow, TupleLayout};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium, node_capacity: u32, group_commit_ms: u64) -> Box<dyn Engine> {
    make_with(medium, node_capacity, group_commit_ms, TupleLayout::Auto)
}

/// `TupleLayout::Auto` formats CoW's leaves of rows; `Pointers` is NVM-CoW's.
fn make_with(
    medium: Medium,
    node_capacity: u32,
    group_commit_ms: u64,
    layout: TupleLayout,
) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 32 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 4, node_capacity, ..Default::default() };
    opts.cow.group_commit_ms = group_commit_ms;
    opts.cow.layout = layout;
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

#[test]
fn cow_conformance_with_tuple_pointers() {
    run_all(&|| make_with(Medium::Dram, 4, 0, TupleLayout::Pointers), Writers::One);
    run_all(&|| make_with(Medium::Sim, 64, 2, TupleLayout::Pointers), Writers::One);
}

#[test]
fn a_region_keeps_the_layout_it_was_formatted_with() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 4 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 1, ..Default::default() };
    opts.cow.layout = TupleLayout::Pages;
    drop(Cow::open(region.clone(), &opts).expect("format"));
    opts.cow.layout = TupleLayout::Pointers;
    let err = Cow::open(region.clone(), &opts).err().expect("refused");
    assert!(err.to_string().contains("layout=pages"), "{err}");
    opts.cow.layout = TupleLayout::Auto;
    Cow::open(region, &opts).expect("auto takes the region's layout");
}

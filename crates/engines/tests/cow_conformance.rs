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

/// N-Store's CoW through the file system (`io=fs`): nodes written with `pwrite` + `fdatasync`
/// and read through the file into each worker's page cache, here of 8 pages so that pages
/// are evicted, freed and reused under the suite's readers (issue 36). On a fresh /dev/shm
/// file, unlinked once open (the engine keeps its mapping and its descriptor).
fn make_fs() -> Box<dyn Engine> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::path::PathBuf::from(format!(
        "/dev/shm/nvmdb-cow-conformance-{}-{n}",
        std::process::id()
    ));
    let mut ro = RegionOptions::new(Medium::Shm, 32 << 20);
    ro.path = Some(path.clone());
    let region = Region::open(&ro).expect("region");
    let mut opts = EngineOptions {
        workers: 4,
        node_capacity: 4,
        io: engines::device::Io::Fs,
        ..Default::default()
    };
    opts.cow.fs_cache_pages = 8;
    let engine = Cow::open(region, &opts);
    let _ = std::fs::remove_file(&path);
    Box::new(engine.expect("open"))
}

#[test]
fn cow_io_fs_conformance_with_a_small_page_cache() {
    run_all(&make_fs, Writers::One);
}

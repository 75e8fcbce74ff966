//! Differential logging round trip (Kim et al. §3.2): the WAL SQLite reads after a reopen is
//! byte-exact what it wrote, over random page edits, with and without differential records and
//! with either heap. Would catch: a wrong diff range, a record applied to the wrong base frame, a
//! record split across blocks, a frame header altered on the way.

mod common;

use common::Script;
use pmem::{Medium, Region, RegionOptions};
use proptest::prelude::*;
use sqlite_nvwal::store::Store;
use sqlite_nvwal::{HeapMode, NvwalOptions};

const REGION_BYTES: u64 = 24 << 20;

fn options(diff: bool, heap: HeapMode) -> NvwalOptions {
    NvwalOptions { diff, heap, log_bytes: Some(12 << 20), ..NvwalOptions::default() }
}

fn fresh(options: &NvwalOptions) -> Store {
    let region = Region::open(&RegionOptions::new(Medium::Dram, REGION_BYTES)).expect("region");
    let store = Store::open(region, options).expect("format");
    // What the engine does once SQLite created the database.
    store.mark_formatted();
    store
}

/// Opens a second store on a copy of the first one's region: recovery rebuilds the WAL.
fn reopen(store: &Store, options: &NvwalOptions) -> Store {
    let image = store.region().snapshot();
    let region =
        Region::dram_copy(&image, &RegionOptions::new(Medium::Dram, REGION_BYTES)).expect("copy");
    Store::open(region, options).expect("recover")
}

fn run(seed: u64, txns: usize, max_pages: u32, options: &NvwalOptions) -> (Store, Script) {
    let store = fresh(options);
    let mut s = Script::new(seed);
    s.restart(&store);
    for _ in 0..txns {
        let n = s.rng.gen_range(1..=max_pages.min(5) as usize);
        let pages = s.pick(max_pages, n);
        s.txn(&store, &pages);
    }
    (store, s)
}

use rand::Rng;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn reopened_wal_is_what_was_written(
        seed in any::<u64>(),
        txns in 1usize..40,
        max_pages in 1u32..12,
        diff in any::<bool>(),
        per_frame in any::<bool>(),
    ) {
        let heap = if per_frame { HeapMode::PerFrame } else { HeapMode::User };
        let o = options(diff, heap);
        let (store, script) = run(seed, txns, max_pages, &o);
        prop_assert_eq!(store.wal_image(), script.model.clone());
        let again = reopen(&store, &o);
        prop_assert!(again.wal_image() == script.model, "reconstructed WAL differs");
        let (_, pending, _) = again.heap_census().expect("heap");
        prop_assert_eq!(pending, 0);
    }
}

#[test]
fn diff_and_whole_pages_rebuild_the_same_bytes_and_diff_writes_less() {
    let full = options(false, HeapMode::User);
    let diff = options(true, HeapMode::User);
    let (a, sa) = run(11, 60, 6, &full);
    let (b, sb) = run(11, 60, 6, &diff);
    assert_eq!(sa.model, sb.model, "same script");
    let (ra, rb) = (reopen(&a, &full), reopen(&b, &diff));
    assert!(ra.wal_image() == rb.wal_image(), "diff and whole-page WALs differ");
    assert!(ra.wal_image() == sa.model, "the WAL differs from what was written");
    let (ca, cb) = (a.counters(), b.counters());
    assert_eq!(ca.records, cb.records);
    assert!(
        cb.record_bytes * 2 < ca.record_bytes,
        "diff {} bytes vs whole pages {}",
        cb.record_bytes,
        ca.record_bytes
    );
}

#[test]
fn a_restart_drops_the_old_generation_and_frees_its_blocks() {
    let o = options(true, HeapMode::PerFrame);
    let (store, mut s) = run(5, 30, 8, &o);
    let (_, _, in_use) = store.heap_census().expect("heap");
    assert!(in_use >= 30, "one block per frame: {in_use}");
    s.restart(&store);
    let (_, _, in_use) = store.heap_census().expect("heap");
    assert_eq!(in_use, 0, "the restart freed the blocks");
    for _ in 0..3 {
        let pages = s.pick(8, 2);
        s.txn(&store, &pages);
    }
    let again = reopen(&store, &o);
    let image = again.wal_image();
    assert_eq!(image.len(), s.model.len(), "{:?}", again.facts());
    assert!(image == s.model, "only the new generation's frames");
}

#[test]
fn an_uncommitted_tail_is_dropped_on_reopen() {
    let o = options(true, HeapMode::User);
    let (store, s) = run(9, 10, 4, &o);
    let committed = s.model.clone();
    // Frames written and synced without a commit frame (SQLite never acknowledges them).
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&2u32.to_be_bytes());
    h[8..16].copy_from_slice(&s.salts);
    let at = committed.len() as u64;
    store.wal_write(at, &h).expect("header");
    store.wal_write(at + 24, &vec![9u8; common::PAGE]).expect("page");
    store.wal_sync().expect("sync");
    let again = reopen(&store, &o);
    let image = again.wal_image();
    assert_eq!(image.len(), committed.len(), "{:?}", again.facts());
    assert!(image == committed);
    assert_eq!(again.facts().records_dropped, 1);
}

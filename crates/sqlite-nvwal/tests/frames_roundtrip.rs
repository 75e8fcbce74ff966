//! Differential logging round trip (Kim et al. §3.2): the WAL SQLite reads after a reopen is
//! byte-exact what it wrote, over random page edits, with and without differential records (one
//! range, several ranges) and with either heap; a damaged range table ends the log, never
//! panics. Would catch: a wrong diff range, a range table that loses or misplaces a range, a
//! record applied to the wrong base frame, a record split across blocks, a frame header altered
//! on the way, a table read without validation.

mod common;

use common::Script;
use pmem::{Medium, Region, RegionOptions};
use proptest::prelude::*;
use sqlite_nvwal::layout::{
    unseal, RecordHeader, HEADER_LINK, H_FIRST_BLOCK, MAX_RANGES, RECORD_HEADER_BYTES, SEAL_NEXT,
};
use sqlite_nvwal::store::Store;
use sqlite_nvwal::{DiffMode, HeapMode, NvwalOptions, SyncMode};
use storage::{DbError, Result};

const REGION_BYTES: u64 = 24 << 20;

const DIFFS: [DiffMode; 3] = [DiffMode::Off, DiffMode::Range, DiffMode::On];

fn options(diff: DiffMode, heap: HeapMode) -> NvwalOptions {
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
        diff in 0usize..3,
        per_frame in any::<bool>(),
    ) {
        let heap = if per_frame { HeapMode::PerFrame } else { HeapMode::User };
        let o = options(DIFFS[diff], heap);
        let (store, script) = run(seed, txns, max_pages, &o);
        prop_assert_eq!(store.wal_image(), script.model.clone());
        let again = reopen(&store, &o);
        prop_assert!(again.wal_image() == script.model, "reconstructed WAL differs");
        let (_, pending, _) = again.heap_census().expect("heap");
        prop_assert_eq!(pending, 0);
    }

    /// Many small scattered edits (often more runs than `MAX_RANGES`, often the page's first
    /// and last bytes): every mode rebuilds the same bytes, and several ranges never store more
    /// than one.
    #[test]
    fn scattered_edits_rebuild_byte_exact(
        seed in any::<u64>(),
        txns in 1usize..16,
        max_edits in 1usize..80,
        edges in any::<bool>(),
    ) {
        let mut stored = Vec::new();
        for diff in DIFFS {
            let o = options(diff, HeapMode::User);
            let store = fresh(&o);
            let mut s = Script::new(seed);
            s.restart(&store);
            for _ in 0..txns {
                let n = s.rng.gen_range(1..=3usize);
                let pages: Vec<(u32, Vec<u8>)> = s
                    .pick(4, n)
                    .into_iter()
                    .map(|p| (p, scatter(&mut s, p, max_edits, edges)))
                    .collect();
                s.txn_pages(&store, &pages);
            }
            let again = reopen(&store, &o);
            prop_assert!(again.wal_image() == s.model, "{:?}: reconstructed WAL differs", diff);
            stored.push(store.counters().record_bytes);
        }
        prop_assert!(stored[2] <= stored[1], "ranges {} > one range {}", stored[2], stored[1]);
        prop_assert!(stored[1] <= stored[0], "one range {} > whole pages {}", stored[1], stored[0]);
    }
}

/// The next version of page `pgno`: up to `max_edits` runs of 1-20 changed bytes anywhere, and
/// with `edges` its first and last bytes changed.
fn scatter(s: &mut Script, pgno: u32, max_edits: usize, edges: bool) -> Vec<u8> {
    let mut page = s.pages.get(&pgno).cloned().unwrap_or_else(|| vec![0u8; common::PAGE]);
    for _ in 0..s.rng.gen_range(1..=max_edits) {
        let len = s.rng.gen_range(1..=20usize);
        let at = s.rng.gen_range(0..=common::PAGE - len);
        for b in &mut page[at..at + len] {
            *b = b.wrapping_add(s.rng.gen_range(1..=255u8));
        }
    }
    if edges {
        page[0] = page[0].wrapping_add(1);
        page[common::PAGE - 1] = page[common::PAGE - 1].wrapping_add(1);
    }
    page
}

#[test]
fn diff_and_whole_pages_rebuild_the_same_bytes_and_diff_writes_less() {
    let full = options(DiffMode::Off, HeapMode::User);
    let diff = options(DiffMode::On, HeapMode::User);
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
    let o = options(DiffMode::On, HeapMode::PerFrame);
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
    let o = options(DiffMode::On, HeapMode::User);
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

/// Three commits on page 1: a whole page, then a 3-range and a 2-range differential record, all
/// in the log's first block. Returns the store, the script and the records' region offsets.
fn three_records(o: &NvwalOptions) -> (Store, Script, Vec<u64>) {
    let store = fresh(o);
    let mut s = Script::new(3);
    s.restart(&store);
    let mut page = vec![1u8; common::PAGE];
    s.txn_pages(&store, &[(1, page.clone())]);
    for (round, spots) in [&[100usize, 1000, 3000][..], &[1000, 2000][..]].iter().enumerate() {
        for at in *spots {
            page[*at..*at + 10].fill(7 + round as u8);
        }
        s.txn_pages(&store, &[(1, page.clone())]);
    }
    let region = store.region();
    let first = unseal(region.read_u64(H_FIRST_BLOCK), SEAL_NEXT, HEADER_LINK).expect("sealed");
    assert!(first > 0, "a log block");
    let mut pos = store.layout().block(first as u32 - 1);
    let mut records = Vec::new();
    for _ in 0..3 {
        records.push(pos);
        let h = RecordHeader::decode(region.read(pos, RECORD_HEADER_BYTES));
        pos += RecordHeader::record_bytes(h.len);
    }
    let ranges: Vec<u32> = records
        .iter()
        .map(|p| RecordHeader::decode(region.read(*p, RECORD_HEADER_BYTES)).ranges)
        .collect();
    assert_eq!(ranges, vec![0, 3, 2], "a whole page, then 3 and 2 ranges");
    (store, s, records)
}

fn open_damaged(store: &Store, o: &NvwalOptions, edit: impl Fn(&mut Vec<u8>)) -> Result<Store> {
    let mut image = store.region().snapshot();
    edit(&mut image);
    let region =
        Region::dram_copy(&image, &RegionOptions::new(Medium::Dram, REGION_BYTES)).expect("copy");
    Store::open(region, o)
}

/// Regression (issue 37, `nvmdb fuzz --engine sqlite-nvwal`: damaged log blocks were accepted
/// with fewer rows): a damaged record of a durable transaction ended the log there, silently
/// dropping it and every later commit. Its checksum fails and a commit mark follows (or is its
/// own), which no crash leaves: `Corrupt`, never a panic, never a shorter log.
#[test]
fn a_damaged_committed_record_is_corrupt_not_a_shorter_log() {
    let o = options(DiffMode::On, HeapMode::User);
    let (store, s, records) = three_records(&o);
    let at = records[1] as usize;
    let table = at + RECORD_HEADER_BYTES;
    let u16le = |v: u16| v.to_le_bytes().to_vec();
    // (what, image offset, bytes written there)
    let damages: Vec<(&str, usize, Vec<u8>)> = vec![
        ("count above the bound", at + 16, (MAX_RANGES as u32 + 1).to_le_bytes().to_vec()),
        ("count u32::MAX", at + 16, vec![0xFF; 4]),
        ("count beyond the table", at + 16, vec![4]),
        ("payload longer than a page", at + 20, vec![0x7F; 4]),
        ("range out of the page", table, u16le(4090)),
        ("range length past the page", table + 2, u16le(0xFFFF)),
        ("overlapping ranges", table + 4, u16le(100)),
        ("unsorted ranges", table + 8, u16le(50)),
        ("a changed byte of the payload", table + 40, vec![0x5A]),
        ("the frame number", at + 8, vec![9]),
        ("the record checksum", at + 48, vec![0, 0]),
        ("the last commit's payload", records[2] as usize + RECORD_HEADER_BYTES + 12, vec![1]),
    ];
    for (what, i, bytes) in damages {
        match open_damaged(&store, &o, |image| {
            image[i..i + bytes.len()].copy_from_slice(&bytes);
        }) {
            Err(DbError::Corrupt(m)) => assert!(m.contains("record"), "{what}: {m}"),
            Err(e) => panic!("{what}: expected Corrupt, got {e}"),
            Ok(again) => panic!("{what}: accepted with {:?}", again.facts()),
        }
    }
    // Undamaged: all three commits.
    let again = open_damaged(&store, &o, |_| {}).expect("undamaged");
    assert!(again.wal_image() == s.model);
}

#[test]
fn the_cs_checksum_covers_the_range_table() {
    let o = NvwalOptions { sync: SyncMode::Checksum, ..options(DiffMode::On, HeapMode::User) };
    let (store, s, records) = three_records(&o);
    store.sync_all();
    let two_frames = &s.model[..32 + 2 * (common::PAGE + 24)];
    // The last record's second range moved by one byte: still a valid table.
    let entry = records[2] as usize + RECORD_HEADER_BYTES + 4;
    let again = open_damaged(&store, &o, |i| {
        let off = u16::from_le_bytes([i[entry], i[entry + 1]]) + 1;
        i[entry..entry + 2].copy_from_slice(&off.to_le_bytes());
    })
    .expect("a cs commit whose records fail their checksums is a torn commit");
    assert!(again.wal_image() == two_frames, "{:?}", again.facts());
    assert_eq!(again.facts().torn_commits_by_checksum, 1);
}

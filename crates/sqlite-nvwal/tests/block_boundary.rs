//! Regression (issue 37, hole (a) for NVWAL's log): the writer (`append_record`: a record that
//! does not fit the rest of its block goes to the next one) and recovery's scan (a header that
//! does not fit or does not read back ends the block) must agree where a block's records end,
//! for every space left at the block's end near a record header's size (56 bytes since format
//! version 3) and the smallest record's (64); a disagreement drops every commit after the block
//! boundary. Kim et al., ASPLOS 2016, §3.3 (the block list) and §4.3 (recovery).
//!
//! A first WAL generation leaves stale records (valid headers, older salts) in every block; the
//! second fills its first block to end `gap` bytes short of the block's end, then writes records
//! of chosen sizes across the boundary (one exactly the space left, one a word larger), each
//! transaction synced; the persisted crash image must recover the WAL byte for byte.

use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use sqlite_nvwal::layout::{RecordHeader, RANGE_ENTRY_BYTES, RECORD_HEADER_BYTES};
use sqlite_nvwal::store::Store;
use sqlite_nvwal::{DiffMode, HeapMode, NvwalOptions, SyncMode};

const PAGE: usize = 4096;
const BLOCK: u64 = 8192;
const REGION_BYTES: u64 = 4 << 20;
/// Bytes of a one-range differential record around `len` changed bytes.
const RANGE_RECORD_OVERHEAD: u64 = (RECORD_HEADER_BYTES + RANGE_ENTRY_BYTES) as u64;
/// The smallest record: a 56-byte header, one range-table entry and one changed byte, padded
/// to 8.
const MIN_RECORD: u64 = 64;
const _: () =
    assert!(MIN_RECORD == (RECORD_HEADER_BYTES + RANGE_ENTRY_BYTES + 1).div_ceil(8) as u64 * 8);
const FULL_RECORD: u64 = RECORD_HEADER_BYTES as u64 + PAGE as u64;

/// A WAL writer that chooses each record's size: a frame of page `pgno` whose first `len`
/// bytes are all changed becomes a one-range record of `RANGE_RECORD_OVERHEAD + len` bytes.
struct Writer {
    wal: Vec<u8>,
    pages: std::collections::BTreeMap<u32, Vec<u8>>,
    salts: [u8; 8],
    /// Frames written since the last sync, `(pgno, page)`.
    open: usize,
}

impl Writer {
    fn start(store: &Store, generation: u32) -> Writer {
        let mut h = [0u8; 32];
        h[0..4].copy_from_slice(&0x377f_0682u32.to_be_bytes());
        h[4..8].copy_from_slice(&3_007_000u32.to_be_bytes());
        h[8..12].copy_from_slice(&(PAGE as u32).to_be_bytes());
        h[16..20].copy_from_slice(&generation.to_be_bytes());
        h[20..24].copy_from_slice(&(generation * 7919).to_be_bytes());
        store.wal_write(0, &h).expect("WAL header");
        let salts = h[16..24].try_into().expect("8 bytes");
        Writer { wal: h.to_vec(), pages: Default::default(), salts, open: 0 }
    }

    /// One frame whose record is exactly `bytes` long (a whole page if the page is new).
    fn frame(&mut self, store: &Store, pgno: u32, bytes: u64, commit: bool) {
        let page = match self.pages.get_mut(&pgno) {
            None => {
                assert_eq!(bytes, FULL_RECORD, "a page's first record holds the whole page");
                self.pages.insert(pgno, vec![pgno as u8; PAGE]);
                &self.pages[&pgno]
            }
            Some(page) => {
                assert!(bytes >= MIN_RECORD && bytes.is_multiple_of(8), "record of {bytes}");
                let len = (bytes - RANGE_RECORD_OVERHEAD) as usize;
                assert_eq!(RecordHeader::record_bytes(len as u32 + 4), bytes);
                for b in &mut page[..len] {
                    *b ^= 0xFF;
                }
                &*page
            }
        };
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&pgno.to_be_bytes());
        h[4..8].copy_from_slice(&(if commit { 100u32 } else { 0 }).to_be_bytes());
        h[8..16].copy_from_slice(&self.salts);
        h[16..24].copy_from_slice(&(self.wal.len() as u64).to_le_bytes());
        let at = self.wal.len() as u64;
        store.wal_write(at, &h).expect("frame header");
        store.wal_write(at + 24, page).expect("frame page");
        self.wal.extend_from_slice(&h);
        self.wal.extend_from_slice(page);
        self.open += 1;
        if commit {
            store.wal_sync().expect("sync");
            self.open = 0;
        }
    }

    /// One transaction of records of `sizes`: page 1's, or a new page's for a full record
    /// (page 1 is the first page written).
    fn txn(&mut self, store: &Store, sizes: &[u64]) {
        for (i, &size) in sizes.iter().enumerate() {
            let pgno = match self.pages.is_empty() {
                false if size == FULL_RECORD => 1 + self.pages.len() as u32,
                _ => 1,
            };
            self.frame(store, pgno, size, i + 1 == sizes.len());
        }
    }

    /// Single-frame transactions of page 1 until the first block's records end at `target`.
    fn fill_to(&mut self, store: &Store, used: &mut u64, target: u64) {
        const FILLER: u64 = 800;
        while target - *used > FILLER + MIN_RECORD {
            self.txn(store, &[FILLER]);
            *used += FILLER;
        }
        if target > *used {
            self.txn(store, &[target - *used]);
            *used = target;
        }
    }
}

fn options(sync: SyncMode) -> NvwalOptions {
    NvwalOptions {
        sync,
        diff: DiffMode::Range,
        heap: HeapMode::User,
        block_bytes: BLOCK,
        log_bytes: Some(1 << 20),
        fault: None,
        ..Default::default()
    }
}

/// The WAL as recovered from the persisted crash image after a block ending `gap` bytes short
/// of its end, then a transaction of `sizes`; and the WAL as written.
fn block_then_boundary(sync: SyncMode, gap: u64, sizes: &[u64]) -> (Vec<u8>, Vec<u8>) {
    let o = options(sync);
    let region = Region::open(&RegionOptions::new(Medium::Sim, REGION_BYTES)).expect("sim");
    let store = Store::open(region, &o).expect("format");
    store.mark_formatted();
    // Generation 1: stale records of other sizes over the blocks generation 2 reuses.
    let mut w = Writer::start(&store, 1);
    w.txn(&store, &[FULL_RECORD]);
    for i in 0..40 {
        w.txn(&store, &[MIN_RECORD + 8 * (i % 13), 64]);
    }
    // Generation 2: page 1 whole, then fillers to `gap` short of the block's end.
    let mut w = Writer::start(&store, 2);
    w.txn(&store, &[FULL_RECORD]);
    let mut used = FULL_RECORD;
    w.fill_to(&store, &mut used, BLOCK - gap);
    w.txn(&store, sizes);
    w.txn(&store, &[64]);
    if sync == SyncMode::Checksum {
        store.sync_all();
    }
    let image = store.region().crash_image(CrashPolicy::Persisted, 3).expect("a sim region");
    let crashed =
        Region::from_image(&image, &RegionOptions::new(Medium::Sim, REGION_BYTES)).expect("image");
    let recovered = Store::open(crashed, &o).expect("recovery");
    (recovered.wal_image(), w.wal)
}

#[test]
fn nvwal_blocks_ending_near_a_record_header_size_recover_across_the_boundary() {
    for sync in [SyncMode::Lazy, SyncMode::Eager, SyncMode::Checksum] {
        for gap in (0..=80).step_by(8) {
            let mut shapes: Vec<Vec<u64>> = vec![
                vec![MIN_RECORD; 3],
                vec![64, FULL_RECORD, 64],
                vec![FULL_RECORD],
                vec![(gap + 8).max(MIN_RECORD), 64],
            ];
            if gap >= MIN_RECORD {
                // A record exactly the size of the space left: the block ends full.
                shapes.push(vec![gap, 64, 64]);
            }
            for sizes in shapes {
                let (got, want) = block_then_boundary(sync, gap, &sizes);
                assert!(
                    got == want,
                    "{sync:?}, block {gap} bytes short, then {sizes:?}: recovered {} of {} \
                     WAL bytes",
                    got.len(),
                    want.len()
                );
            }
        }
    }
}

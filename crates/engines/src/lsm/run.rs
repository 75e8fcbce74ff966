//! Immutable sorted runs (LevelDB's SSTables, Arulraj et al. §3.3): one table's rows in key
//! order at a fixed stride, a sparse index (every [`INDEX_EVERY`]-th key) and a bloom filter,
//! all in one extent of pages of the run area. Byte layout in `docs/format.md` (*lsm*).
//! A *tombstone run* holds deletes only: its entries are keys without rows (a 16-byte stride,
//! not a row's), so deleting a full region's rows takes a sliver of their space.
//!
//! Invariant: a run is immutable once the manifest lists it; it is read only through a
//! [`Run`] whose header, index and filter were checked against the manifest and their
//! checksums when it was opened, and each entry's checksum is checked when the entry is read.
//!
//! **Point reads through the file** (`io=fs`, N-Store's Log engine, issue 36): the
//! traditional engine reaches its SSTables through the filesystem interface, whose reads, like
//! its writes, go through the kernel's VFS (Arulraj et al. §2.2). A run opened for `io=fs`
//! keeps its filter and every entry's key in DRAM ([`FileMeta`]; LevelDB's table cache keeps
//! a table's filter and index blocks), and a point read `pread`s the one entry it needs into a
//! DRAM buffer ([`Run::get_from_file`]; on PMFS, which has no page cache, the copy reads the
//! device, so the bytes are charged to the CPU-cache read model as loads). There is no block
//! cache (LevelDB's is optional). Scans, merges and checks still read through the mapping.

use super::layout::{RunRef, RUN_TOMBSTONES};
use crate::device::Device;
use pmem::Region;
use storage::format::{crc, get_u32, get_u64, page_offset, PAGE_SIZE_U64};
use storage::{DbError, Result};

pub(crate) const RUN_MAGIC: u64 = u64::from_le_bytes(*b"LSMrun\0\0");
pub(crate) const HEADER_BYTES: u64 = 64;
/// One index key per this many entries: a lookup reads at most this many entries.
pub(crate) const INDEX_EVERY: u64 = 32;
const FILTER_BITS_PER_KEY: u64 = 10;
const FILTER_HASHES: u64 = 7;
pub(crate) const FLAG_TOMBSTONE: u32 = 1;
/// Bytes a run builder buffers before writing them out.
const CHUNK_BYTES: usize = 1 << 20;

pub(crate) fn stride_of(row_bytes: u32) -> u64 {
    (16 + row_bytes as u64).next_multiple_of(8)
}

fn filter_words(entries: u64) -> u64 {
    (entries * FILTER_BITS_PER_KEY).div_ceil(64).max(1)
}

/// Pages a run of `entries` rows of `row_bytes` needs (`row_bytes` 0: a tombstone run).
pub(crate) fn pages_for(entries: u64, row_bytes: u32) -> u64 {
    let bytes = HEADER_BYTES
        + entries * stride_of(row_bytes)
        + entries.div_ceil(INDEX_EVERY) * 8
        + filter_words(entries) * 8;
    bytes.div_ceil(PAGE_SIZE_U64)
}

/// The most entries of `row_bytes` that a run of at most `pages` pages holds.
pub(crate) fn capacity_of(pages: u64, row_bytes: u32) -> u64 {
    // pages_for grows by at most one page per entry: bisect on [0, entries one page per row].
    let (mut lo, mut hi) = (0u64, pages * PAGE_SIZE_U64 / stride_of(row_bytes) + 1);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if pages_for(mid, row_bytes) <= pages {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn filter_bits(key: u64, words: u64) -> impl Iterator<Item = u64> {
    let h = mix(key);
    let (h1, h2) = (h, (h >> 32) | 1);
    let bits = words * 64;
    (0..FILTER_HASHES).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % bits)
}

/// Writes a run's entries in key order, then its index, filter and header.
pub(crate) struct RunBuilder<'a> {
    device: &'a Device,
    base: u64,
    table: u32,
    row_bytes: u32,
    capacity: u64,
    entries: u64,
    flush: bool,
    buf: Vec<u8>,
    written: u64,
    index: Vec<u64>,
    keys: Vec<u64>,
    last_key: Option<u64>,
}

impl<'a> RunBuilder<'a> {
    /// A builder of a run of at most `capacity` entries at page `first_page` (`row_bytes` 0: a
    /// tombstone run); `flush: false` leaves its lines unflushed (the test-only fault
    /// `lsm-run-before-persist`).
    pub fn new(
        device: &'a Device,
        first_page: u64,
        table: u32,
        row_bytes: u32,
        capacity: u64,
        flush: bool,
    ) -> Self {
        RunBuilder {
            flush,
            device,
            base: page_offset(first_page),
            table,
            row_bytes,
            capacity,
            entries: 0,
            buf: Vec::with_capacity(CHUNK_BYTES.min((capacity * stride_of(row_bytes)) as usize)),
            written: HEADER_BYTES,
            index: Vec::with_capacity(capacity.div_ceil(INDEX_EVERY) as usize),
            keys: Vec::new(),
            last_key: None,
        }
    }

    /// Appends an entry (`None`: a tombstone, the only kind a tombstone run takes, and one a
    /// row run never takes). Keys must ascend.
    pub fn push(&mut self, key: u64, value: Option<&[u8]>) {
        assert!(self.entries < self.capacity, "run builder overfilled");
        assert_eq!(value.is_none(), self.row_bytes == 0, "entry of the wrong kind for its run");
        assert!(self.last_key.is_none_or(|k| k < key), "run keys must ascend");
        self.last_key = Some(key);
        if self.entries.is_multiple_of(INDEX_EVERY) {
            self.index.push(key);
        }
        self.keys.push(key);
        let stride = stride_of(self.row_bytes) as usize;
        let at = self.buf.len();
        self.buf.resize(at + stride, 0);
        let e = &mut self.buf[at..at + stride];
        e[0..8].copy_from_slice(&key.to_le_bytes());
        let flags = if value.is_none() { FLAG_TOMBSTONE } else { 0 };
        e[8..12].copy_from_slice(&flags.to_le_bytes());
        if let Some(v) = value {
            e[16..16 + v.len()].copy_from_slice(v);
        }
        let c = entry_crc(e);
        e[12..16].copy_from_slice(&c.to_le_bytes());
        self.entries += 1;
        if self.buf.len() >= CHUNK_BYTES {
            self.spill();
        }
    }

    fn spill(&mut self) {
        self.device.write(self.base + self.written, &self.buf);
        if self.flush {
            self.device.flush(self.base + self.written, self.buf.len() as u64);
        }
        self.written += self.buf.len() as u64;
        self.buf.clear();
    }

    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Writes index, filter and header (flushed, not fenced: the caller's barrier persists the
    /// run before the manifest names it). Returns the run's manifest entry.
    pub fn finish(mut self, first_page: u64) -> RunRef {
        self.spill();
        let words = filter_words(self.entries);
        let mut filter = vec![0u64; words as usize];
        for &key in &self.keys {
            for bit in filter_bits(key, words) {
                filter[(bit / 64) as usize] |= 1 << (bit % 64);
            }
        }
        let mut meta = Vec::with_capacity((self.index.len() + filter.len()) * 8);
        for k in &self.index {
            meta.extend_from_slice(&k.to_le_bytes());
        }
        for w in &filter {
            meta.extend_from_slice(&w.to_le_bytes());
        }
        self.device.write(self.base + self.written, &meta);
        if self.flush {
            self.device.flush(self.base + self.written, meta.len() as u64);
        }
        let mut h = [0u8; HEADER_BYTES as usize];
        h[0..8].copy_from_slice(&RUN_MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&self.table.to_le_bytes());
        h[12..16].copy_from_slice(&self.row_bytes.to_le_bytes());
        h[16..24].copy_from_slice(&self.entries.to_le_bytes());
        h[24..28].copy_from_slice(&crc(&meta).to_le_bytes());
        let c = crc(&h[..60]);
        h[60..64].copy_from_slice(&c.to_le_bytes());
        self.device.write(self.base, &h);
        if self.flush {
            self.device.flush(self.base, HEADER_BYTES);
        }
        RunRef {
            table: self.table,
            flags: if self.row_bytes == 0 { RUN_TOMBSTONES } else { 0 },
            first_page,
            pages: pages_for(self.entries, self.row_bytes),
            entries: self.entries,
        }
    }
}

fn entry_crc(e: &[u8]) -> u32 {
    let mut c = storage::crc::crc32c(&e[0..12]);
    c = storage::crc::crc32c_append(c, &e[16..]);
    c
}

/// An opened, checked run.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub r: RunRef,
    base: u64,
    stride: u64,
    row_bytes: u32,
    index_at: u64,
    index_count: u64,
    filter_at: u64,
    filter_words: u64,
    /// `io=fs`: what point reads keep in DRAM (module doc).
    file: Option<std::sync::Arc<FileMeta>>,
}

/// A run's filter and keys in DRAM, for point reads through the file (`io=fs`).
#[derive(Debug)]
pub(crate) struct FileMeta {
    filter: Box<[u64]>,
    keys: Box<[u64]>,
}

/// One entry: key and value (`None`: tombstone).
pub(crate) type Entry<'a> = (u64, Option<&'a [u8]>);

impl Run {
    /// Opens the run the manifest lists as `r` of a table with `row_bytes`-byte rows.
    pub fn open(region: &Region, r: RunRef, row_bytes: u32) -> Result<Run> {
        let bad =
            |why: String| Err(DbError::Corrupt(format!("lsm run at page {}: {why}", r.first_page)));
        let row_bytes = if r.tombstones() { 0 } else { row_bytes };
        if pages_for(r.entries, row_bytes) != r.pages {
            return bad(format!("{} pages for {} entries", r.pages, r.entries));
        }
        let base = page_offset(r.first_page);
        if base + r.pages * PAGE_SIZE_U64 > region.backed_len() {
            return bad("beyond the end of the region file".into());
        }
        let h = region.read(base, HEADER_BYTES as usize);
        if get_u64(h, 0) != RUN_MAGIC || get_u32(h, 60) != crc(&h[..60]) {
            return bad("header magic or checksum".into());
        }
        if get_u32(h, 8) != r.table || get_u32(h, 12) != row_bytes || get_u64(h, 16) != r.entries {
            return bad("header disagrees with the manifest".into());
        }
        let stride = stride_of(row_bytes);
        let index_at = base + HEADER_BYTES + r.entries * stride;
        let index_count = r.entries.div_ceil(INDEX_EVERY);
        let filter_at = index_at + index_count * 8;
        let filter_words = filter_words(r.entries);
        let meta = region.read(index_at, ((index_count + filter_words) * 8) as usize);
        if get_u32(h, 24) != crc(meta) {
            return bad("index or filter checksum".into());
        }
        let file = None;
        Ok(Run { r, base, stride, row_bytes, index_at, index_count, filter_at, filter_words, file })
    }

    /// [`Run::open`], and for `io=fs` the filter and keys point reads keep in DRAM, read once
    /// here (from the mapping: opening is not the read path the model is about).
    pub fn open_for(region: &Region, r: RunRef, row_bytes: u32, io_fs: bool) -> Result<Run> {
        let mut run = Run::open(region, r, row_bytes)?;
        if io_fs {
            let filter = (0..run.filter_words)
                .map(|w| region.read_u64(run.filter_at + w * 8))
                .collect::<Vec<_>>()
                .into_boxed_slice();
            let mut keys = Vec::with_capacity(run.r.entries as usize);
            for i in 0..run.r.entries {
                let k = run.key_at(region, i);
                if keys.last().is_some_and(|&l| l >= k) {
                    return Err(DbError::Corrupt(format!(
                        "lsm run at page {}: keys out of order at entry {i}",
                        run.r.first_page
                    )));
                }
                keys.push(k);
            }
            let keys = keys.into_boxed_slice();
            run.file = Some(std::sync::Arc::new(FileMeta { filter, keys }));
        }
        Ok(run)
    }

    /// Bytes of one entry.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// Whether this run was opened for point reads through the file.
    pub fn reads_file(&self) -> bool {
        self.file.is_some()
    }

    /// The entry for `key` read through the file (`io=fs`, module doc): its row into `out`
    /// (`Some(true)`), a tombstone (`Some(false)`), or no entry (`None`). `buf` is the DRAM
    /// buffer the entry is read into. Only for a run opened with `io_fs`.
    pub fn get_from_file(
        &self,
        device: &Device,
        key: u64,
        out: &mut Vec<u8>,
        buf: &mut Vec<u8>,
    ) -> Result<Option<bool>> {
        let Some(meta) = &self.file else {
            return Err(DbError::Invalid(
                "lsm: a point read through the file of a run not opened for io=fs".into(),
            ));
        };
        let in_filter = filter_bits(key, self.filter_words).all(|bit| {
            meta.filter.get((bit / 64) as usize).is_some_and(|w| w & (1 << (bit % 64)) != 0)
        });
        if !in_filter {
            return Ok(None);
        }
        let i = meta.keys.partition_point(|&k| k < key);
        if meta.keys.get(i) != Some(&key) {
            return Ok(None);
        }
        let at = self.base + HEADER_BYTES + i as u64 * self.stride;
        device.read_into(at, self.stride as usize, buf)?;
        let (k, v) = self.decode(buf, i as u64)?;
        if k != key {
            return Err(DbError::Corrupt(format!(
                "lsm run at page {}: entry {i} holds key {k}, its key in the run was {key}",
                self.r.first_page
            )));
        }
        out.clear();
        if let Some(v) = v {
            out.extend_from_slice(v);
        }
        Ok(Some(v.is_some()))
    }

    fn may_contain(&self, region: &Region, key: u64) -> bool {
        filter_bits(key, self.filter_words).all(|bit| {
            let w = region.read_u64(self.filter_at + (bit / 64) * 8);
            w & (1 << (bit % 64)) != 0
        })
    }

    /// Entry `i` (checked).
    pub fn entry<'r>(&self, region: &'r Region, i: u64) -> Result<Entry<'r>> {
        let e = region.read(self.base + HEADER_BYTES + i * self.stride, self.stride as usize);
        self.decode(e, i)
    }

    /// Entry `i` from its `stride` bytes `e` (checked).
    fn decode<'e>(&self, e: &'e [u8], i: u64) -> Result<Entry<'e>> {
        let flags = get_u32(e, 8);
        let kind = if self.row_bytes == 0 { FLAG_TOMBSTONE } else { 0 };
        if get_u32(e, 12) != entry_crc(e) || flags != kind {
            return Err(DbError::Corrupt(format!(
                "lsm run at page {}: entry {i} fails its checksum",
                self.r.first_page
            )));
        }
        let value = (self.row_bytes > 0).then(|| &e[16..16 + self.row_bytes as usize]);
        Ok((get_u64(e, 0), value))
    }

    /// The key of entry `i`, unchecked (for counting; readers of rows use [`Run::entry`]).
    pub fn key_at(&self, region: &Region, i: u64) -> u64 {
        region.read_u64(self.base + HEADER_BYTES + i * self.stride)
    }

    /// Index of the first entry with key >= `key` (`entries` if none).
    pub fn lower_bound(&self, region: &Region, key: u64) -> u64 {
        // The sparse index narrows to one block of INDEX_EVERY entries.
        let (mut lo, mut hi) = (0u64, self.index_count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if region.read_u64(self.index_at + mid * 8) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let block = lo.saturating_sub(1);
        let mut i = block * INDEX_EVERY;
        let end = ((block + 1) * INDEX_EVERY).min(self.r.entries);
        while i < end && self.key_at(region, i) < key {
            i += 1;
        }
        i
    }

    /// The entry for `key`, if the run has one.
    pub fn get<'r>(&self, region: &'r Region, key: u64) -> Result<Option<Option<&'r [u8]>>> {
        if !self.may_contain(region, key) {
            return Ok(None);
        }
        let i = self.lower_bound(region, key);
        if i >= self.r.entries {
            return Ok(None);
        }
        let (k, v) = self.entry(region, i)?;
        Ok((k == key).then_some(v))
    }

    /// Checks every entry: checksums and ascending keys. Returns the live rows.
    pub fn check(&self, region: &Region) -> std::result::Result<u64, String> {
        let mut last = None;
        let mut live = 0;
        for i in 0..self.r.entries {
            let (k, v) = self.entry(region, i).map_err(|e| e.to_string())?;
            if last.is_some_and(|l| l >= k) {
                return Err(format!("run at page {}: keys out of order at {i}", self.r.first_page));
            }
            if i % INDEX_EVERY == 0 && region.read_u64(self.index_at + (i / INDEX_EVERY) * 8) != k {
                return Err(format!("run at page {}: index disagrees at {i}", self.r.first_page));
            }
            last = Some(k);
            live += v.is_some() as u64;
        }
        Ok(live)
    }
}

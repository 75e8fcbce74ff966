//! Byte layouts of an NVWAL region (docs/nvwal.md has the same tables): the region header, the
//! block table of the user-level heap (Kim et al., ASPLOS 2016, §3.3), the log records that hold
//! SQLite's WAL frames (§3.2, Fig. 2), and the differential-logging range computation (several
//! changed byte ranges per frame, in a range table at the start of the record's payload).
//!
//! Invariant: every field read from a region is validated here or by the caller before it is
//! used as an offset, a length or an index; damage is `DbError::Corrupt`, never a panic.

use storage::{DbError, Result};

/// `NVWALSQ1`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVWALSQ1");
/// The magic word while a format is in progress: persisted before anything else of the header,
/// replaced by [`MAGIC`] once the rest is durable, so a format cut short is recognised as ours
/// and done again (never mistaken for a damaged or foreign region).
pub const FORMATTING_MAGIC: u64 = u64::from_le_bytes(*b"NVWALfmt");
/// 3: every structure carries a checksum of ours (sealed header words and block-table entries,
/// a crc32c per log record, a crc32c per 4 KiB chunk of the database file, issue 37); 2 had
/// none; 1 held one differential range per record. Older regions are refused
/// (`DbError::Format`), not read.
pub const VERSION: u64 = 3;

/// The region header occupies the first 4 KiB.
pub const HEADER_BYTES: u64 = 4096;
// Header fields (byte offsets; every field is an aligned u64).
pub const H_MAGIC: u64 = 0;
pub const H_VERSION: u64 = 8;
pub const H_BLOCK_BYTES: u64 = 16;
pub const H_BLOCK_COUNT: u64 = 24;
pub const H_META_OFF: u64 = 32;
pub const H_BLOCKS_OFF: u64 = 40;
pub const H_DB_OFF: u64 = 48;
pub const H_DB_CAP: u64 = 56;
/// crc32c of bytes `0..64` (the geometry above), so a damaged geometry is detected.
pub const H_GEOMETRY_CRC: u64 = 64;
/// Sealed ([`seal`], [`SEAL_CREATED`]): 1 once the database has been created and its WAL mode
/// and schema are durable, 0 before. A raw 0 (a cleared bit, a zeroed word) is not a sealed 0.
pub const H_FORMATTED: u64 = 72;
/// Sealed ([`seal_len`]): logical length of the database file, persisted at its `xSync`.
pub const H_DB_LEN: u64 = 80;
/// Sealed ([`SEAL_NEXT`], index [`HEADER_LINK`]): first block of the log's block list (block
/// index + 1; 0: the list is empty).
pub const H_FIRST_BLOCK: u64 = 88;
/// SQLite's 32-byte WAL header, alone in its cache line with its checksum word.
pub const H_WAL_HEADER: u64 = 128;
pub const WAL_HEADER_BYTES: usize = 32;
/// Sealed ([`SEAL_WAL_HEADER`]): crc32c of the WAL header and its epoch, written and flushed
/// with them.
pub const H_WAL_CRC: u64 = H_WAL_HEADER + WAL_HEADER_BYTES as u64;
/// The WAL generation's epoch: one more at every new WAL header, copied into each record of
/// the generation, persisted with the header before the generation's first commit mark. No
/// crash leaves a committed record of a later epoch than this word; an older copy of the
/// header does (issue 37: the fuzzer's stale page 0).
pub const H_WAL_EPOCH: u64 = H_WAL_CRC + 8;

/// One entry of the block table: `[state u64][next u64]`, each sealed with the block's index
/// ([`SEAL_STATE`], [`SEAL_NEXT`]), so a damaged, zeroed or moved entry is detected.
pub const META_ENTRY_BYTES: u64 = 16;

/// The seal index of the header's link (a block's own `next` word is sealed with its index).
pub const HEADER_LINK: u32 = u32::MAX;

// What a sealed word holds (part of its checksum, so a word copied to another field fails).
pub const SEAL_CREATED: u32 = 1;
pub const SEAL_STATE: u32 = 2;
pub const SEAL_NEXT: u32 = 3;
pub const SEAL_WAL_HEADER: u32 = 4;

/// A 32-bit value with a crc32c of `(kind, index, value)` in the high half: an aligned word is
/// persisted atomically, so the seal never tears from its value, and any damage (a flip, a
/// zeroed or foreign word, an entry of another block) fails [`unseal`].
pub fn seal(kind: u32, index: u32, value: u32) -> u64 {
    (u64::from(seal_crc(kind, index, u64::from(value))) << 32) | u64::from(value)
}

/// The value of a word [`seal`] wrote for `(kind, index)`, or `None` if it is damaged.
pub fn unseal(word: u64, kind: u32, index: u32) -> Option<u32> {
    let value = word as u32;
    (seal(kind, index, value) == word).then_some(value)
}

fn seal_crc(kind: u32, index: u32, value: u64) -> u32 {
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&kind.to_le_bytes());
    b[4..8].copy_from_slice(&index.to_le_bytes());
    b[8..16].copy_from_slice(&value.to_le_bytes());
    storage::crc::crc32c(&b)
}

/// Largest database length a sealed length word holds (48 bits).
pub const MAX_SEALED_LEN: u64 = (1 << 48) - 1;

/// A length below 2^48 with 16 bits of crc32c in the top of the word (see [`seal`]).
pub fn seal_len(len: u64) -> u64 {
    debug_assert!(len <= MAX_SEALED_LEN);
    let len = len & MAX_SEALED_LEN;
    (u64::from(seal_crc(0x4C45_4E00, 0, len) as u16) << 48) | len
}

pub fn unseal_len(word: u64) -> Option<u64> {
    let len = word & MAX_SEALED_LEN;
    (seal_len(len) == word).then_some(len)
}

/// The database file's checksum granule: a crc32c (of the chunk's index and bytes) per 4 KiB.
pub const CHUNK_BYTES: u64 = 4096;
/// Bytes of one entry of the chunk checksum table.
pub const CHUNK_SUM_BYTES: u64 = 4;

/// The checksum a database chunk's table entry holds.
pub fn chunk_sum(chunk: u64, bytes: &[u8]) -> u32 {
    storage::crc::crc32c_append(storage::crc::crc32c(&chunk.to_le_bytes()), bytes)
}
/// Block states (paper §3.3's tri-state flag).
pub const BLOCK_FREE: u64 = 0;
pub const BLOCK_PENDING: u64 = 1;
pub const BLOCK_IN_USE: u64 = 2;

/// SQLite's WAL frame header (page number, commit size, salt-1, salt-2, checksum-1, -2).
pub const FRAME_HEADER_BYTES: usize = 24;
/// Our log record header: commit word, frame index, base frame, range count, payload length,
/// SQLite's header, crc32c, the generation's epoch.
pub const RECORD_HEADER_BYTES: usize = 56;
/// The record checksum covers the header after the commit word (all but the checksum itself)
/// and the payload: the record is written whole before its commit word is set.
const RECORD_CRC_AT: usize = 48;
/// Most byte ranges one differential record holds; beyond it the ranges separated by the
/// shortest unchanged gaps are merged.
pub const MAX_RANGES: usize = 32;
/// One range-table entry: in-page offset `u16`, length − 1 `u16` (pages are at most 64 KiB).
pub const RANGE_ENTRY_BYTES: usize = 4;
/// Low half of a set commit word (`ls`, `e`); the high half is the record's own checksum, so
/// a mark left at a place by an older record never commits a newer one.
pub const COMMIT_TAG: u64 = 0x4E57_434D;
/// `base` of a record that holds a whole page.
pub const NO_BASE: u32 = u32::MAX;

pub const MIN_PAGE_BYTES: u32 = 512;
pub const MAX_PAGE_BYTES: u32 = 65536;

const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(8));
const _: () = assert!(H_WAL_HEADER.is_multiple_of(64) && WAL_HEADER_BYTES <= 64);
const _: () = assert!(H_FIRST_BLOCK + 8 <= H_WAL_HEADER);
const _: () = assert!(H_WAL_EPOCH + 8 <= H_WAL_HEADER + 64, "the WAL header's line holds all");
const _: () = assert!(CHUNK_BYTES.is_multiple_of(64));

/// Where things are in a region; fixed at format time. The database chunks' checksum table
/// lies between the log blocks and the database area: `[sums_off(), db_off)`, one
/// [`CHUNK_SUM_BYTES`] entry per [`CHUNK_BYTES`] of `db_cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub block_bytes: u64,
    pub block_count: u64,
    pub meta_off: u64,
    pub blocks_off: u64,
    pub db_off: u64,
    pub db_cap: u64,
}

fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

impl Layout {
    /// The layout of a region of `region_bytes` with `log_bytes` of log blocks.
    pub fn plan(region_bytes: u64, log_bytes: u64, block_bytes: u64) -> Result<Layout> {
        if !(4096..=1 << 20).contains(&block_bytes) || !block_bytes.is_multiple_of(64) {
            return Err(DbError::Invalid(format!(
                "sqlite-nvwal: block_bytes must be a multiple of 64 in 4 KiB..=1 MiB, not \
                 {block_bytes}"
            )));
        }
        let block_count = log_bytes / block_bytes;
        if block_count < 4 {
            return Err(DbError::Invalid(format!(
                "sqlite-nvwal: log_bytes {log_bytes} holds fewer than 4 blocks of {block_bytes}"
            )));
        }
        let meta_off = HEADER_BYTES;
        let blocks_off = align_up(meta_off + block_count * META_ENTRY_BYTES, 4096);
        let sums_off = align_up(blocks_off + block_count * block_bytes, 4096);
        let min_db = 1 << 20;
        let full = || {
            DbError::RegionFull(format!(
                "sqlite-nvwal: a {region_bytes}-byte region cannot hold {log_bytes} bytes of log \
                 and a 1 MiB database; give a larger --size or a smaller log_bytes"
            ))
        };
        // Room after the log: a chunk of database and its table entry each.
        let rest = region_bytes.checked_sub(sums_off).ok_or_else(full)?;
        let chunks = rest / (CHUNK_BYTES + CHUNK_SUM_BYTES);
        let db_off = sums_off + align_up(chunks * CHUNK_SUM_BYTES, 4096);
        let db_cap = (region_bytes.saturating_sub(db_off)).min(chunks * CHUNK_BYTES);
        if db_cap < min_db {
            return Err(full());
        }
        Ok(Layout { block_bytes, block_count, meta_off, blocks_off, db_off, db_cap })
    }

    pub fn geometry_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let fields = [
            MAGIC,
            VERSION,
            self.block_bytes,
            self.block_count,
            self.meta_off,
            self.blocks_off,
            self.db_off,
            self.db_cap,
        ];
        for (i, f) in fields.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        b
    }

    /// Decodes and validates a header's geometry against the region's length.
    pub fn decode(geometry: &[u8], crc: u64, region_bytes: u64) -> Result<Layout> {
        let field = |i: usize| u64::from_le_bytes(geometry[i * 8..i * 8 + 8].try_into().unwrap());
        let bad = |m: String| Err(DbError::Corrupt(format!("sqlite-nvwal header: {m}")));
        if u64::from(storage::crc::crc32c(&geometry[..64])) != crc {
            return bad("geometry checksum mismatch".into());
        }
        if field(1) != VERSION {
            return Err(DbError::Format(format!(
                "sqlite-nvwal: region format version {} (this build reads only {VERSION}: \
                 version 2 had no checksums, version 1 stored one differential range per \
                 record); use a blank region",
                field(1)
            )));
        }
        let l = Layout {
            block_bytes: field(2),
            block_count: field(3),
            meta_off: field(4),
            blocks_off: field(5),
            db_off: field(6),
            db_cap: field(7),
        };
        let blocks_end =
            l.block_count.checked_mul(l.block_bytes).and_then(|b| b.checked_add(l.blocks_off));
        let meta_end =
            l.block_count.checked_mul(META_ENTRY_BYTES).and_then(|b| b.checked_add(l.meta_off));
        let db_end = l.db_off.checked_add(l.db_cap);
        match (blocks_end, meta_end, db_end) {
            (Some(be), Some(me), Some(de))
                if l.meta_off >= HEADER_BYTES
                    && me <= l.blocks_off
                    && be <= l.db_off
                    && de <= region_bytes
                    && l.sums_off() >= be
                    && (l.db_off - l.sums_off()) / CHUNK_SUM_BYTES >= l.chunks()
                    && l.block_bytes >= 4096
                    && l.block_bytes.is_multiple_of(64) =>
            {
                Ok(l)
            }
            _ => bad(format!("geometry {l:?} does not fit a {region_bytes}-byte region")),
        }
    }

    /// Start of the chunk checksum table (just after the log blocks).
    pub fn sums_off(&self) -> u64 {
        align_up(
            self.blocks_off.saturating_add(self.block_count.saturating_mul(self.block_bytes)),
            4096,
        )
    }

    /// Chunks of the database area (each with a table entry).
    pub fn chunks(&self) -> u64 {
        self.db_cap.div_ceil(CHUNK_BYTES)
    }

    /// Region offset of chunk `chunk`'s table entry.
    pub fn sum(&self, chunk: u64) -> u64 {
        self.sums_off() + chunk * CHUNK_SUM_BYTES
    }

    pub fn meta(&self, block: u32) -> u64 {
        self.meta_off + u64::from(block) * META_ENTRY_BYTES
    }

    pub fn block(&self, block: u32) -> u64 {
        self.blocks_off + u64::from(block) * self.block_bytes
    }
}

/// A log record's header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub commit: u64,
    /// SQLite's frame number, from 0.
    pub frame: u32,
    /// The frame this record's bytes apply to (`NO_BASE`: a whole page).
    pub base: u32,
    /// Entries of the range table at the payload's start (0 for a whole page).
    pub ranges: u32,
    /// Payload bytes after the header: the range table, then the ranges' bytes (or the page).
    pub len: u32,
    pub frame_header: [u8; FRAME_HEADER_BYTES],
    /// crc32c of the encoded header's bytes `8..48` and the payload ([`RecordHeader::sum`]).
    pub crc: u32,
    /// The WAL generation's epoch ([`H_WAL_EPOCH`] when it was written; covered by `crc`).
    pub epoch: u32,
}

impl RecordHeader {
    pub fn encode(&self) -> [u8; RECORD_HEADER_BYTES] {
        let mut b = [0u8; RECORD_HEADER_BYTES];
        b[0..8].copy_from_slice(&self.commit.to_le_bytes());
        b[8..12].copy_from_slice(&self.frame.to_le_bytes());
        b[12..16].copy_from_slice(&self.base.to_le_bytes());
        b[16..20].copy_from_slice(&self.ranges.to_le_bytes());
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..48].copy_from_slice(&self.frame_header);
        b[48..52].copy_from_slice(&self.crc.to_le_bytes());
        b[52..56].copy_from_slice(&self.epoch.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> RecordHeader {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let mut frame_header = [0u8; FRAME_HEADER_BYTES];
        frame_header.copy_from_slice(&b[24..48]);
        RecordHeader {
            commit: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            frame: u32_at(8),
            base: u32_at(12),
            ranges: u32_at(16),
            len: u32_at(20),
            frame_header,
            crc: u32_at(48),
            epoch: u32_at(52),
        }
    }

    /// The record checksum of this header (its `crc` field aside) and `payload`.
    pub fn sum(&self, payload: &[u8]) -> u32 {
        let b = self.encode();
        let head =
            storage::crc::crc32c_append(storage::crc::crc32c(&b[8..RECORD_CRC_AT]), &b[52..56]);
        storage::crc::crc32c_append(head, payload)
    }

    /// Whether the record's checksum matches it and `payload`.
    pub fn sum_ok(&self, payload: &[u8]) -> bool {
        self.crc == self.sum(payload)
    }

    /// Bytes the record occupies (header + payload, rounded up to 8).
    pub fn record_bytes(len: u32) -> u64 {
        align_up(RECORD_HEADER_BYTES as u64 + u64::from(len), 8)
    }

    pub fn pgno(&self) -> u32 {
        frame_pgno(&self.frame_header)
    }
}

/// The page number field of a SQLite frame header (big-endian).
pub fn frame_pgno(h: &[u8]) -> u32 {
    u32::from_be_bytes(h[0..4].try_into().unwrap())
}

/// The commit-size field: non-zero on a transaction's commit frame.
pub fn frame_commit_size(h: &[u8]) -> u32 {
    u32::from_be_bytes(h[4..8].try_into().unwrap())
}

/// Salt-1 and salt-2 of a frame header, or of a WAL header (bytes 16..24).
pub fn frame_salts(h: &[u8]) -> [u8; 8] {
    h[8..16].try_into().unwrap()
}

pub fn wal_header_salts(h: &[u8]) -> [u8; 8] {
    h[16..24].try_into().unwrap()
}

/// Page size from a WAL header (big-endian at byte 8; 1 means 65536), if valid.
pub fn wal_header_page_bytes(h: &[u8]) -> Option<u32> {
    let raw = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let size = if raw == 1 { 65536 } else { raw };
    (size.is_power_of_two() && (MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&size)).then_some(size)
}

/// Differential logging (§3.2): the byte ranges `(off, len)` outside which `new` equals `old`,
/// sorted, at most `max_ranges` (clamped to `1..=MAX_RANGES`). Runs of changed bytes separated
/// by an unchanged gap of at most `RANGE_ENTRY_BYTES` are one range (storing the gap costs no
/// more than a table entry); with more than `max_ranges` ranges left, the ones separated by the
/// shortest gaps are merged, which keeps the stored total (table + bytes) minimal for that
/// bound. `max_ranges = 1` is the paper's single range (clean bytes before and after the dirty
/// portion truncated). Equal pages give no range.
pub fn diff_ranges(old: &[u8], new: &[u8], max_ranges: usize) -> Vec<(u32, u32)> {
    debug_assert_eq!(old.len(), new.len());
    let max_ranges = max_ranges.clamp(1, MAX_RANGES);
    // Runs of changed bytes, joined across short gaps; at most page/6 + 1 entries.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    let n = old.len().min(new.len());
    while i < n {
        if old[i] == new[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && old[i] != new[i] {
            i += 1;
        }
        match runs.last_mut() {
            Some(last) if start - last.1 <= RANGE_ENTRY_BYTES => last.1 = i,
            _ => runs.push((start, i)),
        }
    }
    if runs.len() > max_ranges {
        // Keep the `max_ranges - 1` longest gaps as splits (ties: the earlier gap).
        let mut gaps: Vec<(usize, usize)> =
            runs.windows(2).enumerate().map(|(k, w)| (w[1].0 - w[0].1, k)).collect();
        gaps.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut split = vec![false; runs.len()];
        for (_, k) in gaps.iter().take(max_ranges - 1) {
            split[*k] = true;
        }
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(max_ranges);
        let mut open = false;
        for (k, r) in runs.iter().enumerate() {
            match merged.last_mut() {
                Some(last) if open => last.1 = r.1,
                _ => merged.push(*r),
            }
            open = !split[k];
        }
        runs = merged;
    }
    runs.into_iter().map(|(s, e)| (s as u32, (e - s) as u32)).collect()
}

/// The payload of a differential record: the range table, then each range's bytes of `new`.
pub fn encode_ranges(new: &[u8], ranges: &[(u32, u32)]) -> Vec<u8> {
    let data: usize = ranges.iter().map(|r| r.1 as usize).sum();
    let mut out = Vec::with_capacity(ranges.len() * RANGE_ENTRY_BYTES + data);
    for (off, len) in ranges {
        debug_assert!(*len >= 1 && *off <= 0xFFFF && *len <= 0x1_0000);
        out.extend_from_slice(&(*off as u16).to_le_bytes());
        out.extend_from_slice(&((*len - 1) as u16).to_le_bytes());
    }
    for (off, len) in ranges {
        out.extend_from_slice(&new[*off as usize..(*off + *len) as usize]);
    }
    out
}

/// Decodes and validates a differential record's range table: at most `MAX_RANGES` entries,
/// each inside a `page_bytes` page, sorted and not overlapping, and the table plus the ranges'
/// bytes exactly `payload.len()`. `None` on any damage.
pub fn decode_ranges(payload: &[u8], count: u32, page_bytes: u32) -> Option<Vec<(u32, u32)>> {
    let count = count as usize;
    if count > MAX_RANGES {
        return None;
    }
    let table = payload.get(..count * RANGE_ENTRY_BYTES)?;
    let mut ranges = Vec::with_capacity(count);
    let (mut end, mut data) = (0u32, 0usize);
    for e in table.chunks_exact(RANGE_ENTRY_BYTES) {
        let off = u32::from(u16::from_le_bytes([e[0], e[1]]));
        let len = u32::from(u16::from_le_bytes([e[2], e[3]])) + 1;
        if off < end || len > page_bytes || off > page_bytes - len {
            return None;
        }
        end = off + len;
        data += len as usize;
        ranges.push((off, len));
    }
    (count * RANGE_ENTRY_BYTES + data == payload.len()).then_some(ranges)
}

/// Applies a differential payload (validated by [`decode_ranges`]) to `page`, its base
/// version, giving the frame's page.
pub fn apply_ranges(page: &mut [u8], ranges: &[(u32, u32)], payload: &[u8]) -> Result<()> {
    let mut at = ranges.len() * RANGE_ENTRY_BYTES;
    for (off, len) in ranges {
        let (off, len) = (*off as usize, *len as usize);
        match (page.get_mut(off..off + len), payload.get(at..at + len)) {
            (Some(target), Some(bytes)) => target.copy_from_slice(bytes),
            _ => {
                return Err(DbError::Corrupt(format!(
                    "sqlite-nvwal: record range {off}+{len} outside a {}-byte page or its \
                     {}-byte payload",
                    page.len(),
                    payload.len()
                )));
            }
        }
        at += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(old: &[u8], new: &[u8], max: usize) -> Vec<(u32, u32)> {
        let ranges = diff_ranges(old, new, max);
        let payload = encode_ranges(new, &ranges);
        let decoded = decode_ranges(&payload, ranges.len() as u32, old.len() as u32).unwrap();
        assert_eq!(decoded, ranges);
        let mut rebuilt = old.to_vec();
        apply_ranges(&mut rebuilt, &ranges, &payload).unwrap();
        assert_eq!(rebuilt, new);
        ranges
    }

    #[test]
    fn diff_of_equal_pages_is_empty_and_apply_restores() {
        let old = vec![7u8; 4096];
        assert!(diff_ranges(&old, &old, MAX_RANGES).is_empty());
        assert!(round_trip(&old, &old, MAX_RANGES).is_empty());
        let mut new = old.clone();
        new[100] = 1;
        new[3000] = 2;
        assert_eq!(round_trip(&old, &new, 1), vec![(100, 2901)], "the paper's one range");
        assert_eq!(round_trip(&old, &new, MAX_RANGES), vec![(100, 1), (3000, 1)]);
        // The page's first and last bytes.
        new[0] = 9;
        new[4095] = 9;
        assert_eq!(
            round_trip(&old, &new, MAX_RANGES),
            vec![(0, 1), (100, 1), (3000, 1), (4095, 1)]
        );
        assert_eq!(round_trip(&old, &new, 1), vec![(0, 4096)]);
    }

    #[test]
    fn a_gap_is_split_only_when_longer_than_a_table_entry() {
        let old = vec![0u8; 1024];
        for gap in 0..12usize {
            let mut new = old.clone();
            new[10] = 1;
            new[11 + gap] = 1;
            let ranges = round_trip(&old, &new, MAX_RANGES);
            if gap <= RANGE_ENTRY_BYTES {
                assert_eq!(ranges, vec![(10, 2 + gap as u32)], "gap {gap}: one range");
            } else {
                assert_eq!(ranges, vec![(10, 1), (11 + gap as u32, 1)], "gap {gap}: two");
            }
            // Splitting never stores more than the merged range would (table + bytes).
            let stored = |r: &[(u32, u32)]| -> usize {
                r.iter().map(|x| x.1 as usize + RANGE_ENTRY_BYTES).sum()
            };
            assert!(stored(&ranges) <= stored(&diff_ranges(&old, &new, 1)));
        }
    }

    #[test]
    fn beyond_the_bound_the_closest_ranges_merge() {
        let old = vec![0u8; 4096];
        let mut new = old.clone();
        // 40 one-byte edits, every 50 bytes, except two far gaps.
        let mut at = 0usize;
        let mut spots = Vec::new();
        for k in 0..40 {
            at += if k == 10 || k == 30 { 500 } else { 50 };
            new[at] = 1;
            spots.push(at);
        }
        let ranges = round_trip(&old, &new, MAX_RANGES);
        assert_eq!(ranges.len(), MAX_RANGES);
        // The two 500-byte gaps are kept as splits.
        for k in [10, 30] {
            assert!(ranges.iter().any(|r| r.0 as usize == spots[k]), "split at the far gap {k}");
        }
        assert_eq!(round_trip(&old, &new, 3).len(), 3);
        // Every other byte changed: one range.
        let alt: Vec<u8> = (0..4096).map(|i| (i % 2) as u8).collect();
        assert_eq!(round_trip(&old, &alt, MAX_RANGES), vec![(1, 4095)]);
    }

    #[test]
    fn a_damaged_range_table_is_refused() {
        let old = vec![0u8; 4096];
        let mut new = old.clone();
        new[10] = 1;
        new[2000..2010].fill(2);
        let ranges = diff_ranges(&old, &new, MAX_RANGES);
        let payload = encode_ranges(&new, &ranges);
        let n = ranges.len() as u32;
        assert!(decode_ranges(&payload, n, 4096).is_some());
        // Count too large, or larger than the table.
        assert!(decode_ranges(&payload, MAX_RANGES as u32 + 1, 4096).is_none());
        assert!(decode_ranges(&payload, u32::MAX, 4096).is_none());
        assert!(decode_ranges(&payload, n + 1, 4096).is_none());
        assert!(decode_ranges(&payload[..3], n, 4096).is_none());
        // Out of the page.
        let mut bad = payload.clone();
        bad[4..6].copy_from_slice(&4090u16.to_le_bytes());
        assert!(decode_ranges(&bad, n, 4096).is_none());
        // Overlapping (or unsorted).
        let mut bad = payload.clone();
        bad[4..6].copy_from_slice(&10u16.to_le_bytes());
        assert!(decode_ranges(&bad, n, 4096).is_none());
        // Lengths disagree with the payload.
        assert!(decode_ranges(&payload[..payload.len() - 1], n, 4096).is_none());
        let mut longer = payload.clone();
        longer.push(0);
        assert!(decode_ranges(&longer, n, 4096).is_none());
        // apply_ranges refuses ranges it was not given valid ones for, without a panic.
        let mut page = old.clone();
        assert!(apply_ranges(&mut page, &[(4000, 200)], &payload).is_err());
        assert!(apply_ranges(&mut page, &[(0, 200)], &payload[..10]).is_err());
    }

    /// Versions 1 (one range per record) and 2 (no checksums, issue 37) are refused with a
    /// clear `Format` error, never read.
    #[test]
    fn a_version_1_or_2_region_is_refused() {
        let l = Layout::plan(64 << 20, 16 << 20, 8192).unwrap();
        for old in [1u64, 2] {
            let mut g = l.geometry_bytes();
            g[8..16].copy_from_slice(&old.to_le_bytes());
            let crc = u64::from(storage::crc::crc32c(&g));
            match Layout::decode(&g, crc, 64 << 20) {
                Err(DbError::Format(m)) => {
                    assert!(m.contains(&format!("version {old} ")), "{m}");
                    assert!(m.contains("use a blank region"), "{m}");
                }
                other => panic!("expected a format error, got {other:?}"),
            }
        }
    }

    #[test]
    fn sealed_words_reject_damage_and_other_fields() {
        let w = seal(SEAL_STATE, 7, 2);
        assert_eq!(unseal(w, SEAL_STATE, 7), Some(2));
        assert_eq!(unseal(w, SEAL_STATE, 8), None, "another block's entry");
        assert_eq!(unseal(w, SEAL_NEXT, 7), None, "another field");
        assert_eq!(unseal(0, SEAL_CREATED, 0), None, "a raw zero");
        for bit in 0..64 {
            assert_eq!(unseal(w ^ (1 << bit), SEAL_STATE, 7), None, "bit {bit}");
        }
        let len = seal_len(123_456);
        assert_eq!(unseal_len(len), Some(123_456));
        for bit in 0..64 {
            assert_eq!(unseal_len(len ^ (1 << bit)), None, "bit {bit}");
        }
    }

    #[test]
    fn the_chunk_table_covers_the_database_area() {
        for region in [4u64 << 20, 24 << 20, 1 << 30, (1 << 30) + 12345] {
            let l = Layout::plan(region, 2 << 20, 8192).unwrap();
            assert!(l.sums_off() >= l.blocks_off + l.block_count * l.block_bytes);
            assert!(l.sum(l.chunks() - 1) + CHUNK_SUM_BYTES <= l.db_off, "{region}");
            assert!(l.db_off + l.db_cap <= region);
            assert_eq!(Layout::decode(&l.geometry_bytes(), geometry_crc(&l), region).unwrap(), l);
        }
    }

    fn geometry_crc(l: &Layout) -> u64 {
        u64::from(storage::crc::crc32c(&l.geometry_bytes()))
    }

    #[test]
    fn layout_round_trips_and_rejects_damage() {
        let l = Layout::plan(64 << 20, 16 << 20, 8192).unwrap();
        let g = l.geometry_bytes();
        let crc = u64::from(storage::crc::crc32c(&g));
        assert_eq!(Layout::decode(&g, crc, 64 << 20).unwrap(), l);
        let mut bad = g;
        bad[30] ^= 1;
        assert!(matches!(Layout::decode(&bad, crc, 64 << 20), Err(DbError::Corrupt(_))));
        assert!(Layout::decode(&g, crc, 32 << 20).is_err(), "region shorter than the layout");
        assert!(Layout::plan(2 << 20, 16 << 20, 8192).is_err());
        assert!(Layout::plan(64 << 20, 16 << 20, 100).is_err());
    }
}

//! Byte layouts of an NVWAL region (docs/nvwal.md has the same tables): the region header, the
//! block table of the user-level heap (Kim et al., ASPLOS 2016, §3.3), the log records that hold
//! SQLite's WAL frames (§3.2, Fig. 2), and the differential-logging range computation.
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
pub const VERSION: u64 = 1;

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
/// 1 once the database has been created and its WAL mode and schema are durable.
pub const H_FORMATTED: u64 = 72;
/// Logical length of the database file, persisted at the database file's `xSync`.
pub const H_DB_LEN: u64 = 80;
/// First block of the log's block list (block index + 1; 0: the list is empty).
pub const H_FIRST_BLOCK: u64 = 88;
/// SQLite's 32-byte WAL header, alone in its cache line.
pub const H_WAL_HEADER: u64 = 128;
pub const WAL_HEADER_BYTES: usize = 32;

/// One entry of the block table: `[state u64][next u64]`.
pub const META_ENTRY_BYTES: u64 = 16;
/// Block states (paper §3.3's tri-state flag).
pub const BLOCK_FREE: u64 = 0;
pub const BLOCK_PENDING: u64 = 1;
pub const BLOCK_IN_USE: u64 = 2;

/// SQLite's WAL frame header (page number, commit size, salt-1, salt-2, checksum-1, -2).
pub const FRAME_HEADER_BYTES: usize = 24;
/// Our log record header: commit word, frame index, base frame, stored range, SQLite's header.
pub const RECORD_HEADER_BYTES: usize = 48;
/// Low half of a set commit word; the high half holds the checksum in `cs` mode.
pub const COMMIT_TAG: u64 = 0x4E57_434D;
/// `base` of a record that holds a whole page.
pub const NO_BASE: u32 = u32::MAX;

pub const MIN_PAGE_BYTES: u32 = 512;
pub const MAX_PAGE_BYTES: u32 = 65536;

const _: () = assert!(RECORD_HEADER_BYTES.is_multiple_of(8));
const _: () = assert!(H_WAL_HEADER.is_multiple_of(64) && WAL_HEADER_BYTES <= 64);
const _: () = assert!(H_FIRST_BLOCK + 8 <= H_WAL_HEADER);

/// Where things are in a region; fixed at format time.
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
        let db_off = align_up(blocks_off + block_count * block_bytes, 4096);
        let min_db = 1 << 20;
        if region_bytes < db_off + min_db {
            return Err(DbError::RegionFull(format!(
                "sqlite-nvwal: a {region_bytes}-byte region cannot hold {log_bytes} bytes of log \
                 and a 1 MiB database; give a larger --size or a smaller log_bytes"
            )));
        }
        Ok(Layout {
            block_bytes,
            block_count,
            meta_off,
            blocks_off,
            db_off,
            db_cap: region_bytes - db_off,
        })
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
        if u64::from(crc32c::crc32c(&geometry[..64])) != crc {
            return bad("geometry checksum mismatch".into());
        }
        if field(1) != VERSION {
            return Err(DbError::Format(format!(
                "sqlite-nvwal: region format version {} (this build reads {VERSION})",
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
                    && l.block_bytes >= 4096
                    && l.block_bytes.is_multiple_of(64) =>
            {
                Ok(l)
            }
            _ => bad(format!("geometry {l:?} does not fit a {region_bytes}-byte region")),
        }
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
    /// In-page offset and length of the stored bytes.
    pub off: u32,
    pub len: u32,
    pub frame_header: [u8; FRAME_HEADER_BYTES],
}

impl RecordHeader {
    pub fn encode(&self) -> [u8; RECORD_HEADER_BYTES] {
        let mut b = [0u8; RECORD_HEADER_BYTES];
        b[0..8].copy_from_slice(&self.commit.to_le_bytes());
        b[8..12].copy_from_slice(&self.frame.to_le_bytes());
        b[12..16].copy_from_slice(&self.base.to_le_bytes());
        b[16..20].copy_from_slice(&self.off.to_le_bytes());
        b[20..24].copy_from_slice(&self.len.to_le_bytes());
        b[24..48].copy_from_slice(&self.frame_header);
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
            off: u32_at(16),
            len: u32_at(20),
            frame_header,
        }
    }

    /// Bytes the record occupies (header + stored bytes, rounded up to 8).
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

/// Differential logging (§3.2): the one byte range `[off, off+len)` outside which `new` equals
/// `old` (the paper truncates the clean bytes before and after the dirty portion). Equal pages
/// give `(0, 0)`.
pub fn diff_range(old: &[u8], new: &[u8]) -> (u32, u32) {
    debug_assert_eq!(old.len(), new.len());
    let Some(first) = old.iter().zip(new).position(|(a, b)| a != b) else {
        return (0, 0);
    };
    let last = old.iter().zip(new).rposition(|(a, b)| a != b).unwrap_or(first);
    (first as u32, (last - first + 1) as u32)
}

/// Applies a record's stored bytes to `page` (its base version), giving the frame's page.
pub fn apply(page: &mut [u8], off: u32, bytes: &[u8]) -> Result<()> {
    let start = off as usize;
    match page.get_mut(start..start + bytes.len()) {
        Some(target) => {
            target.copy_from_slice(bytes);
            Ok(())
        }
        None => Err(DbError::Corrupt(format!(
            "sqlite-nvwal: record range {off}+{} outside a {}-byte page",
            bytes.len(),
            page.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_of_equal_pages_is_empty_and_apply_restores() {
        let old = vec![7u8; 4096];
        assert_eq!(diff_range(&old, &old), (0, 0));
        let mut new = old.clone();
        new[100] = 1;
        new[3000] = 2;
        let (off, len) = diff_range(&old, &new);
        assert_eq!((off, len), (100, 2901));
        let mut rebuilt = old.clone();
        apply(&mut rebuilt, off, &new[off as usize..(off + len) as usize]).unwrap();
        assert_eq!(rebuilt, new);
        assert!(apply(&mut rebuilt, 4000, &[0; 200]).is_err(), "out of page is an error");
    }

    #[test]
    fn layout_round_trips_and_rejects_damage() {
        let l = Layout::plan(64 << 20, 16 << 20, 8192).unwrap();
        let g = l.geometry_bytes();
        let crc = u64::from(crc32c::crc32c(&g));
        assert_eq!(Layout::decode(&g, crc, 64 << 20).unwrap(), l);
        let mut bad = g;
        bad[30] ^= 1;
        assert!(matches!(Layout::decode(&bad, crc, 64 << 20), Err(DbError::Corrupt(_))));
        assert!(Layout::decode(&g, crc, 32 << 20).is_err(), "region shorter than the layout");
        assert!(Layout::plan(2 << 20, 16 << 20, 8192).is_err());
        assert!(Layout::plan(64 << 20, 16 << 20, 100).is_err());
    }
}

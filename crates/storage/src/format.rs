//! On-media layout shared by the page-based engines (documented byte by byte in `docs/format.md`).
//!
//! ```text
//! page 0                superblock (immutable after format, checksummed)
//! page 1                catalog: 63 table entries of 128 bytes after a 64-byte header
//! pages 2 ..            allocator bitmap (1 bit per page, 65,536 pages per bitmap page)
//! then, per worker      user undo log (undo_pages) + system undo log (sys_undo_pages)
//! then                  data pages (B+tree nodes, heap pages), allocated from the bitmap
//! ```

use crate::engine::{DbError, Result};
use pmem::Region;

pub const PAGE_SIZE: usize = 8192;
pub const PAGE_SIZE_U64: u64 = PAGE_SIZE as u64;
const _: () = assert!(PAGE_SIZE.is_multiple_of(pmem::CACHE_LINE as usize));

/// "NVMDB" + format marker, little-endian u64 at offset 0.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVMDB\0sb");
pub const FORMAT_VERSION: u32 = 1;
pub const SUPERBLOCK_BYTES: usize = 256;

pub type PageId = u64;

/// Layout parameters, fixed at format time and stored in the superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page_count: u64,
    pub workers: u32,
    pub undo_pages: u32,
    pub sys_undo_pages: u32,
    /// Maximum entries per B+tree node (small values exercise splits and merges in tests).
    pub node_capacity: u32,
}

pub const CATALOG_PAGE: PageId = 1;
pub const BITMAP_FIRST_PAGE: PageId = 2;
pub const BITS_PER_BITMAP_PAGE: u64 = PAGE_SIZE_U64 * 8;
pub const MAX_WORKERS: u32 = 256;

impl Layout {
    pub fn bitmap_pages(&self) -> u64 {
        self.page_count.div_ceil(BITS_PER_BITMAP_PAGE)
    }

    pub fn undo_area_first_page(&self) -> PageId {
        BITMAP_FIRST_PAGE + self.bitmap_pages()
    }

    fn worker_pages(&self) -> u64 {
        (self.undo_pages + self.sys_undo_pages) as u64
    }

    /// First page of worker `w`'s user undo log.
    pub fn undo_log_page(&self, worker: u32) -> PageId {
        self.undo_area_first_page() + worker as u64 * self.worker_pages()
    }

    /// First page of worker `w`'s system (structure-modification) undo log.
    pub fn sys_undo_log_page(&self, worker: u32) -> PageId {
        self.undo_log_page(worker) + self.undo_pages as u64
    }

    /// First page available to the allocator.
    pub fn first_data_page(&self) -> PageId {
        self.undo_area_first_page() + self.workers as u64 * self.worker_pages()
    }

    pub fn validate(&self) -> Result<()> {
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return Err(DbError::Invalid(format!("workers must be 1..={MAX_WORKERS}")));
        }
        if self.undo_pages < 1 || self.sys_undo_pages < 2 {
            return Err(DbError::Invalid(
                "undo logs need at least 1 (user) / 2 (system) pages".into(),
            ));
        }
        if !(4..=crate::btree::MAX_NODE_ENTRIES as u32).contains(&self.node_capacity) {
            return Err(DbError::Invalid(format!(
                "node capacity must be 4..={}",
                crate::btree::MAX_NODE_ENTRIES
            )));
        }
        let needed = self.first_data_page() + 16;
        if self.page_count < needed {
            return Err(DbError::RegionFull(format!(
                "region of {} pages is too small for {} workers' undo logs (needs at least {} \
                 pages = {} bytes)",
                self.page_count,
                self.workers,
                needed,
                needed * PAGE_SIZE_U64
            )));
        }
        Ok(())
    }
}

/// Byte offset of a page.
#[inline]
pub fn page_offset(page: PageId) -> u64 {
    page * PAGE_SIZE_U64
}

pub fn crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// The superblock: identifies the region, its engine and layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub engine: String,
    pub layout: Layout,
}

// Field offsets inside the superblock.
const SB_MAGIC: usize = 0;
const SB_VERSION: usize = 8;
const SB_PAGE_SIZE: usize = 12;
const SB_ENGINE: usize = 16; // 32 bytes, NUL padded
const SB_PAGE_COUNT: usize = 48;
const SB_WORKERS: usize = 56;
const SB_UNDO_PAGES: usize = 60;
const SB_SYS_UNDO_PAGES: usize = 64;
const SB_NODE_CAPACITY: usize = 68;
const SB_CRC: usize = 252;

impl Superblock {
    pub fn encode(&self) -> [u8; SUPERBLOCK_BYTES] {
        let mut b = [0u8; SUPERBLOCK_BYTES];
        b[SB_MAGIC..SB_MAGIC + 8].copy_from_slice(&MAGIC.to_le_bytes());
        b[SB_VERSION..SB_VERSION + 4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[SB_PAGE_SIZE..SB_PAGE_SIZE + 4].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
        let name = self.engine.as_bytes();
        let n = name.len().min(32);
        b[SB_ENGINE..SB_ENGINE + n].copy_from_slice(&name[..n]);
        b[SB_PAGE_COUNT..SB_PAGE_COUNT + 8].copy_from_slice(&self.layout.page_count.to_le_bytes());
        b[SB_WORKERS..SB_WORKERS + 4].copy_from_slice(&self.layout.workers.to_le_bytes());
        b[SB_UNDO_PAGES..SB_UNDO_PAGES + 4].copy_from_slice(&self.layout.undo_pages.to_le_bytes());
        b[SB_SYS_UNDO_PAGES..SB_SYS_UNDO_PAGES + 4]
            .copy_from_slice(&self.layout.sys_undo_pages.to_le_bytes());
        b[SB_NODE_CAPACITY..SB_NODE_CAPACITY + 4]
            .copy_from_slice(&self.layout.node_capacity.to_le_bytes());
        let c = crc(&b[..SB_CRC]);
        b[SB_CRC..SB_CRC + 4].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes and validates a superblock. `Ok(None)` means the region is blank (all zero):
    /// format it. Anything else that is not a valid nvmdb superblock is an error.
    pub fn decode(b: &[u8]) -> Result<Option<Superblock>> {
        if b.len() < SUPERBLOCK_BYTES {
            return Err(DbError::Format("region smaller than a superblock".into()));
        }
        let b = &b[..SUPERBLOCK_BYTES];
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        if u64_at(SB_MAGIC) != MAGIC {
            return Err(DbError::Format(
                "not an nvmdb region (bad magic); refusing to touch it".into(),
            ));
        }
        let stored = u32_at(SB_CRC);
        if stored != crc(&b[..SB_CRC]) {
            return Err(DbError::Corrupt("superblock checksum mismatch".into()));
        }
        let version = u32_at(SB_VERSION);
        if version != FORMAT_VERSION {
            return Err(DbError::Format(format!(
                "region has format version {version}, this build reads version {FORMAT_VERSION}"
            )));
        }
        if u32_at(SB_PAGE_SIZE) as usize != PAGE_SIZE {
            return Err(DbError::Format("region uses a different page size".into()));
        }
        let name = &b[SB_ENGINE..SB_ENGINE + 32];
        let end = name.iter().position(|&c| c == 0).unwrap_or(32);
        let engine = String::from_utf8_lossy(&name[..end]).into_owned();
        let layout = Layout {
            page_count: u64_at(SB_PAGE_COUNT),
            workers: u32_at(SB_WORKERS),
            undo_pages: u32_at(SB_UNDO_PAGES),
            sys_undo_pages: u32_at(SB_SYS_UNDO_PAGES),
            node_capacity: u32_at(SB_NODE_CAPACITY),
        };
        layout.validate().map_err(|e| DbError::Corrupt(format!("superblock layout: {e}")))?;
        Ok(Some(Superblock { engine, layout }))
    }

    /// Reads, validates and checks the superblock against the region and expected engine.
    pub fn read(region: &Region, engine: &str) -> Result<Option<Superblock>> {
        if region.len() < 2 * PAGE_SIZE_U64 {
            return Err(DbError::Format(format!(
                "region of {} bytes is too small for nvmdb",
                region.len()
            )));
        }
        let Some(sb) = Superblock::decode(region.read(0, SUPERBLOCK_BYTES))? else {
            return Ok(None);
        };
        if sb.engine != engine {
            return Err(DbError::Format(format!(
                "region was formatted by engine `{}`, not `{engine}`; open it with --engine {}",
                sb.engine, sb.engine
            )));
        }
        if sb.layout.page_count * PAGE_SIZE_U64 > region.len() {
            return Err(DbError::Corrupt(format!(
                "superblock says {} pages but the region holds only {} bytes (truncated?)",
                sb.layout.page_count,
                region.len()
            )));
        }
        Ok(Some(sb))
    }

    /// Writes and persists the superblock. Called last when formatting, so a crash during
    /// format leaves a blank region that is formatted again.
    pub fn write(&self, region: &Region) {
        let b = self.encode();
        region.write(0, &b);
        region.persist(0, b.len() as u64);
    }
}

#[inline]
pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
pub fn get_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sb() -> Superblock {
        Superblock {
            engine: "inplace".into(),
            layout: Layout {
                page_count: 4096,
                workers: 4,
                undo_pages: 8,
                sys_undo_pages: 8,
                node_capacity: 64,
            },
        }
    }

    #[test]
    fn round_trip() {
        let s = sb();
        assert_eq!(Superblock::decode(&s.encode()).unwrap(), Some(s));
    }

    #[test]
    fn blank_is_none_and_garbage_is_an_error() {
        assert_eq!(Superblock::decode(&[0u8; 256]).unwrap(), None);
        assert!(matches!(Superblock::decode(&[7u8; 256]), Err(DbError::Format(_))));
        let mut b = sb().encode();
        b[50] ^= 1;
        assert!(matches!(Superblock::decode(&b), Err(DbError::Corrupt(_))));
        let mut b = sb().encode();
        b[SB_VERSION] = 9;
        let c = crc(&b[..SB_CRC]);
        b[SB_CRC..].copy_from_slice(&c.to_le_bytes());
        assert!(matches!(Superblock::decode(&b), Err(DbError::Format(_))));
    }
}

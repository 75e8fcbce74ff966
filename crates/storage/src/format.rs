//! On-media layout shared by the page-based engines (documented byte by byte in `docs/format.md`).
//!
//! ```text
//! page 0                superblock (immutable after format, checksummed)
//! page 1                copy of the superblock (repairs a damaged page 0)
//! page 2                catalog: 63 table entries of 128 bytes after a 64-byte header
//! pages 3 ..            allocator bitmap, then its mirror (1 bit per page, 65,536 per page)
//! then, per worker      user undo log (undo_pages) + system undo log (sys_undo_pages)
//! then                  data pages (B+tree nodes, heap pages), allocated from the bitmap
//! ```
//!
//! **Crash-atomic format** (invariant: a crash at any point of `format` leaves a region that
//! opens, blank): the superblock body is persisted first under the *formatting* magic, then
//! every other metadata page, then the copy in page 1, and last the 8-byte *valid* magic word
//! at offset 0 publishes the region. A region whose superblock is zero is formatted only if
//! every other page is zero too; otherwise it is damaged, and its data is never overwritten.

use crate::engine::{DbError, Result};
use pmem::Region;

pub const PAGE_SIZE: usize = 8192;
pub const PAGE_SIZE_U64: u64 = PAGE_SIZE as u64;
const _: () = assert!(PAGE_SIZE.is_multiple_of(pmem::CACHE_LINE as usize));

/// "NVMDB" + format marker, little-endian u64 at offset 0: the region is valid.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NVMDB\0sb");
/// Offset 0 while formatting: the region holds nothing committed and may be formatted again.
pub const MAGIC_FORMATTING: u64 = u64::from_le_bytes(*b"NVMDB\0fm");
/// 4: heap slots carry a row checksum (`docs/format.md`, version history).
pub const FORMAT_VERSION: u32 = 4;
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
    /// Heap rows carry a CRC-32C, verified on every read (`storage::heap`); off only to
    /// measure what it costs (`--engine-opt checksums=off`).
    pub row_checksums: bool,
}

pub const SUPERBLOCK_COPY_PAGE: PageId = 1;
pub const CATALOG_PAGE: PageId = 2;
pub const BITMAP_FIRST_PAGE: PageId = 3;
pub const BITS_PER_BITMAP_PAGE: u64 = PAGE_SIZE_U64 * 8;
pub const MAX_WORKERS: u32 = 256;
/// Largest region the format describes (2^40 pages of 8 KiB): keeps page arithmetic far from
/// overflow whatever a damaged superblock says.
pub const MAX_PAGES: u64 = 1 << 40;

impl Layout {
    pub fn bitmap_pages(&self) -> u64 {
        self.page_count.div_ceil(BITS_PER_BITMAP_PAGE)
    }

    /// First page of the bitmap's mirror (a second copy, compared word by word when read).
    pub fn bitmap_mirror_first_page(&self) -> PageId {
        BITMAP_FIRST_PAGE + self.bitmap_pages()
    }

    pub fn undo_area_first_page(&self) -> PageId {
        BITMAP_FIRST_PAGE + 2 * self.bitmap_pages()
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

    /// Whether `page` is a data page (B+tree node or heap page) of this layout.
    pub fn is_data_page(&self, page: PageId) -> bool {
        page >= self.first_data_page() && page < self.page_count
    }

    /// Whether the byte range lies inside the data pages or the catalog: the only places undo
    /// records may restore (a damaged record must not write over the superblock or a log).
    pub fn is_undoable_range(&self, offset: u64, len: u64) -> bool {
        let Some(end) = offset.checked_add(len) else { return false };
        let catalog = page_offset(CATALOG_PAGE)..page_offset(CATALOG_PAGE + 1);
        let data = page_offset(self.first_data_page())..page_offset(self.page_count);
        (catalog.contains(&offset) && end <= catalog.end)
            || (data.contains(&offset) && end <= data.end)
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
        if self.undo_pages > 1 << 20 || self.sys_undo_pages > 1 << 20 {
            return Err(DbError::Invalid("undo logs are limited to 2^20 pages".into()));
        }
        if !(4..=crate::btree::MAX_NODE_ENTRIES as u32).contains(&self.node_capacity) {
            return Err(DbError::Invalid(format!(
                "node capacity must be 4..={}",
                crate::btree::MAX_NODE_ENTRIES
            )));
        }
        if self.page_count > MAX_PAGES {
            return Err(DbError::Invalid(format!("regions are limited to {MAX_PAGES} pages")));
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
    crate::crc::crc32c(bytes)
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
const SB_FLAGS: usize = 72;
/// `SB_FLAGS` bit: heap rows carry checksums.
const FLAG_ROW_CHECKSUMS: u32 = 1;
const SB_CRC: usize = 252;

/// What one superblock slot (page 0 or its copy in page 1) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// All 256 bytes zero.
    Zero,
    /// Format started but was never published.
    Formatting,
    Valid(Superblock),
    /// Not an nvmdb superblock at all (foreign file or garbage).
    Foreign,
    /// An nvmdb superblock that fails its checks (the reason).
    Damaged(String),
}

/// What opening should do with a region, decided from both superblock slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A valid region. `repair_primary` / `repair_copy`: that slot must be rewritten from the
    /// other (it is damaged, or a crash interrupted the copy's write).
    Open { sb: Superblock, repair_primary: bool, repair_copy: bool },
    /// Nothing committed was ever published here: format it (a blank region, or a format that
    /// a crash interrupted).
    Format,
}

impl Superblock {
    pub fn encode(&self) -> [u8; SUPERBLOCK_BYTES] {
        self.encode_with_magic(MAGIC)
    }

    fn encode_with_magic(&self, magic: u64) -> [u8; SUPERBLOCK_BYTES] {
        let mut b = [0u8; SUPERBLOCK_BYTES];
        b[SB_MAGIC..SB_MAGIC + 8].copy_from_slice(&magic.to_le_bytes());
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
        let flags = if self.layout.row_checksums { FLAG_ROW_CHECKSUMS } else { 0 };
        b[SB_FLAGS..SB_FLAGS + 4].copy_from_slice(&flags.to_le_bytes());
        // The checksum leaves out the magic word, so that publishing the region is one 8-byte
        // store over an already persisted, already checksummed body.
        let c = crc(&b[8..SB_CRC]);
        b[SB_CRC..SB_CRC + 4].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decodes and validates a superblock. `Ok(None)` means the slot is all zero. Anything else
    /// that is not a valid nvmdb superblock is an error (`Format` for foreign content, `Corrupt`
    /// for a damaged nvmdb superblock).
    pub fn decode(b: &[u8]) -> Result<Option<Superblock>> {
        match Self::classify(b) {
            SlotState::Zero => Ok(None),
            SlotState::Valid(sb) => Ok(Some(sb)),
            SlotState::Formatting => {
                Err(DbError::Corrupt("superblock of an unfinished format".into()))
            }
            SlotState::Foreign => {
                Err(DbError::Format("not an nvmdb region (bad magic); refusing to touch it".into()))
            }
            SlotState::Damaged(why) => {
                Err(if why.contains("version") || why.contains("page size") {
                    DbError::Format(why)
                } else {
                    DbError::Corrupt(why)
                })
            }
        }
    }

    /// What a 256-byte superblock slot holds.
    pub fn classify(b: &[u8]) -> SlotState {
        if b.len() < SUPERBLOCK_BYTES {
            return SlotState::Damaged("region smaller than a superblock".into());
        }
        let b = &b[..SUPERBLOCK_BYTES];
        if b.iter().all(|&x| x == 0) {
            return SlotState::Zero;
        }
        let u32_at = |o: usize| get_u32(b, o);
        let magic = get_u64(b, SB_MAGIC);
        if magic == MAGIC_FORMATTING {
            return SlotState::Formatting;
        }
        if magic != MAGIC {
            return if magic == 0 {
                SlotState::Damaged("superblock magic is zero but the rest is not".into())
            } else {
                SlotState::Foreign
            };
        }
        if u32_at(SB_CRC) != crc(&b[8..SB_CRC]) {
            return SlotState::Damaged("superblock checksum mismatch".into());
        }
        let version = u32_at(SB_VERSION);
        if version != FORMAT_VERSION {
            return SlotState::Damaged(format!(
                "region has format version {version}, this build reads version {FORMAT_VERSION} \
                 (version 4 added row checksums): load it again with this build"
            ));
        }
        if u32_at(SB_PAGE_SIZE) as usize != PAGE_SIZE {
            return SlotState::Damaged("region uses a different page size".into());
        }
        let name = &b[SB_ENGINE..SB_ENGINE + 32];
        let end = name.iter().position(|&c| c == 0).unwrap_or(32);
        let engine = String::from_utf8_lossy(&name[..end]).into_owned();
        let layout = Layout {
            page_count: get_u64(b, SB_PAGE_COUNT),
            workers: u32_at(SB_WORKERS),
            undo_pages: u32_at(SB_UNDO_PAGES),
            sys_undo_pages: u32_at(SB_SYS_UNDO_PAGES),
            node_capacity: u32_at(SB_NODE_CAPACITY),
            row_checksums: u32_at(SB_FLAGS) & FLAG_ROW_CHECKSUMS != 0,
        };
        if u32_at(SB_FLAGS) & !FLAG_ROW_CHECKSUMS != 0 {
            return SlotState::Damaged(format!("superblock flags {:#x}", u32_at(SB_FLAGS)));
        }
        if let Err(e) = layout.validate() {
            return SlotState::Damaged(format!("superblock layout: {e}"));
        }
        SlotState::Valid(Superblock { engine, layout })
    }

    /// Decides from both slots what opening `region` means. `created`: the region's contents
    /// are known to be brand new (no scan for data needed). Never writes.
    pub fn verdict(region: &Region, created: bool) -> Result<Verdict> {
        if region.backed_len() < 4 * PAGE_SIZE_U64 {
            return Err(DbError::Format(format!(
                "region of {} bytes is too small for nvmdb",
                region.backed_len()
            )));
        }
        let primary = Self::classify(region.read(0, SUPERBLOCK_BYTES));
        let copy = Self::classify(region.read(page_offset(SUPERBLOCK_COPY_PAGE), SUPERBLOCK_BYTES));
        let fits = |sb: &Superblock| -> Result<()> {
            if sb.layout.page_count * PAGE_SIZE_U64 > region.len()
                || page_offset(sb.layout.first_data_page()) > region.backed_len()
            {
                return Err(DbError::Corrupt(format!(
                    "superblock says {} pages but the region maps {} bytes and its file holds \
                     {} (truncated?)",
                    sb.layout.page_count,
                    region.len(),
                    region.backed_len()
                )));
            }
            Ok(())
        };
        match (primary, copy) {
            (SlotState::Valid(sb), copy) => {
                fits(&sb)?;
                let repair_copy = copy != SlotState::Valid(sb.clone());
                Ok(Verdict::Open { sb, repair_primary: false, repair_copy })
            }
            // Page 0 was damaged (zeroed, overwritten): the copy is the superblock. A copy is
            // written only after everything it describes is persisted.
            (p, SlotState::Valid(sb)) if p != SlotState::Formatting => {
                fits(&sb)?;
                Ok(Verdict::Open { sb, repair_primary: true, repair_copy: false })
            }
            (SlotState::Formatting, _) if created || unfinished_format_is_blank(region) => {
                Ok(Verdict::Format)
            }
            // A format only ever starts on a blank region and never writes a data page, so an
            // unfinished format over data is damage (page 0 overwritten), never formatted over.
            (SlotState::Formatting, _) => Err(DbError::Corrupt(
                "page 0 says a format was interrupted, but the region holds data; refusing to \
                 format over it"
                    .into(),
            )),
            (SlotState::Zero, SlotState::Zero) => {
                if created || region_is_blank(region) {
                    Ok(Verdict::Format)
                } else {
                    Err(DbError::Corrupt(
                        "the superblock is zero but the region holds data; refusing to format \
                         over it (delete the file to start afresh)"
                            .into(),
                    ))
                }
            }
            // A format whose first step (the body under the formatting magic) tore: the magic
            // word is still zero, nothing else was written yet.
            (SlotState::Damaged(_), SlotState::Zero) if region_is_blank_after_page0(region) => {
                Ok(Verdict::Format)
            }
            (SlotState::Foreign, _) => {
                Err(DbError::Format("not an nvmdb region (bad magic); refusing to touch it".into()))
            }
            (SlotState::Damaged(why), _) if why.contains("version") || why.contains("size") => {
                Err(DbError::Format(why))
            }
            (SlotState::Damaged(why), _) => {
                Err(DbError::Corrupt(format!("{why}, and its copy in page 1 is not valid")))
            }
            (SlotState::Zero, _) => Err(DbError::Corrupt(
                "the superblock is zero and its copy in page 1 is damaged".into(),
            )),
        }
    }

    /// Reads, validates and checks the superblock against the region and expected engine;
    /// `Ok(None)`: format the region. Repairs a damaged slot from the other one.
    pub fn read(region: &Region, engine: &str, created: bool) -> Result<Option<Superblock>> {
        match Self::verdict(region, created)? {
            Verdict::Format => Ok(None),
            Verdict::Open { sb, repair_primary, repair_copy } => {
                if sb.engine != engine {
                    return Err(DbError::Format(format!(
                        "region was formatted by engine `{}`, not `{engine}`; open it with \
                         --engine {}",
                        sb.engine, sb.engine
                    )));
                }
                if repair_copy {
                    sb.write_slot(region, SUPERBLOCK_COPY_PAGE, MAGIC);
                }
                if repair_primary {
                    sb.write_slot(region, 0, MAGIC);
                }
                Ok(Some(sb))
            }
        }
    }

    fn write_slot(&self, region: &Region, page: PageId, magic: u64) {
        let b = self.encode_with_magic(magic);
        region.write(page_offset(page), &b);
        region.persist(page_offset(page), b.len() as u64);
    }

    /// Step 1 of a format: the body under the *formatting* magic, persisted.
    pub fn begin_format(&self, region: &Region) {
        // Wipe a copy a damaged earlier region may have left, before anything else can look
        // valid.
        region.write(page_offset(SUPERBLOCK_COPY_PAGE), &[0u8; SUPERBLOCK_BYTES]);
        region.flush(page_offset(SUPERBLOCK_COPY_PAGE), SUPERBLOCK_BYTES as u64);
        self.write_slot(region, 0, MAGIC_FORMATTING);
    }

    /// Last steps of a format, after every page the superblock describes is persisted: the
    /// copy, then the 8-byte valid magic that publishes the region.
    pub fn publish(&self, region: &Region) {
        self.write_slot(region, SUPERBLOCK_COPY_PAGE, MAGIC);
        region.write_u64(0, MAGIC);
        region.persist(0, 8);
    }
}

/// Raises the page count of a valid region (formatted by `engine`) towards `pages`, as far
/// as its allocator bitmap reaches (`bitmap_pages` x 65,536 pages: bits beyond the old count
/// were zeroed at format and never touched, so the new pages start free) and the mapping
/// goes. For engines whose layout is the superblock's and the allocator's alone (`inplace`):
/// a region reopened larger really gets the pages. Returns the new count, `None` when
/// nothing changed.
///
/// Crash-safe: the copy in page 1 is persisted first, then page 0; a crash between them
/// leaves a valid page 0 with the old count, and opening repairs the copy from it.
pub fn extend_page_count(region: &Region, engine: &str, pages: u64) -> Result<Option<u64>> {
    let Verdict::Open { mut sb, repair_primary: false, repair_copy: false } =
        Superblock::verdict(region, false)?
    else {
        return Ok(None); // blank or being repaired: opening deals with it first
    };
    if sb.engine != engine {
        return Ok(None);
    }
    let reach = (sb.layout.bitmap_pages() * BITS_PER_BITMAP_PAGE)
        .min(region.len() / PAGE_SIZE_U64)
        .min(MAX_PAGES);
    let new = pages.min(reach);
    if new <= sb.layout.page_count {
        return Ok(None);
    }
    debug_assert_eq!(
        Layout { page_count: new, ..sb.layout }.bitmap_pages(),
        sb.layout.bitmap_pages(),
        "the metadata must not move"
    );
    sb.layout.page_count = new;
    sb.write_slot(region, SUPERBLOCK_COPY_PAGE, MAGIC);
    sb.write_slot(region, 0, MAGIC);
    Ok(Some(new))
}

/// Whether every byte of the region is zero.
pub fn region_is_blank(region: &Region) -> bool {
    all_zero(region, 0)
}

/// Whether a region whose page 0 holds the *formatting* magic has blank data pages (as every
/// interrupted format leaves them). The body under that magic gives the layout; a body that
/// does not decode (its first write tore) leaves only page 0 written.
fn unfinished_format_is_blank(region: &Region) -> bool {
    let mut body = region.read(0, SUPERBLOCK_BYTES).to_vec();
    body[SB_MAGIC..SB_MAGIC + 8].copy_from_slice(&MAGIC.to_le_bytes());
    match Superblock::classify(&body) {
        SlotState::Valid(sb) => all_zero(region, page_offset(sb.layout.first_data_page())),
        _ => all_zero(region, page_offset(SUPERBLOCK_COPY_PAGE + 1)),
    }
}

fn region_is_blank_after_page0(region: &Region) -> bool {
    all_zero(region, PAGE_SIZE_U64)
}

fn all_zero(region: &Region, from: u64) -> bool {
    const CHUNK: u64 = 1 << 20;
    // Only the part backed by the file exists (a growing region's mapping is longer).
    let end = region.backed_len();
    let mut at = from;
    while at < end {
        let n = CHUNK.min(end - at);
        let bytes = region.read(at, n as usize);
        // Word-wise (the compiler vectorises it): a blank check of a large file is memory-bound.
        let mut words = bytes.chunks_exact(8);
        if words.any(|w| w != [0u8; 8]) || words.remainder().iter().any(|&b| b != 0) {
            return false;
        }
        at += n;
    }
    true
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

/// Opens a region; an existing file is mapped at least at the size its superblock describes.
/// A region that grows (`--max-size`) is formatted for its maximum size while its file holds only
/// what is in use, so every opener must map that maximum or the superblock would look truncated.
pub fn open_region(options: &pmem::RegionOptions) -> pmem::Result<Region> {
    let file_medium =
        matches!(options.medium, pmem::Medium::Shm | pmem::Medium::File | pmem::Medium::Dax);
    let described = options.path.as_deref().filter(|_| file_medium).and_then(|path| {
        let mut first = vec![0u8; 2 * PAGE_SIZE];
        let mut file = std::fs::File::open(path).ok()?;
        std::io::Read::read_exact(&mut file, &mut first).ok()?;
        region_bytes_in(&first)
    });
    match described {
        Some(bytes) if bytes > options.max_size_bytes.max(options.size_bytes) => {
            let options = pmem::RegionOptions { max_size_bytes: bytes, ..options.clone() };
            Region::open(&options)
        }
        _ => Region::open(options),
    }
}

/// The size a region file's superblock (or its copy) says the region has, read from the file's
/// first bytes without mapping it: a growing region must be mapped at that size on reopen.
pub fn region_bytes_in(first_pages: &[u8]) -> Option<u64> {
    for page in [0, SUPERBLOCK_COPY_PAGE] {
        let at = page_offset(page) as usize;
        if let Some(slot) = first_pages.get(at..at + SUPERBLOCK_BYTES) {
            if let SlotState::Valid(sb) = Superblock::classify(slot) {
                return Some(sb.layout.page_count * PAGE_SIZE_U64);
            }
        }
    }
    None
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
                row_checksums: true,
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
        let c = crc(&b[8..SB_CRC]);
        b[SB_CRC..].copy_from_slice(&c.to_le_bytes());
        assert!(matches!(Superblock::decode(&b), Err(DbError::Format(_))));
    }

    fn region(pages: u64) -> Region {
        let o = pmem::RegionOptions::new(pmem::Medium::Dram, pages * PAGE_SIZE_U64);
        Region::open(&o).unwrap()
    }

    fn small() -> Superblock {
        let mut s = sb();
        s.layout.page_count = 512;
        s.layout.workers = 2;
        s
    }

    #[test]
    fn format_publishes_with_one_word_and_copies_repair_each_other() {
        let r = region(512);
        assert_eq!(Superblock::verdict(&r, false).unwrap(), Verdict::Format);
        let s = small();
        s.begin_format(&r);
        r.write_u64(page_offset(CATALOG_PAGE), 5); // formatting writes other pages
        assert_eq!(Superblock::verdict(&r, false).unwrap(), Verdict::Format, "interrupted");
        s.publish(&r);
        assert_eq!(Superblock::read(&r, "inplace", false).unwrap(), Some(s.clone()));
        // A zeroed page 0 is repaired from the copy, and the other way round.
        r.write(0, &[0u8; SUPERBLOCK_BYTES]);
        assert!(matches!(
            Superblock::verdict(&r, false).unwrap(),
            Verdict::Open { repair_primary: true, .. }
        ));
        assert_eq!(Superblock::read(&r, "inplace", false).unwrap(), Some(s.clone()));
        assert!(matches!(
            Superblock::verdict(&r, false).unwrap(),
            Verdict::Open { repair_primary: false, repair_copy: false, .. }
        ));
        r.write(page_offset(SUPERBLOCK_COPY_PAGE) + 20, &[1, 2, 3]);
        assert!(matches!(
            Superblock::verdict(&r, false).unwrap(),
            Verdict::Open { repair_copy: true, .. }
        ));
        // Both gone on a populated region: damaged, never formatted.
        r.write(0, &[0u8; SUPERBLOCK_BYTES]);
        r.write(page_offset(SUPERBLOCK_COPY_PAGE), &[0u8; SUPERBLOCK_BYTES]);
        assert!(matches!(Superblock::verdict(&r, false), Err(DbError::Corrupt(_))));
    }

    /// Found while reviewing reformat paths for the damaged-region fuzzer (its random damage
    /// cannot forge the magic): page 0 overwritten with the formatting magic over a populated
    /// region made open format it.
    #[test]
    fn an_unfinished_format_over_data_is_corrupt_not_formatted() {
        let r = region(512);
        let s = small();
        s.begin_format(&r);
        assert_eq!(Superblock::verdict(&r, false).unwrap(), Verdict::Format, "interrupted");
        s.publish(&r);
        r.write_u64(page_offset(s.layout.first_data_page() + 3), 42); // a data page in use
        r.write_u64(0, MAGIC_FORMATTING);
        assert!(matches!(Superblock::verdict(&r, false), Err(DbError::Corrupt(_))));
        r.write_u64(page_offset(s.layout.first_data_page() + 3), 0);
        assert_eq!(Superblock::verdict(&r, false).unwrap(), Verdict::Format, "nothing written");
    }

    /// Guards reopen-larger (issue 39): the page count rises as far as the mapping and the
    /// bitmap reach, and a crash between the two slot writes leaves the old count.
    #[test]
    fn extend_page_count_reaches_the_mapping_and_survives_a_crash_between_slots() {
        let r = region(1024);
        let s = small();
        s.begin_format(&r);
        s.publish(&r);
        assert_eq!(extend_page_count(&r, "cow", 4096).unwrap(), None, "another engine's");
        // The crash image: only the copy was rewritten.
        let mut grown = s.clone();
        grown.layout.page_count = 1024;
        grown.write_slot(&r, SUPERBLOCK_COPY_PAGE, MAGIC);
        let Verdict::Open { sb, repair_copy: true, .. } = Superblock::verdict(&r, false).unwrap()
        else {
            panic!("page 0 decides");
        };
        assert_eq!(sb.layout.page_count, 512);
        Superblock::read(&r, "inplace", false).unwrap();
        assert_eq!(extend_page_count(&r, "inplace", 4096).unwrap(), Some(1024), "the mapping");
        assert_eq!(Superblock::read(&r, "inplace", false).unwrap(), Some(grown));
        assert_eq!(extend_page_count(&r, "inplace", 4096).unwrap(), None);
    }

    #[test]
    fn a_torn_first_format_step_is_still_blank() {
        let r = region(512);
        let body = small().encode();
        r.write(8, &body[8..]); // the body persisted, the formatting magic did not
        assert_eq!(Superblock::verdict(&r, false).unwrap(), Verdict::Format);
        r.write_u64(page_offset(CATALOG_PAGE), 1);
        assert!(Superblock::verdict(&r, false).is_err());
    }
}

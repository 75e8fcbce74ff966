//! The persistent page allocator: one bit per page in the bitmap pages (1 = in use), kept twice
//! (the bitmap and its mirror, compared word by word whenever a word is read, so a damaged word
//! is `Corrupt` instead of a page handed out twice). A page is *free* (bit clear), *pending*
//! (bit set by a system transaction whose undo log holds a `PAGE_ALLOC` record, so a crash rolls
//! it back to free) or *in use* (bit set, allocating transaction ended). Frees are deferred until
//! the freeing system transaction has committed, and a freed page becomes allocatable only after
//! its post-commit work is persisted, so a page is never handed out twice and never leaked by a
//! crash (NVWAL's free / pending / in-use block states, Kim et al., ASPLOS 2016, §4.3).
//!
//! Open is O(1): nothing is scanned. The volatile free list is filled lazily by a cursor that
//! walks the bitmap as pages are needed. Invariant: a page below the cursor is on the free list
//! iff its bit is clear; a page at or above it is found by the cursor, never pushed.

use crate::engine::{DbError, Result};
use crate::format::{page_offset, Layout, PageId, BITMAP_FIRST_PAGE};
use parking_lot::Mutex;
use pmem::Region;

pub struct PageAllocator {
    region: Region,
    layout: Layout,
    state: Mutex<FreeState>,
    /// Set while recovery replays system logs: a bitmap word may then differ from its mirror
    /// in the bits of the logged updates a crash interrupted (the two lines persist
    /// independently); replaying those records rewrites both. Afterwards any difference is
    /// damage.
    recovering: std::sync::atomic::AtomicBool,
}

struct FreeState {
    /// Free pages below the cursor, highest first so that pops hand out low pages.
    list: Vec<PageId>,
    /// Next page the lazy scan looks at (a multiple of 64, or `page_count`).
    cursor: PageId,
}

/// Bitmap words the lazy scan reads per refill: bounds the time one allocation can take.
const SCAN_WORDS: u64 = 64;

fn word_offset(page: PageId) -> u64 {
    page_offset(BITMAP_FIRST_PAGE) + page / 64 * 8
}

impl PageAllocator {
    /// Writes a fresh bitmap and mirror: metadata pages in use, the rest free. Flushed, not
    /// fenced.
    pub fn format(region: &Region, layout: &Layout) {
        let bytes = layout.bitmap_pages() * crate::format::PAGE_SIZE_U64;
        let meta = layout.first_data_page();
        let mut words = vec![0u64; meta.div_ceil(64) as usize];
        for p in 0..meta {
            words[(p / 64) as usize] |= 1 << (p % 64);
        }
        let mirror =
            page_offset(layout.bitmap_mirror_first_page()) - page_offset(BITMAP_FIRST_PAGE);
        for base in [0, mirror] {
            let start = page_offset(BITMAP_FIRST_PAGE) + base;
            region.write(start, &vec![0u8; bytes as usize]);
            for (i, w) in words.iter().enumerate() {
                region.write_u64(start + i as u64 * 8, *w);
            }
            region.flush(start, bytes);
        }
    }

    /// Attaches to the persistent bitmap (after recovery has rolled back pending allocations,
    /// or before: rollback only clears bits). O(1).
    pub fn attach(region: &Region, layout: &Layout) -> PageAllocator {
        let cursor = layout.first_data_page() / 64 * 64;
        PageAllocator {
            region: region.clone(),
            layout: *layout,
            state: Mutex::new(FreeState { list: Vec::new(), cursor }),
            recovering: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Recovery brackets its replay of system logs with `set_recovering(true)` / `(false)`.
    pub fn set_recovering(&self, on: bool) {
        self.recovering.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    fn mirror_offset(&self, page: PageId) -> u64 {
        word_offset(page) + page_offset(self.layout.bitmap_pages())
    }

    /// The bitmap word holding `page`'s bit, checked against its mirror.
    fn word(&self, page: PageId) -> Result<u64> {
        let (w, m) = (
            self.region.read_u64(word_offset(page)),
            self.region.read_u64(self.mirror_offset(page)),
        );
        if w != m {
            return Err(DbError::Corrupt(format!(
                "allocator bitmap word of pages {}..{} differs from its mirror ({w:#x} vs {m:#x})",
                page / 64 * 64,
                page / 64 * 64 + 64
            )));
        }
        Ok(w)
    }

    fn check_page(&self, page: PageId) -> Result<()> {
        if page < self.layout.first_data_page() || page >= self.layout.page_count {
            return Err(DbError::Corrupt(format!(
                "page id {page} outside the data pages {}..{}",
                self.layout.first_data_page(),
                self.layout.page_count
            )));
        }
        Ok(())
    }

    pub fn is_allocated(&self, page: PageId) -> Result<bool> {
        self.check_page(page)?;
        Ok(self.word(page)? & (1 << (page % 64)) != 0)
    }

    /// Pages whose bit is set (metadata, in use and pending), counted over the bitmap (not its
    /// mirror): O(pages / 64) reads, for reports.
    pub fn pages_in_use(&self) -> u64 {
        let words = self.layout.page_count.div_ceil(64);
        (0..words).map(|w| u64::from(self.region.read_u64(word_offset(w * 64)).count_ones())).sum()
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Takes a free page (volatile only). The caller persists a `PAGE_ALLOC` undo record and
    /// then calls [`PageAllocator::set_bit`]. `Ok(None)`: every page is in use.
    pub fn reserve(&self) -> Result<Option<PageId>> {
        let mut st = self.state.lock();
        loop {
            if let Some(p) = st.list.pop() {
                return Ok(Some(p));
            }
            if st.cursor >= self.layout.page_count {
                return Ok(None);
            }
            self.refill(&mut st)?;
        }
    }

    /// Moves the cursor over up to `SCAN_WORDS` bitmap words, listing their clear bits.
    fn refill(&self, st: &mut FreeState) -> Result<()> {
        let first = self.layout.first_data_page();
        let end = self.layout.page_count;
        let mut found = Vec::new();
        for _ in 0..SCAN_WORDS {
            if st.cursor >= end {
                break;
            }
            let base = st.cursor;
            let word = self.word(base)?;
            for bit in 0..64 {
                let p = base + bit;
                if p >= first && p < end && word & (1 << bit) == 0 {
                    found.push(p);
                }
            }
            st.cursor = base + 64;
        }
        st.cursor = st.cursor.min(end);
        // A growing region extends its file before handing out pages beyond it. If the medium
        // refuses, the pages beyond the file stay to be found again later.
        if let Some(&last) = found.last() {
            if let Err(e) = self.region.ensure_backed(page_offset(last + 1)) {
                let backed = self.region.backed_len() / crate::format::PAGE_SIZE_U64;
                found.retain(|p| *p < backed);
                st.cursor = st.cursor.min(backed / 64 * 64).max(first / 64 * 64);
                if found.is_empty() {
                    return Err(DbError::RegionFull(format!(
                        "no free page below {backed} and the region cannot grow: {e}"
                    )));
                }
            }
        }
        // Highest first, so pops hand out low pages (compact regions).
        st.list.extend(found.into_iter().rev());
        Ok(())
    }

    /// Gives back a reserved page whose bit was never set.
    pub fn unreserve(&self, page: PageId) {
        self.state.lock().list.push(page);
    }

    /// Marks `page` in use. Returns the ranges to flush (the word and its mirror).
    pub fn set_bit(&self, page: PageId) -> Result<[(u64, u64); 2]> {
        let _g = self.state.lock();
        self.update_bit(page, true)
    }

    /// Marks `page` free in the bitmap: the rollback of an allocation (the page was reserved,
    /// so it is below the cursor and goes back through [`PageAllocator::release`] once the
    /// rollback is persisted).
    pub fn clear_bit(&self, page: PageId) -> Result<[(u64, u64); 2]> {
        let _g = self.state.lock();
        self.update_bit(page, false)
    }

    /// Frees the pages of a committed system transaction: clears their bits, runs `persist`
    /// (which must make the cleared bits and the log's end durable) and only then makes the
    /// pages allocatable. The allocator's lock is held throughout, so the lazy scan cannot hand
    /// out a page whose free a crash could still redo over its next owner.
    pub fn free_committed(
        &self,
        pages: &[PageId],
        persist: impl FnOnce(&[(u64, u64)]),
    ) -> Result<()> {
        let mut st = self.state.lock();
        let mut written = Vec::with_capacity(pages.len() * 2);
        for p in pages {
            written.extend(self.update_bit(*p, false)?);
        }
        persist(&written);
        let cursor = st.cursor;
        st.list.extend(pages.iter().filter(|p| **p < cursor));
        Ok(())
    }

    fn update_bit(&self, page: PageId, on: bool) -> Result<[(u64, u64); 2]> {
        self.check_page(page)?;
        let (off, mirror) = (word_offset(page), self.mirror_offset(page));
        let bit = 1u64 << (page % 64);
        let w = self.region.read_u64(off);
        let recovering = self.recovering.load(std::sync::atomic::Ordering::Relaxed);
        // Other differing bits belong to other logged updates, which recovery replays too.
        let word = if recovering { w } else { self.word(page)? };
        let new = if on { word | bit } else { word & !bit };
        if new != w || new != self.region.read_u64(mirror) {
            // Bitmap first, mirror second: a crash between the two (or before either line is
            // persisted) is inside a system transaction whose log recovery replays.
            self.region.write_u64(off, new);
            self.region.write_u64(mirror, new);
        }
        Ok([(off, 8), (mirror, 8)])
    }

    /// Returns pages whose rolled-back allocation is persisted to the free list (pages at or
    /// above the cursor are left to the scan).
    pub fn release(&self, pages: &[PageId]) {
        let mut st = self.state.lock();
        let cursor = st.cursor;
        st.list.extend(pages.iter().filter(|p| **p < cursor));
    }

    /// Counts free pages by reading the whole bitmap (for checks and reports, not the hot path).
    pub fn count_free(&self) -> Result<u64> {
        let mut free = 0;
        let mut p = self.layout.first_data_page();
        while p < self.layout.page_count {
            if !self.is_allocated(p)? {
                free += 1;
            }
            p += 1;
        }
        Ok(free)
    }
}

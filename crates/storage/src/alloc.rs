//! The persistent page allocator: one bit per page in the bitmap pages (1 = in use). A page is
//! *free* (bit clear, on the volatile free list), *pending* (bit set by a system transaction whose
//! undo log holds a `PAGE_ALLOC` record, so a crash rolls it back to free) or *in use* (bit set,
//! allocating transaction ended). Frees are deferred until the freeing system transaction has
//! committed, and a freed page returns to the volatile free list only after its post-commit work
//! is persisted, so a page is never handed out twice and never leaked by a crash (NVWAL's
//! free / pending / in-use block states, Kim et al., ASPLOS 2016, §4.3).

use crate::format::{page_offset, Layout, PageId, BITMAP_FIRST_PAGE};
use parking_lot::Mutex;
use pmem::Region;

pub struct PageAllocator {
    region: Region,
    layout: Layout,
    /// Free pages, highest first so that pops hand out low pages (compact regions).
    free: Mutex<Vec<PageId>>,
}

fn word_offset(page: PageId) -> u64 {
    page_offset(BITMAP_FIRST_PAGE) + page / 64 * 8
}

impl PageAllocator {
    /// Writes a fresh bitmap: metadata pages in use, the rest free. Flushed, not fenced.
    pub fn format(region: &Region, layout: &Layout) {
        let bytes = layout.bitmap_pages() * crate::format::PAGE_SIZE_U64;
        let zero = vec![0u8; bytes as usize];
        region.write(page_offset(BITMAP_FIRST_PAGE), &zero);
        let meta = layout.first_data_page();
        let mut words = vec![0u64; meta.div_ceil(64) as usize];
        for p in 0..meta {
            words[(p / 64) as usize] |= 1 << (p % 64);
        }
        for (i, w) in words.iter().enumerate() {
            region.write_u64(page_offset(BITMAP_FIRST_PAGE) + i as u64 * 8, *w);
        }
        region.flush(page_offset(BITMAP_FIRST_PAGE), bytes);
    }

    /// Builds the volatile free list from the persistent bitmap (after recovery has rolled back
    /// pending allocations).
    pub fn rebuild(region: &Region, layout: &Layout) -> PageAllocator {
        let mut free = Vec::new();
        for p in (layout.first_data_page()..layout.page_count).rev() {
            if region.read_u64(word_offset(p)) & (1 << (p % 64)) == 0 {
                free.push(p);
            }
        }
        PageAllocator { region: region.clone(), layout: *layout, free: Mutex::new(free) }
    }

    pub fn is_allocated(&self, page: PageId) -> bool {
        self.region.read_u64(word_offset(page)) & (1 << (page % 64)) != 0
    }

    pub fn free_pages(&self) -> u64 {
        self.free.lock().len() as u64
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Takes a page off the free list (volatile only). The caller persists a `PAGE_ALLOC` undo
    /// record and then calls [`PageAllocator::set_bit`].
    pub fn reserve(&self) -> Option<PageId> {
        self.free.lock().pop()
    }

    /// Gives back a reserved page whose bit was never set.
    pub fn unreserve(&self, page: PageId) {
        self.free.lock().push(page);
    }

    /// Marks `page` in use. Returns the bitmap word's range to flush.
    pub fn set_bit(&self, page: PageId) -> (u64, u64) {
        self.update_bit(page, true)
    }

    /// Marks `page` free in the bitmap (rollback of an allocation, or a committed free). The
    /// page is *not* put back on the free list: call [`PageAllocator::release`] once the change
    /// is persisted and nothing can redo it.
    pub fn clear_bit(&self, page: PageId) -> (u64, u64) {
        self.update_bit(page, false)
    }

    fn update_bit(&self, page: PageId, on: bool) -> (u64, u64) {
        assert!(page >= self.layout.first_data_page() && page < self.layout.page_count);
        // The free-list lock also serialises read-modify-writes of bitmap words.
        let _g = self.free.lock();
        let off = word_offset(page);
        let word = self.region.read_u64(off);
        let new = if on { word | 1 << (page % 64) } else { word & !(1 << (page % 64)) };
        if new != word {
            self.region.write_u64(off, new);
        }
        (off, 8)
    }

    /// Returns freed pages to the free list.
    pub fn release(&self, pages: &[PageId]) {
        self.free.lock().extend_from_slice(pages);
    }
}

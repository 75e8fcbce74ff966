//! The page store: 8 KiB pages of a region, their latches, the simulated page cache of the
//! read-latency model, and the write seam.
//!
//! **The seam.** Code above the page store (B+tree, heap, catalog) reads pages through
//! [`PageStore::page`] and writes only through a [`PageWriter`]. *The recovery method behind the
//! writer decides what a write means*: In-Place Updates logs the before-image to an undo log and
//! writes in place; WAL would write a DRAM frame and append a log record; Group Commit would
//! write a staging copy and mark dirty lines (see `docs/storage.md`). This is how one B+tree
//! serves several recovery methods, as one Shore-MT served all three of Pelley et al.'s.
//!
//! **Read-latency model** (Pelley §5.1, done online instead of from offline traces): touching a
//! page consults an LRU cache of `cache_pages` pages; a miss charges the device read latency for
//! the cache lines the operation reads.

use crate::engine::Result;
use crate::format::{page_offset, PageId, PAGE_SIZE};
use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use pmem::Region;
use std::collections::{BTreeMap, HashMap};

/// Writes to pages, routed to the engine's recovery method.
pub trait PageWriter {
    /// The page store the writes go to.
    fn store(&self) -> &PageStore;

    /// Applies several byte-range writes to one page, atomically with respect to crashes as the
    /// recovery method defines it (e.g., one undo record for all ranges, then the writes).
    fn write(&mut self, page: PageId, ranges: &[(usize, &[u8])]) -> Result<()>;

    /// Allocates a page; its contents are undefined until written. A page allocated by this
    /// writer can be written without logging (nothing to undo).
    fn alloc_page(&mut self) -> Result<PageId>;

    /// Frees a page once the writer's (system) transaction commits.
    fn free_page(&mut self, page: PageId) -> Result<()>;
}

/// Least-recently-used page cache simulation (only when read latency is modelled).
struct CacheSim {
    capacity: usize,
    clock: u64,
    stamp_of: HashMap<PageId, u64>,
    by_stamp: BTreeMap<u64, PageId>,
}

impl CacheSim {
    /// Records an access; returns true on a miss.
    fn access(&mut self, page: PageId) -> bool {
        self.clock += 1;
        let now = self.clock;
        if let Some(old) = self.stamp_of.insert(page, now) {
            self.by_stamp.remove(&old);
            self.by_stamp.insert(now, page);
            return false;
        }
        self.by_stamp.insert(now, page);
        if self.stamp_of.len() > self.capacity {
            if let Some((_, victim)) = self.by_stamp.pop_first() {
                self.stamp_of.remove(&victim);
            }
        }
        true
    }
}

pub struct PageStore {
    region: Region,
    page_count: u64,
    latches: Box<[RwLock<()>]>,
    cache: Option<Mutex<CacheSim>>,
    charge_reads: bool,
}

impl PageStore {
    /// `cache_pages`: capacity of the simulated cache (None = unlimited: every access hits).
    pub fn new(region: &Region, page_count: u64, cache_pages: Option<u64>) -> PageStore {
        let charge_reads = region.timing().is_some_and(|t| t.read_ns > 0);
        PageStore {
            region: region.clone(),
            page_count,
            latches: (0..page_count).map(|_| RwLock::new(())).collect(),
            cache: cache_pages.filter(|_| charge_reads).map(|c| {
                Mutex::new(CacheSim {
                    capacity: c.max(1) as usize,
                    clock: 0,
                    stamp_of: HashMap::new(),
                    by_stamp: BTreeMap::new(),
                })
            }),
            charge_reads,
        }
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    pub fn page_count(&self) -> u64 {
        self.page_count
    }

    /// The current contents of a page. The caller holds the page's latch (or otherwise knows the
    /// bytes it reads are stable, e.g. a row under its key lock).
    #[inline]
    pub fn page(&self, page: PageId) -> &[u8] {
        debug_assert!(page < self.page_count);
        self.region.read(page_offset(page), PAGE_SIZE)
    }

    /// Records that an operation reads `lines` cache lines of `page`; charges the modelled read
    /// latency on a simulated cache miss (or always, with an unlimited cache, never).
    #[inline]
    pub fn touch(&self, page: PageId, lines: u64) {
        if !self.charge_reads {
            return;
        }
        if let Some(cache) = &self.cache {
            if cache.lock().access(page) {
                self.region.charge_read(lines);
            }
        }
    }

    pub fn latch_shared(&self, page: PageId) -> RwLockReadGuard<'_, ()> {
        self.latches[page as usize].read()
    }

    pub fn latch_exclusive(&self, page: PageId) -> RwLockWriteGuard<'_, ()> {
        self.latches[page as usize].write()
    }
}

/// A latched page being modified through a [`PageWriter`] (convenience for single-range writes).
pub struct PageMut<'w> {
    pub writer: &'w mut dyn PageWriter,
    pub page: PageId,
}

impl PageMut<'_> {
    pub fn write(&mut self, offset: usize, bytes: &[u8]) -> Result<()> {
        self.writer.write(self.page, &[(offset, bytes)])
    }
}

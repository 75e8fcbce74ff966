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
//! page consults a simulated cache of `cache_pages` pages (set-associative, LRU-like within a
//! set); a miss charges the device read latency for the cache lines the operation reads.

use crate::engine::Result;
use crate::format::{page_offset, Layout, PageId, PAGE_SIZE};
use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use pmem::Region;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

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

    /// Ends the current group of writes (one structure modification): afterwards a crash no
    /// longer rolls it back. Callers invoke it while they still hold the latches of every page
    /// they wrote, so no other writer sees, and builds on, a change that could still be undone.
    fn complete(&mut self) -> Result<()>;

    /// Undoes the writes since the last `complete` (again under the same latches).
    fn roll_back(&mut self) -> Result<()>;
}

/// Simulated page cache for the read-latency model: set-associative (8 ways per set, page ids
/// hashed to sets), approximating LRU within each set by moving a hit one way toward the front
/// and inserting misses at the front. Lock-free (relaxed atomics): a race between two threads
/// can misplace a tag, which only perturbs the simulation, never correctness. An exact global
/// LRU behind one lock cost 40-60% of throughput even when every access hit.
struct CacheSim {
    ways: usize,
    sets: usize,
    /// `page + 1` per way (0 = empty), `ways` consecutive entries per set.
    tags: Box<[AtomicU64]>,
}

impl CacheSim {
    const WAYS: usize = 8;

    fn new(capacity_pages: u64) -> CacheSim {
        let capacity = capacity_pages.clamp(1, 1 << 32) as usize;
        let ways = capacity.min(Self::WAYS);
        let sets = capacity.div_ceil(ways);
        CacheSim { ways, sets, tags: (0..ways * sets).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Records an access; returns true on a miss.
    fn access(&self, page: PageId) -> bool {
        let tag = page + 1;
        let set = ((page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) % self.sets;
        let ways = &self.tags[set * self.ways..(set + 1) * self.ways];
        for i in 0..ways.len() {
            if ways[i].load(Ordering::Relaxed) == tag {
                if i > 0 {
                    let ahead = ways[i - 1].swap(tag, Ordering::Relaxed);
                    ways[i].store(ahead, Ordering::Relaxed);
                }
                return false;
            }
        }
        for i in (1..ways.len()).rev() {
            ways[i].store(ways[i - 1].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        ways[0].store(tag, Ordering::Relaxed);
        true
    }
}

/// Pages per chunk of the latch table.
const LATCH_CHUNK: usize = 4096;

/// One chunk of page latches, allocated on first use.
type LatchChunk = OnceLock<Box<[RwLock<()>]>>;

pub struct PageStore {
    region: Region,
    page_count: u64,
    first_data_page: PageId,
    /// Per-page latches, allocated a chunk at a time on first use, so that opening a large
    /// region costs nothing per page (recovery is O(in-flight work), not O(region)).
    latches: Box<[LatchChunk]>,
    cache: Option<CacheSim>,
    charge_reads: bool,
    /// Structural events (splits, merges, frees, ...) for crash-test coverage reports.
    counters: crate::counters::Counters,
}

impl PageStore {
    /// `cache_pages`: capacity of the simulated cache (None = unlimited: every access hits).
    pub fn new(region: &Region, layout: &Layout, cache_pages: Option<u64>) -> PageStore {
        let charge_reads = region.timing().is_some_and(|t| t.read_ns > 0);
        let chunks = (layout.page_count as usize).div_ceil(LATCH_CHUNK);
        PageStore {
            region: region.clone(),
            page_count: layout.page_count,
            first_data_page: layout.first_data_page(),
            latches: (0..chunks).map(|_| OnceLock::new()).collect(),
            cache: cache_pages.filter(|_| charge_reads).map(CacheSim::new),
            charge_reads,
            counters: crate::counters::Counters::new(region),
        }
    }

    /// Whether `page` is a data page (a B+tree node or heap page may live there): the check
    /// every page id read from the region passes before it is followed (a growing region's pages
    /// beyond its file are not data pages yet: touching them would fault).
    #[inline]
    pub fn is_data_page(&self, page: PageId) -> bool {
        page >= self.first_data_page
            && page < self.page_count
            && page_offset(page + 1) <= self.region.backed_len()
    }

    fn latch(&self, page: PageId) -> &RwLock<()> {
        // Callers pass only validated page ids (`is_data_page`) or fixed metadata pages.
        assert!(page < self.page_count, "latch of page {page} beyond the region");
        let chunk = self.latches[page as usize / LATCH_CHUNK]
            .get_or_init(|| (0..LATCH_CHUNK).map(|_| RwLock::new(())).collect());
        &chunk[page as usize % LATCH_CHUNK]
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    pub fn page_count(&self) -> u64 {
        self.page_count
    }

    /// The event counters of the engine this store belongs to.
    pub fn counters(&self) -> &crate::counters::Counters {
        &self.counters
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
            if cache.access(page) {
                self.region.charge_read(lines);
            }
        }
    }

    pub fn latch_shared(&self, page: PageId) -> RwLockReadGuard<'_, ()> {
        self.latch(page).read()
    }

    pub fn latch_exclusive(&self, page: PageId) -> RwLockWriteGuard<'_, ()> {
        self.latch(page).write()
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

#[cfg(test)]
mod tests {
    use super::CacheSim;

    #[test]
    fn cache_sim_hits_within_capacity_and_misses_beyond() {
        let c = CacheSim::new(64);
        assert!((0..64).all(|p| c.access(p)), "cold accesses miss");
        // A working set of half the capacity stays cached (set conflicts aside).
        let hits = (0..10).flat_map(|_| 0..32u64).filter(|p| !c.access(*p)).count();
        assert!(hits >= 300, "{hits} hits of 320");
        // Cycling through 16x the capacity mostly misses.
        let misses = (0..4).flat_map(|_| 0..1024u64).filter(|p| c.access(*p)).count();
        assert!(misses > 3500, "{misses} misses of 4096");
        let tiny = CacheSim::new(1);
        assert!(tiny.access(7) && !tiny.access(7) && tiny.access(8) && tiny.access(7));
    }
}

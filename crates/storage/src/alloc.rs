//! The persistent page allocator: one bit per page in the bitmap pages (1 = in use), kept twice
//! (the bitmap and its mirror, compared word by word whenever a word is read, so a damaged word
//! is `Corrupt` instead of a page handed out twice). A page is *free* (bit clear), *pending*
//! (bit set by a system transaction whose undo log holds a `PAGE_ALLOC` record, so a crash rolls
//! it back to free) or *in use* (bit set, allocating transaction ended). Frees are deferred until
//! the freeing system transaction has committed, and a freed page becomes allocatable only after
//! its post-commit work is persisted, so a page is never handed out twice and never leaked by a
//! crash (NVWAL's free / pending / in-use block states, Kim et al., ASPLOS 2016, §4.3).
//!
//! **Reserve.** The last [`PageAllocator::reserve_pages`] free pages are kept for work that frees
//! space (deletes, dropped tables, their undo and system transactions): an ordinary allocation
//! that would dip into them is refused (`RegionFull`), one made inside a [`FreeingScope`] is
//! not. So a full region can always be emptied, one delete at a time (issue 39). The reserve
//! is counted on the free list once the lazy scan has reached the end, so it costs nothing
//! until the region is nearly full.
//!
//! Open is O(1): nothing is scanned. The volatile free list is filled lazily by a cursor that
//! walks the bitmap as pages are needed. Invariant: a page below the cursor is on the free list
//! or in one worker's cache iff its bit is clear (and no transaction holds it reserved); a page
//! at or above it is found by the cursor, never pushed. The cursor only moves up.
//!
//! **Per-worker caches** (issue 35; the shape of `inplace`'s free-slot caches): each worker
//! moves free pages between the shared list and its own padded cache [`PAGE_BATCH`] at a time,
//! so it takes the shared mutex once per batch instead of twice per page. Volatile like the
//! list: a cached page is free in the bitmap, so a crash loses nothing (the scan finds it
//! again) and hands nothing out twice. A cache only ever holds pages beyond the reserve: a
//! refill leaves more than the reserve on the list, and once the scan has reached the end with
//! little left the allocator is *low* and every worker goes through the shared list as before,
//! which drains the caches before it says full. A bitmap word below the cursor is written under
//! the lock of its bitmap line only (the scan never reads it again); one at or above it also
//! under the shared mutex, which the scan holds.
//!
//! **Batches aligned to bitmap lines** (issue 35). A batch lies in one 64-byte bitmap line (512
//! pages), and a worker refills from the lowest line with listed pages that no other worker is
//! filling (the line of its last batch), scanning on for one if need be. So two workers'
//! allocations never set bits in one bitmap line (nor in its mirror's, nor take one line lock)
//! while another line is left; frees still clear bits wherever the freed pages lie. Only when
//! every listed page lies in lines other workers are filling and the scan has ended does a
//! refill share a line (`alloc_shared_line_refills`). The cost: a worker's line ends with a
//! batch shorter than [`PAGE_BATCH`] (one more shared acquisition per 512 pages), and up to one
//! partly used line per worker spreads the pages in use (at most 4 MiB per worker).

use crate::engine::{DbError, Result};
use crate::format::{page_offset, Layout, PageId, BITMAP_FIRST_PAGE};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use pmem::Region;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub struct PageAllocator {
    region: Region,
    layout: Layout,
    state: Mutex<FreeState>,
    /// Per worker: free pages below the cursor, beyond the reserve (see the module doc). Only
    /// its worker locks a cache, except a refusal that drains them all (a full region).
    caches: Box<[CachePadded<Mutex<Vec<PageId>>>]>,
    /// The cursor as of its last move, readable without `state` (it only grows): a page below
    /// it is never read by the scan again.
    scanned_below: AtomicU64,
    /// Set (under `state`) once the scan has reached the end and the list holds little more
    /// than the reserve: workers then bypass their caches, so the reserve rule is the list's.
    low: AtomicBool,
    /// Serialise updates of a bitmap word and its mirror (a read-modify-write), one lock per
    /// bitmap line modulo [`BIT_LOCKS`]: two workers contend only where they already share the
    /// bitmap's cache line.
    bit_locks: Box<[CachePadded<Mutex<()>>]>,
    /// Set while recovery replays system logs: a bitmap word may then differ from its mirror
    /// in the bits of the logged updates a crash interrupted (the two lines persist
    /// independently); replaying those records rewrites both. Afterwards any difference is
    /// damage.
    recovering: std::sync::atomic::AtomicBool,
    /// Acquisitions of `state` and of the bit locks, bit-lock acquisitions that waited, and
    /// refills that shared a line (per thread, summed when read), in
    /// [`PageAllocator::activity`].
    stats: pmem::stats::ThreadCounters<4>,
}

/// `FreeState::filling` of a cache that has taken no batch yet.
const NO_LINE: u64 = u64::MAX;

struct FreeState {
    /// Free pages below the cursor, ordered: the lowest are handed out first (a compact
    /// region), and a bitmap line's pages are one range.
    list: BTreeSet<PageId>,
    /// Next page the lazy scan looks at (a multiple of 64, or `page_count`).
    cursor: PageId,
    /// Per cache: the bitmap line its last batch came from ([`NO_LINE`]: none), which other
    /// workers' refills leave alone (module doc).
    filling: Vec<u64>,
}

/// The pages of bitmap line `line`.
fn line_pages(line: u64) -> std::ops::Range<PageId> {
    line * PAGES_PER_BITMAP_LINE..(line + 1) * PAGES_PER_BITMAP_LINE
}

impl FreeState {
    /// The line cache `me` refills from: the lowest line with listed pages that no other
    /// cache is filling (None: there is none). Its own line is no better than a lower one:
    /// lowest first keeps the region compact and reuses freed pages first.
    fn line_for(&self, me: usize) -> Option<u64> {
        let mut from = 0;
        // Bounded: each turn skips one line another cache is filling.
        loop {
            let line = *self.list.range(from..).next()? / PAGES_PER_BITMAP_LINE;
            let taken = self.filling.iter().enumerate().any(|(w, l)| w != me && *l == line);
            if !taken {
                return Some(line);
            }
            from = (line + 1) * PAGES_PER_BITMAP_LINE;
        }
    }

    /// Up to [`PAGE_BATCH`] of `line`'s listed pages, lowest first, now cache `me`'s line: the
    /// lowest for the caller, the rest into `cache` (which pops them lowest first).
    fn take_batch(&mut self, me: usize, line: u64, cache: &mut Vec<PageId>) -> Option<PageId> {
        let batch: Vec<PageId> =
            self.list.range(line_pages(line)).take(PAGE_BATCH).copied().collect();
        for p in &batch {
            self.list.remove(p);
        }
        self.filling[me] = line;
        let mut batch = batch.into_iter();
        let page = batch.next();
        cache.extend(batch.rev());
        page
    }
}

/// Bitmap words the lazy scan reads per refill: bounds the time one allocation can take.
const SCAN_WORDS: u64 = 64;

/// Free pages a worker moves between the shared list and its cache at once; a cache holding
/// more than twice this gives the surplus back.
pub const PAGE_BATCH: usize = 32;

/// Free pages beyond the reserve, on the list once the scan has ended, below which the
/// allocator turns low (caches bypassed), and above which it stops being low.
const LOW_ENTER: usize = PAGE_BATCH;
const LOW_LEAVE: usize = 4 * PAGE_BATCH;

/// Bit locks (see `PageAllocator::bit_locks`).
const BIT_LOCKS: usize = 64;

/// Pages per 64-byte line of the bitmap: a bit lock covers one line.
const PAGES_PER_BITMAP_LINE: u64 = 64 * 8;
// A refill leaves more than the reserve on the list; leaving low needs more than entering.
const _: () = assert!(PAGE_BATCH > 1 && LOW_ENTER >= PAGE_BATCH && LOW_ENTER < LOW_LEAVE);

/// Free pages kept for work that frees space (see the module doc): 512 KiB, enough for the
/// trash rows and index splits of thousands of deletes in one transaction.
pub const RESERVE_PAGES: u64 = 16;

thread_local! {
    /// Acquisitions of any allocator's shared `state` mutex by this thread (tests count them).
    static SHARED_LOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Acquisitions of any allocator's bit locks by this thread.
    static BIT_LOCKS_TAKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Depth of the [`FreeingScope`]s open on this thread.
    static FREEING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// While one is alive, allocations made by this thread may use the pages kept for freeing
/// work. Open one around a delete (and nothing else): the pages it uses come back when the
/// space the delete frees is reclaimed.
#[must_use = "the scope ends when the guard is dropped"]
pub struct FreeingScope(());

impl FreeingScope {
    pub fn enter() -> FreeingScope {
        FREEING.with(|f| f.set(f.get() + 1));
        FreeingScope(())
    }

    /// Whether this thread is inside a scope.
    pub fn active() -> bool {
        FREEING.with(|f| f.get() > 0)
    }
}

impl Drop for FreeingScope {
    fn drop(&mut self) {
        FREEING.with(|f| f.set(f.get().saturating_sub(1)));
    }
}

/// Free pages an allocator over `layout` keeps for freeing work: [`RESERVE_PAGES`], or an
/// eighth of the data pages of a smaller region (also `cow`'s NVM-CoW layout's rule).
pub fn reserve_pages(layout: &Layout) -> u64 {
    let data = layout.page_count.saturating_sub(layout.first_data_page());
    RESERVE_PAGES.min(data / 8)
}

/// How many times the calling thread has taken an allocator's shared mutex (issue 35: once
/// per [`PAGE_BATCH`] allocations, counted by tests).
pub fn shared_locks_taken() -> u64 {
    SHARED_LOCKS.with(|c| c.get())
}

/// How many times the calling thread has taken an allocator's bit locks.
pub fn bit_locks_taken() -> u64 {
    BIT_LOCKS_TAKEN.with(|c| c.get())
}

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
            state: Mutex::new(FreeState {
                list: BTreeSet::new(),
                cursor,
                filling: vec![NO_LINE; layout.workers.max(1) as usize],
            }),
            caches: (0..layout.workers.max(1)).map(|_| Default::default()).collect(),
            scanned_below: AtomicU64::new(cursor),
            low: AtomicBool::new(false),
            bit_locks: (0..BIT_LOCKS).map(|_| Default::default()).collect(),
            recovering: std::sync::atomic::AtomicBool::new(false),
            stats: Default::default(),
        }
    }

    /// The shared free-page state, locked (and counted).
    fn lock_state(&self) -> parking_lot::MutexGuard<'_, FreeState> {
        SHARED_LOCKS.with(|c| c.set(c.get() + 1));
        self.stats.add(0, 1);
        self.state.lock()
    }

    /// The lock of `page`'s bitmap line (and its mirror's), taken to update a bit (counted, and
    /// counted again if another thread held it: the contention line-aligned batches remove).
    fn lock_bits(&self, page: PageId) -> parking_lot::MutexGuard<'_, ()> {
        BIT_LOCKS_TAKEN.with(|c| c.set(c.get() + 1));
        let lock = &self.bit_locks[(page / PAGES_PER_BITMAP_LINE) as usize % BIT_LOCKS];
        match lock.try_lock() {
            Some(g) => {
                self.stats.add(1, 1);
                g
            }
            None => {
                self.stats.add2(1, 1, Some((2, 1)));
                lock.lock()
            }
        }
    }

    /// The same lock, taken to read a word and its mirror as one (checks and reports: not
    /// counted, so a scan of the whole bitmap does not swamp the figure).
    fn bit_lock(&self, page: PageId) -> parking_lot::MutexGuard<'_, ()> {
        self.bit_locks[(page / PAGES_PER_BITMAP_LINE) as usize % BIT_LOCKS].lock()
    }

    /// Worker `worker`'s cache index (an out-of-range worker shares the last one, the
    /// administrator's).
    fn cache_index(&self, worker: usize) -> usize {
        worker.min(self.caches.len() - 1)
    }

    fn cache(&self, worker: usize) -> parking_lot::MutexGuard<'_, Vec<PageId>> {
        self.caches[self.cache_index(worker)].lock()
    }

    /// Counters since attach, as (name, count) pairs for an engine's `activity`.
    pub fn activity(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("alloc_shared_locks", self.stats.get(0)),
            ("alloc_bit_locks", self.stats.get(1)),
            ("alloc_bit_lock_waits", self.stats.get(2)),
            ("alloc_shared_line_refills", self.stats.get(3)),
        ]
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
        let _bits = self.bit_lock(page);
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

    /// Free pages kept for freeing work ([`reserve_pages`] of this allocator's layout).
    pub fn reserve_pages(&self) -> u64 {
        reserve_pages(&self.layout)
    }

    /// Takes a free page (volatile only) for worker `worker`. The caller persists a
    /// `PAGE_ALLOC` undo record and then calls [`PageAllocator::set_bit`]. `Ok(None)`: every
    /// page is in use, or only the reserve is left and the caller is not inside a
    /// [`FreeingScope`].
    pub fn reserve(&self, worker: usize) -> Result<Option<PageId>> {
        if !self.low.load(Ordering::Acquire) {
            let mut cache = self.cache(worker);
            // Checked again under the cache lock: a page pushed after a drain saw `low` set.
            if !self.low.load(Ordering::Acquire) {
                if let Some(page) = cache.pop() {
                    return Ok(Some(page));
                }
                // Lock order: a cache, then `state` (a drain holds no `state` while it takes
                // the caches).
                let me = self.cache_index(worker);
                if let Some(page) = self.refill_cache(me, &mut self.lock_state(), &mut cache) {
                    return Ok(Some(page));
                }
            }
        }
        self.reserve_shared()
    }

    /// One shared acquisition: a page for the caller and up to `PAGE_BATCH - 1` more of the
    /// same bitmap line for cache `me` (empty), taken only while the list keeps more than the
    /// reserve. `None` (the caller goes through the shared list): the scan has ended with
    /// little left (the allocator is now low) or cannot go on.
    fn refill_cache(
        &self,
        me: usize,
        st: &mut FreeState,
        cache: &mut Vec<PageId>,
    ) -> Option<PageId> {
        // The ordinary reserve even inside a `FreeingScope`: a cache serves ordinary
        // allocations later, so it must never hold a kept page.
        let keep = self.reserve_pages() as usize;
        // Bounded: each turn moves the cursor up, or returns.
        loop {
            if st.list.len() > keep + LOW_ENTER {
                if let Some(line) = st.line_for(me) {
                    return st.take_batch(me, line, cache);
                }
                // Every listed page lies in lines other workers are filling: scan on for a
                // line of this worker's own; past the end (or if the region cannot grow), share
                // the lowest line rather than bypass the cache.
                if st.cursor < self.layout.page_count && self.refill(st).is_ok() {
                    continue;
                }
                self.stats.add(3, 1);
                let line = *st.list.first()? / PAGES_PER_BITMAP_LINE;
                return st.take_batch(me, line, cache);
            }
            if st.cursor >= self.layout.page_count {
                self.low.store(true, Ordering::Release);
                return None;
            }
            self.refill(st).ok()?;
        }
    }

    /// Takes a page from the shared list, the reserve's rule applied to it alone (the caches
    /// hold pages beyond it). Drains every cache before it refuses.
    fn reserve_shared(&self) -> Result<Option<PageId>> {
        let keep = if FreeingScope::active() { 0 } else { self.reserve_pages() as usize };
        let mut drained = false;
        loop {
            let mut st = self.lock_state();
            let refusal = loop {
                if st.list.len() > keep {
                    let page = st.list.pop_first();
                    debug_assert!(page.is_some_and(|p| self.is_listable(p)), "page {page:?}");
                    return Ok(page);
                }
                if st.cursor >= self.layout.page_count {
                    break Ok(None);
                }
                // A region that cannot grow: what is listed (and cached) is all there is.
                if let Err(e) = self.refill(&mut st) {
                    break Err(e);
                }
            };
            drop(st);
            if drained {
                return refusal;
            }
            drained = true;
            let pages = self.drain_caches();
            if pages.is_empty() {
                return refusal;
            }
            let mut st = self.lock_state();
            st.list.extend(pages);
        }
    }

    /// Empties every worker's cache, taking no other lock meanwhile.
    fn drain_caches(&self) -> Vec<PageId> {
        self.caches.iter().flat_map(|c| std::mem::take(&mut *c.lock())).collect()
    }

    /// Moves the cursor over up to `SCAN_WORDS` bitmap words, listing their clear bits.
    fn refill(&self, st: &mut FreeState) -> Result<()> {
        let start = st.cursor;
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
                // The cursor moves back to a word boundary; pages listed must lie below it, or
                // the next scan of that word would list them twice. Never below where this
                // scan began: words below it are written without `state` (module doc).
                let cursor = st.cursor.min(backed / 64 * 64).max(start);
                found.retain(|p| *p < cursor);
                st.cursor = cursor;
                if found.is_empty() {
                    return Err(DbError::RegionFull(format!(
                        "no free page below page {backed} and the region cannot grow ({e})"
                    )));
                }
            }
        }
        st.list.extend(found);
        self.scanned_below.store(st.cursor, Ordering::Release);
        Ok(())
    }

    /// Gives back a page that `worker` reserved and whose bit was never set.
    pub fn unreserve(&self, worker: usize, page: PageId) {
        debug_assert!(self.is_listable(page), "unreserved page {page} is not a free data page");
        self.give(worker, vec![page]);
    }

    /// Puts `pages` (below the cursor, free in the bitmap durably, held by no one) in
    /// `worker`'s cache; past `2 * PAGE_BATCH` cached, all but `PAGE_BATCH` go back to the
    /// shared list in one acquisition. A low allocator lists them at once.
    fn give(&self, worker: usize, pages: Vec<PageId>) {
        let listed = {
            let mut cache = self.cache(worker);
            if self.low.load(Ordering::Acquire) {
                pages
            } else {
                cache.extend(pages);
                if cache.len() <= 2 * PAGE_BATCH {
                    return;
                }
                let n = cache.len() - PAGE_BATCH;
                cache.drain(..n).collect()
            }
        };
        let mut st = self.lock_state();
        st.list.extend(listed);
        self.note_listed(&st);
    }

    /// After pages were listed: enough beyond the reserve again ends the low state.
    fn note_listed(&self, st: &FreeState) {
        if st.list.len() > self.reserve_pages() as usize + LOW_LEAVE
            && self.low.load(Ordering::Relaxed)
        {
            self.low.store(false, Ordering::Release);
        }
    }

    /// The free list's invariant, for debug assertions: a data page of this layout whose bit
    /// is clear (a listed page in use would be handed to two owners).
    fn is_listable(&self, page: PageId) -> bool {
        let data = (self.layout.first_data_page()..self.layout.page_count).contains(&page);
        let _bits = data.then(|| self.bit_lock(page));
        data && self.word(page).is_ok_and(|w| w & (1 << (page % 64)) == 0)
    }

    /// Marks `page` in use. Returns the ranges to flush (the word and its mirror).
    pub fn set_bit(&self, page: PageId) -> Result<[(u64, u64); 2]> {
        self.update_locked(page, true)
    }

    /// Marks `page` free in the bitmap: the rollback of an allocation (the page was reserved,
    /// so it is below the cursor and goes back through [`PageAllocator::release`] once the
    /// rollback is persisted).
    pub fn clear_bit(&self, page: PageId) -> Result<[(u64, u64); 2]> {
        self.update_locked(page, false)
    }

    /// [`PageAllocator::update_bit`] under the locks the module doc names: the bit lock, and
    /// `state` too for a word the scan may still read.
    fn update_locked(&self, page: PageId, on: bool) -> Result<[(u64, u64); 2]> {
        if page < self.scanned_below.load(Ordering::Acquire) {
            let _bits = self.lock_bits(page);
            return self.update_bit(page, on);
        }
        let _st = self.lock_state();
        let _bits = self.lock_bits(page);
        self.update_bit(page, on)
    }

    /// Frees the pages of a committed system transaction run by `worker`: clears their bits,
    /// runs `persist` (which must make the cleared bits and the log's end durable) and only
    /// then makes the pages allocatable. Where a page lies at or above the cursor, the shared
    /// lock is held throughout, so the lazy scan cannot hand out a page whose free a crash
    /// could still redo over its next owner; below it, nothing but this call can list them.
    pub fn free_committed(
        &self,
        worker: usize,
        pages: &[PageId],
        persist: impl FnOnce(&[(u64, u64)]),
    ) -> Result<()> {
        let below = self.scanned_below.load(Ordering::Acquire);
        let clear = |pages: &[PageId]| -> Result<Vec<(u64, u64)>> {
            let mut written = Vec::with_capacity(pages.len() * 2);
            for p in pages {
                let _bits = self.lock_bits(*p);
                written.extend(self.update_bit(*p, false)?);
            }
            Ok(written)
        };
        if pages.iter().all(|p| *p < below) {
            persist(&clear(pages)?);
            debug_assert!(pages.iter().all(|p| self.is_listable(*p)), "freed pages in use");
            self.give(worker, pages.to_vec());
            return Ok(());
        }
        let mut st = self.lock_state();
        persist(&clear(pages)?);
        debug_assert!(pages.iter().all(|p| self.is_listable(*p)), "freed pages still in use");
        let cursor = st.cursor;
        st.list.extend(pages.iter().filter(|p| **p < cursor));
        self.note_listed(&st);
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

    /// Returns pages whose rolled-back allocation is persisted to `worker`'s cache or the
    /// free list (pages at or above the cursor are left to the scan).
    pub fn release(&self, worker: usize, pages: &[PageId]) {
        let below = self.scanned_below.load(Ordering::Acquire);
        let (cached, rest): (Vec<PageId>, Vec<PageId>) = pages.iter().partition(|p| **p < below);
        if !cached.is_empty() {
            self.give(worker, cached);
        }
        if !rest.is_empty() {
            let mut st = self.lock_state();
            let cursor = st.cursor;
            st.list.extend(rest.into_iter().filter(|p| *p < cursor));
            self.note_listed(&st);
        }
    }

    /// Counts free pages by reading the whole bitmap (for checks and reports, not the hot path).
    /// A word at a time (each checked against its mirror): a growable region is laid out for
    /// up to 2^27 pages, and a bit at a time took seconds.
    pub fn count_free(&self) -> Result<u64> {
        self.count_free_in(self.layout.first_data_page()..self.layout.page_count)
    }

    /// Free data pages in `pages`, counted as [`PageAllocator::count_free`] does.
    pub fn count_free_in(&self, pages: std::ops::Range<PageId>) -> Result<u64> {
        let first = pages.start.max(self.layout.first_data_page());
        let end = pages.end.min(self.layout.page_count);
        let mut free = 0;
        let mut base = first / 64 * 64;
        while base < end {
            let mut used = {
                let _bits = self.bit_lock(base);
                self.word(base)?
            };
            // Bits outside the data pages count as used.
            for bit in 0..64 {
                if base + bit < first || base + bit >= end {
                    used |= 1 << bit;
                }
            }
            free += u64::from((!used).count_ones());
            base += 64;
        }
        Ok(free)
    }
}

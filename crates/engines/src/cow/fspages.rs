//! `cow io=fs` reads (N-Store's CoW, Arulraj et al. SIGMOD 2015 §3.2): a traditional engine reads
//! its B+tree through the file system, not through a mapping. N-Store's CoW engine (the file
//! mode of its `cow_btree`, from OpenBSD's btree.c, at a6fe701) looks a page up in a DRAM page
//! cache of `BT_MAXCACHE_DEF` = 1,024 pages of 4 KiB and, on a miss, `pread`s the page from the
//! file into it. This is that path: a node read is a lookup in the worker's page cache, and a
//! miss `pread`s the whole 8 KiB page (the kernel's copy reads every line of it from the
//! device, so the CPU-cache read model charges them all; a hit reads DRAM and is not charged).
//! The cache holds [`super::options::Options::fs_cache_pages`] pages (default 512: N-Store's
//! 4 MiB), one cache per worker (no lock another worker takes; N-Store's one cache sat behind
//! its engine-wide lock), replaced by CLOCK (second chance) where btree.c prunes the least
//! recently used.
//!
//! **Why a cached page cannot be stale.** A committed page never changes while a version can
//! reach it: a writer writes only pages it allocated, and a replaced page is reused only once
//! no snapshot can reach it (`Cow::reclaim`). Each allocation of a page bumps its incarnation
//! (one `u32` per page, written by the single writer when it takes the page, never on a read
//! path); a cache entry remembers the incarnation it was read at and is used only while the
//! page's incarnation is unchanged. A page reachable from a reader's pinned snapshot cannot be
//! reallocated meanwhile, so the incarnation a reader loads before its `pread` still holds
//! after it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use storage::format::PageId;

/// One cached page.
struct Frame {
    page: PageId,
    incarnation: u32,
    bytes: Arc<[u8]>,
    /// CLOCK's reference bit: set by a hit, cleared as the hand passes.
    referenced: bool,
}

/// One worker's page cache (CLOCK replacement).
pub(crate) struct PageCache {
    capacity: usize,
    map: HashMap<PageId, usize>,
    frames: Vec<Frame>,
    hand: usize,
}

impl PageCache {
    pub fn new(capacity: usize) -> PageCache {
        PageCache { capacity, map: HashMap::new(), frames: Vec::new(), hand: 0 }
    }

    /// The cached bytes of `page` if they were read at `incarnation`.
    pub fn get(&mut self, page: PageId, incarnation: u32) -> Option<Arc<[u8]>> {
        let &i = self.map.get(&page)?;
        let f = &mut self.frames[i];
        if f.incarnation != incarnation {
            return None;
        }
        f.referenced = true;
        Some(f.bytes.clone())
    }

    /// Caches `page` at `incarnation`, its bytes filled by `fill` into a buffer of `len`
    /// bytes (an evicted frame's when no transaction still holds it). Returns the bytes, or
    /// `fill`'s error (nothing cached then). With a capacity of 0 nothing is kept.
    pub fn fill<E>(
        &mut self,
        page: PageId,
        incarnation: u32,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Arc<[u8]>, E> {
        if self.capacity == 0 {
            let mut buf = vec![0u8; len];
            fill(&mut buf)?;
            return Ok(buf.into());
        }
        // The frame to use: the page's own (a stale incarnation), a new one, or CLOCK's victim.
        let slot = match self.map.get(&page) {
            Some(&i) => Some(i),
            None if self.frames.len() < self.capacity => None,
            None => Some(self.victim()),
        };
        if let Some(i) = slot {
            // The frame is emptied first, so that a failed fill leaves nothing cached.
            let f = &mut self.frames[i];
            self.map.remove(&f.page);
            (f.page, f.referenced) = (PageId::MAX, false);
            // Its buffer is reused unless a transaction still holds it.
            if let Some(buf) = Arc::get_mut(&mut f.bytes).filter(|b| b.len() == len) {
                fill(buf)?;
                (f.page, f.incarnation) = (page, incarnation);
                self.map.insert(page, i);
                return Ok(f.bytes.clone());
            }
        }
        let mut buf = vec![0u8; len];
        fill(&mut buf)?;
        let bytes: Arc<[u8]> = Arc::from(buf);
        let frame = Frame { page, incarnation, bytes: bytes.clone(), referenced: false };
        let i = match slot {
            Some(i) => {
                self.frames[i] = frame;
                i
            }
            None => {
                self.frames.push(frame);
                self.frames.len() - 1
            }
        };
        self.map.insert(page, i);
        Ok(bytes)
    }

    /// CLOCK: the first frame past the hand whose reference bit is clear (clearing the bits
    /// it passes).
    fn victim(&mut self) -> usize {
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.frames.len();
            let f = &mut self.frames[i];
            if f.referenced {
                f.referenced = false;
            } else {
                return i;
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// Per-page incarnations: bumped each time the allocator hands a page out.
pub(crate) struct Incarnations(Box<[AtomicU32]>);

impl Incarnations {
    pub fn new(pages: u64) -> Incarnations {
        Incarnations((0..pages).map(|_| AtomicU32::new(0)).collect())
    }

    /// The page was allocated: cached copies of its earlier contents are stale.
    pub fn bump(&self, page: PageId) {
        if let Some(c) = self.0.get(page as usize) {
            c.fetch_add(1, Ordering::Release);
        }
    }

    pub fn get(&self, page: PageId) -> u32 {
        self.0.get(page as usize).map_or(0, |c| c.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_with(v: u8) -> impl FnOnce(&mut [u8]) -> Result<(), ()> {
        move |b: &mut [u8]| {
            b.fill(v);
            Ok(())
        }
    }

    #[test]
    fn a_hit_needs_the_same_incarnation() {
        let mut c = PageCache::new(4);
        let b = c.fill(7, 1, 16, fill_with(3)).unwrap();
        assert_eq!(&b[..], &[3u8; 16][..]);
        assert!(c.get(7, 1).is_some_and(|b| b[0] == 3));
        assert!(c.get(7, 2).is_none(), "the page was reallocated since");
        assert!(c.get(8, 1).is_none());
        // Refilled at the new incarnation, in the same frame.
        c.fill(7, 2, 16, fill_with(9)).unwrap();
        assert!(c.get(7, 2).is_some_and(|b| b[0] == 9));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn clock_keeps_referenced_pages_and_holds_its_capacity() {
        let mut c = PageCache::new(3);
        for p in 0..3 {
            c.fill(p, 0, 8, fill_with(p as u8)).unwrap();
        }
        assert!(c.get(0, 0).is_some());
        // Page 3 evicts the first unreferenced frame past the hand: page 1 (page 0 was hit).
        c.fill(3, 0, 8, fill_with(3)).unwrap();
        assert_eq!(c.len(), 3);
        assert!(c.get(0, 0).is_some(), "a referenced page stays");
        assert!(c.get(1, 0).is_none(), "the victim");
        assert!(c.get(2, 0).is_some() && c.get(3, 0).is_some());
    }

    #[test]
    fn a_held_victim_is_not_reused_and_a_failed_fill_caches_nothing() {
        let mut c = PageCache::new(1);
        let held = c.fill(1, 0, 8, fill_with(1)).unwrap();
        let b = c.fill(2, 0, 8, fill_with(2)).unwrap();
        assert_eq!(&held[..], &[1u8; 8][..], "a transaction's page never changes under it");
        assert_eq!(&b[..], &[2u8; 8][..]);
        assert!(c.fill(3, 0, 8, |_| Err::<(), _>("io")).is_err());
        assert!(c.get(2, 0).is_none() && c.get(3, 0).is_none());
        c.fill(4, 0, 8, fill_with(4)).unwrap();
        assert!(c.get(4, 0).is_some());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn no_capacity_caches_nothing() {
        let mut c = PageCache::new(0);
        assert_eq!(&c.fill(1, 0, 4, fill_with(5)).unwrap()[..], &[5u8; 4][..]);
        assert!(c.get(1, 0).is_none());
    }

    #[test]
    fn incarnations_count_allocations_and_ignore_ids_past_the_end() {
        let inc = Incarnations::new(4);
        inc.bump(2);
        inc.bump(2);
        assert_eq!(inc.get(2), 2);
        assert_eq!(inc.get(1), 0);
        inc.bump(99);
        assert_eq!(inc.get(99), 0);
    }
}

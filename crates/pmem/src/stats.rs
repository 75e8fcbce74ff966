//! Device statistics, always on: each thread bumps counters in its own cache-padded shard with
//! plain relaxed loads and stores (no sharing, no locked instruction on the fast path); a read
//! sums the shards.

use crate::flush::LineSpan;
use crossbeam_utils::CachePadded;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

const SHARDS: usize = 64;
const COUNTERS: usize = 6;

#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    Stores = 0,
    BytesWritten = 1,
    LinesFlushed = 2,
    Fences = 3,
    DelayNs = 4,
    LinesReadCharged = 5,
}

/// A snapshot of a region's counters (or a difference of two snapshots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub stores: u64,
    pub bytes_written: u64,
    pub lines_flushed: u64,
    pub fences: u64,
    /// Time spent in modelled delays (barriers, bandwidth, reads), in nanoseconds.
    pub delay_ns: u64,
    pub lines_read_charged: u64,
}

impl Stats {
    /// `self - earlier`, for per-run deltas.
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            stores: self.stores.wrapping_sub(earlier.stores),
            bytes_written: self.bytes_written.wrapping_sub(earlier.bytes_written),
            lines_flushed: self.lines_flushed.wrapping_sub(earlier.lines_flushed),
            fences: self.fences.wrapping_sub(earlier.fences),
            delay_ns: self.delay_ns.wrapping_sub(earlier.delay_ns),
            lines_read_charged: self.lines_read_charged.wrapping_sub(earlier.lines_read_charged),
        }
    }
}

thread_local! {
    static THREAD_ID: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };
    static SHARD: ShardSlot = ShardSlot::claim();
}

/// A unique id of the current thread, dense from 0 (used by traces and the crash simulator).
pub fn thread_id() -> u64 {
    THREAD_ID.with(|s| *s)
}

/// Shards `0..OWNED_SHARDS` each belong to at most one live thread, which bumps its counters
/// with a plain load and store: no locked instruction, which on x86 would also wait for the
/// thread's earlier stores and cache-line flushes to complete (a hidden fence on the persist
/// path). Threads beyond that share the last shard with atomic read-modify-writes.
const OWNED_SHARDS: usize = SHARDS - 1;
const SHARED_SHARD: usize = SHARDS - 1;

static SHARD_CLAIMED: [AtomicBool; OWNED_SHARDS] = [const { AtomicBool::new(false) }; OWNED_SHARDS];

struct ShardSlot {
    index: usize,
}

impl ShardSlot {
    fn claim() -> ShardSlot {
        // Acquire pairs with the Release in `drop`: the previous owner's counts are visible.
        let free = SHARD_CLAIMED.iter().position(|c| !c.swap(true, Ordering::AcqRel));
        ShardSlot { index: free.unwrap_or(SHARED_SHARD) }
    }
}

impl Drop for ShardSlot {
    fn drop(&mut self) {
        if self.index != SHARED_SHARD {
            SHARD_CLAIMED[self.index].store(false, Ordering::Release);
        }
    }
}

pub(crate) struct StatCounters {
    shards: Box<[CachePadded<[AtomicU64; COUNTERS]>]>,
}

impl StatCounters {
    pub(crate) fn new() -> StatCounters {
        StatCounters {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    #[inline(always)]
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        self.add2(counter, n, None);
    }

    /// Adds to one or two counters with one thread-local lookup.
    #[inline(always)]
    pub(crate) fn add2(&self, first: Counter, n: u64, second: Option<(Counter, u64)>) {
        // During thread teardown the slot may be gone: count in the shared shard then.
        let index = SHARD.try_with(|s| s.index).unwrap_or(SHARED_SHARD);
        let shard = &self.shards[index];
        let bump = |c: Counter, n: u64| {
            let cell = &shard[c as usize];
            if index == SHARED_SHARD {
                cell.fetch_add(n, Ordering::Relaxed);
            } else {
                // This thread is the only writer of an owned shard (see `OWNED_SHARDS`).
                cell.store(cell.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            }
        };
        bump(first, n);
        if let Some((c, n)) = second {
            bump(c, n);
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let sum = |c: Counter| -> u64 {
            self.shards.iter().map(|s| s[c as usize].load(Ordering::Relaxed)).sum()
        };
        Stats {
            stores: sum(Counter::Stores),
            bytes_written: sum(Counter::BytesWritten),
            lines_flushed: sum(Counter::LinesFlushed),
            fences: sum(Counter::Fences),
            delay_ns: sum(Counter::DelayNs),
            lines_read_charged: sum(Counter::LinesReadCharged),
        }
    }
}

/// Optional per-64-byte-line write counts, for wear and device-lifetime analysis (thesis §5.3.3,
/// Fig. 5.7). Counts lines *flushed* (written to the device), not stores to the cache.
pub struct WearMap {
    lines: Box<[AtomicU32]>,
}

impl WearMap {
    pub(crate) fn new(len_bytes: u64) -> WearMap {
        let n = len_bytes.div_ceil(64) as usize;
        WearMap { lines: (0..n).map(|_| AtomicU32::new(0)).collect() }
    }

    #[inline]
    pub(crate) fn record(&self, span: LineSpan) {
        for line in span.lines() {
            if let Some(c) = self.lines.get(line as usize) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Write count of every line, in line order.
    pub fn counts(&self) -> Vec<u32> {
        self.lines.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_across_threads() {
        let c = std::sync::Arc::new(StatCounters::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(Counter::Fences, 1);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(c.snapshot().fences, 4000);
    }
}

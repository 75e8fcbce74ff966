//! Device statistics, always on: each thread bumps counters in its own cache-padded shard with
//! relaxed atomics (no sharing on the fast path); a read sums the shards.

use crossbeam_utils::CachePadded;
use serde::Serialize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

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
}

/// A unique id of the current thread, dense from 0 (used by traces and the crash simulator).
pub fn thread_id() -> u64 {
    THREAD_ID.with(|s| *s)
}

#[inline(always)]
fn thread_slot() -> usize {
    thread_id() as usize % SHARDS
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
        let shard = &self.shards[thread_slot()];
        // A relaxed RMW on a line only this thread writes (modulo shard collisions) is cheap.
        shard[counter as usize].fetch_add(n, Ordering::Relaxed);
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
    pub(crate) fn record(&self, first_line: u64, count: u64) {
        for line in first_line..first_line + count {
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

//! Device statistics, always on: each thread bumps counters in its own cache-padded shard with
//! plain relaxed loads and stores (no sharing, no locked instruction on the fast path); a read
//! sums the shards.

use crate::flush::LineSpan;
use crossbeam_utils::CachePadded;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

const SHARDS: usize = 64;
const COUNTERS: usize = 4;

/// The access path's own counters; the timing model keeps its delays, charged reads and
/// reservations itself (it is one of the region's observers) and `Region::stats` adds them.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    Stores = 0,
    BytesWritten = 1,
    LinesFlushed = 2,
    Fences = 3,
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
    /// Bandwidth reservations made by the timing model (`lines_flushed / reservations` is the
    /// mean reservation size in lines; thesis §5.1 wants at least 4).
    pub reservations: u64,
    /// `fdatasync`s of an `io=fs` engine charged by the file-system sync model (issue 36), and
    /// the bytes written through the file that they charged for.
    pub fs_syncs_charged: u64,
    pub fs_bytes_charged: u64,
    /// Time the CPU-cache read model spent simulating (issue 36), and the part of it that no
    /// charged read stall absorbed: the model's own cost left in the measured time.
    pub cpu_cache_model_ns: u64,
    pub cpu_cache_unabsorbed_ns: u64,
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
            reservations: self.reservations.wrapping_sub(earlier.reservations),
            fs_syncs_charged: self.fs_syncs_charged.wrapping_sub(earlier.fs_syncs_charged),
            fs_bytes_charged: self.fs_bytes_charged.wrapping_sub(earlier.fs_bytes_charged),
            cpu_cache_model_ns: self.cpu_cache_model_ns.wrapping_sub(earlier.cpu_cache_model_ns),
            cpu_cache_unabsorbed_ns: self
                .cpu_cache_unabsorbed_ns
                .wrapping_sub(earlier.cpu_cache_unabsorbed_ns),
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

/// The device's counters: [`ThreadCounters`] over [`Counter`].
pub(crate) struct StatCounters {
    cells: ThreadCounters<COUNTERS>,
}

impl StatCounters {
    pub(crate) fn new() -> StatCounters {
        StatCounters { cells: ThreadCounters::default() }
    }

    #[inline(always)]
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        self.cells.add(counter as usize, n);
    }

    /// Adds to one or two counters with one thread-local lookup.
    #[inline(always)]
    pub(crate) fn add2(&self, first: Counter, n: u64, second: Option<(Counter, u64)>) {
        self.cells.add2(first as usize, n, second.map(|(c, m)| (c as usize, m)));
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let sum = |c: Counter| self.cells.get(c as usize);
        Stats {
            stores: sum(Counter::Stores),
            bytes_written: sum(Counter::BytesWritten),
            lines_flushed: sum(Counter::LinesFlushed),
            fences: sum(Counter::Fences),
            ..Stats::default()
        }
    }
}

/// `N` counters kept per thread like the device's own (each thread bumps its owned shard with a
/// plain load and store; reads sum the shards), for engine statistics that are bumped on every
/// commit or operation: a shared atomic there is one cache line that every thread writes.
pub struct ThreadCounters<const N: usize> {
    shards: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Default for ThreadCounters<N> {
    fn default() -> Self {
        ThreadCounters {
            shards: (0..SHARDS)
                .map(|_| CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }
}

impl<const N: usize> ThreadCounters<N> {
    /// Adds `n` to counter `i` (`i < N`) in this thread's shard.
    #[inline(always)]
    pub fn add(&self, i: usize, n: u64) {
        self.add2(i, n, None);
    }

    /// Adds to one or two counters with one thread-local lookup.
    #[inline(always)]
    pub fn add2(&self, first: usize, n: u64, second: Option<(usize, u64)>) {
        // During thread teardown the slot may be gone: count in the shared shard then.
        let index = SHARD.try_with(|s| s.index).unwrap_or(SHARED_SHARD);
        let shard = &self.shards[index];
        let bump = |i: usize, n: u64| {
            let cell = &shard[i];
            if index == SHARED_SHARD {
                cell.fetch_add(n, Ordering::Relaxed);
            } else {
                // This thread is the only writer of an owned shard (see `OWNED_SHARDS`).
                cell.store(cell.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
            }
        };
        bump(first, n);
        if let Some((i, n)) = second {
            bump(i, n);
        }
    }

    /// Counter `i` summed over every thread.
    pub fn get(&self, i: usize) -> u64 {
        self.shards.iter().map(|s| s[i].load(Ordering::Relaxed)).fold(0, u64::wrapping_add)
    }
}

/// What a wear map counts a write-back of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WearGranularity {
    /// Every 64-byte line a flush covers counts one write.
    #[default]
    Line,
    /// Also per byte: a flushed line counts one write for each of its bytes stored since the
    /// line was last flushed (thesis §5.3.3, Fig. 5.7: "Persists are tracked at byte
    /// granularity"). A page LSN rewritten by every update wears faster than the row beside it.
    Byte,
}

impl WearGranularity {
    pub fn name(self) -> &'static str {
        match self {
            WearGranularity::Line => "line",
            WearGranularity::Byte => "byte",
        }
    }

    pub fn parse(s: &str) -> Option<WearGranularity> {
        [WearGranularity::Line, WearGranularity::Byte].into_iter().find(|g| g.name() == s)
    }
}

/// Region bytes per lazily allocated chunk of byte counters.
const BYTE_CHUNK: usize = 4096;
/// Lines per chunk.
const CHUNK_LINES: usize = BYTE_CHUNK / 64;

/// The byte-granular state of [`BYTE_CHUNK`] region bytes, allocated on their first store.
/// Per line: which of its bytes were stored since its last flush (bit `i`: byte `i`), and how
/// many flushes found every byte stored (`full`: a whole-line copy, a page written back);
/// per byte, allocated on the first flush of a line only partly stored, the flushes that
/// found it stored among others that were not (`partial`). A byte's writes are its line's
/// `full` plus its own `partial`. One atomic RMW per line stored or flushed whole, one per
/// stored byte of a line flushed in part (issue 38: one per byte of every store and flush made
/// a page write-back ~15x slower, so `wal`'s flusher fell ~65,000 pages behind a 10-page
/// budget and Fig. 5.7 measured the instrumentation).
struct ByteChunk {
    dirty: [AtomicU64; CHUNK_LINES],
    full: [AtomicU32; CHUNK_LINES],
    partial: OnceLock<Box<[AtomicU32]>>,
}

impl ByteChunk {
    fn new() -> ByteChunk {
        ByteChunk {
            dirty: std::array::from_fn(|_| AtomicU64::new(0)),
            full: std::array::from_fn(|_| AtomicU32::new(0)),
            partial: OnceLock::new(),
        }
    }

    /// Writes of byte `j` of the chunk.
    fn writes(&self, j: usize) -> u32 {
        let full = self.full[j / 64].load(Ordering::Relaxed);
        let partial = self.partial.get().map_or(0, |p| p[j].load(Ordering::Relaxed));
        full.saturating_add(partial)
    }
}

/// The bits of a line's dirty mask for bytes `from..to` of the line (`from < to <= 64`).
fn mask(from: usize, to: usize) -> u64 {
    let high = if to == 64 { u64::MAX } else { (1u64 << to) - 1 };
    high & !((1u64 << from) - 1)
}

/// Optional write counts, for wear and device-lifetime analysis (thesis §5.3.3, Fig. 5.7): per
/// 64-byte line always, per byte with [`WearGranularity::Byte`]. Counts write-backs (flushes),
/// not stores to the cache. Byte granularity costs 12 bytes per 64-byte line of region ever
/// stored, plus 4 bytes per byte of lines flushed when only partly stored ([`ByteChunk`]),
/// allocated 4 KiB of region at a time.
pub struct WearMap {
    lines: Box<[AtomicU32]>,
    bytes: Option<Box<[OnceLock<Box<ByteChunk>>]>>,
}

impl WearMap {
    pub(crate) fn new(len_bytes: u64, granularity: WearGranularity) -> WearMap {
        let n = len_bytes.div_ceil(64) as usize;
        let chunks = (len_bytes as usize).div_ceil(BYTE_CHUNK);
        WearMap {
            lines: (0..n).map(|_| AtomicU32::new(0)).collect(),
            bytes: (granularity == WearGranularity::Byte)
                .then(|| (0..chunks).map(|_| OnceLock::new()).collect()),
        }
    }

    pub fn granularity(&self) -> WearGranularity {
        if self.bytes.is_some() {
            WearGranularity::Byte
        } else {
            WearGranularity::Line
        }
    }

    /// A store of `len` bytes at `offset` (byte granularity: marks them stored).
    #[inline]
    pub(crate) fn mark_stored(&self, offset: u64, len: u64) {
        let Some(chunks) = &self.bytes else { return };
        let (mut at, end) = (offset as usize, (offset + len) as usize);
        while at < end {
            let Some(chunk) = chunks.get(at / BYTE_CHUNK) else { return };
            let chunk = chunk.get_or_init(|| Box::new(ByteChunk::new()));
            let line_end = end.min((at / 64 + 1) * 64);
            let bits = mask(at % 64, line_end - at / 64 * 64);
            let d = &chunk.dirty[at % BYTE_CHUNK / 64];
            if d.load(Ordering::Relaxed) & bits != bits {
                d.fetch_or(bits, Ordering::Relaxed);
            }
            at = line_end;
        }
    }

    #[inline]
    pub(crate) fn record(&self, span: LineSpan) {
        for line in span.lines() {
            if let Some(c) = self.lines.get(line as usize) {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        let Some(chunks) = &self.bytes else { return };
        for line in span.lines() {
            let at = (line * 64) as usize;
            let Some(Some(chunk)) = chunks.get(at / BYTE_CHUNK).map(OnceLock::get) else {
                continue;
            };
            let l = at % BYTE_CHUNK / 64;
            // Take the line's stored bytes and clear them in one step: two threads flushing
            // the line count each store once.
            if chunk.dirty[l].load(Ordering::Relaxed) == 0 {
                continue;
            }
            let stored = chunk.dirty[l].swap(0, Ordering::Relaxed);
            if stored == u64::MAX {
                chunk.full[l].fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let partial =
                chunk.partial.get_or_init(|| (0..BYTE_CHUNK).map(|_| AtomicU32::new(0)).collect());
            let mut bits = stored;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                partial[l * 64 + i].fetch_add(1, Ordering::Relaxed);
                bits &= bits - 1;
            }
        }
    }

    /// Write count of every line, in line order.
    pub fn counts(&self) -> Vec<u32> {
        self.lines.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// Zeroes every count (a measured period starts); bytes stored but not yet flushed stay
    /// marked, so their write-back counts in the new period.
    pub fn reset(&self) {
        self.lines.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        for chunk in self.bytes.iter().flat_map(|b| b.iter()).filter_map(OnceLock::get) {
            chunk.full.iter().for_each(|c| c.store(0, Ordering::Relaxed));
            for c in chunk.partial.get().into_iter().flat_map(|p| p.iter()) {
                c.store(0, Ordering::Relaxed);
            }
        }
    }

    /// Calls `f(offset, writes)` for every byte written back at least once (byte granularity;
    /// nothing otherwise), in offset order.
    pub fn for_each_byte(&self, mut f: impl FnMut(u64, u32)) {
        self.written_bytes().for_each(|(o, n)| f(o, n));
    }

    /// Every byte written back at least once, with its writes (byte granularity; nothing
    /// otherwise), in offset order, read as it goes: nothing is collected, so a summary of a
    /// region with billions of bytes written needs no memory of its own (issue 38: collecting
    /// them at 16 B a byte ran a 240 s `wal` Fig. 5.7 run out of memory).
    pub fn written_bytes(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.bytes
            .iter()
            .flat_map(|b| b.iter().enumerate())
            .filter_map(|(i, chunk)| chunk.get().map(|c| (i, c)))
            .flat_map(|(i, chunk)| {
                (0..BYTE_CHUNK).filter_map(move |j| {
                    let writes = chunk.writes(j);
                    (writes > 0).then_some(((i * BYTE_CHUNK + j) as u64, writes))
                })
            })
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

#[cfg(test)]
mod wear_tests {
    use super::*;
    use crate::flush::line_span;

    /// Guards issue 38's cheaper byte counting: a line flushed with every byte stored (a page
    /// copy) counts in its line's `full`, one flushed in part in its bytes' own counters, and a
    /// byte's writes are the two summed; stores crossing lines and chunks mark each line.
    #[test]
    fn whole_and_partial_line_flushes_add_up_per_byte() {
        let w = WearMap::new(3 * 4096, WearGranularity::Byte);
        w.mark_stored(0, 64);
        w.record(line_span(0, 64));
        w.mark_stored(8, 8);
        w.record(line_span(0, 64));
        w.mark_stored(0, 128);
        w.record(line_span(0, 128));
        // Across a chunk boundary: the last line of chunk 0 in part, the first of chunk 1 whole.
        w.mark_stored(4096 - 4, 68);
        w.record(line_span(4096 - 64, 128));
        let mut seen = std::collections::BTreeMap::new();
        w.for_each_byte(|o, n| {
            seen.insert(o, n);
        });
        assert_eq!(seen[&0], 2);
        assert_eq!(seen[&8], 3);
        assert_eq!(seen[&15], 3);
        assert_eq!(seen[&16], 2);
        assert_eq!(seen[&64], 1);
        assert_eq!(seen[&127], 1);
        assert!(!seen.contains_key(&128));
        assert_eq!(seen[&(4096 - 4)], 1);
        assert!(!seen.contains_key(&(4096 - 5)));
        assert_eq!(seen[&4096], 1);
        assert_eq!(seen[&(4096 + 63)], 1);
        assert_eq!(seen.len(), 128 + 4 + 64);
        // Flushing again without a store writes nothing; a reset keeps what is stored.
        w.record(line_span(0, 128));
        w.mark_stored(200, 2);
        w.reset();
        w.record(line_span(192, 64));
        seen.clear();
        w.for_each_byte(|o, n| {
            seen.insert(o, n);
        });
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![(200, 1), (201, 1)]);
    }

    #[test]
    fn byte_wear_counts_the_bytes_stored_since_the_last_flush() {
        // Line granularity counts all 64 bytes of a flushed line alike; the thesis counts bytes.
        let w = WearMap::new(8192, WearGranularity::Byte);
        for _ in 0..10 {
            w.mark_stored(8, 8); // an LSN-like word, stored every time
            w.record(line_span(0, 64));
        }
        w.mark_stored(16, 4); // a row field, stored once
        w.record(line_span(0, 64));
        w.record(line_span(0, 64)); // flushed again without a store: no write
        let mut seen = Vec::new();
        w.for_each_byte(|o, n| seen.push((o, n)));
        let expect: Vec<(u64, u32)> =
            (8..16).map(|o| (o, 10)).chain((16..20).map(|o| (o, 1))).collect();
        assert_eq!(seen, expect);
        assert_eq!(w.counts()[0], 12, "the line was flushed 12 times");
        w.mark_stored(100, 1);
        w.reset();
        w.record(line_span(64, 64));
        seen.clear();
        w.for_each_byte(|o, n| seen.push((o, n)));
        assert_eq!(seen, vec![(100, 1)], "a store before the reset persists after it");
        let lines = WearMap::new(8192, WearGranularity::Line);
        lines.mark_stored(0, 8);
        lines.record(line_span(0, 8));
        lines.for_each_byte(|_, _| panic!("no byte counts at line granularity"));
    }
}

//! N-Store's read-latency emulation — Arulraj, Pavlo, Dulloor, SIGMOD 2015, §2.2: Intel's NVM
//! emulator "estimates the additional cycles that the CPU would have to wait if DRAM is replaced
//! by slower NVM and then stalls the CPU for those cycles", i.e. every load that misses the CPU
//! caches and reaches NVM pays the extra latency, whatever engine issued it (issue 36).
//!
//! [`CpuCache`] is a simulated last-level cache in front of a region: 64-byte lines,
//! [`CPU_CACHE_WAYS`]-way set-associative, LRU within a set (a per-set access clock stamps each
//! way; the victim is the oldest stamp or an empty way). The 128 lines of each 8 KiB run map to
//! consecutive sets from a start hashed from the run's number, as Intel's sliced last-level
//! caches hash the physical address: with a plain modulo every page's header line (a stride of
//! 128 lines) would crowd into a few sets, and with a hash per line the model's own memory
//! would be touched at random.
//!
//! It is the alternative to Pelley's page-cache model (`storage::pages`, Pelley et al., VLDB
//! 2014, §5.1), never added to it: a region reads through one model or the other.
//!
//! **A model, not a coherent cache.** Tags, stamps and clocks are relaxed atomics with no lock:
//! two threads missing on the same set at once may pick the same victim, and one of their lines
//! is then not installed (a later access misses once more). That costs accuracy in a rare race,
//! never memory safety, and keeps a read from writing anything shared beyond the set it touches.
//! Stores install their lines (write-allocate, as x86 caches do) and are never charged: the
//! write side is the persist model's (barrier latency, bandwidth, `write_line_ns`).
//!
//! Invariant: a line is reported a hit only if it was installed in its set and not evicted since
//! (or lost to the race above, which only turns hits into misses).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Ways per set: the associativity of Intel server last-level caches of the paper's time
/// (Sandy Bridge / Ivy Bridge EP: 16- and 20-way); ours within that range.
pub const CPU_CACHE_WAYS: u64 = 16;

/// Bytes of a cache line.
const LINE_BYTES: u64 = 64;

/// The smallest cache the model accepts: one set.
pub const CPU_CACHE_MIN_BYTES: u64 = CPU_CACHE_WAYS * LINE_BYTES;

/// The largest: its sets take 16 bytes a line (256 MiB at 1 GiB), and no CPU has a
/// last-level cache near that size.
pub const CPU_CACHE_MAX_BYTES: u64 = 1 << 30;

const _: () = assert!(CPU_CACHE_MAX_BYTES.is_multiple_of(CPU_CACHE_MIN_BYTES));

/// One set: its ways' tags and LRU stamps and its access clock, in adjacent lines, so that
/// an access touches one small block of the model's memory.
#[repr(C, align(64))]
struct Set {
    /// `line + 1` of the line each way holds, 0 for an empty way.
    tags: [AtomicU64; CPU_CACHE_WAYS as usize],
    /// The set clock's value at each way's last access (LRU order within the set).
    stamps: [AtomicU32; CPU_CACHE_WAYS as usize],
    /// The set's access clock (wraps; ages are compared as wrapping differences).
    clock: AtomicU32,
}

/// Lines of a run that map to consecutive sets (one 8 KiB page): nearby lines of a region
/// use nearby sets, as a real cache's low address bits pick them, and the runs themselves are
/// spread by a hash.
const RUN_LINES: u64 = 128;

/// A simulated CPU last-level cache (module doc).
pub struct CpuCache {
    sets: Box<[Set]>,
}

impl CpuCache {
    /// A cache of `capacity_bytes` (rounded down to whole sets; at least one set).
    pub fn new(capacity_bytes: u64) -> CpuCache {
        let sets = (capacity_bytes / CPU_CACHE_MIN_BYTES).max(1);
        let set = || Set {
            tags: std::array::from_fn(|_| AtomicU64::new(0)),
            stamps: std::array::from_fn(|_| AtomicU32::new(0)),
            clock: AtomicU32::new(0),
        };
        CpuCache { sets: (0..sets).map(|_| set()).collect() }
    }

    /// Bytes the cache holds.
    pub fn capacity_bytes(&self) -> u64 {
        self.sets.len() as u64 * CPU_CACHE_MIN_BYTES
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        let sets = self.sets.len() as u64;
        // Fibonacci hashing of the run, then a multiply-shift onto `0..sets` (no power of two
        // needed); the line's place in its run is added on, wrapping.
        let hash = (line / RUN_LINES).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let base = ((u128::from(hash) * u128::from(sets)) >> 64) as u64;
        ((base + line % RUN_LINES) % sets) as usize
    }

    /// Accesses `line` (a line number: byte offset / 64): true on a hit. A miss installs the
    /// line in place of its set's least recently used way.
    #[inline]
    pub fn access(&self, line: u64) -> bool {
        let set = &self.sets[self.set_of(line)];
        // A load and a store, not a read-modify-write: a tick lost to a race only blurs the LRU
        // order of two accesses, and a locked instruction per line read would cost more than
        // the rest of the model.
        let now = set.clock.load(Ordering::Relaxed).wrapping_add(1);
        set.clock.store(now, Ordering::Relaxed);
        let tag = line + 1;
        // Tags first: a hit reads no stamp.
        if let Some(way) = set.tags.iter().position(|t| t.load(Ordering::Relaxed) == tag) {
            set.stamps[way].store(now, Ordering::Relaxed);
            return true;
        }
        let age = |way: usize| match set.tags[way].load(Ordering::Relaxed) {
            0 => u32::MAX,
            _ => now.wrapping_sub(set.stamps[way].load(Ordering::Relaxed)),
        };
        let victim = (0..CPU_CACHE_WAYS as usize).max_by_key(|&w| age(w)).unwrap_or(0);
        set.tags[victim].store(tag, Ordering::Relaxed);
        set.stamps[victim].store(now, Ordering::Relaxed);
        false
    }

    /// Accesses every line of `[offset, offset + len)`; returns how many missed.
    #[inline]
    pub fn access_range(&self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let (first, last) = (offset / LINE_BYTES, (offset + len - 1) / LINE_BYTES);
        (first..=last).filter(|&line| !self.access(line)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of `sets` sets.
    fn cache(sets: u64) -> CpuCache {
        CpuCache::new(sets * CPU_CACHE_MIN_BYTES)
    }

    /// Lines that all map to set `set` of `c`, `n` of them.
    fn lines_of_set(c: &CpuCache, set: usize, n: usize) -> Vec<u64> {
        (0..).filter(|&l| c.set_of(l) == set).take(n).collect()
    }

    #[test]
    fn a_working_set_within_capacity_hits_after_the_first_pass() {
        let c = cache(64);
        // Half the capacity: the hash may still overfill a set or two, so a few conflict
        // misses are allowed, no more.
        let lines = c.capacity_bytes() / LINE_BYTES / 2;
        assert_eq!(c.access_range(0, lines * LINE_BYTES), lines, "cold: every line misses");
        let missed = c.access_range(0, lines * LINE_BYTES);
        assert!(missed * 50 <= lines, "{missed} of {lines} missed on the second pass");
    }

    #[test]
    fn a_working_set_beyond_capacity_misses() {
        let c = cache(64);
        let lines = 4 * c.capacity_bytes() / LINE_BYTES;
        c.access_range(0, lines * LINE_BYTES);
        // Cyclic over 4x the capacity with LRU: every access misses again.
        let missed = c.access_range(0, lines * LINE_BYTES);
        assert!(missed * 10 >= lines * 9, "{missed} of {lines} missed over 4x the capacity");
    }

    #[test]
    fn lru_evicts_the_least_recently_used_way_of_a_set() {
        let c = cache(8);
        let ways = CPU_CACHE_WAYS as usize;
        let lines = lines_of_set(&c, 3, ways + 1);
        for &l in &lines[..ways] {
            assert!(!c.access(l), "cold line {l} hit");
        }
        // Touch the first line again: the second is now the least recently used.
        assert!(c.access(lines[0]));
        assert!(!c.access(lines[ways]), "a 17th line in a 16-way set misses");
        assert!(c.access(lines[0]), "the recently used line stayed");
        for &l in &lines[2..=ways] {
            assert!(c.access(l), "line {l} was evicted out of LRU order");
        }
        assert!(!c.access(lines[1]), "the least recently used line was evicted");
    }

    #[test]
    fn a_range_counts_each_line_once() {
        let c = cache(8);
        assert_eq!(c.access_range(60, 8), 2, "8 bytes across a line boundary: two lines");
        assert_eq!(c.access_range(64, 64), 0, "the second line is held now");
        assert_eq!(c.access_range(0, 0), 0);
        assert_eq!(CpuCache::new(1).capacity_bytes(), CPU_CACHE_MIN_BYTES, "one set at least");
    }

    #[test]
    fn concurrent_access_is_safe_and_keeps_a_small_set_resident() {
        let c = std::sync::Arc::new(cache(64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    (0..50).map(|_| c.access_range(0, 32 * LINE_BYTES)).sum::<u64>()
                })
            })
            .collect();
        let missed: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        // 32 lines in 1024: at most the cold misses plus a few lost to races.
        assert!(missed <= 4 * 32, "{missed} misses");
    }
}

//! N-Store's read-latency emulation — Arulraj, Pavlo, Dulloor, SIGMOD 2015, §2.2: Intel's NVM
//! emulator "estimates the additional cycles that the CPU would have to wait if DRAM is replaced
//! by slower NVM and then stalls the CPU for those cycles", i.e. every load that misses the CPU
//! caches and reaches NVM pays the extra latency, whatever engine issued it (issue 36).
//!
//! [`CpuCache`] is a simulated last-level cache in front of a region: 64-byte lines,
//! [`CPU_CACHE_WAYS`]-way set-associative, tree pseudo-LRU within a set (15 bits a set, as
//! Intel's last-level caches approximate LRU; an empty way is filled first). The 128 lines of
//! each 8 KiB run map to consecutive sets from a start hashed from the run's number, as Intel's
//! sliced last-level caches hash the physical address: with a plain modulo every page's header
//! line (a stride of 128 lines) would crowd into a few sets, and with a hash per line the
//! model's own memory would be touched at random.
//!
//! **The model's own cost.** It runs on the CPU whose time it measures, so every access it
//! simulates is time the engine did not spend (issue 36: the first version, 256 bytes a set and
//! true LRU stamps, took 40 ns a hit and 170 ns a miss, and cut TPC-C throughput by a third to
//! two thirds at 0 ns charged). So a set's tags are one host cache line (16 `u32`s) and its
//! pseudo-LRU bits live in a separate small array, an access touches one line of tags and one
//! `u16`, and no division is on the path. The timing model subtracts the time spent here from
//! the stall it charges ([`crate::timing`]); what it cannot absorb is counted.
//!
//! Tags are 32 bits: the run's number + 1 when the cache has at least [`RUN_LINES`] sets (a
//! run's lines then fall in distinct sets, so the run names the line; exact up to 32 TiB of
//! region), else the line's number + 1 (exact up to 256 GiB). Beyond those sizes two lines can
//! share a tag: a false hit, a model inaccuracy, never a memory-safety one.
//!
//! It is the alternative to Pelley's page-cache model (`storage::pages`, Pelley et al., VLDB
//! 2014, §5.1), never added to it: a region reads through one model or the other.
//!
//! **A model, not a coherent cache.** Tags and pseudo-LRU bits are relaxed atomics with no lock:
//! two threads missing on the same set at once may pick the same victim, and one of their lines
//! is then not installed (a later access misses once more). That costs accuracy in a rare race,
//! never memory safety, and keeps a read from writing anything shared beyond the set it touches.
//! Stores install their lines (write-allocate, as x86 caches do) and are never charged: the
//! write side is the persist model's (barrier latency, bandwidth, `write_line_ns`).
//!
//! Invariant: a line is reported a hit only if it was installed in its set and not evicted since
//! (or lost to the race above, which only turns hits into misses), up to the tag sizes above.

use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

/// Ways per set: the associativity of Intel server last-level caches of the paper's time
/// (Sandy Bridge / Ivy Bridge EP: 16- and 20-way); ours within that range.
pub const CPU_CACHE_WAYS: u64 = 16;

/// Bytes of a cache line.
const LINE_BYTES: u64 = 64;

/// The smallest cache the model accepts: one set.
pub const CPU_CACHE_MIN_BYTES: u64 = CPU_CACHE_WAYS * LINE_BYTES;

/// The largest: 66 bytes of model a set (1 GiB of cache is 66 MiB of model), and no CPU has a
/// last-level cache near that size.
pub const CPU_CACHE_MAX_BYTES: u64 = 1 << 30;

const _: () = assert!(CPU_CACHE_MAX_BYTES.is_multiple_of(CPU_CACHE_MIN_BYTES));

/// One set's tags, one host cache line: the tag (module doc) of the line each way holds, 0 for
/// an empty way.
#[repr(C, align(64))]
struct Set {
    tags: [AtomicU32; CPU_CACHE_WAYS as usize],
}

/// Lines of a run that map to consecutive sets (one 8 KiB page): nearby lines of a region
/// use nearby sets, as a real cache's low address bits pick them, and the runs themselves are
/// spread by a hash.
const RUN_LINES: u64 = 128;

/// Lines a thread remembers having touched last ([`CpuCache::recent`]): a direct-mapped
/// filter by the line's low bits, like a core's private caches in front of the shared one
/// (4,096 lines: 256 KiB, an L2's worth).
const RECENT_LINES: usize = 4096;

/// The smallest cache (in sets) that uses the recent-line filter: 16 MiB. A line among a
/// thread's last 4,096 is then out of the last-level cache only if 16 other lines fell into its
/// 16-way set meanwhile: 4,096 lines are 32 runs of 128 consecutive sets at hashed starts among
/// 16,384 or more, so a set sees about 0.25 of them. In a smaller cache that is not rare, so
/// such caches (and the unit tests' few sets) simulate every access.
const RECENT_MIN_SETS: u64 = 16 * 1024;

thread_local! {
    /// This thread's recent lines: (cache id, line + 1), 0 for empty.
    static RECENT: [std::cell::Cell<(u32, u64)>; RECENT_LINES] =
        const { [const { std::cell::Cell::new((0, 0)) }; RECENT_LINES] };
}

/// Ids of caches (from 1), so that a thread's recent lines of one cache never count for another.
static NEXT_ID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// A simulated CPU last-level cache (module doc).
pub struct CpuCache {
    sets: Box<[Set]>,
    /// Each set's tree pseudo-LRU bits: node `n` (1..=15, children `2n`, `2n + 1`, the ways
    /// the leaves 16..=31) is bit `n`; a set bit says the next victim is on the right.
    plru: Box<[AtomicU16]>,
    /// Tags name runs (at least [`RUN_LINES`] sets), else lines.
    tag_runs: bool,
    /// Whether the recent-line filter is used ([`RECENT_MIN_SETS`]).
    filter: bool,
    /// This cache's id in the recent-line filter.
    id: u32,
}

impl CpuCache {
    /// A cache of `capacity_bytes` (rounded down to whole sets; at least one set).
    pub fn new(capacity_bytes: u64) -> CpuCache {
        let sets = (capacity_bytes / CPU_CACHE_MIN_BYTES).max(1);
        let set = || Set { tags: std::array::from_fn(|_| AtomicU32::new(0)) };
        CpuCache {
            sets: (0..sets).map(|_| set()).collect(),
            plru: (0..sets).map(|_| AtomicU16::new(0)).collect(),
            tag_runs: sets >= RUN_LINES,
            filter: sets >= RECENT_MIN_SETS,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1),
        }
    }

    /// Bytes the cache holds.
    pub fn capacity_bytes(&self) -> u64 {
        self.sets.len() as u64 * CPU_CACHE_MIN_BYTES
    }

    #[inline]
    fn set_of(&self, line: u64) -> usize {
        let sets = self.sets.len() as u64;
        // Fibonacci hashing of the run, then a multiply-shift onto `0..sets` (no power of two
        // needed); the line's place in its run is added on, wrapping (a division only when a
        // cache has fewer sets than a run has lines).
        let hash = (line / RUN_LINES).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let base = ((u128::from(hash) * u128::from(sets)) >> 64) as u64;
        let mut set = base + line % RUN_LINES;
        if set >= sets {
            set -= sets;
            if set >= sets {
                set %= sets;
            }
        }
        set as usize
    }

    #[inline]
    fn tag_of(&self, line: u64) -> u32 {
        let id = if self.tag_runs { line / RUN_LINES } else { line };
        (id as u32).wrapping_add(1).max(1)
    }

    /// The pseudo-LRU bits after an access to `way`: each node on its path points away from it.
    #[inline]
    fn touched(bits: u16, way: usize) -> u16 {
        let mut bits = bits;
        let mut node = 1usize;
        for level in (0..4).rev() {
            let right = (way >> level) & 1;
            // Point to the other side.
            if right == 1 {
                bits &= !(1 << node);
            } else {
                bits |= 1 << node;
            }
            node = 2 * node + right;
        }
        bits
    }

    /// The way the pseudo-LRU bits name as the victim.
    #[inline]
    fn victim(bits: u16) -> usize {
        let mut node = 1usize;
        for _ in 0..4 {
            node = 2 * node + usize::from((bits >> node) & 1 == 1);
        }
        node - CPU_CACHE_WAYS as usize
    }

    /// Accesses `line` (a line number: byte offset / 64): true on a hit. A miss installs the
    /// line in an empty way, else in place of the way the pseudo-LRU bits name.
    #[inline]
    pub fn access(&self, line: u64) -> bool {
        let at = self.set_of(line);
        let set = &self.sets[at];
        let lru = &self.plru[at];
        let tag = self.tag_of(line);
        let mut empty = None;
        for (way, t) in set.tags.iter().enumerate() {
            let held = t.load(Ordering::Relaxed);
            if held == tag {
                // A load and a store, not a read-modify-write: an update lost to a race only
                // blurs the replacement order, and a locked instruction per line read would
                // cost more than the rest of the model.
                let bits = lru.load(Ordering::Relaxed);
                let now = Self::touched(bits, way);
                if now != bits {
                    lru.store(now, Ordering::Relaxed);
                }
                return true;
            }
            if held == 0 && empty.is_none() {
                empty = Some(way);
            }
        }
        let bits = lru.load(Ordering::Relaxed);
        let way = empty.unwrap_or_else(|| Self::victim(bits));
        set.tags[way].store(tag, Ordering::Relaxed);
        lru.store(Self::touched(bits, way), Ordering::Relaxed);
        false
    }

    /// Accesses every line of `[offset, offset + len)`; returns how many missed. A line among
    /// this thread's recent ones is a hit without a look at its set (filter doc); every other
    /// line is simulated and becomes recent.
    #[inline]
    pub fn access_range(&self, offset: u64, len: u64) -> u64 {
        if len == 0 {
            return 0;
        }
        let (first, last) = (offset / LINE_BYTES, (offset + len - 1) / LINE_BYTES);
        if !self.filter {
            return (first..=last).filter(|&line| !self.access(line)).count() as u64;
        }
        RECENT.with(|recent| {
            (first..=last)
                .filter(|&line| {
                    let slot = &recent[line as usize % RECENT_LINES];
                    if slot.get() == (self.id, line + 1) {
                        return false;
                    }
                    slot.set((self.id, line + 1));
                    !self.access(line)
                })
                .count() as u64
        })
    }

    /// Whether every line of `[offset, offset + len)` is among this thread's recent lines of
    /// this cache: then each is a hit (filter doc) and need not be simulated. Real last-level
    /// caches do not see the hits of a core's private caches either. Always false for a cache
    /// below [`RECENT_MIN_SETS`] sets.
    #[inline]
    pub fn recent(&self, offset: u64, len: u64) -> bool {
        if !self.filter || len == 0 {
            return false;
        }
        let (first, last) = (offset / LINE_BYTES, (offset + len - 1) / LINE_BYTES);
        RECENT.with(|recent| {
            (first..=last)
                .all(|line| recent[line as usize % RECENT_LINES].get() == (self.id, line + 1))
        })
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
    fn pseudo_lru_never_evicts_the_most_recently_used_way_and_fills_empty_ways_first() {
        let c = cache(8);
        let ways = CPU_CACHE_WAYS as usize;
        let lines = lines_of_set(&c, 3, 3 * ways);
        for &l in &lines[..ways] {
            assert!(!c.access(l), "cold line {l} hit");
        }
        // Sixteen lines fill sixteen ways: all still held.
        for &l in &lines[..ways] {
            assert!(c.access(l), "line {l} was evicted while a way was empty");
        }
        // Each new line evicts one line, never the one used just before it.
        for i in ways..3 * ways {
            let recent = lines[i - 1];
            assert!(!c.access(lines[i]), "a new line hit");
            assert!(c.access(recent), "the most recently used line {recent} was evicted");
            assert!(c.access(lines[i]), "the line just installed was evicted");
        }
    }

    #[test]
    fn the_tree_bits_point_away_from_each_access() {
        let mut bits = 0u16;
        for way in 0..CPU_CACHE_WAYS as usize {
            bits = CpuCache::touched(bits, way);
            assert_ne!(CpuCache::victim(bits), way, "way {way} named victim right after use");
        }
        // After touching 0..=15 in order the victim is in the half touched longest ago.
        assert!(CpuCache::victim(bits) < 8, "{}", CpuCache::victim(bits));
        // Touching a way's sibling makes it the victim of their pair: 15 then 14 left.
        let bits = CpuCache::touched(CpuCache::touched(0, 15), 14);
        assert_eq!(CpuCache::touched(bits, 0) & (1 << 15), 1 << 15);
    }

    #[test]
    fn lines_of_one_run_and_of_runs_far_apart_keep_their_own_tags() {
        // Large cache: tags name runs. Two lines of one run, and the same place in another run.
        let c = CpuCache::new(4 << 20);
        assert!(c.tag_runs);
        assert!(!c.access(5) && !c.access(6) && !c.access(5 + RUN_LINES * 1000));
        assert!(c.access(5) && c.access(6) && c.access(5 + RUN_LINES * 1000));
        // Small cache: tags name lines.
        let c = cache(4);
        assert!(!c.tag_runs);
        assert!(!c.access(1) && !c.access(1 + 4) && c.access(1));
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

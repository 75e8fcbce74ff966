//! The hierarchical bitmap set of NVRAM Group Commit (Pelley thesis §4.3.2): which 64-byte
//! lines of a region were written since the set was last cleared.
//!
//! Two levels: the *primary* bitmap has one bit per line; the *top* bitmap has one bit per
//! primary cache line (8 words = 512 lines = 32 KiB of region). Inserts are an atomic OR (a load
//! first, so re-dirtying a line costs no read-modify-write); iteration visits only the primary
//! words under set top bits, so its cost follows the dirty set, not the region; clearing zeroes
//! only what was set. The set is volatile: it describes the staging copy of the current batch.
//!
//! Invariant: a line written through [`DirtyLines::mark`] before [`DirtyLines::lines`] starts is
//! reported by it (the top bit is set after the primary bit, both with release ordering).

use crate::flush::CACHE_LINE;
use std::sync::atomic::{AtomicU64, Ordering};

/// Primary words under one top bit: one 64-byte cache line of the primary bitmap.
pub const WORDS_PER_SEGMENT: usize = 8;
/// Region lines under one top bit.
pub const LINES_PER_SEGMENT: u64 = (WORDS_PER_SEGMENT * 64) as u64;

pub struct DirtyLines {
    primary: Box<[AtomicU64]>,
    top: Box<[AtomicU64]>,
    /// Distinct lines set since the last clear.
    count: AtomicU64,
    lines: u64,
}

impl DirtyLines {
    /// A set for a region of `len_bytes`.
    pub fn new(len_bytes: u64) -> DirtyLines {
        let lines = len_bytes.div_ceil(CACHE_LINE);
        let words = lines.div_ceil(64).next_multiple_of(WORDS_PER_SEGMENT as u64) as usize;
        let segments = words / WORDS_PER_SEGMENT;
        DirtyLines {
            primary: (0..words).map(|_| AtomicU64::new(0)).collect(),
            top: (0..segments.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            lines,
        }
    }

    /// Records that `[offset, offset + len)` was written. `len` 0 records nothing.
    #[inline]
    pub fn mark(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let first = offset / CACHE_LINE;
        let last = (offset + len - 1) / CACHE_LINE;
        debug_assert!(last < self.lines);
        let mut line = first;
        while line <= last {
            let word = (line / 64) as usize;
            let from = line % 64;
            let to = (last - line + from).min(63);
            let mask = bits(from, to);
            let w = &self.primary[word];
            if w.load(Ordering::Relaxed) & mask != mask {
                let old = w.fetch_or(mask, Ordering::Release);
                let new_bits = (mask & !old).count_ones();
                if new_bits > 0 {
                    self.count.fetch_add(u64::from(new_bits), Ordering::Relaxed);
                    self.mark_segment(word / WORDS_PER_SEGMENT);
                }
            }
            line += to - from + 1;
        }
    }

    #[inline]
    fn mark_segment(&self, segment: usize) {
        let t = &self.top[segment / 64];
        let bit = 1u64 << (segment % 64);
        if t.load(Ordering::Relaxed) & bit == 0 {
            t.fetch_or(bit, Ordering::Release);
        }
    }

    /// Distinct lines marked since the last clear.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Segments (top bits) that hold dirty lines, ascending. Segment `s` covers lines
    /// `s * LINES_PER_SEGMENT ..`.
    pub fn segments(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, t) in self.top.iter().enumerate() {
            let mut bits = t.load(Ordering::Acquire);
            while bits != 0 {
                out.push(i * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        out
    }

    /// Whether at least `at_least` groups of `words_per_group` primary words (64 lines a word;
    /// `words_per_group` divides [`WORDS_PER_SEGMENT`]) hold a dirty line: how many pages are
    /// dirty, counted a word at a time under the set top bits and no further than the answer
    /// needs, where collecting them visits every dirty line. A word marked meanwhile may or
    /// may not be counted.
    pub fn groups_at_least(&self, words_per_group: usize, at_least: u64) -> bool {
        assert!(
            words_per_group > 0 && WORDS_PER_SEGMENT.is_multiple_of(words_per_group),
            "a group of {words_per_group} words does not divide a segment"
        );
        if at_least == 0 {
            return true;
        }
        let mut n = 0u64;
        for (i, t) in self.top.iter().enumerate() {
            let mut bits = t.load(Ordering::Acquire);
            while bits != 0 {
                let segment = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let words =
                    &self.primary[segment * WORDS_PER_SEGMENT..(segment + 1) * WORDS_PER_SEGMENT];
                for group in words.chunks(words_per_group) {
                    if group.iter().any(|w| w.load(Ordering::Acquire) != 0) {
                        n += 1;
                        if n >= at_least {
                            return true;
                        }
                    }
                }
            }
        }
        false
    }

    /// Calls `visit(line)` for every dirty line of `segment`, ascending.
    pub fn segment_lines(&self, segment: usize, mut visit: impl FnMut(u64)) {
        let words = &self.primary[segment * WORDS_PER_SEGMENT..(segment + 1) * WORDS_PER_SEGMENT];
        for (k, w) in words.iter().enumerate() {
            let mut bits = w.load(Ordering::Acquire);
            let base = ((segment * WORDS_PER_SEGMENT + k) * 64) as u64;
            while bits != 0 {
                visit(base + u64::from(bits.trailing_zeros()));
                bits &= bits - 1;
            }
        }
    }

    /// Every dirty line, ascending.
    pub fn lines(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.count() as usize);
        for s in self.segments() {
            self.segment_lines(s, |l| out.push(l));
        }
        out
    }

    /// Takes (returns and clears) the 64 lines of the primary word holding `line`: how a
    /// flusher that writes back some pages, not all, clears exactly what it writes. The top
    /// bit stays set (a later visit finds the word empty). Callers make sure no
    /// [`DirtyLines::mark`] runs concurrently, as for [`DirtyLines::clear`].
    pub fn take_word(&self, line: u64) -> u64 {
        let w = &self.primary[(line / 64) as usize];
        let old = w.swap(0, Ordering::AcqRel);
        self.count.fetch_sub(u64::from(old.count_ones()), Ordering::Relaxed);
        old
    }

    /// Clears the set, touching only the segments that were set. Callers make sure no
    /// [`DirtyLines::mark`] runs concurrently (the batch is quiesced).
    pub fn clear(&self) {
        for s in self.segments() {
            for w in &self.primary[s * WORDS_PER_SEGMENT..(s + 1) * WORDS_PER_SEGMENT] {
                w.store(0, Ordering::Relaxed);
            }
        }
        for t in self.top.iter() {
            if t.load(Ordering::Relaxed) != 0 {
                t.store(0, Ordering::Relaxed);
            }
        }
        self.count.store(0, Ordering::Release);
    }
}

/// Bits `from..=to` of a word.
#[inline]
fn bits(from: u64, to: u64) -> u64 {
    let high = if to == 63 { u64::MAX } else { (1u64 << (to + 1)) - 1 };
    high & !((1u64 << from) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn groups_at_least_counts_the_groups_holding_dirty_lines() {
        let d = DirtyLines::new(1 << 24);
        assert!(d.groups_at_least(2, 0));
        assert!(!d.groups_at_least(2, 1));
        let mut x = 0x0bad_5eed_1234_5678u64;
        for round in 0..40 {
            for _ in 0..(round * 7) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                d.mark(x % ((1 << 24) - 300), (x >> 50) % 300 + 1);
            }
            for words in [1usize, 2, 4, 8] {
                let lines_per_group = words as u64 * 64;
                let groups = d.lines().iter().map(|l| l / lines_per_group).collect::<BTreeSet<_>>();
                let n = groups.len() as u64;
                assert!(d.groups_at_least(words, n), "{words} words a group: {n} groups");
                assert!(!d.groups_at_least(words, n + 1), "{words} words a group: not {}", n + 1);
            }
            if round % 10 == 9 {
                d.clear();
            }
        }
    }

    #[test]
    fn marks_are_reported_once_in_order_and_cleared() {
        let d = DirtyLines::new(1 << 22);
        let mut model = BTreeSet::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = x % ((1 << 22) - 600);
            let len = (x >> 40) % 600 + 1;
            d.mark(offset, len);
            for l in offset / 64..=(offset + len - 1) / 64 {
                model.insert(l);
            }
        }
        assert_eq!(d.lines(), model.iter().copied().collect::<Vec<_>>());
        assert_eq!(d.count(), model.len() as u64);
        d.clear();
        assert!(d.lines().is_empty() && d.count() == 0 && d.segments().is_empty());
        d.mark(64 * 1000 + 3, 1);
        assert_eq!(d.lines(), vec![1000]);
        assert_eq!(d.segments(), vec![1000 / LINES_PER_SEGMENT as usize]);
    }

    #[test]
    fn take_word_clears_one_word_and_its_count() {
        let d = DirtyLines::new(1 << 20);
        d.mark(64 * 64 + 5, 64 * 3); // lines 64..=67
        d.mark(64 * 200, 1); // line 200
        assert_eq!(d.take_word(70), 0b1111);
        assert_eq!(d.count(), 1);
        assert_eq!(d.lines(), vec![200]);
        assert_eq!(d.take_word(64), 0, "a taken word is empty");
        d.mark(64 * 65, 1);
        assert_eq!(d.lines(), vec![65, 200], "a taken word is marked again");
    }

    #[test]
    fn word_boundaries_and_whole_words() {
        let d = DirtyLines::new(1 << 20);
        d.mark(63 * 64, 130); // lines 63, 64, 65
        d.mark(128 * 64, 64 * 64); // lines 128..=191, one whole word
        let mut want: Vec<u64> = vec![63, 64, 65];
        want.extend(128..192);
        assert_eq!(d.lines(), want);
        assert_eq!(bits(0, 63), u64::MAX);
        assert_eq!(bits(3, 3), 8);
    }
}

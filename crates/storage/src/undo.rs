//! Persistent undo logs: one per worker for user transactions, one per worker for system
//! transactions (B+tree structure modifications, page allocation). Pelley et al., VLDB 2014,
//! §3.2 *In-Place Updates* distributes ARIES undo logs by transaction; this is that log.
//!
//! Layout (offsets from the log's first byte; see `docs/format.md`):
//! * `HEADER_SLOTS` header words, one per cache line: `state | check << 2 | generation << 8`
//!   (state 0 free, 1 active, 2 committed with post-commit work pending; `check` 6 bits of
//!   CRC-32C over state and generation, so a damaged header is `Corrupt`; 0 = never used).
//!   Generation *g* lives in slot `g % HEADER_SLOTS`; the slot with the highest generation is
//!   the log's header. 8 aligned bytes persist atomically, so the state changes atomically:
//!   that word *is* the commit record.
//! * records, circular, from byte `HEADER_SLOTS * 64`: generation *g* starts at a position that
//!   moves with *g* (`start_of`), records follow back to back and wrap to the first record byte
//!   when the next one does not fit before the end. Record: `[u32 payload_len][u8 kind][3 pad]
//!   [u64 generation][u32 crc32c][4 pad][payload, padded to 8]`. A record is valid if its
//!   generation equals the header's and its checksum matches; the first invalid record ends the
//!   log (after at most one wrap, never past the start), so no tail pointer is persisted.
//!
//! Wear (thesis §5.3.3, Fig. 5.7 assumes circular logs): the commit word moves among
//! `HEADER_SLOTS` lines and records move around the whole log, so no line of a log takes more
//! than about `2 / HEADER_SLOTS` writes per transaction.
//!
//! Invariant: a record is persisted (fenced) before the change it undoes can reach NVRAM, and
//! the header moves to *free* only after the transaction's changes are persisted.

use crate::engine::{DbError, Result};
use crate::format::{crc, get_u32, get_u64};
use pmem::Region;

/// Header words, each in its own cache line.
pub const HEADER_SLOTS: u64 = 8;
pub const HEADER_BYTES: u64 = HEADER_SLOTS * 64;
pub const RECORD_HEADER_BYTES: usize = 24;
/// Distance (in cache lines) between the start positions of consecutive generations.
const START_STRIDE_LINES: u64 = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogState {
    Free,
    Active,
    /// Committed; post-commit work (deferred frees, recorded in the log) may be unfinished.
    Committed,
}

/// A 6-bit check of a header word's state and generation, kept in bits 2..8 of the word: a
/// damaged header (a free log read as active would roll a committed transaction back over live
/// data) fails it, except by a 1-in-64 chance. It rides in the same atomic 8-byte store.
fn header_check(state_bits: u64, generation: u64) -> u64 {
    (crc(&(state_bits | generation << 8).to_le_bytes()) & 0x3f) as u64
}

fn encode_header(state: LogState, generation: u64) -> u64 {
    let s = match state {
        LogState::Free => 0,
        LogState::Active => 1,
        LogState::Committed => 2,
    };
    // A never-used slot is all zero (a blank region is all zero).
    if s == 0 && generation == 0 {
        return 0;
    }
    s | header_check(s, generation) << 2 | generation << 8
}

fn decode_header(word: u64) -> Option<(LogState, u64)> {
    if word == 0 {
        return Some((LogState::Free, 0));
    }
    let (s, generation) = (word & 3, word >> 8);
    if (word >> 2) & 0x3f != header_check(s, generation) {
        return None;
    }
    let state = match s {
        0 => LogState::Free,
        1 => LogState::Active,
        2 => LogState::Committed,
        _ => return None,
    };
    Some((state, generation))
}

/// One undo log in the region.
pub struct UndoLog {
    region: Region,
    base: u64,
    capacity: u64,
    generation: u64,
    state: LogState,
    /// Offset (from `base`) where the next record goes.
    tail: u64,
    /// Record bytes this generation has consumed (records plus any skipped end of the log).
    used: u64,
    records: u64,
    /// Pelley's `persist_wal` (VLDB 2014, Fig. 2): records persist first without their
    /// trailer (the checksum plays the tail LSN's part: a record is valid only once it is
    /// there), then the trailers, each step under its own barrier. Off: one barrier.
    lsn_last: bool,
    /// Reused between appends (an append allocated and freed a buffer per record: 9% of a
    /// one-thread YCSB write-heavy run's cycles were malloc and free): record sizes, the
    /// encoded records, and the contiguous runs `(log offset, start, end in buf)` they form.
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    sizes: Vec<usize>,
    buf: Vec<u8>,
    runs: Vec<(u64, usize, usize)>,
}

impl UndoLog {
    /// Attaches to the log at `base` (`capacity` bytes including the header).
    pub fn attach(region: &Region, base: u64, capacity: u64) -> Result<UndoLog> {
        if capacity < HEADER_BYTES + 64 || !capacity.is_multiple_of(64) {
            return Err(DbError::Invalid(format!("undo log of {capacity} bytes is too small")));
        }
        let mut latest: Option<(LogState, u64)> = None;
        for slot in 0..HEADER_SLOTS {
            let word = region.read_u64(base + slot * 64);
            let (state, generation) = decode_header(word).ok_or_else(|| {
                DbError::Corrupt(format!("undo log at {base}: bad header {word:#x} in slot {slot}"))
            })?;
            if generation % HEADER_SLOTS != slot && word != 0 {
                return Err(DbError::Corrupt(format!(
                    "undo log at {base}: generation {generation} in header slot {slot}"
                )));
            }
            if latest.is_none_or(|(_, g)| generation > g) {
                latest = Some((state, generation));
            }
        }
        let (state, generation) = latest.expect("HEADER_SLOTS > 0");
        let mut log = UndoLog {
            region: region.clone(),
            base,
            capacity,
            generation,
            state,
            tail: 0,
            used: 0,
            records: 0,
            lsn_last: false,
            scratch: Scratch::default(),
        };
        log.tail = log.start_of(generation);
        Ok(log)
    }

    /// Formats a blank log (every header slot free, generation 0); persisted by the caller's
    /// fence.
    pub fn format(region: &Region, base: u64) {
        for slot in 0..HEADER_SLOTS {
            region.write_u64(base + slot * 64, encode_header(LogState::Free, 0));
        }
        region.flush(base, HEADER_BYTES);
    }

    fn record_area(&self) -> u64 {
        self.capacity - HEADER_BYTES
    }

    /// Where generation `g`'s first record goes: moves by `START_STRIDE_LINES` lines per
    /// generation, so records spread over the whole log.
    fn start_of(&self, generation: u64) -> u64 {
        let lines = self.record_area() / 64;
        HEADER_BYTES + generation.wrapping_mul(START_STRIDE_LINES) % lines * 64
    }

    fn header_offset(&self, generation: u64) -> u64 {
        self.base + generation % HEADER_SLOTS * 64
    }

    fn set_header(&self, state: LogState) {
        let at = self.header_offset(self.generation);
        self.region.write_u64(at, encode_header(state, self.generation));
    }

    pub fn state(&self) -> LogState {
        self.state
    }

    pub fn is_active(&self) -> bool {
        self.state == LogState::Active
    }

    /// Records appended by the current transaction.
    pub fn len(&self) -> u64 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Record bytes used by the current transaction.
    pub fn bytes_used(&self) -> u64 {
        self.used
    }

    fn record_size(payload: usize) -> u64 {
        (RECORD_HEADER_BYTES + payload).div_ceil(8) as u64 * 8
    }

    /// Where a record of `size` bytes goes from `tail`, and the bytes it consumes (a record
    /// never straddles the end of the log: it wraps to the first record byte).
    fn place(&self, tail: u64, size: u64) -> (u64, u64) {
        if tail + size > self.capacity {
            (HEADER_BYTES, size + (self.capacity - tail))
        } else {
            (tail, size)
        }
    }

    /// Whether `payloads` fit.
    pub fn fits(&self, payloads: &[usize]) -> bool {
        let (mut tail, mut used) = if self.state == LogState::Active {
            (self.tail, self.used)
        } else {
            (self.start_of(self.generation + 1), 0)
        };
        for p in payloads {
            let (at, consumed) = self.place(tail, Self::record_size(*p));
            used += consumed;
            tail = at + Self::record_size(*p);
        }
        // One record-header's worth stays free, so the reader's walk ends before the start.
        used + RECORD_HEADER_BYTES as u64 <= self.record_area()
    }

    /// Appends records and persists them with one fence, together with `also_flush` ranges
    /// (earlier in-place writes piggy-back on this barrier). Activates the log on first use; the
    /// header is persisted under the same fence.
    pub fn append(&mut self, records: &[(u8, &[u8])], also_flush: &[(u64, u64)]) -> Result<()> {
        let trailers = self.write_records(records, true)?;
        if self.lsn_last {
            // persist_wal's first barrier: the records without their trailers.
            self.region.flush_ranges(also_flush);
            self.region.fence();
            for (at, c) in trailers {
                self.region.write(self.base + at + 16, &c.to_le_bytes());
                self.region.flush(self.base + at + 16, 4);
            }
        } else {
            self.region.flush_ranges(also_flush);
        }
        self.region.fence();
        Ok(())
    }

    /// Selects Pelley's two-barrier `persist_wal` for [`UndoLog::append`] (the `pelley`
    /// protocol of `inplace`), or ours (one barrier; checksummed records need no separate
    /// trailer persist).
    pub fn set_lsn_last(&mut self, on: bool) {
        self.lsn_last = on;
    }

    /// Pelley's page log (`persist_page`'s first two barriers, VLDB 2014 Fig. 2): persists
    /// `records` (a page's before-image) while the log is still free, so they are not yet
    /// valid, then marks the log active (valid) with its own barrier. The caller then writes
    /// in place and calls [`UndoLog::finish`] with the written ranges (the last two barriers).
    /// Recovery rolls an active log back, copying the image in place.
    pub fn append_then_activate(&mut self, records: &[(u8, &[u8])]) -> Result<()> {
        if self.state != LogState::Free {
            return Err(DbError::Invalid("page log already in use".into()));
        }
        // Records of the next generation, invisible until the header names it.
        self.write_records(records, false)?;
        self.region.fence();
        self.state = LogState::Active;
        self.set_header(LogState::Active);
        self.region.persist(self.header_offset(self.generation), 8);
        Ok(())
    }

    /// Writes and flushes `records` after the tail (activating the log first if `activate`
    /// and it is free; the header is flushed, not fenced). With `lsn_last`, the checksums are
    /// left zero and returned (offset from `base`, value) for the caller to write after a
    /// barrier.
    fn write_records(
        &mut self,
        records: &[(u8, &[u8])],
        activate: bool,
    ) -> Result<Vec<(u64, u32)>> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.sizes.clear();
        scratch.sizes.extend(records.iter().map(|r| r.1.len()));
        let fits = self.fits(&scratch.sizes);
        if !fits {
            self.scratch = scratch;
            return Err(DbError::TxnTooLarge(format!(
                "undo log of {} bytes is full ({} records)",
                self.capacity, self.records
            )));
        }
        if self.state != LogState::Active {
            debug_assert_eq!(self.state, LogState::Free);
            self.generation += 1;
            self.tail = self.start_of(self.generation);
            self.used = 0;
            self.records = 0;
            if activate {
                self.state = LogState::Active;
                self.set_header(LogState::Active);
                self.region.flush(self.header_offset(self.generation), 8);
            }
        }
        let Scratch { buf, runs, .. } = &mut scratch;
        buf.clear();
        runs.clear();
        let mut trailers = Vec::new();
        for (kind, payload) in records {
            let size = Self::record_size(payload.len());
            let (at, consumed) = self.place(self.tail, size);
            let begin = buf.len();
            buf.resize(begin + size as usize, 0);
            let rec = &mut buf[begin..];
            rec[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            rec[4] = *kind;
            rec[8..16].copy_from_slice(&self.generation.to_le_bytes());
            rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
            let c = Self::checksum(rec, payload.len());
            if self.lsn_last && activate {
                trailers.push((at, c));
            } else {
                rec[16..20].copy_from_slice(&c.to_le_bytes());
            }
            let end = buf.len();
            match runs.last_mut() {
                Some((start, from, to)) if *start + (*to - *from) as u64 == at => *to = end,
                _ => runs.push((at, begin, end)),
            }
            self.tail = at + size;
            self.used += consumed;
            self.records += 1;
        }
        for &(at, from, to) in runs.iter() {
            self.region.write(self.base + at, &buf[from..to]);
            self.region.flush(self.base + at, (to - from) as u64);
        }
        self.scratch = scratch;
        Ok(trailers)
    }

    fn checksum(rec: &[u8], payload_len: usize) -> u32 {
        // Covers length, kind, generation and payload; not the crc field itself.
        let mut h = crc(&rec[0..16]);
        h ^= crc(&rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload_len]).rotate_left(7);
        h
    }

    /// The valid record at `at`, if any: `(kind, payload, size)`.
    fn record_at(&self, at: u64) -> Option<(u8, Vec<u8>, u64)> {
        if at + RECORD_HEADER_BYTES as u64 > self.capacity {
            return None;
        }
        let head = self.region.read(self.base + at, RECORD_HEADER_BYTES);
        let len = get_u32(head, 0) as usize;
        if get_u64(head, 8) != self.generation || len as u64 > self.capacity {
            return None;
        }
        let size = Self::record_size(len);
        if at + size > self.capacity {
            return None;
        }
        let rec = self.region.read(self.base + at, size as usize);
        if get_u32(rec, 16) != Self::checksum(rec, len) {
            return None;
        }
        Some((rec[4], rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len].to_vec(), size))
    }

    /// The valid records of the current generation, in append order (for rollback or redo of
    /// post-commit work). Verifies each checksum right after reading it back. Bounded: at most
    /// one wrap, never past the generation's start.
    pub fn read_records(&self) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        if self.state == LogState::Free {
            // Records of the last finished transaction are still there; they mean nothing.
            return out;
        }
        let start = self.start_of(self.generation);
        let (mut at, mut wrapped) = (start, false);
        loop {
            if wrapped && at >= start {
                break;
            }
            match self.record_at(at) {
                Some((kind, payload, size)) => {
                    out.push((kind, payload));
                    at += size;
                }
                None if !wrapped && start != HEADER_BYTES => {
                    (at, wrapped) = (HEADER_BYTES, true);
                }
                None => break,
            }
        }
        out
    }

    /// Marks the transaction committed with post-commit work pending; persisted.
    pub fn mark_committed(&mut self) {
        debug_assert_eq!(self.state, LogState::Active);
        self.state = LogState::Committed;
        self.set_header(LogState::Committed);
        self.region.persist(self.header_offset(self.generation), 8);
    }

    /// Ends the transaction: the header becomes free (the 8-byte commit point of an active log,
    /// or the end of post-commit work). `also_flush` ranges are persisted first, with their own
    /// fence, because they must be durable before the log stops protecting them.
    pub fn finish(&mut self, also_flush: &[(u64, u64)]) {
        if self.state == LogState::Free {
            return;
        }
        if !also_flush.is_empty() {
            self.region.flush_ranges(also_flush);
            self.region.fence();
        }
        self.state = LogState::Free;
        self.set_header(LogState::Free);
        self.region.persist(self.header_offset(self.generation), 8);
        self.used = 0;
        self.records = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};

    fn region() -> Region {
        Region::open(&RegionOptions::new(Medium::Sim, 1 << 16)).unwrap()
    }

    #[test]
    fn persist_wal_takes_two_barriers_and_a_record_without_its_trailer_is_invalid() {
        let r = region();
        UndoLog::format(&r, 0);
        r.fence();
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        log.set_lsn_last(true);
        let f0 = r.stats().fences;
        log.append(&[(1, b"first")], &[]).unwrap();
        assert_eq!(r.stats().fences - f0, 2, "persist_wal: records, then trailers");
        log.append(&[(2, b"second")], &[]).unwrap();
        let again = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(again.read_records().len(), 2);
        // A crash between the two barriers leaves the second record without its trailer.
        let second = log.tail - UndoLog::record_size(6);
        r.write(second + 16, &[0u8; 4]);
        let torn = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(torn.read_records(), vec![(1, b"first".to_vec())]);
        let mut lean = UndoLog::attach(&r, 1 << 13, 4096).unwrap();
        let f1 = r.stats().fences;
        lean.append(&[(1, b"x")], &[]).unwrap();
        assert_eq!(r.stats().fences - f1, 1);
    }

    #[test]
    fn a_page_log_is_valid_only_between_activation_and_finish() {
        let r = region();
        UndoLog::format(&r, 0);
        r.fence();
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        let f0 = r.stats().fences;
        log.append_then_activate(&[(7, &[3u8; 100])]).unwrap();
        assert_eq!(r.stats().fences - f0, 2, "image, then the valid mark");
        let crashed = Region::from_image(
            &r.crash_image(pmem::CrashPolicy::Persisted, 1).unwrap(),
            &RegionOptions::new(Medium::Sim, 1 << 16),
        )
        .unwrap();
        let seen = UndoLog::attach(&crashed, 0, 4096).unwrap();
        assert_eq!(seen.state(), LogState::Active);
        assert_eq!(seen.read_records(), vec![(7, vec![3u8; 100])]);
        assert!(log.append_then_activate(&[(7, b"x")]).is_err(), "one page at a time");
        r.write(5000, b"in place");
        log.finish(&[(5000, 8)]);
        assert_eq!(r.stats().fences - f0, 4, "persist_page: four barriers");
        assert_eq!(UndoLog::attach(&r, 0, 4096).unwrap().state(), LogState::Free);
        // The next image starts a new generation; the old one is never read again.
        log.append_then_activate(&[(8, b"next")]).unwrap();
        let next = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(next.read_records(), vec![(8, b"next".to_vec())]);
    }

    #[test]
    fn records_round_trip_and_generations_separate_transactions() {
        let r = region();
        UndoLog::format(&r, 0);
        r.fence();
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        log.append(&[(1, b"hello"), (2, b"")], &[]).unwrap();
        log.append(&[(3, &[9u8; 40])], &[]).unwrap();
        let again = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(again.state(), LogState::Active);
        let recs = again.read_records();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0], (1, b"hello".to_vec()));
        assert_eq!(recs[2].1, vec![9u8; 40]);
        log.finish(&[]);
        log.append(&[(4, b"x")], &[]).unwrap();
        let again = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(again.read_records(), vec![(4, b"x".to_vec())]);
    }

    #[test]
    fn full_log_is_a_typed_error() {
        let r = region();
        UndoLog::format(&r, 0);
        let mut log = UndoLog::attach(&r, 0, 1024).unwrap();
        let big = [0u8; 100];
        let mut appended = 0;
        let err = loop {
            match log.append(&[(1, &big)], &[]) {
                Ok(()) => appended += 1,
                Err(e) => break e,
            }
            assert!(appended < 10, "a 512-byte record area took {appended} records");
        };
        assert!(matches!(err, DbError::TxnTooLarge(_)), "{err}");
        assert!(appended >= 2);
        assert_eq!(log.read_records().len(), appended);
    }

    #[test]
    fn torn_record_ends_the_log() {
        let r = region();
        UndoLog::format(&r, 0);
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        log.append(&[(1, b"first")], &[]).unwrap();
        log.append(&[(1, b"second")], &[]).unwrap();
        // Corrupt one payload byte of the second record.
        let second = log.start_of(1) + UndoLog::record_size(5);
        r.write(second + RECORD_HEADER_BYTES as u64, b"X");
        let again = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(again.read_records(), vec![(1, b"first".to_vec())]);
    }

    /// Records wrap around the end of the log and read back in order; every generation finds
    /// exactly its own records after a reattach (as recovery does).
    #[test]
    fn records_wrap_and_generations_rotate() {
        let r = region();
        UndoLog::format(&r, 0);
        let cap = 2048;
        let mut log = UndoLog::attach(&r, 0, cap).unwrap();
        for g in 0..200u64 {
            let n = 1 + (g % 9) as usize;
            let payloads: Vec<Vec<u8>> =
                (0..n).map(|i| vec![(g + i as u64) as u8; 40 + i]).collect();
            for p in &payloads {
                log.append(&[(1, p)], &[]).unwrap();
            }
            let again = UndoLog::attach(&r, 0, cap).unwrap();
            assert_eq!(again.state(), LogState::Active);
            let got: Vec<Vec<u8>> = again.read_records().into_iter().map(|r| r.1).collect();
            assert_eq!(got, payloads, "generation {}", g + 1);
            log.finish(&[]);
            let idle = UndoLog::attach(&r, 0, cap).unwrap();
            assert_eq!((idle.state(), idle.generation), (LogState::Free, g + 1));
        }
    }

    /// A damaged header word is refused, not read as another state: a free log whose state
    /// bit flips to active would otherwise roll a committed transaction back.
    #[test]
    fn a_damaged_header_word_is_corrupt() {
        let r = region();
        UndoLog::format(&r, 0);
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        log.append(&[(1, b"x")], &[]).unwrap();
        log.finish(&[]);
        let slot = log.header_offset(log.generation);
        let word = r.read_u64(slot);
        let mut missed = 0;
        for bit in 0..64 {
            r.write_u64(slot, word ^ 1 << bit);
            match UndoLog::attach(&r, 0, 4096) {
                Err(DbError::Corrupt(_)) => {}
                Ok(l) => {
                    assert_eq!(l.state(), LogState::Free, "bit {bit} made the log {:?}", l.state());
                    missed += 1;
                }
                Err(e) => panic!("bit {bit}: {e}"),
            }
        }
        assert!(missed <= 2, "{missed} single-bit flips went unnoticed");
        r.write_u64(slot, word);
        assert_eq!(UndoLog::attach(&r, 0, 4096).unwrap().state(), LogState::Free);
    }

    /// The commit word moves among the header slots: 1,000 transactions write no header line
    /// more than 2 × 1,000 / HEADER_SLOTS (+2) times.
    #[test]
    fn header_writes_spread_over_the_slots() {
        let o = RegionOptions { wear: true, ..RegionOptions::new(Medium::Dram, 1 << 16) };
        let r = Region::open(&o).unwrap();
        UndoLog::format(&r, 0);
        let mut log = UndoLog::attach(&r, 0, 8192).unwrap();
        for _ in 0..1000 {
            log.append(&[(1, &[7u8; 16])], &[]).unwrap();
            log.finish(&[]);
        }
        let wear = r.wear().unwrap();
        let max = *wear[..(8192 / 64)].iter().max().unwrap() as u64;
        assert!(max <= 2 * 1000 / HEADER_SLOTS + 3, "a log line was written {max} times");
    }
}

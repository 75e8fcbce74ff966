//! Persistent undo logs: one per worker for user transactions, one per worker for system
//! transactions (B+tree structure modifications, page allocation). Pelley et al., VLDB 2014,
//! §3.2 *In-Place Updates* distributes ARIES undo logs by transaction; this is that log.
//!
//! Layout (offsets from the log's first byte; see `docs/format.md`):
//! * header, 64 bytes: one u64 `state | generation << 8` (state 0 free, 1 active, 2 committed
//!   with post-commit work pending). 8 aligned bytes persist atomically, so the state changes
//!   atomically: this word *is* the commit record.
//! * records from byte 64: `[u32 payload_len][u8 kind][3 pad][u64 generation][u32 crc32c]
//!   [4 pad][payload, padded to 8]`. A record is valid if its generation equals the header's and
//!   its checksum matches; the first invalid record ends the log, so no tail pointer is persisted.
//!
//! Invariant: a record is persisted (fenced) before the change it undoes can reach NVRAM, and
//! the header moves to *free* only after the transaction's changes are persisted.

use crate::engine::{DbError, Result};
use crate::format::{crc, get_u32, get_u64};
use pmem::Region;

pub const HEADER_BYTES: u64 = 64;
pub const RECORD_HEADER_BYTES: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogState {
    Free,
    Active,
    /// Committed; post-commit work (deferred frees, recorded in the log) may be unfinished.
    Committed,
}

fn encode_header(state: LogState, generation: u64) -> u64 {
    let s = match state {
        LogState::Free => 0,
        LogState::Active => 1,
        LogState::Committed => 2,
    };
    s | generation << 8
}

fn decode_header(word: u64) -> Option<(LogState, u64)> {
    let state = match word & 0xff {
        0 => LogState::Free,
        1 => LogState::Active,
        2 => LogState::Committed,
        _ => return None,
    };
    Some((state, word >> 8))
}

/// One undo log in the region.
pub struct UndoLog {
    region: Region,
    base: u64,
    capacity: u64,
    generation: u64,
    state: LogState,
    /// Byte offset (from `base`) where the next record goes.
    tail: u64,
    records: u64,
}

impl UndoLog {
    /// Attaches to the log at `base` (`capacity` bytes including the header).
    pub fn attach(region: &Region, base: u64, capacity: u64) -> Result<UndoLog> {
        let word = region.read_u64(base);
        let (state, generation) = decode_header(word)
            .ok_or_else(|| DbError::Corrupt(format!("undo log at {base}: bad header {word:#x}")))?;
        Ok(UndoLog {
            region: region.clone(),
            base,
            capacity,
            generation,
            state,
            tail: HEADER_BYTES,
            records: 0,
        })
    }

    /// Formats a blank log (header free, generation 0); persisted by the caller's fence.
    pub fn format(region: &Region, base: u64) {
        region.write_u64(base, encode_header(LogState::Free, 0));
        region.flush(base, 8);
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

    pub fn bytes_used(&self) -> u64 {
        self.tail
    }

    fn record_size(payload: usize) -> u64 {
        (RECORD_HEADER_BYTES + payload).div_ceil(8) as u64 * 8
    }

    /// Whether `payloads` fit.
    pub fn fits(&self, payloads: &[usize]) -> bool {
        let need: u64 = payloads.iter().map(|p| Self::record_size(*p)).sum();
        self.tail + need <= self.capacity
    }

    /// Appends records and persists them with one fence, together with `also_flush` ranges
    /// (earlier in-place writes piggy-back on this barrier). Activates the log on first use; the
    /// header is persisted under the same fence.
    pub fn append(&mut self, records: &[(u8, &[u8])], also_flush: &[(u64, u64)]) -> Result<()> {
        let sizes: Vec<usize> = records.iter().map(|r| r.1.len()).collect();
        if !self.fits(&sizes) {
            return Err(DbError::TxnTooLarge(format!(
                "undo log of {} bytes is full ({} records)",
                self.capacity, self.records
            )));
        }
        if self.state != LogState::Active {
            debug_assert_eq!(self.state, LogState::Free);
            self.generation += 1;
            self.state = LogState::Active;
            self.tail = HEADER_BYTES;
            self.records = 0;
            self.region.write_u64(self.base, encode_header(LogState::Active, self.generation));
            self.region.flush(self.base, 8);
        }
        let start = self.tail;
        let mut buf = Vec::with_capacity(sizes.iter().map(|s| s + RECORD_HEADER_BYTES + 8).sum());
        for (kind, payload) in records {
            let size = Self::record_size(payload.len()) as usize;
            let at = buf.len();
            buf.resize(at + size, 0);
            let rec = &mut buf[at..at + size];
            rec[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
            rec[4] = *kind;
            rec[8..16].copy_from_slice(&self.generation.to_le_bytes());
            rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload.len()].copy_from_slice(payload);
            let c = Self::checksum(rec, payload.len());
            rec[16..20].copy_from_slice(&c.to_le_bytes());
            self.records += 1;
        }
        self.region.write(self.base + start, &buf);
        self.region.flush(self.base + start, buf.len() as u64);
        self.region.flush_ranges(also_flush);
        self.region.fence();
        self.tail = start + buf.len() as u64;
        Ok(())
    }

    fn checksum(rec: &[u8], payload_len: usize) -> u32 {
        // Covers length, kind, generation and payload; not the crc field itself.
        let mut h = crc(&rec[0..16]);
        h ^= crc(&rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + payload_len]).rotate_left(7);
        h
    }

    /// The valid records of the current generation, in append order (for rollback or redo of
    /// post-commit work). Verifies each checksum right after reading it back.
    pub fn read_records(&self) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        if self.state == LogState::Free {
            // Records of the last finished transaction are still there; they mean nothing.
            return out;
        }
        let mut at = HEADER_BYTES;
        while at + RECORD_HEADER_BYTES as u64 <= self.capacity {
            let head = self.region.read(self.base + at, RECORD_HEADER_BYTES);
            let len = get_u32(head, 0) as usize;
            if get_u64(head, 8) != self.generation {
                break;
            }
            let size = Self::record_size(len);
            if len > self.capacity as usize || at + size > self.capacity {
                break;
            }
            let rec = self.region.read(self.base + at, size as usize);
            if get_u32(rec, 16) != Self::checksum(rec, len) {
                break;
            }
            out.push((rec[4], rec[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + len].to_vec()));
            at += size;
        }
        out
    }

    /// Marks the transaction committed with post-commit work pending; persisted.
    pub fn mark_committed(&mut self) {
        debug_assert_eq!(self.state, LogState::Active);
        self.state = LogState::Committed;
        self.region.write_u64(self.base, encode_header(LogState::Committed, self.generation));
        self.region.persist(self.base, 8);
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
        self.region.write_u64(self.base, encode_header(LogState::Free, self.generation));
        self.region.persist(self.base, 8);
        self.tail = HEADER_BYTES;
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
        let mut log = UndoLog::attach(&r, 0, 256).unwrap();
        let big = [0u8; 100];
        log.append(&[(1, &big)], &[]).unwrap();
        assert!(matches!(log.append(&[(1, &big)], &[]), Err(DbError::TxnTooLarge(_))));
    }

    #[test]
    fn torn_record_ends_the_log() {
        let r = region();
        UndoLog::format(&r, 0);
        let mut log = UndoLog::attach(&r, 0, 4096).unwrap();
        log.append(&[(1, b"first")], &[]).unwrap();
        log.append(&[(1, b"second")], &[]).unwrap();
        // Corrupt one payload byte of the second record.
        let second = HEADER_BYTES + UndoLog::record_size(5);
        r.write(second + RECORD_HEADER_BYTES as u64, b"X");
        let again = UndoLog::attach(&r, 0, 4096).unwrap();
        assert_eq!(again.read_records(), vec![(1, b"first".to_vec())]);
    }
}

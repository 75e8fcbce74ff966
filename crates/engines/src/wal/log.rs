//! The write-ahead log of `wal`: a volatile log buffer that captures every store to the buffer
//! pool (physical redo records), and a circular log in NVRAM written with Pelley's
//! `persist_wal` (VLDB 2014, §3.2, Fig. 2): records without their LSN, barrier, then the LSNs,
//! barrier. Where a commit becomes durable: [`Log::force`], its second barrier.
//!
//! Record (8-byte aligned, never straddling the end of the circular area):
//! ```text
//! [u32 payload bytes][u32 kind: 1 store, 2 pad][u64 image offset][u32 crc32c][u32 0]
//! [payload, padded to 8][u64 LSN trailer]
//! ```
//! The LSN is the record's logical byte position (monotonic; its place in the area is LSN mod
//! capacity). **Invariant**: a record is part of the log iff its trailer equals its LSN and its
//! checksum matches; the log ends at the first record that is not. A record never starts in the
//! last 32 bytes of the area (the reader skips them); a record that would not fit before the end
//! is preceded by a pad record that fills it.

use pmem::{Region, StoreObserver};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::format::get_u64;
use storage::{DbError, Result};

const KIND_STORE: u32 = 1;
const KIND_PAD: u32 = 2;
const HEADER: u64 = 24;
const TRAILER: u64 = 8;
/// No record starts closer than this to the end of the area.
const TAIL_SKIP: u64 = HEADER + TRAILER;
/// Largest payload of one record (a store larger than this is split).
const MAX_PAYLOAD: usize = 16 << 10;
/// Most bytes one `persist_wal` writes; a longer tail is forced in several. Bounds how far past
/// the end of the log a crash can leave records whose trailers persisted (only the one force in
/// flight), which recovery erases ([`erase_stale_tail`]) before the log grows again: otherwise a
/// stale record could line up with the new stream and be redone by a later recovery.
const MAX_FORCE_BYTES: u64 = 1 << 20;
/// Bytes past the end of the log that recovery erases.
pub(crate) const STALE_TAIL_BYTES: u64 = MAX_FORCE_BYTES + MAX_PAYLOAD as u64 + HEADER + TRAILER;

thread_local! {
    /// (log id, LSN just past the last record this thread appended to that log): a commit
    /// forces the log to here.
    static THREAD_END: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Ids of logs, so a thread's end in one log never stands for another's.
static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

fn record_bytes(payload: usize) -> u64 {
    HEADER + (payload as u64).next_multiple_of(8) + TRAILER
}

fn crc_of(offset: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&offset.to_le_bytes()), payload)
}

struct Buffer {
    /// Records from `start` on, not yet forced.
    bytes: Vec<u8>,
    start: u64,
}

/// The log: volatile tail and NVRAM area.
pub(crate) struct Log {
    id: u64,
    device: std::sync::Arc<super::device::Device>,
    /// Region offset of the circular area.
    area: u64,
    capacity: u64,
    buffer: parking_lot::Mutex<Buffer>,
    /// LSN just past the last appended record.
    appended: AtomicU64,
    /// Every record below this LSN is durable.
    forced: AtomicU64,
    force_lock: parking_lot::Mutex<()>,
    /// The log had no room for a record: nothing after it can be trusted.
    overflowed: AtomicBool,
    /// Records at and after this LSN are needed by recovery (the checkpoint's redo point).
    redo_from: AtomicU64,
    pub forces: AtomicU64,
    pub bytes_forced: AtomicU64,
}

impl Log {
    /// A log whose durable records end at `end` (recovery found them), needed from `redo_from`.
    pub fn new(
        device: std::sync::Arc<super::device::Device>,
        area: u64,
        capacity: u64,
        redo_from: u64,
        end: u64,
    ) -> Log {
        Log {
            id: NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed),
            device,
            area,
            capacity,
            buffer: parking_lot::Mutex::new(Buffer { bytes: Vec::new(), start: end }),
            appended: AtomicU64::new(end),
            forced: AtomicU64::new(end),
            force_lock: parking_lot::Mutex::new(()),
            overflowed: AtomicBool::new(false),
            redo_from: AtomicU64::new(redo_from),
            forces: AtomicU64::new(0),
            bytes_forced: AtomicU64::new(0),
        }
    }

    pub fn appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }

    pub fn forced(&self) -> u64 {
        self.forced.load(Ordering::Acquire)
    }

    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Bytes of the area holding records recovery may still need.
    pub fn used(&self) -> u64 {
        self.appended() - self.redo_from.load(Ordering::Acquire)
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// After a checkpoint made every change below `lsn` durable in the image.
    pub fn truncate(&self, lsn: u64) {
        self.redo_from.fetch_max(lsn, Ordering::AcqRel);
    }

    /// The end LSN of what the calling thread appended (all of the log if it appended to
    /// another log since).
    pub fn thread_end(&self) -> u64 {
        match THREAD_END.with(Cell::get) {
            (id, end) if id == self.id => end,
            _ => self.appended(),
        }
    }

    /// Appends one store (split if large).
    fn append(&self, offset: u64, bytes: &[u8]) {
        let mut b = self.buffer.lock();
        for (i, chunk) in bytes.chunks(MAX_PAYLOAD).enumerate() {
            let at = offset + (i * MAX_PAYLOAD) as u64;
            self.append_one(&mut b, KIND_STORE, at, chunk);
        }
        let end = b.start + b.bytes.len() as u64;
        self.appended.store(end, Ordering::Release);
        THREAD_END.with(|t| t.set((self.id, end)));
    }

    fn append_one(&self, b: &mut Buffer, kind: u32, offset: u64, payload: &[u8]) {
        let mut lsn = b.start + b.bytes.len() as u64;
        let room = self.capacity - lsn % self.capacity;
        let size = record_bytes(payload.len());
        if room < TAIL_SKIP {
            b.bytes.resize(b.bytes.len() + room as usize, 0);
            lsn += room;
        } else if room < size {
            let pad = vec![0u8; (room - HEADER - TRAILER) as usize];
            self.encode(b, KIND_PAD, lsn, 0, &pad);
            lsn += room;
        }
        // Room for recovery's records and this one: else the log overflowed (the caller's
        // operation margin was wrong); commits are refused from now on.
        if lsn + size - self.redo_from.load(Ordering::Acquire) > self.capacity {
            self.overflowed.store(true, Ordering::Release);
            return;
        }
        self.encode(b, kind, lsn, offset, payload);
    }

    fn encode(&self, b: &mut Buffer, kind: u32, lsn: u64, offset: u64, payload: &[u8]) {
        debug_assert_eq!(b.start + b.bytes.len() as u64, lsn);
        let out = &mut b.bytes;
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&crc_of(offset, payload).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(payload);
        out.resize(out.len().next_multiple_of(8), 0);
        out.extend_from_slice(&lsn.to_le_bytes());
    }

    /// `persist_wal`: makes every record below `lsn` durable. Concurrent callers share one
    /// force (group commit): whoever holds the lock forces everything appended so far.
    pub fn force(&self, lsn: u64, skip_second_barrier: bool) -> Result<()> {
        if self.forced() >= lsn {
            return Ok(());
        }
        let _f = self.force_lock.lock();
        if self.forced() >= lsn {
            return Ok(());
        }
        if self.overflowed() {
            return Err(DbError::TxnTooLarge(
                "the write-ahead log overflowed (log_bytes too small for the work between \
                 checkpoints); reopen the database to recover"
                    .into(),
            ));
        }
        let (bytes, start) = {
            let mut b = self.buffer.lock();
            let start = b.start;
            b.start += b.bytes.len() as u64;
            (std::mem::take(&mut b.bytes), start)
        };
        if bytes.is_empty() {
            return Ok(());
        }
        let mut at = 0usize;
        while at < bytes.len() {
            at = self.persist_wal(&bytes, start, at, skip_second_barrier);
        }
        self.forces.fetch_add(1, Ordering::Relaxed);
        self.bytes_forced.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        self.device.check()?;
        self.forced.store(start + bytes.len() as u64, Ordering::Release);
        Ok(())
    }
}

impl Log {
    /// One `persist_wal` of the records of `bytes` (logical start `start`) from `from` on, at
    /// most [`MAX_FORCE_BYTES`] of them: the records with zero trailers, barrier, the trailers,
    /// barrier. Returns where it stopped.
    fn persist_wal(&self, bytes: &[u8], start: u64, from: usize, skip_second: bool) -> usize {
        let mut trailers = Vec::new();
        let mut at = from;
        while at < bytes.len() && ((at - from) as u64) < MAX_FORCE_BYTES {
            let lsn_here = start + at as u64;
            let room = self.capacity - lsn_here % self.capacity;
            if room < TAIL_SKIP {
                at += room as usize;
                continue;
            }
            let payload = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default());
            let size = record_bytes(payload as usize) as usize;
            let place = self.area + lsn_here % self.capacity;
            let body = &bytes[at..at + size - TRAILER as usize];
            self.device.write(place, body);
            self.device.write_u64(place + body.len() as u64, 0);
            self.device.flush(place, size as u64);
            trailers.push((place + body.len() as u64, lsn_here));
            at += size;
        }
        self.device.fence();
        for (place, lsn_here) in &trailers {
            self.device.write_u64(*place, *lsn_here);
            self.device.flush(*place, 8);
        }
        if !skip_second {
            self.device.fence();
        }
        at
    }
}

/// Recovery, once the end of the log is known: zeroes (persisted) the area just past it, where
/// an interrupted force may have left records with valid trailers, never touching the live log
/// `[redo_from, end)`.
pub(crate) fn erase_stale_tail(nvram: &Region, area: u64, capacity: u64, redo_from: u64, end: u64) {
    let free = capacity - (end - redo_from);
    let mut left = STALE_TAIL_BYTES.min(free);
    let mut lsn = end;
    while left > 0 {
        let pos = lsn % capacity;
        let n = left.min(capacity - pos);
        let zeros = vec![0u8; n as usize];
        nvram.write(area + pos, &zeros);
        nvram.flush(area + pos, n);
        left -= n;
        lsn += n;
    }
    nvram.fence();
}

/// The observer installed on the buffer pool: every store becomes a redo record.
pub(crate) struct Capture(pub std::sync::Arc<Log>);

impl StoreObserver for Capture {
    fn on_store(&self, offset: u64, bytes: &[u8]) {
        self.0.append(offset, bytes);
    }
}

/// One redo record read back.
pub(crate) struct Redo<'a> {
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// Reads the records from `from` on, in order, until the first that is not valid; calls
/// `apply` for each store. Returns the LSN where the log ends. Damage that cannot be a torn
/// tail (a valid record naming bytes outside the image) is `Corrupt`.
pub(crate) fn scan(
    nvram: &Region,
    area: u64,
    capacity: u64,
    from: u64,
    image_bytes: u64,
    mut apply: impl FnMut(Redo<'_>),
) -> Result<(u64, u64)> {
    let mut lsn = from;
    let mut records = 0u64;
    // Bounded: at most one lap of the area.
    while lsn - from < capacity {
        let pos = lsn % capacity;
        let room = capacity - pos;
        if room < TAIL_SKIP {
            lsn += room;
            continue;
        }
        let place = area + pos;
        let header = nvram.read(place, HEADER as usize);
        let payload = u32::from_le_bytes(header[0..4].try_into().unwrap_or_default()) as u64;
        let kind = u32::from_le_bytes(header[4..8].try_into().unwrap_or_default());
        let size = record_bytes(payload as usize);
        if size > room || (kind != KIND_STORE && kind != KIND_PAD) {
            break;
        }
        if nvram.read_u64(place + size - TRAILER) != lsn {
            break;
        }
        let offset = get_u64(header, 8);
        let crc = u32::from_le_bytes(header[16..20].try_into().unwrap_or_default());
        let bytes = nvram.read(place + HEADER, payload as usize);
        if crc_of(offset, bytes) != crc {
            break;
        }
        if kind == KIND_STORE {
            if offset.checked_add(payload).is_none_or(|end| end > image_bytes) {
                return Err(DbError::Corrupt(format!(
                    "wal log record at LSN {lsn} names bytes {offset}+{payload} outside the image"
                )));
            }
            apply(Redo { offset, bytes });
            records += 1;
        }
        lsn += size;
    }
    Ok((lsn, records))
}

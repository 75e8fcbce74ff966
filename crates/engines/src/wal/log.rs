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
//!
//! **Insertion** (`log_insert=`, see [`LogInsert`]): `consolidated` (the default) is Aether's
//! consolidation array (Johnson et al., VLDB 2010, §4-§5; [`super::carray`]): concurrent
//! inserters combine, one leader takes the reservation lock for the whole group, each member
//! copies its record without a lock, and the last member of a group releases its region.
//! `aether` is decoupled buffer fill alone: every appender reserves its LSN range under the short
//! reservation lock (arithmetic only), copies its record into the volatile ring with no lock
//! held, then releases it without a lock (issue 35): a CAS moves the *filled prefix* (`released`)
//! over its range, or, while an earlier copy is still in flight, its end is left in a table at
//! its start and the earlier copy's release moves on over it (Aether's delegated release, §A).
//! In both, appenders never wait for one another's copies: a force writes the filled prefix and
//! only a commit whose records lie beyond an unfinished copy waits for it (a release that spins
//! for its predecessor collapsed throughput on this 2-core machine when a copier was
//! descheduled). `log_insert=locked` copies under the
//! reservation lock (one global lock per append, the baseline Aether improves on), to measure the
//! three side by side.
//!
//! Length: the code is about 767 lines, under the workspace's ~900; the other 228 are its unit
//! tests.

use super::carray::{ConsolidationArray, Group, Joined, GROUP_LIMIT_BYTES, NO_ROOM};
use pmem::Region;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::format::get_u64;
use storage::{DbError, Result};

const KIND_STORE: u32 = 1;
const KIND_PAD: u32 = 2;
/// A store of a distributed log ([`super::dlog`]): the payload starts with the record's u64 GSN.
const KIND_GSN_STORE: u32 = 3;
/// A `KIND_GSN_STORE` record recovery found beyond the durable GSN horizon and retired: it keeps
/// its length and checksum (the log still reads through it) and is never redone.
const KIND_DEAD: u32 = 4;
/// Bytes of the GSN prefix of a `KIND_GSN_STORE` payload.
pub(crate) const GSN_BYTES: usize = 8;
const HEADER: u64 = 24;
const TRAILER: u64 = 8;
/// No record starts closer than this to the end of the area.
const TAIL_SKIP: u64 = HEADER + TRAILER;
/// Largest payload of one record (a store larger than this is split).
pub(crate) const MAX_PAYLOAD: usize = 16 << 10;
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

pub(crate) fn record_bytes(payload: usize) -> u64 {
    HEADER + (payload as u64).next_multiple_of(8) + TRAILER
}

fn crc_of(offset: u64, payload: &[u8]) -> u32 {
    storage::crc::crc32c_append(storage::crc::crc32c(&offset.to_le_bytes()), payload)
}

/// `[u32 payload bytes][u32 kind][u64 offset][u32 crc][u32 0][payload, padded][u64 LSN]`.
/// `crc` is `crc_of(offset, payload)`, computed by the caller before it takes any lock.
fn encode_into(out: &mut Vec<u8>, kind: u32, lsn: u64, offset: u64, payload: &[u8], crc: u32) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(out.len().next_multiple_of(8), 0);
    out.extend_from_slice(&lsn.to_le_bytes());
}

/// Bytes of the volatile ring the records are copied into before a force writes them out. A
/// reservation waits (forcing) while the ring holds this much unforced log.
const RING_BYTES: u64 = 4 * MAX_FORCE_BYTES;
const RING_WORDS: u64 = RING_BYTES / 8;

/// How appenders insert records (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogInsert {
    /// Aether's consolidation array: one reservation per group of concurrent inserters, copies
    /// in parallel, the group released by its last member ([`super::carray`]).
    Consolidated,
    /// Reserve under a short lock, copy without it, release in LSN order.
    Aether,
    /// Reserve and copy under one global lock.
    Locked,
}

impl LogInsert {
    pub fn parse(s: &str) -> Option<LogInsert> {
        match s {
            "consolidated" => Some(LogInsert::Consolidated),
            "aether" => Some(LogInsert::Aether),
            "locked" => Some(LogInsert::Locked),
            _ => None,
        }
    }
}

/// The bytes from `res.pad` to `res.end`: the pad record (if any), then the record.
fn encode(kind: u32, res: &Reservation, offset: u64, payload: &[u8], crc: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((res.end - res.pad) as usize);
    if res.record > res.pad {
        let pad = vec![0u8; (res.record - res.pad - HEADER - TRAILER) as usize];
        encode_into(&mut out, KIND_PAD, res.pad, 0, &pad, crc_of(0, &pad));
    }
    encode_into(&mut out, kind, res.record, offset, payload, crc);
    out
}

/// The bytes from `res.pad` to `res.end` for a batch: the pad record (if any), then each
/// `(offset, payload, crc)` as a store record, back to back from `res.record`.
fn encode_batch(res: &Reservation, records: &[(u64, &[u8], u32)]) -> Vec<u8> {
    let mut out = Vec::with_capacity((res.end - res.pad) as usize);
    if res.record > res.pad {
        let pad = vec![0u8; (res.record - res.pad - HEADER - TRAILER) as usize];
        encode_into(&mut out, KIND_PAD, res.pad, 0, &pad, crc_of(0, &pad));
    }
    let mut lsn = res.record;
    for &(offset, payload, crc) in records {
        encode_into(&mut out, KIND_STORE, lsn, offset, payload, crc);
        lsn += record_bytes(payload.len());
    }
    debug_assert_eq!(lsn, res.end);
    out
}

/// Most bytes of records one [`Log::append_batch`] reserves at once (one record's worth: a
/// consolidation group can take it).
pub(crate) const BATCH_LIMIT_BYTES: u64 = MAX_PAYLOAD as u64 + HEADER + TRAILER;

/// Where a GSN store's GSN comes from: called once the record's space is reserved and before
/// its copy, outside the reservation lock (except with `log_insert=locked`, which copies under
/// it). A GSN that another thread can read therefore names a reserved record that a force
/// to the reserved end waits for (see `Dlog::capture_one` for why no more order is needed).
pub(crate) type AssignGsn<'a> = &'a mut dyn FnMut() -> u64;

/// The reservation lock's state.
struct Reserved {
    /// LSN just past the last reserved record.
    end: u64,
    /// Acquisitions of this lock (counted under it, so the count writes no other line).
    acquisitions: u64,
    /// `log_insert=consolidated`: groups reserved, and the records they held (counted under
    /// this lock, which their leaders hold anyway).
    groups: u64,
    grouped_records: u64,
}

/// Where one reservation's bytes go: zeros from `start` to `pad` (the unusable end of the
/// area), a pad record from `pad` to `record` (when the record does not fit before the end),
/// the record from `record` to `end`.
#[derive(Clone, Copy)]
struct Reservation {
    start: u64,
    pad: u64,
    record: u64,
    end: u64,
}

/// The log: volatile tail and NVRAM area.
pub(crate) struct Log {
    id: u64,
    device: std::sync::Arc<crate::device::Device>,
    /// Region offset of the circular area.
    area: u64,
    capacity: u64,
    insert: LogInsert,
    /// `log_insert=consolidated`: where concurrent inserters combine.
    carray: Option<ConsolidationArray>,
    /// The reservation lock (the log's insert point): the reserved end. Releases do not take
    /// it (below).
    reserved: parking_lot::Mutex<Reserved>,
    /// Aether's release (Johnson et al., VLDB 2010, §A): every reservation below this LSN is
    /// copied into the ring. A copy that ends while an earlier one is still in flight leaves
    /// its end in `done` at its start, and whoever moves `released` up to that start moves it
    /// on (delegated release), so no copy waits for another and no release takes a lock.
    released: AtomicU64,
    /// Per 8-byte LSN modulo the ring: the end of a finished copy that starts there and waits
    /// for its predecessors (0: none). Every copy in flight lies within one ring of `forced`,
    /// so no two share an entry.
    done: Box<[AtomicU64]>,
    /// The reserved end, published by every reservation (stored under `reserved`, so its
    /// values only grow) for readers that take no lock: a commit and a GSN round forcing to
    /// the reserved end ([`Self::reserved_end`], issue 35), and the gate asking how full the
    /// log is on every operation.
    published_end: AtomicU64,
    /// Forces asleep on `copied` (under `reserved`) until `released` reaches them.
    copy_waiters: AtomicU64,
    /// Signalled when a release moves `released` while a force waits.
    copied: parking_lot::Condvar,
    /// The volatile ring: LSN `l` lives in word `(l / 8) % RING_WORDS`. Appenders write
    /// disjoint ranges; the reservation lock publishes them to the forcer.
    ring: Box<[AtomicU64]>,
    /// Every record below this LSN is durable.
    forced: AtomicU64,
    /// Held by the one thread forcing; its buffer collects the ring's bytes.
    force_lock: parking_lot::Mutex<Vec<u8>>,
    /// The log had no room for a record: nothing after it can be trusted.
    overflowed: AtomicBool,
    /// Records at and after this LSN are needed by recovery (the checkpoint's redo point).
    redo_from: AtomicU64,
    pub forces: AtomicU64,
    pub bytes_forced: AtomicU64,
    /// Persist barriers the forces issued (2 per `persist_wal`).
    pub force_fences: AtomicU64,
    /// Forces that waited for an earlier appender to finish copying.
    pub copy_waits: AtomicU64,
    /// Test fault `wal-group-drops-last-store`: a store group's last store is not logged.
    drop_group_tail: bool,
}

impl Log {
    /// A log whose durable records end at `end` (recovery found them), needed from `redo_from`.
    pub fn new(
        device: std::sync::Arc<crate::device::Device>,
        area: u64,
        capacity: u64,
        redo_from: u64,
        end: u64,
        insert: LogInsert,
    ) -> Log {
        Log {
            id: NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed),
            device,
            area,
            capacity,
            insert,
            carray: (insert == LogInsert::Consolidated).then(ConsolidationArray::default),
            reserved: parking_lot::Mutex::new(Reserved {
                end,
                acquisitions: 0,
                groups: 0,
                grouped_records: 0,
            }),
            released: AtomicU64::new(end),
            published_end: AtomicU64::new(end),
            done: (0..RING_WORDS).map(|_| AtomicU64::new(0)).collect(),
            copy_waiters: AtomicU64::new(0),
            copied: parking_lot::Condvar::new(),
            ring: (0..RING_WORDS).map(|_| AtomicU64::new(0)).collect(),
            forced: AtomicU64::new(end),
            force_lock: parking_lot::Mutex::new(Vec::new()),
            overflowed: AtomicBool::new(false),
            redo_from: AtomicU64::new(redo_from),
            forces: AtomicU64::new(0),
            bytes_forced: AtomicU64::new(0),
            force_fences: AtomicU64::new(0),
            copy_waits: AtomicU64::new(0),
            drop_group_tail: false,
        }
    }

    /// Test fault `wal-group-drops-last-store`: every store group of two or more stores is
    /// appended without its last store (an update's row or checksum is never redone).
    pub fn with_group_tails_dropped(mut self) -> Log {
        self.drop_group_tail = true;
        self
    }

    /// LSN below which every record is copied in (with operations quiesced: the end).
    pub fn appended(&self) -> u64 {
        self.released.load(Ordering::Acquire)
    }

    /// The reservation lock, counted.
    fn lock_reserved(&self) -> parking_lot::MutexGuard<'_, Reserved> {
        let mut r = self.reserved.lock();
        r.acquisitions += 1;
        r
    }

    /// Acquisitions of the reservation lock so far.
    pub(crate) fn reservation_locks(&self) -> u64 {
        self.reserved.lock().acquisitions
    }

    /// The copy of `start..end` (a reservation) is in the ring: moves `released` past it and
    /// past every later copy already done, or leaves it to the thread that will. Takes no lock
    /// unless a force sleeps.
    fn release(&self, start: u64, end: u64) {
        let (mut start, mut end) = (start, end);
        // Bounded: each turn releases one finished copy.
        loop {
            if self
                .released
                .compare_exchange(start, end, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                match self.take_done(end) {
                    Some(next) => (start, end) = (end, next),
                    None => break,
                }
                continue;
            }
            // An earlier copy is in flight: its release moves on over this one.
            self.done_entry(start).store(end, Ordering::SeqCst);
            // Dekker with that release (its `released` store, then its `take_done`): if it got
            // here first, this thread takes its entry back and releases it itself.
            if self.released.load(Ordering::SeqCst) != start {
                return;
            }
            match self.take_done(start) {
                Some(e) => end = e,
                None => return,
            }
        }
        if self.copy_waiters.load(Ordering::SeqCst) > 0 {
            let _r = self.reserved.lock();
            self.copied.notify_all();
        }
    }

    fn done_entry(&self, lsn: u64) -> &AtomicU64 {
        &self.done[((lsn / 8) % RING_WORDS) as usize]
    }

    /// Claims the finished copy starting at `lsn`, if one waits there: its end.
    fn take_done(&self, lsn: u64) -> Option<u64> {
        Some(self.done_entry(lsn).swap(0, Ordering::SeqCst)).filter(|e| *e != 0)
    }

    /// `log_insert=consolidated`: (groups reserved, records they held).
    pub(crate) fn groups(&self) -> (u64, u64) {
        let r = self.reserved.lock();
        (r.groups, r.grouped_records)
    }

    /// Moves the reserved end to `end` (under the reservation lock, so the published values
    /// grow in reservation order) and publishes it to [`Self::reserved_end`].
    fn publish_end(&self, r: &mut Reserved, end: u64) {
        r.end = end;
        // SeqCst, not Release: this store is one half of the Dekker pair `reserved_end`
        // documents (it precedes the GSN's floor load in the same thread).
        self.published_end.store(end, Ordering::SeqCst);
    }

    /// LSN just past the last reserved record, read without the reservation lock (issue 35: a
    /// commit reads it once per log it touched, and the lock was its only shared acquisition
    /// there). A reader never sees an end below a record whose GSN it depends on:
    /// - the thread's own records: it published their end itself, before this load in program
    ///   order, and the published end only grows (stored under the lock, in reservation
    ///   order), so coherence gives at least that end;
    /// - another thread's record whose GSN a GSN round covers ([`super::dlog::Dlog`]'s
    ///   `full_round`): the reserver publishes the end (SeqCst) *then* loads the GSN floor
    ///   (SeqCst) to take the GSN; the round raises the floor to `g` (SeqCst) *then* loads this
    ///   end (SeqCst). In the single order of SeqCst operations, either the publish precedes
    ///   this load (the load returns that end or a later, larger one, and the force covers the
    ///   record) or this load precedes the publish, so the floor raise precedes the floor load,
    ///   which returns at least `g`: the record's GSN exceeds `g` and the round's `H = g` does
    ///   not cover it. This is the argument the lock made before (a reserver whose floor load
    ///   missed the raise had released the lock before the round took it), with the two
    ///   SeqCst pairs standing in for the lock's acquire/release.
    pub(crate) fn reserved_end(&self) -> u64 {
        self.published_end.load(Ordering::SeqCst)
    }

    /// Tests: another appender's copy in flight at the current end (what a thread is between
    /// its reservation and its copy: a pad record's room reserved, not yet copied): the filled
    /// prefix stops there, and a force past it waits for [`Self::finish_copy`].
    #[cfg(test)]
    pub(crate) fn start_copy(&self) -> u64 {
        let mut r = self.lock_reserved();
        let res = self.reserve(r.end, record_bytes(0)).expect("room for a pad");
        self.publish_end(&mut r, res.end);
        res.start
    }

    #[cfg(test)]
    pub(crate) fn finish_copy(&self, at: u64) {
        let res = self.reserve(at, record_bytes(0)).expect("the same reservation");
        self.fill(&res, &encode(KIND_PAD, &res, 0, &[], crc_of(0, &[])));
        self.release(res.start, res.end);
    }

    pub fn forced(&self) -> u64 {
        self.forced.load(Ordering::Acquire)
    }

    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    /// Bytes of the area holding records recovery may still need.
    pub fn used(&self) -> u64 {
        let end = self.published_end.load(Ordering::Acquire);
        // Saturating: a checkpoint may truncate past the end this thread read a moment before.
        end.saturating_sub(self.redo_from.load(Ordering::Acquire))
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
    pub(crate) fn append(&self, offset: u64, bytes: &[u8]) {
        let mut end = None;
        for (i, chunk) in bytes.chunks(MAX_PAYLOAD).enumerate() {
            let at = offset + (i * MAX_PAYLOAD) as u64;
            end = self.append_one(KIND_STORE, at, chunk).or(end);
        }
        if let Some(end) = end {
            THREAD_END.with(|t| t.set((self.id, end)));
        }
    }

    /// Appends several stores as consecutive records in one reservation (one insert into the
    /// log instead of one each, `wal/capture.rs`), in the order given, so that any prefix of
    /// them that survives a crash is a prefix of the caller's stores. Every payload is at most
    /// [`MAX_PAYLOAD`] and their records together at most [`BATCH_LIMIT_BYTES`].
    pub(crate) fn append_batch(&self, records: &[(u64, &[u8])]) {
        let records = match records.len() {
            n if n >= 2 && self.drop_group_tail => &records[..n - 1],
            _ => records,
        };
        let with_crc: Vec<(u64, &[u8], u32)> =
            records.iter().map(|&(offset, bytes)| (offset, bytes, crc_of(offset, bytes))).collect();
        let size: u64 = records.iter().map(|(_, bytes)| record_bytes(bytes.len())).sum();
        debug_assert!(size <= BATCH_LIMIT_BYTES);
        let encode = |res: &Reservation, _gsn: u64| encode_batch(res, &with_crc);
        let end = match &self.carray {
            Some(carray) => self.append_consolidated(carray, size, &encode),
            None => self.append_reserved(size, None, &encode).map(|(end, _)| end),
        };
        if let Some(end) = end {
            THREAD_END.with(|t| t.set((self.id, end)));
        }
    }

    /// Reserves, copies and releases one record; returns its end (None if the log overflowed).
    fn append_one(&self, kind: u32, offset: u64, payload: &[u8]) -> Option<u64> {
        self.append_inner(kind, offset, payload, None).map(|(end, _)| end)
    }

    /// Appends one GSN store (`bytes` at most a page): the GSN is assigned by `assign` under the
    /// reservation lock. Returns the record's end LSN and its GSN (None if the log overflowed).
    pub(crate) fn append_gsn(
        &self,
        offset: u64,
        bytes: &[u8],
        assign: AssignGsn<'_>,
    ) -> Option<(u64, u64)> {
        debug_assert!(bytes.len() + GSN_BYTES <= MAX_PAYLOAD);
        self.append_inner(KIND_GSN_STORE, offset, bytes, Some(assign))
    }

    fn append_inner(
        &self,
        kind: u32,
        offset: u64,
        payload: &[u8],
        assign: Option<AssignGsn<'_>>,
    ) -> Option<(u64, u64)> {
        let prefix = if assign.is_some() { GSN_BYTES } else { 0 };
        let size = record_bytes(payload.len() + prefix);
        // Checksummed before the reservation lock: it depends on neither LSN nor position (a
        // GSN store's checksum is finished once its GSN is known, after the lock).
        let crc = crc_of(offset, payload);
        let encode = |res: &Reservation, gsn: u64| {
            if prefix == 0 {
                return encode(kind, res, offset, payload, crc);
            }
            let mut body = Vec::with_capacity(GSN_BYTES + payload.len());
            body.extend_from_slice(&gsn.to_le_bytes());
            body.extend_from_slice(payload);
            encode(kind, res, offset, &body, crc_of(offset, &body))
        };
        // A GSN store is reserved record by record: it does not join a group (a distributed
        // log's insert path is decoupled fill alone).
        if let (Some(carray), None) = (&self.carray, &assign) {
            return self.append_consolidated(carray, size, &encode).map(|e| (e, 0));
        }
        self.append_reserved(size, assign, &encode)
    }

    /// `log_insert=aether|locked` (and GSN stores): reserves `size` bytes under the reservation
    /// lock, then copies what `encode` makes of the reservation (given the GSN `assign` gives,
    /// 0 without one) and releases it. Returns the end and the GSN (None if the log overflowed).
    fn append_reserved(
        &self,
        size: u64,
        mut assign: Option<AssignGsn<'_>>,
        encode: &dyn Fn(&Reservation, u64) -> Vec<u8>,
    ) -> Option<(u64, u64)> {
        let (guard, res) = loop {
            let mut r = self.lock_reserved();
            let Some(res) = self.reserve(r.end, size) else {
                // Room for recovery's records and this one: else the log overflowed (the
                // caller's operation margin was wrong); commits are refused from now on.
                self.overflowed.store(true, Ordering::Release);
                return None;
            };
            if res.end - self.forced() <= RING_BYTES {
                self.publish_end(&mut r, res.end);
                break (r, res);
            }
            // The ring is full of unforced log: force what is filled, then try again.
            drop(r);
            let filled = self.appended();
            if filled <= self.forced() {
                // An earlier copy is still in flight.
                std::thread::yield_now();
            } else if self.force(filled, false).is_err() {
                return None;
            }
        };
        if self.insert != LogInsert::Locked {
            drop(guard);
            // After the reservation, before the copy: in flight, so a force up to the reserved
            // end waits for this record, GSN included.
            let gsn = assign.as_mut().map_or(0, |f| f());
            self.fill(&res, &encode(&res, gsn));
            self.release(res.start, res.end);
            Some((res.end, gsn))
        } else {
            let gsn = assign.as_mut().map_or(0, |f| f());
            self.fill(&res, &encode(&res, gsn));
            drop(guard);
            // After the lock (a release may take it to wake a force): copies made under it
            // are released in any order, each over the earlier ones.
            self.release(res.start, res.end);
            Some((res.end, gsn))
        }
    }

    /// `log_insert=consolidated` ([`super::carray`]): joins a group, copies this record into
    /// its part of the group's reservation, and releases the group if it is the last member to
    /// finish. Returns the record's end (None if the log overflowed).
    fn append_consolidated(
        &self,
        carray: &ConsolidationArray,
        size: u64,
        encode: &dyn Fn(&Reservation, u64) -> Vec<u8>,
    ) -> Option<u64> {
        const _: () = assert!(BATCH_LIMIT_BYTES + 8 <= GROUP_LIMIT_BYTES);
        let joined = carray.join(size);
        let group = joined.leader.then(|| self.reserve_group(carray, &joined)).flatten();
        let base = carray.base(&joined);
        let res = match group {
            // The leader's record is the group's first: the pad before the group is its to write.
            Some(g) => Some(Reservation { end: g.record + size, ..g }),
            None if base != NO_ROOM => {
                Some(Reservation { start: base, pad: base, record: base, end: base + size })
            }
            None => None,
        };
        if let Some(res) = &res {
            self.fill(res, &encode(res, 0));
        }
        if let Some((key, end)) = carray.finish(&joined) {
            if base != NO_ROOM {
                self.release(key, end);
            }
            carray.recycle(&joined);
        }
        res.map(|r| r.end)
    }

    /// The leader of a group: one acquisition of the insert point reserves the whole group (a
    /// pad before it if it does not fit before the end of the area) and notes it in flight;
    /// then the members are told where it starts. None: no room (the log overflowed).
    fn reserve_group(&self, carray: &ConsolidationArray, leader: &Joined) -> Option<Reservation> {
        let mut r = self.lock_reserved();
        let group: Group = carray.close(leader);
        r.groups += 1;
        r.grouped_records += group.members;
        loop {
            let Some(res) = self.reserve(r.end, group.bytes) else {
                self.overflowed.store(true, Ordering::Release);
                drop(r);
                carray.publish(leader, group, NO_ROOM, 0, 0);
                return None;
            };
            if res.end - self.forced() <= RING_BYTES {
                self.publish_end(&mut r, res.end);
                drop(r);
                carray.publish(leader, group, res.record, res.start, res.end);
                return Some(res);
            }
            // The ring is full of unforced log: force what is filled, then try again.
            drop(r);
            let filled = self.appended();
            if filled <= self.forced() {
                std::thread::yield_now();
            } else if self.force(filled, false).is_err() {
                // The members' records are lost: nothing after them may be acknowledged.
                self.overflowed.store(true, Ordering::Release);
                carray.publish(leader, group, NO_ROOM, 0, 0);
                return None;
            }
            r = self.lock_reserved();
        }
    }

    /// Where a record of `size` bytes goes if the log ends at `lsn` (None: no room).
    fn reserve(&self, lsn: u64, size: u64) -> Option<Reservation> {
        let room = self.capacity - lsn % self.capacity;
        let (pad, record) = if room < TAIL_SKIP {
            (lsn + room, lsn + room)
        } else if room < size {
            (lsn, lsn + room)
        } else {
            (lsn, lsn)
        };
        let end = record + size;
        (end - self.redo_from.load(Ordering::Acquire) <= self.capacity).then_some(Reservation {
            start: lsn,
            pad,
            record,
            end,
        })
    }

    /// Copies a reservation into the ring (no lock held in `aether` mode).
    fn fill(&self, res: &Reservation, bytes: &[u8]) {
        // The skipped end of the area (a multiple of 8 bytes) reads as zeros.
        for word in res.start / 8..res.pad / 8 {
            self.ring[(word % RING_WORDS) as usize].store(0, Ordering::Relaxed);
        }
        for (i, chunk) in bytes.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
            let word = res.pad / 8 + i as u64;
            self.ring[(word % RING_WORDS) as usize].store(w, Ordering::Relaxed);
        }
    }

    /// `persist_wal`: makes every record below `lsn` durable. Concurrent callers share one
    /// force (group commit): whoever holds the lock forces everything appended so far.
    pub fn force(&self, lsn: u64, skip_second_barrier: bool) -> Result<()> {
        if self.forced() >= lsn {
            return Ok(());
        }
        self.force_held(self.force_lock.lock(), lsn, skip_second_barrier)
    }

    /// [`Self::force`], unless another thread is forcing right now: then returns `false` at
    /// once instead of waiting for it.
    pub fn try_force(&self, lsn: u64, skip_second_barrier: bool) -> Result<bool> {
        if self.forced() >= lsn {
            return Ok(true);
        }
        let Some(guard) = self.force_lock.try_lock() else {
            return Ok(false);
        };
        self.force_held(guard, lsn, skip_second_barrier).map(|()| true)
    }

    fn force_held(
        &self,
        mut guard: parking_lot::MutexGuard<'_, Vec<u8>>,
        lsn: u64,
        skip_second_barrier: bool,
    ) -> Result<()> {
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
        let start = self.forced();
        let target = {
            if self.appended() < lsn {
                let mut r = self.lock_reserved();
                self.copy_waits.fetch_add(1, Ordering::Relaxed);
                // Bounded: `lsn` was reserved, and every copy completes without waiting.
                let want = lsn.min(r.end);
                while self.appended() < want {
                    // Dekker with `release` (its `released` move, then this count): a release
                    // this re-check misses sees the count and wakes this thread.
                    self.copy_waiters.fetch_add(1, Ordering::SeqCst);
                    if self.released.load(Ordering::SeqCst) < want {
                        self.copied.wait(&mut r);
                    }
                    self.copy_waiters.fetch_sub(1, Ordering::SeqCst);
                }
            }
            self.appended().max(start)
        };
        let mut bytes = std::mem::take(&mut *guard);
        bytes.clear();
        for word in start / 8..target / 8 {
            let w = self.ring[(word % RING_WORDS) as usize].load(Ordering::Relaxed);
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        if bytes.is_empty() {
            *guard = bytes;
            return Ok(());
        }
        let mut at = 0usize;
        while at < bytes.len() {
            at = self.persist_wal(&bytes, start, at, skip_second_barrier);
        }
        self.forces.fetch_add(1, Ordering::Relaxed);
        self.bytes_forced.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let done = start + bytes.len() as u64;
        *guard = bytes;
        self.device.check()?;
        self.forced.store(done, Ordering::Release);
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
        self.force_fences.fetch_add(if skip_second { 1 } else { 2 }, Ordering::Relaxed);
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

/// One redo record read back.
pub(crate) struct Redo<'a> {
    pub offset: u64,
    pub bytes: &'a [u8],
    /// The GSN of a distributed log's record (None in the central log's format).
    pub gsn: Option<u64>,
    /// Region offset of the record's header (where [`retire`] marks it dead).
    pub place: u64,
}

/// Marks the GSN store at `place` dead (persisted): later scans read through it and never
/// redo it. Only the kind word changes; length, checksum and trailer stay valid.
pub(crate) fn retire(nvram: &Region, place: u64) {
    let word = nvram.read_u64(place);
    let dead = (word & 0xffff_ffff) | (u64::from(KIND_DEAD) << 32);
    nvram.write_u64(place, dead);
    nvram.persist(place, 8);
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
    // Records start on 8-byte boundaries: a redo point off one is a damaged control word, and
    // a log reopened there would write its words unaligned (found by `nvmdb fuzz --engine wal
    // --seed 11 --case 289`, a panic in the commit daemon; issue 37).
    if !from.is_multiple_of(8) {
        return Err(DbError::Corrupt(format!(
            "wal log: redo point {from} is not a record boundary (a damaged control word)"
        )));
    }
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
        let known = matches!(kind, KIND_STORE | KIND_PAD | KIND_GSN_STORE | KIND_DEAD);
        if size > room || !known {
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
        let (gsn, bytes) = match kind {
            KIND_GSN_STORE if bytes.len() >= GSN_BYTES => {
                (Some(get_u64(bytes, 0)), &bytes[GSN_BYTES..])
            }
            KIND_GSN_STORE => {
                return Err(DbError::Corrupt(format!(
                    "wal log record at LSN {lsn} is a GSN store of {payload} bytes (no GSN)"
                )))
            }
            _ => (None, bytes),
        };
        if kind == KIND_STORE || kind == KIND_GSN_STORE {
            let len = bytes.len() as u64;
            if offset.checked_add(len).is_none_or(|end| end > image_bytes) {
                return Err(DbError::Corrupt(format!(
                    "wal log record at LSN {lsn} names bytes {offset}+{len} outside the image"
                )));
            }
            apply(Redo { offset, bytes, gsn, place });
            records += 1;
        }
        lsn += size;
    }
    Ok((lsn, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};
    use std::sync::Arc;

    const AREA: u64 = 4096;

    fn log(capacity: u64, insert: LogInsert) -> (Region, Arc<Log>) {
        let region = Region::open(&RegionOptions::new(Medium::Dram, AREA + capacity + 4096))
            .expect("a dram region");
        let device =
            Arc::new(crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap());
        (region, Arc::new(Log::new(device, AREA, capacity, 0, 0, insert)))
    }

    /// Payload of thread `t`'s `i`-th store: sizes from 1 byte to past MAX_PAYLOAD (split).
    fn payload(t: u64, i: u64) -> Vec<u8> {
        let len = match i % 7 {
            0 => MAX_PAYLOAD + 100,
            1 => 1,
            n => (n * 37 + t) as usize,
        };
        (0..len).map(|j| (t * 31 + i * 7 + j as u64) as u8).collect()
    }

    /// Concurrent appenders (with forces in between), then the log read back: every store
    /// present, whole, and each thread's in its program order — in both insertion modes.
    #[test]
    fn concurrent_appends_are_all_read_back_in_each_threads_order() {
        for insert in [LogInsert::Consolidated, LogInsert::Aether, LogInsert::Locked] {
            let (region, log) = log(16 << 20, insert);
            let (threads, per) = (4u64, 300u64);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let log = log.clone();
                    s.spawn(move || {
                        for i in 0..per {
                            log.append((t << 32) | (i << 16), &payload(t, i));
                            if i % 50 == 0 {
                                log.force(log.thread_end(), false).unwrap();
                            }
                        }
                    });
                }
            });
            log.force(log.appended(), false).unwrap();
            let (groups, records) = log.groups();
            if insert == LogInsert::Consolidated {
                assert!(groups > 0 && records >= groups, "{groups} groups of {records}");
                println!("{groups} groups held {records} records");
            }
            let mut seen = vec![Vec::new(); threads as usize];
            let (end, _) = scan(&region, AREA, 16 << 20, 0, u64::MAX, |r| {
                let (t, i) = (r.offset >> 32, (r.offset >> 16) & 0xffff);
                seen[t as usize].push((i, r.offset & 0xffff, r.bytes.to_vec()));
            })
            .unwrap();
            assert_eq!(end, log.appended(), "{insert:?}: the log ends where appends did");
            for (t, records) in seen.iter().enumerate() {
                let mut rebuilt: Vec<(u64, Vec<u8>)> = Vec::new();
                for (i, chunk_at, bytes) in records {
                    match rebuilt.last_mut() {
                        Some((last, b)) if *last == *i && *chunk_at == b.len() as u64 => {
                            b.extend_from_slice(bytes)
                        }
                        _ => rebuilt.push((*i, bytes.clone())),
                    }
                }
                let want: Vec<_> = (0..per).map(|i| (i, payload(t as u64, i))).collect();
                assert_eq!(rebuilt, want, "{insert:?}: thread {t}'s stores");
            }
        }
    }

    /// Guards Aether's release without a lock (issue 35): an append takes the reservation lock
    /// once (a group once, for all its members), its release none, and every copy is still
    /// released (the log's filled prefix reaches its end). Would catch: a release that takes
    /// the insert point's lock again (two acquisitions per record), or a delegated release lost.
    #[test]
    fn a_release_takes_no_lock_and_none_is_lost() {
        for insert in [LogInsert::Aether, LogInsert::Consolidated, LogInsert::Locked] {
            let (region, log) = log(16 << 20, insert);
            let (threads, per) = (4u64, 500u64);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let log = log.clone();
                    s.spawn(move || {
                        for i in 0..per {
                            log.append((t << 32) | (i << 16), &[t as u8; 24]);
                        }
                    });
                }
            });
            let locks = log.reservation_locks();
            let reserved = log.reserved.lock().end;
            assert_eq!(log.appended(), reserved, "{insert:?}: a copy was never released");
            match insert {
                LogInsert::Consolidated => {
                    assert_eq!(locks, log.groups().0, "{insert:?}: one acquisition per group")
                }
                _ => assert_eq!(locks, threads * per, "{insert:?}: one acquisition per record"),
            }
            assert!(log.done.iter().all(|d| d.load(Ordering::Relaxed) == 0), "an entry left");
            log.force(log.appended(), false).unwrap();
            let (_, records) = scan(&region, AREA, 16 << 20, 0, u64::MAX, |_| {}).unwrap();
            assert_eq!(records, threads * per, "{insert:?}: every record read back");
        }
    }

    /// Appenders that arrive while the insert point is held join one group: one reservation
    /// for all of them, each record copied whole at its own offset (Aether §4). Would catch a
    /// group whose members overlap, or a leader that reserves only its own record.
    #[test]
    fn inserters_waiting_for_the_insert_point_consolidate_into_one_group() {
        let (region, log) = log(1 << 20, LogInsert::Consolidated);
        let carray = log.carray.as_ref().expect("consolidated");
        let wait_for = |members: u64| {
            let started = std::time::Instant::now();
            while carray.open_members() < members {
                assert!(started.elapsed().as_secs() < 20, "{members} members never joined");
                std::thread::yield_now();
            }
        };
        std::thread::scope(|s| {
            let insert_point = log.reserved.lock();
            for t in 0..3u64 {
                let log = log.clone();
                s.spawn(move || log.append(t << 16, &payload(t, t + 1)));
                // The first is the leader, blocked on the insert point; the others join it.
                wait_for(t + 1);
            }
            drop(insert_point);
        });
        assert_eq!(log.groups(), (1, 3), "one reservation for three records");
        log.force(log.appended(), false).unwrap();
        let mut got = Vec::new();
        scan(&region, AREA, 1 << 20, 0, u64::MAX, |r| got.push((r.offset, r.bytes.to_vec())))
            .unwrap();
        got.sort();
        let want: Vec<_> = (0..3u64).map(|t| (t << 16, payload(t, t + 1))).collect();
        assert_eq!(got, want);
    }

    /// Regression (issue 37, `nvmdb fuzz --engine wal --seed 11 --case 289` panicked with an
    /// unaligned write): a redo point off a record boundary is `Corrupt`, never a log reopened
    /// at an unaligned position.
    #[test]
    fn an_unaligned_redo_point_is_corrupt() {
        let (region, _log) = log(64 << 10, LogInsert::Aether);
        let scanned = scan(&region, AREA, 64 << 10, 450, u64::MAX, |_| {});
        assert!(matches!(scanned, Err(DbError::Corrupt(_))), "{:?}", scanned.err());
        assert!(scan(&region, AREA, 64 << 10, 448, u64::MAX, |_| {}).is_ok());
    }

    /// A log much smaller than what is appended wraps many times (pads and skipped ends)
    /// when the redo point follows the forces; what is read back from the last redo point is
    /// exactly what was appended after it.
    #[test]
    fn a_wrapping_log_reads_back_from_its_redo_point() {
        for insert in [LogInsert::Aether, LogInsert::Consolidated] {
            wrapping_log_reads_back_from_its_redo_point(insert);
        }
    }

    fn wrapping_log_reads_back_from_its_redo_point(insert: LogInsert) {
        let capacity = 256 << 10;
        let (region, log) = log(capacity, insert);
        let mut from = 0;
        for round in 0..40u64 {
            from = log.appended();
            log.truncate(from);
            for i in 0..20 {
                log.append(round << 32 | i << 16, &payload(round, i % 6 + 1));
            }
            log.force(log.appended(), false).unwrap();
            assert!(!log.overflowed());
        }
        let mut got = Vec::new();
        let (end, records) = scan(&region, AREA, capacity, from, u64::MAX, |r| {
            got.push((r.offset, r.bytes.to_vec()))
        })
        .unwrap();
        assert_eq!(end, log.appended());
        assert_eq!(records, 20);
        let want: Vec<_> =
            (0..20u64).map(|i| (39u64 << 32 | i << 16, payload(39, i % 6 + 1))).collect();
        assert_eq!(got, want);
    }
}

/// Per-insert cost measurements for the contention model of docs/storage.md (not a test:
/// `cargo test --release -p nvmdb-engines insert_cost -- --ignored --nocapture`).
#[cfg(test)]
mod insert_cost {
    use super::*;
    use pmem::{Medium, RegionOptions};
    use std::sync::Arc;
    use std::time::Instant;

    const RECORDS: u64 = 1_000_000;

    fn logs(n: u64) -> (Region, Vec<Arc<Log>>) {
        let cap = 64u64 << 20;
        let region = Region::open(&RegionOptions::new(Medium::Dram, 4096 + n * cap)).unwrap();
        let device =
            Arc::new(crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap());
        let logs = (0..n)
            .map(|i| {
                let area = 4096 + i * cap;
                Arc::new(Log::new(device.clone(), area, cap, 0, 0, LogInsert::Aether))
            })
            .collect();
        (region, logs)
    }

    /// CPU time of this process (user + system), from /proc (10 ms ticks): on a shared,
    /// oversubscribed machine wall time measures the neighbours.
    fn cpu_ns() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) * 1e7
    }

    /// (wall ns, CPU ns) per insert of 64-byte stores by `threads` threads into `n` logs
    /// (thread t uses log t mod n; the redo point follows the forces so the logs never fill).
    fn ns_per_insert(threads: u64, n: u64) -> (f64, f64) {
        let (_region, logs) = logs(n);
        let (started, cpu) = (Instant::now(), cpu_ns());
        std::thread::scope(|s| {
            for t in 0..threads {
                let log = logs[(t % n) as usize].clone();
                s.spawn(move || {
                    let bytes = [t as u8; 64];
                    for i in 0..RECORDS {
                        log.append(i * 64 % (1 << 20), &bytes);
                        if i % 256 == 255 {
                            let end = log.appended();
                            log.force(end, false).unwrap();
                            log.truncate(log.forced());
                        }
                    }
                });
            }
        });
        let inserts = (RECORDS * threads) as f64;
        (started.elapsed().as_nanos() as f64 / inserts, (cpu_ns() - cpu) / inserts)
    }

    #[test]
    #[ignore]
    fn insert_cost() {
        for (threads, n) in [(1, 1), (2, 1), (2, 2)] {
            let (wall, cpu) = ns_per_insert(threads, n);
            println!("threads {threads} logs {n}: {wall:.0} ns wall, {cpu:.0} ns CPU per insert");
        }
    }
}

#[cfg(test)]
#[path = "log_wrap_tests.rs"]
mod wrap_tests;

//! The thread-safe persistent queues of thesis §7.1 (Fig. 7.1), over a `pmem` region: circular
//! buffers — a data segment of fixed 100-byte entries (§8.1), each padded to 64-byte alignment,
//! with a persistent head (where inserts go) and tail (where dequeues take) — critical sections
//! under MCS locks ([`crate::lock`]). Head and tail are byte counters that only grow; an entry
//! at counter `p` lives in slot `p mod capacity`, so the buffer wraps around.
//!
//! * *Copy While Locked* (CWL): under one lock, copy length + entry, persist barrier, advance
//!   the head. Recovery: every entry below the head.
//! * *Two-Lock Concurrent* (2LC): reserve space under a reserve lock (volatile head `headV` and
//!   the volatile insert list), copy outside any lock, then under an update lock remove the
//!   insert from the list; the oldest in-flight insert moves the persistent head over every
//!   completed insert behind it. Recovery as CWL.
//! * *Queue Holes* (QH): under one lock, persist length and a cleared end bit, barrier, advance
//!   the head; outside the lock copy the entry, barrier, set the end bit. Recovery: every entry
//!   below the head whose end bit is set; the others are holes.
//!
//! A persist barrier is a `fence` after the flushes it orders, so the same code is crash-safe
//! on real hardware and on `sim` and, traced, carries Fig. 7.1's annotations: `new_strand` where
//! Fig. 7.1 has NewStrand, and each PersistBarrier as a fence. 2LC's second barrier (before the
//! head) orders the update lock's hand-off before the head persist under epoch persistency; x86
//! needs no fence there (the first barrier completed before the hand-off), so it is recorded
//! with `strand_barrier` only. Acknowledgement is separate from insertion, as the thesis's
//! *persist sync*: [`Queue::sync`] returns once an insert is durable.
//!
//! Dequeue and wrap-around (Fig. 7.1 shows only inserts; the thesis's queues are circular
//! buffers with head and tail, §7.1): [`Queue::dequeue`], under its own lock, in a new strand,
//! reads tail and head, persists the head it read (barrier: the tail never persists past a
//! head that is not durable), takes the entry at the tail and advances the tail;
//! [`Queue::sync_dequeue`] acknowledges it. An insert that lands in a slot an earlier lap used
//! first reads the tail and persists it (barrier: the strand idiom of §7.2.3, "read what the
//! new persists must follow, then a persist barrier"), so the entry it overwrites is durably
//! dequeued before any byte of the new one can persist.
//!
//! Recovery invariant: the recovered entries are inserted entries, in insertion order, from the
//! tail to the head; they include every insert whose [`Queue::sync`] returned unless a dequeue
//! took it, and none whose dequeue [`Queue::sync_dequeue`] acknowledged (QH may leave holes).
//!
//! Region layout (all little-endian u64): line 0 the superblock (magic, version, design,
//! slots, checksum); line 1 the head, line 2 the tail (byte counters); from byte 192 the data
//! segment, one 128-byte slot per entry: length at +0, 100 entry bytes at +8, QH's end bit at
//! +112.
//!
//! Length: the code is about 784 lines, under the workspace's ~900; the other 141 are its unit
//! tests.

use crate::error::{invalid, Error, Result};
use crate::lock::McsLock;
use pmem::{Region, TraceKind};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Entry size of the thesis's experiments (§8.1).
pub const ENTRY_BYTES: usize = 100;
/// `sl`: the length prefix.
pub const LEN_BYTES: u64 = 8;
/// One entry with its length and end bit, padded to 64-byte alignment.
pub const SLOT_BYTES: u64 = 128;
/// QH's end bit within a slot.
pub const END_BIT_AT: u64 = 112;
pub const SUPER_OFFSET: u64 = 0;
pub const HEAD_OFFSET: u64 = 64;
pub const TAIL_OFFSET: u64 = 128;
pub const DATA_OFFSET: u64 = 192;
const MAGIC: u64 = u64::from_le_bytes(*b"NVMQUEUE");
/// 2: the tail (line 2) and wrap-around; head and tail are byte counters.
const VERSION: u64 = 2;
/// Most 2LC inserts reserved but not yet covered by the head (the insert list's bound): a fast
/// thread may complete many inserts while an older one is still copying. Reaching it makes
/// the reserving thread wait (up to `SYNC_PATIENCE`) for the head to catch up.
pub const MAX_IN_FLIGHT: u64 = 1024;
/// Ids of the stale entries `format` fills the data segment with (never inserted).
pub const STALE_ID_BASE: u64 = 1 << 63;
/// How long `sync` waits for older 2LC inserts to move the head past its own.
const SYNC_PATIENCE: Duration = Duration::from_secs(30);

const _: () = assert!(LEN_BYTES + ENTRY_BYTES as u64 <= END_BIT_AT);
const _: () = assert!(END_BIT_AT + 8 <= SLOT_BYTES && SLOT_BYTES.is_multiple_of(64));
const _: () = assert!(DATA_OFFSET.is_multiple_of(64) && HEAD_OFFSET.is_multiple_of(64));
const _: () = assert!(TAIL_OFFSET.is_multiple_of(64) && TAIL_OFFSET + 64 <= DATA_OFFSET);

/// The three designs of Fig. 7.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum Design {
    #[serde(rename = "cwl")]
    CopyWhileLocked,
    #[serde(rename = "2lc")]
    TwoLockConcurrent,
    #[serde(rename = "qh")]
    QueueHoles,
}

impl Design {
    pub const ALL: [Design; 3] =
        [Design::CopyWhileLocked, Design::TwoLockConcurrent, Design::QueueHoles];

    pub fn name(self) -> &'static str {
        match self {
            Design::CopyWhileLocked => "cwl",
            Design::TwoLockConcurrent => "2lc",
            Design::QueueHoles => "qh",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Design::CopyWhileLocked => "Copy While Locked",
            Design::TwoLockConcurrent => "Two-Lock Concurrent",
            Design::QueueHoles => "Queue Holes",
        }
    }

    pub fn parse(s: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.name().eq_ignore_ascii_case(s))
    }

    fn code(self) -> u64 {
        match self {
            Design::CopyWhileLocked => 1,
            Design::TwoLockConcurrent => 2,
            Design::QueueHoles => 3,
        }
    }
}

/// Test-only faults: each drops one persist barrier, so that a test can show the crash test
/// catches it (docs/design.md §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fault {
    /// CWL: no barrier between the entry and the head.
    CwlSkipDataBarrier,
    /// 2LC: no barrier between the entry and its removal from the insert list.
    TwoLockSkipDataBarrier,
    /// QH: no barrier between length / cleared end bit and the head.
    HolesSkipHeadBarrier,
    /// QH: no barrier between the entry and its end bit.
    HolesSkipEndBarrier,
    /// CWL: an insert into a slot an earlier lap used does not first persist the tail that
    /// freed it (the wrap-around barrier).
    CwlSkipTailBarrier,
    /// 2LC: the same wrap-around barrier dropped (before the entry's copy into its slot).
    /// QH has no such fault: its insert's first stores clear the slot's end bit (a hole,
    /// never read as an entry) and its head barrier completes the dequeue's tail flush before
    /// any entry byte or end bit 1 is stored, so dropping its wrap-around barrier breaks
    /// nothing a crash can show (tried: 300 crashes at 1 and 2 threads, none caught).
    TwoLockSkipTailBarrier,
}

impl Fault {
    pub const ALL: [Fault; 6] = [
        Fault::CwlSkipDataBarrier,
        Fault::TwoLockSkipDataBarrier,
        Fault::HolesSkipHeadBarrier,
        Fault::HolesSkipEndBarrier,
        Fault::CwlSkipTailBarrier,
        Fault::TwoLockSkipTailBarrier,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::CwlSkipDataBarrier => "cwl-skip-data-barrier",
            Fault::TwoLockSkipDataBarrier => "2lc-skip-data-barrier",
            Fault::HolesSkipHeadBarrier => "qh-skip-head-barrier",
            Fault::HolesSkipEndBarrier => "qh-skip-end-barrier",
            Fault::CwlSkipTailBarrier => "cwl-skip-tail-barrier",
            Fault::TwoLockSkipTailBarrier => "2lc-skip-tail-barrier",
        }
    }

    pub fn parse(s: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(s))
    }

    pub fn design(self) -> Design {
        match self {
            Fault::CwlSkipDataBarrier | Fault::CwlSkipTailBarrier => Design::CopyWhileLocked,
            Fault::TwoLockSkipDataBarrier | Fault::TwoLockSkipTailBarrier => {
                Design::TwoLockConcurrent
            }
            Fault::HolesSkipHeadBarrier | Fault::HolesSkipEndBarrier => Design::QueueHoles,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct QueueOptions {
    pub fault: Option<Fault>,
    /// `format` fills every slot with a stale, valid-looking entry (as a reused circular buffer
    /// holds), so that a missing barrier shows up as a phantom entry, not as zeros.
    pub stale_fill: bool,
}

/// Where an insert went: byte counters `[start, end)` (slot `start / SLOT_BYTES mod slots`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    pub start: u64,
    pub end: u64,
}

/// What a dequeue took: the entry that was at counter `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dequeued {
    pub start: u64,
    pub entry: [u8; ENTRY_BYTES],
}

/// A line-aligned value, so that no two hot words share a cache line (64-byte padding, §8.1).
#[repr(align(64))]
#[derive(Default)]
struct Padded<T>(T);

fn addr<T>(x: &T) -> u64 {
    x as *const T as u64
}

/// 2LC's volatile insert list: a ring of in-flight inserts by reservation number. `append`
/// runs under the reserve lock, `remove` under the update lock; they share only atomics.
struct InsertList {
    slots: Box<[Padded<ListSlot>]>,
    /// Next reservation number (reserve lock).
    next: Padded<AtomicU64>,
    /// The reservers' last view of `oldest` (reserve lock): `oldest` itself is read only when
    /// this view says the ring may be full, so a reservation does not routinely read a word
    /// the update lock's holder writes (which would order every copy after the previous
    /// insert's removal, a dependence Fig. 7.1's 2LC does not have).
    oldest_seen: Padded<AtomicU64>,
    /// Oldest reservation not yet covered by the head (update lock).
    oldest: Padded<AtomicU64>,
}

#[derive(Default)]
struct ListSlot {
    end: AtomicU64,
    /// `seq + 1` once insert `seq` completed its copy.
    done: AtomicU64,
}

impl InsertList {
    fn new(first: u64) -> InsertList {
        InsertList {
            slots: (0..MAX_IN_FLIGHT).map(|_| Padded::default()).collect(),
            next: Padded(AtomicU64::new(first)),
            oldest_seen: Padded(AtomicU64::new(first)),
            oldest: Padded(AtomicU64::new(first)),
        }
    }

    fn slot(&self, seq: u64) -> &ListSlot {
        &self.slots[(seq % MAX_IN_FLIGHT) as usize].0
    }

    /// Appends an insert ending at `end`; under the reserve lock.
    fn append(&self, r: &Region, end: u64) -> Result<u64> {
        let next = &self.next.0;
        let seq = r.trace_volatile(TraceKind::VolatileLoad, addr(next), 8, || {
            next.load(Ordering::Relaxed)
        });
        let seen = &self.oldest_seen.0;
        let mut oldest = r.trace_volatile(TraceKind::VolatileLoad, addr(seen), 8, || {
            seen.load(Ordering::Relaxed)
        });
        if seq - oldest >= MAX_IN_FLIGHT {
            let current = &self.oldest.0;
            oldest = r.trace_volatile(TraceKind::VolatileLoad, addr(current), 8, || {
                current.load(Ordering::Acquire)
            });
            r.trace_volatile(TraceKind::VolatileStore, addr(seen), 8, || {
                seen.store(oldest, Ordering::Relaxed)
            });
            if seq - oldest >= MAX_IN_FLIGHT {
                return Err(Error::TooManyInFlight { limit: MAX_IN_FLIGHT });
            }
        }
        // Only `end`: `done` carries the number it completes, so a stale `done` from an earlier
        // lap never matches, and the appender need not write the word the remover probes (a
        // write there would order this insert's copy after the previous removal's probe).
        let slot = self.slot(seq);
        r.trace_volatile(TraceKind::VolatileStore, addr(&slot.end), 8, || {
            slot.end.store(end, Ordering::Release)
        });
        r.trace_volatile(TraceKind::VolatileStore, addr(next), 8, || {
            next.store(seq + 1, Ordering::Relaxed)
        });
        Ok(seq)
    }

    /// Marks `seq` complete; under the update lock. If it was the oldest, returns the new head:
    /// the end of the longest run of completed inserts from it.
    fn remove(&self, r: &Region, seq: u64) -> Option<u64> {
        let slot = self.slot(seq);
        r.trace_volatile(TraceKind::VolatileStore, addr(&slot.done), 8, || {
            slot.done.store(seq + 1, Ordering::Release)
        });
        let oldest = &self.oldest.0;
        let mut o = r.trace_volatile(TraceKind::VolatileLoad, addr(oldest), 8, || {
            oldest.load(Ordering::Relaxed)
        });
        if o != seq {
            return None;
        }
        let mut head = 0;
        for _ in 0..MAX_IN_FLIGHT {
            let s = self.slot(o);
            let done = r.trace_volatile(TraceKind::VolatileLoad, addr(&s.done), 8, || {
                s.done.load(Ordering::Acquire)
            });
            if done != o + 1 {
                break;
            }
            head = r.trace_volatile(TraceKind::VolatileLoad, addr(&s.end), 8, || {
                s.end.load(Ordering::Relaxed)
            });
            o += 1;
        }
        r.trace_volatile(TraceKind::VolatileStore, addr(oldest), 8, || {
            oldest.store(o, Ordering::Release)
        });
        Some(head)
    }
}

/// A persistent queue on a region.
pub struct Queue {
    region: Region,
    design: Design,
    options: QueueOptions,
    slots: u64,
    /// CWL's and QH's queue lock; 2LC's reserve lock.
    lock: McsLock,
    /// 2LC's update lock.
    update_lock: McsLock,
    /// Every design's dequeue lock (dequeues never take an insert lock).
    dequeue_lock: McsLock,
    /// QH: the head recovery found; holes below it are left by a crash and never fill, so a
    /// dequeue passes them (above it, a clear end bit is an insert still copying).
    holes_below: u64,
    /// 2LC's volatile head `headV` (bytes reserved).
    reserved: Padded<AtomicU64>,
    /// The last head value written (not part of the algorithm, so not traced: `sync` waits on
    /// it for older 2LC inserts).
    published: Padded<AtomicU64>,
    list: InsertList,
}

/// What recovery found.
#[derive(Clone, Debug)]
pub struct Recovered {
    pub design: Design,
    pub slots: u64,
    /// The persistent head and tail (byte counters): the queue is `[tail, head)`.
    pub head: u64,
    pub tail: u64,
    /// `(start, entry)` in queue order (`start` a byte counter).
    pub entries: Vec<(u64, [u8; ENTRY_BYTES])>,
    /// QH slots below the head whose end bit was clear.
    pub holes: u64,
}

fn checksum(design: u64, slots: u64) -> u64 {
    // Not cryptographic: catches a torn or stray superblock, which is all it is for.
    let mut x = MAGIC ^ VERSION.rotate_left(17) ^ design.rotate_left(31) ^ slots.rotate_left(47);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The entry a test or benchmark inserts as number `id`: the id, then bytes derived from it,
/// so any torn, stale or misplaced entry is recognisable.
pub fn payload_for(id: u64) -> [u8; ENTRY_BYTES] {
    let mut p = [0u8; ENTRY_BYTES];
    p[..8].copy_from_slice(&id.to_le_bytes());
    let mut x = id;
    for chunk in p[8..].chunks_mut(8) {
        let v = splitmix(&mut x).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    p
}

/// The id of an entry made by [`payload_for`], if it is one, intact.
pub fn id_of(entry: &[u8; ENTRY_BYTES]) -> Option<u64> {
    let id = u64::from_le_bytes(entry[..8].try_into().expect("8 bytes"));
    (payload_for(id) == *entry).then_some(id)
}

impl Queue {
    /// Formats `region` as an empty queue of `design` and opens it.
    pub fn format(region: Region, design: Design, options: QueueOptions) -> Result<Queue> {
        if let Some(f) = options.fault {
            if f.design() != design {
                return Err(invalid(
                    "fault",
                    format!("{} is not a {} fault", f.name(), design.name()),
                ));
            }
        }
        let len = region.len();
        if len < DATA_OFFSET + SLOT_BYTES {
            return Err(invalid("region size", format!("{len} bytes holds no entry")));
        }
        let slots = (len - DATA_OFFSET) / SLOT_BYTES;
        // Unformat first, so a crash while formatting leaves no valid-looking queue.
        region.write_u64(SUPER_OFFSET, 0);
        region.persist(SUPER_OFFSET, 8);
        if options.stale_fill {
            const CHUNK: u64 = 4096;
            let mut buf = vec![0u8; (CHUNK * SLOT_BYTES) as usize];
            for first in (0..slots).step_by(CHUNK as usize) {
                let n = CHUNK.min(slots - first);
                for (k, slot) in buf.chunks_mut(SLOT_BYTES as usize).take(n as usize).enumerate() {
                    slot.fill(0);
                    slot[..8].copy_from_slice(&(ENTRY_BYTES as u64).to_le_bytes());
                    let stale = payload_for(STALE_ID_BASE + first + k as u64);
                    slot[8..8 + ENTRY_BYTES].copy_from_slice(&stale);
                    slot[END_BIT_AT as usize..][..8].copy_from_slice(&1u64.to_le_bytes());
                }
                let at = DATA_OFFSET + first * SLOT_BYTES;
                region.write(at, &buf[..(n * SLOT_BYTES) as usize]);
                region.flush(at, n * SLOT_BYTES);
            }
        }
        region.write_u64(HEAD_OFFSET, 0);
        region.flush(HEAD_OFFSET, 8);
        region.write_u64(TAIL_OFFSET, 0);
        region.flush(TAIL_OFFSET, 8);
        region.fence();
        let mut sb = [0u8; 40];
        for (i, v) in [MAGIC, VERSION, design.code(), slots, checksum(design.code(), slots)]
            .into_iter()
            .enumerate()
        {
            sb[i * 8..][..8].copy_from_slice(&v.to_le_bytes());
        }
        region.write(SUPER_OFFSET + 8, &sb[8..]);
        region.persist(SUPER_OFFSET + 8, 32);
        region.write_u64(SUPER_OFFSET, MAGIC);
        region.persist(SUPER_OFFSET, 8);
        Queue::open(region, options)
    }

    /// Opens a formatted queue (recovery is read-only: head, tail and, for QH, the end bits say
    /// everything; new inserts continue after the head, dequeues from the tail).
    pub fn open(region: Region, options: QueueOptions) -> Result<Queue> {
        let (design, slots) = superblock(&region)?;
        let (_, head) = read_ends(&region, slots)?;
        Ok(Queue {
            region,
            design,
            options,
            slots,
            lock: McsLock::new(),
            update_lock: McsLock::new(),
            dequeue_lock: McsLock::new(),
            holes_below: head,
            reserved: Padded(AtomicU64::new(head)),
            published: Padded(AtomicU64::new(head)),
            list: InsertList::new(0),
        })
    }

    pub fn design(&self) -> Design {
        self.design
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Entries the data segment holds.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    fn capacity_bytes(&self) -> u64 {
        self.slots * SLOT_BYTES
    }

    /// Region offset of the slot of byte counter `pos`.
    fn slot_at(&self, pos: u64) -> u64 {
        DATA_OFFSET + pos % self.capacity_bytes()
    }

    /// Whether an insert at `start` fits behind the tail; reads the persistent tail.
    fn fits(&self, start: u64) -> bool {
        let tail = self.region.read_u64(TAIL_OFFSET);
        start + SLOT_BYTES - tail.min(start) <= self.capacity_bytes()
    }

    /// Before the first store into a slot an earlier lap used: persist the tail that freed it,
    /// so that the old entry is durably dequeued before any byte of the new one persists (else
    /// a crash could recover the new bytes at the old entry's place). In a new strand this is
    /// §7.2.3's idiom: load what the new persists must follow, then a persist barrier.
    fn order_after_tail(&self, start: u64) {
        let skipped = matches!(
            self.options.fault,
            Some(Fault::CwlSkipTailBarrier | Fault::TwoLockSkipTailBarrier)
        );
        if start < self.capacity_bytes() || skipped {
            return;
        }
        let r = &self.region;
        let _ = r.read_u64(TAIL_OFFSET);
        r.flush(TAIL_OFFSET, 8);
        r.fence();
    }

    fn skips(&self, fault: Fault) -> bool {
        self.options.fault == Some(fault)
    }

    /// A persist barrier: a fence (completing this thread's flushes) unless a test-only
    /// fault drops this one.
    fn barrier(&self, dropped_by: Fault) {
        if !self.skips(dropped_by) {
            self.region.fence();
        }
    }

    /// Inserts one 100-byte entry. Not yet durable: [`Queue::sync`] acknowledges it.
    pub fn insert(&self, entry: &[u8; ENTRY_BYTES]) -> Result<Ticket> {
        match self.design {
            Design::CopyWhileLocked => self.insert_cwl(entry),
            Design::TwoLockConcurrent => self.insert_2lc(entry),
            Design::QueueHoles => self.insert_qh(entry),
        }
    }

    fn record(entry: &[u8; ENTRY_BYTES]) -> [u8; LEN_BYTES as usize + ENTRY_BYTES] {
        let mut rec = [0u8; LEN_BYTES as usize + ENTRY_BYTES];
        rec[..8].copy_from_slice(&(ENTRY_BYTES as u64).to_le_bytes());
        rec[8..].copy_from_slice(entry);
        rec
    }

    fn publish(&self, head: u64) {
        self.published.0.fetch_max(head, Ordering::Release);
    }

    /// Fig. 7.1, INSERTCWL.
    fn insert_cwl(&self, entry: &[u8; ENTRY_BYTES]) -> Result<Ticket> {
        let r = &self.region;
        self.lock.with(r, || {
            r.new_strand();
            let start = r.read_u64(HEAD_OFFSET);
            if !self.fits(start) {
                return Err(Error::Full { slots: self.slots });
            }
            self.order_after_tail(start);
            let at = self.slot_at(start);
            let rec = Queue::record(entry);
            r.write(at, &rec);
            r.flush(at, rec.len() as u64);
            self.barrier(Fault::CwlSkipDataBarrier);
            let end = start + SLOT_BYTES;
            r.write_u64(HEAD_OFFSET, end);
            r.flush(HEAD_OFFSET, 8);
            self.publish(end);
            Ok(Ticket { start, end })
        })
    }

    /// Fig. 7.1, INSERT2LC, with the head written while the update lock is held (so two
    /// "oldest" inserts cannot write it out of order) and a barrier after the copy.
    fn insert_2lc(&self, entry: &[u8; ENTRY_BYTES]) -> Result<Ticket> {
        let r = &self.region;
        let deadline = Instant::now() + SYNC_PATIENCE;
        let (start, seq) = loop {
            match self.reserve_2lc() {
                Err(Error::TooManyInFlight { .. }) if Instant::now() < deadline => {
                    std::thread::yield_now()
                }
                other => break other?,
            }
        };
        r.new_strand();
        self.order_after_tail(start);
        let at = self.slot_at(start);
        let rec = Queue::record(entry);
        r.write(at, &rec);
        r.flush(at, rec.len() as u64);
        self.barrier(Fault::TwoLockSkipDataBarrier);
        self.update_lock.with(r, || {
            if let Some(head) = self.list.remove(r, seq) {
                r.strand_barrier();
                r.write_u64(HEAD_OFFSET, head);
                r.flush(HEAD_OFFSET, 8);
                self.publish(head);
            }
        });
        Ok(Ticket { start, end: start + SLOT_BYTES })
    }

    /// 2LC's reservation under the reserve lock: `(start, insert-list number)`.
    fn reserve_2lc(&self) -> Result<(u64, u64)> {
        let r = &self.region;
        let reserved = &self.reserved.0;
        self.lock.with(r, || {
            let start = r.trace_volatile(TraceKind::VolatileLoad, addr(reserved), 8, || {
                reserved.load(Ordering::Relaxed)
            });
            if !self.fits(start) {
                return Err(Error::Full { slots: self.slots });
            }
            let seq = self.list.append(r, start + SLOT_BYTES)?;
            r.trace_volatile(TraceKind::VolatileStore, addr(reserved), 8, || {
                reserved.store(start + SLOT_BYTES, Ordering::Relaxed)
            });
            Ok((start, seq))
        })
    }

    /// Fig. 7.1, INSERTQH.
    fn insert_qh(&self, entry: &[u8; ENTRY_BYTES]) -> Result<Ticket> {
        let r = &self.region;
        let start = self.lock.with(r, || {
            r.new_strand();
            let start = r.read_u64(HEAD_OFFSET);
            if !self.fits(start) {
                return Err(Error::Full { slots: self.slots });
            }
            self.order_after_tail(start);
            let at = self.slot_at(start);
            r.write_u64(at, ENTRY_BYTES as u64);
            r.write_u64(at + END_BIT_AT, 0);
            r.flush(at, 8);
            r.flush(at + END_BIT_AT, 8);
            self.barrier(Fault::HolesSkipHeadBarrier);
            r.write_u64(HEAD_OFFSET, start + SLOT_BYTES);
            r.flush(HEAD_OFFSET, 8);
            self.publish(start + SLOT_BYTES);
            Ok(start)
        })?;
        let at = self.slot_at(start);
        r.write(at + LEN_BYTES, entry);
        r.flush(at + LEN_BYTES, ENTRY_BYTES as u64);
        self.barrier(Fault::HolesSkipEndBarrier);
        r.write_u64(at + END_BIT_AT, 1);
        r.flush(at + END_BIT_AT, 8);
        Ok(Ticket { start, end: start + SLOT_BYTES })
    }

    /// The thesis's *persist sync* for one insert: returns once it is durable. In 2LC that
    /// waits for the older inserts still copying to move the head past it.
    pub fn sync(&self, ticket: &Ticket) -> Result<()> {
        let deadline = Instant::now() + SYNC_PATIENCE;
        while self.published.0.load(Ordering::Acquire) < ticket.end {
            if Instant::now() > deadline {
                return Err(Error::Corrupt(format!(
                    "the head did not reach {} within {SYNC_PATIENCE:?}: an older insert stalled",
                    ticket.end
                )));
            }
            std::thread::yield_now();
        }
        self.region.flush(HEAD_OFFSET, 8);
        self.region.fence();
        Ok(())
    }

    /// Takes the oldest entry, or `None` when the queue is empty (or, in QH, when the oldest
    /// insert is still copying: FIFO order waits for it). Not yet durable:
    /// [`Queue::sync_dequeue`] acknowledges it.
    pub fn dequeue(&self) -> Result<Option<Dequeued>> {
        let r = &self.region;
        self.dequeue_lock.with(r, || {
            r.new_strand();
            let mut tail = r.read_u64(TAIL_OFFSET);
            let head = r.read_u64(HEAD_OFFSET);
            if tail > head
                || head - tail > self.capacity_bytes()
                || !tail.is_multiple_of(SLOT_BYTES)
            {
                return Err(Error::Corrupt(format!("tail {tail} and head {head} disagree")));
            }
            loop {
                if tail == head {
                    return Ok(None);
                }
                if self.design != Design::QueueHoles {
                    break;
                }
                match r.read_u64(self.slot_at(tail) + END_BIT_AT) {
                    1 => break,
                    0 if tail < self.holes_below => tail += SLOT_BYTES,
                    _ => return Ok(None),
                }
            }
            // The tail must never persist past a head that is not durable (recovery would
            // find tail > head): persist the head this dequeue read first.
            r.flush(HEAD_OFFSET, 8);
            r.fence();
            let at = self.slot_at(tail);
            let entry: [u8; ENTRY_BYTES] = r
                .read(at + LEN_BYTES, ENTRY_BYTES)
                .try_into()
                .map_err(|_| Error::Corrupt(format!("entry at {tail} is not readable")))?;
            r.write_u64(TAIL_OFFSET, tail + SLOT_BYTES);
            r.flush(TAIL_OFFSET, 8);
            Ok(Some(Dequeued { start: tail, entry }))
        })
    }

    /// Acknowledges every dequeue this thread made: returns once their tail is durable.
    pub fn sync_dequeue(&self) {
        self.region.flush(TAIL_OFFSET, 8);
        self.region.fence();
    }

    /// Forgets every entry (benchmark rounds reuse one region): the head goes back to 0.
    /// Not thread-safe with inserts.
    pub fn reset(&mut self) {
        self.region.write_u64(HEAD_OFFSET, 0);
        self.region.write_u64(TAIL_OFFSET, 0);
        self.region.flush(HEAD_OFFSET, 8);
        self.region.persist(TAIL_OFFSET, 8);
        self.holes_below = 0;
        self.reserved.0.store(0, Ordering::Relaxed);
        self.published.0.store(0, Ordering::Relaxed);
        self.list = InsertList::new(0);
    }
}

fn superblock(region: &Region) -> Result<(Design, u64)> {
    if region.len() < DATA_OFFSET {
        return Err(Error::Corrupt(format!("{} bytes is too small for a queue", region.len())));
    }
    let word = |i: u64| region.read_u64(SUPER_OFFSET + 8 * i);
    if word(0) != MAGIC {
        return Err(Error::Corrupt("no queue superblock (not formatted?)".into()));
    }
    if word(1) != VERSION {
        return Err(Error::Corrupt(format!("format version {} (expected {VERSION})", word(1))));
    }
    let (code, slots) = (word(2), word(3));
    if word(4) != checksum(code, slots) {
        return Err(Error::Corrupt("superblock checksum mismatch".into()));
    }
    let design = Design::ALL
        .into_iter()
        .find(|d| d.code() == code)
        .ok_or_else(|| Error::Corrupt(format!("unknown design code {code}")))?;
    if slots == 0 || slots > (region.len() - DATA_OFFSET) / SLOT_BYTES {
        return Err(Error::Corrupt(format!("{slots} slots do not fit the region")));
    }
    Ok((design, slots))
}

/// `(tail, head)`, checked: slot boundaries, the tail not past the head, at most a full queue
/// between them.
fn read_ends(region: &Region, slots: u64) -> Result<(u64, u64)> {
    let head = region.read_u64(HEAD_OFFSET);
    let tail = region.read_u64(TAIL_OFFSET);
    if !head.is_multiple_of(SLOT_BYTES) || !tail.is_multiple_of(SLOT_BYTES) {
        return Err(Error::Corrupt(format!("head {head} or tail {tail} is not a slot boundary")));
    }
    if tail > head || head - tail > slots * SLOT_BYTES {
        return Err(Error::Corrupt(format!(
            "tail {tail} and head {head} do not bound at most {slots} entries"
        )));
    }
    Ok((tail, head))
}

/// Recovery (§7.1): reads the entries a crash left, in queue order, without writing.
pub fn recover(region: &Region) -> Result<Recovered> {
    let (design, slots) = superblock(region)?;
    let (tail, head) = read_ends(region, slots)?;
    let mut entries = Vec::new();
    let mut holes = 0;
    for start in (tail..head).step_by(SLOT_BYTES as usize) {
        let at = DATA_OFFSET + start % (slots * SLOT_BYTES);
        let len = region.read_u64(at);
        if len != ENTRY_BYTES as u64 {
            return Err(Error::Corrupt(format!("entry at {start}: length {len} below the head")));
        }
        if design == Design::QueueHoles {
            match region.read_u64(at + END_BIT_AT) {
                1 => {}
                0 => {
                    holes += 1;
                    continue;
                }
                bit => return Err(Error::Corrupt(format!("entry at {start}: end bit {bit}"))),
            }
        }
        let entry: [u8; ENTRY_BYTES] =
            region.read(at + LEN_BYTES, ENTRY_BYTES).try_into().expect("ENTRY_BYTES long");
        entries.push((start, entry));
    }
    Ok(Recovered { design, slots, head, tail, entries, holes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};

    fn region(slots: u64) -> Region {
        Region::open(&RegionOptions::new(Medium::Sim, DATA_OFFSET + slots * SLOT_BYTES)).unwrap()
    }

    #[test]
    fn insert_then_recover_every_design() {
        for design in Design::ALL {
            let q = Queue::format(
                region(16),
                design,
                QueueOptions { stale_fill: true, ..Default::default() },
            )
            .unwrap();
            for id in 0..10 {
                let t = q.insert(&payload_for(id)).unwrap();
                assert_eq!(t.start, id * SLOT_BYTES);
                q.sync(&t).unwrap();
            }
            let image = q.region().crash_image(pmem::CrashPolicy::Persisted, 1).unwrap();
            let back = Region::from_image(&image, &RegionOptions::new(Medium::Sim, 0)).unwrap();
            let rec = recover(&back).unwrap();
            let ids: Vec<u64> = rec.entries.iter().map(|(_, e)| id_of(e).unwrap()).collect();
            assert_eq!(ids, (0..10).collect::<Vec<_>>(), "{design:?}");
            // The queue continues after the recovered head.
            let q = Queue::open(back, QueueOptions::default()).unwrap();
            assert_eq!(q.insert(&payload_for(10)).unwrap().start, 10 * SLOT_BYTES);
        }
    }

    #[test]
    fn a_full_queue_is_an_error_not_a_panic() {
        for design in Design::ALL {
            let q = Queue::format(region(2), design, QueueOptions::default()).unwrap();
            let slots = q.slots();
            for id in 0..slots {
                q.insert(&payload_for(id)).unwrap();
            }
            assert!(matches!(q.insert(&payload_for(slots)), Err(Error::Full { .. })));
        }
    }

    #[test]
    fn damaged_superblock_and_head_are_corrupt() {
        let q = Queue::format(region(4), Design::QueueHoles, QueueOptions::default()).unwrap();
        let r = q.region().clone();
        r.write_u64(HEAD_OFFSET, 7);
        assert!(matches!(recover(&r), Err(Error::Corrupt(_))));
        r.write_u64(HEAD_OFFSET, 0);
        r.write_u64(SUPER_OFFSET + 24, 1 << 40);
        assert!(matches!(recover(&r), Err(Error::Corrupt(_))));
        let blank = region(4);
        assert!(matches!(recover(&blank), Err(Error::Corrupt(_))));
    }

    /// Guards dequeue and wrap-around: FIFO across many laps of a 3-slot buffer, full and
    /// empty as handled outcomes, and recovery of `[tail, head)` after the wrap.
    #[test]
    fn dequeue_wraps_around_in_fifo_order_every_design() {
        for design in Design::ALL {
            let q = Queue::format(region(3), design, QueueOptions::default()).unwrap();
            assert_eq!(q.dequeue().unwrap(), None, "{design:?}: empty");
            let (mut next_in, mut next_out) = (0u64, 0u64);
            while next_out < 20 {
                while next_in < 20 {
                    match q.insert(&payload_for(next_in)) {
                        Ok(t) => {
                            q.sync(&t).unwrap();
                            next_in += 1;
                        }
                        Err(Error::Full { .. }) => break,
                        Err(e) => panic!("{design:?}: {e}"),
                    }
                }
                let d = q.dequeue().unwrap().expect("entries queued");
                q.sync_dequeue();
                assert_eq!(id_of(&d.entry), Some(next_out), "{design:?}");
                assert_eq!(d.start, next_out * SLOT_BYTES);
                next_out += 1;
                if next_out == 15 {
                    // Recovery mid-run: the queue is exactly the entries not yet dequeued.
                    let image = q.region().crash_image(pmem::CrashPolicy::Persisted, 1).unwrap();
                    let opts = RegionOptions::new(Medium::Sim, 0);
                    let rec = recover(&Region::from_image(&image, &opts).unwrap()).unwrap();
                    let ids: Vec<u64> =
                        rec.entries.iter().map(|(_, e)| id_of(e).unwrap()).collect();
                    assert_eq!(ids, (15..next_in).collect::<Vec<_>>(), "{design:?}");
                    assert_eq!((rec.tail, rec.head), (15 * SLOT_BYTES, next_in * SLOT_BYTES));
                }
            }
            assert_eq!(q.dequeue().unwrap(), None, "{design:?}: drained");
        }
    }

    /// Guards QH after a crash: a hole below the recovered head never fills, so dequeues pass
    /// it instead of waiting for it forever.
    #[test]
    fn queue_holes_dequeue_passes_a_recovered_hole() {
        let q = Queue::format(region(4), Design::QueueHoles, QueueOptions::default()).unwrap();
        for id in 0..3 {
            q.sync(&q.insert(&payload_for(id)).unwrap()).unwrap();
        }
        // A crash mid-copy of entry 1: its end bit clear below the head.
        q.region().write_u64(DATA_OFFSET + SLOT_BYTES + END_BIT_AT, 0);
        q.region().persist(DATA_OFFSET + SLOT_BYTES + END_BIT_AT, 8);
        let image = q.region().crash_image(pmem::CrashPolicy::Persisted, 1).unwrap();
        let back = Region::from_image(&image, &RegionOptions::new(Medium::Sim, 0)).unwrap();
        assert_eq!(recover(&back).unwrap().holes, 1);
        let q = Queue::open(back, QueueOptions::default()).unwrap();
        let ids: Vec<Option<u64>> =
            std::iter::from_fn(|| q.dequeue().unwrap()).map(|d| id_of(&d.entry)).collect();
        assert_eq!(ids, vec![Some(0), Some(2)]);
    }

    #[test]
    fn damaged_tail_is_corrupt() {
        let q = Queue::format(region(4), Design::CopyWhileLocked, QueueOptions::default()).unwrap();
        q.sync(&q.insert(&payload_for(0)).unwrap()).unwrap();
        let r = q.region().clone();
        r.write_u64(TAIL_OFFSET, 2 * SLOT_BYTES);
        assert!(matches!(recover(&r), Err(Error::Corrupt(_))), "tail past head");
        assert!(matches!(q.dequeue(), Err(Error::Corrupt(_))));
        r.write_u64(TAIL_OFFSET, 3);
        assert!(matches!(recover(&r), Err(Error::Corrupt(_))), "not a slot boundary");
        r.write_u64(TAIL_OFFSET, 0);
        r.write_u64(HEAD_OFFSET, 5 * SLOT_BYTES);
        assert!(matches!(recover(&r), Err(Error::Corrupt(_))), "more than the slots");
    }

    #[test]
    fn payloads_identify_themselves() {
        let p = payload_for(42);
        assert_eq!(id_of(&p), Some(42));
        let mut q = p;
        q[50] ^= 1;
        assert_eq!(id_of(&q), None);
    }
}

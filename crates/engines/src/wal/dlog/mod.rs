//! Distributed logging with passive group commit — Wang & Johnson, *Scalable Logging through
//! Emerging Non-Volatile Memory*, VLDB 2014, §3 (log space partitioning, GSN, recovery) and §4
//! (passive group commit, durable caches). One of `wal`'s two log managers
//! ([`super::manager::LogManager`]): `log=txn:N` and `log=page:N`; `log=central` (the default) is
//! [`super::manager::Central`], one [`Log`].
//!
//! **Layout.** `N` logs share the `log_bytes` budget: log `i` is the `i`-th slice of
//! `log_bytes / N` (rounded down to 8 KiB) of the log area, each one [`Log`] (circular,
//! `persist_wal`, Aether-style insertion). Partitioning: `txn` — a worker inserts into log
//! `worker mod N` (Shore-MT's "log of its core"; here its worker slot); `page` — a store goes to
//! log `page mod N` (a captured store is split at 8 KiB page boundaries, so every page's records
//! live in one log). The control page records kind, `N`, the cache mode and the per-log capacity
//! (checksummed), each log's redo point, and the *GSN horizon* `H` (see below).
//!
//! **Validated, crash-atomic control fields.** `H` and the redo points decide which records
//! recovery reads, so a damaged one would silently skip records: both are checked on open and
//! damage is `Corrupt`. `H` is persisted by the daemon many times a second, so its update must
//! cost one 8-byte store and one persist: it is a single aligned word, `H` in 48 bits and 16
//! check bits of a crc32c above (GSNs are bounded by [`MAX_GSN`]; past it the log fails).
//! Eight aligned bytes are what the hardware persists atomically (the `torn` crash policy tears
//! between words, never inside one), so an update leaves the old word or the new one, never a
//! mix, and any mismatch is damage. Two alternating slots with a sequence number were rejected
//! for `H`: a damaged newest slot would look exactly like a torn one and recovery would fall
//! back to the older `H`, silently dropping acknowledged commits. The redo points (one word per
//! log, moved only by checkpoints) are kept in two *mirrored* copies `[seq][points][crc]`: a
//! checkpoint writes copy 0 and persists it, then copy 1, and truncates the logs only after
//! both; on open the valid copy with the higher `seq` wins. A crash tears at most the copy being
//! written, whose twin holds a consistent set (the old one, whose records are still in the
//! logs, or the new one); damage to one persisted copy leaves its identical twin; only both
//! damaged is `Corrupt`.
//!
//! **GSNs (§3.1).** Every record carries a GSN beside its LSN (its position in its log). Per
//! page (an `AtomicU64` per buffer-pool page) and per worker slot, a store by slot `T` to page
//! `P` gets `gsn = max(T, P, floor) + 1` and advances both: §3.1's rule ("inserting a log
//! record will set both transaction and page GSNs to max(tx GSN, page GSN) + 1"), with no
//! counter shared by all records. The paper's log GSN (`max(tx, page, log)`, set *after* the
//! record's GSN is chosen, never an input to it) is not kept (issue 35): it cost one shared
//! atomic maximum per record on `page:N`, where every worker inserts into every log, and
//! nothing needs it. Recovery takes each log's highest GSN from its records; `min_dgsn` and
//! the horizon read only the slots' `dgsn` and GSNs and the floor, and a round's `H` is the
//! highest slot GSN or the floor (a record's GSN is its slot's when taken); the per-log redo
//! replays log order, which is store order for the bytes a record writes (below) whatever the
//! GSNs of other pages' records in that log; the page buckets are sorted by GSN, unique per
//! page (the page word's CAS). Records of one log may thus share a GSN (other pages, other
//! slots): nothing identifies a record by (log, GSN). The GSN is taken once the record's space
//! in its log is reserved, outside the reservation lock (issue 35): §3.1's rules order a record
//! after what it depends on — its transaction's earlier records (`T`) and its page's (`P`) —
//! and stores to the same bytes are ordered by the engine's latches and locks, which are held
//! across the captured store, its reservation and its GSN, so for those bytes log order, GSN
//! order and store order agree. Records of one page that write
//! disjoint bytes may sit in their log out of GSN order; redo gives the same bytes either way
//! (§3.2's per-log redo replays log order; the per-page buckets sort by GSN). GSN order
//! therefore still extends every dependency a record can have (its slot's earlier records, its
//! page's earlier records). Durability needs one more thing: a GSN becomes visible only after
//! its record's reservation is published, so a force up to a log's reserved end read after
//! that GSN waits for the record (see [`Dlog::full_round`]). The reserved end is read without
//! the reservation lock (an atomic each reservation publishes, with the ordering argued at
//! [`Log::reserved_end`]): a commit takes no reservation lock of the logs it forces.
//! One dependency is not a page's: with early lock release a transaction reads (and copies into
//! its undo record) a row another transaction released at commit, before that commit is
//! durable. So a *fence* publishes the fencing slot's GSN into the floor ([`Dlog::publish`]):
//! `inplace` fences after every commit, abort and system-transaction mark and before it releases
//! locks or latches, so every record the next holder writes has a GSN above that mark, and a
//! horizon that redoes any of them also redoes the mark (the paper's undo runs backwards in GSN
//! order over log records instead; our undo records live in redo-logged pages, so the order
//! must come from the GSNs). The cost is one atomic maximum on a shared word per fence.
//!
//! **Durability (§4.1, passive group commit, `cache=volatile`).** Records are copied into a
//! volatile ring per log (the paper's write-combining buffers) and reach NVRAM when that log is
//! forced. Each slot keeps `dgsn` with a dirty bit: set (before the GSN is taken) by its first
//! record after a clean point; a commit forces the logs its slot touched — the paper's
//! per-thread fence — then stores `dgsn = slot GSN` clean and queues the commit on its slot's
//! own queue (issue 35: a bounded ring only that slot's thread writes, so a commit takes no
//! lock and writes no word another committer writes; when full the committer runs a full
//! round itself). The commit daemon computes
//! `min_dgsn` (min over dirty slots; everything if none is dirty), raises the `floor` every new
//! GSN must exceed, re-reads the dirty slots (Dekker-style with the inserters' `SeqCst` dirty
//! store / floor load) and persists `H = min_dgsn` in the control page *before* acknowledging the
//! queued commits with `gsn ≤ H` (it drains every slot's queue; a token is the commit's GSN,
//! durable once the published `H` covers it); a round whose `H` would acknowledge nothing
//! persists nothing. Committers do not wake the daemon (a futex wake
//! per commit was the worker's largest protocol cost): it polls every [`DAEMON_POLL`] while
//! commits arrive, so one round and one persist of `H` serve every commit of that interval; it
//! sleeps after [`IDLE_POLLS`] empty polls, and then the next committer wakes it, as does a
//! thread that blocks in `wait_durable`. A straggler — a dirty
//! slot holding `min_dgsn` back for [`NUDGE_AFTER`] of the daemon's rounds, or while a slot's
//! queue is half full — is nudged *cooperatively by the
//! daemon itself*: it raises the floor to the highest GSN handed out and forces every lagging log
//! (a log whose reserved end is past its forced end), which makes every record with a GSN at or
//! below it durable; then `H` moves there. Signals (the paper's `pthread_kill`) do not fit Rust:
//! a handler may not take the log's locks that a force needs, and our "WC buffer" is a software
//! ring any thread can drain, so the daemon drains it itself; a flag checked at the next
//! operation would never fire for an idle worker. `cache=durable` (eADR, §4.2): every record is
//! forced as it is inserted (flushes are no-ops on an `--eadr` region: a copy and a fence), so a
//! commit needs nothing more, and there is no daemon.
//!
//! **Recovery (§3.2).** Analysis reads every log from its redo point to its end. With a volatile
//! cache only records with `gsn ≤ H` are redone; those above are *retired* in place (their kind
//! becomes `dead`, persisted) before anything new is logged, so no later horizon can revive them.
//! Page partitioning: each log is redone in log order, logs in parallel (scoped threads).
//! Transaction partitioning: the two-step pipeline — records bucketed by page, each bucket sorted
//! by GSN, buckets applied in parallel. Undo is `inplace` recovery on the redone image (below).
//!
//! **Recovery invariant**: every record with `gsn ≤ H` ever inserted is durable before `H` is, no
//! page holding a change with a GSN above `H` is written back before `H` covers it (a checkpoint
//! raises `H` past its snapshot first), so redoing exactly the records at or below `H` rebuilds a
//! state closed under dependencies that contains every acknowledged commit.
//!
//! **Mapping to the paper.** The paper's private DRAM undo buffer per transaction is `inplace`'s
//! per-worker undo log, which lives in the image and is redo-logged like any page (so rollback of
//! a live transaction never scans a log, as in the paper); undo after a crash is `inplace`'s,
//! serial over the workers' undo logs (they are few and short: the image is already redone, so
//! parallel undo would save microseconds). System transactions (§3.2) are what `inplace` already
//! has for B+tree structure changes: a split or merge runs as a system transaction with its own
//! undo log (`sys_undo_pages`), commits independently of the user transaction that caused it and
//! is rolled back alone if interrupted; no nested top actions or dummy CLRs exist to track
//! across logs.

mod control;
mod recover;

pub(crate) use control::{
    format_control, per_log_bytes, read_control, read_horizon, read_layout, read_redo, Control,
};
use control::{horizon_word, redo_copy, RedoPoints, D_HORIZON, D_REDO_COPIES, MAX_GSN};
pub(crate) use recover::{recover, Recovered};

use super::log::{self, Log, LogInsert};
use crate::device::Device;
use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex, MutexGuard};
use pmem::Region;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use storage::format::{get_u64, MAX_WORKERS, PAGE_SIZE_U64};
use storage::{CommitToken, DbError, Result};

/// Most logs a region may have (the control page holds one redo point per log).
pub const MAX_LOGS: u32 = 64;
/// Commits one slot's queue holds; a committer that finds its queue full runs a full round
/// itself (allocated at the slot's first queued commit: 8 KiB per worker that commits).
const SLOT_QUEUE_CAPACITY: usize = 1024;
/// How long the daemon lets one queued commit stay blocked by stragglers (measured across its
/// own rounds) before it nudges them; or when a slot's queue is half full.
const NUDGE_AFTER: Duration = Duration::from_millis(1);
/// ... and for at least this many of its rounds (a descheduled daemon is no straggler).
const NUDGE_AFTER_ROUNDS: u32 = 20;
/// How often the daemon looks at `min_dgsn` while commits arrive: committers never wake it
/// (a futex wake per commit cost the worker more than the round itself), it polls; a
/// committer that blocks in `wait_durable` wakes it at once.
const DAEMON_POLL: Duration = Duration::from_micros(100);
/// Empty polls after which the daemon sleeps until a committer wakes it (2 ms idle).
const IDLE_POLLS: u32 = 20;
/// The daemon's sleep when idle (it re-checks `stop`).
const DAEMON_IDLE_SLEEP: Duration = Duration::from_millis(5);
const DIRTY: u64 = 1 << 63;
/// Slots: one per worker, and the system slot (open, recovery, catalog changes).
const SLOTS: usize = MAX_WORKERS as usize + 1;
const SYSTEM_SLOT: usize = MAX_WORKERS as usize;

/// How the log is organised (`log=central|txn:N|page:N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLayout {
    /// One log, records without GSNs (the baseline; Aether-style insertion).
    Central,
    /// `N` logs, a worker inserts into log `worker mod N`.
    Txn(u32),
    /// `N` logs, a store to page `p` goes to log `p mod N`.
    Page(u32),
}

impl LogLayout {
    pub fn parse(s: &str) -> Option<LogLayout> {
        if s == "central" {
            return Some(LogLayout::Central);
        }
        let (kind, n) = s.split_once(':')?;
        let n: u32 = n.parse().ok().filter(|n| (1..=MAX_LOGS).contains(n))?;
        match kind {
            "txn" => Some(LogLayout::Txn(n)),
            "page" => Some(LogLayout::Page(n)),
            _ => None,
        }
    }

    fn code(self) -> (u64, u64) {
        match self {
            LogLayout::Central => (0, 1),
            LogLayout::Txn(n) => (1, u64::from(n)),
            LogLayout::Page(n) => (2, u64::from(n)),
        }
    }

    pub fn logs(self) -> u64 {
        self.code().1
    }
}

impl std::fmt::Display for LogLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogLayout::Central => write!(f, "central"),
            LogLayout::Txn(n) => write!(f, "txn:{n}"),
            LogLayout::Page(n) => write!(f, "page:{n}"),
        }
    }
}

/// Whether the processor caches are durable (`cache=volatile|durable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Records sit in volatile buffers until forced: passive group commit.
    Volatile,
    /// eADR: every record is durable once inserted; commit needs only a fence.
    Durable,
}

impl Cache {
    /// The `cache=` option's value.
    pub fn name(self) -> &'static str {
        match self {
            Cache::Volatile => "volatile",
            Cache::Durable => "durable",
        }
    }

    pub fn parse(s: &str) -> Option<Cache> {
        match s {
            "volatile" => Some(Cache::Volatile),
            "durable" => Some(Cache::Durable),
            _ => None,
        }
    }
}

/// Test-only violations of the distributed log's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DlogFault {
    /// A commit is acknowledged once its own logs are forced, before `H` covers it.
    AckOwnLogs,
    /// A commit forces only one of the logs its slot touched, then marks the slot clean.
    SkipLaggingLog,
    /// Recovery redoes records above the GSN horizon (and retires none).
    RedoPastHorizon,
    /// Transaction-partitioned redo applies each log in log order, not page buckets by GSN.
    RedoUnsorted,
}

// ---- forward processing ---------------------------------------------------------------------

thread_local! {
    /// (engine id, worker slot) of the calling thread: set by `begin`.
    static SLOT: Cell<(u64, usize)> = const { Cell::new((0, SYSTEM_SLOT)) };
}

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

/// One worker slot's GSN state, on its own cache line.
#[repr(align(64))]
#[derive(Default)]
struct Slot {
    /// GSN below or at which every record of this slot is durable; [`DIRTY`] while it has
    /// records that may not be.
    dgsn: AtomicU64,
    /// The slot's GSN (its last record's).
    gsn: AtomicU64,
    /// Logs this slot inserted into since its last commit (bit `i`: log `i`).
    touched: AtomicU64,
    /// Commits this slot ever queued: the producer end of its commit queue (issue 35: one
    /// queue per slot, written only by the slot's thread, instead of one queue under a mutex
    /// every committer took). The consumer end is [`Dlog::drained`].
    queued: AtomicU64,
    /// The queue: the commit GSN of commit `k` at `k % SLOT_QUEUE_CAPACITY`.
    ring: OnceLock<Box<[AtomicU64]>>,
}

/// The passive group commit's figures (bench's `engine` activity, summed over the logs' users).
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum DlogStat {
    CommitsQueued,
    CommitsImmediate,
    CommitsNudged,
    Nudges,
    PassiveRounds,
    QueueFull,
    HorizonPersists,
}

impl DlogStat {
    /// Every figure with the name bench reports it under, in report order.
    pub const ALL: [(DlogStat, &'static str); 7] = [
        (DlogStat::CommitsQueued, "commits_queued"),
        (DlogStat::CommitsImmediate, "commits_immediate"),
        (DlogStat::CommitsNudged, "commits_nudged"),
        (DlogStat::Nudges, "nudges"),
        (DlogStat::PassiveRounds, "passive_rounds"),
        (DlogStat::QueueFull, "commit_queue_full"),
        (DlogStat::HorizonPersists, "horizon_persists"),
    ];
}

/// [`DlogStat`]s kept per thread and summed when read (issue 35): a commit bumps one, and a
/// shared atomic there was a cache line every committing worker wrote.
#[derive(Default)]
pub(crate) struct DlogStats {
    cells: pmem::ThreadCounters<{ DlogStat::ALL.len() }>,
}

impl DlogStats {
    #[inline]
    fn bump(&self, stat: DlogStat) {
        self.cells.add(stat as usize, 1);
    }

    fn add(&self, stat: DlogStat, n: u64) {
        self.cells.add(stat as usize, n);
    }

    /// `stat` summed over every thread.
    pub fn get(&self, stat: DlogStat) -> u64 {
        self.cells.get(stat as usize)
    }
}

/// The distributed log manager.
pub(crate) struct Dlog {
    id: u64,
    pub logs: Vec<Arc<Log>>,
    layout: LogLayout,
    pub cache: Cache,
    device: Arc<Device>,
    control: u64,
    slots: Box<[Slot]>,
    /// Highest slot index `begin` has used (the daemon looks at slots up to it and the system's).
    slots_used: AtomicU64,
    /// Read-modify-writes of `slots_used` (tests count them).
    #[cfg(test)]
    slot_grows: AtomicU64,
    page_gsn: Box<[AtomicU64]>,
    /// Every GSN handed out from now on exceeds this.
    floor: AtomicU64,
    /// The persisted GSN horizon `H`.
    horizon: AtomicU64,
    horizon_lock: Mutex<()>,
    /// The redo points' sequence number and values as last persisted (checkpoints serialize).
    redo: Mutex<(u64, Vec<u64>)>,
    /// Per slot, commits taken off its queue (acknowledged: `H` covers them); written only
    /// under `drain_lock`, read by the slot's committer to see whether its queue is full.
    drained: Box<[CachePadded<AtomicU64>]>,
    /// Serializes the queues' consumers (the daemon, a full round's acknowledgement).
    drain_lock: Mutex<()>,
    stop: AtomicBool,
    /// The daemon is in its idle sleep: the next committer wakes it (Dekker with the queues).
    daemon_asleep: AtomicBool,
    wake_lock: Mutex<()>,
    daemon_wake: Condvar,
    ack_lock: Mutex<()>,
    acked_cv: Condvar,
    failed: AtomicBool,
    fault: Option<DlogFault>,
    pub stats: DlogStats,
    /// Acquisitions of this log manager's mutexes, per thread (tests count them).
    lock_acquisitions: pmem::ThreadCounters<1>,
}

impl Dlog {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        device: Arc<Device>,
        control: u64,
        area: u64,
        c: Control,
        rec: &Recovered,
        insert: LogInsert,
        image_pages: u64,
        fault: Option<DlogFault>,
    ) -> Dlog {
        let persisted_horizon = rec.persisted_horizon;
        let n = c.layout.logs() as usize;
        let logs = (0..n)
            .map(|i| {
                let a = area + i as u64 * c.per_log_bytes;
                Arc::new(Log::new(
                    device.clone(),
                    a,
                    c.per_log_bytes,
                    rec.redo.points[i],
                    rec.ends[i],
                    insert,
                ))
            })
            .collect();
        // New GSNs start above every GSN recovery saw and the persisted horizon.
        let start = rec.max_gsn.max(persisted_horizon);
        Dlog {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            logs,
            layout: c.layout,
            cache: c.cache,
            device,
            control,
            slots: (0..SLOTS).map(|_| Slot::default()).collect(),
            slots_used: AtomicU64::new(0),
            #[cfg(test)]
            slot_grows: AtomicU64::new(0),
            page_gsn: (0..image_pages).map(|_| AtomicU64::new(0)).collect(),
            floor: AtomicU64::new(start),
            horizon: AtomicU64::new(persisted_horizon),
            horizon_lock: Mutex::new(()),
            redo: Mutex::new((rec.redo.seq, rec.redo.points.clone())),
            drained: (0..SLOTS).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            drain_lock: Mutex::new(()),
            stop: AtomicBool::new(false),
            daemon_asleep: AtomicBool::new(false),
            wake_lock: Mutex::new(()),
            daemon_wake: Condvar::new(),
            ack_lock: Mutex::new(()),
            acked_cv: Condvar::new(),
            failed: AtomicBool::new(false),
            fault,
            stats: DlogStats::default(),
            lock_acquisitions: Default::default(),
        }
    }

    /// Takes one of this log manager's mutexes, counted.
    fn lock<'a, T>(&self, mutex: &'a Mutex<T>) -> MutexGuard<'a, T> {
        self.lock_acquisitions.add(0, 1);
        mutex.lock()
    }

    /// Acquisitions of this log manager's own mutexes (not its logs'), summed over threads.
    #[cfg(test)]
    pub fn lock_acquisitions(&self) -> u64 {
        self.lock_acquisitions.get(0)
    }

    /// The calling thread works for `worker` from now on (until it calls this again).
    pub fn enter_slot(&self, worker: usize) {
        let slot = worker.min(SYSTEM_SLOT);
        SLOT.with(|s| s.set((self.id, slot)));
        // A load first (issue 35): once every slot in use has begun, `begin` writes nothing
        // shared here. All three accesses are SeqCst (a plain load on x86): this slot's dirty
        // store and floor load come after them, so a round whose floor raise follows that
        // floor load in the SeqCst order also scans this slot (`min_dgsn` re-reads it).
        if slot as u64 > self.slots_used.load(Ordering::SeqCst) {
            #[cfg(test)]
            self.slot_grows.fetch_add(1, Ordering::Relaxed);
            self.slots_used.fetch_max(slot as u64, Ordering::SeqCst);
        }
    }

    /// The calling thread works outside any worker (catalog changes, shutdown; callers
    /// serialize these: the system slot is one thread's at a time).
    pub fn enter_system(&self) {
        SLOT.with(|s| s.set((self.id, SYSTEM_SLOT)));
    }

    /// After the system slot's work (recovery's undo, a catalog change): everything is forced,
    /// `H` covers it and the slot is clean again.
    pub fn system_done(&self) -> Result<()> {
        let slot = &self.slots[SYSTEM_SLOT];
        let gsn = slot.gsn.load(Ordering::Acquire);
        slot.touched.store(0, Ordering::Relaxed);
        self.full_round()?;
        slot.dgsn.store(gsn, Ordering::SeqCst);
        self.acknowledge(false);
        Ok(())
    }

    fn slot(&self) -> usize {
        match SLOT.with(Cell::get) {
            (id, slot) if id == self.id => slot,
            _ => SYSTEM_SLOT,
        }
    }

    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire) || self.logs.iter().any(|l| l.overflowed())
    }

    /// Captures one store: split at page boundaries, each piece a GSN record in its log.
    pub fn capture(&self, offset: u64, bytes: &[u8]) {
        let slot_id = self.slot();
        let slot = &self.slots[slot_id];
        let n = self.logs.len() as u64;
        let mut at = 0usize;
        while at < bytes.len() {
            let off = offset + at as u64;
            let page = off / PAGE_SIZE_U64;
            let len = ((PAGE_SIZE_U64 - off % PAGE_SIZE_U64) as usize).min(bytes.len() - at);
            let li = match self.layout {
                LogLayout::Page(_) => page % n,
                _ => slot_id as u64 % n,
            } as usize;
            self.capture_one(slot, li, off, page, &bytes[at..at + len]);
            at += len;
        }
    }

    fn capture_one(&self, slot: &Slot, li: usize, off: u64, page: u64, bytes: &[u8]) {
        let volatile = self.cache == Cache::Volatile;
        if volatile {
            let d = slot.dgsn.load(Ordering::Relaxed);
            if d & DIRTY == 0 {
                // Before the GSN is taken: the daemon's floor store and this are Dekker-paired.
                slot.dgsn.store(d | DIRTY, Ordering::SeqCst);
            }
        }
        let log = &self.logs[li];
        let page_gsn = self.page_gsn.get(page as usize);
        let mut assign = || {
            // The floor load is SeqCst: it pairs with the reservation's publish before it
            // (`Log::reserved_end`) and with the daemon's floor raise (the dirty bit above).
            let base = slot.gsn.load(Ordering::Relaxed).max(self.floor.load(Ordering::SeqCst));
            let gsn = match page_gsn {
                Some(p) => {
                    let mut cur = p.load(Ordering::Acquire);
                    loop {
                        let g = base.max(cur) + 1;
                        match p.compare_exchange_weak(cur, g, Ordering::AcqRel, Ordering::Acquire) {
                            Ok(_) => break g,
                            Err(c) => cur = c,
                        }
                    }
                }
                None => base + 1,
            };
            slot.gsn.store(gsn, Ordering::Release);
            gsn
        };
        let Some((end, _gsn)) = log.append_gsn(off, bytes, &mut assign) else { return };
        slot.touched.fetch_or(1 << li, Ordering::Relaxed);
        if !volatile {
            // eADR: the record is durable once copied out (flushes are no-ops) and fenced.
            if log.force(end, false).is_err() {
                self.failed.store(true, Ordering::Release);
            }
        }
    }

    /// The calling thread fenced: its records so far are ordered before anything another
    /// thread does after synchronising with it, so new GSNs must exceed its GSN. `inplace`
    /// fences after every commit (and abort, and system transaction) mark and before it
    /// releases the locks or latches, so the next holder's records get GSNs above that mark.
    ///
    /// Regression (found by `crashtest --engine wal --engine-opt log=txn:2 --workload tpcc
    /// --threads 2`, evict policy, 2 of 4,500 crashes: "W_YTD != sum(D_YTD)" after recovery):
    /// with early lock release, B could take a row lock A released at commit and write its
    /// undo record (the before-image: A's value) with a GSN *below* A's commit mark, as the GSN
    /// rules only order records of the same page, slot or log. A horizon falling between the
    /// two (a nudge's `H` = the highest GSN handed out, read slot by slot) redid A's updates
    /// and B's undo record but not A's commit mark: both were rolled back, and undoing A before
    /// B restored A's value over A's rollback. Now B's records exceed A's commit mark, so a
    /// redone record of B implies A committed.
    pub fn publish(&self) {
        let g = self.slots[self.slot()].gsn.load(Ordering::Acquire);
        if g > self.floor.load(Ordering::Acquire) {
            self.floor.fetch_max(g, Ordering::SeqCst);
        }
    }

    /// A commit of the calling thread's slot: its token (durable at once with a durable cache,
    /// else its GSN, queued on its slot: durable once the daemon's `H` covers it).
    pub fn commit(&self) -> Result<CommitToken> {
        let slot_id = self.slot();
        let slot = &self.slots[slot_id];
        if self.cache == Cache::Durable {
            self.device.fence();
            return Ok(CommitToken::DURABLE);
        }
        let gsn = slot.gsn.load(Ordering::Acquire);
        let mask = slot.touched.swap(0, Ordering::Relaxed);
        let mut forced_one = false;
        for (i, log) in self.logs.iter().enumerate() {
            if mask & (1 << i) == 0 {
                continue;
            }
            if self.fault == Some(DlogFault::SkipLaggingLog) && forced_one {
                continue;
            }
            // Everything reserved so far, this slot's records included (read without the
            // reservation lock: this slot published its own reservations' ends). Regression
            // (found by reading this path while looking for the cause of a `crashtest` TPC-C
            // violation, which it does not explain): the force stopped at the filled prefix, which
            // ends at the oldest copy still in flight; with another thread's copy in flight
            // before this slot's records (shared logs: `page:N`, or more workers than logs),
            // the slot was marked clean with records not durable, and H could cover them.
            log.force(log.reserved_end(), false).inspect_err(|_| self.fail())?;
            forced_one = true;
        }
        // Clean: every record of this slot (GSNs up to `gsn`) is durable.
        slot.dgsn.store(gsn, Ordering::SeqCst);
        if self.fault == Some(DlogFault::AckOwnLogs) || gsn <= self.horizon.load(Ordering::Acquire)
        {
            self.stats.bump(DlogStat::CommitsImmediate);
            return Ok(CommitToken::DURABLE);
        }
        // Queue the commit on this slot's own queue: no lock, and no word another committer
        // writes (the daemon's `drained` is read, written once per round that acknowledges).
        let ring =
            slot.ring.get_or_init(|| (0..SLOT_QUEUE_CAPACITY).map(|_| AtomicU64::new(0)).collect());
        let tail = slot.queued.load(Ordering::Relaxed);
        // Acquire: the consumer read the entry this one overwrites before it moved `drained`.
        if tail - self.drained[slot_id].load(Ordering::Acquire) >= SLOT_QUEUE_CAPACITY as u64 {
            self.stats.bump(DlogStat::QueueFull);
            self.full_round()?;
            return Ok(CommitToken::DURABLE);
        }
        ring[tail as usize % SLOT_QUEUE_CAPACITY].store(gsn, Ordering::Relaxed);
        // Publishes the entry. SeqCst: Dekker with the daemon's `daemon_asleep` store and its
        // re-read of the queues before it sleeps, so a sleeping daemon is always woken.
        slot.queued.store(tail + 1, Ordering::SeqCst);
        if self.daemon_asleep.load(Ordering::SeqCst) {
            // Only after the daemon idled 2 ms: it holds `wake_lock` from its last look at the
            // queues until it waits, so this wake cannot fall between the two.
            let _g = self.lock(&self.wake_lock);
            self.daemon_wake.notify_one();
        }
        self.stats.bump(DlogStat::CommitsQueued);
        // The token is the commit GSN: durable once `H` covers it (and every lower GSN, so the
        // largest of several tokens stands for all of them).
        Ok(CommitToken(gsn))
    }

    fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        let _g = self.lock(&self.ack_lock);
        self.acked_cv.notify_all();
    }

    fn active_slots(&self) -> impl Iterator<Item = &Slot> {
        self.active_slot_ids().map(|(_, slot)| slot)
    }

    /// `min_dgsn`: the GSN at or below which every record inserted so far is durable.
    fn min_dgsn(&self) -> u64 {
        let (mut min_dirty, mut max_clean) = (u64::MAX, 0u64);
        for s in self.active_slots() {
            let d = s.dgsn.load(Ordering::SeqCst);
            if d & DIRTY != 0 {
                min_dirty = min_dirty.min(d & !DIRTY);
            } else {
                max_clean = max_clean.max(d);
            }
        }
        if min_dirty == u64::MAX {
            max_clean
        } else {
            min_dirty
        }
    }

    fn max_gsn(&self) -> u64 {
        let slots = self.active_slots().map(|s| s.gsn.load(Ordering::Acquire)).max();
        slots.unwrap_or(0).max(self.floor.load(Ordering::Acquire))
    }

    /// Persists `H = h` if it grows (before any commit is acknowledged by it): one self-checked
    /// word, so the update is crash-atomic. Past the 48-bit GSN space the log fails (commits
    /// then get an error) rather than persist a horizon it cannot represent.
    fn persist_horizon(&self, h: u64) {
        let _g = self.lock(&self.horizon_lock);
        if h <= self.horizon.load(Ordering::Acquire) {
            return;
        }
        if h > MAX_GSN {
            self.fail();
            return;
        }
        let at = self.control + D_HORIZON;
        self.device.write_u64(at, horizon_word(h));
        self.device.persist(at, 8);
        self.stats.bump(DlogStat::HorizonPersists);
        self.horizon.store(h, Ordering::Release);
    }

    /// The passive round: `H` from `min_dgsn`, without forcing anything. `H` is persisted only
    /// if it would acknowledge the oldest queued commit (`head_gsn`): a round that acknowledges
    /// nothing costs no persist.
    pub fn passive_round(&self, head_gsn: u64) {
        let first = self.min_dgsn();
        // New GSNs exceed every GSN handed out so far: a lagging slot's next records catch up.
        self.floor.fetch_max(self.max_gsn().max(first), Ordering::SeqCst);
        // A slot that turned dirty before the floor store is seen dirty now.
        let h = first.min(self.min_dgsn());
        if h >= head_gsn {
            self.persist_horizon(h);
        }
        self.stats.bump(DlogStat::PassiveRounds);
    }

    /// The full round (a nudge, a full queue, a checkpoint): every record with a GSN up to the
    /// highest handed out is made durable by forcing the lagging logs, then `H` moves there.
    pub fn full_round(&self) -> Result<()> {
        let g = self.max_gsn();
        // Records assigned a GSN after this store exceed `g`; those assigned before it were
        // reserved (their end published) before their GSN was taken, so they lie within the
        // reserved ends read below (an assigner whose floor load missed this store published
        // its end before this thread's load: the SeqCst pairs of `Log::reserved_end`), and
        // each force waits for their copies.
        self.floor.fetch_max(g, Ordering::SeqCst);
        for log in &self.logs {
            let end = log.reserved_end();
            log.force(end, false).inspect_err(|_| self.fail())?;
        }
        self.persist_horizon(g);
        Ok(())
    }

    /// Active slots with their index (the daemon's scan).
    fn active_slot_ids(&self) -> impl Iterator<Item = (usize, &Slot)> {
        let hi = self.slots_used.load(Ordering::SeqCst) as usize;
        (0..=hi.min(SYSTEM_SLOT - 1))
            .chain(std::iter::once(SYSTEM_SLOT))
            .map(|i| (i, &self.slots[i]))
    }

    /// Takes the queued commits `H` covers off every slot's queue (each queue is in GSN
    /// order: a slot's GSN never falls) and wakes the waiters; returns the oldest commit left
    /// (its slot and queue position) and the most commits left in one slot's queue.
    fn acknowledge(&self, nudged: bool) -> Option<((usize, u64), usize)> {
        let h = self.horizon.load(Ordering::Acquire);
        let _g = self.lock(&self.drain_lock);
        let (mut taken, mut oldest, mut most) = (0, None::<(u64, (usize, u64))>, 0);
        for (i, slot) in self.active_slot_ids() {
            let (mut head, tail) =
                (self.drained[i].load(Ordering::Relaxed), slot.queued.load(Ordering::Acquire));
            let Some(ring) = slot.ring.get().filter(|_| head < tail) else { continue };
            let at = |k: u64| ring[k as usize % SLOT_QUEUE_CAPACITY].load(Ordering::Relaxed);
            let first = head;
            while head < tail && at(head) <= h {
                head += 1;
            }
            if head > first {
                // Release: the producer reuses these entries only after it sees this.
                self.drained[i].store(head, Ordering::Release);
                taken += head - first;
            }
            if head < tail {
                let g = at(head);
                if oldest.is_none_or(|(o, _)| g < o) {
                    oldest = Some((g, (i, head)));
                }
                most = most.max((tail - head) as usize);
            }
        }
        drop(_g);
        if taken > 0 {
            if nudged {
                self.stats.add(DlogStat::CommitsNudged, taken);
            }
            let _g = self.lock(&self.ack_lock);
            self.acked_cv.notify_all();
        }
        oldest.map(|(_, at)| (at, most))
    }

    /// The GSN of the oldest commit queued on any slot (`None`: no commit is waiting).
    fn oldest_queued(&self) -> Option<u64> {
        let _g = self.lock(&self.drain_lock);
        let mut oldest = None::<u64>;
        for (i, slot) in self.active_slot_ids() {
            let (head, tail) =
                (self.drained[i].load(Ordering::Relaxed), slot.queued.load(Ordering::SeqCst));
            if let Some(ring) = slot.ring.get().filter(|_| head < tail) {
                let g = ring[head as usize % SLOT_QUEUE_CAPACITY].load(Ordering::Relaxed);
                oldest = Some(oldest.map_or(g, |o| o.min(g)));
            }
        }
        oldest
    }

    /// Waits up to `timeout` for a wake (a blocked waiter, a stop, a committer if asleep).
    fn daemon_pause(&self, timeout: Duration) {
        let mut g = self.lock(&self.wake_lock);
        if !self.stop.load(Ordering::Acquire) {
            self.daemon_wake.wait_for(&mut g, timeout);
        }
    }

    /// The daemon's idle sleep: until a commit is queued (its committer wakes it) or a stop.
    fn daemon_sleep(&self) {
        let mut g = self.lock(&self.wake_lock);
        // SeqCst: Dekker with a committer's queue store then `daemon_asleep` load; this thread
        // holds `wake_lock` from here until it waits, so that committer's wake is not lost.
        self.daemon_asleep.store(true, Ordering::SeqCst);
        while !self.stop.load(Ordering::Acquire) && self.oldest_queued().is_none() {
            self.daemon_wake.wait_for(&mut g, DAEMON_IDLE_SLEEP);
        }
        self.daemon_asleep.store(false, Ordering::SeqCst);
    }

    /// The passive group commit daemon.
    pub fn daemon(&self) {
        // (oldest queued commit, since when) the daemon found blocked by a straggler: time is
        // measured between the daemon's own rounds, so a daemon descheduled for a while does
        // not count as stragglers.
        let mut blocked: Option<((usize, u64), Instant, u32)> = None;
        let mut idle_polls = 0u32;
        while !self.stop.load(Ordering::Acquire) {
            let Some(head_gsn) = self.oldest_queued() else {
                if idle_polls < IDLE_POLLS {
                    // Commits arrive without waking the daemon: poll for a while.
                    idle_polls += 1;
                    self.daemon_pause(DAEMON_POLL);
                } else {
                    self.daemon_sleep();
                }
                continue;
            };
            idle_polls = 0;
            self.passive_round(head_gsn);
            let Some((head, queued)) = self.acknowledge(false) else {
                blocked = None;
                continue;
            };
            let (since, rounds) = match blocked {
                Some((t, since, rounds)) if t == head => (since, rounds + 1),
                _ => (Instant::now(), 0),
            };
            blocked = Some((head, since, rounds));
            let straggling = rounds >= NUDGE_AFTER_ROUNDS && since.elapsed() >= NUDGE_AFTER;
            if straggling || queued >= SLOT_QUEUE_CAPACITY / 2 {
                // A straggler holds min_dgsn back: drain the lagging logs ourselves.
                self.stats.bump(DlogStat::Nudges);
                if self.full_round().is_err() {
                    return;
                }
                self.acknowledge(true);
                blocked = None;
            } else {
                self.daemon_pause(DAEMON_POLL);
            }
        }
    }

    pub fn stop_daemon(&self) {
        self.stop.store(true, Ordering::Release);
        let _g = self.lock(&self.wake_lock);
        self.daemon_wake.notify_all();
    }

    /// A token is a commit GSN (or [`CommitToken::DURABLE`], 0): durable once `H` covers it,
    /// and `H` is published only after it is persisted.
    pub fn is_durable(&self, token: CommitToken) -> bool {
        token.0 <= self.horizon.load(Ordering::Acquire)
    }

    pub fn wait_durable(&self, token: CommitToken) -> Result<()> {
        let mut g = self.lock(&self.ack_lock);
        while !self.is_durable(token) {
            // This thread blocks: the daemon's next round should not wait for its poll.
            self.daemon_wake.notify_one();
            if self.failed() {
                return Err(DbError::Invalid(
                    "the write-ahead log failed; reopen the database to recover".into(),
                ));
            }
            let timed_out = self.acked_cv.wait_for(&mut g, Duration::from_millis(2)).timed_out();
            if timed_out && !self.is_durable(token) && self.stop.load(Ordering::Acquire) {
                // No daemon any more (shutting down): a full round acknowledges everything.
                drop(g);
                self.full_round()?;
                self.acknowledge(true);
                g = self.lock(&self.ack_lock);
            }
        }
        Ok(())
    }

    /// A checkpoint's snapshot (operations quiesced): every log's end.
    pub fn appended(&self) -> Vec<u64> {
        self.logs.iter().map(|l| l.appended()).collect()
    }

    /// Before a checkpoint writes pages copied at a quiesced moment: every record up to the
    /// highest GSN handed out is forced and `H` covers it (the WAL rule across logs).
    pub fn before_page_writes(&self) -> Result<()> {
        self.full_round()?;
        self.acknowledge(false);
        Ok(())
    }

    /// Moves every log's redo point after a checkpoint's pages are durable: the next sequence
    /// number into copy 0, persisted, then into copy 1, persisted (a crash tears at most one
    /// copy; the other verifies), and only then are the logs truncated (their space reused).
    pub fn advance_redo(&self, cuts: &[u64]) {
        let mut redo = self.lock(&self.redo);
        let (seq, points) = &mut *redo;
        for (p, &cut) in points.iter_mut().zip(cuts) {
            *p = (*p).max(cut);
        }
        *seq += 1;
        let copy = redo_copy(*seq, points);
        for at in D_REDO_COPIES {
            self.device.write(self.control + at, &copy);
            self.device.persist(self.control + at, copy.len() as u64);
        }
        for (log, &p) in self.logs.iter().zip(points.iter()) {
            log.truncate(p);
        }
    }

    /// Whether any log is past `fraction` (as used/capacity numerator over 2^16) — for the
    /// flusher and the gate.
    pub fn most_used(&self) -> (u64, u64) {
        self.logs
            .iter()
            .map(|l| (l.used(), l.capacity()))
            .max_by_key(|&(u, c)| u * 1024 / c.max(1))
            .unwrap_or((0, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};

    const LOG_BYTES: u64 = 256 << 10;
    const AREA: u64 = 64 << 10;

    /// A distributed log of `layout`, volatile, on a blank dram region (no daemon).
    fn dlog_of(layout: LogLayout) -> (Region, Dlog) {
        let region = Region::open(&RegionOptions::new(Medium::Dram, AREA + LOG_BYTES + (64 << 10)))
            .expect("a dram region");
        let device =
            Arc::new(Device::open(&region, crate::device::Io::Nvm, "wal").expect("device"));
        let n = layout.logs() as usize;
        let per_log_bytes = LOG_BYTES / n as u64;
        let c = Control { layout, cache: Cache::Volatile, per_log_bytes };
        let rec = Recovered {
            ends: vec![0; n],
            redone: 0,
            retired: 0,
            max_gsn: 0,
            horizon: 0,
            persisted_horizon: 0,
            redo: RedoPoints { seq: 0, points: vec![0; n], note: None },
        };
        let d = Dlog::new(device, 0, AREA, c, &rec, LogInsert::Aether, 64, None);
        (region, d)
    }

    fn dlog() -> (Region, Dlog) {
        dlog_of(LogLayout::Txn(1))
    }

    /// Regression (see [`Dlog::publish`]): worker B's first record after it synchronised with
    /// worker A's commit fence (taking a lock A released) must have a GSN above A's commit
    /// mark, although it goes to another log and another page (B's undo page).
    #[test]
    fn a_record_after_anothers_commit_fence_is_above_its_commit_mark() {
        let (_region, d) = dlog_of(LogLayout::Txn(2));
        let page = |p: u64| p * PAGE_SIZE_U64;
        std::thread::scope(|s| {
            s.spawn(|| {
                d.enter_slot(0);
                // A: many stores (its slot's GSN runs ahead), the row, its commit mark, fence.
                for i in 0..20 {
                    d.capture(page(20) + i * 8, &[1; 8]);
                }
                d.capture(page(8), &[1; 8]);
                d.capture(page(10), &[0; 8]);
                d.publish();
            })
            .join()
            .expect("worker A");
        });
        let commit_mark = d.slots[0].gsn.load(Ordering::Acquire);
        std::thread::scope(|s| {
            s.spawn(|| {
                d.enter_slot(1);
                // B, after taking the row's lock: its undo record (A's value) on its own page.
                d.capture(page(30), &[1; 8]);
            })
            .join()
            .expect("worker B");
        });
        let b = d.slots[1].gsn.load(Ordering::Acquire);
        assert!(b > commit_mark, "B's undo record {b} is not above A's commit mark {commit_mark}");
    }

    /// Guards the GSN taken outside the reservation lock (issue 35): a full round's `H` covers
    /// only records its forces made durable, because a GSN becomes visible only once its record
    /// is reserved. Would catch: a GSN taken before the reservation (a round could read it,
    /// force the log short of the record and persist an `H` above a record not yet durable).
    #[test]
    fn a_full_rounds_horizon_covers_only_forced_records() {
        let (region, d) = dlog_of(LogLayout::Page(1));
        const PER_WORKER: u64 = 1500;
        let (done, start) = (AtomicU64::new(0), std::sync::Barrier::new(3));
        let rounds = std::thread::scope(|s| {
            for w in 0..2u64 {
                let (d, done, start) = (&d, &done, &start);
                s.spawn(move || {
                    d.enter_slot(w as usize);
                    start.wait();
                    // Both workers write the same pages (disjoint bytes): one log, page GSNs
                    // advanced by both.
                    for i in 0..PER_WORKER {
                        d.capture((8 + i % 40) * PAGE_SIZE_U64 + w * 8, &[1; 8]);
                        // Spread the captures over many rounds.
                        (0..1000).for_each(|_| std::hint::spin_loop());
                    }
                    done.fetch_add(1, Ordering::Release);
                });
            }
            let mut rounds = Vec::new();
            start.wait();
            while done.load(Ordering::Acquire) < 2 {
                d.full_round().expect("round");
                let round = (d.horizon.load(Ordering::Acquire), d.logs[0].forced());
                if rounds.last() != Some(&round) {
                    rounds.push(round);
                }
            }
            rounds
        });
        d.full_round().expect("last round");
        // Every record, as (GSN, start LSN), from the durable log.
        let mut recs = Vec::new();
        log::scan(&region, AREA, LOG_BYTES, 0, u64::MAX / 2, |r| {
            recs.push((r.gsn.expect("a GSN store"), r.place - AREA));
        })
        .expect("scan");
        assert_eq!(recs.len() as u64, 2 * PER_WORKER, "every record reached the log");
        recs.sort_unstable();
        let mut furthest = 0;
        let prefix: Vec<(u64, u64)> = recs
            .iter()
            .map(|&(g, start)| {
                furthest = furthest.max(start);
                (g, furthest)
            })
            .collect();
        for (h, forced) in &rounds {
            let covered = prefix.partition_point(|(g, _)| g <= h);
            if let Some(&(g, start)) = covered.checked_sub(1).map(|i| &prefix[i]) {
                assert!(start < *forced, "H {h} covers GSN {g} at LSN {start}, forced {forced}");
            }
        }
        eprintln!("{} distinct rounds over {} records", rounds.len(), recs.len());
        assert!(rounds.len() > 1, "no round ran while the workers captured");
    }

    /// Guards GSNs without a counter shared by all records (issue 35, W&J §3.1: `max(tx GSN,
    /// page GSN) + 1`): in one shared log a slot's record on a page no one else wrote is
    /// numbered from its own slot and page alone, and a record on a page another slot wrote is
    /// above that slot's record there. Would catch: a log (or global) GSN clock as an input
    /// again (one shared atomic maximum per record on `page:N`), or a page's GSN not advanced.
    #[test]
    fn a_records_gsn_follows_its_slot_and_page_not_its_log() {
        let (_region, d) = dlog_of(LogLayout::Page(1));
        let page = |p: u64| p * PAGE_SIZE_U64;
        let gsn = |d: &Dlog, slot: usize| d.slots[slot].gsn.load(Ordering::Acquire);
        d.enter_slot(0);
        for i in 0..50 {
            d.capture(page(8) + i * 8, &[1; 8]);
        }
        assert_eq!(gsn(&d, 0), 50, "slot 0's records are numbered by its slot and page");
        d.enter_slot(1);
        d.capture(page(9), &[2; 8]);
        assert_eq!(gsn(&d, 1), 1, "slot 1's first record, on its own page, follows no clock");
        // The same page as slot 0's records: above the page's last GSN, in the same log.
        d.capture(page(8) + 400, &[3; 8]);
        assert_eq!(gsn(&d, 1), 51, "a record on a page is above the page's earlier records");
        d.enter_slot(0);
        d.capture(page(10), &[4; 8]);
        assert_eq!(gsn(&d, 0), 51, "slot 0 follows its own GSN on a fresh page");
        // A fence raises the floor (early lock release): every later record is above it.
        d.enter_slot(1);
        for i in 0..10 {
            d.capture(page(9) + 8 + i * 8, &[5; 8]);
        }
        assert_eq!(gsn(&d, 1), 61);
        d.publish();
        d.enter_slot(0);
        d.capture(page(11), &[6; 8]);
        assert_eq!(gsn(&d, 0), 62, "a record after another slot's fence is above its GSN");
    }

    /// Guards a commit that takes no reservation lock (issue 35): the logs' reservation locks
    /// are taken once per record and never by the commit that forces them, although it forces
    /// every log its slot touched to that log's reserved end. Would catch: `reserved_end` read
    /// under the reservation lock again (one more acquisition per touched log per commit).
    #[test]
    fn a_commit_takes_no_reservation_lock_of_the_logs_it_forces() {
        for layout in [LogLayout::Page(2), LogLayout::Txn(2)] {
            let (_region, d) = dlog_of(layout);
            let locks = |d: &Dlog| d.logs.iter().map(|l| l.reservation_locks()).sum::<u64>();
            d.enter_slot(1);
            for commit in 0..20u64 {
                let records = 1 + commit % 4;
                for i in 0..records {
                    // Consecutive pages: under `page:2` every commit of 2+ records touches both.
                    d.capture((8 + commit * 4 + i) * PAGE_SIZE_U64, &[commit as u8; 16]);
                }
                let before = locks(&d);
                d.commit().expect("commit");
                assert_eq!(locks(&d), before, "{layout}: commit {commit} took a reservation lock");
                for log in &d.logs {
                    assert_eq!(log.forced(), log.reserved_end(), "{layout}: a log left unforced");
                }
            }
            // Every acquisition was a record's: 1+2+3+4 records per four commits.
            assert_eq!(locks(&d), 5 * 10, "{layout}: one acquisition per record");
        }
    }

    /// Guards a `begin` that writes nothing shared once its slot is known (issue 35):
    /// `enter_slot` read-modify-writes the highest slot in use only when it grows. Would catch:
    /// the unconditional `fetch_max` again (one shared RMW per `begin` on every worker).
    #[test]
    fn entering_a_slot_already_covered_writes_nothing_shared() {
        let (_region, d) = dlog();
        let used = |d: &Dlog| d.slots_used.load(Ordering::Relaxed);
        let grows = |d: &Dlog| d.slot_grows.load(Ordering::Relaxed);
        std::thread::scope(|s| {
            for w in [3usize, 1] {
                let d = &d;
                s.spawn(move || {
                    for _ in 0..1000 {
                        d.enter_slot(w);
                    }
                });
            }
        });
        assert_eq!(used(&d), 3, "the highest slot entered");
        assert!(grows(&d) <= 2, "{} RMWs for 2000 begins on slots 1 and 3", grows(&d));
        let before = grows(&d);
        for w in [0, 2, 3, 1] {
            d.enter_slot(w);
        }
        assert_eq!(grows(&d), before, "slots at or below the highest write nothing");
        d.enter_slot(7);
        assert_eq!((used(&d), grows(&d)), (7, before + 1), "a new highest slot grows it once");
        // The daemon's scan covers every slot entered, the system slot included.
        assert_eq!(d.active_slots().count(), 8 + 1);
    }

    /// Guards per-slot commit queues (issue 35, W&J §4 passive group commit): a queued commit
    /// on a worker takes none of the log manager's mutexes (the old commit queue's was taken by
    /// every commit), and its token still becomes durable only once a round's `H` covers it.
    /// Would catch: a shared queue lock on the commit path again, or a token acknowledged
    /// before `H` covers it. A slot whose queue is full runs a full round itself (durable).
    #[test]
    fn a_queued_commit_takes_no_shared_mutex_and_waits_for_the_horizon() {
        for layout in [LogLayout::Txn(2), LogLayout::Page(2)] {
            let (_region, d) = dlog_of(layout);
            const COMMITS: u64 = 200;
            let before = d.lock_acquisitions();
            let tokens: Vec<Vec<CommitToken>> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2u64)
                    .map(|w| {
                        let d = &d;
                        s.spawn(move || {
                            d.enter_slot(w as usize);
                            (0..COMMITS)
                                .map(|i| {
                                    let page = 8 + w * 40 + i % 40;
                                    d.capture(page * PAGE_SIZE_U64 + 8 * w, &[i as u8; 16]);
                                    d.commit().expect("commit")
                                })
                                .collect()
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().expect("worker")).collect()
            });
            assert_eq!(d.lock_acquisitions(), before, "{layout}: a commit took a mutex");
            let all: Vec<CommitToken> = tokens.iter().flatten().copied().collect();
            assert!(all.iter().all(|t| t.0 > 0 && !d.is_durable(*t)), "{layout}: queued");
            assert!(tokens.iter().all(|w| w.windows(2).all(|p| p[0].0 < p[1].0)), "{layout}");
            assert_eq!(d.stats.get(DlogStat::CommitsQueued), 2 * COMMITS, "{layout}");
            // The daemon's round: every slot is clean, so `H` covers every queued commit.
            let oldest = d.oldest_queued().expect("commits are queued");
            assert_eq!(oldest, all.iter().map(|t| t.0).min().unwrap_or(0), "{layout}");
            d.passive_round(oldest);
            assert_eq!(d.acknowledge(false), None, "{layout}: every queue drained");
            assert!(all.iter().all(|t| d.is_durable(*t)), "{layout}: H covers every commit");
            assert!(d.lock_acquisitions() > before, "{layout}: the round's locks are counted");
            // A full queue: the committer runs a full round itself and is durable at once.
            d.enter_slot(1);
            let full = (0..SLOT_QUEUE_CAPACITY as u64 + 1).map(|i| {
                d.capture((100 + i % 20) * PAGE_SIZE_U64, &[1; 8]);
                d.commit().expect("commit")
            });
            assert_eq!(full.last(), Some(CommitToken::DURABLE), "{layout}: a full queue");
            assert_eq!(d.stats.get(DlogStat::QueueFull), 1, "{layout}");
        }
    }

    /// Regression (found by reading the commit path): a commit forced its logs only up to their
    /// filled prefix, which stops at the oldest copy still in flight, so with another thread's
    /// copy in flight before the committer's records (a shared log) the slot was marked clean
    /// (and `H` could cover it) with records not yet durable.
    #[test]
    fn a_commit_makes_its_own_records_durable_past_another_threads_copy_in_flight() {
        let (_region, d) = dlog();
        d.enter_slot(0);
        d.capture(8 * PAGE_SIZE_U64, &[1; 16]);
        d.commit().expect("commit");
        let log = &d.logs[0];
        assert_eq!(log.forced(), log.reserved_end(), "the first commit forced its record");
        // Another thread sharing this log has reserved and is still copying.
        let held = log.start_copy();
        d.capture(9 * PAGE_SIZE_U64, &[2; 16]);
        let mine = log.reserved_end();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                log.finish_copy(held);
            });
            d.commit().expect("commit");
            assert!(
                log.forced() >= mine,
                "commit returned with its record not forced: forced {} < {mine}",
                log.forced()
            );
        });
        assert!(d.slots[0].dgsn.load(Ordering::Acquire) & DIRTY == 0, "the slot is clean");
    }
}

//! The log manager `wal` runs on — Pelley et al., VLDB 2014, §3.2 (`persist_wal`, one central
//! log) and Wang & Johnson, VLDB 2014, §3-§4 (distributed logs, passive group commit). See
//! `docs/design.md` §4.
//!
//! [`LogManager`] is everything the buffer pool, the page flusher and the commit path ask of
//! the log: capture the buffer pool's stores as records, make a commit durable, force the log
//! before pages are written back (the WAL rule), and move the redo point after a checkpoint.
//! [`Central`] (`log=central`, one [`Log`]) and [`Dlog`] (`log=txn:N|page:N`) implement it;
//! `wal` holds one `Arc<dyn LogManager>` and never asks which. The central log is Aether's
//! (Johnson et al., VLDB 2010): records inserted through a consolidation array (§4-§5,
//! [`super::carray`], `log_insert=consolidated`) and commits acknowledged by flush pipelining
//! (§3, [`super::pipeline`], `log_force=pipelined`); the older paths stay selectable as the
//! baselines (`log_insert=aether|locked`, `log_force=inline`).
//!
//! **Invariant every implementation keeps**: a record is durable before [`LogManager::commit`]
//! acknowledges a commit that depends on it, and before [`LogManager::force_for_pages`] returns
//! for a page copy that holds its change; the redo point moves only in
//! [`LogManager::advance_redo`], after the checkpoint's pages are durable.

use super::capture::Capture;
use super::dlog::{Cache, Dlog, DlogStat};
use super::log::Log;
use super::pipeline::{LogForce, Pipeline};
use super::{control, C_REDO};
use crate::device::Device;
use pmem::{Region, StoreObserver};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use storage::{CommitToken, Result};

/// The log's work since open, summed over its logs (bench's `engine` figures).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ForceTotals {
    pub forces: u64,
    /// Persist barriers the forces issued (2 per `persist_wal`).
    pub force_fences: u64,
    pub bytes_forced: u64,
    pub copy_waits: u64,
    /// Acquisitions of the logs' reservation locks (issue 35: once per record or group, its
    /// release takes none).
    pub reserve_locks: u64,
}

impl ForceTotals {
    fn of<'a>(logs: impl Iterator<Item = &'a Log>) -> ForceTotals {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        logs.fold(ForceTotals::default(), |t, l| ForceTotals {
            forces: t.forces + get(&l.forces),
            force_fences: t.force_fences + get(&l.force_fences),
            bytes_forced: t.bytes_forced + get(&l.bytes_forced),
            copy_waits: t.copy_waits + get(&l.copy_waits),
            reserve_locks: t.reserve_locks + l.reservation_locks(),
        })
    }
}

/// What `wal` asks of its log; see the module doc.
pub(crate) trait LogManager: Send + Sync {
    /// The observer installed on the buffer pool: its stores become records, its fences
    /// order them.
    fn observer(self: Arc<Self>) -> Arc<dyn StoreObserver>;

    /// The calling thread works for `worker` from now on.
    fn enter_worker(&self, worker: usize);

    /// The calling thread works outside any worker (recovery's undo, a catalog change, a
    /// close); callers serialize these.
    fn enter_system(&self);

    /// Everything logged so far is durable when this returns (the end of system work).
    fn force_all(&self) -> Result<()>;

    /// The calling thread committed (`token` is the engine's): its records are forced, or its
    /// commit is queued; returns the token to acknowledge it with.
    fn commit(&self, token: CommitToken) -> Result<CommitToken>;

    fn is_durable(&self, token: CommitToken) -> bool;

    fn wait_durable(&self, token: CommitToken) -> Result<()>;

    /// A force failed or a log overflowed: nothing logged since can be trusted.
    fn failed(&self) -> bool;

    /// Every log's end (operations quiesced): a checkpoint's cut.
    fn ends(&self) -> Vec<u64>;

    /// The WAL rule before pages copied when the logs ended at `ends` are written back.
    fn force_for_pages(&self, ends: &[u64]) -> Result<()>;

    /// A checkpoint's pages up to `cut` are durable: moves the redo point(s) there (persisted)
    /// and frees the log space before it.
    fn advance_redo(&self, cut: &[u64]);

    /// (bytes used, capacity) of the fullest log.
    fn most_used(&self) -> (u64, u64);

    fn totals(&self) -> ForceTotals;

    /// Figures beyond [`ForceTotals`] this log keeps, appended to the engine's activity.
    fn activity(&self, into: &mut Vec<(&'static str, u64)>);

    /// Whether [`Self::daemon`] must run on a thread of its own while the engine is open.
    fn needs_daemon(&self) -> bool;

    /// The log's background loop (returns after [`Self::stop_daemon`]).
    fn daemon(&self);

    fn stop_daemon(&self);
}

/// `log=central`: one circular log. `log_force=pipelined`: the log flush daemon forces it and
/// commits are acknowledged when the durable LSN passes them ([`Pipeline`]); `inline`:
/// `persist_wal` at each commit, concurrent commits sharing a force (group commit,
/// [`Log::force`]).
pub(crate) struct Central {
    log: Arc<Log>,
    nvram: Region,
    device: Arc<Device>,
    /// Test fault: `persist_wal` without its second barrier.
    skip_log_barrier: bool,
    force: LogForce,
    pipeline: Pipeline,
}

impl Central {
    pub fn new(
        log: Log,
        nvram: Region,
        device: Arc<Device>,
        skip_log_barrier: bool,
        force: LogForce,
    ) -> Central {
        let pipeline = Pipeline::default();
        Central { log: Arc::new(log), nvram, device, skip_log_barrier, force, pipeline }
    }
}

impl LogManager for Central {
    fn observer(self: Arc<Self>) -> Arc<dyn StoreObserver> {
        Arc::new(Capture(self.log.clone()))
    }

    /// One log for every worker: nothing to choose.
    fn enter_worker(&self, _worker: usize) {}

    fn enter_system(&self) {}

    fn force_all(&self) -> Result<()> {
        self.log.force(self.log.appended(), false)
    }

    /// The commit's records (this thread's, up to its commit mark): queued for the flush
    /// daemon (the token is their end LSN), or forced here with Pelley's `persist_wal`.
    fn commit(&self, token: CommitToken) -> Result<CommitToken> {
        if self.force == LogForce::Pipelined {
            let skip = self.skip_log_barrier;
            return self.pipeline.commit(&self.log, self.log.thread_end(), skip);
        }
        self.log.force(self.log.thread_end(), self.skip_log_barrier)?;
        Ok(token)
    }

    /// An inline commit's token is [`CommitToken::DURABLE`]: true at once.
    fn is_durable(&self, token: CommitToken) -> bool {
        self.pipeline.is_durable(&self.log, token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.pipeline.wait_durable(&self.log, token, self.skip_log_barrier)
    }

    fn failed(&self) -> bool {
        self.log.overflowed()
    }

    fn ends(&self) -> Vec<u64> {
        vec![self.log.appended()]
    }

    fn force_for_pages(&self, ends: &[u64]) -> Result<()> {
        self.log.force(ends[0], false)
    }

    fn advance_redo(&self, cut: &[u64]) {
        let cut = cut[0];
        if self.nvram.read_u64(control(C_REDO)) < cut {
            self.device.write_u64(control(C_REDO), cut);
            self.device.persist(control(C_REDO), 8);
        }
        self.log.truncate(cut);
    }

    fn most_used(&self) -> (u64, u64) {
        (self.log.used(), self.log.capacity())
    }

    fn totals(&self) -> ForceTotals {
        ForceTotals::of(std::iter::once(&*self.log))
    }

    fn activity(&self, into: &mut Vec<(&'static str, u64)>) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (groups, grouped) = self.log.groups();
        into.extend([
            ("insert_groups", groups),
            ("insert_grouped_records", grouped),
            ("flush_daemon_rounds", get(&self.pipeline.rounds)),
            ("commit_blocked_waits", get(&self.pipeline.blocked_waits)),
            ("commit_helped_forces", get(&self.pipeline.helped)),
        ]);
    }

    /// The log flush daemon of `log_force=pipelined`.
    fn needs_daemon(&self) -> bool {
        self.force == LogForce::Pipelined
    }

    fn daemon(&self) {
        self.pipeline.daemon(&self.log, self.skip_log_barrier);
    }

    fn stop_daemon(&self) {
        self.pipeline.stop();
    }
}

/// The store observer of a distributed log.
struct DCapture(Arc<Dlog>);

impl StoreObserver for DCapture {
    fn on_store(&self, offset: u64, bytes: &[u8]) {
        self.0.capture(offset, bytes);
    }

    fn on_fence(&self) {
        self.0.publish();
    }
}

/// `log=txn:N|page:N`: see [`super::dlog`].
impl LogManager for Dlog {
    fn observer(self: Arc<Self>) -> Arc<dyn StoreObserver> {
        Arc::new(DCapture(self))
    }

    fn enter_worker(&self, worker: usize) {
        self.enter_slot(worker);
    }

    fn enter_system(&self) {
        Dlog::enter_system(self);
    }

    fn force_all(&self) -> Result<()> {
        self.system_done()
    }

    /// Passive group commit ([`Dlog::commit`]).
    fn commit(&self, _token: CommitToken) -> Result<CommitToken> {
        Dlog::commit(self)
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        Dlog::is_durable(self, token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        Dlog::wait_durable(self, token)
    }

    fn failed(&self) -> bool {
        Dlog::failed(self)
    }

    fn ends(&self) -> Vec<u64> {
        self.appended()
    }

    /// Every record up to the highest GSN handed out, whatever `ends` says: the WAL rule
    /// across logs.
    fn force_for_pages(&self, _ends: &[u64]) -> Result<()> {
        self.before_page_writes()
    }

    fn advance_redo(&self, cut: &[u64]) {
        Dlog::advance_redo(self, cut);
    }

    fn most_used(&self) -> (u64, u64) {
        Dlog::most_used(self)
    }

    fn totals(&self) -> ForceTotals {
        ForceTotals::of(self.logs.iter().map(|l| &**l))
    }

    fn activity(&self, into: &mut Vec<(&'static str, u64)>) {
        into.extend(DlogStat::ALL.iter().map(|&(stat, name)| (name, self.stats.get(stat))));
    }

    /// The passive group commit daemon; a durable cache acknowledges at insert and needs none.
    fn needs_daemon(&self) -> bool {
        self.cache == Cache::Volatile
    }

    fn daemon(&self) {
        Dlog::daemon(self);
    }

    fn stop_daemon(&self) {
        Dlog::stop_daemon(self);
    }
}

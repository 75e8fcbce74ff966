//! One worker thread of a power run: runs its workload worker's transactions back to back and
//! measures each one until its commit is durable.
//!
//! Commits whose token is durable when `commit` returns (synchronous engines) complete at once.
//! The others (group commit) wait in a bounded per-thread FIFO of `(token, start)` that is polled
//! with `Engine::is_durable` after every transaction, so the worker keeps generating load while a
//! batch persists; when the FIFO is full the worker blocks in `wait_durable` on the oldest entry.
//! The FIFO is polled from its head and stops at the first token not yet durable: a worker's
//! tokens become durable in commit order (they are batch numbers), and an engine that broke that
//! would only see later observations, never wrong ones.
//!
//! Invariant: every commit is observed durable exactly once (polled, waited for when the queue
//! is full, or drained at the end), and only then counted and handed to the ack sink.

use crate::acks::{DurableSink, DurableTxn};
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};
use storage::{CommitToken, DbError, Engine};
use workloads::{Ack, TxnDone, Worker};

/// Phases of a run, in the order they happen.
pub(crate) const PHASE_WARMUP: u8 = 0;
pub(crate) const PHASE_MEASURE: u8 = 1;
pub(crate) const PHASE_STOP: u8 = 2;

/// Largest latency the histograms hold exactly (1 hour); longer ones are recorded as this.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;
/// Significant digits of the latency histograms (0.1% relative error).
pub const LATENCY_SIGFIGS: u8 = 3;

/// A worker whose transactions fail with retryable errors this many times in a row (the
/// workload's own retry bound already exhausted each time) gives up: the run is livelocked.
pub const MAX_CONSECUTIVE_FAILURES: u32 = 10_000;

/// State shared by the coordinator and the workers. The phase word is read after every
/// transaction, so it sits alone on its cache line and is written only at phase changes.
pub(crate) struct Control {
    phase: CachePadded<AtomicU8>,
    /// Next `DurableTxn::seq`.
    seq: CachePadded<AtomicU64>,
    /// Per worker: transactions observed durable so far, all phases (for progress display).
    done: Box<[CachePadded<AtomicU64>]>,
    /// Workers that have left their loop (finished, failed or panicked).
    exited: AtomicU64,
    /// What `finished_ns` counts from.
    epoch: Instant,
    /// Nanoseconds after `epoch` at which the last worker so far had its last transaction
    /// durable (0: none yet). A `--txns` run ends there, not at the coordinator's next poll.
    finished_ns: AtomicU64,
}

impl Control {
    pub(crate) fn new(workers: usize, phase: u8) -> Control {
        Control {
            phase: CachePadded::new(AtomicU8::new(phase)),
            seq: CachePadded::new(AtomicU64::new(0)),
            done: (0..workers).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            exited: AtomicU64::new(0),
            epoch: Instant::now(),
            finished_ns: AtomicU64::new(0),
        }
    }

    /// A worker's last transaction became durable now.
    fn finished(&self) {
        // At least 1 ns, so that 0 keeps meaning "none yet".
        let ns = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        self.finished_ns.fetch_max(ns, Ordering::AcqRel);
    }

    /// When the last worker to finish had its last transaction durable, if any has.
    pub(crate) fn last_finished(&self) -> Option<Instant> {
        match self.finished_ns.load(Ordering::Acquire) {
            0 => None,
            ns => self.epoch.checked_add(Duration::from_nanos(ns)),
        }
    }

    #[inline]
    pub(crate) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Relaxed)
    }

    pub(crate) fn set_phase(&self, phase: u8) {
        self.phase.store(phase, Ordering::Relaxed);
    }

    pub(crate) fn workers(&self) -> usize {
        self.done.len()
    }

    pub(crate) fn completed(&self) -> u64 {
        self.done.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }

    pub(crate) fn exited(&self) -> u64 {
        self.exited.load(Ordering::Acquire)
    }
}

/// Marks the worker as gone when its loop ends in any way, and stops the others if it failed
/// (or panicked): one broken worker ends the run instead of letting it go on measuring less.
struct ExitGuard<'a> {
    control: &'a Control,
    ok: bool,
}

impl Drop for ExitGuard<'_> {
    fn drop(&mut self) {
        if !self.ok {
            self.control.set_phase(PHASE_STOP);
        }
        self.control.exited.fetch_add(1, Ordering::Release);
    }
}

/// What one worker was asked to do.
pub(crate) struct WorkerConfig<'a> {
    pub index: usize,
    pub max_pending: usize,
    /// `--target-tps`: this worker starts a transaction at most once per interval.
    pub txn_interval: Option<std::time::Duration>,
    pub txn_limit: Option<u64>,
    pub sink: Option<&'a dyn DurableSink>,
}

/// Why a worker stopped early.
#[derive(Debug)]
pub(crate) enum WorkerError {
    Db(DbError),
    Livelock { failures: u32, last: DbError },
}

/// One worker's measurements.
pub(crate) struct Tally {
    /// Commits observed durable inside the measured period.
    pub committed: u64,
    /// Conflicts retried plus retryable failures, inside the measured period.
    pub aborted: u64,
    /// Commits observed durable in any phase (including the final drain).
    pub completed_total: u64,
    /// Transactions started (the worker's stream position).
    pub started: u64,
    pub latency_ns: Histogram<u64>,
    /// Committed count per transaction kind, measured period only.
    pub kinds: Vec<(&'static str, u64)>,
    /// Most commits waiting for durability at once.
    pub pending_high_water: usize,
    /// Times the pending queue was full and the worker blocked.
    pub pending_full_waits: u64,
    /// The region filled up under this worker: the run stopped early (results so far stand).
    pub region_full: Option<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            committed: 0,
            aborted: 0,
            completed_total: 0,
            started: 0,
            // The bounds are constants within what HDR histograms accept.
            latency_ns: Histogram::new_with_bounds(1, MAX_LATENCY_NS, LATENCY_SIGFIGS)
                .expect("constant histogram bounds are valid"),
            kinds: Vec::new(),
            pending_high_water: 0,
            pending_full_waits: 0,
            region_full: None,
        }
    }
}

struct Pending {
    token: CommitToken,
    txn: u64,
    start_ticks: u64,
    kind: &'static str,
    acks: Vec<Ack>,
}

struct Loop<'a> {
    engine: &'a dyn Engine,
    control: &'a Control,
    config: &'a WorkerConfig<'a>,
    ns_per_tick: f64,
    pending: VecDeque<Pending>,
    to_sink: Vec<DurableTxn>,
    tally: Tally,
}

/// Runs worker `config.index` until the phase is STOP or its transaction limit is reached,
/// then drains its pending commits.
pub(crate) fn run_worker(
    engine: &dyn Engine,
    mut worker: Box<dyn Worker>,
    config: &WorkerConfig<'_>,
    control: &Control,
) -> Result<Tally, WorkerError> {
    let mut guard = ExitGuard { control, ok: false };
    let mut state = Loop {
        engine,
        control,
        config,
        ns_per_tick: 1.0 / pmem::Tsc::get().ticks_per_ns(),
        pending: VecDeque::with_capacity(config.max_pending),
        to_sink: Vec::new(),
        tally: Tally::new(),
    };
    let mut failures_in_a_row = 0u32;
    let mut pace = config.txn_interval.map(Pace::new);
    loop {
        if control.phase() == PHASE_STOP
            || config.txn_limit.is_some_and(|limit| state.tally.started >= limit)
        {
            break;
        }
        if let Some(p) = pace.as_mut() {
            p.wait(&mut state);
        }
        let txn = state.tally.started;
        state.tally.started += 1;
        let start_ticks = pmem::timing::rdtsc();
        let outcome = worker.run_one(engine);
        let measuring = control.phase() == PHASE_MEASURE;
        match outcome {
            Ok(done) => {
                failures_in_a_row = 0;
                if measuring {
                    state.tally.aborted += u64::from(done.retries);
                }
                state.committed(txn, start_ticks, done, measuring).map_err(WorkerError::Db)?;
            }
            Err(e) if e.is_retryable() => {
                if measuring {
                    state.tally.aborted += 1;
                }
                failures_in_a_row += 1;
                if failures_in_a_row >= MAX_CONSECUTIVE_FAILURES {
                    return Err(WorkerError::Livelock { failures: failures_in_a_row, last: e });
                }
            }
            // A full region ends the run, not the measurement: what committed so far stands,
            // the others stop, and the checker still runs on the committed state.
            Err(DbError::RegionFull(why)) => {
                state.tally.region_full = Some(why);
                control.set_phase(PHASE_STOP);
                break;
            }
            Err(e) => return Err(WorkerError::Db(e)),
        }
        if !state.pending.is_empty() {
            state.poll(measuring);
        }
        state.deliver();
    }
    state.drain().map_err(WorkerError::Db)?;
    control.finished();
    state.deliver();
    guard.ok = true;
    Ok(state.tally)
}

/// The open-loop rate limit of one worker: transaction `k` starts no earlier than `k`
/// intervals after the first. A worker behind schedule (a stall, a slow transaction) catches
/// up, but by at most [`Pace::CATCH_UP`] intervals, so a long stall is not followed by a burst.
struct Pace {
    interval: std::time::Duration,
    next: std::time::Instant,
}

impl Pace {
    const CATCH_UP: u32 = 64;

    fn new(interval: std::time::Duration) -> Pace {
        Pace { interval, next: std::time::Instant::now() }
    }

    /// Waits for the next start, completing durable commits meanwhile.
    fn wait(&mut self, state: &mut Loop<'_>) {
        loop {
            let now = std::time::Instant::now();
            if now >= self.next || state.control.phase() == PHASE_STOP {
                break;
            }
            let measuring = state.control.phase() == PHASE_MEASURE;
            if !state.pending.is_empty() {
                state.poll(measuring);
                state.deliver();
            }
            let left = self.next - now;
            // Sleeping overshoots by tens of microseconds: sleep only on long waits.
            if left > std::time::Duration::from_micros(200) {
                std::thread::sleep(left - std::time::Duration::from_micros(100));
            } else {
                std::thread::yield_now();
            }
        }
        let floor = std::time::Instant::now().checked_sub(self.interval * Self::CATCH_UP);
        self.next = floor.map_or(self.next + self.interval, |f| f.max(self.next + self.interval));
    }
}

impl Loop<'_> {
    /// A transaction returned from `commit` (or finished without committing anything).
    fn committed(
        &mut self,
        txn: u64,
        start_ticks: u64,
        done: TxnDone,
        measuring: bool,
    ) -> Result<(), DbError> {
        let TxnDone { kind, token, acks, .. } = done;
        let must_wait = match token {
            None | Some(CommitToken::DURABLE) => None,
            // Only look if nothing older is waiting: durability is observed in commit order.
            Some(t) if self.pending.is_empty() && self.engine.is_durable(t) => None,
            Some(t) => Some(t),
        };
        let Some(token) = must_wait else {
            self.complete(txn, start_ticks, kind, token, acks, measuring);
            return Ok(());
        };
        if self.pending.len() >= self.config.max_pending {
            self.tally.pending_full_waits += 1;
            if let Some(oldest) = self.pending.pop_front() {
                self.engine.wait_durable(oldest.token)?;
                let measuring = self.control.phase() == PHASE_MEASURE;
                self.complete_pending(oldest, measuring);
            }
        }
        self.pending.push_back(Pending { token, txn, start_ticks, kind, acks });
        self.tally.pending_high_water = self.tally.pending_high_water.max(self.pending.len());
        Ok(())
    }

    /// Completes the head of the queue while its tokens are durable.
    fn poll(&mut self, measuring: bool) {
        while let Some(head) = self.pending.front() {
            if !self.engine.is_durable(head.token) {
                break;
            }
            if let Some(head) = self.pending.pop_front() {
                self.complete_pending(head, measuring);
            }
        }
    }

    /// At the end of the run: waits for every pending commit (counted only if the phase still
    /// says measuring, as in a run bounded by a transaction count).
    fn drain(&mut self) -> Result<(), DbError> {
        while let Some(head) = self.pending.pop_front() {
            self.engine.wait_durable(head.token)?;
            let measuring = self.control.phase() == PHASE_MEASURE;
            self.complete_pending(head, measuring);
        }
        Ok(())
    }

    fn complete_pending(&mut self, p: Pending, measuring: bool) {
        self.complete(p.txn, p.start_ticks, p.kind, Some(p.token), p.acks, measuring);
    }

    #[inline]
    fn complete(
        &mut self,
        txn: u64,
        start_ticks: u64,
        kind: &'static str,
        token: Option<CommitToken>,
        acks: Vec<Ack>,
        measuring: bool,
    ) {
        self.tally.completed_total += 1;
        self.control.done[self.config.index].store(self.tally.completed_total, Ordering::Relaxed);
        if measuring {
            let ticks = pmem::timing::rdtsc().saturating_sub(start_ticks);
            let ns = (ticks as f64 * self.ns_per_tick) as u64;
            self.tally.latency_ns.saturating_record(ns.max(1));
            self.tally.committed += 1;
            match self.tally.kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => self.tally.kinds.push((kind, 1)),
            }
        }
        if self.config.sink.is_some() && !acks.is_empty() {
            let seq = self.control.seq.fetch_add(1, Ordering::Relaxed);
            let worker = self.config.index;
            self.to_sink.push(DurableTxn { seq, worker, txn, kind, token, acks });
        }
    }

    /// Hands what became durable to the sink, promptly (a crash may come at any moment).
    fn deliver(&mut self) {
        if let (Some(sink), false) = (self.config.sink, self.to_sink.is_empty()) {
            sink.on_durable(&self.to_sink);
            self.to_sink.clear();
        }
    }
}

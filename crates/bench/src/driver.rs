//! The coordinator of a power run (Pelley et al., VLDB 2014, §4): load or attach the database,
//! start N workers together, flip the shared phase word WARMUP -> MEASURE -> STOP at the right
//! times, snapshot the device statistics at both ends of the measured period, join the workers,
//! merge their histograms, run the workload's checker.
//!
//! Invariant: the device-statistics delta and the measured wall time cover the same interval as
//! the phase word's MEASURE value, which is what decides whether a durable commit counts.

use crate::acks::DurableSink;
use crate::report::Checker;
use crate::seed::worker_seed;
use crate::worker::{
    run_worker, Control, Tally, WorkerConfig, WorkerError, LATENCY_SIGFIGS, MAX_LATENCY_NS,
    PHASE_MEASURE, PHASE_STOP, PHASE_WARMUP,
};
use hdrhistogram::Histogram;
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use storage::{DbError, Engine};
use workloads::{Worker, Workload};

/// Most worker threads a run may have.
pub const MAX_THREADS: usize = 1024;
/// Largest per-thread queue of commits waiting for durability.
pub const MAX_PENDING_LIMIT: usize = 1 << 20;
/// Default per-thread queue bound: deep enough for a group-commit batch of a few milliseconds
/// at a few million transactions per second, small enough to stay in cache.
pub const DEFAULT_MAX_PENDING: usize = 4096;
/// How often the coordinator wakes to check for stop requests and report progress.
const TICK: Duration = Duration::from_millis(50);

/// How the database gets its contents before the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Setup {
    /// Create the tables and load the initial database (`Workload::load`).
    Load,
    /// The region already holds the database (reopened): look the tables up.
    Attach,
}

/// How long the workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunLength {
    /// A warm-up, then a measured period, by wall time.
    Timed { warmup: Duration, duration: Duration },
    /// Every worker runs exactly this many transactions, all measured (reproducible runs and
    /// crash tests: the same seed gives the same transactions).
    Transactions { per_thread: u64 },
}

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct RunOptions {
    pub threads: usize,
    pub length: RunLength,
    /// Worker `i` is seeded with [`worker_seed`]`(seed, i)`.
    pub seed: u64,
    pub setup: Setup,
    /// Per-thread bound on commits waiting for durability; a full queue blocks the worker.
    pub max_pending: usize,
    /// Run the workload's checker and the engine's integrity check afterwards.
    pub check: bool,
    /// Cap on the commit rate, all threads together (each worker starts its transactions
    /// `threads / target_tps` apart, catching up after a stall): how thesis Fig. 5.7 runs every
    /// method at In-Place Updates' throughput. `None`: flat out.
    pub target_tps: Option<f64>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 1,
            length: RunLength::Timed {
                warmup: Duration::from_secs(1),
                duration: Duration::from_secs(5),
            },
            seed: 42,
            setup: Setup::Load,
            max_pending: DEFAULT_MAX_PENDING,
            check: true,
            target_tps: None,
        }
    }
}

impl RunOptions {
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Options(m));
        if self.threads == 0 || self.threads > MAX_THREADS {
            return bad(format!("threads must be 1..={MAX_THREADS}, got {}", self.threads));
        }
        if self.max_pending == 0 || self.max_pending > MAX_PENDING_LIMIT {
            return bad(format!(
                "pending-queue bound must be 1..={MAX_PENDING_LIMIT}, got {}",
                self.max_pending
            ));
        }
        if let Some(tps) = self.target_tps {
            if !(tps.is_finite() && tps >= 1.0) {
                return bad(format!("the target rate must be at least 1 tps, got {tps}"));
            }
        }
        match self.length {
            RunLength::Timed { duration, .. } if duration.is_zero() => {
                bad("the measured duration must be longer than zero".into())
            }
            RunLength::Transactions { per_thread: 0 } => {
                bad("transactions per thread must be at least 1".into())
            }
            _ => Ok(()),
        }
    }
}

/// Where the run is, for progress displays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `done` / `total` rows (or whatever unit the loader reports).
    Load,
    /// `done` / `total` milliseconds of the warm-up.
    Warmup,
    /// `done` / `total` milliseconds of the measured period, or transactions in a counted run.
    Measure,
    /// Waiting for the last commits to become durable.
    Drain,
    /// The checker is running.
    Check,
}

/// A progress report.
#[derive(Clone, Copy, Debug)]
pub struct Status {
    pub stage: Stage,
    pub done: u64,
    pub total: u64,
    /// Transactions observed durable so far, all phases.
    pub completed: u64,
}

/// Receives progress now and then (from the coordinator, and from the loader's threads).
pub trait Progress: Sync {
    fn update(&self, status: Status);
}

/// Optional observers and controls of a run.
#[derive(Clone, Copy, Default)]
pub struct Hooks<'a> {
    pub progress: Option<&'a dyn Progress>,
    /// Receives every durable transaction that carries acks (see [`crate::acks`]).
    pub sink: Option<&'a dyn DurableSink>,
    /// Set to end the run early (the measured period ends then).
    pub stop: Option<&'a AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Options(String),
    // The engine's error is a field named `error`, not `source`: its text is in the message
    // already, and as a source an error chain would print it twice.
    #[error("loading workload {workload}: {error}")]
    Load { workload: String, error: DbError },
    #[error(
        "attaching workload {workload} to the existing database: {error}; \
         remove the region file to load afresh"
    )]
    Attach { workload: String, error: DbError },
    #[error("worker {worker}: {error}")]
    Txn { worker: usize, error: DbError },
    #[error(
        "worker {worker}: {failures} retryable failures in a row (last: {last}); \
         the run is livelocked, use fewer threads or a less skewed workload"
    )]
    Livelock { worker: usize, failures: u32, last: DbError },
    #[error("worker {worker} panicked: {message}")]
    Panic { worker: usize, message: String },
    #[error("spawning a worker thread: {0}")]
    Spawn(std::io::Error),
}

impl BenchError {
    /// Whether the error is the region running out of space (the scale does not fit).
    pub fn is_region_full(&self) -> bool {
        matches!(
            self,
            BenchError::Load { error: DbError::RegionFull(_), .. }
                | BenchError::Txn { error: DbError::RegionFull(_), .. }
        )
    }
}

/// Everything a run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub engine: String,
    pub workload: String,
    pub options: RunOptions,
    /// Commits observed durable inside the measured period.
    pub committed: u64,
    /// Conflicts retried (and retryable failures) inside the measured period.
    pub aborted: u64,
    /// Wall time of the measured period.
    pub measured: Duration,
    /// `committed / measured`.
    pub tps: f64,
    /// Latency to durability of the measured commits, all workers merged, in nanoseconds.
    pub latency_ns: Histogram<u64>,
    /// Device statistics over the measured period (`None` for engines without a region).
    pub device: Option<pmem::Stats>,
    /// `Engine::activity` over the measured period.
    pub activity: BTreeMap<String, u64>,
    /// `Engine::footprint_bytes` after the run (and its checker).
    pub footprint_bytes: Option<u64>,
    /// Line write-backs over the measured period (regions opened with `wear` only).
    pub wear: Option<crate::wear::WearSummary>,
    /// Measured commits per transaction kind.
    pub kinds: BTreeMap<String, u64>,
    /// Measured commits per worker.
    pub per_worker: Vec<u64>,
    /// Commits observed durable in any phase (warm-up and final drain included).
    pub completed_total: u64,
    pub pending_high_water: usize,
    pub pending_full_waits: u64,
    pub load_time: Duration,
    pub checker: Checker,
    pub check_time: Duration,
    /// The run was ended early through [`Hooks::stop`], or because the region filled up.
    pub stopped_early: bool,
    /// Why the region filled up, if it did (the run then ended early, results so far stand).
    pub region_full: Option<String>,
}

/// Loads (or attaches), runs and checks. The engine is left open and not shut down: the caller
/// decides (the CLI shuts down cleanly; the crash tester cuts an image instead).
pub fn run(
    engine: &dyn Engine,
    workload: &dyn Workload,
    options: &RunOptions,
    hooks: &Hooks<'_>,
) -> Result<RunResult, BenchError> {
    options.validate()?;
    // The device model's delays apply to the measured run only, as in the papers: loading and
    // checking run at memory speed (their device statistics still count).
    let timing = |on: bool| {
        if let Some(r) = engine.region() {
            r.set_timing_enabled(on);
        }
    };
    timing(false);
    let load_time = prepare(engine, workload, options.setup, hooks);
    timing(true);
    let load_time = load_time?;
    // Workers are built here, in index order, so their streams depend only on the seed.
    let workers: Vec<Box<dyn Worker>> =
        (0..options.threads).map(|i| workload.worker(i, worker_seed(options.seed, i))).collect();
    let measured = measure(engine, workers, options, hooks)?;
    let check_started = Instant::now();
    report(hooks, Stage::Check, 0, 1, measured.tallies_completed());
    timing(false);
    let checker = if options.check { check(engine, workload) } else { Checker::Skipped };
    timing(true);
    let check_time = check_started.elapsed();
    Ok(measured.into_result(engine, workload, options, load_time, checker, check_time))
}

/// Loads `workload` into a fresh `engine` and marks it loaded, as a run's [`Setup::Load`] does
/// (at memory speed: the device model's delays are off), without running it: `nvmdb bench
/// --image` loads once, saves the image, and runs on copies of it.
pub fn load(
    engine: &dyn Engine,
    workload: &dyn Workload,
    hooks: &Hooks<'_>,
) -> Result<Duration, BenchError> {
    if let Some(r) = engine.region() {
        r.set_timing_enabled(false);
    }
    let loaded = prepare(engine, workload, Setup::Load, hooks);
    if let Some(r) = engine.region() {
        r.set_timing_enabled(true);
    }
    loaded
}

fn report(hooks: &Hooks<'_>, stage: Stage, done: u64, total: u64, completed: u64) {
    if let Some(p) = hooks.progress {
        p.update(Status { stage, done, total, completed });
    }
}

fn prepare(
    engine: &dyn Engine,
    workload: &dyn Workload,
    setup: Setup,
    hooks: &Hooks<'_>,
) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let name = workload.name().to_string();
    match setup {
        Setup::Load => {
            let progress = |done: u64, total: u64| report(hooks, Stage::Load, done, total, 0);
            workload
                .load(engine, &progress)
                .and_then(|()| crate::loaded::mark_loaded(engine, &name))
                .map_err(|error| BenchError::Load { workload: name, error })?;
        }
        Setup::Attach => {
            let attach_error = |error| BenchError::Attach { workload: name.clone(), error };
            match crate::loaded::load_state(engine) {
                crate::loaded::LoadState::Complete(loaded) if loaded != name => {
                    return Err(attach_error(DbError::Invalid(format!(
                        "the database holds workload {loaded}, not {name}"
                    ))));
                }
                crate::loaded::LoadState::Incomplete => {
                    return Err(attach_error(DbError::Invalid(
                        "the database is half-loaded (its load was interrupted)".into(),
                    )));
                }
                _ => {}
            }
            workload.attach(engine).map_err(attach_error)?;
        }
    }
    Ok(started.elapsed())
}

/// The workers' tallies and the coordinator's view of the measured period.
struct Measured {
    tallies: Vec<Tally>,
    measured: Duration,
    device: Option<pmem::Stats>,
    activity: Vec<(&'static str, u64)>,
    wear: Option<crate::wear::WearSummary>,
    stopped_early: bool,
}

impl Measured {
    fn tallies_completed(&self) -> u64 {
        self.tallies.iter().map(|t| t.completed_total).sum()
    }

    fn into_result(
        self,
        engine: &dyn Engine,
        workload: &dyn Workload,
        options: &RunOptions,
        load_time: Duration,
        checker: Checker,
        check_time: Duration,
    ) -> RunResult {
        let mut latency_ns = Histogram::new_with_bounds(1, MAX_LATENCY_NS, LATENCY_SIGFIGS)
            .expect("constant histogram bounds are valid");
        let mut kinds = BTreeMap::new();
        for t in &self.tallies {
            // Same bounds on both sides, so adding cannot fail.
            latency_ns.add(&t.latency_ns).expect("histograms share bounds");
            for (kind, n) in &t.kinds {
                *kinds.entry(kind.to_string()).or_insert(0) += n;
            }
        }
        let committed: u64 = self.tallies.iter().map(|t| t.committed).sum();
        let secs = self.measured.as_secs_f64();
        RunResult {
            engine: engine.name().to_string(),
            workload: workload.name().to_string(),
            options: options.clone(),
            committed,
            aborted: self.tallies.iter().map(|t| t.aborted).sum(),
            measured: self.measured,
            tps: if secs > 0.0 { committed as f64 / secs } else { 0.0 },
            latency_ns,
            device: self.device,
            activity: self.activity.iter().map(|&(n, v)| (n.to_string(), v)).collect(),
            footprint_bytes: engine.footprint_bytes(),
            wear: self.wear.clone(),
            kinds,
            per_worker: self.tallies.iter().map(|t| t.committed).collect(),
            completed_total: self.tallies_completed(),
            pending_high_water: self
                .tallies
                .iter()
                .map(|t| t.pending_high_water)
                .max()
                .unwrap_or(0),
            pending_full_waits: self.tallies.iter().map(|t| t.pending_full_waits).sum(),
            load_time,
            checker,
            check_time,
            stopped_early: self.stopped_early,
            region_full: self.tallies.iter().find_map(|t| t.region_full.clone()),
        }
    }
}

fn measure(
    engine: &dyn Engine,
    workers: Vec<Box<dyn Worker>>,
    options: &RunOptions,
    hooks: &Hooks<'_>,
) -> Result<Measured, BenchError> {
    let threads = workers.len();
    // The workers' latency clock calibrates on first use (~20 ms): outside the window.
    pmem::Tsc::get();
    let (first_phase, txn_limit) = match options.length {
        RunLength::Timed { .. } => (PHASE_WARMUP, None),
        RunLength::Transactions { per_thread } => (PHASE_MEASURE, Some(per_thread)),
    };
    let control = Control::new(threads, first_phase);
    let start = Gate::default();
    let configs: Vec<WorkerConfig<'_>> = (0..threads)
        .map(|index| WorkerConfig {
            index,
            max_pending: options.max_pending,
            txn_interval: options
                .target_tps
                .map(|tps| std::time::Duration::from_secs_f64(threads as f64 / tps)),
            txn_limit,
            sink: hooks.sink,
        })
        .collect();
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for (worker, config) in workers.into_iter().zip(&configs) {
            let (control, start) = (&control, &start);
            let spawned = std::thread::Builder::new()
                .name(format!("bench-worker-{}", config.index))
                .spawn_scoped(scope, move || {
                    start.wait();
                    run_worker(engine, worker, config, control)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // Release the threads already waiting; they see STOP and exit at once.
                    control.set_phase(PHASE_STOP);
                    start.open();
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(BenchError::Spawn(e));
                }
            }
        }
        let window = coordinate(engine, &control, options, hooks, &start);
        report(hooks, Stage::Drain, 0, 1, control.completed());
        let mut tallies = Vec::with_capacity(threads);
        let mut first_error = None;
        for (index, handle) in handles.into_iter().enumerate() {
            match handle.join() {
                Ok(Ok(tally)) => tallies.push(tally),
                Ok(Err(e)) => {
                    first_error.get_or_insert(worker_error(index, e));
                }
                Err(payload) => {
                    first_error.get_or_insert(BenchError::Panic {
                        worker: index,
                        message: panic_message(payload.as_ref()),
                    });
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(Measured {
                tallies,
                measured: window.measured,
                device: window.device,
                activity: window.activity,
                wear: window.wear,
                stopped_early: window.stopped_early,
            }),
        }
    })
}

/// Holds the workers until all of them exist, so they start together.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock();
        while !*open {
            self.opened.wait(&mut open);
        }
    }

    fn open(&self) {
        *self.open.lock() = true;
        self.opened.notify_all();
    }
}

struct Window {
    measured: Duration,
    device: Option<pmem::Stats>,
    /// `Engine::activity` over the measured period.
    activity: Vec<(&'static str, u64)>,
    /// The region's wear over the measured period (if it keeps a wear map).
    wear: Option<crate::wear::WearSummary>,
    stopped_early: bool,
}

/// Opens `start` and drives the phases; returns the measured window. Leaves the phase at STOP.
fn coordinate(
    engine: &dyn Engine,
    control: &Control,
    options: &RunOptions,
    hooks: &Hooks<'_>,
    start: &Gate,
) -> Window {
    let threads = control.workers();
    let stats = || engine.region().map(|r| r.stats());
    let (activity_before, activity_after);
    // The wear map restarts with the measured period (a copy of a byte map would be 4 bytes
    // per region byte).
    let wear_reset = || {
        if let Some(w) = engine.region().and_then(|r| r.wear_map()) {
            w.reset()
        }
    };
    let mut stopped_early = false;
    let (measured, device) = match options.length {
        RunLength::Timed { warmup, duration } => {
            start.open();
            if !warmup.is_zero() {
                stopped_early |= wait(control, hooks, Stage::Warmup, warmup, None);
            }
            control.set_phase(PHASE_MEASURE);
            wear_reset();
            activity_before = engine.activity();
            let (t0, s0) = (Instant::now(), stats());
            if !stopped_early {
                stopped_early |= wait(control, hooks, Stage::Measure, duration, None);
            }
            let (s1, t1) = (stats(), Instant::now());
            activity_after = engine.activity();
            control.set_phase(PHASE_STOP);
            (t1 - t0, s1.zip(s0).map(|(s1, s0)| s1.since(&s0)))
        }
        RunLength::Transactions { per_thread } => {
            wear_reset();
            activity_before = engine.activity();
            // The workers measure from their first transaction: the window opens with them.
            let (s0, t0) = (stats(), Instant::now());
            start.open();
            let target = per_thread.saturating_mul(threads as u64);
            stopped_early |= wait(control, hooks, Stage::Measure, Duration::MAX, Some(target));
            // Workers that finished their count drained their queues before exiting; a stop
            // request or failure must still release the others.
            control.set_phase(PHASE_STOP);
            while control.exited() < threads as u64 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let (s1, t1) = (stats(), Instant::now());
            activity_after = engine.activity();
            // The run ended when its last transaction became durable, which the coordinator
            // notices up to a poll (`TICK`) later: timing to the poll read every short run
            // as ~N / 50 ms (issue 36: each quick Fig. 7 point at ~5,988 tps).
            let end = control.last_finished().filter(|_| !stopped_early).unwrap_or(t1);
            (end.saturating_duration_since(t0), s1.zip(s0).map(|(s1, s0)| s1.since(&s0)))
        }
    };
    let wear =
        engine.region().and_then(|r| r.wear_map()).map(|m| crate::wear::WearSummary::of(m, engine));
    let activity = activity_delta(&activity_before, &activity_after);
    Window { measured, device, activity, wear, stopped_early }
}

/// The change of each activity counter between two readings (a counter missing before counts
/// from zero). Read with the device statistics at both ends. A gauge ([`is_gauge`]) is its
/// value at the end: a difference of two maxima is no figure at all.
fn activity_delta(
    before: &[(&'static str, u64)],
    after: &[(&'static str, u64)],
) -> Vec<(&'static str, u64)> {
    after
        .iter()
        .map(|&(name, v)| {
            if is_gauge(name) {
                return (name, v);
            }
            let b = before.iter().find(|(n, _)| *n == name).map_or(0, |p| p.1);
            (name, v.saturating_sub(b))
        })
        .collect()
}

/// Activity counters that are not sums but the largest value seen (their names end in `_peak`,
/// such as `wal`'s `dirty_pages_peak`): reported as they stand at the end of the measured
/// window, never differenced nor divided per transaction. The difference made `wal`'s
/// `dirty_pages_peak` read 2,289 at a 40,000-page budget the flusher held (the peak at the end
/// less the peak at the start), which read as a budget that never bound
/// (`regression_activity_peak_is_not_differenced`).
pub fn is_gauge(name: &str) -> bool {
    name.ends_with("_peak")
}

/// Sleeps through one phase in short ticks, reporting progress. Returns true if the run was
/// asked to stop (or a worker failed) before the phase ended. With `target`, the phase ends
/// when every worker has exited (they stop by themselves at their transaction count).
fn wait(
    control: &Control,
    hooks: &Hooks<'_>,
    stage: Stage,
    length: Duration,
    target: Option<u64>,
) -> bool {
    let started = Instant::now();
    let workers = control.workers() as u64;
    loop {
        let elapsed = started.elapsed();
        let completed = control.completed();
        match target {
            Some(total) => report(hooks, stage, completed.min(total), total, completed),
            None => {
                let total_ms = length.as_millis() as u64;
                let done_ms = (elapsed.as_millis() as u64).min(total_ms);
                report(hooks, stage, done_ms, total_ms, completed);
            }
        }
        if target.is_some() && control.exited() >= workers {
            return false;
        }
        if target.is_none() && elapsed >= length {
            return false;
        }
        let stop_requested = hooks.stop.is_some_and(|s| s.load(Ordering::Relaxed));
        if stop_requested || control.phase() == PHASE_STOP {
            return true;
        }
        std::thread::sleep(TICK.min(length.saturating_sub(elapsed)));
    }
}

fn worker_error(worker: usize, e: WorkerError) -> BenchError {
    match e {
        WorkerError::Db(error) => BenchError::Txn { worker, error },
        WorkerError::Livelock { failures, last } => BenchError::Livelock { worker, failures, last },
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// The workload's invariants, then the engine's own integrity check.
fn check(engine: &dyn Engine, workload: &dyn Workload) -> Checker {
    if let Err(reason) = workload.check(engine) {
        return Checker::Fail(reason);
    }
    match engine.check_integrity() {
        Ok(_) => Checker::Pass,
        Err(reason) => Checker::Fail(format!("engine integrity: {reason}")),
    }
}

#[cfg(test)]
mod tests {
    /// A `_peak` counter is reported as it stands at the window's end; sums are differenced.
    #[test]
    fn regression_activity_peak_is_not_differenced() {
        let before = [("pages_flushed", 100), ("dirty_pages_peak", 40_000)];
        let after = [("pages_flushed", 350), ("dirty_pages_peak", 42_289), ("new_counter", 7)];
        let delta = super::activity_delta(&before, &after);
        assert_eq!(
            delta,
            vec![("pages_flushed", 250), ("dirty_pages_peak", 42_289), ("new_counter", 7)]
        );
        assert!(super::is_gauge("dirty_pages_peak") && !super::is_gauge("pages_flushed"));
    }
}

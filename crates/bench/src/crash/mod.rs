//! The crash tester (docs/design.md §2, §7): crash, recover and verify, for any engine that runs
//! on a `pmem` region and any workload, on the `sim` medium's crash images.
//!
//! Would catch: an acknowledged commit lost by a crash (a flush or fence missing before the ack),
//! a transaction half applied or a workload invariant broken after recovery (an undo record
//! persisted after its update, a commit mark persisted before the data), an index, heap or
//! allocator left inconsistent, and recovery that fails, panics, or breaks when it crashes itself.
//!
//! One campaign: the workload is loaded once on a `sim` region and shut down cleanly; that
//! persisted image, aged by `history` (up to `ages` random-length prefixes of transactions,
//! each shut down cleanly), gives the *bases*: crash windows then fall in a database that has
//! grown and reorganised for a while, not only right after a clean load. A dry run on each base
//! measures how many stores and fences a run of the workload issues (its *span*). Then every
//! iteration (every `load_every`-th one instead crashes while formatting and loading, see
//! [`load`]):
//! 1. opens the engine on a fresh copy of a base drawn from its seed and arms a crash at a
//!    random store or fence of that base's span, under a crash policy (`persisted`, `evict`,
//!    `torn`);
//! 2. runs the workload through the benchmark driver ([`crate::run`]); the ack sink records a
//!    transaction's acks only while the cut has not been taken (the ack ordering rule: a commit
//!    observed durable before the cut was durable before it); the workers halt at the cut (what
//!    runs after it cannot change the image), and a run may go on to twice the dry run's
//!    transactions to reach its point;
//! 3. opens the engine on the cut image (recovery, timed) and checks, each failure counted by
//!    [`ViolationKind`]: every recorded ack holds (`durability`, [`Workload::verify_acks`]); the
//!    workload's invariants hold, so the transaction in flight is all or nothing
//!    (`consistency`, [`Workload::check`]); the engine's structures agree (`integrity`,
//!    [`Engine::check_integrity`]); recovery itself succeeds and does not panic;
//! 4. with `recovery_crashes = K`, cuts again K times in a chain, each at a random event of the
//!    recovery of the previous image (as long as that recovery issues events), and verifies
//!    each recovered image the same way.
//!
//! Coverage: the engine's counters ([`Engine::counters`], stopped by the `sim` region at its
//! cut) are sampled at the start of the run that is cut; the difference is what the crash
//! window held (splits, merges, heap growths, page frees, deletes, commits), summed in
//! [`Summary::coverage`]. A campaign whose windows hold no split has not tested a crash in one.
//!
//! Determinism: iteration `i` runs with [`iteration_seed`]`(seed, i)`, which fixes its base,
//! its transactions, its crash point, the image's random choices and its recovery cuts; the
//! bases depend on the campaign's seed, history and ages, aged by one thread. With one worker
//! thread a [`Replay`] of `(seed, point, policy)` (under the same campaign flags) reruns exactly
//! that case; with more, thread interleavings make a replay only likely to reproduce.
//!
//! Invariant: a violation is only ever reported against facts that held before the cut: acks
//! recorded while `Sim::cut_taken()` was false, and the workload's own invariants.

mod cut;
mod image_check;
mod load;
mod summary;

pub(crate) use cut::check_recovered;
use cut::{describe_violation, Checked, Ctx};
pub use image_check::ImageCheck;
pub use summary::{Outcome, Summary};

use crate::acks::{AckLog, DurableSink, DurableTxn};
use crate::driver::{BenchError, Hooks, RunLength, RunOptions, Setup, MAX_THREADS};
use crate::seed::splitmix64;
use parking_lot::Mutex;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, MarkAim, Medium, Region, RegionOptions, Sim};
use serde::Serialize;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use storage::counters::Event;
use storage::{DbError, Engine, EngineCounters};
use workloads::{Ack, TxnDone, Worker, Workload};

/// Most iterations one campaign runs.
pub const MAX_CRASHES: u64 = 1_000_000_000;
/// Longest chain of crashes inside recovery per iteration.
pub const MAX_RECOVERY_CRASHES: u32 = 64;
/// Most iterations run at once.
pub const MAX_JOBS: usize = 256;
/// Most transactions per worker thread in one iteration.
pub const MAX_TXNS_PER_THREAD: u64 = 1_000_000;
/// Violations kept with their details; later ones are only counted.
pub const MAX_KEPT_VIOLATIONS: usize = 100;
/// Crash points are drawn from the whole span of a dry run of `txns_per_thread` transactions,
/// but a crash run may go on for this many times as many: other seeds run different
/// transactions (YCSB's reads issue no events), and a point past the end of a run is never
/// reached. What runs after the cut costs nothing (the workers halt), so the slack is free.
const RUN_SLACK: u64 = 2;
/// An aimed point's run may go on for this many times the dry run's transactions: its
/// iteration runs other transactions than the dry run that counted the structural event it aims
/// at, and rare ones (merges) may come later.
const AIM_RUN_SLACK: u64 = 6;

// Salts that derive independent streams from an iteration's seed.
const SALT_EVENT_KIND: u64 = 1;
const SALT_EVENT_COUNT: u64 = 2;
const SALT_IMAGE: u64 = 3;
const SALT_DRY_RUN: u64 = 4;
const SALT_RECOVERY: u64 = 0x100;
const SALT_AFTER_RECOVERY: u64 = 5;
const SALT_AGE: u64 = 6;
const SALT_AGES: u64 = 0x200;
const SALT_AGING_RUN: u64 = 0x300;
const SALT_AIM: u64 = 0x400;

/// The structural events crash points are aimed at (commits are everywhere already).
const AIMED_EVENTS: [Event; 5] =
    [Event::Split, Event::Merge, Event::HeapGrowth, Event::PageFree, Event::Delete];
/// An aimed point falls within this many fences, or stores, after its event: a structure
/// modification persists in a handful of barriers (undo record, data, free mark, frees).
const AIM_FENCES: u64 = 5;
const AIM_STORES: u64 = 24;

/// Most aged bases one campaign keeps (each is a region-sized image in memory).
pub const MAX_AGES: u32 = 16;

/// Which events crash points count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventChoice {
    Fence,
    Store,
    /// Each crash point picks fence or store at random.
    Any,
}

impl EventChoice {
    pub const ALL: [EventChoice; 3] = [EventChoice::Fence, EventChoice::Store, EventChoice::Any];

    pub fn name(self) -> &'static str {
        match self {
            EventChoice::Fence => "fence",
            EventChoice::Store => "store",
            EventChoice::Any => "any",
        }
    }

    pub fn parse(s: &str) -> Option<EventChoice> {
        EventChoice::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// The name of a crash event kind, as crash points are printed (`fence:123`).
pub fn event_name(event: CrashEvent) -> &'static str {
    match event {
        CrashEvent::Fence => "fence",
        CrashEvent::Store => "store",
    }
}

/// Stores and fences some stretch of work issued.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Span {
    pub stores: u64,
    pub fences: u64,
}

impl Span {
    fn of(self, event: CrashEvent) -> u64 {
        match event {
            CrashEvent::Store => self.stores,
            CrashEvent::Fence => self.fences,
        }
    }

    fn since(sim: &Sim, before: (u64, u64)) -> Span {
        let (stores, fences) = sim.event_counts();
        Span { stores: stores - before.0, fences: fences - before.1 }
    }
}

/// What went wrong after a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ViolationKind {
    /// An acknowledged commit did not survive.
    Durability,
    /// The workload's invariants fail: a transaction half applied, balances off, a torn row.
    Consistency,
    /// The engine's own structures disagree (index vs heap, allocator).
    Integrity,
    /// Opening the crashed region failed, or the workload's tables are gone.
    Recovery,
    /// The engine failed during the run that was cut (not a crash property, but a bug).
    Run,
    /// The engine panicked during the run, recovery or verification.
    Panic,
    /// The engine's stated recovery invariant fails on the cut image itself
    /// ([`SimTarget::image_check`]), whether or not a later read would notice.
    Invariant,
}

impl ViolationKind {
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Durability => "durability",
            ViolationKind::Consistency => "consistency",
            ViolationKind::Integrity => "integrity",
            ViolationKind::Recovery => "recovery",
            ViolationKind::Run => "run",
            ViolationKind::Panic => "panic",
            ViolationKind::Invariant => "invariant",
        }
    }
}

/// One failed check, with what reproduces it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub kind: ViolationKind,
    /// The crash, in words: `seed S event fence:N policy P`, plus any cuts inside recovery.
    pub crash: String,
    /// Arguments that rerun the case (`--replay ... --policy ...`), if it can be rerun.
    pub replay: Option<String>,
    pub message: String,
}

/// Where in a campaign's life a crash falls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// In a run of the workload on a loaded (and aged) base.
    Run,
    /// While a blank region is formatted, its tables created and the workload loaded.
    Load,
}

/// A simulated crash: the seed that fixes everything random, the point and the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replay {
    pub seed: u64,
    pub point: CrashPoint,
    pub policy: CrashPolicy,
    pub phase: Phase,
    /// `point` counts from this structural event of the run on (see [`MarkAim`]); a reached
    /// aimed point is reported as the plain point it fell on.
    pub aim: Option<MarkAim>,
}

impl Replay {
    /// `SEED:EVENT:COUNT` (e.g. `1234:fence:56`), prefixed `load:` for a crash while loading;
    /// the seed may be hexadecimal (`0x...`).
    pub fn parse(text: &str, policy: CrashPolicy) -> Result<Replay, String> {
        let (phase, rest) = match text.strip_prefix("load:") {
            Some(rest) => (Phase::Load, rest),
            None => (Phase::Run, text),
        };
        let parts: Vec<&str> = rest.split(':').collect();
        let [seed, event, count] = parts.as_slice() else {
            return Err(format!("`{text}` is not [load:]SEED:EVENT:COUNT (e.g. 1234:fence:56)"));
        };
        let seed = parse_u64(seed).ok_or_else(|| format!("`{seed}` is not a seed"))?;
        let event = match *event {
            "fence" => CrashEvent::Fence,
            "store" => CrashEvent::Store,
            other => return Err(format!("event `{other}` is not fence or store")),
        };
        let count = parse_u64(count)
            .filter(|c| *c > 0)
            .ok_or_else(|| format!("`{count}` is not an event count (1 or more)"))?;
        Ok(Replay { seed, point: CrashPoint { event, count }, policy, phase, aim: None })
    }

    /// `seed S event fence:N policy P`, plus ` while loading` for a load crash.
    pub fn describe(&self) -> String {
        let aim = match self.aim {
            Some(a) => format!(" after {} #{}", event_of_tag(a.tag), a.nth),
            None => String::new(),
        };
        format!(
            "seed {} event {}:{}{aim} policy {}{}",
            self.seed,
            event_name(self.point.event),
            self.point.count,
            self.policy.name(),
            if self.phase == Phase::Load { " while loading" } else { "" }
        )
    }

    /// The command-line arguments that rerun this case (with the campaign's other flags,
    /// `--seed`, `--history` and `--ages` included: they fix the aged bases).
    pub fn args(&self) -> String {
        format!(
            "--replay {}{}:{}:{} --policy {}",
            if self.phase == Phase::Load { "load:" } else { "" },
            self.seed,
            event_name(self.point.event),
            self.point.count,
            self.policy.name()
        )
    }
}

/// The name of a structural event by its mark tag.
fn event_of_tag(tag: u8) -> &'static str {
    Event::ALL.get(tag as usize).map_or("event", |e| e.name())
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The seed of iteration `iteration` of a campaign seeded with `seed`.
pub fn iteration_seed(seed: u64, iteration: u64) -> u64 {
    splitmix64(splitmix64(seed) ^ splitmix64(iteration.wrapping_add(0x005E_ED0F_C4A5)))
}

fn derive(seed: u64, salt: u64) -> u64 {
    splitmix64(seed ^ salt.wrapping_mul(0xA24B_AED4_963E_E407))
}

/// Watches a campaign (progress bars, printing violations as they are found).
pub trait Observer: Sync {
    /// A phase of the setup started (`"loading"`, `"dry run"`).
    fn setup(&self, _what: &str) {}
    /// Iteration `outcome.index` finished; `done` of `total` are finished.
    fn finished(&self, _outcome: &Outcome, _done: u64, _total: u64) {}
}

/// Opens (formats or recovers) the engine under test on a region.
pub type OpenOnRegion<'a> = dyn Fn(Region) -> Result<Box<dyn Engine>, String> + Sync + 'a;
/// Builds a fresh instance of the workload (one per concurrent iteration: workloads keep
/// state such as YCSB's insert counter).
pub type MakeWorkload<'a> = dyn Fn() -> Box<dyn Workload> + Sync + 'a;

/// What a simulated-crash campaign tests.
pub struct SimTarget<'a> {
    pub open: &'a OpenOnRegion<'a>,
    pub workload: &'a MakeWorkload<'a>,
    /// Options of every region (size, `eadr`); the medium is always `sim`.
    pub region: RegionOptions,
    /// An invariant of the engine's own, checked on every cut image (`None`: none).
    pub image_check: Option<&'a ImageCheck<'a>>,
}

/// How a simulated-crash campaign runs.
#[derive(Clone, Debug)]
pub struct CrashOptions {
    /// Iterations (crash points tried).
    pub crashes: u64,
    pub seed: u64,
    /// Iteration `i` uses `policies[i % len]`.
    pub policies: Vec<CrashPolicy>,
    pub event: EventChoice,
    /// Worker threads of each run.
    pub threads: usize,
    /// Transactions per worker of the dry run whose span crash points are drawn from; a crash
    /// run may run up to twice as many, but halts at the cut.
    pub txns_per_thread: u64,
    /// Crashes inside recovery per iteration, chained.
    pub recovery_crashes: u32,
    /// Iterations run at once, each on its own region. The driver's coordinator polls every
    /// 50 ms, so one iteration mostly waits: several at once keep the cores busy.
    pub jobs: usize,
    pub max_pending: usize,
    /// Run only this case (one iteration, no dry run).
    pub replay: Option<Replay>,
    /// Longest history (transactions per thread) that ages a base before its crash windows:
    /// crash windows then fall in a database that has grown, split and merged for a while,
    /// not only in the first transactions after a clean load. 0: windows start at the load.
    pub history: u64,
    /// Aged bases: base `j` is aged by a random length in the `j`-th of `ages` equal slices of
    /// `1..=history` (each iteration draws its base).
    pub ages: u32,
    /// Every `load_every`-th iteration crashes while a blank region is formatted and loaded
    /// instead (0: never).
    pub load_every: u64,
    /// Of every 100 run crash points, this many are aimed at the few events after a
    /// structural change (split, merge, heap growth, page free, delete) that the base's dry
    /// run made: uniform points almost never land in those short windows.
    pub aim_percent: u32,
}

impl Default for CrashOptions {
    fn default() -> Self {
        CrashOptions {
            crashes: 100,
            seed: 42,
            policies: CrashPolicy::ALL.to_vec(),
            event: EventChoice::Any,
            threads: 1,
            txns_per_thread: 50,
            recovery_crashes: 0,
            jobs: 1,
            max_pending: crate::driver::DEFAULT_MAX_PENDING,
            replay: None,
            history: 0,
            ages: 1,
            load_every: 0,
            aim_percent: 0,
        }
    }
}

impl CrashOptions {
    pub fn validate(&self) -> Result<(), CrashError> {
        let bad = |m: String| Err(CrashError::Options(m));
        if self.replay.is_none() && (self.crashes == 0 || self.crashes > MAX_CRASHES) {
            return bad(format!("crashes must be 1..={MAX_CRASHES}, got {}", self.crashes));
        }
        if self.policies.is_empty() {
            return bad("at least one crash policy is needed".into());
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return bad(format!("threads must be 1..={MAX_THREADS}, got {}", self.threads));
        }
        if self.txns_per_thread == 0 || self.txns_per_thread > MAX_TXNS_PER_THREAD {
            return bad(format!(
                "transactions per thread must be 1..={MAX_TXNS_PER_THREAD}, got {}",
                self.txns_per_thread
            ));
        }
        if self.recovery_crashes > MAX_RECOVERY_CRASHES {
            return bad(format!(
                "recovery crashes must be 0..={MAX_RECOVERY_CRASHES}, got {}",
                self.recovery_crashes
            ));
        }
        if self.jobs == 0 || self.jobs > MAX_JOBS {
            return bad(format!("jobs must be 1..={MAX_JOBS}, got {}", self.jobs));
        }
        if self.history > MAX_TXNS_PER_THREAD {
            return bad(format!(
                "history must be 0..={MAX_TXNS_PER_THREAD} transactions per thread, got {}",
                self.history
            ));
        }
        if self.ages == 0 || self.ages > MAX_AGES {
            return bad(format!("ages must be 1..={MAX_AGES}, got {}", self.ages));
        }
        if self.aim_percent > 100 {
            return bad(format!("aim must be a percentage, 0..=100, got {}", self.aim_percent));
        }
        Ok(())
    }

    fn run_options(&self, seed: u64, per_thread: u64, check: bool) -> RunOptions {
        RunOptions {
            threads: self.threads,
            length: RunLength::Transactions { per_thread },
            seed,
            setup: Setup::Attach,
            max_pending: self.max_pending,
            check,
            target_tps: None,
        }
    }

    /// The case iteration `index` runs, given the spans of the load and of a run on each aged
    /// base (`None` if a span has no events of the kind asked for).
    pub fn case(&self, index: u64, spans: &Spans) -> Option<Replay> {
        let seed = iteration_seed(self.seed, index);
        let policy = self.policies[(index % self.policies.len() as u64) as usize];
        if self.load_every > 0 && index % self.load_every == self.load_every - 1 {
            let point = pick_point(self.event, spans.load, seed)?;
            return Some(Replay { seed, point, policy, phase: Phase::Load, aim: None });
        }
        let base = age_index(seed, spans.runs.len());
        let span = *spans.runs.get(base)?;
        let counters = spans.counters.get(base).copied().flatten();
        if let Some((aim, point)) = self.aim(seed, span, counters) {
            return Some(Replay { seed, point, policy, phase: Phase::Run, aim: Some(aim) });
        }
        let point = pick_point(self.event, span, seed)?;
        Some(Replay { seed, point, policy, phase: Phase::Run, aim: None })
    }

    /// For an aimed case: a structural event kind the dry run saw (each kind equally likely,
    /// rare ones included), which of its occurrences, and a point a few events after it.
    fn aim(
        &self,
        seed: u64,
        span: Span,
        counters: Option<EngineCounters>,
    ) -> Option<(MarkAim, CrashPoint)> {
        if derive(seed, SALT_AIM) % 100 >= u64::from(self.aim_percent) {
            return None;
        }
        let counters = counters?;
        let seen: Vec<Event> = AIMED_EVENTS.into_iter().filter(|e| counters.get(*e) > 0).collect();
        let kind = *seen.get((derive(seed, SALT_AIM + 1) % seen.len().max(1) as u64) as usize)?;
        let nth = 1 + derive(seed, SALT_AIM + 2) % counters.get(kind);
        let mut point = pick_point(self.event, span, seed)?;
        let reach = match point.event {
            CrashEvent::Fence => AIM_FENCES,
            CrashEvent::Store => AIM_STORES,
        };
        point.count = 1 + derive(seed, SALT_AIM + 3) % reach;
        Some((MarkAim { tag: kind as u8, nth }, point))
    }

    /// Transactions per thread that age each base: one random length in each of `ages` equal
    /// slices of `1..=history`, ascending (just `[0]` without a history).
    pub fn age_lengths(&self) -> Vec<u64> {
        if self.history == 0 {
            return vec![0];
        }
        let k = u64::from(self.ages).min(self.history);
        (0..k)
            .map(|j| {
                let (low, high) = (j * self.history / k, (j + 1) * self.history / k);
                low + 1 + derive(self.seed, SALT_AGES + j) % (high - low).max(1)
            })
            .collect()
    }
}

/// The spans crash points are drawn from.
#[derive(Clone, Debug, Default)]
pub struct Spans {
    /// Formatting the region, creating the tables and loading the workload.
    pub load: Span,
    /// A dry run on each aged base.
    pub runs: Vec<Span>,
    /// What each dry run did (for aimed points), if the engine counts.
    pub counters: Vec<Option<EngineCounters>>,
}

/// Which aged base (of `bases`) an iteration with seed `seed` crashes on.
fn age_index(seed: u64, bases: usize) -> usize {
    (derive(seed, SALT_AGE) % bases.max(1) as u64) as usize
}

/// A random point among `span`'s events of the chosen kind.
fn pick_point(choice: EventChoice, span: Span, seed: u64) -> Option<CrashPoint> {
    let mut event = match choice {
        EventChoice::Fence => CrashEvent::Fence,
        EventChoice::Store => CrashEvent::Store,
        EventChoice::Any if derive(seed, SALT_EVENT_KIND) & 1 == 0 => CrashEvent::Fence,
        EventChoice::Any => CrashEvent::Store,
    };
    if choice == EventChoice::Any && span.of(event) == 0 {
        event = match event {
            CrashEvent::Fence => CrashEvent::Store,
            CrashEvent::Store => CrashEvent::Fence,
        };
    }
    let events = span.of(event);
    if events == 0 {
        return None;
    }
    Some(CrashPoint { event, count: 1 + derive(seed, SALT_EVENT_COUNT) % events })
}

/// Why a campaign could not run (as opposed to violations, which it reports).
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    #[error("{0}")]
    Options(String),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Bench(#[from] BenchError),
}

/// Runs a simulated-crash campaign.
pub fn run_sim(
    target: &SimTarget<'_>,
    options: &CrashOptions,
    observer: &dyn Observer,
) -> Result<Summary, CrashError> {
    options.validate()?;
    let started = Instant::now();
    let region = RegionOptions { medium: Medium::Sim, ..target.region.clone() };
    let ctx = Ctx { target, region, options };
    observer.setup("loading");
    let (loaded, load_span) = ctx.load_base()?;
    let mut summary = Summary { load_span: Some(load_span), ..Summary::default() };
    let ages = options.age_lengths();
    observer.setup("ageing");
    let bases = ctx.age_bases(loaded, &ages)?;
    summary.ages = ages;
    let cases: Vec<Replay> = match options.replay {
        Some(replay) => vec![replay],
        None => {
            observer.setup("dry run");
            let dry = bases.iter().map(|b| ctx.dry_run(b)).collect::<Result<Vec<_>, _>>()?;
            let (runs, counters): (Vec<Span>, Vec<_>) = dry.into_iter().unzip();
            summary.span = runs.first().copied();
            let spans = Spans { load: load_span, runs, counters };
            (0..options.crashes)
                .map(|i| options.case(i, &spans))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    let span = summary.span.unwrap_or_default();
                    CrashError::Setup(format!(
                        "a run of the workload issues no {} events to crash at ({} stores, {} \
                         fences): use more --txns or another --event",
                        options.event.name(),
                        span.stores,
                        span.fences
                    ))
                })?
        }
    };
    let total = cases.len() as u64;
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let summary = Mutex::new(summary);
    let job = || {
        let workload = (target.workload)();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(case) = cases.get(index as usize) else { break };
            let outcome = match case.phase {
                Phase::Run => {
                    let base = &bases[age_index(case.seed, bases.len())];
                    ctx.iteration(base, &*workload, index, case)
                }
                Phase::Load => ctx.load_iteration(&*workload, index, case),
            };
            summary.lock().add(&outcome);
            let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
            observer.finished(&outcome, finished, total);
        }
    };
    let jobs = options.jobs.min(cases.len()).max(1);
    std::thread::scope(|scope| -> Result<(), CrashError> {
        for i in 1..jobs {
            std::thread::Builder::new()
                .name(format!("crash-job-{i}"))
                .spawn_scoped(scope, job)
                .map_err(|e| CrashError::Setup(format!("spawning a crash-test thread: {e}")))?;
        }
        job();
        Ok(())
    })?;
    let mut summary = summary.into_inner();
    summary.finish();
    summary.elapsed = started.elapsed();
    Ok(summary)
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_parses_and_round_trips() {
        let r = Replay::parse("1234:fence:56", CrashPolicy::Torn).unwrap();
        assert_eq!((r.seed, r.phase), (1234, Phase::Run));
        assert_eq!(r.point, CrashPoint { event: CrashEvent::Fence, count: 56 });
        assert_eq!(r.describe(), "seed 1234 event fence:56 policy torn");
        assert_eq!(r.args(), "--replay 1234:fence:56 --policy torn");
        let hex = Replay::parse("0x10:store:1", CrashPolicy::Evict).unwrap();
        assert_eq!((hex.seed, hex.point.event), (16, CrashEvent::Store));
        let load = Replay::parse("load:7:store:9", CrashPolicy::Evict).unwrap();
        assert_eq!((load.seed, load.phase, load.point.count), (7, Phase::Load, 9));
        assert_eq!(load.args(), "--replay load:7:store:9 --policy evict");
        assert!(load.describe().ends_with(" while loading"));
        for bad in ["", "1:fence", "x:fence:1", "1:flush:1", "1:fence:0", "1:fence:1:2"] {
            assert!(Replay::parse(bad, CrashPolicy::Torn).is_err(), "{bad}");
        }
    }

    #[test]
    fn cases_are_deterministic_and_inside_the_span() {
        let options = CrashOptions { crashes: 500, ..CrashOptions::default() };
        let span = Span { stores: 1000, fences: 10 };
        let spans = Spans { load: Span::default(), runs: vec![span], counters: vec![None] };
        let mut kinds = [0u32; 2];
        for i in 0..500 {
            let case = options.case(i, &spans).unwrap();
            assert_eq!(options.case(i, &spans), Some(case));
            assert_eq!(case.phase, Phase::Run);
            assert_eq!(case.policy, CrashPolicy::ALL[(i % 3) as usize]);
            assert!((1..=span.of(case.point.event)).contains(&case.point.count), "{case:?}");
            kinds[(case.point.event == CrashEvent::Store) as usize] += 1;
        }
        assert!(kinds[0] > 150 && kinds[1] > 150, "`any` picks both kinds: {kinds:?}");
        // A kind with no events falls back to the other under `any`, and fails otherwise.
        let fences_only = Span { stores: 0, fences: 3 };
        assert!(pick_point(EventChoice::Store, fences_only, 1).is_none());
        for seed in 0..20 {
            let p = pick_point(EventChoice::Any, fences_only, seed).unwrap();
            assert_eq!(p.event, CrashEvent::Fence);
        }
        assert_ne!(iteration_seed(42, 0), iteration_seed(42, 1));
        assert_ne!(iteration_seed(42, 0), iteration_seed(43, 0));
    }

    #[test]
    fn ages_are_ascending_slices_and_load_crashes_come_every_kth() {
        let options = CrashOptions { history: 1000, ages: 4, load_every: 5, ..Default::default() };
        let ages = options.age_lengths();
        assert_eq!(ages.len(), 4);
        for (j, age) in ages.iter().enumerate() {
            let j = j as u64;
            assert!((j * 250 + 1..=(j + 1) * 250).contains(age), "{ages:?}");
        }
        assert_eq!(CrashOptions::default().age_lengths(), vec![0]);
        let load = Span { stores: 50, fences: 5 };
        let runs = vec![Span { stores: 1000, fences: 10 }; 4];
        let spans = Spans { load, runs, counters: vec![None; 4] };
        let mut bases = [0u32; 4];
        for i in 0..400 {
            let case = options.case(i, &spans).unwrap();
            if i % 5 == 4 {
                assert_eq!(case.phase, Phase::Load);
                assert!(case.point.count <= load.of(case.point.event));
            } else {
                assert_eq!(case.phase, Phase::Run);
                bases[age_index(case.seed, 4)] += 1;
            }
        }
        assert!(bases.iter().all(|n| *n > 40), "every base is drawn: {bases:?}");
    }

    #[test]
    fn aimed_cases_pick_an_event_the_dry_run_saw_and_a_point_just_after_it() {
        let options = CrashOptions { aim_percent: 100, ..Default::default() };
        let merges = EngineCounters { merges: 3, commits: 50, ..Default::default() };
        let span = Span { stores: 1000, fences: 100 };
        let spans = Spans { load: span, runs: vec![span], counters: vec![Some(merges)] };
        for i in 0..200 {
            let case = options.case(i, &spans).unwrap();
            let aim = case.aim.expect("every run case is aimed");
            assert_eq!(aim.tag, Event::Merge as u8, "commits are never aimed at");
            assert!((1..=3).contains(&aim.nth), "{aim:?}");
            assert!(case.point.count <= AIM_STORES.max(AIM_FENCES), "{case:?}");
        }
        // Without counters (an engine that keeps none) the points are uniform.
        let spans = Spans { counters: vec![None], ..spans };
        assert!((0..50).all(|i| options.case(i, &spans).unwrap().aim.is_none()));
    }
}

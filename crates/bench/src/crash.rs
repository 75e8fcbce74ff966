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

mod image_check;
mod load;

pub use image_check::ImageCheck;

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

/// What one iteration found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub index: u64,
    /// The crash point was reached (an image was cut).
    pub reached: bool,
    /// Acks recorded before the cut (all verified).
    pub acks: u64,
    /// Wall time of each recovery that was verified, in milliseconds.
    pub recovery_ms: Vec<f64>,
    /// Crashes taken inside recovery.
    pub recovery_crashes: u32,
    pub violations: Vec<Violation>,
    pub phase: Option<Phase>,
    /// The crash point was aimed at a structural event of the run.
    pub aimed: bool,
    /// What the engine did between the start of the run that was cut and the cut.
    pub window: Option<EngineCounters>,
    /// The cut image was checked by [`SimTarget::image_check`] (it applied and could run).
    pub image_checked: bool,
}

/// A campaign's totals.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub iterations: u64,
    /// Iterations whose crash point was reached and verified.
    pub crashes: u64,
    /// Iterations whose crash point lay past the end of their run.
    pub unreached: u64,
    pub recovery_crashes: u64,
    pub acks_verified: u64,
    /// Failed checks (an iteration may fail several).
    pub violations: u64,
    /// Iterations with at least one violation.
    pub failed_iterations: u64,
    pub violations_by_kind: BTreeMap<ViolationKind, u64>,
    /// The first [`MAX_KEPT_VIOLATIONS`] violations, in iteration order.
    pub kept: Vec<Violation>,
    /// Every verified recovery's wall time in milliseconds, sorted (after [`Summary::finish`]).
    pub recovery_ms: Vec<f64>,
    /// The dry run's span on the first base (simulated crashes).
    pub span: Option<Span>,
    /// The format-and-load span that load crashes are drawn from.
    pub load_span: Option<Span>,
    /// Transactions per thread that aged each base before its crash windows.
    pub ages: Vec<u64>,
    /// Crash points reached while formatting and loading.
    pub load_crashes: u64,
    /// Crash points reached that were aimed at a structural event.
    pub aimed_crashes: u64,
    /// Cut images [`SimTarget::image_check`] checked.
    pub images_checked: u64,
    /// Reached crash windows whose engine reported counters.
    pub windows: u64,
    /// Events inside the crash windows, summed.
    pub coverage: EngineCounters,
    /// Per kind of event, the crash windows that held at least one.
    pub windows_with: EngineCounters,
    pub elapsed: Duration,
    kept_order: Vec<(u64, Violation)>,
}

impl Summary {
    pub fn add(&mut self, outcome: &Outcome) {
        self.iterations += 1;
        if outcome.reached {
            self.crashes += 1;
            if outcome.phase == Some(Phase::Load) {
                self.load_crashes += 1;
            }
            self.aimed_crashes += u64::from(outcome.aimed);
            self.images_checked += u64::from(outcome.image_checked);
            if let Some(w) = &outcome.window {
                self.windows += 1;
                self.coverage = self.coverage.plus(w);
                let any = |n: u64| u64::from(n > 0);
                let hit = EngineCounters {
                    splits: any(w.splits),
                    merges: any(w.merges),
                    heap_growths: any(w.heap_growths),
                    page_frees: any(w.page_frees),
                    deletes: any(w.deletes),
                    commits: any(w.commits),
                };
                self.windows_with = self.windows_with.plus(&hit);
            }
        } else if outcome.violations.is_empty() {
            self.unreached += 1;
        }
        self.recovery_crashes += u64::from(outcome.recovery_crashes);
        self.acks_verified += outcome.acks * (outcome.recovery_ms.len() as u64).min(1);
        self.recovery_ms.extend_from_slice(&outcome.recovery_ms);
        if !outcome.violations.is_empty() {
            self.failed_iterations += 1;
        }
        for v in &outcome.violations {
            self.violations += 1;
            *self.violations_by_kind.entry(v.kind).or_insert(0) += 1;
            self.kept_order.push((outcome.index, v.clone()));
        }
        // Keep the earliest iterations' violations, whatever order the jobs finish in.
        if self.kept_order.len() > 2 * MAX_KEPT_VIOLATIONS {
            self.kept_order.sort_by_key(|(i, _)| *i);
            self.kept_order.truncate(MAX_KEPT_VIOLATIONS);
        }
    }

    /// Sorts what needs sorting; call once all outcomes are in.
    pub fn finish(&mut self) {
        self.kept_order.sort_by_key(|(i, _)| *i);
        self.kept_order.truncate(MAX_KEPT_VIOLATIONS);
        self.kept = self.kept_order.iter().map(|(_, v)| v.clone()).collect();
        self.recovery_ms.sort_by(f64::total_cmp);
    }

    /// Median recovery time (nearest rank), 0 if nothing recovered.
    pub fn recovery_ms_p50(&self) -> f64 {
        match self.recovery_ms.len() {
            0 => 0.0,
            n => self.recovery_ms[(n - 1) / 2],
        }
    }

    pub fn recovery_ms_max(&self) -> f64 {
        self.recovery_ms.last().copied().unwrap_or(0.0)
    }
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

struct Ctx<'a> {
    target: &'a SimTarget<'a>,
    region: RegionOptions,
    options: &'a CrashOptions,
}

/// The result of recovering one image and verifying it.
struct Checked {
    recovery_ms: Option<f64>,
    /// Events the recovery issued (where a crash inside it may fall).
    span: Span,
    failures: Vec<(ViolationKind, String)>,
    /// The recovered region cut once more right after recovery returned (when asked for).
    after: Option<Vec<u8>>,
}

impl Ctx<'_> {
    fn open(&self, region: Region) -> Result<Box<dyn Engine>, String> {
        (self.target.open)(region)
    }

    fn image_region(&self, image: &[u8]) -> Result<Region, String> {
        Region::from_image(image, &self.region).map_err(|e| format!("mapping a crash image: {e}"))
    }

    /// Loads the workload on a blank `sim` region, shuts down cleanly, and returns the
    /// persisted image, after checking that it verifies, and the span of formatting and loading.
    fn load_base(&self) -> Result<(Vec<u8>, Span), CrashError> {
        let setup = |what: &str, e: String| CrashError::Setup(format!("{what}: {e}"));
        let region =
            Region::open(&self.region).map_err(|e| setup("opening a sim region", e.to_string()))?;
        let Some(sim) = region.sim() else {
            return Err(CrashError::Setup("the region is not a sim region".into()));
        };
        let engine = self.open(region.clone()).map_err(|e| setup("opening the engine", e))?;
        let workload = (self.target.workload)();
        let loaded = workload
            .load(&*engine, &|_, _| {})
            .and_then(|()| crate::loaded::mark_loaded(&*engine, workload.name()));
        loaded.map_err(|e| {
            let hint = match e {
                DbError::RegionFull(_) => "; use a larger --size or a smaller database",
                _ => "",
            };
            setup("loading the workload", format!("{e}{hint}"))
        })?;
        let load_span = Span::since(sim, (0, 0));
        engine.shutdown().map_err(|e| setup("shutting down after loading", e.to_string()))?;
        drop(engine);
        let Some(image) = region.crash_image(CrashPolicy::Persisted, 0) else {
            return Err(CrashError::Setup("the region is not a sim region".into()));
        };
        let checked = self.verify(&*workload, &image, &[], None);
        if let Some((kind, message)) = checked.failures.first() {
            return Err(CrashError::Setup(format!(
                "the loaded database fails verification after a clean shutdown, before any \
                 crash ({}): {message}",
                kind.name()
            )));
        }
        Ok((image, load_span))
    }

    /// The bases crash windows start from: the loaded image aged by each of `ages`
    /// transactions per thread (incrementally: each base continues the previous one's history).
    fn age_bases(&self, loaded: Vec<u8>, ages: &[u64]) -> Result<Vec<Vec<u8>>, CrashError> {
        let mut bases = Vec::with_capacity(ages.len());
        let (mut image, mut done) = (loaded, 0u64);
        for (j, &age) in ages.iter().enumerate() {
            if age > done {
                let txns = (age - done).saturating_mul(self.options.threads as u64);
                let seed = derive(self.options.seed, SALT_AGING_RUN + j as u64);
                image = self.age(&image, txns, seed)?;
                done = age;
            }
            bases.push(image.clone());
        }
        Ok(bases)
    }

    /// Runs `txns` transactions on `image` without a crash and shuts down cleanly.
    fn age(&self, image: &[u8], txns: u64, seed: u64) -> Result<Vec<u8>, CrashError> {
        let setup = |e: String| CrashError::Setup(format!("ageing the base: {e}"));
        let region = self.image_region(image).map_err(setup)?;
        let engine = self.open(region.clone()).map_err(setup)?;
        let workload = (self.target.workload)();
        // One thread: the aged image is then the same on every run of the campaign, so a
        // replay finds the base its case crashed on.
        let options = RunOptions { threads: 1, ..self.options.run_options(seed, txns, false) };
        crate::run(&*engine, &*workload, &options, &Hooks::default()).map_err(|e| {
            if e.is_region_full() {
                setup(format!("{e}; use a larger --size or a shorter --history"))
            } else {
                CrashError::Bench(e)
            }
        })?;
        engine.shutdown().map_err(|e| setup(e.to_string()))?;
        drop(engine);
        region
            .crash_image(CrashPolicy::Persisted, 0)
            .ok_or_else(|| setup("not a sim region".into()))
    }

    /// Runs the workload once on the base without a crash: its span and what the engine did,
    /// and a sanity check that the workload passes its checker on this engine at all.
    fn dry_run(&self, base: &[u8]) -> Result<(Span, Option<EngineCounters>), CrashError> {
        let setup = |e: String| CrashError::Setup(format!("dry run: {e}"));
        let region = self.image_region(base).map_err(setup)?;
        let engine = self.open(region.clone()).map_err(setup)?;
        let Some(sim) = region.sim() else {
            return Err(setup("the region is not a sim region".into()));
        };
        let workload = (self.target.workload)();
        let before = sim.event_counts();
        let counters_before = engine.counters();
        let seed = derive(self.options.seed, SALT_DRY_RUN);
        let result = crate::run(
            &*engine,
            &*workload,
            &self.options.run_options(seed, self.options.txns_per_thread, true),
            &Hooks::default(),
        )?;
        let span = Span::since(sim, before);
        let counters = engine.counters().zip(counters_before).map(|(a, b)| a.since(&b));
        if !result.checker.passed() {
            return Err(setup(format!(
                "the workload's checker fails on a run without any crash: {}",
                result.checker
            )));
        }
        Ok((span, counters))
    }

    fn iteration(
        &self,
        base: &[u8],
        workload: &dyn Workload,
        index: u64,
        case: &Replay,
    ) -> Outcome {
        let mut outcome = Outcome { index, phase: Some(Phase::Run), ..Outcome::default() };
        let run = catch_unwind(AssertUnwindSafe(|| self.crash_run(base, workload, case)));
        let cut = match run {
            Ok(cut) => cut,
            Err(payload) => {
                let message = format!("during the run: {}", panic_message(&*payload));
                let v = describe_violation(case, ViolationKind::Panic, &[], message);
                outcome.violations.push(v);
                return outcome;
            }
        };
        // An aimed point is reported (and replays) as the plain point it fell on.
        let aimed = case.aim.is_some();
        let case = &match (case.aim, cut.point) {
            (Some(_), Some(point)) => Replay { point, aim: None, ..*case },
            _ => *case,
        };
        let violation = |kind, cuts: &[CrashPoint], message: String| {
            describe_violation(case, kind, cuts, message)
        };
        if let Some(e) = cut.run_error {
            outcome.violations.push(violation(ViolationKind::Run, &[], e));
        }
        match cut.image_check {
            Some(Ok(checked)) => outcome.image_checked = checked,
            Some(Err(message)) => {
                outcome.image_checked = true;
                outcome.violations.push(violation(ViolationKind::Invariant, &[], message));
            }
            None => {}
        }
        let Some(mut image) = cut.image else { return outcome };
        let acks = cut.acks;
        outcome.reached = true;
        outcome.window = cut.window;
        outcome.aimed = aimed;
        outcome.acks = acks.len() as u64;
        let mut cuts: Vec<CrashPoint> = Vec::new();
        let after = Some((case.policy, derive(case.seed, SALT_AFTER_RECOVERY)));
        let mut checked = self.verify(workload, &image, &acks, after);
        // Recovery's own writes must be durable when it returns: cut right after it and verify.
        if let Some(cut) = checked.after.take() {
            for (kind, message) in self.verify(workload, &cut, &acks, None).failures {
                let message = format!("crash right after recovery: {message}");
                outcome.violations.push(violation(kind, &[], message));
            }
        }
        for k in 0..=self.options.recovery_crashes {
            outcome.recovery_ms.extend(checked.recovery_ms);
            let failed = !checked.failures.is_empty();
            for (kind, message) in checked.failures.drain(..) {
                outcome.violations.push(violation(kind, &cuts, message));
            }
            // A broken image says all there is to say; crashing its recovery adds nothing.
            if failed || k == self.options.recovery_crashes {
                break;
            }
            let seed = derive(case.seed, SALT_RECOVERY + u64::from(k));
            let Some(point) = pick_point(self.options.event, checked.span, seed) else {
                break;
            };
            let image_seed = derive(seed, SALT_IMAGE);
            let next = catch_unwind(AssertUnwindSafe(|| {
                self.crash_recovery(&image, point, case.policy, image_seed)
            }));
            cuts.push(point);
            match next {
                Ok(Some(next)) => image = next,
                Ok(None) => break,
                Err(payload) => {
                    let message = format!("during recovery: {}", panic_message(&*payload));
                    outcome.violations.push(violation(ViolationKind::Panic, &cuts, message));
                    break;
                }
            }
            outcome.recovery_crashes += 1;
            checked = self.verify(workload, &image, &acks, None);
        }
        outcome
    }

    /// Runs the workload on a copy of `base` with `case` armed; returns the cut image and the
    /// acks recorded before the cut.
    fn crash_run(&self, base: &[u8], workload: &dyn Workload, case: &Replay) -> CutRun {
        let failed = |e: String| CutRun {
            image: None,
            acks: Vec::new(),
            run_error: Some(e),
            window: None,
            point: None,
            image_check: None,
        };
        let region = match self.image_region(base) {
            Ok(region) => region,
            Err(e) => return failed(e),
        };
        let engine = match self.open(region.clone()) {
            Ok(engine) => engine,
            Err(e) => return failed(format!("opening the base image: {e}")),
        };
        let Some(sim) = region.sim() else { return failed("not a sim region".into()) };
        sim.arm_aimed(case.aim, case.point, case.policy, derive(case.seed, SALT_IMAGE));
        let stop = AtomicBool::new(false);
        let slack = if case.aim.is_some() { AIM_RUN_SLACK } else { RUN_SLACK };
        let per_thread = self.options.txns_per_thread.saturating_mul(slack);
        let limit = (self.options.threads as u64).saturating_mul(per_thread);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX).saturating_add(1024);
        let sink = CutSink { sim, log: AckLog::new(limit), stop: &stop };
        let halting = Halting { inner: workload, region: region.clone() };
        let hooks = Hooks { progress: None, sink: Some(&sink), stop: Some(&stop) };
        let options = self.options.run_options(case.seed, per_thread, false);
        let before = engine.counters();
        let result = crate::run(&*engine, &halting, &options, &hooks);
        // The counters stopped at the cut: this is what the crash window held.
        let window = engine.counters().zip(before).map(|(after, before)| after.since(&before));
        let image = sim.take_image();
        let image_check = match (self.target.image_check, &image) {
            (Some(check), Some(image)) => Some(image_check::run(check, &*engine, &region, image)),
            _ => None,
        };
        drop(engine);
        CutRun {
            image,
            acks: sink.log.acks(),
            run_error: result.err().map(|e| e.to_string()),
            window,
            point: sim.cut_point(),
            image_check,
        }
    }

    /// Recovers `image` with a crash armed at `point` inside the recovery; the cut image.
    fn crash_recovery(
        &self,
        image: &[u8],
        point: CrashPoint,
        policy: CrashPolicy,
        seed: u64,
    ) -> Option<Vec<u8>> {
        let region = self.image_region(image).ok()?;
        let sim = region.sim()?;
        sim.arm(point, policy, seed);
        // Recovery may fail after the cut; the image taken before that is what is tested.
        let _ = self.open(region.clone());
        sim.take_image()
    }

    /// Recovers `image` (timed) and runs every check against it. `after`: also cut the
    /// recovered region right after recovery under this policy and seed (`Checked::after`).
    fn verify(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acks: &[Ack],
        after: Option<(CrashPolicy, u64)>,
    ) -> Checked {
        let mut checked =
            Checked { recovery_ms: None, span: Span::default(), failures: Vec::new(), after: None };
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.verify_into(workload, image, acks, after, &mut checked)
        }));
        if let Err(payload) = result {
            let message = format!("during recovery or verification: {}", panic_message(&*payload));
            checked.failures.push((ViolationKind::Panic, message));
        }
        checked
    }

    fn verify_into(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acks: &[Ack],
        after: Option<(CrashPolicy, u64)>,
        out: &mut Checked,
    ) {
        let region = match self.image_region(image) {
            Ok(region) => region,
            Err(e) => return out.failures.push((ViolationKind::Recovery, e)),
        };
        let Some(sim) = region.sim() else {
            return out.failures.push((ViolationKind::Recovery, "not a sim region".into()));
        };
        let started = Instant::now();
        let opened = self.open(region.clone());
        out.recovery_ms = Some(started.elapsed().as_secs_f64() * 1e3);
        out.span = Span::since(sim, (0, 0));
        let engine = match opened {
            Ok(engine) => engine,
            Err(e) => {
                return out
                    .failures
                    .push((ViolationKind::Recovery, format!("recovery failed: {e}")))
            }
        };
        if let Some((policy, seed)) = after {
            out.after = region.crash_image(policy, seed);
        }
        out.failures.extend(check_recovered(&*engine, workload, acks));
    }
}

/// Runs every check on a recovered engine: the workload reattaches, the acks hold, the
/// workload's invariants hold, the engine's structures agree.
pub(crate) fn check_recovered(
    engine: &dyn Engine,
    workload: &dyn Workload,
    acks: &[Ack],
) -> Vec<(ViolationKind, String)> {
    let mut failures = Vec::new();
    if let Err(e) = workload.attach(engine) {
        let message = format!("the workload's tables after recovery: {e}");
        failures.push((ViolationKind::Recovery, message));
        return failures;
    }
    if let Err(e) = workload.verify_acks(engine, acks) {
        failures.push((ViolationKind::Durability, e));
    }
    if let Err(e) = workload.check(engine) {
        failures.push((ViolationKind::Consistency, e));
    }
    if let Err(e) = engine.check_integrity() {
        failures.push((ViolationKind::Integrity, e));
    }
    failures
}

/// What a cut run left.
struct CutRun {
    /// The image cut at the crash point; `None` if the run ended before it.
    image: Option<Vec<u8>>,
    /// Acks of the transactions observed durable before the cut.
    acks: Vec<Ack>,
    /// The driver's error, if the run failed.
    run_error: Option<String>,
    /// The engine's counters from the start of the run to the cut.
    window: Option<EngineCounters>,
    /// Where the cut fell, counted from arming.
    point: Option<CrashPoint>,
    /// What [`SimTarget::image_check`] said of the image (`None`: no check or no image).
    image_check: Option<Result<bool, String>>,
}

/// Records durable transactions while the cut has not been taken; after it, asks the run to
/// stop. Called after the worker observed durability, so "not taken yet" here implies "not
/// taken at the observation" (the flag only goes from false to true while armed).
struct CutSink<'a> {
    sim: &'a Sim,
    log: AckLog,
    stop: &'a AtomicBool,
}

impl DurableSink for CutSink<'_> {
    fn on_durable(&self, txns: &[DurableTxn]) {
        if self.sim.cut_taken() {
            self.stop.store(true, Ordering::Relaxed);
            return;
        }
        self.log.on_durable(txns);
    }
}

/// The workload under test, whose workers stop touching the engine once the cut is taken:
/// what runs after the cut cannot change the image, so it is skipped rather than run to the
/// end of the iteration's transaction count.
struct Halting<'a> {
    inner: &'a dyn Workload,
    region: Region,
}

impl Workload for Halting<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        self.inner.load(engine, progress)
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        self.inner.attach(engine)
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(HaltingWorker {
            inner: self.inner.worker(worker, seed),
            region: self.region.clone(),
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        self.inner.check(engine)
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        self.inner.verify_acks(engine, acks)
    }
}

struct HaltingWorker {
    inner: Box<dyn Worker>,
    region: Region,
}

impl Worker for HaltingWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        if self.region.sim().is_some_and(Sim::cut_taken) {
            return Ok(TxnDone { kind: "after-cut", token: None, retries: 0, acks: Vec::new() });
        }
        self.inner.run_one(engine)
    }
}

fn describe_violation(
    case: &Replay,
    kind: ViolationKind,
    cuts: &[CrashPoint],
    message: String,
) -> Violation {
    let mut crash = case.describe();
    if !cuts.is_empty() {
        let points: Vec<String> =
            cuts.iter().map(|p| format!("{}:{}", event_name(p.event), p.count)).collect();
        crash.push_str(&format!(" then in recovery at {}", points.join(", ")));
    }
    // An aimed case that was not turned into a plain point (it failed before any cut) has no
    // `--replay` form.
    let replay = case.aim.is_none().then(|| case.args());
    Violation { kind, crash, replay, message }
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

    #[test]
    fn summary_counts_and_percentiles() {
        let mut s = Summary::default();
        let violation = Violation {
            kind: ViolationKind::Durability,
            crash: "c".into(),
            replay: None,
            message: "m".into(),
        };
        s.add(&Outcome {
            index: 1,
            reached: true,
            acks: 3,
            recovery_ms: vec![2.0, 1.0],
            window: Some(EngineCounters { splits: 2, commits: 3, ..Default::default() }),
            ..Default::default()
        });
        s.add(&Outcome { index: 0, reached: false, ..Default::default() });
        s.add(&Outcome {
            index: 2,
            reached: true,
            recovery_ms: vec![3.0],
            violations: vec![
                violation.clone(),
                Violation { kind: ViolationKind::Integrity, ..violation },
            ],
            ..Default::default()
        });
        s.finish();
        assert_eq!((s.iterations, s.crashes, s.unreached), (3, 2, 1));
        assert_eq!((s.violations, s.failed_iterations, s.acks_verified), (2, 1, 3));
        assert_eq!(s.violations_by_kind[&ViolationKind::Durability], 1);
        assert_eq!((s.recovery_ms_p50(), s.recovery_ms_max()), (2.0, 3.0));
        assert_eq!(s.kept.len(), 2);
        assert_eq!((s.windows, s.coverage.splits, s.coverage.commits), (1, 2, 3));
        assert_eq!((s.windows_with.splits, s.windows_with.merges), (1, 0));
    }
}

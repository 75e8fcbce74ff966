//! The damaged-region fuzzer (docs/design.md §7: "corrupt or truncated regions are fuzzed"): damage
//! a populated region in one of its structures, open the engine on it, use it, check it, and
//! classify what happened.
//!
//! Would catch: a panic, an endless loop or a reformat on a damaged region, and (counted, not
//! failed) damage that is silently accepted as different contents.
//!
//! One run builds a few populated base images once, on the `sim` medium: TPC-B and YCSB loads
//! churned by inserts and deletes (small B+tree nodes, so trees have several levels, merges
//! and free slots), and images cut while transactions are in flight (active user and system
//! undo logs). The engine opened on each undamaged image gives the reference contents and,
//! through [`Engine::describe_offset`], what lives in each page. Case `k` then derives from
//! `(seed, k)` a base, a target (superblock, its copy, catalog, allocator bitmap or mirror, user
//! or system undo log, B+tree root, inner node or leaf, heap page, free page, truncation, or
//! one of the engine's own structures: `wal`'s log and control line, `group`'s batch log,
//! `cow`'s master record and pages, `lsm`'s control page, manifest, log, memtable and runs,
//! `sqlite-nvwal`'s header, block table, log blocks and database file),
//! a page of that target and a damage (bit flips, overwritten words, a zeroed page, a stale
//! copy of another page, or the page as an older image held it: a lost write), and runs these
//! steps, each under `catch_unwind` and a watchdog:
//! open; scan every table (compared with the reference); a short workload of transactions
//! checked against a model of the contents; `check_integrity`; a final scan against the model;
//! a reopen with another integrity check.
//!
//! Classes, best first: `rejected` (open returned `Corrupt` / `Format`), `detected` (a later
//! step returned `Corrupt` or integrity failed), `accepted-same` (the damage changed nothing
//! visible), `accepted-different` (opened and checked fine, but contents differ from the
//! reference or the model: wrongly accepted), `error` (another typed error, e.g. region full),
//! and the failures: `panic`, `hang` (a step took longer than the step timeout), `reformatted`
//! (a populated region came back freshly formatted).
//!
//! Determinism: a case depends only on `(seed, case)` and the base images (themselves built
//! from the seed), so `--case K` reruns exactly case K.
//!
//! Split by job: [`base`] builds the base images and names their pages' targets, [`damage`]
//! plans and applies a case's damage, this file runs and classifies the cases.

use crate::seed::splitmix64;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::{Duration, Instant};
use storage::{DbError, Engine, TableId};
use workloads::WorkloadOptions;

mod base;
mod damage;

pub use base::build_bases;
use base::*;
pub use damage::{damage, Patch};

/// Opens (formats or recovers) the engine under test on a region. Shared with case threads
/// that may outlive a hung step, hence `Arc` and `'static`.
pub type OpenEngine = Arc<dyn Fn(Region) -> storage::Result<Box<dyn Engine>> + Send + Sync>;

/// Most cases one run takes.
pub const MAX_CASES: u64 = 1_000_000_000;
/// Most cases run at once.
pub const MAX_JOBS: usize = 256;
/// Hung case threads cannot be stopped (they keep a core busy): after this many the run ends.
pub const MAX_HANGS: u64 = 8;
/// Cases kept with their details per class; later ones are only counted.
pub const MAX_KEPT_PER_CLASS: usize = 20;
/// Size of every base region: small, so a case copies little.
pub const REGION_BYTES: u64 = 2 << 20;
/// Worker slots the base regions are formatted for (the workload uses 0 and 1).
pub const WORKERS: usize = 2;
/// B+tree node capacity of the base regions: small, so trees have several levels.
pub const NODE_CAPACITY: u32 = 8;

// Salts of the independent random streams of a case.
const SALT_PLAN: u64 = 1;
const SALT_WORKLOAD: u64 = 2;
const SALT_BASE: u64 = 3;

/// What a case ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Rejected,
    Detected,
    AcceptedSame,
    AcceptedDifferent,
    Error,
    Panic,
    Hang,
    Reformatted,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Rejected,
        Class::Detected,
        Class::AcceptedSame,
        Class::AcceptedDifferent,
        Class::Error,
        Class::Panic,
        Class::Hang,
        Class::Reformatted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Rejected => "rejected",
            Class::Detected => "detected",
            Class::AcceptedSame => "accepted-same",
            Class::AcceptedDifferent => "accepted-different",
            Class::Error => "error",
            Class::Panic => "panic",
            Class::Hang => "hang",
            Class::Reformatted => "reformatted",
        }
    }

    /// Whether the class is a bug the run fails on.
    pub fn is_failure(self) -> bool {
        matches!(self, Class::Panic | Class::Hang | Class::Reformatted)
    }
}

/// What a damaged page held in the undamaged image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Superblock,
    SuperblockCopy,
    Catalog,
    Bitmap,
    BitmapMirror,
    UserUndo,
    SystemUndo,
    BtreeRoot,
    BtreeInner,
    BtreeLeaf,
    Heap,
    FreePage,
    Truncation,
    // Each engine's own structures (named by its `describe_offset`).
    WalControl,
    WalPageLog,
    WalLog,
    GroupBatchControl,
    GroupBatchLog,
    CowMaster,
    CowPage,
    LsmControl,
    LsmManifest,
    LsmLog,
    LsmMemtable,
    LsmRun,
    NvwalHeader,
    NvwalBlockTable,
    NvwalLogBlock,
    NvwalDatabase,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Superblock => "superblock",
            Target::SuperblockCopy => "superblock-copy",
            Target::Catalog => "catalog",
            Target::Bitmap => "bitmap",
            Target::BitmapMirror => "bitmap-mirror",
            Target::UserUndo => "user-undo",
            Target::SystemUndo => "system-undo",
            Target::BtreeRoot => "btree-root",
            Target::BtreeInner => "btree-inner",
            Target::BtreeLeaf => "btree-leaf",
            Target::Heap => "heap",
            Target::FreePage => "free-page",
            Target::Truncation => "truncation",
            Target::WalControl => "wal-control",
            Target::WalPageLog => "wal-page-log",
            Target::WalLog => "wal-log",
            Target::GroupBatchControl => "group-batch-control",
            Target::GroupBatchLog => "group-batch-log",
            Target::CowMaster => "cow-master-record",
            Target::CowPage => "cow-page",
            Target::LsmControl => "lsm-control",
            Target::LsmManifest => "lsm-manifest",
            Target::LsmLog => "lsm-log",
            Target::LsmMemtable => "lsm-memtable",
            Target::LsmRun => "lsm-run",
            Target::NvwalHeader => "nvwal-header",
            Target::NvwalBlockTable => "nvwal-block-table",
            Target::NvwalLogBlock => "nvwal-log-block",
            Target::NvwalDatabase => "nvwal-database",
        }
    }
}

/// How a page is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DamageKind {
    BitFlips,
    Words,
    ZeroPage,
    StalePage,
    Truncate,
}

impl DamageKind {
    pub fn name(self) -> &'static str {
        match self {
            DamageKind::BitFlips => "bit-flips",
            DamageKind::Words => "words",
            DamageKind::ZeroPage => "zero-page",
            DamageKind::StalePage => "stale-page",
            DamageKind::Truncate => "truncate",
        }
    }
}

/// A small deterministic generator (SplitMix64 stream): the bench crate has no `rand`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(splitmix64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

fn derive(seed: u64, case: u64, salt: u64) -> u64 {
    splitmix64(splitmix64(seed ^ salt.wrapping_mul(0xA24B_AED4_963E_E407)) ^ case)
}

/// Table name -> key -> row.
type Contents = BTreeMap<String, BTreeMap<u64, Vec<u8>>>;

/// A populated image and what the fuzzer knows about it.
pub struct Base {
    pub name: String,
    pub image: Vec<u8>,
    /// Contents after recovery of the undamaged image.
    contents: Contents,
    /// Pages of each target (truncation has none).
    pages: BTreeMap<Target, Vec<u64>>,
    /// Offsets of undo log header words (the first page of each log).
    undo_headers: Vec<u64>,
    /// An older image of the same region (before the churn, or before the cut): where a page
    /// differs, copying it back is a lost write.
    older: Vec<u8>,
    /// Cache lines written since the older image, per page: damage there hits live records.
    recent: BTreeMap<u64, Vec<u64>>,
}

impl Base {
    /// Rows over all tables of the reference contents.
    pub fn rows(&self) -> usize {
        self.contents.values().map(|t| t.len()).sum()
    }

    /// Pages per target, for reports.
    pub fn target_pages(&self) -> BTreeMap<&'static str, usize> {
        self.pages.iter().map(|(t, p)| (t.name(), p.len())).collect()
    }

    /// A 64-bit fingerprint of the image (to compare runs).
    pub fn checksum(&self) -> u64 {
        fingerprint(&self.image)
    }
}

fn fingerprint(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = splitmix64(h ^ u64::from_le_bytes(w));
    }
    h
}

/// How a fuzzing run goes.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    pub cases: u64,
    pub seed: u64,
    pub jobs: usize,
    /// Run only this case.
    pub only: Option<u64>,
    /// A step taking longer is a hang.
    pub step_timeout: Duration,
    /// Transactions of each case's workload.
    pub txns: u32,
    /// Size of the regions the base images are loaded on ([`REGION_BYTES`] suits `inplace`;
    /// an engine with its own logs needs them on top).
    pub region_bytes: u64,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            cases: 1000,
            seed: 42,
            jobs: 1,
            only: None,
            step_timeout: Duration::from_secs(5),
            txns: 200,
            region_bytes: REGION_BYTES,
        }
    }
}

impl FuzzOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.only.is_none() && (self.cases == 0 || self.cases > MAX_CASES) {
            return Err(format!("cases must be 1..={MAX_CASES}, got {}", self.cases));
        }
        if self.jobs == 0 || self.jobs > MAX_JOBS {
            return Err(format!("jobs must be 1..={MAX_JOBS}, got {}", self.jobs));
        }
        if self.txns > 100_000 {
            return Err(format!("transactions per case must be at most 100000, got {}", self.txns));
        }
        if !(64 << 10..=1 << 30).contains(&self.region_bytes) {
            return Err(format!("region size must be 64 KiB..=1 GiB, got {}", self.region_bytes));
        }
        Ok(())
    }
}

/// One case's damage.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub case: u64,
    pub base: String,
    pub target: Target,
    pub damage: DamageKind,
    /// The damaged page (or the truncated length, for truncation).
    pub page: u64,
    /// In words: what was changed where.
    pub what: String,
}

/// What one case found.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub plan: Plan,
    pub class: Class,
    /// The step that decided the class.
    pub step: &'static str,
    pub message: String,
}

/// Counts of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub cases: u64,
    pub classes: BTreeMap<&'static str, u64>,
    /// Target -> class -> cases.
    pub by_target: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// Damage kind -> class -> cases.
    pub by_damage: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// The first cases of each class other than rejected, detected and accepted-same.
    pub kept: Vec<Outcome>,
    /// Order-independent fingerprint of every case's class (equal runs, equal fingerprints).
    pub fingerprint: u64,
    /// Set when the run ended early (too many hangs).
    pub stopped: Option<String>,
    pub elapsed_s: f64,
}

impl Summary {
    fn add(&mut self, o: &Outcome) {
        self.cases += 1;
        *self.classes.entry(o.class.name()).or_default() += 1;
        let t = self.by_target.entry(o.plan.target.name()).or_default();
        *t.entry(o.class.name()).or_default() += 1;
        let d = self.by_damage.entry(o.plan.damage.name()).or_default();
        *d.entry(o.class.name()).or_default() += 1;
        self.fingerprint = self
            .fingerprint
            .wrapping_add(splitmix64(o.plan.case.wrapping_mul(31).wrapping_add(o.class as u64)));
        let boring = matches!(o.class, Class::Rejected | Class::Detected | Class::AcceptedSame);
        let kept = self.kept.iter().filter(|k| k.class == o.class).count();
        if !boring && kept < MAX_KEPT_PER_CLASS {
            self.kept.push(o.clone());
        }
    }

    pub fn count(&self, class: Class) -> u64 {
        self.classes.get(class.name()).copied().unwrap_or(0)
    }

    pub fn failures(&self) -> u64 {
        Class::ALL.iter().filter(|c| c.is_failure()).map(|c| self.count(*c)).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// The step a case thread is in and since when (read by the watchdog).
struct Progress(Mutex<(&'static str, Instant)>);

impl Progress {
    fn enter(&self, step: &'static str) {
        if let Ok(mut g) = self.0.lock() {
            *g = (step, Instant::now());
        }
    }

    fn current(&self) -> (&'static str, Duration) {
        match self.0.lock() {
            Ok(g) => (g.0, g.1.elapsed()),
            Err(_) => ("?", Duration::ZERO),
        }
    }
}

/// How a case ended: class, step, message.
type Verdict = (Class, &'static str, String);

thread_local! {
    /// The message and location of the last panic on this thread (set by the quiet hook).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static QUIET_HOOK: Once = Once::new();

/// Case threads' panics are results, not noise: record them instead of printing them.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours = std::thread::current().name().is_some_and(|n| n.starts_with("fuzz-case"));
            if !ours {
                return previous(info);
            }
            let message = crate::crash::panic_message(info.payload());
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line()));
            LAST_PANIC
                .with(|p| *p.borrow_mut() = Some(format!("{message}{}", at.unwrap_or_default())));
        }));
    });
}

/// Runs `f` as step `name`: a panic is the case's verdict.
fn step<T>(progress: &Progress, name: &'static str, f: impl FnOnce() -> T) -> Result<T, Verdict> {
    progress.enter(name);
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| crate::crash::panic_message(&*payload));
        (Class::Panic, name, message)
    })
}

/// The verdict of a typed error: damage noticed (rejected at open, detected later) or another
/// error.
fn on_error(e: &DbError, name: &'static str, at_open: bool) -> Verdict {
    let class = match e {
        DbError::Corrupt(_) | DbError::Format(_) if at_open => Class::Rejected,
        DbError::Corrupt(_) | DbError::Format(_) => Class::Detected,
        _ => Class::Error,
    };
    (class, name, e.to_string())
}

/// What a case needs, shareable with a case thread that may outlive the run's scope.
struct CaseInput {
    open: OpenEngine,
    bases: Arc<Vec<Base>>,
    base: usize,
    patch: Patch,
    seed: u64,
    case: u64,
    txns: u32,
}

fn execute(input: &CaseInput, progress: &Progress) -> Verdict {
    match execute_steps(input, progress) {
        Ok(v) | Err(v) => v,
    }
}

fn execute_steps(input: &CaseInput, progress: &Progress) -> Result<Verdict, Verdict> {
    let base = &input.bases[input.base];
    let open = &input.open;
    let region = match Region::from_image(&base.image[..input.patch.len], &region_options()) {
        Ok(r) => r,
        Err(e) => return Ok((Class::Rejected, "map", e.to_string())),
    };
    // The damage is written through the region (on `sim` the lines count as written, not
    // persisted, which nothing here looks at).
    for (page, bytes) in &input.patch.pages {
        region.write(page * storage::format::PAGE_SIZE_U64, bytes);
    }
    let engine = match step(progress, "open", || open(region.clone()))? {
        Ok(engine) => engine,
        Err(e) => return Ok(on_error(&e, "open", true)),
    };
    if engine.recovery_report().formatted {
        return Ok((Class::Reformatted, "open", "the populated region was formatted".into()));
    }
    let mut different: Option<String>;
    let mut model = match step(progress, "scan", || scan_contents(&*engine))? {
        Ok(c) => {
            different = difference(&base.contents, &c).map(|d| format!("after open: {d}"));
            c
        }
        Err(DbError::Invalid(m)) if m.starts_with("scan returned") => {
            return Ok((Class::AcceptedDifferent, "scan", m));
        }
        Err(e) => return Ok(on_error(&e, "scan", false)),
    };
    let mut rng = Rng::new(derive(input.seed, input.case, SALT_WORKLOAD));
    let (result, note) = step(progress, "workload", || {
        let mut churn =
            Churn { engine: &*engine, model: &mut model, rng: &mut rng, different: None };
        let r = churn.run(input.txns, 0);
        (r, churn.different)
    })?;
    if let Err(e) = result {
        return Ok(on_error(&e, "workload", false));
    }
    different = different.or(note.map(|d| format!("workload: {d}")));
    if let Err(e) = step(progress, "integrity", || engine.check_integrity())? {
        return Ok((Class::Detected, "integrity", e));
    }
    match step(progress, "final scan", || scan_contents(&*engine))? {
        Ok(c) => {
            let d = difference(&model, &c).map(|d| format!("final scan: {d}"));
            different = different.or(d);
        }
        Err(e) => return Ok(on_error(&e, "final scan", false)),
    }
    step(progress, "close", || drop(engine))?;
    let engine = match step(progress, "reopen", || open(region.clone()))? {
        Ok(engine) => engine,
        Err(e) => return Ok(on_error(&e, "reopen", false)),
    };
    if engine.recovery_report().formatted {
        return Ok((Class::Reformatted, "reopen", "the region was formatted on reopen".into()));
    }
    if let Err(e) = step(progress, "reopen integrity", || engine.check_integrity())? {
        return Ok((Class::Detected, "reopen integrity", e));
    }
    match step(progress, "reopen scan", || scan_contents(&*engine))? {
        Ok(c) => {
            let d = difference(&model, &c).map(|d| format!("after reopen: {d}"));
            different = different.or(d);
        }
        Err(e) => return Ok(on_error(&e, "reopen scan", false)),
    }
    step(progress, "close", || drop(engine))?;
    Ok(match different {
        Some(d) => (Class::AcceptedDifferent, "compare", d),
        None => (Class::AcceptedSame, "compare", String::new()),
    })
}

/// Runs one case in its own thread under the watchdog.
fn run_case(
    open: &OpenEngine,
    bases: &Arc<Vec<Base>>,
    options: &FuzzOptions,
    case: u64,
) -> Outcome {
    let (base, plan, patch) = damage(bases, options.seed, case);
    let input = CaseInput {
        open: open.clone(),
        bases: bases.clone(),
        base,
        patch,
        seed: options.seed,
        case,
        txns: options.txns,
    };
    let progress = Arc::new(Progress(Mutex::new(("start", Instant::now()))));
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name(format!("fuzz-case-{case}")).spawn({
        let progress = progress.clone();
        move || {
            let verdict = execute(&input, &progress);
            let _ = tx.send(verdict);
        }
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => {
            let message = format!("spawning the case thread: {e}");
            return Outcome { plan, class: Class::Error, step: "spawn", message };
        }
    };
    let poll = (options.step_timeout / 4).max(Duration::from_millis(10));
    loop {
        match rx.recv_timeout(poll) {
            Ok((class, step, message)) => {
                let _ = handle.join();
                return Outcome { plan, class, step, message };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let (step, took) = progress.current();
                if took > options.step_timeout {
                    // The thread cannot be stopped: it is left running (and counted).
                    let message = format!("step `{step}` still running after {took:?}");
                    return Outcome { plan, class: Class::Hang, step, message };
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let message = "the case thread ended without a verdict".to_string();
                return Outcome { plan, class: Class::Panic, step: "?", message };
            }
        }
    }
}

/// Facts about a base image, for reports.
#[derive(Clone, Debug, Serialize)]
pub struct BaseInfo {
    pub name: String,
    pub bytes: usize,
    pub rows: usize,
    pub checksum: String,
    pub pages: BTreeMap<&'static str, usize>,
}

/// Runs a fuzzing campaign. `on_case` sees every outcome as it is classified (with the number
/// done and the total).
pub fn run(
    open: OpenEngine,
    options: &FuzzOptions,
    on_case: &(dyn Fn(&Outcome, u64, u64) + Sync),
) -> Result<(Vec<BaseInfo>, Summary), String> {
    options.validate()?;
    let started = Instant::now();
    let bases = Arc::new(build_bases(&open, options.seed, options.region_bytes)?);
    let info = bases
        .iter()
        .map(|b| BaseInfo {
            name: b.name.clone(),
            bytes: b.image.len(),
            rows: b.rows(),
            checksum: format!("{:016x}", b.checksum()),
            pages: b.target_pages(),
        })
        .collect();
    let cases: Vec<u64> = match options.only {
        Some(k) => vec![k],
        None => (0..options.cases).collect(),
    };
    if options.only.is_none() {
        install_quiet_hook();
    }
    let total = cases.len() as u64;
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let hangs = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let summary = Mutex::new(Summary::default());
    std::thread::scope(|s| {
        for _ in 0..options.jobs.min(cases.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= cases.len() || stop.load(Ordering::Relaxed) {
                    break;
                }
                let outcome = run_case(&open, &bases, options, cases[i]);
                if outcome.class == Class::Hang
                    && hangs.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_HANGS
                {
                    stop.store(true, Ordering::Relaxed);
                }
                if let Ok(mut s) = summary.lock() {
                    s.add(&outcome);
                }
                on_case(&outcome, done.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    let mut summary = summary.into_inner().map_err(|_| "a job panicked".to_string())?;
    if stop.load(Ordering::Relaxed) {
        summary.stopped =
            Some(format!("stopped after {MAX_HANGS} hangs (their threads still run)"));
    }
    summary.elapsed_s = started.elapsed().as_secs_f64();
    Ok((info, summary))
}

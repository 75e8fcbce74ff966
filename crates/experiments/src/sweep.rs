//! `nvmdb sweep`: expand specs, skip the runs already in `DIR/results.jsonl`, run the rest one
//! child process at a time, and append a row per run.
//!
//! Invariants: runs happen in expansion order, point by point and repetition by repetition; a
//! run is appended (synced) before the next starts, so killing the sweep loses at most the run
//! in progress and the same command resumes it; once the bench has rejected an engine, a
//! workload or a flag, the other points that need it are recorded as not runnable without
//! starting a process.
//!
//! Loading is most of a short run's time at the papers' scales (TATP at 440 takes minutes), so
//! runs on `--medium dram` whose flags differ only in what the measured run does
//! ([`RUN_ONLY_FLAGS`]: persist latency, bandwidth, cache size, …) share one loaded database:
//! the first loads it, shuts down cleanly and saves it (`nvmdb bench --image`), the rest start
//! from a copy of it; it is removed after its last run of the sweep (kept if the sweep is cut
//! short, and reused when it resumes).

use crate::grid::{self, ExpandOptions, OverrideError, Point, Scale, Shard};
use crate::results::{self, keys, Appender, Row, Status, StoreError};
use crate::runner::{self, BenchCommand, Outcome, Unsupported};
use crate::spec::{FlagValue, Mode, Spec};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A sweep that cannot start or cannot record its results.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Override(#[from] OverrideError),
    /// Not `#[from]`: that would make the `StoreError` the source as well, and an error chain
    /// would print its text twice.
    #[error("cannot record results: {0}")]
    Store(StoreError),
    #[error("two specs are called `{0}`; give one a different [spec] name")]
    DuplicateName(String),
}

impl From<StoreError> for SweepError {
    fn from(e: StoreError) -> Self {
        SweepError::Store(e)
    }
}

/// What a sweep does besides the specs.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    pub out: PathBuf,
    pub expand: ExpandOptions,
    pub shard: Option<Shard>,
    /// Also re-run points that ended in an error or a timeout.
    pub retry_failed: bool,
    pub bench: BenchCommand,
    /// Where crash_recover and `io=fs` runs keep their region files (default: /dev/shm for shm,
    /// else DIR/scratch).
    pub scratch: Option<PathBuf>,
    /// Where the loaded databases of `--medium dram` runs are cached (`nvmdb bench --image`);
    /// `None`: every run loads its own.
    pub images: Option<PathBuf>,
    /// Which repetitions of a point run the bench's consistency checker.
    pub check: CheckReps,
}

/// Which repetitions of a point run `nvmdb bench`'s consistency checker after the measured run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CheckReps {
    /// Every repetition (the default).
    #[default]
    Every,
    /// Only repetition 0: the checker scans the whole database (seconds at the reproduction
    /// scales, a third of a run), and every repetition of a point starts from the same image and
    /// runs the same code, so the first one's verdict is the point's. A point whose flags already
    /// say `no_check` is not checked at all.
    First,
}

impl CheckReps {
    /// Whether repetition `rep` skips the checker (adds `--no-check`).
    pub fn skips(self, rep: u32) -> bool {
        self == CheckReps::First && rep > 0
    }
}

/// Bench flags that change only the measured run, not the database a load builds: runs whose
/// flags differ only in these start from one saved image. Everything else (engine, its options,
/// workload and its shape, scale, records, size, threads, seed, medium) is part of the image's
/// key. `txn` is not run-only: it picks what a load builds (Mobibench loads no rows for inserts,
/// 1,000 for updates, 100,000 for deletes), so an update run on an insert run's image found
/// none of its rows (issue 36).
pub const RUN_ONLY_FLAGS: &[&str] = &[
    "duration",
    "warmup",
    "txns",
    "persist_latency",
    "write_latency",
    "write_bandwidth",
    "reservation",
    "read_latency",
    "fs_sync_latency",
    "fs_write_bandwidth",
    "cache_pages",
    "cpu_cache",
    "cache_policy",
    "wear",
    "wear_granularity",
    "max_pending",
    "target_tps",
    "no_check",
];

/// The key of the image `point`'s run can start from: `Mode::Run` points on `--medium dram`
/// (the file media reopen their own `--path`; crash_recover loads its own region), named by a
/// hash of every flag that is not in [`RUN_ONLY_FLAGS`].
pub fn image_key(point: &Point) -> Option<String> {
    let on_dram = matches!(point.flags.get("medium"), Some(FlagValue::Text(m)) if m == "dram");
    if point.mode != Mode::Run || !on_dram || point.flags.contains_key("image") {
        return None;
    }
    let kept: crate::spec::Flags = point
        .flags
        .iter()
        .filter(|(k, _)| !RUN_ONLY_FLAGS.contains(&k.replace('-', "_").as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(grid::fnv_hex(grid::flags_to_args(&kept).iter().map(String::as_bytes)))
}

/// The image file of `key` in `dir`.
pub fn image_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("nvmdb-image-{key}.region"))
}

/// One spec's share of a sweep.
#[derive(Debug)]
pub struct PlannedSpec {
    pub spec: Spec,
    /// The points of this shard.
    pub points: Vec<Point>,
    /// Points of the whole grid, every shard.
    pub grid_points: usize,
    pub reps: u32,
    /// Runs to do: index into `points`, repetition.
    pub todo: Vec<(usize, u32)>,
    /// Runs of this shard already in the results.
    pub done: usize,
}

/// Every run a sweep will start.
#[derive(Debug)]
pub struct Plan {
    pub specs: Vec<PlannedSpec>,
    pub scale: Scale,
    pub skipped_lines: usize,
}

impl Plan {
    pub fn todo(&self) -> usize {
        self.specs.iter().map(|s| s.todo.len()).sum()
    }

    pub fn done(&self) -> usize {
        self.specs.iter().map(|s| s.done).sum()
    }
}

/// Expands `specs` for this shard and finds what is left to run in `options.out`.
pub fn plan(specs: Vec<Spec>, options: &SweepOptions) -> Result<Plan, SweepError> {
    let loaded = results::read_rows(&options.out.join(results::RESULTS_FILE))?;
    let done = results::done_runs(&loaded.rows, options.retry_failed);
    let mut names = BTreeSet::new();
    let mut planned = Vec::new();
    for spec in specs {
        if !names.insert(spec.name.clone()) {
            return Err(SweepError::DuplicateName(spec.name));
        }
        let (all, reps) = grid::expand(&spec, &options.expand)?;
        let grid_points = all.len();
        let points: Vec<Point> =
            all.into_iter().filter(|p| options.shard.is_none_or(|s| s.contains(p))).collect();
        // Repetition-major: every point's repetition 0, then every point's repetition 1, ...
        // The machine drifts over minutes (identical TATP runs 28 minutes apart differed by
        // 1.5x), so a point's repetitions are spread over the spec's whole run and the
        // configurations a claim compares are measured in alternation, not one after another.
        let mut todo = Vec::new();
        let mut already = 0;
        for rep in 0..reps {
            for (i, p) in points.iter().enumerate() {
                let key = (spec.name.clone(), p.id.clone(), rep, p.hash.clone());
                if done.contains(&key) {
                    already += 1;
                } else {
                    todo.push((i, rep));
                }
            }
        }
        planned.push(PlannedSpec { spec, points, grid_points, reps, todo, done: already });
    }
    Ok(Plan { specs: planned, scale: options.expand.scale(), skipped_lines: loaded.skipped_lines })
}

/// Hooks for showing a sweep's progress.
pub trait Progress {
    fn begin(&self, _todo: usize, _done: usize) {}
    fn run_started(&self, _spec: &str, _point: &Point, _rep: u32) {}
    fn run_finished(&self, _spec: &str, _point: &Point, _rep: u32, _outcome: &Outcome) {}
    fn end(&self) {}
}

/// No progress output.
pub struct Quiet;
impl Progress for Quiet {}

/// What a sweep did.
#[derive(Debug, Default)]
pub struct Summary {
    pub runs: usize,
    pub by_status: BTreeMap<&'static str, usize>,
    /// Why points could not run (`engine wal missing`).
    pub unsupported: BTreeSet<String>,
    /// The first failures: `spec point rep: message`.
    pub failures: Vec<String>,
    pub results: PathBuf,
}

/// Failures listed in a summary; the rest are only counted.
const MAX_LISTED_FAILURES: usize = 10;

impl Summary {
    pub fn count(&self, status: Status) -> usize {
        self.by_status.get(status.name()).copied().unwrap_or(0)
    }

    /// A run failed (checker, crash, timeout): the sweep should exit non-zero.
    pub fn has_failures(&self) -> bool {
        [Status::CheckFailed, Status::Error, Status::Timeout].iter().any(|&s| self.count(s) > 0)
    }
}

/// Runs every planned run, appending a row each.
pub fn run(
    plan: &Plan,
    options: &SweepOptions,
    progress: &dyn Progress,
) -> Result<Summary, SweepError> {
    let mut appender = Appender::open(&options.out)?;
    for p in &plan.specs {
        results::save_spec(&options.out, &p.spec.name, &p.spec.text)?;
    }
    let host = host_name();
    let mut summary = Summary { results: appender.path().to_path_buf(), ..Summary::default() };
    let mut rejected: Vec<Unsupported> = Vec::new();
    progress.begin(plan.todo(), plan.done());
    // Each image is removed after the last run of this sweep that starts from it.
    let keys: Vec<Option<String>> = plan
        .specs
        .iter()
        .flat_map(|p| p.todo.iter().map(|&(i, _)| image_key(&p.points[i])))
        .map(|key| key.filter(|_| options.images.is_some()))
        .collect();
    let mut last_use = BTreeMap::new();
    for (n, key) in keys.iter().enumerate() {
        if let Some(key) = key {
            last_use.insert(key.clone(), n);
        }
    }
    if let Some(dir) = options.images.as_ref().filter(|_| !last_use.is_empty()) {
        std::fs::create_dir_all(dir).map_err(|error| StoreError { path: dir.clone(), error })?;
    }
    // Region files of sweeps that were killed: each scratch directory this sweep uses.
    let scratch: BTreeSet<PathBuf> =
        plan.specs.iter().flat_map(|p| p.points.iter()).map(|p| scratch_dir(options, p)).collect();
    for dir in &scratch {
        for (path, bytes) in runner::remove_stale_regions(dir) {
            eprintln!(
                "sweep: removed {} ({:.1} MiB), left by a sweep that is no longer running",
                path.display(),
                bytes as f64 / (1 << 20) as f64
            );
        }
    }
    let mut n = 0;
    for planned in &plan.specs {
        let spec = &planned.spec;
        for &(i, rep) in &planned.todo {
            let point = &planned.points[i];
            let image = options.images.as_deref().zip(keys[n].as_deref());
            let image = image.map(|(dir, key)| image_path(dir, key));
            let last_of_image = keys[n].as_ref().is_some_and(|k| last_use[k] == n);
            n += 1;
            progress.run_started(&spec.name, point, rep);
            let started = unix_now();
            let outcome = match rejected.iter().find(|u| u.applies_to(point)) {
                Some(u) => Outcome::known_unsupported(u, point.args()),
                None => {
                    let limit = grid::timeout(spec, point, plan.scale);
                    let scratch = scratch_dir(options, point);
                    if point.mode != Mode::Run || runner::needs_region_file(point) {
                        std::fs::create_dir_all(&scratch)
                            .map_err(|error| StoreError { path: scratch.clone(), error })?;
                    }
                    let skip_check = options.check.skips(rep) && point.mode == Mode::Run;
                    let unchecked;
                    let point = if skip_check {
                        let mut p = point.clone();
                        p.flags.insert("no_check".into(), FlagValue::Switch(true));
                        unchecked = p;
                        &unchecked
                    } else {
                        point
                    };
                    runner::run_point(&options.bench, point, rep, limit, &scratch, image.as_deref())
                }
            };
            if let Some(u) = &outcome.unsupported {
                if !rejected.contains(u) {
                    rejected.push(u.clone());
                }
                summary.unsupported.insert(u.reason.clone());
            }
            let row = make_row(spec, point, rep, &outcome, plan.scale, started, &host);
            appender.append(&row)?;
            summary.runs += 1;
            *summary.by_status.entry(outcome.status.name()).or_default() += 1;
            let failed = !matches!(outcome.status, Status::Ok | Status::Unsupported);
            if failed && summary.failures.len() < MAX_LISTED_FAILURES {
                let message = outcome.error.clone().unwrap_or_default();
                summary.failures.push(format!("{} {} rep {rep}: {message}", spec.name, point.id));
            }
            progress.run_finished(&spec.name, point, rep, &outcome);
            if let (Some(image), true) = (&image, last_of_image) {
                let _ = std::fs::remove_file(image);
            }
        }
    }
    progress.end();
    Ok(summary)
}

fn scratch_dir(options: &SweepOptions, point: &Point) -> PathBuf {
    if let Some(s) = &options.scratch {
        return s.clone();
    }
    let shm = Path::new("/dev/shm");
    let on_shm = matches!(point.flags.get("medium"), Some(FlagValue::Text(m)) if m == "shm");
    if on_shm && shm.is_dir() {
        return shm.to_path_buf();
    }
    options.out.join("scratch")
}

/// The bench row with the sweep's keys (which win over a bench key of the same name).
pub fn make_row(
    spec: &Spec,
    point: &Point,
    rep: u32,
    outcome: &Outcome,
    scale: Scale,
    started_unix_s: f64,
    host: &str,
) -> Row {
    let mut map = outcome.row.clone().unwrap_or_default();
    let built = map.get("config").and_then(|c| c.get("git_commit")).and_then(Value::as_str);
    let built = built.map(str::to_string);
    let grid: Map<String, Value> =
        point.axes.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    let flags: Map<String, Value> = point
        .flags
        .iter()
        .map(|(k, v)| {
            let value = match v {
                FlagValue::Text(t) => json!(t),
                FlagValue::Switch(b) => json!(b),
                FlagValue::List(items) => json!(items),
            };
            (k.clone(), value)
        })
        .collect();
    let sweep = [
        (keys::SPEC, json!(spec.name)),
        (keys::POINT, json!(point.id)),
        (keys::REP, json!(rep)),
        (keys::HASH, json!(point.hash)),
        (keys::QUICK, json!(scale == Scale::Quick)),
        (keys::GRID, Value::Object(grid)),
        (keys::FLAGS, Value::Object(flags)),
        (keys::ARGS, json!(outcome.args)),
        (keys::STATUS, json!(outcome.status.name())),
        (keys::EXIT_CODE, json!(outcome.exit_code)),
        (keys::ERROR, json!(outcome.error)),
        (keys::WALL_S, json!(outcome.wall.as_secs_f64())),
        (keys::STARTED_UNIX_S, json!(started_unix_s)),
        (keys::HOST, json!(host)),
        (keys::CODE_COMMIT, json!(crate::provenance::code_commit(built.as_deref()))),
    ];
    for (k, v) in sweep {
        map.insert(k.to_string(), v);
    }
    if let Some(u) = &outcome.unsupported {
        map.insert(
            keys::UNSUPPORTED.into(),
            json!({"flag": u.flag, "value": u.value, "reason": u.reason}),
        );
    }
    if let Mode::CrashRecover { crash_after } = point.mode {
        map.insert(keys::CRASH_AFTER_S.into(), json!(crash_after.as_secs_f64()));
    }
    Row(map)
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

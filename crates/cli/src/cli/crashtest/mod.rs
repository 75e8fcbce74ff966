//! `nvmdb crashtest`: crash, recover, verify (docs/design.md §6, §7), for any region engine and any
//! workload, on simulated power failures ([`bench::crash`]) or, with `--kill`, on real process
//! crashes of a child running the benchmark on a `shm`/`file` region or a peer's directory
//! ([`bench::kill`]).
//!
//! Exit codes: 0 when every crash recovered and verified; 1 on any violation (each printed with
//! `seed S event E policy P` and the arguments that replay it), or when no crash point was
//! reached; 2 for a bad option or a setup failure (one line on stderr).
//!
//! Databases are small unless told otherwise (YCSB 1,000 records, TPC-B 1,000 accounts per
//! branch, TPC-C 1,000 items and 30 customers per district, TATP 1,000 subscribers; an 8 MiB
//! region, 16 MiB for TPC-C and TATP)
//! so that an iteration takes milliseconds; every workload option of `nvmdb bench` is accepted.
//!
//! Simulated campaigns cover the engine by default: B+tree nodes of 16 entries
//! (`--engine-opt node_capacity=N` overrides), so splits and merges happen inside crash windows;
//! bases aged by up to `--history` transactions per thread, so windows fall in a grown
//! database; and every `--load-every`-th crash while formatting and loading. The summary says
//! how many splits, merges, heap growths, page frees, deletes and commits fell inside the crash
//! windows.

use crate::registry::{self, EngineConfig, EngineInfo, EngineKind};
use anyhow::Context;
use bench::crash::{self, CrashOptions, EventChoice, Observer, Outcome, Replay, Summary};
use bench::crash::{ImageCheck, SimTarget, ViolationKind};
use bench::kill::{self, KillOptions, KillTarget};
use bench::units::{self, TimeUnit};
use bench::{RunLength, RunOptions, Setup};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use workloads::{Workload, WorkloadOptions};

/// Region size when `--size` is not given (an engine's own logs come on top).
const DEFAULT_SIZE: &str = "8MiB";
/// TPC-C's and TATP's region size when `--size` is not given: TPC-C's orders grow through the
/// history, and TATP's four tables have an index each.
const DEFAULT_LARGER_SIZE: &str = "16MiB";
/// TATP subscribers when neither `--records` nor `--scale` is given.
const DEFAULT_TATP_RECORDS: u64 = 1_000;
/// TPC-C items and customers per district unless given: a small, spec-shaped database.
const DEFAULT_TPCC_ITEMS: u32 = 1_000;
const DEFAULT_TPCC_CUSTOMERS: u32 = 30;
/// B+tree node capacity of simulated campaigns unless `--engine-opt node_capacity=N`: small
/// enough that a window of 50 transactions holds splits (and, with deletes, merges).
const DEFAULT_SIM_NODE_CAPACITY: &str = "16";
/// Transactions per thread that age the bases of a simulated campaign, at most.
const DEFAULT_HISTORY: u64 = 1_000;
/// Aged bases of a simulated campaign.
const DEFAULT_AGES: u32 = 4;
/// Every this many simulated crashes, one falls while formatting and loading.
const DEFAULT_LOAD_EVERY: u64 = 10;
/// Percent of simulated run crashes aimed just after a split, merge, heap growth, page free or
/// delete (uniform points almost never land in those few events).
const DEFAULT_AIM_PERCENT: u32 = 50;
/// YCSB records when neither `--records` nor `--scale` is given.
const DEFAULT_YCSB_RECORDS: u64 = 1_000;
/// TPC-B accounts per branch unless `--workload-opt accounts_per_branch=N`.
const DEFAULT_TPCB_ACCOUNTS: u64 = 1_000;
/// With `--kill`: the latest moment of a kill after the child's workers start.
const DEFAULT_KILL_WINDOW: &str = "200ms";
/// How long a child may take to open its region and start (recovery of a large region).
const CHILD_START_TIMEOUT: Duration = Duration::from_secs(120);
/// A child runs until it is killed; this only bounds a child whose parent vanished.
const CHILD_RUN: Duration = Duration::from_secs(3600);
/// Violations printed on stderr as they are found; the rest are only counted.
const MAX_PRINTED_VIOLATIONS: u64 = 20;
/// Crashed regions of failed `--kill` iterations kept for inspection.
const MAX_KEPT_REGIONS: u64 = 3;

use super::workload_flags::WorkloadFlags;

mod kill_campaign;
mod output;
use kill_campaign::{run_child, run_kill};
use output::{print_summary, Display};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Engine to crash: a region engine (inplace, ...); peers (directory engines) with --kill.
    #[arg(long, required_unless_present = "kill_child")]
    pub engine: Option<String>,
    /// Workload: ycsb, tpcb, tpcc, tatp.
    #[arg(long, default_value = "ycsb")]
    pub workload: String,
    #[command(flatten)]
    pub shape: WorkloadFlags,
    /// Crash points to test; with --kill, processes to kill.
    #[arg(long, default_value_t = 100, value_parser = super::numeric::whole::<u64>(1, 1 << 32))]
    pub crashes: u64,
    /// Seed of everything random; iteration i derives its own seed from it.
    #[arg(long, default_value_t = 42, value_parser = super::numeric::any_u64())]
    pub seed: u64,
    /// What a simulated power failure keeps of unpersisted lines: persisted, evict, torn, or
    /// all (taken in turn). Default: all.
    #[arg(long)]
    pub policy: Option<String>,
    /// Which events a crash point counts: fence, store, or any (each point picks). Default: any.
    #[arg(long)]
    pub event: Option<String>,
    /// Worker threads of each run (with more than 1, replays may not reproduce exactly).
    #[arg(
        long,
        default_value_t = 1,
        value_parser = super::numeric::whole::<usize>(1, bench::driver::MAX_THREADS as u64),
    )]
    pub threads: usize,
    /// Transactions per thread of the dry run that measures where crashes may fall (each
    /// iteration's run halts at its crash, and may go on to twice as many to reach it).
    #[arg(long, default_value_t = 50, value_parser = super::numeric::whole::<u64>(1, 1 << 32))]
    pub txns: u64,
    /// Age the base by up to this many transactions per thread before the crash windows (a
    /// random length per aged base; 0: windows start right after the load). Default: 1000.
    #[arg(long, value_parser = super::numeric::whole::<u64>(0, 1 << 32))]
    pub history: Option<u64>,
    /// Aged bases, each aged by a random length in its slice of 1..=--history. Default: 4.
    #[arg(long, value_parser = super::numeric::whole::<u32>(1, 1 << 16))]
    pub ages: Option<u32>,
    /// Every N-th crash falls while formatting the region, creating tables and loading
    /// (1: only there; 0: never). Default: 10.
    #[arg(long, value_parser = super::numeric::whole::<u64>(0, 1 << 32))]
    pub load_every: Option<u64>,
    /// Percent of crash points aimed a few events after a structural change (split, merge,
    /// heap growth, page free, delete) that the dry run made; the rest are uniform. Default: 50.
    #[arg(long, value_name = "PERCENT", value_parser = super::numeric::whole::<u32>(0, 100))]
    pub aim: Option<u32>,
    /// Per iteration, crash this many times more inside recovery (a chain: each cut falls in
    /// the recovery of the previous crash's image), verifying after each. Default: 0.
    #[arg(long, value_parser = super::numeric::whole::<u32>(0, 1000))]
    pub recovery_crashes: Option<u32>,
    /// Iterations run at once, each on its own simulated region (default: 4 per core, at most
    /// 16: a run mostly waits for the driver).
    #[arg(long, value_parser = super::numeric::whole::<usize>(1, 1024))]
    pub jobs: Option<usize>,
    /// Region size (default: `8MiB`, `16MiB` for tpcc and tatp, plus the engine's own logs:
    /// a wal log, a group batch log, lsm's areas).
    #[arg(long)]
    pub size: Option<String>,
    /// Durable processor caches (eADR): every completed store survives a simulated crash.
    #[arg(long)]
    pub eadr: bool,
    /// Engine-specific option KEY=VALUE (repeatable), e.g. node_capacity=8,
    /// fault=commit-before-data.
    #[arg(long = "engine-opt", value_name = "KEY=VALUE")]
    pub engine_opt: Vec<String>,
    /// Per-thread bound on commits waiting for durability (group commit).
    #[arg(
        long,
        default_value_t = bench::driver::DEFAULT_MAX_PENDING,
        value_parser = super::numeric::whole::<usize>(1, bench::driver::MAX_PENDING_LIMIT as u64)
    )]
    pub max_pending: usize,
    /// Rerun one case, as a violation prints it: SEED:EVENT:COUNT (with --policy).
    #[arg(long, value_name = "SEED:EVENT:COUNT")]
    pub replay: Option<String>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Real process crashes: SIGKILL a child running the benchmark, recover, verify.
    #[arg(long)]
    pub kill: bool,
    /// With --kill: the region's medium, shm (default) or file.
    #[arg(long)]
    pub medium: Option<String>,
    /// With --kill: the region file, or a peer's directory (default: a fresh name in /dev/shm
    /// for shm, in the temporary directory for file). It and PATH.base must not exist.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// With --kill: each kill comes at a random time up to this long after the child's
    /// workers start (default 200ms).
    #[arg(long)]
    pub kill_window: Option<String>,
    /// Internal: run as the child of a --kill campaign.
    #[arg(long, hide = true, value_name = "PLAN")]
    pub kill_child: Option<String>,
}

/// A command-line value that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid --{flag}: {reason}")]
struct Invalid {
    flag: &'static str,
    reason: String,
}

fn invalid(flag: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid { flag, reason: reason.into() }
}

/// What the child of a `--kill` campaign runs, passed as JSON in `--kill-child`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct ChildPlan {
    engine: String,
    workload: String,
    workload_options: WorkloadOptions,
    region: RegionOptions,
    engine_opts: BTreeMap<String, String>,
    threads: usize,
    max_pending: usize,
}

impl ChildPlan {
    fn config(&self) -> EngineConfig {
        EngineConfig {
            workers: self.threads,
            extra: self.engine_opts.clone(),
            ..Default::default()
        }
    }
}

/// Everything a campaign needs, validated.
struct Plan {
    engine: &'static EngineInfo,
    workload: String,
    workload_options: WorkloadOptions,
    config: EngineConfig,
    size_bytes: u64,
    json: bool,
    mode: Mode,
}

enum Mode {
    Sim {
        options: CrashOptions,
        eadr: bool,
    },
    Kill {
        options: KillOptions,
        medium: Medium,
        path: Option<PathBuf>,
        threads: usize,
        max_pending: usize,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(plan) = &args.kill_child {
        return run_child(plan, args.seed);
    }
    let plan = plan(&args)?;
    let summary = match &plan.mode {
        Mode::Sim { options, eadr } => run_sim(&plan, options, *eadr)?,
        Mode::Kill { .. } => run_kill(&plan)?,
    };
    print_summary(&plan, &summary)?;
    if summary.violations > 0 {
        return Ok(ExitCode::from(1));
    }
    if summary.crashes == 0 {
        eprintln!(
            "error: no crash point was reached (the runs ended first): nothing was tested; \
             use more --txns"
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn plan(args: &Args) -> anyhow::Result<Plan> {
    let engine = engine_of(args.engine.as_deref().unwrap_or_default(), args.kill)?;
    if args.threads == 0 || args.threads > bench::driver::MAX_THREADS {
        let max = bench::driver::MAX_THREADS;
        return Err(invalid("threads", format!("must be 1..={max}, got {}", args.threads)).into());
    }
    if args.txns == 0 {
        return Err(invalid("txns", "must be at least 1").into());
    }
    if args.crashes == 0 {
        return Err(invalid("crashes", "must be at least 1").into());
    }
    let default_size = match args.workload.to_ascii_lowercase().as_str() {
        "tpcc" | "tpc-c" | "tatp" => DEFAULT_LARGER_SIZE,
        _ => DEFAULT_SIZE,
    };
    let default_size = units::parse_bytes(default_size).map_err(|e| invalid("size", e.reason))?;
    let size_bytes = match args.size.as_deref() {
        Some(s) => units::parse_bytes(s).map_err(|e| invalid("size", e.to_string()))?,
        None => 0,
    };
    if args.size.is_some() && size_bytes == 0 {
        return Err(invalid("size", "must be larger than zero").into());
    }
    let mut config = EngineConfig {
        workers: args.threads,
        extra: key_values("engine-opt", &args.engine_opt)?,
        ..Default::default()
    };
    // sqlite-nvwal has no B+tree of ours (SQLite's own), `lsm` none at all (its index is its
    // sorted runs): no node capacity to shrink.
    let ours = engine.kind == EngineKind::Region
        && engine.name != sqlite_nvwal::ENGINE_NAME
        && engine.name != "lsm";
    if ours && !args.kill {
        config
            .extra
            .entry("node_capacity".into())
            .or_insert_with(|| DEFAULT_SIM_NODE_CAPACITY.into());
    }
    if ours {
        registry::region_engine_options(engine.name, &config)
            .map_err(|e| invalid("engine-opt", e.to_string()))?;
    }
    // Without --size the region holds the workload's default plus the engine's own logs; a
    // given size too small for the engine is refused here, in one line, not at setup.
    let size_bytes = match args.size {
        None => registry::default_region_bytes(engine.name, &config, default_size)
            .map_err(|e| invalid("engine-opt", e.to_string()))?,
        Some(_) => {
            registry::check_region_bytes(engine.name, &config, size_bytes)
                .map_err(|e| invalid("size", e))?;
            size_bytes
        }
    };
    let workload_options = workload_options(&args.workload, &args.shape)?;
    workloads::by_name(&args.workload, &workload_options)
        .map_err(|reason| invalid("workload", reason))?;
    let mode = if args.kill { kill_mode(args)? } else { sim_mode(args)? };
    Ok(Plan {
        engine,
        workload: args.workload.clone(),
        workload_options,
        config,
        size_bytes,
        json: args.json,
        mode,
    })
}

/// The engine called `name`, if it can be crash-tested (`kill`: by real process crashes).
fn engine_of(name: &str, kill: bool) -> Result<&'static EngineInfo, Invalid> {
    let Some(engine) = registry::lookup(name) else {
        let known = registry::names().join(", ");
        return Err(invalid("engine", format!("unknown engine `{name}` (known: {known})")));
    };
    match (engine.kind, kill) {
        (EngineKind::Testing, _) => Err(invalid(
            "engine",
            format!("`{name}` keeps nothing persistent: there is nothing to crash-test"),
        )),
        (EngineKind::Peer, false) => Err(invalid(
            "engine",
            format!(
                "`{name}` does not run on a pmem region, so crashes cannot be simulated; crash \
                 it for real with --kill"
            ),
        )),
        _ => Ok(engine),
    }
}

fn sim_mode(args: &Args) -> Result<Mode, Invalid> {
    for (flag, given) in [
        ("medium", args.medium.is_some()),
        ("path", args.path.is_some()),
        ("kill-window", args.kill_window.is_some()),
    ] {
        if given {
            return Err(invalid(flag, "applies to --kill only (simulated crashes need no file)"));
        }
    }
    let policies = match args.policy.as_deref().unwrap_or("all") {
        "all" => CrashPolicy::ALL.to_vec(),
        other => vec![CrashPolicy::parse(other).ok_or_else(|| {
            invalid("policy", format!("`{other}` is not persisted, evict, torn or all"))
        })?],
    };
    let event = args.event.as_deref().unwrap_or("any");
    let event = EventChoice::parse(event)
        .ok_or_else(|| invalid("event", format!("`{event}` is not fence, store or any")))?;
    let replay = match &args.replay {
        None => None,
        Some(text) => {
            let [policy] = policies.as_slice() else {
                return Err(invalid("replay", "needs one --policy (persisted, evict or torn)"));
            };
            Some(Replay::parse(text, *policy).map_err(|e| invalid("replay", e))?)
        }
    };
    let options = CrashOptions {
        crashes: args.crashes,
        seed: args.seed,
        policies,
        event,
        threads: args.threads,
        txns_per_thread: args.txns,
        recovery_crashes: args.recovery_crashes.unwrap_or(0),
        jobs: args.jobs.unwrap_or_else(default_jobs),
        max_pending: args.max_pending,
        replay,
        history: args.history.unwrap_or(DEFAULT_HISTORY),
        ages: args.ages.unwrap_or(DEFAULT_AGES),
        load_every: args.load_every.unwrap_or(DEFAULT_LOAD_EVERY),
        aim_percent: args.aim.unwrap_or(DEFAULT_AIM_PERCENT),
    };
    options.validate().map_err(|e| invalid("crashes", e.to_string()))?;
    Ok(Mode::Sim { options, eadr: args.eadr })
}

fn kill_mode(args: &Args) -> Result<Mode, Invalid> {
    for (flag, given) in [
        ("policy", args.policy.is_some()),
        ("event", args.event.is_some()),
        ("recovery-crashes", args.recovery_crashes.is_some()),
        ("replay", args.replay.is_some()),
        ("history", args.history.is_some()),
        ("ages", args.ages.is_some()),
        ("load-every", args.load_every.is_some()),
        ("aim", args.aim.is_some()),
        ("jobs", args.jobs.is_some()),
        ("eadr", args.eadr),
    ] {
        if given {
            return Err(invalid(flag, "applies to simulated crashes, not to --kill"));
        }
    }
    let medium = match args.medium.as_deref().unwrap_or("shm") {
        "shm" => Medium::Shm,
        "file" => Medium::File,
        other => {
            return Err(invalid("medium", format!("`{other}` cannot be killed: use shm or file")))
        }
    };
    let window = args.kill_window.as_deref().unwrap_or(DEFAULT_KILL_WINDOW);
    let window = units::parse_duration(window, TimeUnit::Seconds)
        .map_err(|e| invalid("kill-window", e.to_string()))?;
    let options = KillOptions {
        crashes: args.crashes,
        seed: args.seed,
        window,
        start_timeout: CHILD_START_TIMEOUT,
    };
    options.validate().map_err(|e| invalid("kill-window", e.to_string()))?;
    Ok(Mode::Kill {
        options,
        medium,
        path: args.path.clone(),
        threads: args.threads,
        max_pending: args.max_pending,
    })
}

fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(4, |n| 4 * n.get()).clamp(2, 16)
}

/// `KEY=VALUE` pairs of `flag` (see `workload_flags::key_values`).
fn key_values(flag: &'static str, pairs: &[String]) -> Result<BTreeMap<String, String>, Invalid> {
    super::workload_flags::key_values(pairs).map_err(|reason| invalid(flag, reason))
}

/// The workload flags, `--workload-opt` pairs laid over them, then crashtest's small-database
/// defaults for what is still unset.
fn workload_options(workload: &str, f: &WorkloadFlags) -> Result<WorkloadOptions, Invalid> {
    let mut options = f.options().map_err(|e| invalid("workload-opt", e))?;
    let name = workload.to_ascii_lowercase();
    if name.starts_with("ycsb") && options.records.is_none() && options.scale.is_none() {
        options.records = Some(DEFAULT_YCSB_RECORDS);
    }
    if matches!(name.as_str(), "tpcb" | "tpc-b") && options.accounts_per_branch.is_none() {
        options.accounts_per_branch = Some(DEFAULT_TPCB_ACCOUNTS);
    }
    if name == "tatp" && options.records.is_none() && options.scale.is_none() {
        options.records = Some(DEFAULT_TATP_RECORDS);
    }
    if matches!(name.as_str(), "tpcc" | "tpc-c") {
        options.items.get_or_insert(DEFAULT_TPCC_ITEMS);
        options.customers_per_district.get_or_insert(DEFAULT_TPCC_CUSTOMERS);
    }
    Ok(options)
}

fn make_workload(plan: &Plan) -> Box<dyn Workload> {
    // Validated in `plan`, and building a workload depends on nothing else.
    workloads::by_name(&plan.workload, &plan.workload_options)
        .unwrap_or_else(|e| panic!("workload options were validated: {e}"))
}

fn run_sim(plan: &Plan, options: &CrashOptions, eadr: bool) -> anyhow::Result<Summary> {
    let name = plan.engine.name;
    let open = |region: Region| {
        registry::open_on_region(name, region, &plan.config).map_err(|e| match e {
            // The library's message names no flag; this command's option is `--size`.
            registry::RegistryError::Db(storage::DbError::RegionFull(_)) => {
                format!("{e}; use a larger --size")
            }
            e => e.to_string(),
        })
    };
    let make = || make_workload(plan);
    // `wal`'s distributed log states an invariant of its own images (its GSN horizon never
    // covers an unforced record): checked on every cut image, whatever the log layout (the
    // check applies itself only to regions with a distributed log and a volatile cache).
    let horizon = |cut: &Region, later: &Region| match engines::wal::dlog_horizon_check(cut, later)
    {
        Ok(Some(check)) if !check.violations.is_empty() => Err(check.describe()),
        Ok(Some(_)) => Ok(true),
        // Damage in the image is recovery's to report; a central log has no horizon.
        Ok(None) | Err(_) => Ok(false),
    };
    let image_check: Option<&ImageCheck<'_>> = (name == "wal").then_some(&horizon);
    let target = SimTarget {
        open: &open,
        workload: &make,
        region: RegionOptions { size_bytes: plan.size_bytes, eadr, ..RegionOptions::default() },
        image_check,
    };
    let total = options.replay.map_or(options.crashes, |_| 1);
    let observer = Display::new(total);
    let summary = crash::run_sim(&target, options, &observer);
    observer.finish();
    Ok(summary?)
}

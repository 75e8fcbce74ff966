//! `nvmdb bench`: one benchmark run (docs/design.md §6) — a power run of a workload on an engine,
//! as Pelley et al., VLDB 2014, §4 measure them — printed as a human table, a JSON object or a CSV
//! row.
//!
//! Every option is validated before anything is created: a bad value is a one-line error and
//! exit code 2. A run whose checker fails prints its result and exits with 1.
//!
//! The region file: a run on `--medium shm|file|dax --path P` reopens P if it exists (recovery,
//! then the workload attaches to the database in it) and creates it otherwise; a file this run
//! created is removed afterwards unless `--keep`.
//!
//! Ctrl-C: the first SIGINT ends the run through the driver's stop flag, as if its time were
//! up: the results so far are printed (and the checker runs) and the file is removed as after
//! any run. A second SIGINT exits at once (code 130), removing a file this run created.

use crate::registry::{self, EngineConfig};
use anyhow::Context;
use bench::units::{self, TimeUnit};
use bench::{AckLog, Hooks, Report, RunLength, RunOptions, Setup, Stage, Status};
use pmem::{FlushKind, Medium, RegionOptions, SyncMode, TimingOptions};
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use storage::Engine;
use workloads::{Workload, WorkloadOptions};

mod options;
mod report;
use options::{key_values, region_options, reject_unhonoured, run_options};
use report::{config_json, load_average, print_report, write_acks, Ran};

/// Region size when `--size` is not given and the file does not exist yet.
const DEFAULT_SIZE: &str = "256MiB";
/// Longest modelled latency accepted: a second is not a memory device.
const MAX_LATENCY_NS: u64 = 1_000_000_000;
/// Slowest modelled bandwidth accepted (one cache line per second).
const MIN_BANDWIDTH: u64 = 64;
/// `--fs-sync-latency`'s default (ours, issue 36): what each `fdatasync` of an `io=fs` engine
/// on tmpfs is charged beyond the device's barrier. N-Store (Arulraj et al., SIGMOD 2015, §2.2)
/// gives no cost for a PMFS sync; a system call plus the commit of PMFS's metadata journal (a
/// few lines flushed and fenced) is of the order of microseconds, and 2 µs is our choice.
pub const DEFAULT_FS_SYNC_LATENCY: &str = "2us";
/// `--fs-write-bandwidth`'s default (ours, issue 36), charged per byte written through an
/// `io=fs` engine's file on tmpfs. The paper's only number is a ratio (§2.3: the "NVM-aware
/// allocator delivers 10-12x higher write bandwidth than the filesystem"). On the 2-core VM of
/// issue 36, store + CLWB ran at 5-12 GB/s (`nvmdb calibrate`: 5.3 ns a line in batches of 64)
/// and a real 64 KiB `pwrite` to tmpfs at about 2 GB/s; adding 1 GB/s of modelled cost brings
/// the file path to about 0.7 GB/s, 1/11 of about 8 GB/s. A model of this machine, not of the
/// paper's emulator: the constant is ours. `nvmdb calibrate --out` measures the ratio it gives
/// (both paths over the same 32 MiB) and lists it as a fitted constant: 8.4-9.4x on
/// 2026-11-29 (`results/calibrate/`: the `pwrite` ran at 4-6 GB/s there).
pub const DEFAULT_FS_WRITE_BANDWIDTH: &str = "1GB/s";

/// [`DEFAULT_FS_WRITE_BANDWIDTH`] in bytes per second (`nvmdb calibrate` measures the ratio it
/// gives).
pub fn fs_write_bandwidth_default() -> anyhow::Result<f64> {
    let bytes = units::parse_bandwidth(DEFAULT_FS_WRITE_BANDWIDTH)
        .map_err(|e| anyhow::anyhow!("--fs-write-bandwidth's default: {e}"))?;
    Ok(bytes as f64)
}
/// Shortest measured period accepted: shorter runs measure start-up, not throughput.
const MIN_DURATION: Duration = Duration::from_millis(100);
/// Medium when `--medium` is not given.
const DEFAULT_MEDIUM: &str = "shm";
/// Transactions `--acks` keeps in memory before it counts the rest as dropped.
const ACK_LOG_LIMIT: usize = 10_000_000;

/// Set by the first Ctrl-C; the driver polls it and ends the run (`Hooks::stop`).
static STOP: AtomicBool = AtomicBool::new(false);
/// Ctrl-Cs received so far.
static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
/// The region file this run created and will remove, for the second Ctrl-C to remove too.
static REMOVE_ON_EXIT: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Engine to run (`--list` shows them).
    #[arg(long, required_unless_present_any = ["list", "engine_opt"])]
    pub engine: Option<String>,
    /// Workload: ycsb, tpcb, tpcc, tatp.
    #[arg(long, default_value = "ycsb")]
    pub workload: String,
    /// Worker threads.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = super::numeric::whole::<usize>(1, bench::driver::MAX_THREADS as u64),
    )]
    pub threads: usize,
    /// Warm-up before measuring (`2s`, `500ms`; a bare number is seconds).
    #[arg(long, default_value = "1s")]
    pub warmup: String,
    /// Measured period (`10s`, `1min`; a bare number is seconds).
    #[arg(long, default_value = "5s")]
    pub duration: String,
    /// Instead of a timed run: every thread runs exactly this many transactions, all measured.
    #[arg(
        long,
        conflicts_with_all = ["warmup", "duration"],
        value_parser = super::numeric::whole::<u64>(1, 1 << 40),
    )]
    pub txns: Option<u64>,
    #[command(flatten)]
    pub shape: super::workload_flags::WorkloadFlags,
    /// Seed of every generator stream (worker i gets a seed derived from it).
    #[arg(long, default_value_t = 42, value_parser = super::numeric::any_u64())]
    pub seed: u64,
    /// Where the region lives: dram, shm, file, dax, sim (default shm: the embedded default,
    /// real cache-line flushes to a /dev/shm file). Region engines only.
    #[arg(long)]
    pub medium: Option<String>,
    /// Region file (shm, file, dax), or the directory of a peer engine.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Region size (`256MiB`, `4GiB`); default: the existing file's size, else 256MiB (or the
    /// engine's minimum plus 64MiB, if larger).
    #[arg(long)]
    pub size: Option<String>,
    /// Largest size the region file may grow to as the database grows (shm, file, dax);
    /// default: half the medium's free space (the initial `--size` with `--wear`).
    #[arg(long)]
    pub max_size: Option<String>,
    /// Keep the region file this run created (default: remove it afterwards).
    #[arg(long)]
    pub keep: bool,
    /// `--medium dram` only: the loaded database, cached in FILE. If FILE exists the region
    /// starts as a copy of it and the workload attaches (no load); otherwise the run loads,
    /// shuts the engine down cleanly, saves the region to FILE and reopens it from there, so
    /// every run on FILE starts from the same database. How sweeps load a large database once.
    #[arg(long, value_name = "FILE")]
    pub image: Option<PathBuf>,
    /// How a flush becomes durable on a file: cache (flush instructions) or msync.
    #[arg(long, default_value = "cache")]
    pub sync: String,
    /// Modelled persist-barrier latency (`500`, `1us`; a bare number is nanoseconds).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub persist_latency: String,
    /// Modelled NVRAM write latency per cache line flushed, charged at the fence that
    /// completes it (`500ns`; NVWAL Fig. 7's x axis; the barrier is `--persist-latency`).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub write_latency: String,
    /// Modelled device write bandwidth (`1.5GiB/s`, `500MB/s`; 0 = unlimited). GiB = 2^30 B,
    /// GB = 10^9 B; Pelley's "1.5GB/s" is `1.5GiB/s` (thesis: 35 ns a line = 1.7 GiB/s).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub write_bandwidth: String,
    /// Modelled cost of each `fdatasync` of an `io=fs` engine (wal, cow, lsm) whose file is on
    /// tmpfs, where the real sync is free (N-Store's traditional engines through PMFS; ours,
    /// see `DEFAULT_FS_SYNC_LATENCY`). Not charged on a real disk; 0 turns it off.
    #[arg(long, default_value = DEFAULT_FS_SYNC_LATENCY, allow_hyphen_values = true)]
    pub fs_sync_latency: String,
    /// Modelled write bandwidth of the file-system path of an `io=fs` engine on tmpfs, charged
    /// at each `fdatasync` for the bytes written since the previous one (ours, from N-Store
    /// §2.3's 10-12x; see `DEFAULT_FS_WRITE_BANDWIDTH`); 0 = unlimited.
    #[arg(long, default_value = DEFAULT_FS_WRITE_BANDWIDTH, allow_hyphen_values = true)]
    pub fs_write_bandwidth: String,
    /// How flushed lines reserve device bandwidth: lines4 (at least 4 lines per reservation,
    /// thesis §5.1), epoch (all lines between two barriers as one), flush (one per flush call).
    #[arg(long, default_value = "lines4")]
    pub reservation: String,
    /// Modelled extra latency per cache line read on a page-cache miss (`100ns`).
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub read_latency: String,
    /// Simulated CPU last-level cache for N-Store's read model (SIGMOD 2015 §2.2; e.g. `20MiB`,
    /// ours: the seed does not name the emulator's CPU): every region read consults it and each
    /// missed 64-byte line is charged `--read-latency`; stores install lines uncharged. Off by
    /// default. An alternative to `--cache-pages` (Pelley's page-cache model), never both.
    #[arg(long)]
    pub cpu_cache: Option<String>,
    /// Simulated page-cache capacity in 8 KiB pages for the read-latency model.
    #[arg(long, value_parser = super::numeric::whole::<u64>(1, 1 << 40))]
    pub cache_pages: Option<u64>,
    /// Its replacement policy: lru (fully associative, exact; Pelley §5.1) or set8 (8-way
    /// set-associative, lock-free).
    #[arg(long, default_value = "lru")]
    pub cache_policy: String,
    /// Flush instruction: clwb, clflushopt, clflush, none (default: the best the CPU has).
    #[arg(long)]
    pub flush: Option<String>,
    /// Durable processor caches (eADR): flushes become no-ops, fences stay.
    #[arg(long)]
    pub eadr: bool,
    /// Count write-backs per 64-byte line and report the measured period's wear (max and mean
    /// writes per line, the most-written lines and what lives there).
    #[arg(long)]
    pub wear: bool,
    /// What `--wear` counts: line (64-byte write-backs) or byte (also each byte stored since its
    /// line's last write-back: thesis Fig. 5.7's method; 4 bytes of memory per byte stored).
    #[arg(long, default_value = "line", requires = "wear")]
    pub wear_granularity: String,
    /// Engine-specific option KEY=VALUE (repeatable); `--engine-opt help` lists the engine's.
    #[arg(long = "engine-opt", value_name = "KEY=VALUE", long_help = engine_opt_help())]
    pub engine_opt: Vec<String>,
    /// Per-thread bound on commits waiting for durability (group commit).
    #[arg(
        long,
        default_value_t = bench::driver::DEFAULT_MAX_PENDING,
        value_parser = super::numeric::whole::<usize>(1, bench::driver::MAX_PENDING_LIMIT as u64)
    )]
    pub max_pending: usize,
    /// Cap the commit rate at this many transactions per second, all threads together (each
    /// worker paced at its share): thesis Fig. 5.7 runs every method at In-Place Updates'
    /// throughput. Default: flat out.
    #[arg(
        long,
        value_name = "TPS",
        allow_hyphen_values = true,
        value_parser = super::numeric::real_in(1.0, 1e12),
    )]
    pub target_tps: Option<f64>,
    /// Skip the workload's consistency checker and the engine's integrity check.
    #[arg(long)]
    pub no_check: bool,
    /// Write every durable transaction's acks to this file, one JSON object a line, in the
    /// order their durability was observed.
    #[arg(long, value_name = "FILE")]
    pub acks: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print a CSV header and one row.
    #[arg(long)]
    pub csv: bool,
    /// With --csv: the row only (to append to an existing file).
    #[arg(long, requires = "csv")]
    pub no_header: bool,
    /// List the engines and workloads, then exit.
    #[arg(long)]
    pub list: bool,
}

/// A command-line value that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OptionError {
    #[error("invalid --{flag}: {reason}")]
    Invalid { flag: &'static str, reason: String },
}

fn invalid(flag: &'static str, reason: impl Into<String>) -> OptionError {
    OptionError::Invalid { flag, reason: reason.into() }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Human,
    Json,
    Csv { header: bool },
}

/// Everything a run needs, validated.
struct Plan {
    engine: String,
    workload: WorkloadArgs,
    region: RegionOptions,
    engine_config: EngineConfig,
    run: RunOptions,
    output: Output,
    keep: bool,
    acks: Option<PathBuf>,
    /// `--image`: the loaded database's image file (dram only).
    image: Option<PathBuf>,
    /// The image did not exist before this run: this run loads and saves it.
    image_built: bool,
    /// The host's 1-minute load average when the run was planned (before loading).
    load_before: Option<f64>,
    /// The region file exists before the run (it is reopened, and never removed).
    path_existed: bool,
    /// A peer's `--path` held no peer database before the run: its contents are this run's
    /// and are removed afterwards unless `--keep`.
    peer_dir_fresh: bool,
}

/// What selects and sizes the workload.
#[derive(Clone, Debug)]
struct WorkloadArgs {
    name: String,
    options: WorkloadOptions,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    let result = run_inner(args);
    if let (true, Err(e)) = (json, &result) {
        // Scripts reading stdout get a JSON object too; the line on stderr stays for humans.
        println!("{}", serde_json::json!({ "error": format!("{e:#}"), "exit_code": 2 }));
    }
    result
}

fn run_inner(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        print_list();
        return Ok(ExitCode::SUCCESS);
    }
    if args.engine_opt.iter().any(|o| o == "help") {
        // The keys of the engine named, or of every engine without one.
        print!("{}", registry::options_help(args.engine.as_deref()));
        return Ok(ExitCode::SUCCESS);
    }
    let plan = plan(&args)?;
    let workload = build_workload(&plan.workload)?;
    install_interrupt(removable_file(&plan));
    let engine = match &plan.image {
        None => registry::open_engine(&plan.engine, &plan.region, &plan.engine_config)?,
        Some(image) => open_on_image(&plan, &*workload, image)?,
    };
    let outcome = run_plan(&plan, &*engine, &*workload);
    let shutdown = engine.shutdown();
    drop(engine);
    let removed = remove_created_file(&plan);
    let code = outcome?;
    shutdown.context("clean shutdown after the run")?;
    removed?;
    Ok(code)
}

/// `--image`: builds the image if it does not exist (load on a fresh dram region, clean
/// shutdown, save), then opens the engine on a dram copy of it. Building and running both reopen
/// the saved image, so the first run on an image measures what the later ones do.
fn open_on_image(
    plan: &Plan,
    workload: &dyn Workload,
    image: &Path,
) -> anyhow::Result<Box<dyn Engine>> {
    if plan.image_built {
        let engine = registry::open_engine(&plan.engine, &plan.region, &plan.engine_config)?;
        let bar = ProgressDisplay::new();
        let hooks = Hooks {
            progress: bar.as_ref().map(|b| b as &dyn bench::Progress),
            sink: None,
            stop: Some(&STOP),
        };
        let loaded = bench::load(&*engine, workload, &hooks);
        if let Some(bar) = &bar {
            bar.finish();
        }
        loaded.map_err(|e| explain_run_error(e, plan))?;
        engine.shutdown().context("clean shutdown after loading the image")?;
        let region = engine.region().context("a region engine without a region")?;
        region
            .save_image(image)
            .with_context(|| format!("saving the loaded database to {}", image.display()))?;
    }
    let region = pmem::Region::dram_from_file(image, &plan.region)
        .with_context(|| format!("opening the image {}", image.display()))?;
    registry::open_engine_on(&plan.engine, region, &plan.engine_config)
        .with_context(|| format!("opening the database in the image {}", image.display()))
}

fn run_plan(plan: &Plan, engine: &dyn Engine, workload: &dyn Workload) -> anyhow::Result<ExitCode> {
    let report = engine.recovery_report();
    let recovery_ms = (!report.formatted).then_some(report.duration.as_secs_f64() * 1e3);
    let setup = if engine.tables().is_empty() { Setup::Load } else { Setup::Attach };
    let options = RunOptions { setup, ..plan.run.clone() };
    let bar = ProgressDisplay::new();
    let ack_log = plan.acks.as_ref().map(|_| AckLog::new(ACK_LOG_LIMIT));
    let hooks = Hooks {
        progress: bar.as_ref().map(|b| b as &dyn bench::Progress),
        sink: ack_log.as_ref().map(|l| l as &dyn bench::DurableSink),
        stop: Some(&STOP),
    };
    let result = bench::run(engine, workload, &options, &hooks);
    if let Some(bar) = &bar {
        bar.finish();
    }
    let result = result.map_err(|e| explain_run_error(e, plan))?;
    if let (Some(path), Some(log)) = (&plan.acks, &ack_log) {
        write_acks(path, log)?;
    }
    if result.committed == 0 {
        anyhow::bail!(
            "the run committed no transactions in {:.3} s ({} aborted); nothing was measured — \
             run longer or check the engine",
            result.measured.as_secs_f64(),
            result.aborted
        );
    }
    let ran = Ran { region: engine.region(), pending_high_water: Some(result.pending_high_water) };
    let report = Report::new(&result, recovery_ms, config_json(plan, workload, &ran));
    print_report(&report, plan.output)?;
    let interrupted = STOP.load(Ordering::Relaxed);
    if interrupted {
        eprintln!(
            "interrupted: the run stopped after {:.1} s of measurement; the results above cover \
             what ran (exit code 130: not the requested run)",
            result.measured.as_secs_f64()
        );
    }
    if let Some(why) = &result.region_full {
        eprintln!(
            "warning: the run stopped after {:.1} s of the requested time because the region is \
             full ({why}); the results above cover what ran. Allow more with --max-size.",
            result.measured.as_secs_f64()
        );
    }
    Ok(if !result.checker.passed() && options.check {
        ExitCode::from(1)
    } else if interrupted {
        // A run cut short is not the run asked for: scripts and sweeps must not take it for one.
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn explain_run_error(e: bench::BenchError, plan: &Plan) -> anyhow::Error {
    if e.is_region_full() {
        // Reopening an existing file gives no --size: name the size the file has.
        let file_bytes =
            || plan.region.path.as_deref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len());
        let bytes = match plan.region.size_bytes {
            0 => file_bytes().unwrap_or(0),
            n => n,
        };
        let mut size = units::format_bytes(bytes);
        let on_region =
            registry::lookup(&plan.engine).is_some_and(|e| e.kind == registry::EngineKind::Region);
        if !on_region {
            // A peer's files are its own; only `pmemobj` takes its (fixed) pool size from --size.
            return anyhow::anyhow!(
                "the {} workload at this scale does not fit engine {}'s {size} ({e}); use a \
                 larger --size or a smaller --scale/--records",
                plan.workload.name,
                plan.engine
            );
        }
        if plan.region.max_size_bytes > bytes {
            let max = units::format_bytes(plan.region.max_size_bytes);
            size = format!("{size} region, grown up to {max},");
        } else {
            size += " region";
        }
        return anyhow::anyhow!(
            "the {} workload at this scale does not fit the {size} ({e}); \
             use a larger --size / --max-size or a smaller --scale/--records",
            plan.workload.name
        );
    }
    e.into()
}

/// `nvmdb bench`'s flags alone, for [`refused_flags`].
#[derive(clap::Parser, Debug)]
#[command(name = "nvmdb bench")]
struct FlagsOnly {
    #[command(flatten)]
    args: Args,
}

/// Why the bench would refuse a run with `flags` (bench arguments, no program name) before
/// starting it, so that `sweep` can reject a spec up front instead of failing every run of a
/// point. `None` when the flags pass or are for the run itself to judge: flags the bench does
/// not have yet (a spec's `new_flags`) and unknown engines are recorded per run by the sweep.
pub fn refused_flags(flags: &[String]) -> Option<String> {
    let argv = std::iter::once("nvmdb-bench".to_string()).chain(flags.iter().cloned());
    let args = <FlagsOnly as clap::Parser>::try_parse_from(argv).ok()?.args;
    registry::lookup(args.engine.as_deref().unwrap_or_default())?;
    plan(&args).err().map(|e| format!("{e:#}"))
}

fn plan(args: &Args) -> Result<Plan, anyhow::Error> {
    // Optional to clap only so that `--engine-opt help` runs without it.
    let Some(engine) = args.engine.clone() else {
        return Err(invalid("engine", "is required (`--list` shows the engines)").into());
    };
    if registry::lookup(&engine).is_none() {
        return Err(invalid(
            "engine",
            format!("unknown engine `{engine}` (known: {})", registry::names().join(", ")),
        )
        .into());
    }
    if args.cpu_cache.is_some() && args.cache_pages.is_some() {
        return Err(invalid(
            "cpu-cache",
            "--cpu-cache (N-Store's read model) and --cache-pages (Pelley's) both charge reads: \
             give one of them",
        )
        .into());
    }
    let engine_config = EngineConfig {
        workers: args.threads,
        cache_pages: match args.cache_pages {
            Some(0) => return Err(invalid("cache-pages", "must be at least 1").into()),
            other => other,
        },
        cache_policy: storage::pages::CachePolicy::parse(&args.cache_policy).ok_or_else(|| {
            invalid("cache-policy", format!("`{}` is not lru or set8", args.cache_policy))
        })?,
        extra: key_values("engine-opt", &args.engine_opt)?,
    };
    // A workload that reports its size sizes the default region: `wal`, `group` and
    // sqlite-nvwal lay their page area out once, so a region that grows later cannot help them.
    let workload_bytes = workload_options(args)
        .ok()
        .and_then(|o| workloads::by_name(&args.workload, &o).ok())
        .and_then(|w| w.estimated_bytes())
        .unwrap_or(0);
    let (region, path_existed) = region_options(args, &engine, &engine_config, workload_bytes)?;
    reject_unhonoured(args, &engine, &region)?;
    if args.keep {
        if !matches!(region.medium, Medium::Shm | Medium::File | Medium::Dax) {
            return Err(invalid("keep", "only a file medium (shm, file, dax) has a file").into());
        }
        if region.path.is_none() {
            return Err(invalid("keep", "give the file to keep with --path").into());
        }
    }
    if let Some(image) = &args.image {
        if region.medium != Medium::Dram {
            return Err(invalid(
                "image",
                "an image is for --medium dram (a file medium reopens its --path)",
            )
            .into());
        }
        if registry::lookup(&engine).is_none_or(|e| e.kind != registry::EngineKind::Region) {
            return Err(
                invalid("image", format!("engine {engine} does not run on a region")).into()
            );
        }
        if image.is_dir() {
            return Err(invalid("image", format!("{} is a directory", image.display())).into());
        }
    }
    let mut run = run_options(args)?;
    // Nothing to check on an engine that keeps nothing: its checker verdict would be noise.
    run.check &= registry::lookup(&engine).is_some_and(|e| e.stores_data);
    let output = match (args.json, args.csv) {
        (true, _) => Output::Json,
        (_, true) => Output::Csv { header: !args.no_header },
        _ => Output::Human,
    };
    Ok(Plan {
        engine,
        workload: WorkloadArgs { name: args.workload.clone(), options: workload_options(args)? },
        region,
        engine_config,
        run,
        output,
        keep: args.keep,
        acks: args.acks.clone(),
        image: args.image.clone(),
        load_before: load_average(),
        image_built: args.image.as_ref().is_some_and(|p| !p.exists()),
        path_existed,
        peer_dir_fresh: registry::lookup(&args.engine.clone().unwrap_or_default())
            .is_some_and(|e| e.kind == registry::EngineKind::Peer)
            && args.path.as_ref().is_some_and(|p| !p.join("PEER").exists()),
    })
}

/// The region file this run will create and remove afterwards (not with `--keep`, not one that
/// existed before the run, not a peer's directory).
fn removable_file(plan: &Plan) -> Option<PathBuf> {
    let path = plan.region.path.as_ref()?;
    let is_region_medium = matches!(plan.region.medium, Medium::Shm | Medium::File | Medium::Dax);
    let is_region_engine =
        registry::lookup(&plan.engine).is_some_and(|e| e.kind == registry::EngineKind::Region);
    (!plan.keep && !plan.path_existed && is_region_medium && is_region_engine).then(|| path.clone())
}

/// Ctrl-C handling (see the module doc). The handler runs on a thread of its own, not in
/// signal context, so it may lock and print.
fn install_interrupt(remove: Option<PathBuf>) {
    if let Ok(mut r) = REMOVE_ON_EXIT.lock() {
        *r = remove;
    }
    let installed = ctrlc::set_handler(|| {
        if INTERRUPTS.fetch_add(1, Ordering::SeqCst) == 0 {
            STOP.store(true, Ordering::SeqCst);
            eprintln!(
                "\ninterrupted: ending the run and reporting what it measured (Ctrl-C again to \
                 exit at once)"
            );
            return;
        }
        // Leave at once, but not a temporary region file behind (unlinking a mapped file is
        // safe: the mapping lives until the process ends).
        if let Ok(mut r) = REMOVE_ON_EXIT.lock() {
            if let Some(path) = r.take() {
                let _ = std::fs::remove_file(path);
            }
        }
        std::process::exit(130);
    });
    if let Err(e) = installed {
        eprintln!("warning: Ctrl-C will end the process without results: {e}");
    }
}

/// Removes the region file this run created, unless `--keep`.
fn remove_created_file(plan: &Plan) -> anyhow::Result<()> {
    if let (true, false, Some(dir)) = (plan.peer_dir_fresh, plan.keep, &plan.region.path) {
        // The directory is the user's; what the peer wrote into it is this run's.
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("listing the peer directory {}", dir.display()))?;
        for entry in entries {
            let path = entry?.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            removed.with_context(|| {
                format!("removing {} after the run (keep it with --keep)", path.display())
            })?;
        }
        return Ok(());
    }
    let Some(path) = removable_file(plan) else { return Ok(()) };
    if !path.is_file() {
        return Ok(());
    }
    if let Ok(mut r) = REMOVE_ON_EXIT.lock() {
        *r = None;
    }
    std::fs::remove_file(&path).with_context(|| {
        format!("removing the region file {} (keep it with --keep)", path.display())
    })
}

/// `--engine-opt`'s `--help`: every engine's keys, from each engine's options table.
fn engine_opt_help() -> String {
    format!(
        "Engine-specific option KEY=VALUE (repeatable); `--engine-opt help` lists the keys of \
         the --engine given (or of all). The keys:\n{}",
        registry::options_help(None)
    )
}

fn print_list() {
    println!("engines:");
    let width = registry::engines().iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in registry::engines() {
        let kind = match e.kind {
            registry::EngineKind::Testing => "testing",
            registry::EngineKind::Region => "region",
            registry::EngineKind::Peer => "peer",
        };
        println!("  {:<width$} {kind:<8} {}", e.name, e.about);
    }
    println!("workloads:");
    for name in workload_names() {
        println!("  {name}");
    }
}

/// A progress bar on stderr while stderr is a terminal; nothing in a pipe.
struct ProgressDisplay {
    bar: indicatif::ProgressBar,
    stage: std::sync::Mutex<Option<Stage>>,
}

impl ProgressDisplay {
    fn new() -> Option<ProgressDisplay> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = indicatif::ProgressBar::new(1);
        let style = indicatif::ProgressStyle::with_template("{prefix:>8} [{bar:32}] {msg}")
            .ok()?
            .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(ProgressDisplay { bar, stage: std::sync::Mutex::new(None) })
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl bench::Progress for ProgressDisplay {
    fn update(&self, s: Status) {
        let mut stage = self.stage.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if *stage != Some(s.stage) {
            *stage = Some(s.stage);
            self.bar.set_prefix(match s.stage {
                Stage::Load => "load",
                Stage::Warmup => "warm-up",
                Stage::Measure => "measure",
                Stage::Drain => "drain",
                Stage::Check => "check",
            });
        }
        self.bar.set_length(s.total.max(1));
        self.bar.set_position(s.done.min(s.total));
        let msg = match s.stage {
            Stage::Load => format!("{}/{} rows", s.done, s.total),
            Stage::Warmup | Stage::Measure => format!("{} txns", s.completed),
            Stage::Drain | Stage::Check => String::new(),
        };
        self.bar.set_message(msg);
    }
}

fn workload_names() -> &'static [&'static str] {
    workloads::WORKLOAD_NAMES
}

/// The workload flags as options (see `workload_flags`).
fn workload_options(args: &Args) -> Result<WorkloadOptions, OptionError> {
    args.shape.options().map_err(|e| invalid("workload-opt", e))
}

fn build_workload(w: &WorkloadArgs) -> Result<Box<dyn Workload>, OptionError> {
    workloads::by_name(&w.name, &w.options).map_err(|reason| invalid("workload", reason))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn plan_of(args: &[&str]) -> Result<Plan, anyhow::Error> {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))?;
        plan(&cli.args)
    }

    #[test]
    fn region_full_while_loading_says_the_scale_does_not_fit() {
        let plan = plan_of(&["--engine", "inplace", "--size", "1MiB"]).unwrap();
        let e = bench::BenchError::Load {
            workload: "ycsb".into(),
            error: storage::DbError::RegionFull("no free page".into()),
        };
        let message = explain_run_error(e, &plan).to_string();
        assert!(message.contains("does not fit the 1.0 MiB region"), "{message}");
        assert!(message.contains("--size"), "{message}");
    }

    #[test]
    fn options_become_region_and_run_options() {
        // A region engine: only it honours the device flags.
        let plan = plan_of(&[
            "--engine",
            "inplace",
            "--persist-latency",
            "1us",
            "--write-bandwidth",
            "2GB/s",
            "--read-latency",
            "150",
            "--size",
            "64MiB",
            "--flush",
            "clflush",
            "--eadr",
            "--threads",
            "3",
            "--txns",
            "10",
        ])
        .unwrap();
        assert_eq!(plan.region.timing.persist_barrier_ns, 1_000);
        assert_eq!(plan.region.timing.write_bandwidth_bytes_per_s, 2_000_000_000);
        assert_eq!(plan.region.timing.read_ns, 150);
        assert_eq!(plan.region.size_bytes, 64 << 20);
        assert_eq!(plan.region.flush, Some(FlushKind::Clflush));
        assert!(plan.region.eadr);
        assert_eq!(plan.run.threads, 3);
        assert_eq!(plan.engine_config.workers, 3);
        assert_eq!(plan.run.length, RunLength::Transactions { per_thread: 10 });
        let workload = build_workload(&plan.workload).unwrap();
        let config = config_json(&plan, &*workload, &Ran::default());
        assert_eq!(config["persist_latency_ns"], 1_000);
        // eADR: `Region::flush` issues no instruction, so the row says none (issue 39).
        assert_eq!(config["flush"], "none");
    }

    #[test]
    fn device_flags_on_an_engine_without_a_region_are_errors() {
        for flags in [&["--medium", "dram"][..], &["--persist-latency", "1us"], &["--wear"]] {
            let mut args = vec!["--engine", "mem"];
            args.extend_from_slice(flags);
            let e = plan_of(&args).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains("cannot honour"), "{flags:?}: {e}");
        }
        assert!(plan_of(&["--engine", "inplace", "--medium", "dram"]).is_ok());
    }

    #[test]
    fn noop_skips_the_checker() {
        assert!(!plan_of(&["--engine", "noop"]).unwrap().run.check);
        assert!(plan_of(&["--engine", "mem"]).unwrap().run.check);
    }
}

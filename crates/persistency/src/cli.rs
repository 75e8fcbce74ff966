//! `nvmdb persistency`: Table 8.1 rows (the default), `sweep SPEC` for Figs. 8.1–8.3,
//! `crashtest` for the queues on `sim`, and `engines` for the analyser on nvmdb's own engines.
//! Bad input is one line `error: invalid …` and exit 2 (the binary prints it), never a panic.

use crate::analyse::Model;
use crate::crash::{crash_many, CrashOptions};
use crate::error::invalid;
use crate::queue::{Design, Fault};
use crate::report::{row, table_text, RowOptions};
use crate::spec::{parse_latency_ns, sweep_text, Spec};
use pmem::CrashPolicy;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Sub>,
    #[command(flatten)]
    pub table: TableArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Run a Fig. 8.1–8.3 spec (experiments/persistency/*.toml).
    Sweep(SweepArgs),
    /// Crash the queues on the sim medium at many points, recover, check.
    Crashtest(CrashArgs),
    /// The analyser on traces of nvmdb's engines (inplace, wal, group).
    Engines(crate::engines::Args),
}

/// Table 8.1's rows.
#[derive(clap::Args, Debug)]
pub struct TableArgs {
    /// cwl, 2lc, qh, or all; comma-separated.
    #[arg(long, default_value = "all")]
    pub queue: String,
    /// Thread counts, comma-separated.
    #[arg(long, default_value = "1,2")]
    pub threads: String,
    /// Persist latency (10ns … 100us).
    #[arg(long, default_value = "500ns")]
    pub persist_latency: String,
    /// Atomic persist size in bytes (8 … 4096, a power of two).
    #[arg(long, default_value_t = 8)]
    pub atomic_persist: u64,
    /// Dependence-tracking granularity in bytes (8 … 4096, a power of two).
    #[arg(long, default_value_t = 8)]
    pub tracking: u64,
    /// Inserts in the traced run.
    #[arg(long, default_value_t = 20_000)]
    pub trace_inserts: u64,
    /// Inserts over which the native rate is measured.
    #[arg(long, default_value_t = 2_000_000)]
    pub rate_inserts: u64,
    /// How the traced run's threads interleave: round-robin (one insert each in turn) or free.
    #[arg(long, default_value = "round-robin")]
    pub schedule: String,
    /// JSON rows instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    pub spec: PathBuf,
    /// The spec's short setting (smaller traces and rate runs).
    #[arg(long)]
    pub quick: bool,
    /// Also write DIR/<name>.jsonl (points), .txt, .claims.json (verdicts) and .svg/.png.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CrashArgs {
    /// cwl, 2lc, qh, or all; comma-separated.
    #[arg(long, default_value = "all")]
    pub queue: String,
    #[arg(long, default_value = "1,2")]
    pub threads: String,
    #[arg(long, default_value_t = 40)]
    pub inserts: u64,
    /// A queue of this many slots, with dequeues, so that it wraps around (default: inserts
    /// only, into a queue that holds them all).
    #[arg(long)]
    pub wrap_slots: Option<u64>,
    /// Crash points per queue and thread count.
    #[arg(long, default_value_t = 300)]
    pub points: u64,
    /// persisted, evict, torn, or all; comma-separated.
    #[arg(long, default_value = "all")]
    pub policy: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Test-only: drop one barrier (cwl-skip-data-barrier, 2lc-skip-data-barrier,
    /// qh-skip-head-barrier, qh-skip-end-barrier, cwl-skip-tail-barrier and
    /// 2lc-skip-tail-barrier with --wrap-slots); the
    /// run must then find violations.
    #[arg(long)]
    pub fault: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn list<T>(
    s: &str,
    what: &'static str,
    all: &[T],
    parse: impl Fn(&str) -> Option<T>,
) -> anyhow::Result<Vec<T>>
where
    T: Copy,
{
    if s.eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    s.split(',')
        .map(|x| parse(x.trim()).ok_or_else(|| invalid(what, format!("`{x}`")).into()))
        .collect()
}

pub(crate) fn threads(s: &str) -> anyhow::Result<Vec<u64>> {
    s.split(',')
        .map(|x| match x.trim().parse::<u64>() {
            Ok(n) if (1..=crate::rate::MAX_THREADS).contains(&n) => Ok(n),
            _ => Err(invalid("threads", format!("`{x}` (expected 1 to 64)")).into()),
        })
        .collect()
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        None => table(args.table),
        Some(Sub::Sweep(a)) => sweep(a),
        Some(Sub::Crashtest(a)) => crashtest(a),
        Some(Sub::Engines(a)) => crate::engines::run_cli(a),
    }
}

fn table(a: TableArgs) -> anyhow::Result<ExitCode> {
    let designs = list(&a.queue, "queue (cwl, 2lc, qh, all)", &Design::ALL, Design::parse)?;
    let threads = threads(&a.threads)?;
    let options = RowOptions {
        persist_latency_ns: parse_latency_ns(&a.persist_latency)?,
        atomic_persist_bytes: a.atomic_persist,
        tracking_bytes: a.tracking,
        trace_inserts: a.trace_inserts,
        rate_inserts: a.rate_inserts,
        schedule: crate::rate::Schedule::parse(&a.schedule)
            .ok_or_else(|| invalid("schedule", format!("`{}` (round-robin, free)", a.schedule)))?,
    };
    crate::analyse::Config {
        atomic_persist_bytes: a.atomic_persist,
        tracking_bytes: a.tracking,
        ..crate::analyse::Config::new(Model::Strict)
    }
    .validate()?;
    if a.rate_inserts == 0 {
        return Err(invalid("rate inserts", "0 (expected at least 1)").into());
    }
    let mut rows = Vec::new();
    for d in designs {
        for &t in &threads {
            let r = row(d, t, &options)?;
            if a.json {
                println!("{}", serde_json::to_string(&r)?);
            }
            rows.push(r);
        }
    }
    if !a.json {
        print!("{}", table_text(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep(a: SweepArgs) -> anyhow::Result<ExitCode> {
    let spec = Spec::load(&a.spec)?;
    let quiet = a.json;
    let result = spec.run(a.quick, |what| {
        if !quiet {
            eprintln!("{}: {what}", spec.spec.name);
        }
    })?;
    let text = sweep_text(&result);
    if a.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        print!("{text}");
    }
    if let Some(dir) = a.out {
        std::fs::create_dir_all(&dir)
            .map_err(|e| invalid("out", format!("{}: {e}", dir.display())))?;
        let mut jsonl = String::new();
        for p in &result.points {
            jsonl += &serde_json::to_string(p)?;
            jsonl.push('\n');
        }
        std::fs::write(dir.join(format!("{}.jsonl", result.name)), jsonl)?;
        std::fs::write(dir.join(format!("{}.txt", result.name)), text)?;
        std::fs::write(
            dir.join(format!("{}.claims.json", result.name)),
            serde_json::to_string_pretty(&result.claims)?,
        )?;
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let subtitle = format!(
            "ours: nvmdb persistency sweep{}, release build, {cpus} CPUs, round-robin traces; \
             black: the thesis",
            if result.quick { " --quick (QUICK: short runs)" } else { "" }
        );
        let fig = crate::plot::figure(&result, &subtitle);
        let (svg, png) =
            (dir.join(format!("{}.svg", result.name)), dir.join(format!("{}.png", result.name)));
        experiments::plot::render(&fig, &svg, &png).map_err(|e| invalid("plot", e))?;
        manifest(&spec, &result, &a.spec, &dir)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `DIR/<name>.experiment.json`: what `nvmdb report --seed DIR` needs to list this sweep beside
/// the reproduction's specs (its claims judged again from their numbers there).
fn manifest(
    spec: &Spec,
    result: &crate::spec::SweepResult,
    spec_path: &std::path::Path,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let quick = if result.quick { " --quick" } else { "" };
    // The second note only where the spec has finite-trace claims.
    let finite = !spec.base.finite_trace_inserts.is_empty();
    let m = experiments::report::seeds::Manifest {
        seed: "persistency".into(),
        name: result.name.clone(),
        title: result.title.clone(),
        source: result.source.clone(),
        description: spec.spec.description.clone(),
        command: format!(
            "nvmdb persistency sweep {}{quick} --out {}",
            spec_path.display(),
            dir.display()
        ),
        claims: format!("{}.claims.json", result.name),
        figures: vec![format!("{}.svg", result.name)],
        // Each claim names its own (`ClaimResult::ours_range`); this is the default.
        ours_range: "the native-rate runs (this machine's instruction rate)".into(),
        quick: result.quick,
        notes: [
            "ours: the thesis's persistency model (§8.1) on our queues' traces (the critical \
             path of persists per insert), over this machine's native (instruction-execution) \
             insert rate, measured on a shared 2-core VM; ratios of two paths have no native \
             rate in them",
            "two readings of the path per insert, each claim naming its own: steady-state (the \
             path's growth over the second half of a long trace) and finite-trace (the whole \
             path of a short trace over its inserts, the thesis's measure). Strand \
             persistency's path stops growing, so its steady-state rate is unbounded; its \
             compute-bound claims are judged on the finite-trace reading, whose trace lengths \
             are ours (the thesis gives none)",
        ]
        .into_iter()
        .take(if finite { 2 } else { 1 })
        .map(String::from)
        .collect(),
    };
    let file = format!("{}.experiment.json", result.name);
    m.write(dir, &file)
        .map_err(|e| invalid("out", format!("{}: {e}", dir.join(&file).display())))?;
    Ok(())
}

fn crashtest(a: CrashArgs) -> anyhow::Result<ExitCode> {
    let fault = a
        .fault
        .as_deref()
        .map(|f| Fault::parse(f).ok_or_else(|| invalid("fault", format!("`{f}`"))))
        .transpose()?;
    let designs = match fault {
        Some(f) => vec![f.design()],
        None => list(&a.queue, "queue (cwl, 2lc, qh, all)", &Design::ALL, Design::parse)?,
    };
    let policies = list(
        &a.policy,
        "policy (persisted, evict, torn, all)",
        &CrashPolicy::ALL,
        CrashPolicy::parse,
    )?;
    let mut failed = false;
    for design in designs {
        for &t in &threads(&a.threads)? {
            let o = CrashOptions {
                design,
                threads: t,
                inserts_per_thread: a.inserts,
                fault,
                wrap_slots: a.wrap_slots,
            };
            let report = crash_many(&o, a.points, &policies, a.seed, 20)?;
            failed |= !report.violations.is_empty();
            if a.json {
                println!("{}", serde_json::json!({ "options": o, "report": report }));
            } else {
                println!(
                    "{:<4} threads {t}: {} points, {} cuts, {} acknowledged inserts and {} \
                     acknowledged dequeues checked, {} entries recovered, {} holes, {} violations",
                    design.name(),
                    report.points,
                    report.cuts,
                    report.acked,
                    report.acked_dequeues,
                    report.recovered,
                    report.holes,
                    report.violations.len()
                );
                for v in &report.violations {
                    println!(
                        "  violation at {:?} #{} ({}, seed {}): {}",
                        v.event, v.count, v.policy, v.seed, v.message
                    );
                }
            }
        }
    }
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

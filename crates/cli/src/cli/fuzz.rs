//! `nvmdb fuzz`: the damaged-region fuzzer ([`bench::fuzz`], docs/design.md §7). Damages populated
//! regions (bit flips, overwritten words, zeroed and stale pages, truncation) in every kind of
//! page, opens the engine on them, uses and checks them, and counts what happened per class and
//! per damaged structure.
//!
//! Exit codes: 0 when no case panicked, hung or came back reformatted; 1 otherwise (each such
//! case is printed with the `--case K` that reruns it); 2 for a bad option or a setup failure.

use crate::registry::{self, EngineConfig, EngineKind};
use bench::fuzz::{self, BaseInfo, Class, FuzzOptions, Outcome, Summary};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Failing cases printed on stderr as they are found; the rest are only counted.
const MAX_PRINTED: u64 = 20;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Engine to fuzz (a region engine).
    #[arg(long, default_value = "inplace")]
    pub engine: String,
    /// Damaged regions to try.
    #[arg(long, default_value_t = 1000, value_parser = super::numeric::whole::<u64>(1, 1 << 32))]
    pub cases: u64,
    /// Seed of everything random (base images and cases).
    #[arg(long, default_value_t = 42, value_parser = super::numeric::any_u64())]
    pub seed: u64,
    /// Run only case K (printing what it damaged and found).
    #[arg(long, value_parser = super::numeric::any_u64())]
    pub case: Option<u64>,
    /// Cases run at once (default: the number of CPUs).
    #[arg(long, value_parser = super::numeric::whole::<usize>(1, 1024))]
    pub jobs: Option<usize>,
    /// Transactions of each case's workload.
    #[arg(long, default_value_t = 200, value_parser = super::numeric::whole::<u32>(1, 1 << 24))]
    pub txns: u32,
    /// A step of a case taking longer than this many seconds is a hang.
    #[arg(
        long,
        default_value_t = 5.0,
        allow_hyphen_values = true,
        value_parser = super::numeric::real_between(0.0, 86400.0),
    )]
    pub step_timeout: f64,
    /// Size of the regions the base images are loaded on (default: 2 MiB plus the engine's own
    /// logs).
    #[arg(long)]
    pub size: Option<String>,
    /// Engine option KEY=VALUE (repeatable), over the fuzzer's small layout (small nodes, undo
    /// logs and engine logs, so damage falls on every structure).
    #[arg(long = "engine-opt", value_name = "KEY=VALUE")]
    pub engine_opt: Vec<String>,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also print the fingerprints of the base images and of the run's outcomes (two runs with
    /// the same seed and cases must print the same ones, whatever --jobs).
    #[arg(long)]
    pub checksums: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let info = registry::lookup(&args.engine)
        .ok_or_else(|| anyhow::anyhow!("unknown engine `{}`", args.engine))?;
    anyhow::ensure!(
        info.kind == EngineKind::Region,
        "engine `{}` does not run on a pmem region; the fuzzer damages regions",
        info.name
    );
    anyhow::ensure!(
        args.step_timeout.is_finite() && args.step_timeout > 0.0,
        "--step-timeout must be a positive number of seconds"
    );
    let jobs =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let config = config(info.name, &args.engine_opt)?;
    let region_bytes = match &args.size {
        None => registry::default_region_bytes(info.name, &config, fuzz::REGION_BYTES)?,
        Some(s) => {
            let bytes = bench::units::parse_bytes(s)
                .map_err(|e| anyhow::anyhow!("--size {s}: {}", e.reason))?;
            registry::check_region_bytes(info.name, &config, bytes).map_err(anyhow::Error::msg)?;
            bytes
        }
    };
    let options = FuzzOptions {
        cases: args.cases,
        seed: args.seed,
        jobs,
        only: args.case,
        step_timeout: Duration::from_secs_f64(args.step_timeout),
        txns: args.txns,
        region_bytes,
    };
    options.validate().map_err(anyhow::Error::msg)?;
    let open = opener(info.name, config)?;
    let printed = std::sync::atomic::AtomicU64::new(0);
    let progress = std::io::stderr().is_terminal() && !args.json && args.case.is_none();
    let on_case = |o: &Outcome, done: u64, total: u64| {
        let failing = o.class.is_failure();
        if (failing && printed.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < MAX_PRINTED)
            || args.case.is_some()
        {
            eprintln!("{}", describe(o, args.seed));
        }
        if progress && (done.is_multiple_of(500) || done == total) {
            eprint!("\r  {done}/{total} cases");
            if done == total {
                eprintln!();
            }
        }
    };
    let (bases, summary) = fuzz::run(open, &options, &on_case).map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::to_string(&json(&args, &bases, &summary))?);
    } else {
        print!("{}", human(&args, &bases, &summary));
    }
    Ok(if summary.failures() == 0 && summary.stopped.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The fuzzer's layout (small nodes, two workers, small undo logs and engine logs, so that
/// every structure spans few pages and damage falls on each), as far as `engine` has those
/// options, under the user's `--engine-opt`s.
fn config(engine: &'static str, engine_opt: &[String]) -> anyhow::Result<EngineConfig> {
    let small = [
        ("node_capacity", fuzz::NODE_CAPACITY.to_string()),
        ("undo_pages", "4".to_string()),
        ("sys_undo_pages", "4".to_string()),
        ("staging_bytes", "2MiB".to_string()),
        // Small enough that loading the base flushes runs (damage then falls on them too).
        ("memtable_bytes", "64KiB".to_string()),
        // A batch closes within a case's churn, so its log reaches NVRAM (and a crash image).
        ("batch_txns", "8".to_string()),
    ];
    let accepted = registry::accepted_options(engine);
    let mut extra: BTreeMap<String, String> = small
        .into_iter()
        .filter(|(k, _)| accepted.contains(k))
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for kv in engine_opt {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--engine-opt {kv}: expected KEY=VALUE"))?;
        extra.insert(k.to_string(), v.to_string());
    }
    let mut config = EngineConfig { workers: fuzz::WORKERS, extra, ..Default::default() };
    if engines::ENGINES.contains(&engine) {
        let options = registry::region_engine_options(engine, &config)?;
        if engine == "wal" && !config.extra.contains_key("log_bytes") {
            // The smallest log these workers and logs allow: it wraps within a case.
            let bytes = engines::wal::min_log_bytes(&options);
            config.extra.insert("log_bytes".into(), bytes.to_string());
        }
    }
    Ok(config)
}

/// Opens `engine` on a region with `config`: the options only matter when a blank region is
/// formatted (the base images).
fn opener(engine: &'static str, config: EngineConfig) -> anyhow::Result<fuzz::OpenEngine> {
    if engines::ENGINES.contains(&engine) {
        registry::region_engine_options(engine, &config)?;
    }
    Ok(Arc::new(move |region| {
        registry::open_on_region(engine, region, &config).map_err(|e| match e {
            registry::RegistryError::Db(e) => e,
            other => storage::DbError::Invalid(other.to_string()),
        })
    }))
}

fn describe(o: &Outcome, seed: u64) -> String {
    format!(
        "case {} ({}): {} [{} / {}] {}: {}\n  rerun: nvmdb fuzz --seed {seed} --case {}",
        o.plan.case,
        o.plan.base,
        o.class.name(),
        o.plan.target.name(),
        o.plan.damage.name(),
        o.step,
        if o.message.is_empty() { "-" } else { &o.message },
        o.plan.case
    ) + &format!("\n  damage: {}", o.plan.what)
}

fn json(args: &Args, bases: &[BaseInfo], s: &Summary) -> serde_json::Value {
    let classes: serde_json::Map<String, serde_json::Value> =
        Class::ALL.iter().map(|c| (c.name().to_string(), s.count(*c).into())).collect();
    serde_json::json!({
        "engine": args.engine,
        "seed": args.seed,
        "cases": s.cases,
        "classes": classes,
        "by_target": s.by_target,
        "by_damage": s.by_damage,
        "kept": s.kept,
        "bases": bases,
        "fingerprint": format!("{:016x}", s.fingerprint),
        "stopped": s.stopped,
        "elapsed_s": s.elapsed_s,
        "ok": s.failures() == 0 && s.stopped.is_none(),
    })
}

fn human(args: &Args, bases: &[BaseInfo], s: &Summary) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "fuzz {}: {} cases, seed {}, {:.1} s\n",
        args.engine, s.cases, args.seed, s.elapsed_s
    ));
    for c in Class::ALL {
        out.push_str(&format!("  {:<20}{}\n", c.name(), s.count(c)));
    }
    let short = |c: Class| match c {
        Class::Rejected => "rej",
        Class::Detected => "det",
        Class::AcceptedSame => "same",
        Class::AcceptedDifferent => "diff",
        Class::Error => "err",
        Class::Panic => "panic",
        Class::Hang => "hang",
        Class::Reformatted => "refmt",
    };
    for (title, table) in [("target", &s.by_target), ("damage", &s.by_damage)] {
        out.push_str(&format!("\n  {title:<18}"));
        for c in Class::ALL {
            out.push_str(&format!("{:>7}", short(c)));
        }
        out.push('\n');
        for (name, counts) in table {
            out.push_str(&format!("  {name:<18}"));
            for c in Class::ALL {
                out.push_str(&format!("{:>7}", counts.get(c.name()).copied().unwrap_or(0)));
            }
            out.push('\n');
        }
    }
    let different: Vec<&Outcome> =
        s.kept.iter().filter(|o| o.class == Class::AcceptedDifferent).collect();
    if !different.is_empty() {
        out.push_str("\n  accepted-different (first ones):\n");
        for o in different.iter().take(10) {
            out.push_str(&format!("    case {}: {} -> {}\n", o.plan.case, o.plan.what, o.message));
        }
    }
    if args.checksums {
        out.push('\n');
        for b in bases {
            out.push_str(&format!(
                "  base {:<14} {} bytes, {} rows, checksum {}\n",
                b.name, b.bytes, b.rows, b.checksum
            ));
        }
        out.push_str(&format!("  outcome fingerprint {:016x}\n", s.fingerprint));
    }
    if let Some(why) = &s.stopped {
        out.push_str(&format!("\n  {why}\n"));
    }
    let verdict = if s.failures() == 0 && s.stopped.is_none() { "ok" } else { "FAILED" };
    out.push_str(&format!("  verdict: {verdict}\n"));
    out
}

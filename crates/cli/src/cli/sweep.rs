//! `nvmdb sweep SPEC... --out DIR`: run the grid of experiment specs (docs/design.md §6), each
//! point as a fresh `nvmdb bench --json` process, appending one row per run to `DIR/results.jsonl`.
//!
//! Resumable (runs already in the file are skipped), shardable (`--shard i/n` runs a
//! deterministic slice; `nvmdb merge` joins the slices), and quick (`--quick` for smoke runs).
//! The work itself lives in the `experiments` crate; this is the command line and the
//! progress bar.

use anyhow::Context;
use experiments::runner::Outcome;
use experiments::sweep::{self, CheckReps, Progress, SweepOptions};
use experiments::{BenchCommand, ExpandOptions, Point, Shard, Spec, Status};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Experiment specs: TOML files, or directories of them (`experiments/`).
    #[arg(required = true, value_name = "SPEC")]
    pub specs: Vec<PathBuf>,
    /// Output directory: results.jsonl and a copy of each spec.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Run only shard I of N (numbered from 1): every N-th point of each spec.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Short runs on the spec's reduced grid, one repetition (default 1s, 0.2s warm-up).
    #[arg(long)]
    pub quick: bool,
    /// List the points and the runs left to do, then exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Set a bench flag for every point (KEY=VALUE, repeatable), e.g. `threads=12`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Also re-run points whose runs ended in an error or a timeout.
    #[arg(long)]
    pub retry_failed: bool,
    /// Directory for the region files of crash_recover specs and of io=fs runs given no path
    /// (default: /dev/shm for shm).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Where the loaded databases of `--medium dram` runs are cached between runs that differ
    /// only in what the measured run does (default: DIR/images; each is removed after its last
    /// run).
    #[arg(long, value_name = "DIR", conflicts_with = "no_images")]
    pub images: Option<PathBuf>,
    /// Load the database afresh for every run.
    #[arg(long)]
    pub no_images: bool,
    /// Which repetitions of a point run the bench's consistency checker: `every` (default) or
    /// `first` (repetition 0 only; the checker scans the whole database, seconds per run at
    /// full scale, and every repetition starts from the same image).
    #[arg(long, value_enum, default_value_t = CheckArg::Every)]
    pub check: CheckArg,
    /// Print a line per finished run on stderr (a terminal also shows a progress bar).
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckArg {
    Every,
    First,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut specs = Vec::new();
    for given in &args.specs {
        for path in experiments::report::spec_files(given)? {
            specs.push(Spec::load(&path)?);
        }
    }
    if specs.is_empty() {
        anyhow::bail!("no *.toml spec in {}", args.specs[0].display());
    }
    let shard = args
        .shard
        .as_deref()
        .map(Shard::parse)
        .transpose()
        .map_err(|e| anyhow::anyhow!("invalid --shard: {e}"))?;
    let overrides = experiments::grid::parse_overrides(&args.set)?;
    let bench = BenchCommand::current_exe().context("locating the nvmdb executable")?;
    let options = SweepOptions {
        out: args.out.clone(),
        expand: ExpandOptions { quick: args.quick, overrides },
        shard,
        retry_failed: args.retry_failed,
        bench,
        scratch: args.scratch.clone(),
        images: (!args.no_images)
            .then(|| args.images.clone().unwrap_or_else(|| args.out.join("images"))),
        check: match args.check {
            CheckArg::Every => CheckReps::Every,
            CheckArg::First => CheckReps::First,
        },
    };
    let plan = sweep::plan(specs, &options)?;
    refuse_what_the_bench_refuses(&plan)?;
    if args.dry_run {
        print_plan(&plan, shard);
        return Ok(ExitCode::SUCCESS);
    }
    if plan.skipped_lines > 0 {
        eprintln!(
            "warning: {} unreadable line(s) in {}/results.jsonl (a run killed mid-write) \
             are ignored",
            plan.skipped_lines,
            args.out.display()
        );
    }
    let built = env!("NVMDB_GIT_COMMIT");
    if let Some(warning) =
        provenance_warning(built, experiments::provenance::code_commit(Some(built)))
    {
        eprintln!("warning: {warning}");
    }
    let display = Display::new(args.verbose);
    let summary = sweep::run(&plan, &options, &display)?;
    print_summary(&summary, plan.done());
    Ok(if summary.has_failures() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// What a sweep says before it starts when its rows could not be attributed to the code that
/// ran them: each row names the checkout's code commit (`named`) beside the binary's build
/// commit (`built`), and the report leaves a row out where they differ (issue 38: four rows
/// of a pelley-fig1 rerun named `-dirty`: the checkout was being edited when the sweep read
/// it; `code_commit` is read once per process, here at the start). `None` outside a git
/// checkout.
fn provenance_warning(built: &str, named: Option<String>) -> Option<String> {
    let named = named?;
    let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
    if named.ends_with("-dirty") {
        return Some(format!(
            "the checkout has uncommitted changes to the code (crates/, Cargo.toml, Cargo.lock): \
             every row will name {}-dirty and the report leaves such rows out; commit, build, \
             and sweep from a clean checkout of the binary's commit",
            short(&named)
        ));
    }
    (named != built).then(|| {
        format!(
            "the binary was built from {} but the checkout's code is at {}: every row will say \
             so and the report leaves such rows out; rebuild, or sweep from a checkout of {}",
            short(built),
            short(&named),
            short(built)
        )
    })
}

/// A point whose flags the bench refuses (a peer engine given `--medium`, a size below the
/// engine's minimum, ...) would fail every repetition after the sweep has started: such a spec is
/// an error before anything runs (issue 36: nvwal-fig7's stock SQLite inherited `medium = dram`).
fn refuse_what_the_bench_refuses(plan: &sweep::Plan) -> anyhow::Result<()> {
    for s in &plan.specs {
        let mut todo: Vec<usize> = s.todo.iter().map(|&(i, _)| i).collect();
        todo.dedup();
        for point in todo.iter().filter_map(|&i| s.points.get(i)) {
            if point.mode != experiments::spec::Mode::Run {
                continue;
            }
            if let Some(why) = super::bench::refused_flags(&point.args()) {
                anyhow::bail!(
                    "spec `{}`, point {}: the bench refuses its flags: {why}; fix the spec",
                    s.spec.name,
                    point.id
                );
            }
        }
    }
    Ok(())
}

fn print_plan(plan: &sweep::Plan, shard: Option<Shard>) {
    for p in &plan.specs {
        let shard_text =
            shard.map_or(String::new(), |s| format!(", shard {s}: {} points", p.points.len()));
        println!(
            "{}: {} points x {} reps{shard_text}; {} runs to do, {} done",
            p.spec.name,
            p.grid_points,
            p.reps,
            p.todo.len(),
            p.done
        );
        for point in &p.points {
            let left = p.todo.iter().filter(|(i, _)| p.points[*i].index == point.index).count();
            println!("  {:<60} {left} to do  nvmdb bench {}", point.id, point.args().join(" "));
        }
    }
}

fn print_summary(s: &sweep::Summary, done_before: usize) {
    println!(
        "sweep: {} runs: {} ok, {} not runnable, {} checker failures, {} errors, {} timeouts; \
         {done_before} already done; results in {}",
        s.runs,
        s.count(Status::Ok),
        s.count(Status::Unsupported),
        s.count(Status::CheckFailed),
        s.count(Status::Error),
        s.count(Status::Timeout),
        s.results.display()
    );
    for reason in &s.unsupported {
        println!("  not yet runnable: {reason}");
    }
    for f in &s.failures {
        eprintln!("  failed: {f}");
    }
}

/// A progress bar with an ETA on a terminal; with `--verbose`, a line per run.
struct Display {
    bar: Option<indicatif::ProgressBar>,
    verbose: bool,
}

impl Display {
    fn new(verbose: bool) -> Display {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} runs, {elapsed} elapsed, ETA {eta} {wide_msg}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_prefix("sweep");
            bar.enable_steady_tick(Duration::from_millis(500));
            bar
        });
        Display { bar, verbose }
    }
}

impl Progress for Display {
    fn begin(&self, todo: usize, _done: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(todo as u64);
        }
    }

    fn run_started(&self, spec: &str, point: &Point, rep: u32) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{spec} {} #{rep}", point.id));
        }
    }

    fn run_finished(&self, spec: &str, point: &Point, rep: u32, outcome: &Outcome) {
        if self.verbose {
            let tps = outcome
                .row
                .as_ref()
                .and_then(|r| r.get("tps"))
                .and_then(|v| v.as_f64())
                .map_or(String::new(), |t| format!(" tps={t:.0}"));
            let error = outcome.error.as_deref().map_or(String::new(), |e| format!(": {e}"));
            let line = format!(
                "{spec} {} rep {rep}: {} in {:.1}s{tps}{error}",
                point.id,
                outcome.status.name(),
                outcome.wall.as_secs_f64()
            );
            match &self.bar {
                Some(bar) => bar.println(line),
                None => eprintln!("{line}"),
            }
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn end(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::provenance_warning;

    #[test]
    fn a_sweep_warns_when_its_rows_will_not_name_the_code_that_ran() {
        let a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
        assert_eq!(provenance_warning(a, Some(a.to_string())), None);
        assert_eq!(provenance_warning(a, None), None);
        let dirty = provenance_warning(a, Some(format!("{a}-dirty"))).unwrap();
        assert!(dirty.contains("aaaaaaaaaaaa-dirty") && dirty.contains("uncommitted"), "{dirty}");
        let other = provenance_warning(a, Some(b.to_string())).unwrap();
        assert!(other.contains("built from aaaaaaaaaaaa") && other.contains("bbbbbbbbbbbb"));
        // A dirty binary in a clean checkout of its commit is also a mismatch.
        assert!(provenance_warning(&format!("{a}-dirty"), Some(a.to_string())).is_some());
    }
}

//! `nvmdb`: the command-line front end (docs/design.md §6). Each subcommand lives in
//! `cli/<name>.rs`; `registry` opens any engine by name (peers and testing engines included) for
//! them. The embeddable library is the separate `nvmdb` crate, which this binary depends on.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cli;
mod registry;

#[derive(Parser)]
#[command(
    name = "nvmdb",
    version,
    about = "Transactional storage engine and testbed for persistent memory"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// CPU flush instructions, whether a path is DAX, medium capabilities.
    Info(cli::info::Args),
    /// TSC frequency, delay accuracy, cost of store+flush+fence on this machine.
    Calibrate(cli::calibrate::Args),
    /// One benchmark run: a workload on an engine; table, --json or --csv.
    Bench(Box<cli::bench::Args>),
    /// Crash, recover, verify: simulated power failures, or real kills with --kill.
    Crashtest(Box<cli::crashtest::Args>),
    /// Inspect a region file without changing it: superblock, pending recovery, integrity,
    /// tables and row counts (`--repair` lets recovery write).
    Check(cli::check::Args),
    /// Damage populated regions (bit flips, zeroed and stale pages, truncation) and check the
    /// engine rejects or detects it: never a panic, a hang or a reformat.
    Fuzz(cli::fuzz::Args),
    /// Run experiment specs (the papers' figures): a grid of bench runs, resumable, shardable.
    Sweep(cli::sweep::Args),
    /// Join the output directories of sharded sweeps.
    Merge(cli::merge::Args),
    /// Figures, verdicts against the papers, index.html and report.md from a sweep's results.
    Report(cli::report::Args),
    /// Data-centre power model (thesis app. A) and Power Routing (app. B).
    Dcpower(cli::dcpower::Args),
    /// Memory persistency (thesis ch. VI–VIII): persistent queues, strict / epoch / strand
    /// critical paths (Table 8.1 by default; sweep, crashtest, engines).
    Persistency(persistency::cli::Args),
    /// Scans on SSD vs disk (thesis ch. III, Fig. 3.1–3.3): break-evens, expected pages.
    Scan(queryopt::cli::ScanArgs),
    /// Sort-merge vs hybrid-hash joins on SSD vs disk (thesis ch. III, Fig. 3.4, Table 3.1).
    Join(queryopt::cli::JoinArgs),
}

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a closed stdout (`nvmdb sweep --dry-run … | head`) made `print!`
    // panic. Like other Unix tools, the process now ends on it (status 141), quietly.
    // SAFETY: called first in main, before any thread starts; SIG_DFL is a valid disposition.
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info(args) => cli::info::run(args),
        Command::Calibrate(args) => cli::calibrate::run(args),
        Command::Bench(args) => cli::bench::run(*args),
        Command::Crashtest(args) => cli::crashtest::run(*args),
        Command::Check(args) => cli::check::run(args),
        Command::Fuzz(args) => cli::fuzz::run(args),
        Command::Sweep(args) => cli::sweep::run(args),
        Command::Merge(args) => cli::merge::run(args),
        Command::Report(args) => cli::report::run(args),
        Command::Dcpower(args) => cli::dcpower::run(args),
        Command::Persistency(args) => persistency::cli::run(args),
        Command::Scan(args) => queryopt::cli::scan(args),
        Command::Join(args) => queryopt::cli::join(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

//! `nvmdb`: the command-line front end (docs/design.md §6). Each subcommand lives in
//! `cli/<name>.rs`; `registry` opens any engine by name (peers and testing engines included) for
//! them. The embeddable library is the separate `nvmdb` crate, which this binary depends on.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
    let cli = parse_args();
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
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

/// The command line, or the process ends: help and version as clap prints them, a usage error
/// (an unknown flag, a value out of its range) as one line and status 2, not a usage block.
fn parse_args() -> Cli {
    let matches = negative_numbers_are_values(Cli::command()).try_get_matches();
    match matches.and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                e.exit();
            }
            let rendered = e.render().to_string();
            eprintln!("{}", rendered.lines().next().unwrap_or("error: invalid command line"));
            std::process::exit(e.exit_code());
        }
    }
}

/// Lets `--threads -1` reach the flag's value parser (which says what range it takes) instead
/// of reading `-1` as an unknown flag, in every subcommand.
fn negative_numbers_are_values(command: clap::Command) -> clap::Command {
    command
        .mut_args(|arg| {
            let takes_values = arg.get_action().takes_values();
            arg.allow_negative_numbers(takes_values)
        })
        .mut_subcommands(negative_numbers_are_values)
}

/// An error and its causes, each clause once: a cause whose text the message already holds
/// (an error that prints its source and also reports it as its source) is not repeated.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let clause = cause.to_string();
        if !text.contains(&clause) {
            text = format!("{text}: {clause}");
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("worker 0: {source}")]
    struct Echoes {
        source: std::io::Error,
    }

    #[test]
    fn an_error_chain_prints_each_clause_once() {
        let io = std::io::Error::other("disk on fire");
        let e = anyhow::Error::new(Echoes { source: io }).context("bench");
        assert_eq!(error_chain(&e), "bench: worker 0: disk on fire");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&plain), "outer: inner");
    }
}

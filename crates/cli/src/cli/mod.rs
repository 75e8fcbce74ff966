//! One module per subcommand. Each exposes `Args` (clap) and
//! `run(Args) -> anyhow::Result<ExitCode>`; an `Err` is printed as one line and exits with code 2
//! (bad input), a completed run that found a problem returns its own exit code (1).

pub mod bench;
pub mod calibrate;
pub mod check;
pub mod crashtest;
pub mod dcpower;
pub mod fuzz;
pub mod info;
pub mod merge;
pub mod numeric;
pub mod report;
pub mod sweep;
pub mod workload_flags;

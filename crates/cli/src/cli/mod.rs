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

/// The 1-, 5- and 15-minute load averages from /proc/loadavg (`None` where there is none).
pub(crate) fn load_averages() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut v = text.split_whitespace().map(|s| s.parse::<f64>().ok());
    Some([v.next()??, v.next()??, v.next()??])
}

//! Runs one point: a fresh `nvmdb bench --json` child process (or three, for crash_recover),
//! with a time limit, and classifies how it ended.
//!
//! Each run is a new process so that no state (allocators, caches, calibrations, a leaked
//! thread) carries over from one point to the next, as each of Pelley's runs started a fresh
//! Shore-MT. Invariant: a child never outlives its time limit, and a crash_recover run removes
//! the region file it made.

use crate::grid::{flags_to_args, Point};
use crate::results::Status;
use crate::spec::{FlagValue, Flags, Mode};
use crate::units;
use serde_json::{Map, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Most stdout kept from one run: a bench row is a few KiB.
const MAX_STDOUT_BYTES: usize = 16 << 20;
/// Tail of stderr kept from one run, for the error message.
const MAX_STDERR_BYTES: usize = 64 << 10;
/// How often a running child is polled for exit.
const POLL: Duration = Duration::from_millis(20);
/// How long the crash run of crash_recover may run past its crash point (it is killed first).
const CRASH_RUN_SLACK: Duration = Duration::from_secs(3600);

/// The program that runs one benchmark: `nvmdb bench` (the sweep's own executable).
#[derive(Clone, Debug)]
pub struct BenchCommand {
    pub program: PathBuf,
    /// Arguments before the point's flags (`["bench"]`).
    pub prefix: Vec<String>,
}

impl BenchCommand {
    /// `nvmdb bench`, through the running executable.
    pub fn current_exe() -> std::io::Result<BenchCommand> {
        Ok(BenchCommand { program: std::env::current_exe()?, prefix: vec!["bench".into()] })
    }
}

/// Why the bench could not run a point: the one-line error of exit code 2 naming something it
/// does not know (an engine, a workload, a flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The flag whose value (or presence) the bench rejected.
    pub flag: Option<String>,
    /// The rejected value; `None` when the flag itself is unknown.
    pub value: Option<String>,
    /// `engine wal missing`, `bench has no --wear flag`.
    pub reason: String,
}

impl Unsupported {
    /// Whether `point` would be rejected for the same reason.
    pub fn applies_to(&self, point: &Point) -> bool {
        let Some(flag) = &self.flag else { return false };
        match (&self.value, point.flags.get(flag)) {
            (None, Some(FlagValue::Switch(false))) => false,
            (None, Some(_)) => true,
            (Some(v), Some(FlagValue::Text(t))) => t == v,
            (Some(v), Some(FlagValue::List(items))) => items.contains(v),
            _ => false,
        }
    }

    /// Reads the bench's error output.
    pub fn from_stderr(stderr: &str) -> Option<Unsupported> {
        let line = stderr.lines().rev().find(|l| l.starts_with("error:"))?;
        if let Some(rest) = line.split("unexpected argument '").nth(1) {
            let arg = rest.split('\'').next()?;
            let flag = arg.trim_start_matches('-').replace('-', "_");
            return Some(Unsupported {
                flag: Some(flag),
                value: None,
                reason: format!("bench has no {arg} flag"),
            });
        }
        // `error: invalid --engine: unknown engine `wal` (known: ...)`
        let unknown = line.split("unknown ").nth(1)?;
        let (thing, rest) = unknown.split_once(" `")?;
        let value = rest.split('`').next()?.to_string();
        let flag = line
            .split("invalid --")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .map(|f| f.replace('-', "_"));
        Some(Unsupported { flag, reason: format!("{thing} {value} missing"), value: Some(value) })
    }
}

/// How one run ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub status: Status,
    pub exit_code: Option<i32>,
    /// The bench's JSON row, when it printed one.
    pub row: Option<Map<String, Value>>,
    /// One line: why the run failed (or the checker's verdict).
    pub error: Option<String>,
    pub unsupported: Option<Unsupported>,
    pub wall: Duration,
    /// The bench arguments of the measured run.
    pub args: Vec<String>,
}

impl Outcome {
    fn failed(status: Status, error: String, args: Vec<String>, wall: Duration) -> Outcome {
        Outcome {
            status,
            exit_code: None,
            row: None,
            error: Some(error),
            unsupported: None,
            wall,
            args,
        }
    }

    /// A run not started because an earlier one showed the bench cannot run it.
    pub fn known_unsupported(u: &Unsupported, args: Vec<String>) -> Outcome {
        Outcome {
            status: Status::Unsupported,
            exit_code: None,
            row: None,
            error: Some(u.reason.clone()),
            unsupported: Some(u.clone()),
            wall: Duration::ZERO,
            args,
        }
    }
}

struct ChildOutput {
    status: Option<ExitStatus>,
    stdout: Vec<u8>,
    stderr: String,
    timed_out: bool,
    /// Killed on purpose at `kill_after`.
    killed: bool,
    wall: Duration,
}

/// Reads `pipe` to the end on a thread, keeping at most `limit` bytes (the head or the tail).
fn drain<R: Read + Send + 'static>(
    mut pipe: R,
    limit: usize,
    keep_tail: bool,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > limit {
                if keep_tail {
                    kept.drain(..kept.len() - limit);
                } else {
                    kept.truncate(limit);
                }
            }
        }
        kept
    })
}

fn run_child(
    cmd: &BenchCommand,
    args: &[String],
    limit: Duration,
    kill_after: Option<Duration>,
) -> std::io::Result<ChildOutput> {
    let start = Instant::now();
    let mut child = Command::new(&cmd.program)
        .args(&cmd.prefix)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().map(|p| drain(p, MAX_STDOUT_BYTES, false));
    let stderr = child.stderr.take().map(|p| drain(p, MAX_STDERR_BYTES, true));
    let (mut timed_out, mut killed) = (false, false);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        let elapsed = start.elapsed();
        if kill_after.is_some_and(|k| elapsed >= k) {
            killed = true;
        } else if elapsed >= limit {
            timed_out = true;
        }
        if killed || timed_out {
            // SIGKILL: a crash, with no chance to shut down cleanly.
            let _ = child.kill();
            child.wait()?;
            break None;
        }
        std::thread::sleep(POLL);
    };
    if killed || timed_out {
        // A process the bench started may still hold the pipes open; its output is not needed,
        // and the reader threads end when it does.
        return Ok(ChildOutput {
            status,
            stdout: Vec::new(),
            stderr: String::new(),
            timed_out,
            killed,
            wall: start.elapsed(),
        });
    }
    let stdout = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    Ok(ChildOutput { status, stdout, stderr, timed_out, killed, wall: start.elapsed() })
}

/// The last line of stdout that is a JSON object.
fn json_row(stdout: &[u8]) -> Option<Map<String, Value>> {
    String::from_utf8_lossy(stdout).lines().rev().find_map(|line| {
        match serde_json::from_str::<Value>(line.trim()) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        }
    })
}

/// The most telling line of stderr: the last `error:` line, else the last non-empty one.
fn error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error:"))
        .or(lines.last())
        .map_or_else(|| "no error output".to_string(), |l| l.to_string())
}

fn classify(out: ChildOutput, args: Vec<String>, limit: Duration) -> Outcome {
    if out.timed_out {
        let error = format!("killed after the time limit of {}", units::format_duration(limit));
        return Outcome::failed(Status::Timeout, error, args, out.wall);
    }
    let Some(status) = out.status else {
        return Outcome::failed(Status::Error, "killed".into(), args, out.wall);
    };
    let code = status.code();
    let row = json_row(&out.stdout);
    let mut outcome = Outcome {
        status: Status::Error,
        exit_code: code,
        row: None,
        error: None,
        unsupported: None,
        wall: out.wall,
        args,
    };
    match (code, row) {
        (Some(0), Some(row)) => {
            outcome.status = Status::Ok;
            outcome.row = Some(row);
        }
        (Some(1), Some(row)) => {
            outcome.status = Status::CheckFailed;
            outcome.error = row.get("checker").and_then(Value::as_str).map(str::to_string);
            outcome.row = Some(row);
        }
        (Some(0 | 1), None) => outcome.error = Some("the bench printed no JSON row".into()),
        (Some(2), _) => match Unsupported::from_stderr(&out.stderr) {
            Some(u) => {
                outcome.status = Status::Unsupported;
                outcome.error = Some(u.reason.clone());
                outcome.unsupported = Some(u);
            }
            None => outcome.error = Some(error_line(&out.stderr)),
        },
        (Some(c), _) => outcome.error = Some(format!("exit code {c}: {}", error_line(&out.stderr))),
        (None, _) => {
            use std::os::unix::process::ExitStatusExt;
            let signal = status.signal().unwrap_or(0);
            outcome.error = Some(format!("killed by signal {signal}: {}", error_line(&out.stderr)));
        }
    }
    outcome
}

/// Runs one repetition of `point`. `scratch` holds crash_recover's region files and those of
/// `io=fs` runs without a `path` ([`needs_region_file`]); `image` is the
/// loaded database a run starts from (`nvmdb bench --image`: built by the first run).
pub fn run_point(
    cmd: &BenchCommand,
    point: &Point,
    rep: u32,
    limit: Duration,
    scratch: &Path,
    image: Option<&Path>,
) -> Outcome {
    match point.mode {
        Mode::Run => {
            let mut args = point.args();
            let region = needs_region_file(point).then(|| {
                scratch.join(format!(
                    "{SWEEP_REGION_PREFIX}{}-{}-{rep}.region",
                    std::process::id(),
                    point.hash
                ))
            });
            if let Some(region) = &region {
                let _ = std::fs::remove_file(region);
                args.push("--path".into());
                args.push(region.display().to_string());
            }
            let outcome = run_args(cmd, args, image, limit);
            // The bench removes the file it created, unless the run was killed first.
            if let Some(region) = &region {
                let _ = std::fs::remove_file(region);
            }
            outcome
        }
        Mode::CrashRecover { crash_after } => {
            let region = scratch.join(format!(
                "{SWEEP_REGION_PREFIX}{}-{}-{rep}.region",
                std::process::id(),
                point.hash
            ));
            let outcome = crash_recover(cmd, point, crash_after, limit, &region);
            let _ = std::fs::remove_file(&region);
            outcome
        }
    }
}

/// The prefix of the region files a sweep's runs make in their scratch directory
/// (`nvmdb-sweep-<sweep pid>-<point hash>-<rep>.region`).
const SWEEP_REGION_PREFIX: &str = "nvmdb-sweep-";

/// Removes the region files that sweeps no longer running left in `dir` (a sweep killed
/// mid-run cannot remove its run's file: a region left in `/dev/shm` holds memory, up to the
/// region's size, until someone deletes it — an 8 GiB one made a later sweep's run die of
/// memory). A file is stale when the process id in its name is not a live process. Returns
/// each removed file and its size in bytes.
pub fn remove_stale_regions(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return removed };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SWEEP_REGION_PREFIX))
            .filter(|rest| rest.ends_with(".region"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = entry.path();
        let bytes = entry.metadata().map_or(0, |m| m.len());
        if std::fs::remove_file(&path).is_ok() {
            removed.push((path, bytes));
        }
    }
    removed
}

/// Whether a `Mode::Run` point needs a region file the spec does not name: an `io=fs` engine
/// (`pwrite` + `fdatasync` to the region's file, N-Store's traditional engines) on a file
/// medium without `path`, which the bench refuses (issue 36: `nstore-ycsb` never ran).
pub fn needs_region_file(point: &Point) -> bool {
    let text = |key: &str| match point.flags.get(key) {
        Some(FlagValue::Text(v)) => Some(v.as_str()),
        _ => None,
    };
    let io_fs = match point.flags.get("engine_opt") {
        Some(FlagValue::List(opts)) => opts.iter().any(|o| o.replace(' ', "") == "io=fs"),
        Some(FlagValue::Text(o)) => o.replace(' ', "") == "io=fs",
        _ => false,
    };
    io_fs && matches!(text("medium"), Some("shm" | "file")) && !point.flags.contains_key("path")
}

/// One bench child with `args`, from `image` when given.
fn run_args(
    cmd: &BenchCommand,
    mut args: Vec<String>,
    image: Option<&Path>,
    limit: Duration,
) -> Outcome {
    if let Some(image) = image {
        args.push("--image".into());
        args.push(image.display().to_string());
    }
    args.push("--json".into());
    match run_child(cmd, &args, limit, None) {
        Ok(out) => classify(out, args, limit),
        Err(e) => Outcome::failed(Status::Error, spawn_error(cmd, &e), args, Duration::ZERO),
    }
}

fn spawn_error(cmd: &BenchCommand, e: &std::io::Error) -> String {
    format!("cannot start {}: {e}", cmd.program.display())
}

/// Load, crash, recover: three processes on one region file.
fn crash_recover(
    cmd: &BenchCommand,
    point: &Point,
    crash_after: Duration,
    limit: Duration,
    region: &Path,
) -> Outcome {
    let _ = std::fs::remove_file(region);
    let with = |edit: &dyn Fn(&mut Flags)| {
        let mut flags = point.flags.clone();
        flags.insert("path".into(), FlagValue::Text(region.display().to_string()));
        edit(&mut flags);
        let mut args = flags_to_args(&flags);
        args.push("--json".into());
        args
    };
    let text = |s: &str| FlagValue::Text(s.to_string());
    // 1. Create and load the region, then shut down cleanly (the file is kept).
    let load = with(&|f| {
        f.remove("warmup");
        f.remove("duration");
        f.insert("txns".into(), text("1"));
        f.insert("keep".into(), FlagValue::Switch(true));
    });
    let started = Instant::now();
    match run_child(cmd, &load, limit, None) {
        Ok(out) => {
            let o = classify(out, load, limit);
            if o.status != Status::Ok {
                return o;
            }
        }
        Err(e) => {
            return Outcome::failed(Status::Error, spawn_error(cmd, &e), load, started.elapsed())
        }
    }
    // 2. Run on it and SIGKILL the process at the crash point.
    let crash = with(&|f| {
        f.remove("txns");
        f.insert("warmup".into(), text("0"));
        let long = crash_after + CRASH_RUN_SLACK;
        f.insert("duration".into(), FlagValue::Text(units::format_duration(long)));
    });
    match run_child(
        cmd,
        &crash,
        limit.max(crash_after + Duration::from_secs(60)),
        Some(crash_after),
    ) {
        Ok(out) if out.killed => {}
        Ok(out) => {
            let mut o = classify(out, crash, limit);
            if o.status == Status::Ok {
                o.status = Status::Error;
                o.error = Some("the crash run ended before its crash point".into());
            }
            return o;
        }
        Err(e) => {
            return Outcome::failed(Status::Error, spawn_error(cmd, &e), crash, started.elapsed())
        }
    }
    // 3. Recover and measure.
    let recover = with(&|_| {});
    match run_child(cmd, &recover, limit, None) {
        Ok(out) => {
            let mut o = classify(out, recover, limit);
            o.wall = started.elapsed();
            o
        }
        Err(e) => Outcome::failed(Status::Error, spawn_error(cmd, &e), recover, started.elapsed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_sweep_regions_go_and_live_sweeps_and_other_files_stay() {
        let dir = tempfile::tempdir().unwrap();
        // No process has pid 2^22 + 1 (above Linux's pid_max limit, 2^22).
        let dead = format!("{SWEEP_REGION_PREFIX}4194305-abc-0.region");
        let ours = format!("{SWEEP_REGION_PREFIX}{}-abc-1.region", std::process::id());
        let live = format!("{SWEEP_REGION_PREFIX}1-abc-0.region"); // init: always alive
        let kept = [ours, live, "nvmdb-sweep-x-abc-0.region".into(), "nvmdb-4194305.region".into()];
        std::fs::write(dir.path().join(&dead), [0u8; 10]).unwrap();
        for name in &kept {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let removed = remove_stale_regions(dir.path());
        assert_eq!(removed, vec![(dir.path().join(&dead), 10)]);
        assert!(!dir.path().join(&dead).exists());
        for name in &kept {
            assert!(dir.path().join(name).exists(), "{name}");
        }
        assert!(remove_stale_regions(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn reads_unknown_engine() {
        let u = Unsupported::from_stderr(
            "error: invalid --engine: unknown engine `wal` (known: noop, mem, inplace)\n",
        )
        .unwrap();
        assert_eq!(u.flag.as_deref(), Some("engine"));
        assert_eq!(u.value.as_deref(), Some("wal"));
        assert_eq!(u.reason, "engine wal missing");
    }

    #[test]
    fn reads_unknown_flag() {
        let stderr = "error: unexpected argument '--wear' found\n\n  tip: ...\n\nUsage: nvmdb";
        let u = Unsupported::from_stderr(stderr).unwrap();
        assert_eq!(u.flag.as_deref(), Some("wear"));
        assert_eq!(u.value, None);
        assert_eq!(u.reason, "bench has no --wear flag");
    }

    /// Regression (issue 36): `nstore-ycsb`'s traditional engines (`io=fs` on `shm`) failed
    /// every run with "io=fs needs a file medium": the sweep gave them no region file.
    #[test]
    fn an_io_fs_point_without_a_path_gets_a_region_file() {
        let text = r#"
            [spec]
            title = "t"
            source = "s"
            [base]
            medium = "shm"
            [grid]
            engine = [
                { name = "inp", engine = "wal", engine_opt = ["io=fs"] },
                { name = "nvm-inp", engine = "inplace" },
                { name = "named", engine = "cow", engine_opt = ["io=fs"], path = "/dev/shm/x" },
            ]
        "#;
        let spec = crate::spec::Spec::parse(text, Path::new("t.toml")).unwrap();
        let (points, _) = crate::grid::expand(&spec, &Default::default()).unwrap();
        let needs: Vec<bool> = points.iter().map(needs_region_file).collect();
        assert_eq!(needs, [true, false, false], "io=fs without a path only");
    }

    #[test]
    fn other_errors_are_not_unsupported() {
        assert!(Unsupported::from_stderr("error: invalid --threads: must be 1..=256").is_none());
        assert!(Unsupported::from_stderr("").is_none());
    }
}

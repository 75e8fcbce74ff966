//! Real process crashes (docs/design.md §7): run the benchmark in a child process on a `file`/`shm`
//! region (or a peer's directory), SIGKILL it at a random moment, recover in the parent, verify.
//!
//! Would catch: recovery that cannot undo a transaction cut off between two stores, a structure
//! modification that is not atomic against a process dying mid-way, an acknowledged commit that
//! only lived in the dead process's DRAM (a volatile cache or log tail counted as durable).
//!
//! A process crash loses no store that reached the mapping (the page cache keeps it), so it
//! tests less than a power failure (the `sim` crash images do that), but it runs the real
//! medium, real threads, and any engine, peers included.
//!
//! The child protocol ([`serve_child`]): the child prints `ready` once its workers start, then
//! `ack TABLE KEY VALUE` for every ack of every transaction whose commit it observed durable,
//! flushed per batch, so a line in the pipe was durable before the kill. The parent keeps only
//! complete lines. Each iteration starts from a fresh copy of the loaded base ([`KillTarget`]).

use crate::acks::{DurableSink, DurableTxn};
use crate::crash::{check_recovered, iteration_seed, CrashError, Observer, Outcome, Summary};
use crate::crash::{panic_message, Violation, ViolationKind};
use crate::driver::{BenchError, Hooks, Progress, RunOptions, RunResult, Stage, Status};
use crate::seed::splitmix64;
use parking_lot::Mutex;
use std::io::{BufRead, BufReader, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use storage::Engine;
use workloads::{Ack, Workload};

/// Most bytes of a child's stderr kept for error messages.
const STDERR_TAIL_BYTES: usize = 4096;
/// Longest protocol line accepted from a child.
const MAX_LINE_BYTES: usize = 256;

/// What a kill campaign tests. Every closure acts on the same working region or directory.
pub struct KillTarget<'a> {
    /// Replaces the working region (or directory) with a fresh copy of the loaded base.
    pub reset: &'a (dyn Fn() -> Result<(), String> + Sync),
    /// Called after each kill, before recovery (untimed): e.g. keeps a copy of the crashed
    /// region for inspection.
    pub after_kill: Option<&'a (dyn Fn() -> Result<(), String> + Sync)>,
    /// Opens the engine on the working region (recovery).
    pub open: &'a (dyn Fn() -> Result<Box<dyn Engine>, String> + Sync),
    pub workload: &'a dyn Workload,
    /// Starts a child that runs the workload on the working region with this seed and speaks
    /// the protocol of [`serve_child`] on its stdout (piped); stderr should be piped too.
    pub spawn: &'a (dyn Fn(u64) -> std::io::Result<Child> + Sync),
}

/// How a kill campaign runs.
#[derive(Clone, Debug)]
pub struct KillOptions {
    /// Kills.
    pub crashes: u64,
    pub seed: u64,
    /// Each kill comes at a random time in `(0, window]` after the child reported `ready`.
    pub window: Duration,
    /// How long a child may take to open the region and start its workers.
    pub start_timeout: Duration,
}

impl KillOptions {
    pub fn validate(&self) -> Result<(), CrashError> {
        if self.crashes == 0 || self.crashes > crate::crash::MAX_CRASHES {
            return Err(CrashError::Options(format!(
                "crashes must be 1..={}, got {}",
                crate::crash::MAX_CRASHES,
                self.crashes
            )));
        }
        if self.window.is_zero() || self.window > Duration::from_secs(3600) {
            return Err(CrashError::Options("the kill window must be in (0, 1h]".into()));
        }
        Ok(())
    }

    /// When iteration `index` kills its child, after `ready`.
    pub fn delay(&self, index: u64) -> Duration {
        let seed = iteration_seed(self.seed, index);
        let per_mille = 1 + splitmix64(seed ^ 0x4B11) % 1000;
        self.window * per_mille as u32 / 1000
    }
}

/// Runs a kill campaign: `options.crashes` times reset, spawn, kill, recover, verify.
pub fn run_kill(
    target: &KillTarget<'_>,
    options: &KillOptions,
    observer: &dyn Observer,
) -> Result<Summary, CrashError> {
    options.validate()?;
    let started = Instant::now();
    let mut summary = Summary::default();
    for index in 0..options.crashes {
        let outcome = kill_once(target, options, index)?;
        summary.add(&outcome);
        observer.finished(&outcome, index + 1, options.crashes);
    }
    summary.finish();
    summary.elapsed = started.elapsed();
    Ok(summary)
}

fn kill_once(
    target: &KillTarget<'_>,
    options: &KillOptions,
    index: u64,
) -> Result<Outcome, CrashError> {
    let setup = |what: &str, e: String| CrashError::Setup(format!("kill {index}: {what}: {e}"));
    let seed = iteration_seed(options.seed, index);
    (target.reset)().map_err(|e| setup("restoring the base copy", e))?;
    let mut child = (target.spawn)(seed).map_err(|e| setup("starting the child", e.to_string()))?;
    let stderr = child.stderr.take().map(|e| std::thread::spawn(move || tail(e)));
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        return Err(setup("starting the child", "its stdout is not piped".into()));
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || read_protocol(stdout, ready_tx));
    let stderr_text = |stderr: Option<std::thread::JoinHandle<String>>| {
        stderr.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    if ready_rx.recv_timeout(options.start_timeout).is_err() {
        let _ = child.kill();
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        let _ = reader.join();
        let text = stderr_text(stderr);
        return Err(setup("the child never started its run", format!("{status}: {text}")));
    }
    let delay = options.delay(index);
    std::thread::sleep(delay);
    if let Ok(Some(status)) = child.try_wait() {
        let _ = reader.join();
        let text = stderr_text(stderr);
        return Err(setup("the child ended before it was killed", format!("{status}: {text}")));
    }
    // SIGKILL: the process dies between two instructions, with no chance to clean up.
    child.kill().map_err(|e| setup("killing the child", e.to_string()))?;
    let _ = child.wait();
    let acks = match reader.join() {
        Ok(Ok(acks)) => acks,
        Ok(Err(e)) => return Err(setup("reading the child's acks", e)),
        Err(_) => return Err(setup("reading the child's acks", "the reader panicked".into())),
    };
    let _ = stderr_text(stderr);
    if let Some(after_kill) = target.after_kill {
        after_kill().map_err(|e| setup("after the kill", e))?;
    }
    let crash = format!("seed {seed} kill after {} ms", delay.as_millis());
    let mut outcome =
        Outcome { index, reached: true, acks: acks.len() as u64, ..Outcome::default() };
    let violation = |kind, message| Violation { kind, crash: crash.clone(), replay: None, message };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let started = Instant::now();
        let opened = (target.open)();
        let recovery_ms = started.elapsed().as_secs_f64() * 1e3;
        match opened {
            Ok(engine) => {
                let failures = check_recovered(&*engine, target.workload, &acks);
                // Nothing is left open, so a clean shutdown must succeed; the next iteration
                // starts from the base copy anyway.
                let _ = engine.shutdown();
                (Some(recovery_ms), failures)
            }
            Err(e) => (
                Some(recovery_ms),
                vec![(ViolationKind::Recovery, format!("recovery failed: {e}"))],
            ),
        }
    }));
    match result {
        Ok((recovery_ms, failures)) => {
            outcome.recovery_ms.extend(recovery_ms);
            for (kind, message) in failures {
                outcome.violations.push(violation(kind, message));
            }
        }
        Err(payload) => {
            let message = format!("during recovery or verification: {}", panic_message(&*payload));
            outcome.violations.push(violation(ViolationKind::Panic, message));
        }
    }
    Ok(outcome)
}

/// Reads the child's protocol until EOF: signals `ready`, returns the acks of complete lines
/// (a line cut off by the kill was never fully written, so its ack proves nothing).
fn read_protocol(out: impl Read, ready: mpsc::Sender<()>) -> Result<Vec<Ack>, String> {
    let mut reader = BufReader::new(out);
    let mut acks = Vec::new();
    let mut line = Vec::with_capacity(64);
    loop {
        line.clear();
        let n = reader
            .by_ref()
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading the pipe: {e}"))?;
        if n == 0 || line.last() != Some(&b'\n') {
            if n == MAX_LINE_BYTES {
                return Err(format!("a line longer than {MAX_LINE_BYTES} bytes"));
            }
            return Ok(acks);
        }
        let text = String::from_utf8_lossy(&line[..n - 1]);
        if text == "ready" {
            let _ = ready.send(());
            continue;
        }
        acks.push(parse_ack(&text).ok_or_else(|| format!("unexpected line {text:?}"))?);
    }
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut words = line.split(' ');
    if words.next()? != "ack" {
        return None;
    }
    let table = words.next()?.parse().ok()?;
    let key = words.next()?.parse().ok()?;
    let value = words.next()?.parse().ok()?;
    words.next().is_none().then_some(Ack { table, key, value })
}

/// The last [`STDERR_TAIL_BYTES`] of a stream, as one line.
fn tail(mut stream: impl Read) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * STDERR_TAIL_BYTES {
            kept.drain(..kept.len() - STDERR_TAIL_BYTES);
        }
    }
    let start = kept.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&kept[start..]).trim().replace('\n', " | ")
}

/// The child side: runs `workload` on `engine` (already opened and recovered) with the driver,
/// printing the protocol on `out`. Returns when the run ends (or `out` breaks: the parent is
/// gone, so the run stops).
pub fn serve_child(
    engine: &dyn Engine,
    workload: &dyn Workload,
    options: &RunOptions,
    out: Box<dyn Write + Send>,
) -> Result<RunResult, BenchError> {
    // The workers' clock calibrates on first use; do it before `ready`, so that the kill
    // window is spent running transactions.
    pmem::Tsc::get();
    let stop = AtomicBool::new(false);
    let stream = AckStream { out: Mutex::new(out), ready: AtomicBool::new(false), stop: &stop };
    let hooks = Hooks { progress: Some(&stream), sink: Some(&stream), stop: Some(&stop) };
    crate::run(engine, workload, options, &hooks)
}

struct AckStream<'a> {
    out: Mutex<Box<dyn Write + Send>>,
    ready: AtomicBool,
    stop: &'a AtomicBool,
}

impl AckStream<'_> {
    fn write(&self, text: &[u8]) {
        let mut out = self.out.lock();
        if out.write_all(text).and_then(|()| out.flush()).is_err() {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

impl Progress for AckStream<'_> {
    fn update(&self, status: Status) {
        let running = matches!(status.stage, Stage::Warmup | Stage::Measure);
        if running && !self.ready.swap(true, Ordering::Relaxed) {
            self.write(b"ready\n");
        }
    }
}

impl DurableSink for AckStream<'_> {
    fn on_durable(&self, txns: &[DurableTxn]) {
        // Called only after the commits were observed durable: every line is a promise.
        let mut text = Vec::with_capacity(txns.len() * 32);
        for ack in txns.iter().flat_map(|t| &t.acks) {
            let _ = writeln!(text, "ack {} {} {}", ack.table, ack.key, ack.value);
        }
        if !text.is_empty() {
            self.write(&text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_keeps_complete_lines_only() {
        let (tx, rx) = mpsc::channel();
        let input = b"ready\nack 1 2 3\nack 4 5 6\nack 7 8".as_slice();
        let acks = read_protocol(input, tx).unwrap();
        assert!(rx.try_recv().is_ok());
        assert_eq!(
            acks,
            vec![Ack { table: 1, key: 2, value: 3 }, Ack { table: 4, key: 5, value: 6 }]
        );
        let (tx, _rx) = mpsc::channel();
        assert!(read_protocol(b"hello\n".as_slice(), tx).is_err());
        assert_eq!(parse_ack("ack 1 2 3 4"), None);
        assert_eq!(parse_ack("ack 1 2 x"), None);
    }

    #[test]
    fn kill_delays_are_inside_the_window() {
        let options = KillOptions {
            crashes: 10,
            seed: 1,
            window: Duration::from_millis(100),
            start_timeout: Duration::from_secs(1),
        };
        for i in 0..100 {
            let d = options.delay(i);
            assert!(d > Duration::ZERO && d <= options.window, "{d:?}");
            assert_eq!(d, options.delay(i));
        }
    }

    #[test]
    fn stderr_tail_is_bounded() {
        let long = vec![b'x'; 3 * STDERR_TAIL_BYTES];
        assert_eq!(tail(long.as_slice()).len(), STDERR_TAIL_BYTES);
        assert_eq!(tail(b"a\nb\n".as_slice()), "a | b");
    }
}

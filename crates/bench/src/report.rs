//! A run's result as users and scripts read it: one JSON object, one CSV row, or a short human
//! table. The JSON keys and the CSV columns are a stable interface (sweeps and plots read them):
//! add keys, never rename or remove one.

use crate::driver::{RunResult, Setup};
use crate::units::format_bytes;
use hdrhistogram::Histogram;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;

/// The checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checker {
    Pass,
    /// The first violation found.
    Fail(String),
    /// The run was asked not to check.
    Skipped,
}

impl Checker {
    pub fn passed(&self) -> bool {
        *self == Checker::Pass
    }
}

impl fmt::Display for Checker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Checker::Pass => f.write_str("pass"),
            Checker::Fail(reason) => write!(f, "fail: {reason}"),
            Checker::Skipped => f.write_str("skipped"),
        }
    }
}

impl Serialize for Checker {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Latency percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    pub p999: f64,
}

impl LatencySummary {
    pub fn from_ns(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| ns as f64 / 1e3;
        LatencySummary {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            max: us(h.max()),
            mean: h.mean() / 1e3,
            p999: us(h.value_at_quantile(0.999)),
        }
    }
}

/// Device statistics per measured commit; `None` when the engine has no region (peers, test
/// engines) or nothing committed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PerTxn {
    pub fences: Option<f64>,
    pub lines_flushed: Option<f64>,
    pub bytes_written: Option<f64>,
    pub delay_ns: Option<f64>,
    pub stores: Option<f64>,
    /// `fdatasync`s charged by the file-system sync model (issue 36): an `io=fs` engine's
    /// persist barriers, which `fences` (the NVM path's) does not count.
    pub fs_syncs: Option<f64>,
    /// Cache lines charged the read latency (issue 36): misses of Pelley's page cache or of
    /// N-Store's CPU cache (`config.cpu_cache_bytes`), whichever model the run had.
    pub lines_read_charged: Option<f64>,
    /// Time the CPU-cache read model spent simulating, and the part no charged stall absorbed
    /// (`pmem::Stats::cpu_cache_unabsorbed_ns`): the instrument's own cost in the run.
    pub cpu_cache_model_ns: Option<f64>,
    pub cpu_cache_unabsorbed_ns: Option<f64>,
}

impl PerTxn {
    pub fn new(device: Option<&pmem::Stats>, committed: u64) -> PerTxn {
        let Some(d) = device.filter(|_| committed > 0) else {
            return PerTxn::default();
        };
        let per = |v: u64| Some(v as f64 / committed as f64);
        PerTxn {
            fences: per(d.fences),
            lines_flushed: per(d.lines_flushed),
            bytes_written: per(d.bytes_written),
            delay_ns: per(d.delay_ns),
            stores: per(d.stores),
            fs_syncs: per(d.fs_syncs_charged),
            lines_read_charged: per(d.lines_read_charged),
            cpu_cache_model_ns: per(d.cpu_cache_model_ns),
            cpu_cache_unabsorbed_ns: per(d.cpu_cache_unabsorbed_ns),
        }
    }
}

/// One run, as written to `--json` / `--csv`. Field order is the JSON key order.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub engine: String,
    pub workload: String,
    pub threads: usize,
    pub committed: u64,
    pub aborted: u64,
    pub tps: f64,
    /// Throughput with the CPU-cache read model's unabsorbed time (its own cost, not the stall
    /// it models: `per_txn.cpu_cache_unabsorbed_ns`) taken out of each worker's measured time;
    /// equal to `tps` when the model is off or absorbed all of it. `null` without device stats.
    pub tps_net: Option<f64>,
    pub latency_us: LatencySummary,
    pub per_txn: PerTxn,
    pub checker: Checker,
    /// Time the engine spent recovering when the run opened an existing region; `null` for a
    /// freshly formatted one.
    pub recovery_ms: Option<f64>,
    pub seed: u64,
    pub measured_s: f64,
    pub setup: Setup,
    pub load_ms: f64,
    pub check_ms: f64,
    /// Measured commits per transaction kind.
    pub kinds: BTreeMap<String, u64>,
    /// Measured commits per worker (load balance).
    pub per_worker: Vec<u64>,
    /// Device statistics over the measured period.
    pub device: Option<pmem::Stats>,
    /// Engine-specific activity over the measured period (`Engine::activity`: log forces,
    /// pages flushed, batches, ...), and the same per measured commit.
    pub engine_activity: BTreeMap<String, u64>,
    pub engine_activity_per_txn: BTreeMap<String, f64>,
    /// Bytes of persistent storage in use after the run (`Engine::footprint_bytes`); `null`
    /// if the engine cannot say.
    pub footprint_bytes: Option<u64>,
    /// Cache lines per page latch by page class (`index`, `heap`, `other`, `all`), from the
    /// engine's read-model activity (Pelley Table 4); only when the read model is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines_per_latch: Option<BTreeMap<String, f64>>,
    /// Line write-backs over the measured period (`--wear`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wear: Option<crate::wear::WearSummary>,
    pub pending_high_water: usize,
    pub pending_full_waits: u64,
    pub stopped_early: bool,
    /// Why the region filled up, if it did (the run stopped early; results so far stand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region_full: Option<String>,
    /// Every option of the run, as the caller describes it.
    pub config: serde_json::Value,
}

/// The fixed leading CSV columns; `config.<key>` columns follow, in key order.
pub const CSV_COLUMNS: [&str; 22] = [
    "engine",
    "workload",
    "threads",
    "committed",
    "aborted",
    "tps",
    "latency_us_p50",
    "latency_us_p95",
    "latency_us_p99",
    "latency_us_max",
    "per_txn_fences",
    "per_txn_lines_flushed",
    "per_txn_bytes_written",
    "per_txn_delay_ns",
    "checker",
    "recovery_ms",
    "seed",
    "measured_s",
    "load_ms",
    "latency_us_p999",
    "latency_us_mean",
    "commits_by_kind",
];

/// Pelley Table 4's "lines/latch" (average over the three workloads): index, heap, other, all.
pub const PAPER_LINES_PER_LATCH: [(&str, f64); 4] =
    [("index", 11.48), ("heap", 4.85), ("other", 4.77), ("all", 10.48)];

/// Lines per latch per page class from `<class>_latches` / `<class>_lines` activity counters.
fn lines_per_latch(activity: &BTreeMap<String, u64>) -> Option<BTreeMap<String, f64>> {
    let get = |k: String| activity.get(&k).copied();
    let mut out = BTreeMap::new();
    let (mut latches, mut lines) = (0u64, 0u64);
    for class in ["index", "heap", "other"] {
        let (Some(a), Some(l)) = (get(format!("{class}_latches")), get(format!("{class}_lines")))
        else {
            continue;
        };
        (latches, lines) = (latches + a, lines + l);
        if a > 0 {
            out.insert(class.to_string(), l as f64 / a as f64);
        }
    }
    if latches == 0 {
        return None;
    }
    out.insert("all".to_string(), lines as f64 / latches as f64);
    Some(out)
}

/// [`Report::tps_net`]: the workers' measured time less the model's unabsorbed time (spread
/// over the workers), never below a tenth of it.
fn tps_net(result: &RunResult) -> Option<f64> {
    let d = result.device.as_ref()?;
    let measured = result.measured.as_secs_f64();
    let threads = result.options.threads.max(1) as f64;
    let unabsorbed = d.cpu_cache_unabsorbed_ns as f64 * 1e-9 / threads;
    if measured <= 0.0 || result.committed == 0 {
        return Some(result.tps);
    }
    let net = (measured - unabsorbed).max(measured / 10.0);
    Some(result.tps * measured / net)
}

impl Report {
    pub fn new(result: &RunResult, recovery_ms: Option<f64>, config: serde_json::Value) -> Report {
        Report {
            engine: result.engine.clone(),
            workload: result.workload.clone(),
            threads: result.options.threads,
            committed: result.committed,
            aborted: result.aborted,
            tps: result.tps,
            tps_net: tps_net(result),
            latency_us: LatencySummary::from_ns(&result.latency_ns),
            per_txn: PerTxn::new(result.device.as_ref(), result.committed),
            checker: result.checker.clone(),
            recovery_ms,
            seed: result.options.seed,
            measured_s: result.measured.as_secs_f64(),
            setup: result.options.setup,
            load_ms: result.load_time.as_secs_f64() * 1e3,
            check_ms: result.check_time.as_secs_f64() * 1e3,
            kinds: result.kinds.clone(),
            per_worker: result.per_worker.clone(),
            device: result.device,
            engine_activity: result.activity.clone(),
            engine_activity_per_txn: result
                .activity
                .iter()
                .filter(|(k, _)| result.committed > 0 && !crate::driver::is_gauge(k.as_str()))
                .map(|(k, v)| (k.clone(), *v as f64 / result.committed as f64))
                .collect(),
            footprint_bytes: result.footprint_bytes,
            lines_per_latch: lines_per_latch(&result.activity),
            wear: result.wear.clone(),
            pending_high_water: result.pending_high_water,
            pending_full_waits: result.pending_full_waits,
            stopped_early: result.stopped_early,
            region_full: result.region_full.clone(),
            config,
        }
    }

    /// One line of JSON.
    pub fn to_json(&self) -> String {
        // A struct of plain fields and a `Value` always serialises.
        serde_json::to_string(self).expect("report serialises")
    }

    fn config_entries(&self) -> Vec<(String, String)> {
        let Some(map) = self.config.as_object() else {
            return Vec::new();
        };
        let mut entries: Vec<(String, String)> = map
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                (format!("config.{k}"), text)
            })
            .collect();
        entries.sort();
        entries
    }

    pub fn csv_header(&self) -> String {
        let mut cols: Vec<String> = CSV_COLUMNS.iter().map(|c| c.to_string()).collect();
        cols.extend(self.config_entries().into_iter().map(|(k, _)| k));
        cols.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(",")
    }

    pub fn csv_row(&self) -> String {
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
        let l = &self.latency_us;
        let mut fields = vec![
            self.engine.clone(),
            self.workload.clone(),
            self.threads.to_string(),
            self.committed.to_string(),
            self.aborted.to_string(),
            format!("{:.1}", self.tps),
            format!("{:.3}", l.p50),
            format!("{:.3}", l.p95),
            format!("{:.3}", l.p99),
            format!("{:.3}", l.max),
            opt(self.per_txn.fences),
            opt(self.per_txn.lines_flushed),
            opt(self.per_txn.bytes_written),
            opt(self.per_txn.delay_ns),
            self.checker.to_string(),
            opt(self.recovery_ms),
            self.seed.to_string(),
            format!("{:.3}", self.measured_s),
            format!("{:.1}", self.load_ms),
            format!("{:.3}", l.p999),
            format!("{:.3}", l.mean),
            // `kind=commits` pairs, `;`-separated (TPC-C and TATP mixes have several kinds).
            self.kinds.iter().map(|(k, n)| format!("{k}={n}")).collect::<Vec<_>>().join(";"),
        ];
        fields.extend(self.config_entries().into_iter().map(|(_, v)| v));
        fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",")
    }

    /// A short table for people.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let mut line = |label: &str, value: String| {
            out.push_str(&format!("  {label:<16}{value}\n"));
        };
        line("engine", self.engine.clone());
        line("workload", self.workload.clone());
        line("threads", self.threads.to_string());
        line("measured", format!("{:.2} s", self.measured_s));
        line("committed", format!("{}  ({})", self.committed, format_rate(self.tps)));
        if self.threads > 1 {
            line("per thread", format_rate(self.tps / self.threads as f64));
        }
        line("aborted", self.aborted.to_string());
        let l = &self.latency_us;
        line(
            "latency (us)",
            format!("p50 {:.2}  p95 {:.2}  p99 {:.2}  max {:.2}", l.p50, l.p95, l.p99, l.max),
        );
        if let (Some(f), Some(lines), Some(bytes), Some(delay)) = (
            self.per_txn.fences,
            self.per_txn.lines_flushed,
            self.per_txn.bytes_written,
            self.per_txn.delay_ns,
        ) {
            line(
                "per txn",
                format!(
                    "fences {f:.2}  lines flushed {lines:.2}  written {}  delay {delay:.0} ns",
                    format_bytes(bytes.round() as u64)
                ),
            );
        }
        if let Some(lpl) = &self.lines_per_latch {
            let ours: Vec<String> = PAPER_LINES_PER_LATCH
                .iter()
                .filter_map(|(c, _)| lpl.get(*c).map(|v| format!("{c} {v:.2}")))
                .collect();
            let paper: Vec<String> =
                PAPER_LINES_PER_LATCH.iter().map(|(c, v)| format!("{c} {v}")).collect();
            line(
                "lines/latch",
                format!("{}  (Pelley Table 4: {})", ours.join("  "), paper.join("  ")),
            );
        }
        if let Some(d) = self.device.filter(|d| d.reservations > 0) {
            line(
                "reservations",
                format!(
                    "{:.2} per txn, {:.2} lines each (bandwidth model; thesis §5.1: >= 4)",
                    d.reservations as f64 / self.committed.max(1) as f64,
                    d.lines_flushed as f64 / d.reservations as f64
                ),
            );
        }
        if !self.engine_activity_per_txn.is_empty() {
            let items: Vec<String> = self
                .engine_activity_per_txn
                .iter()
                .map(|(k, v)| format!("{k} {}", short_number(*v)))
                .collect();
            for (i, chunk) in items.chunks(3).enumerate() {
                line(if i == 0 { "engine per txn" } else { "" }, chunk.join("  "));
            }
        }
        if let Some(bytes) = self.footprint_bytes {
            line("footprint", format_bytes(bytes));
        }
        if self.kinds.len() > 1 {
            let total = self.committed.max(1) as f64;
            let kinds: Vec<String> = self
                .kinds
                .iter()
                .map(|(k, n)| format!("{k} {:.1}%", *n as f64 * 100.0 / total))
                .collect();
            // Several kinds a line, so TPC-C's and TATP's mixes stay within a terminal.
            for (i, chunk) in kinds.chunks(3).enumerate() {
                line(if i == 0 { "mix" } else { "" }, chunk.join("  "));
            }
        }
        if let Some(w) = &self.wear {
            line(
                "wear",
                format!(
                    "max {} / mean {:.2} writes per line = {:.1}x  ({} lines)",
                    w.max_line_writes,
                    w.mean_line_writes,
                    w.ratio(),
                    w.lines_written
                ),
            );
            for t in &w.top {
                let what = t.what.as_deref().unwrap_or("?");
                line("", format!("{:>9} at {:#x}: {what}", t.writes, t.offset));
            }
            let unit = w.granularity;
            let hot = |t: &crate::wear::WearLine| {
                format!("{} at {:#x} ({})", t.writes, t.offset, t.what.as_deref().unwrap_or("?"))
            };
            if let Some(t) = &w.most_written {
                line("wear max", format!("most-written {unit}, logs included: {}", hot(t)));
            }
            line(
                "fig 5.7",
                match &w.fig57_most_written {
                    Some(t) => format!("most-written {unit} outside circular logs: {}", hot(t)),
                    None => "the engine does not say where its circular logs are".into(),
                },
            );
            line(
                "",
                format!(
                    "{} {unit} writes, {} written back",
                    w.total_writes,
                    format_bytes(w.total_bytes_written)
                ),
            );
        }
        if let Some(ms) = self.recovery_ms {
            line("recovery", format!("{ms:.1} ms"));
        }
        match self.setup {
            Setup::Load => line("load", format!("{:.0} ms", self.load_ms)),
            Setup::Attach => line("load", "attached to the existing database".into()),
        }
        line("checker", self.checker.to_string());
        if let Some(why) = &self.region_full {
            line("STOPPED", format!("early after {:.1} s: region full ({why})", self.measured_s));
        }
        out
    }
}

/// `1234567.0` -> `1.23 M txn/s`.
pub fn format_rate(tps: f64) -> String {
    if tps >= 1e6 {
        format!("{:.2} M txn/s", tps / 1e6)
    } else if tps >= 1e3 {
        format!("{:.1} k txn/s", tps / 1e3)
    } else {
        format!("{tps:.1} txn/s")
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A per-transaction figure with about three significant digits.
fn short_number(v: f64) -> String {
    if v == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_text() {
        assert_eq!(Checker::Pass.to_string(), "pass");
        assert_eq!(Checker::Fail("x".into()).to_string(), "fail: x");
        assert_eq!(serde_json::to_string(&Checker::Pass).unwrap(), "\"pass\"");
    }

    #[test]
    fn csv_quotes() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn per_txn_needs_a_device_and_commits() {
        assert_eq!(PerTxn::new(None, 10), PerTxn::default());
        let d = pmem::Stats { fences: 30, ..Default::default() };
        assert_eq!(PerTxn::new(Some(&d), 0), PerTxn::default());
        assert_eq!(PerTxn::new(Some(&d), 10).fences, Some(3.0));
    }
}

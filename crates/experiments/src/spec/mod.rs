//! Experiment specs: one TOML file per figure or table of the papers (`experiments/*.toml`).
//!
//! A spec names the bench flags every run shares (`[base]`), the parameters to vary (`[grid]`,
//! expanded as a cartesian product), how many repetitions, what a `--quick` run changes
//! (`[quick]`), what to plot (`[[plot]]`) and what the paper claims (`[[claim]]`), with the
//! claim's source. `docs/experiments.md` describes every key; this module parses and validates
//! them, so that a bad spec is one line naming the file and the key before anything runs.
//! The schema is here, the checks in `validate.rs`.

use crate::units::{self, BareTime};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use validate::{toml_error, Validator};

mod validate;

/// The `nvmdb bench` flags a spec may set, with `_` for `-` (`persist_latency` is
/// `--persist-latency`). A flag the bench does not have yet can be listed in the spec's
/// `new_flags`; the sweep then records such runs as not yet runnable.
pub const BENCH_FLAGS: &[&str] = &[
    "engine",
    "workload",
    "mix",
    "txn",
    "threads",
    "warmup",
    "duration",
    "txns",
    "scale",
    "records",
    "distribution",
    "skew",
    "theta",
    "workload_opt",
    "seed",
    "medium",
    "path",
    "size",
    "sync",
    "persist_latency",
    "write_latency",
    "write_bandwidth",
    "read_latency",
    "fs_sync_latency",
    "fs_write_bandwidth",
    "cache_pages",
    "cpu_cache",
    "flush",
    "eadr",
    "engine_opt",
    "max_pending",
    "target_tps",
    "no_check",
];

/// Flags the sweep sets itself (the output format, region files it manages).
pub const MANAGED_FLAGS: &[&str] = &["json", "csv", "no_header", "list", "acks", "keep"];

/// Most repetitions a spec may ask for.
pub const MAX_REPS: u32 = 1000;
/// Most points one spec may expand to: a typo in a grid should not queue a month of runs.
pub const MAX_POINTS: usize = 100_000;

/// A spec that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("{path}: cannot read the spec: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Toml { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {key}: {reason}")]
    Invalid { path: PathBuf, key: String, reason: String },
    /// A seed's spec (persistency, query optimisation) names its own `[spec] command`: it is
    /// not a grid of bench runs, and `nvmdb report --seed` reads what that command writes.
    #[error("{path}: not an `nvmdb sweep` spec: run it with `{command}`{judged}")]
    OwnCommand { path: PathBuf, command: String, judged: String },
}

/// The value of one bench flag.
#[derive(Clone, Debug, PartialEq)]
pub enum FlagValue {
    /// `--flag VALUE`.
    Text(String),
    /// `--flag` when true, nothing when false.
    Switch(bool),
    /// `--flag A --flag B` (repeatable flags such as `engine_opt`).
    List(Vec<String>),
}

impl fmt::Display for FlagValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagValue::Text(s) => f.write_str(s),
            FlagValue::Switch(b) => write!(f, "{b}"),
            FlagValue::List(items) => f.write_str(&items.join(",")),
        }
    }
}

/// Bench flags by key (`persist_latency`), in key order so that argument lists are stable.
pub type Flags = BTreeMap<String, FlagValue>;

/// One value of a grid axis: its label (what plots and point ids show) and the flags it sets.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisValue {
    pub label: String,
    pub flags: Flags,
}

/// One grid parameter and its values, in the order the spec lists them.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<AxisValue>,
}

/// How one point is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One `nvmdb bench --json` process.
    Run,
    /// Load a region, kill a run on it after `crash_after`, then run again on the crashed
    /// region: the second run reports `recovery_ms` and the throughput (Pelley Fig. 1).
    CrashRecover { crash_after: Duration },
}

/// What `--quick` changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Quick {
    pub reps: Option<u32>,
    /// Overrides of `[base]`; `duration` and `warmup` default to 1s and 0.2s.
    pub base: Flags,
    /// Axes that replace the axis of the same name.
    pub axes: Vec<Axis>,
    pub crash_after: Option<Duration>,
    pub timeout: Option<Duration>,
}

/// A set of conditions on a point's values: every key must take one of the listed values.
/// Values compare as text, or as quantities when both sides are numbers (`0` = `0ns`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct Conditions(pub Vec<(String, Vec<String>)>);

impl TryFrom<toml::Table> for Conditions {
    type Error = String;

    fn try_from(table: toml::Table) -> Result<Self, String> {
        let mut out = Vec::new();
        for (key, value) in table {
            let values = match value {
                toml::Value::Array(items) => items
                    .into_iter()
                    .map(|v| scalar_text(&v).ok_or_else(|| format!("`{key}`: {NOT_SCALAR}")))
                    .collect::<Result<Vec<_>, _>>()?,
                v => vec![scalar_text(&v).ok_or_else(|| format!("`{key}`: {NOT_SCALAR}"))?],
            };
            out.push((normalize_key(&key), values));
        }
        Ok(Conditions(out))
    }
}

const NOT_SCALAR: &str = "a condition is a string, a number, a boolean, or a list of them";

impl Conditions {
    /// Whether the values `lookup` gives satisfy every condition.
    pub fn matches(&self, lookup: &dyn Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(key, allowed)| {
            lookup(key).is_some_and(|v| allowed.iter().any(|a| values_equal(a, &v)))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }

    /// `engine=inplace, persist_latency=0`, for messages.
    pub fn describe(&self) -> String {
        let parts: Vec<String> =
            self.0.iter().map(|(k, v)| format!("{k}={}", v.join("|"))).collect();
        parts.join(", ")
    }
}

/// Equal as text, or as quantities (`0` = `0ns`, `1us` = `1000`).
pub fn values_equal(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (units::parse_quantity(a), units::parse_quantity(b)) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
        _ => false,
    }
}

/// How error bars summarise the repetitions of a point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorBars {
    #[default]
    Minmax,
    Stddev,
    None,
}

/// The reference points a plotted value is divided by: `[plot.normalize]` divides y by their
/// mean y, `[plot.x_per_txn_time]` divides x by their mean time per transaction.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalize {
    /// Which points are the reference (`{ engine = "inplace", persist_latency = "0" }`).
    #[serde(rename = "where")]
    pub reference: Conditions,
    /// Keys whose value the reference must share with the point being normalised; default:
    /// the panel key.
    #[serde(default, rename = "match")]
    pub same: Option<Vec<String>>,
}

/// One figure: y against x, a line per series, a panel per value of `panels`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    #[serde(default)]
    pub title: Option<String>,
    /// A grid axis or flag with numeric values (`persist_latency`), a field of the bench row
    /// (`tps`, `latency_us.p95`), or a product/quotient of fields (`tps * per_txn.bytes_written`).
    pub x: String,
    #[serde(default)]
    pub x_label: Option<String>,
    #[serde(default = "one")]
    pub x_scale: f64,
    #[serde(default)]
    pub log_x: bool,
    pub y: String,
    #[serde(default)]
    pub y_label: Option<String>,
    #[serde(default = "one")]
    pub y_scale: f64,
    #[serde(default)]
    pub log_y: bool,
    /// Start the y axis at zero (default) rather than at the smallest value.
    #[serde(default = "yes")]
    pub y_from_zero: bool,
    #[serde(default)]
    pub series: Option<String>,
    #[serde(default)]
    pub panels: Option<String>,
    /// Only points matching these conditions.
    #[serde(default, rename = "where")]
    pub filter: Conditions,
    #[serde(default)]
    pub normalize: Option<Normalize>,
    /// Divide x, a time axis (`persist_latency`, in nanoseconds), by the time one worker spends
    /// per committed transaction (`config.threads / tps`, [`crate::latency_axis`]) at the
    /// reference points: a latency in units of the reference's transaction, which machines of
    /// different speeds can compare (issue 38). `x_scale` then multiplies the ratio.
    #[serde(default)]
    pub x_per_txn_time: Option<Normalize>,
    #[serde(default)]
    pub error: ErrorBars,
    /// One line drawn on the figure under its subtitle (and listed in the report's notes): what
    /// a reader would otherwise misread at a glance, e.g. a point above its own normalisation.
    #[serde(default)]
    pub note: Option<String>,
}

/// What a claim computes from the measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClaimKind {
    /// `metric(numerator) / metric(denominator)`.
    Ratio,
    /// The x where curve `a` meets curve `b`, by linear interpolation.
    Breakeven,
    /// The smallest x where the metric reaches `fraction` of its value at `reference`.
    Threshold,
    /// The metric itself, times `scale`.
    Value,
}

/// How the groups of `per` combine into one verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Aggregate {
    /// Every group must agree with the paper.
    #[default]
    All,
    Max,
    Min,
    Mean,
}

/// How several matching points combine into one number (each point is first averaged over
/// its repetitions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointAgg {
    #[default]
    Mean,
    Max,
    Min,
}

/// A claim of the paper and how to check it against our measurements.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimSpec {
    pub id: String,
    /// The claim in words (`In-Place Updates up to 1.5x NVRAM Disk-Replacement at 0 µs`).
    pub text: String,
    /// Where the paper says it (`Pelley et al., VLDB 2014, §6.1, Fig. 5`).
    pub source: String,
    pub kind: ClaimKind,
    #[serde(default = "default_metric")]
    pub metric: String,
    /// Only points matching these conditions.
    #[serde(default, rename = "where")]
    pub filter: Conditions,
    /// Compute one value per distinct combination of these keys (`["workload"]`).
    #[serde(default)]
    pub per: Vec<String>,
    #[serde(default)]
    pub aggregate: Aggregate,
    #[serde(default)]
    pub numerator: Option<Conditions>,
    #[serde(default)]
    pub denominator: Option<Conditions>,
    #[serde(default)]
    pub num_points: PointAgg,
    #[serde(default)]
    pub den_points: PointAgg,
    /// The x axis of a break-even or threshold claim.
    #[serde(default)]
    pub x: Option<String>,
    #[serde(default = "one")]
    pub x_scale: f64,
    #[serde(default)]
    pub a: Option<Conditions>,
    #[serde(default)]
    pub b: Option<Conditions>,
    #[serde(default)]
    pub reference: Option<Conditions>,
    #[serde(default)]
    pub fraction: Option<f64>,
    /// How matching points combine for `value` claims and a threshold's reference. A threshold's
    /// curve is the points matching `a` (default: all) that do not match `reference`.
    #[serde(default)]
    pub points: PointAgg,
    #[serde(default = "one")]
    pub scale: f64,
    #[serde(default)]
    pub expected: Option<f64>,
    /// Relative tolerance around `expected` (0.2 = ±20%).
    #[serde(default)]
    pub tolerance: Option<f64>,
    /// Absolute tolerance around `expected`, in the claim's units.
    #[serde(default)]
    pub tolerance_abs: Option<f64>,
    /// Accepted interval; `inf` is allowed as an upper bound.
    #[serde(default)]
    pub range: Option<[f64; 2]>,
    /// Unit shown after numbers (`×`, `µs`, `GB/s`).
    #[serde(default)]
    pub unit: String,
    /// The paper's value in words, when `expected`/`range` do not say it (`up to 1.5×`).
    #[serde(default)]
    pub paper: Option<String>,
    /// Whose bound `expected`/`range` is: the paper's number (default), or ours where the paper
    /// gives none (`"near-instantly"` read as `< 1 s`). An `ours` bound needs `bound_reason`.
    #[serde(default)]
    pub bound: Bound,
    /// Why the bound is ours and what the paper does say; shown beside the paper's value.
    #[serde(default)]
    pub bound_reason: Option<String>,
    /// Whether the claim is one of the paper's (default) or a check of our implementation
    /// (`"check"`: ours against Pelley's protocol, a self-consistency check): checks are
    /// reported in their own section and never counted as reproductions.
    #[serde(default)]
    pub role: Role,
    /// The known cause when our number differs from the paper's (`our transactions are ~10×
    /// shorter than Shore-MT's`): printed beside a "differs" verdict.
    #[serde(default)]
    pub why: Option<String>,
}

/// What a claim is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// A claim of the paper, checked against our measurements.
    #[default]
    Reproduction,
    /// Not a paper claim: a check of our implementation or a comparison of ours with the
    /// paper's protocol.
    Check,
}

/// Who set a claim's accepted interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// The paper states the number the claim checks.
    #[default]
    Paper,
    /// We chose the number: the paper's statement is qualitative or elsewhere.
    Ours,
}

/// Relative tolerance used when a claim gives `expected` and no tolerance.
pub const DEFAULT_TOLERANCE: f64 = 0.25;

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn default_metric() -> String {
    "tps".into()
}

/// Which of a point's successful repetitions its plots and claims use (`[spec] runs`). There
/// is one rule for every spec: the VM runs a configuration at two speeds about 2x apart from
/// one process to the next, independently of the configuration, and a mean of mixed states
/// would let the draw of states decide a comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Runs {
    /// Only the repetition with the highest throughput, all of its metrics: the run least
    /// disturbed. The spread over all repetitions is still shown and judged (a claim whose
    /// repetitions straddle its bound is inconclusive).
    #[default]
    Fastest,
}

impl Runs {
    pub fn parse(s: &str) -> Option<Runs> {
        match s {
            "fastest" => Some(Runs::Fastest),
            _ => None,
        }
    }
}

/// Fewest repetitions a spec with reproduction claims may ask for: with fewer, a straddling
/// interval cannot be seen. `--quick` runs (`quick.reps`) are exempt: they never reproduce.
pub const MIN_REPS: u32 = 3;

/// A parsed, validated spec.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub title: String,
    pub source: String,
    pub description: String,
    pub reps: u32,
    /// Which of a point's repetitions its plots and claims use.
    pub runs: Runs,
    pub mode: Mode,
    pub timeout: Option<Duration>,
    /// What the spec needs that may not exist yet, in words (`engine wal`).
    pub needs: Vec<String>,
    pub new_flags: Vec<String>,
    pub base: Flags,
    pub axes: Vec<Axis>,
    pub quick: Quick,
    pub plots: Vec<PlotSpec>,
    pub claims: Vec<ClaimSpec>,
    pub path: PathBuf,
    /// The file as read, to keep beside the results.
    pub text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    spec: RawMeta,
    #[serde(default)]
    base: toml::Table,
    #[serde(default)]
    grid: toml::Table,
    #[serde(default)]
    quick: RawQuick,
    #[serde(default)]
    plot: Vec<PlotSpec>,
    #[serde(default)]
    claim: Vec<ClaimSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMeta {
    #[serde(default)]
    name: Option<String>,
    title: String,
    source: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    reps: Option<u32>,
    #[serde(default)]
    runs: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    crash_after: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    needs: Vec<String>,
    #[serde(default)]
    new_flags: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuick {
    #[serde(default)]
    reps: Option<u32>,
    #[serde(default)]
    base: toml::Table,
    #[serde(default)]
    grid: toml::Table,
    #[serde(default)]
    crash_after: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
}

/// `persist-latency` and `persist_latency` are the same key.
pub fn normalize_key(key: &str) -> String {
    key.trim().replace('-', "_")
}

/// A TOML scalar as a flag's text (`2` -> `"2"`, `0.5` -> `"0.5"`).
fn scalar_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

impl Spec {
    /// Reads and validates the spec at `path`.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| SpecError::Io { path: path.to_path_buf(), error })?;
        Spec::parse(&text, path)
    }

    /// Parses `text`, naming `path` in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Spec, SpecError> {
        own_command(text, path)?;
        let raw: RawSpec = toml::from_str(text).map_err(|e| toml_error(text, path, &e))?;
        Validator { path }.spec(raw, text)
    }

    /// Every key a condition, a series or a panel may name: the axes and the bench flags.
    pub fn is_known_key(&self, key: &str) -> bool {
        self.axes.iter().any(|a| a.name == key)
            || BENCH_FLAGS.contains(&key)
            || self.new_flags.iter().any(|f| f == key)
    }

    /// The axis called `name`.
    pub fn axis(&self, name: &str) -> Option<&Axis> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// Points of the full grid (before repetitions).
    pub fn point_count(&self) -> usize {
        self.axes.iter().map(|a| a.values.len()).product()
    }
}

/// Refuses a seed's spec ([`SpecError::OwnCommand`]), naming the command that runs it and,
/// where the spec says so (`results`), the file its claims are judged in.
fn own_command(text: &str, path: &Path) -> Result<(), SpecError> {
    let Ok(value) = toml::from_str::<toml::Table>(text) else { return Ok(()) };
    let Some(meta) = value.get("spec").and_then(toml::Value::as_table) else { return Ok(()) };
    let command = match meta.get("command") {
        Some(toml::Value::String(c)) => c.clone(),
        Some(toml::Value::Array(words)) => {
            words.iter().map(|w| w.as_str().unwrap_or("?")).collect::<Vec<_>>().join(" ")
        }
        _ => return Ok(()),
    };
    let results = meta.get("results").or_else(|| value.get("results"));
    let judged = match results.and_then(toml::Value::as_str) {
        Some(file) => format!(" (its claims are judged in {file})"),
        None => String::new(),
    };
    Err(SpecError::OwnCommand { path: path.to_path_buf(), command, judged })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Spec, SpecError> {
        Spec::parse(text, Path::new("experiments/t.toml"))
    }

    const MINIMAL: &str = r#"
        [spec]
        title = "t"
        source = "s"
        [base]
        engine = "inplace"
        eadr = true
        engine_opt = ["a=1"]
        [grid]
        persist_latency = ["0", "1us"]
        variant = [
            { name = "tpcc-no", workload = "tpcc", txn = "new-order" },
            { workload = "tpcb", name = "tpcb" },
        ]
    "#;

    #[test]
    fn parses_flags_and_axes() {
        let spec = parse(MINIMAL).unwrap();
        assert_eq!(spec.name, "t");
        assert_eq!(spec.base["eadr"], FlagValue::Switch(true));
        assert_eq!(spec.base["engine_opt"], FlagValue::List(vec!["a=1".into()]));
        assert_eq!(spec.axes[0].name, "persist_latency");
        assert_eq!(spec.axes[1].values[0].label, "tpcc-no");
        assert_eq!(spec.axes[1].values[0].flags["txn"], FlagValue::Text("new-order".into()));
        assert_eq!(spec.point_count(), 4);
    }

    #[test]
    fn errors_name_file_and_key() {
        let bad = MINIMAL.replace("eadr = true", "persit_latency = 3");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("experiments/t.toml: base.persit_latency: not an"), "{e}");

        let bad = MINIMAL.replace("[base]", "[base]\njson = true");
        assert!(parse(&bad).unwrap_err().to_string().contains("base.json"));

        let bad = MINIMAL.replace("title = \"t\"", "title = \"t\"\ntypo = 1");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("experiments/t.toml:4:") && e.contains("typo"), "{e}");

        let bad = MINIMAL.replace("[\"0\", \"1us\"]", "[]");
        assert!(parse(&bad).unwrap_err().to_string().contains("grid.persist_latency"));
    }

    #[test]
    fn claims_are_checked() {
        let ok = format!(
            "{MINIMAL}\n[[claim]]\nid = \"r\"\ntext = \"t\"\nsource = \"s\"\nkind = \"ratio\"\n\
             numerator = {{ engine = \"inplace\" }}\ndenominator = {{ engine = \"wal\" }}\n\
             expected = 1.5\nper = [\"variant\"]\n"
        );
        let spec = parse(&ok).unwrap();
        assert_eq!(spec.claims[0].kind, ClaimKind::Ratio);
        let missing = ok.replace("expected = 1.5\n", "");
        assert!(parse(&missing).unwrap_err().to_string().contains("expected or range"));
        let unknown = ok.replace("[\"variant\"]", "[\"variantt\"]");
        assert!(parse(&unknown).unwrap_err().to_string().contains("variantt"));
    }

    #[test]
    fn a_bound_of_ours_needs_its_reason() {
        let claim = format!(
            "{MINIMAL}\n[[claim]]\nid = \"v\"\ntext = \"t\"\nsource = \"s\"\nkind = \"value\"\n\
             range = [0.0, 1.0]\n"
        );
        assert_eq!(parse(&claim).unwrap().claims[0].bound, Bound::Paper);
        let ours = format!("{claim}bound = \"ours\"\nbound_reason = \"paper: near-instantly\"\n");
        let spec = parse(&ours).unwrap();
        assert_eq!(spec.claims[0].bound, Bound::Ours);
        assert_eq!(spec.claims[0].bound_reason.as_deref(), Some("paper: near-instantly"));
        let unexplained = format!("{claim}bound = \"ours\"\n");
        let e = parse(&unexplained).unwrap_err().to_string();
        assert!(e.contains("claim `v`.bound_reason"), "{e}");
        let stray = format!("{claim}bound_reason = \"x\"\n");
        assert!(parse(&stray).unwrap_err().to_string().contains("only a bound = \"ours\""));
        let typo = format!("{claim}bound = \"mine\"\n");
        assert!(parse(&typo).is_err());
    }

    #[test]
    fn x_per_txn_time_needs_a_time_axis_and_known_keys() {
        let plot = |x: &str, reference: &str| {
            format!(
                "{MINIMAL}\n[[plot]]\nx = \"{x}\"\ny = \"tps\"\npanels = \"variant\"\n\
                 x_per_txn_time = {{ where = {{ {reference} }} }}\n"
            )
        };
        let spec = parse(&plot("persist_latency", "persist_latency = \"0\"")).unwrap();
        let n = spec.plots[0].x_per_txn_time.as_ref().unwrap();
        assert_eq!(n.reference.keys().collect::<Vec<_>>(), ["persist_latency"]);
        let e = parse(&plot("variant", "persist_latency = \"0\"")).unwrap_err().to_string();
        assert!(e.contains("plot[0].x_per_txn_time: x (`variant`) must be a grid axis of times"));
        let e = parse(&plot("persist_latency", "enginee = \"wal\"")).unwrap_err().to_string();
        assert!(e.contains("plot[0].x_per_txn_time.where") && e.contains("enginee"), "{e}");
    }

    #[test]
    fn conditions_compare_quantities() {
        let c = Conditions(vec![("persist_latency".into(), vec!["0".into(), "2us".into()])]);
        let at = |v: &'static str| move |_: &str| Some(v.to_string());
        assert!(c.matches(&at("0ns")));
        assert!(c.matches(&at("2000")));
        assert!(!c.matches(&at("1us")));
    }
}

//! Experiment specs for Table 8.1 and Figs. 8.1–8.3 of the thesis (§8.2; files in
//! `experiments/persistency/*.toml`): a base setting, one swept axis (persist latency, atomic
//! persist size or tracking granularity) and the thesis's claims. They have their own schema
//! (the queues are not `nvmdb bench` runs, so `nvmdb sweep` does not run them):
//! `nvmdb persistency sweep SPEC` does, and judges each claim beside ours.
//!
//! Verdicts follow issue 38's rules: a claim's bound says whose it is (`bound = "paper"`: the
//! thesis's own number or threshold, quoted with its place; `"ours"`: a tolerance we chose,
//! reported apart); ours is the range over `repeat` native-rate runs (the traces are
//! deterministic); all of it inside the bound is *reproduced*, all outside *differs* (and the
//! claim must state its `cause`, or the sweep fails), a range that straddles the bound is
//! *inconclusive* (with the spec's cause, else the measured range). The rule is the one the
//! report and the appendices use, `experiments::verdict::judge`.
//!
//! Two readings of the path per insert (issue 36): the *steady-state* reading (the path's
//! growth over the second half of a long trace, [`crate::rate::Traced::path_per_insert`]) and
//! the *finite-trace* reading (the whole path of a trace of `finite_trace_inserts` inserts ÷
//! those inserts, the thesis's "average critical path per insert"). Under §8.1's coalescing
//! rule strand persistency's queue path stops growing, so its steady-state rate is unbounded
//! and any claim that it is "above" something holds by construction; its finite-trace rate is
//! a measured number that can fall below a bound. A claim names its `reading`; where the
//! thesis does not give its trace length, the lengths are ours and the spec says so. Ours on
//! the finite-trace reading ranges over the native-rate runs *and* the trace lengths, so a
//! verdict that the chosen length decides comes out inconclusive.

use crate::analyse::{analyse, Config, Model};
use crate::error::invalid;
use crate::queue::Design;
use crate::rate::{native_rate, traced_run, Schedule, Traced, MAX_TRACE_INSERTS};
use crate::report::{human_ns, human_rate, model_result};
use crate::Result;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub spec: Meta,
    pub base: Base,
    pub sweep: Sweep,
    #[serde(default)]
    pub quick: Option<Quick>,
    #[serde(default)]
    pub claim: Vec<Claim>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    pub title: String,
    pub source: String,
    #[serde(default)]
    pub description: String,
    /// The command that runs the spec (documentation).
    pub command: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Base {
    pub queues: Vec<String>,
    pub threads: Vec<u64>,
    pub models: Vec<String>,
    pub persist_latency: String,
    pub atomic_persist: u64,
    pub tracking: u64,
    pub trace_inserts: u64,
    pub rate_inserts: u64,
    /// Native-rate runs (the only noisy input): ours is their range.
    #[serde(default = "one")]
    pub repeat: u64,
    /// Trace lengths of the finite-trace reading (inserts; see the module doc). Empty: the
    /// spec has no finite-trace claim.
    #[serde(default)]
    pub finite_trace_inserts: Vec<u64>,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// `persist_latency`, `atomic_persist` or `tracking`.
    pub axis: String,
    pub values: Vec<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quick {
    pub trace_inserts: u64,
    pub rate_inserts: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub id: String,
    pub text: String,
    pub queue: String,
    pub threads: u64,
    pub model: String,
    /// `break_even_latency_ns` (Fig. 8.1), `normalized` (Table 8.1) or `path_per_insert`, at
    /// axis value `at` (the first point when absent).
    pub metric: String,
    #[serde(default)]
    pub at: Option<toml::Value>,
    /// Divide by the same metric of another point: model `over_model` (default: this one) at
    /// axis value `over_at` (default: `at`). Figs. 8.2–8.3 state shapes ("strict matches
    /// epoch at 512 B"), judged as such ratios.
    #[serde(default)]
    pub over_model: Option<String>,
    #[serde(default)]
    pub over_at: Option<toml::Value>,
    /// The thesis's number, where its text gives one (Fig. 8.2 and 8.3 give only shapes).
    #[serde(default)]
    pub expected: Option<f64>,
    /// The thesis's words and where they are.
    pub paper: String,
    /// The bound ours must lie in (either end may be open).
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    /// Whose bound it is: `paper` or `ours`.
    pub bound: String,
    /// Why ours differs, where it does (a sweep whose claim differs without one fails).
    #[serde(default)]
    pub cause: Option<String>,
    /// Which path per insert the metric is computed from (default: the steady state).
    #[serde(default)]
    pub reading: Reading,
}

/// Which path per insert a claim's metric uses (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reading {
    /// The path's growth per insert over the second half of the long trace.
    #[default]
    SteadyState,
    /// The whole path of a trace of `finite_trace_inserts` inserts ÷ those inserts.
    FiniteTrace,
}

impl Reading {
    pub fn name(self) -> &'static str {
        match self {
            Reading::SteadyState => "steady-state",
            Reading::FiniteTrace => "finite-trace",
        }
    }
}

/// The finite-trace reading of one point at one trace length.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FinitePath {
    pub trace_inserts: u64,
    /// The whole trace's critical path, in persist latencies.
    pub critical_path: u64,
    pub path_per_insert: f64,
}

/// The swept parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Axis {
    PersistLatency,
    AtomicPersist,
    Tracking,
}

/// One point of a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub queue: Design,
    pub threads: u64,
    pub model: Model,
    pub axis: Axis,
    /// The axis value: nanoseconds or bytes.
    pub value: f64,
    pub persist_latency_ns: f64,
    pub atomic_persist_bytes: u64,
    pub tracking_bytes: u64,
    /// The median native rate over the repetitions, and their range.
    pub native_per_s: f64,
    pub native_min_per_s: f64,
    pub native_max_per_s: f64,
    /// The steady-state reading; the rates below are derived from it.
    pub path_per_insert: f64,
    pub persist_bound_per_s: f64,
    pub achievable_per_s: f64,
    pub normalized: f64,
    pub break_even_latency_ns: f64,
    /// The finite-trace reading, one per `finite_trace_inserts` length.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub finite: Vec<FinitePath>,
}

/// A claim's verdict (issue 38's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Reproduced,
    Differs,
    Inconclusive,
    /// The sweep has no point the claim names.
    NotMeasured,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Differs => "differs",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotMeasured => "not measured",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub id: String,
    pub queue: Design,
    pub threads: u64,
    pub model: Model,
    pub metric: String,
    pub text: String,
    pub paper: String,
    pub expected: Option<f64>,
    /// Ours: the value at the median native rate, and the range over the repetitions.
    pub ours: Option<f64>,
    pub ours_lo: Option<f64>,
    pub ours_hi: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// `paper` or `ours`.
    pub bound: String,
    pub reading: Reading,
    /// The trace lengths a finite-trace claim's range covers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trace_inserts: Vec<u64>,
    /// What ours ranges over, in words (the report prints it beside the range).
    pub ours_range: String,
    pub verdict: Verdict,
    pub cause: Option<String>,
}

/// Judges `[lo, hi]` against `[min, max]`: inside, outside, or straddling, by the rule the
/// report and the appendices use ([`experiments::verdict::judge`]).
pub fn judge(lo: f64, hi: f64, min: Option<f64>, max: Option<f64>) -> Verdict {
    use experiments::verdict::{self, Verdict as V};
    match verdict::judge(lo, hi, min, max) {
        V::Reproduced => Verdict::Reproduced,
        V::Differs => Verdict::Differs,
        V::Inconclusive | V::NotJudged => Verdict::Inconclusive,
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct SweepResult {
    pub name: String,
    pub title: String,
    pub source: String,
    pub quick: bool,
    pub points: Vec<Point>,
    pub claims: Vec<ClaimResult>,
}

/// Parses `500ns`, `10us`, `10µs`, `2ms`, `1s` (a bare number is nanoseconds).
pub fn parse_latency_ns(s: &str) -> Result<f64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(invalid(
                "persist latency",
                format!("`{s}` (expected e.g. 500ns, 10us, 1ms)"),
            ))
        }
    };
    let v: f64 = num.parse().map_err(|_| {
        invalid("persist latency", format!("`{s}` (expected e.g. 500ns, 10us, 1ms)"))
    })?;
    let ns = v * scale;
    if !(ns > 0.0 && ns <= 1e12) {
        return Err(invalid(
            "persist latency",
            format!("`{s}` (expected more than 0 and at most 1000 s)"),
        ));
    }
    Ok(ns)
}

fn axis_value(axis: Axis, v: &toml::Value) -> Result<f64> {
    match (axis, v) {
        (Axis::PersistLatency, toml::Value::String(s)) => parse_latency_ns(s),
        (Axis::AtomicPersist | Axis::Tracking, toml::Value::Integer(i)) if *i > 0 => Ok(*i as f64),
        _ => Err(invalid("sweep value", format!("{v} does not fit axis {axis:?}"))),
    }
}

impl Spec {
    pub fn load(path: &Path) -> Result<Spec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid("spec", format!("{}: {e}", path.display())))?;
        let spec: Spec = toml::from_str(&text)
            .map_err(|e| invalid("spec", format!("{}: {}", path.display(), e.message())))?;
        spec.validate().map_err(|e| invalid("spec", format!("{}: {e}", path.display())))?;
        Ok(spec)
    }

    pub fn axis(&self) -> Result<Axis> {
        match self.sweep.axis.as_str() {
            "persist_latency" => Ok(Axis::PersistLatency),
            "atomic_persist" => Ok(Axis::AtomicPersist),
            "tracking" => Ok(Axis::Tracking),
            a => Err(invalid(
                "sweep axis",
                format!("`{a}` (persist_latency, atomic_persist, tracking)"),
            )),
        }
    }

    fn designs(&self) -> Result<Vec<Design>> {
        self.base
            .queues
            .iter()
            .map(|q| {
                Design::parse(q).ok_or_else(|| invalid("queue", format!("`{q}` (cwl, 2lc, qh)")))
            })
            .collect()
    }

    fn models(&self) -> Result<Vec<Model>> {
        self.base
            .models
            .iter()
            .map(|m| {
                Model::parse(m)
                    .ok_or_else(|| invalid("model", format!("`{m}` (strict, epoch, strand)")))
            })
            .collect()
    }

    /// Checks every name and value before anything runs.
    pub fn validate(&self) -> Result<()> {
        let axis = self.axis()?;
        self.designs()?;
        self.models()?;
        parse_latency_ns(&self.base.persist_latency)?;
        if self.sweep.values.is_empty() || self.base.threads.is_empty() {
            return Err(invalid("sweep", "no values or no thread counts"));
        }
        for v in &self.sweep.values {
            axis_value(axis, v)?;
        }
        if self.base.repeat == 0 || self.base.repeat > 20 {
            return Err(invalid("repeat", format!("{} (expected 1 to 20)", self.base.repeat)));
        }
        for &n in &self.base.finite_trace_inserts {
            if n == 0 || n > MAX_TRACE_INSERTS {
                return Err(invalid(
                    "finite_trace_inserts",
                    format!("{n} (expected 1 to {MAX_TRACE_INSERTS})"),
                ));
            }
        }
        for c in &self.claim {
            Design::parse(&c.queue).ok_or_else(|| invalid("claim queue", c.queue.clone()))?;
            Model::parse(&c.model).ok_or_else(|| invalid("claim model", c.model.clone()))?;
            if let Some(m) = &c.over_model {
                Model::parse(m).ok_or_else(|| invalid("claim over_model", m.clone()))?;
            }
            for v in c.at.iter().chain(&c.over_at) {
                axis_value(axis, v)?;
            }
            if !matches!(
                c.metric.as_str(),
                "break_even_latency_ns" | "path_per_insert" | "normalized"
            ) {
                return Err(invalid("claim metric", c.metric.clone()));
            }
            if !matches!(c.bound.as_str(), "paper" | "ours") {
                return Err(invalid(
                    "claim bound",
                    format!("{}: `{}` (paper or ours)", c.id, c.bound),
                ));
            }
            if c.min.is_none() && c.max.is_none() {
                return Err(invalid("claim", format!("{}: no `min` or `max` to judge by", c.id)));
            }
            if c.reading == Reading::FiniteTrace {
                if self.base.finite_trace_inserts.is_empty() {
                    return Err(invalid(
                        "claim",
                        format!("{}: a finite-trace claim needs `finite_trace_inserts`", c.id),
                    ));
                }
                if c.over_model.is_some() || c.over_at.is_some() {
                    return Err(invalid(
                        "claim",
                        format!("{}: a finite-trace claim cannot be a ratio of two points", c.id),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Runs the sweep (`quick`: the spec's shorter traces and rate runs).
    pub fn run(&self, quick: bool, mut progress: impl FnMut(&str)) -> Result<SweepResult> {
        let axis = self.axis()?;
        let models = self.models()?;
        let base_latency = parse_latency_ns(&self.base.persist_latency)?;
        let (trace_inserts, rate_inserts) = match (&self.quick, quick) {
            (Some(q), true) => (q.trace_inserts, q.rate_inserts),
            _ => (self.base.trace_inserts, self.base.rate_inserts),
        };
        let values: Vec<f64> =
            self.sweep.values.iter().map(|v| axis_value(axis, v)).collect::<Result<_>>()?;
        let mut points = Vec::new();
        for design in self.designs()? {
            for &threads in &self.base.threads {
                progress(&format!("{} on {threads} thread(s)", design.name()));
                let mut natives = Vec::new();
                for _ in 0..self.base.repeat {
                    natives.push(native_rate(design, threads, rate_inserts)?.inserts_per_s);
                }
                natives.sort_by(f64::total_cmp);
                let native = natives[natives.len() / 2];
                let (native_min, native_max) = (natives[0], natives[natives.len() - 1]);
                let traced = traced_run(design, threads, trace_inserts, Schedule::RoundRobin)?;
                let trace = &traced.events;
                // Short traces of their own (not a prefix of the long one), as a run of that
                // length would record.
                let finite_traces: Vec<Traced> = self
                    .base
                    .finite_trace_inserts
                    .iter()
                    .map(|&n| traced_run(design, threads, n, Schedule::RoundRobin))
                    .collect::<Result<_>>()?;
                for &model in &models {
                    for &value in &values {
                        let (latency, atomic, tracking) = match axis {
                            Axis::PersistLatency => {
                                (value, self.base.atomic_persist, self.base.tracking)
                            }
                            Axis::AtomicPersist => (base_latency, value as u64, self.base.tracking),
                            Axis::Tracking => {
                                (base_latency, self.base.atomic_persist, value as u64)
                            }
                        };
                        let config = Config {
                            atomic_persist_bytes: atomic,
                            tracking_bytes: tracking,
                            ..Config::new(model)
                        };
                        // The analysis does not depend on latency: one per model on that axis.
                        let a = analyse(trace, traced.config(config))?;
                        let path = traced.path_per_insert(&a);
                        let m = model_result(model, &a, path, native, latency);
                        let finite = finite_paths(&finite_traces, config)?;
                        points.push(Point {
                            queue: design,
                            threads,
                            model,
                            axis,
                            value,
                            persist_latency_ns: latency,
                            atomic_persist_bytes: atomic,
                            tracking_bytes: tracking,
                            native_per_s: native,
                            native_min_per_s: native_min,
                            native_max_per_s: native_max,
                            path_per_insert: m.path_per_insert,
                            persist_bound_per_s: m.persist_bound_per_s,
                            achievable_per_s: m.achievable_per_s,
                            normalized: m.normalized,
                            break_even_latency_ns: m.break_even_latency_ns,
                            finite,
                        });
                        if axis == Axis::PersistLatency {
                            // Same analysis for every latency: fill the rest from this one.
                            for &other in values.iter().filter(|v| **v != value) {
                                let m2 = model_result(model, &a, path, native, other);
                                let mut p = points.last().expect("pushed above").clone();
                                p.value = other;
                                p.persist_latency_ns = other;
                                p.persist_bound_per_s = m2.persist_bound_per_s;
                                p.achievable_per_s = m2.achievable_per_s;
                                p.normalized = m2.normalized;
                                points.push(p);
                            }
                            break;
                        }
                    }
                }
            }
        }
        let rank = |m: Model| Model::ALL.iter().position(|x| *x == m).unwrap_or(0);
        points.sort_by(|a, b| {
            (a.queue.name(), a.threads, rank(a.model), a.value)
                .partial_cmp(&(b.queue.name(), b.threads, rank(b.model), b.value))
                .expect("finite values")
        });
        let claims = self.claims(axis, &points)?;
        Ok(SweepResult {
            name: self.spec.name.clone(),
            title: self.spec.title.clone(),
            source: self.spec.source.clone(),
            quick,
            points,
            claims,
        })
    }

    fn claims(&self, axis: Axis, points: &[Point]) -> Result<Vec<ClaimResult>> {
        let mut out = Vec::new();
        for c in &self.claim {
            let design =
                Design::parse(&c.queue).ok_or_else(|| invalid("claim queue", c.queue.clone()))?;
            let model =
                Model::parse(&c.model).ok_or_else(|| invalid("claim model", c.model.clone()))?;
            let at = c.at.as_ref().map(|v| axis_value(axis, v)).transpose()?;
            let find = |model: Model, at: Option<f64>| {
                points.iter().find(|p| {
                    p.queue == design
                        && p.threads == c.threads
                        && p.model == model
                        && at.is_none_or(|v| p.value == v)
                })
            };
            let point = find(model, at);
            let over = match (&c.over_model, &c.over_at) {
                (None, None) => None,
                (m, v) => {
                    let m = match m {
                        Some(m) => {
                            Model::parse(m).ok_or_else(|| invalid("claim over_model", m.clone()))?
                        }
                        None => model,
                    };
                    let v = v.as_ref().map(|v| axis_value(axis, v)).transpose()?.or(at);
                    Some(find(m, v))
                }
            };
            let values = match (point, over) {
                (Some(p), None) => claim_values(&c.metric, c.reading, p),
                (Some(p), Some(Some(q))) => {
                    let a = claim_values(&c.metric, c.reading, p);
                    let b = claim_values(&c.metric, c.reading, q);
                    // A ratio of two points of one run: the native rate cancels (or is absent).
                    a.zip(b).map(|(a, b)| [a[0] / b[0], a[1] / b[1], a[2] / b[2]])
                }
                _ => None,
            };
            let verdict = match values {
                Some([_, lo, hi]) => {
                    let (lo, hi) = (lo.min(hi), lo.max(hi));
                    judge(lo, hi, c.min, c.max)
                }
                None => Verdict::NotMeasured,
            };
            if verdict == Verdict::Differs && c.cause.is_none() {
                return Err(invalid(
                    "claim",
                    format!("{}: ours differs and the spec states no `cause`", c.id),
                ));
            }
            let mut result = ClaimResult {
                id: c.id.clone(),
                queue: design,
                threads: c.threads,
                model,
                metric: c.metric.clone(),
                text: c.text.clone(),
                paper: c.paper.clone(),
                expected: c.expected,
                ours: values.map(|v| v[0]),
                ours_lo: values.map(|v| v[1].min(v[2])),
                ours_hi: values.map(|v| v[1].max(v[2])),
                min: c.min,
                max: c.max,
                bound: c.bound.clone(),
                reading: c.reading,
                trace_inserts: match c.reading {
                    Reading::FiniteTrace => point
                        .map(|p| p.finite.iter().map(|f| f.trace_inserts).collect())
                        .unwrap_or_default(),
                    Reading::SteadyState => Vec::new(),
                },
                ours_range: String::new(),
                verdict,
                cause: (verdict != Verdict::Reproduced).then(|| c.cause.clone()).flatten(),
            };
            result.ours_range = ours_range(&result.trace_inserts);
            // Every inconclusive states its cause (issue 38): the spec's, else the measured one.
            if verdict == Verdict::Inconclusive && result.cause.is_none() {
                result.cause = Some(straddle_cause(&result));
            }
            // A cause that turns on the native rate quotes this run's, never a number written
            // into the spec on another day (a ratio of two points cancels it).
            if let (Some(cause), Some(p), None) = (&mut result.cause, point, &over) {
                if native_dependent(&c.metric) {
                    if !cause.ends_with('.') {
                        cause.push('.');
                    }
                    cause.push_str(&native_rates_text(p));
                }
            }
            out.push(result);
        }
        Ok(out)
    }
}

/// Whether a metric's value depends on the native rate (the path per insert does not).
fn native_dependent(metric: &str) -> bool {
    matches!(metric, "normalized" | "break_even_latency_ns")
}

/// The native rates a point's values were computed with, as a cause's last sentence.
fn native_rates_text(p: &Point) -> String {
    let m = |x: f64| format!("{:.2}", x / 1e6);
    format!(
        " Native rates measured in this run ({}, {} thread(s)): median {}, lowest {}, highest {} M/s.",
        p.queue.name(),
        p.threads,
        m(p.native_per_s),
        m(p.native_min_per_s),
        m(p.native_max_per_s)
    )
}

/// What a claim's range covers: the native runs, and the trace lengths of a finite-trace one.
fn ours_range(trace_inserts: &[u64]) -> String {
    let runs = "the native-rate runs (this machine's instruction rate)";
    if trace_inserts.is_empty() {
        return runs.into();
    }
    let n: Vec<String> = trace_inserts.iter().map(u64::to_string).collect();
    format!("{runs} and traces of {} inserts (lengths ours)", n.join(" and "))
}

/// The finite-trace reading of each short trace under `config`.
fn finite_paths(traces: &[Traced], config: Config) -> Result<Vec<FinitePath>> {
    traces
        .iter()
        .map(|t| {
            let a = analyse(&t.events, config)?;
            Ok(FinitePath {
                trace_inserts: t.inserts,
                critical_path: a.critical_path,
                path_per_insert: t.finite_path_per_insert(&a),
            })
        })
        .collect()
}

/// A metric from a path per insert, a persist latency and a native rate.
pub fn metric_value(metric: &str, path: f64, latency_ns: f64, native_per_s: f64) -> f64 {
    match metric {
        "break_even_latency_ns" => {
            if path > 0.0 {
                1e9 / (path * native_per_s)
            } else {
                f64::INFINITY
            }
        }
        "normalized" => {
            let bound = if path > 0.0 { 1e9 / (path * latency_ns) } else { f64::INFINITY };
            bound / native_per_s
        }
        _ => path,
    }
}

impl Point {
    /// The paths per insert of a reading: the steady state's one, or one per trace length.
    pub fn paths(&self, reading: Reading) -> Vec<f64> {
        match reading {
            Reading::SteadyState => vec![self.path_per_insert],
            Reading::FiniteTrace => self.finite.iter().map(|f| f.path_per_insert).collect(),
        }
    }

    /// A metric on a reading: [at the first path and the median native rate, the lowest and
    /// the highest over every path and native run]; `None` where the point has no such path.
    pub fn reading_values(&self, metric: &str, reading: Reading) -> Option<[f64; 3]> {
        let paths = self.paths(reading);
        let natives = [self.native_per_s, self.native_min_per_s, self.native_max_per_s];
        let at =
            |path: f64, native: f64| metric_value(metric, path, self.persist_latency_ns, native);
        let central = at(*paths.first()?, self.native_per_s);
        let all: Vec<f64> = paths.iter().flat_map(|&p| natives.map(|n| at(p, n))).collect();
        if all.iter().any(|v| v.is_nan()) {
            // f64::min would drop it; a NaN anywhere settles nothing (judged inconclusive).
            return Some([f64::NAN; 3]);
        }
        let (lo, hi) = all.iter().fold((central, central), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        Some([central, lo, hi])
    }
}

/// A claim's metric at a point: [central, lowest, highest] ([`Point::reading_values`]).
fn claim_values(metric: &str, reading: Reading, p: &Point) -> Option<[f64; 3]> {
    p.reading_values(metric, reading)
}

fn bound_text(c: &ClaimResult) -> String {
    let f = |x: f64| format!("{x}");
    let range = match (c.min, c.max) {
        (Some(a), Some(b)) => format!("{} to {}", f(a), f(b)),
        (Some(a), None) => format!("at least {}", f(a)),
        (None, Some(b)) => format!("at most {}", f(b)),
        (None, None) => "none".into(),
    };
    format!("{range} ({} bound)", c.bound)
}

/// Why a claim with no `cause` of its own is inconclusive, from what was measured.
fn straddle_cause(c: &ClaimResult) -> String {
    match (c.ours_lo, c.ours_hi) {
        (Some(lo), Some(hi)) if !lo.is_nan() && !hi.is_nan() => format!(
            "the repetitions straddle the bound: ours {} to {} against {}",
            value_text(lo),
            value_text(hi),
            bound_text(c)
        ),
        _ => "ours is not a number (a native rate or path of 0): nothing to judge".into(),
    }
}

/// A claim's value for the text: finite with 3 significant places, or "unbounded".
pub fn value_text(x: f64) -> String {
    if !x.is_finite() {
        "unbounded".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

/// One line per claim: the thesis, ours (range), the bound and whose, the verdict, the cause.
pub fn claims_text(claims: &[ClaimResult]) -> String {
    let mut s = String::new();
    for c in claims {
        let ours = match (c.ours, c.ours_lo, c.ours_hi) {
            (Some(v), Some(lo), Some(hi)) if lo != hi => {
                format!("{} ({} to {})", value_text(v), value_text(lo), value_text(hi))
            }
            (Some(v), _, _) => value_text(v),
            _ => "not measured".into(),
        };
        let n: Vec<String> = c.trace_inserts.iter().map(u64::to_string).collect();
        let reading = match c.reading {
            Reading::SteadyState => format!("{} reading", c.reading.name()),
            Reading::FiniteTrace => {
                format!("{} reading, traces of {} inserts", c.reading.name(), n.join(" and "))
            }
        };
        s += &format!(
            "  {}: {} — thesis {}; ours ({reading}) {}; bound {}: {}\n",
            c.id,
            c.text,
            c.paper,
            ours,
            bound_text(c),
            c.verdict.name().to_uppercase()
        );
        if let Some(cause) = &c.cause {
            s += &format!("      why: {cause}\n");
        }
    }
    s
}

/// The finite-trace reading of one queue's points, one line per model (and block size, where
/// that is the axis; latency does not change a path): the whole path and the path per insert
/// at each trace length.
fn finite_text(pts: &[&Point]) -> String {
    let mut s = String::new();
    let mut seen = Vec::new();
    for p in pts.iter().filter(|p| !p.finite.is_empty()) {
        let key = (p.model, if p.axis == Axis::PersistLatency { 0.0 } else { p.value });
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        if s.is_empty() {
            s += "  finite-trace reading (whole critical path of an N-insert trace, per insert):\n";
        }
        let at = match p.axis {
            Axis::PersistLatency => String::new(),
            _ => format!(" at {:.0}B", p.value),
        };
        let each: Vec<String> = p
            .finite
            .iter()
            .map(|f| {
                format!("N={}: {} ({:.4})", f.trace_inserts, f.critical_path, f.path_per_insert)
            })
            .collect();
        s += &format!("    {}{at}: {}\n", p.model.name(), each.join(", "));
    }
    s
}

/// The sweep as text: per queue and thread count, one line per axis value.
pub fn sweep_text(r: &SweepResult) -> String {
    let mut s = format!("{} — {} ({})\n", r.name, r.title, r.source);
    let mut groups: Vec<(Design, u64)> = r.points.iter().map(|p| (p.queue, p.threads)).collect();
    groups.dedup();
    for (design, threads) in groups {
        let pts: Vec<&Point> =
            r.points.iter().filter(|p| p.queue == design && p.threads == threads).collect();
        let native = pts.first().map(|p| p.native_per_s).unwrap_or(0.0);
        s += &format!(
            "\n{} ({}), {threads} thread(s), native {}\n",
            design.title(),
            design.name(),
            human_rate(native)
        );
        let mut models: Vec<Model> = pts.iter().map(|p| p.model).collect();
        models.dedup();
        let mut values: Vec<f64> = pts.iter().map(|p| p.value).collect();
        values.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        values.dedup();
        s += &format!("{:>10}", "value");
        for m in &models {
            s += &format!(" {:>26}", format!("{} path/ins, rate", m.name()));
        }
        s += "\n";
        for v in values {
            let label = match pts[0].axis {
                Axis::PersistLatency => human_ns(v),
                _ => format!("{v:.0}B"),
            };
            s += &format!("{label:>10}");
            for m in &models {
                let p = pts.iter().find(|p| p.model == *m && p.value == v);
                s += &match p {
                    Some(p) => format!(
                        " {:>26}",
                        format!("{:.3}, {}", p.path_per_insert, human_rate(p.achievable_per_s))
                    ),
                    None => format!(" {:>26}", "-"),
                };
            }
            s += "\n";
        }
        s += &finite_text(&pts);
    }
    if !r.claims.is_empty() {
        s += "\nclaims (thesis vs ours; a bound marked ours is a tolerance we chose)\n";
        s += &claims_text(&r.claims);
    }
    s
}

#[cfg(test)]
mod tests {
    //! The verdict rules (issue 38) on hand-made points: no native runs, no traces.
    use super::*;

    const SPEC: &str = r#"
[spec]
name = "t"
title = "t"
source = "t"
command = "t"

[base]
queues = ["cwl"]
threads = [1]
models = ["strict", "epoch"]
persist_latency = "500ns"
atomic_persist = 8
tracking = 8
trace_inserts = 10
rate_inserts = 10

[sweep]
axis = "atomic_persist"
values = [8, 512]

[[claim]]
id = "ratio"
text = "strict / epoch at 512"
queue = "cwl"
threads = 1
model = "strict"
metric = "path_per_insert"
at = 512
over_model = "epoch"
paper = "matches"
min = 0.5
max = 2.0
bound = "ours"
"#;

    fn point(model: Model, value: f64, path: f64) -> Point {
        Point {
            queue: Design::CopyWhileLocked,
            threads: 1,
            model,
            axis: Axis::AtomicPersist,
            value,
            persist_latency_ns: 500.0,
            atomic_persist_bytes: value as u64,
            tracking_bytes: 8,
            native_per_s: 1e7,
            native_min_per_s: 0.5e7,
            native_max_per_s: 2e7,
            path_per_insert: path,
            persist_bound_per_s: 2e6 / path,
            achievable_per_s: 0.0,
            normalized: 0.0,
            break_even_latency_ns: 0.0,
            finite: Vec::new(),
        }
    }

    fn spec(text: &str) -> Spec {
        let s: Spec = toml::from_str(text).unwrap();
        s.validate().unwrap();
        s
    }

    #[test]
    fn judge_inside_outside_straddling() {
        assert_eq!(judge(1.0, 1.5, Some(0.5), Some(2.0)), Verdict::Reproduced);
        assert_eq!(judge(2.5, 3.0, Some(0.5), Some(2.0)), Verdict::Differs);
        assert_eq!(judge(0.1, 0.2, Some(0.5), None), Verdict::Differs);
        assert_eq!(judge(1.5, 2.5, Some(0.5), Some(2.0)), Verdict::Inconclusive);
        assert_eq!(judge(f64::INFINITY, f64::INFINITY, Some(1.0), None), Verdict::Reproduced);
        assert_eq!(judge(f64::INFINITY, f64::INFINITY, None, Some(24.0)), Verdict::Differs);
    }

    #[test]
    fn a_ratio_claim_is_judged_and_a_difference_needs_its_cause() {
        let pts = |strict512| {
            vec![
                point(Model::Strict, 8.0, 15.0),
                point(Model::Strict, 512.0, strict512),
                point(Model::Epoch, 8.0, 1.0),
                point(Model::Epoch, 512.0, 1.0),
            ]
        };
        let s = spec(SPEC);
        let ok = s.claims(Axis::AtomicPersist, &pts(1.5)).unwrap();
        assert_eq!((ok[0].ours, ok[0].verdict), (Some(1.5), Verdict::Reproduced));
        // 3× epoch: differs, and the spec gives no cause, so the sweep must fail.
        assert!(s.claims(Axis::AtomicPersist, &pts(3.0)).is_err());
        let with_cause = spec(&format!("{SPEC}cause = \"the head is its own block\"\n"));
        let r = with_cause.claims(Axis::AtomicPersist, &pts(3.0)).unwrap();
        assert_eq!(r[0].verdict, Verdict::Differs);
        assert!(claims_text(&r).contains("why: the head is its own block"));
    }

    #[test]
    fn ours_is_the_range_over_the_native_runs() {
        // Break-even at path 1: 100 ns at the median 1e7/s, 50 to 200 ns over the runs; a
        // bound of 80 to 120 ns is straddled.
        let text = SPEC
            .replace("metric = \"path_per_insert\"", "metric = \"break_even_latency_ns\"")
            .replace("over_model = \"epoch\"\n", "")
            .replace("model = \"strict\"", "model = \"epoch\"")
            .replace("min = 0.5\nmax = 2.0", "min = 80.0\nmax = 120.0");
        let s = spec(&text);
        let r = s.claims(Axis::AtomicPersist, &[point(Model::Epoch, 512.0, 1.0)]).unwrap();
        assert_eq!((r[0].ours_lo, r[0].ours_hi), (Some(50.0), Some(200.0)));
        assert_eq!(r[0].verdict, Verdict::Inconclusive);
    }

    /// Guards a cause that turns on the native rate quoting a range written into the spec on
    /// another day (issue 36: the strict and epoch causes said 2.5 to 14 M/s while the run
    /// beside them measured 7.9 to 16 M/s): the rates of the run judged are appended, and a
    /// metric that does not use the native rate gets none.
    #[test]
    fn a_cause_on_a_native_rate_quotes_the_rates_of_this_run() {
        let text = SPEC
            .replace("metric = \"path_per_insert\"", "metric = \"normalized\"")
            .replace("over_model = \"epoch\"\n", "")
            .replace("model = \"strict\"", "model = \"epoch\"")
            .replace("min = 0.5\nmax = 2.0", "min = 0.5\nmax = 2.0\ncause = \"a noisy input.\"");
        let r = spec(&text).claims(Axis::AtomicPersist, &[point(Model::Epoch, 512.0, 1.0)]);
        let r = r.unwrap();
        assert_eq!(r[0].verdict, Verdict::Differs, "{:?}", r[0].ours);
        let cause = r[0].cause.as_deref().unwrap_or_default();
        assert!(cause.starts_with("a noisy input. Native rates measured in this run"), "{cause}");
        assert!(cause.contains("median 10.00, lowest 5.00, highest 20.00 M/s"), "{cause}");
        // The path per insert does not use the native rate: the spec's cause alone.
        let with_cause = spec(&format!("{SPEC}cause = \"the head is its own block\"\n"));
        let pts = [point(Model::Strict, 512.0, 3.0), point(Model::Epoch, 512.0, 1.0)];
        let r = with_cause.claims(Axis::AtomicPersist, &pts).unwrap();
        assert_eq!(r[0].cause.as_deref(), Some("the head is its own block"));
    }

    /// Guards an inconclusive claim with no `cause` in its spec printing no cause (issue 38:
    /// every "inconclusive" states why); the measured range and the bound are the cause.
    #[test]
    fn an_inconclusive_claim_without_a_spec_cause_states_the_measured_one() {
        let text = SPEC
            .replace("metric = \"path_per_insert\"", "metric = \"break_even_latency_ns\"")
            .replace("over_model = \"epoch\"\n", "")
            .replace("model = \"strict\"", "model = \"epoch\"")
            .replace("min = 0.5\nmax = 2.0", "min = 80.0\nmax = 120.0");
        let r =
            spec(&text).claims(Axis::AtomicPersist, &[point(Model::Epoch, 512.0, 1.0)]).unwrap();
        assert_eq!(r[0].verdict, Verdict::Inconclusive);
        let cause = r[0].cause.as_deref().unwrap_or_default();
        assert!(cause.contains("straddle") && cause.contains("50.000 to 200"), "{cause}");
        assert!(claims_text(&r).contains("why: the repetitions straddle the bound"));
    }

    /// Guards a NaN value (a native rate of 0 over a path of 0) reading "reproduced": the old
    /// rule found NaN neither below nor above any bound, so it passed every one.
    #[test]
    fn a_nan_value_is_never_reproduced() {
        assert_eq!(judge(f64::NAN, f64::NAN, Some(0.5), Some(2.0)), Verdict::Inconclusive);
        assert_eq!(judge(1.0, 1.0, Some(f64::NAN), None), Verdict::Inconclusive);
    }

    /// Table 8.1's "strand: compute-bound even on one thread (above 1)" on a point whose
    /// steady-state path is 0 (strand's queue heads coalesce) and whose whole path over a
    /// trace of `n` inserts is 2: the mini-queue of `analyse`'s
    /// `finite_trace_reading_is_the_whole_path_over_the_inserts`, path counted by hand.
    fn strand_point(lengths: &[u64]) -> Point {
        let mut p = point(Model::Strand, 500.0, 0.0);
        p.axis = Axis::PersistLatency;
        p.persist_latency_ns = 500.0;
        p.persist_bound_per_s = f64::INFINITY;
        p.finite = lengths
            .iter()
            .map(|&n| FinitePath {
                trace_inserts: n,
                critical_path: 2,
                path_per_insert: 2.0 / n as f64,
            })
            .collect();
        p
    }

    const SIDE: &str = r#"
[spec]
name = "t"
title = "t"
source = "t"
command = "t"

[base]
queues = ["cwl"]
threads = [1]
models = ["strand"]
persist_latency = "500ns"
atomic_persist = 8
tracking = 8
trace_inserts = 10
rate_inserts = 10
finite_trace_inserts = [4]

[sweep]
axis = "persist_latency"
values = ["500ns"]

[[claim]]
id = "side"
text = "strand: compute-bound (above 1), finite-trace reading"
queue = "cwl"
threads = 1
model = "strand"
metric = "normalized"
paper = "12 (Table 8.1)"
min = 1.0
bound = "paper"
reading = "finite-trace"
"#;

    /// Guards issue 36's "a claim that cannot fail": on the steady-state reading strand's rate
    /// is unbounded and passes "above 1" whatever the queue does; on the finite-trace reading
    /// a value below the bound is judged "differs" (and needs its cause), and trace lengths on
    /// both sides of it are "inconclusive", so the length we chose never decides a verdict.
    #[test]
    fn a_finite_trace_claim_below_its_bound_differs() {
        // Path 2 over 4 inserts: 0.5 per insert, 4 M/s persist-bound at 500 ns, over native
        // runs of 5, 10 and 20 M/s: 0.2 to 0.8, below 1.
        let short = [strand_point(&[4])];
        assert!(spec(SIDE).claims(Axis::PersistLatency, &short).is_err(), "no cause");
        let s = spec(&format!("{SIDE}cause = \"a 4-insert trace\"\n"));
        let r = s.claims(Axis::PersistLatency, &short).unwrap();
        assert_eq!(r[0].verdict, Verdict::Differs);
        assert_eq!((r[0].ours, r[0].ours_lo, r[0].ours_hi), (Some(0.4), Some(0.2), Some(0.8)));
        assert_eq!(r[0].trace_inserts, vec![4]);
        assert!(claims_text(&r).contains("finite-trace reading, traces of 4 inserts"));
        // The same point on the steady-state reading: unbounded, "reproduced" by construction.
        let steady = spec(&SIDE.replace("reading = \"finite-trace\"\n", ""));
        let r = steady.claims(Axis::PersistLatency, &short).unwrap();
        assert_eq!((r[0].ours, r[0].verdict), (Some(f64::INFINITY), Verdict::Reproduced));
        // 40 inserts: 2 to 8, above 1. 4 and 40 inserts together: 0.2 to 8, inconclusive.
        let long = [strand_point(&[40])];
        let r = spec(SIDE).claims(Axis::PersistLatency, &long).unwrap();
        assert_eq!(r[0].verdict, Verdict::Reproduced);
        let both = [strand_point(&[4, 40])];
        let r = s.claims(Axis::PersistLatency, &both).unwrap();
        assert_eq!((r[0].ours_lo, r[0].ours_hi), (Some(0.2), Some(8.0)));
        assert_eq!(r[0].verdict, Verdict::Inconclusive);
    }

    /// The report re-judges the claims file from its numbers: a finite-trace claim below its
    /// bound reads "differs" there too, with the spec's cause.
    #[test]
    fn the_report_judges_a_finite_trace_claim_below_its_bound_as_differs() {
        let s = spec(&format!("{SIDE}cause = \"a 4-insert trace\"\n"));
        let r = s.claims(Axis::PersistLatency, &[strand_point(&[4])]).unwrap();
        let v = serde_json::to_value(&r[0]).unwrap();
        let judged = experiments::report::seeds::claim(&v, "native runs").unwrap();
        assert_eq!(judged.verdict, experiments::analysis::Verdict::Differs);
        let cause = judged.cause.unwrap_or_default();
        assert!(cause.starts_with("a 4-insert trace. Native rates measured"), "{cause}");
        let range = judged.repetitions.unwrap_or_default();
        assert!(range.contains("traces of 4 inserts (lengths ours)"), "{range}");
    }

    #[test]
    fn a_finite_trace_claim_needs_its_lengths_and_no_ratio() {
        let none = SIDE.replace("finite_trace_inserts = [4]\n", "");
        assert!(toml::from_str::<Spec>(&none).unwrap().validate().is_err());
        let zero = SIDE.replace("finite_trace_inserts = [4]", "finite_trace_inserts = [0]");
        assert!(toml::from_str::<Spec>(&zero).unwrap().validate().is_err());
        let ratio = format!("{SIDE}over_model = \"strand\"\n");
        assert!(toml::from_str::<Spec>(&ratio).unwrap().validate().is_err());
    }

    #[test]
    fn a_claim_without_a_known_bound_owner_is_rejected() {
        let s: Spec =
            toml::from_str(&SPEC.replace("bound = \"ours\"", "bound = \"mine\"")).unwrap();
        assert!(s.validate().is_err());
        let s: Spec = toml::from_str(&SPEC.replace("min = 0.5\nmax = 2.0\n", "")).unwrap();
        assert!(s.validate().is_err(), "no bound at all");
    }

    #[test]
    fn committed_specs_validate() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/persistency");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                Spec::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                n += 1;
            }
        }
        assert_eq!(n, 4);
    }
}

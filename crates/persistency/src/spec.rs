//! Experiment specs for Figs. 8.1–8.3 (`experiments/persistency/*.toml`): a base setting, one
//! swept axis (persist latency, atomic persist size or tracking granularity) and the thesis's
//! claims. They have their own schema (the queues are not `nvmdb bench` runs, so `nvmdb sweep`
//! does not run them): `nvmdb persistency sweep SPEC` does, and prints each claim beside ours.

use crate::analyse::{analyse, Config, Model};
use crate::error::invalid;
use crate::queue::Design;
use crate::rate::{native_rate, traced_run, Schedule};
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
    /// `break_even_latency_ns` (Fig. 8.1) or `path_per_insert` at axis value `at`.
    pub metric: String,
    #[serde(default)]
    pub at: Option<toml::Value>,
    /// The thesis's number, where its text gives one (Fig. 8.2 and 8.3 give only shapes).
    #[serde(default)]
    pub expected: Option<f64>,
    pub paper: String,
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
    pub native_per_s: f64,
    pub path_per_insert: f64,
    pub persist_bound_per_s: f64,
    pub achievable_per_s: f64,
    pub normalized: f64,
    pub break_even_latency_ns: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub id: String,
    pub text: String,
    pub paper: String,
    pub expected: Option<f64>,
    pub ours: Option<f64>,
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
        for c in &self.claim {
            Design::parse(&c.queue).ok_or_else(|| invalid("claim queue", c.queue.clone()))?;
            Model::parse(&c.model).ok_or_else(|| invalid("claim model", c.model.clone()))?;
            match c.metric.as_str() {
                "break_even_latency_ns" => {}
                "path_per_insert" => {
                    axis_value(
                        axis,
                        c.at.as_ref()
                            .ok_or_else(|| invalid("claim", "path_per_insert needs `at`"))?,
                    )?;
                }
                m => return Err(invalid("claim metric", m.to_string())),
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
                let native = native_rate(design, threads, rate_inserts)?;
                let traced = traced_run(design, threads, trace_inserts, Schedule::RoundRobin)?;
                let trace = &traced.events;
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
                        let m = model_result(model, &a, path, native.inserts_per_s, latency);
                        points.push(Point {
                            queue: design,
                            threads,
                            model,
                            axis,
                            value,
                            persist_latency_ns: latency,
                            atomic_persist_bytes: atomic,
                            tracking_bytes: tracking,
                            native_per_s: native.inserts_per_s,
                            path_per_insert: m.path_per_insert,
                            persist_bound_per_s: m.persist_bound_per_s,
                            achievable_per_s: m.achievable_per_s,
                            normalized: m.normalized,
                            break_even_latency_ns: m.break_even_latency_ns,
                        });
                        if axis == Axis::PersistLatency {
                            // Same analysis for every latency: fill the rest from this one.
                            for &other in values.iter().filter(|v| **v != value) {
                                let m2 = model_result(model, &a, path, native.inserts_per_s, other);
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
            let ours = points
                .iter()
                .find(|p| {
                    p.queue == design
                        && p.threads == c.threads
                        && p.model == model
                        && at.is_none_or(|v| p.value == v)
                })
                .map(|p| match c.metric.as_str() {
                    "break_even_latency_ns" => p.break_even_latency_ns,
                    _ => p.path_per_insert,
                });
            out.push(ClaimResult {
                id: c.id.clone(),
                text: c.text.clone(),
                paper: c.paper.clone(),
                expected: c.expected,
                ours,
            });
        }
        Ok(out)
    }
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
    }
    if !r.claims.is_empty() {
        s += "\nclaims (thesis vs ours)\n";
        for c in &r.claims {
            let ours = c.ours.map(|v| format!("{v:.3}")).unwrap_or_else(|| "not measured".into());
            s += &format!("  {}: {} — thesis {}, ours {}\n", c.id, c.text, c.paper, ours);
        }
    }
    s
}

//! Table 8.1 and Figs. 8.1–8.3 of the thesis (§8.2) from a native rate and a traced run: per
//! design, thread count and model, the persist critical path per insert — its steady-state
//! growth over the second half of the trace, so that a path that stops growing (strand's
//! coalesced heads) does not make the rate depend on trace length — and the persist-bound insert
//! rate at a persist latency, normalised to the native (instruction-execution) rate (§8.2.1:
//! throughput is the lower of the two).

use crate::analyse::{analyse, Analysis, Config, Model};
use crate::queue::Design;
use crate::rate::{native_rate, traced_run, NativeRate, Schedule};
use crate::Result;
use serde::Serialize;

/// Thesis Table 8.1 (500 ns persists, 8-byte atomic persists and tracking): persist-bound rate
/// ÷ instruction rate for (design, threads) as [strict, epoch, strand].
pub const THESIS_TABLE_8_1: [(Design, u64, [f64; 3]); 6] = [
    (Design::CopyWhileLocked, 1, [0.034, 0.17, 12.0]),
    (Design::CopyWhileLocked, 8, [0.058, 3.2, 21.0]),
    (Design::TwoLockConcurrent, 1, [0.080, 0.56, 29.0]),
    (Design::TwoLockConcurrent, 8, [0.43, 3.4, 22.0]),
    (Design::QueueHoles, 1, [0.032, 0.17, 13.0]),
    (Design::QueueHoles, 8, [0.25, 1.9, 20.0]),
];

/// The thesis's Table 8.1 value, if it has this row.
pub fn thesis_value(design: Design, threads: u64, model: Model) -> Option<f64> {
    let i = Model::ALL.iter().position(|m| *m == model)?;
    THESIS_TABLE_8_1.iter().find(|(d, t, _)| *d == design && *t == threads).map(|(_, _, v)| v[i])
}

/// What one table row measures.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RowOptions {
    pub persist_latency_ns: f64,
    pub atomic_persist_bytes: u64,
    pub tracking_bytes: u64,
    pub trace_inserts: u64,
    pub rate_inserts: u64,
    pub schedule: Schedule,
}

impl Default for RowOptions {
    fn default() -> RowOptions {
        RowOptions {
            persist_latency_ns: 500.0,
            atomic_persist_bytes: 8,
            tracking_bytes: 8,
            trace_inserts: 20_000,
            rate_inserts: 2_000_000,
            schedule: Schedule::RoundRobin,
        }
    }
}

/// One model's numbers in a row.
#[derive(Clone, Debug, Serialize)]
pub struct ModelResult {
    pub model: Model,
    pub critical_path: u64,
    pub persists: u64,
    pub coalesced: u64,
    /// Steady-state persist critical path per insert, in persist latencies: the path's growth
    /// over the second half of the traced inserts ([`crate::rate::Traced::path_per_insert`]).
    pub path_per_insert: f64,
    /// Inserts per second if persists were the only limit (infinite banks and bandwidth).
    pub persist_bound_per_s: f64,
    /// `persist_bound_per_s` ÷ the native rate (Table 8.1's number).
    pub normalized: f64,
    /// The lower of the native and the persist-bound rate.
    pub achievable_per_s: f64,
    /// Persist latency at which the persist-bound rate equals the native rate (Fig. 8.1's
    /// knee).
    pub break_even_latency_ns: f64,
    /// Table 8.1's value for this design, model and thread count, where the thesis has one.
    pub thesis: Option<f64>,
}

/// One row of Table 8.1: a design at a thread count.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub queue: Design,
    pub threads: u64,
    pub options: RowOptions,
    pub native: NativeRate,
    pub traced_inserts: u64,
    pub trace_events: u64,
    /// How often consecutive inserts in the trace came from different threads.
    pub switch_fraction: f64,
    pub models: Vec<ModelResult>,
}

/// Derives the rates of one analysed model.
pub fn model_result(
    model: Model,
    a: &Analysis,
    path_per_insert: f64,
    native_per_s: f64,
    latency_ns: f64,
) -> ModelResult {
    let (critical_path, persists, coalesced) = (a.critical_path, a.persists, a.coalesced);
    let persist_bound_per_s =
        if path_per_insert > 0.0 { 1e9 / (path_per_insert * latency_ns) } else { f64::INFINITY };
    let break_even_latency_ns =
        if path_per_insert > 0.0 { 1e9 / (path_per_insert * native_per_s) } else { f64::INFINITY };
    ModelResult {
        model,
        critical_path,
        persists,
        coalesced,
        path_per_insert,
        persist_bound_per_s,
        normalized: persist_bound_per_s / native_per_s,
        achievable_per_s: persist_bound_per_s.min(native_per_s),
        break_even_latency_ns,
        thesis: None,
    }
}

/// Measures one row: the native rate, one traced run, and the three models over it.
pub fn row(queue: Design, threads: u64, o: &RowOptions) -> Result<Row> {
    if !(o.persist_latency_ns > 0.0 && o.persist_latency_ns.is_finite()) {
        return Err(crate::error::invalid(
            "persist latency",
            format!("{} ns", o.persist_latency_ns),
        ));
    }
    let native = native_rate(queue, threads, o.rate_inserts)?;
    let traced = traced_run(queue, threads, o.trace_inserts, o.schedule)?;
    let (trace, inserts) = (&traced.events, traced.inserts);
    let mut models = Vec::new();
    for model in Model::ALL {
        let config = Config {
            atomic_persist_bytes: o.atomic_persist_bytes,
            tracking_bytes: o.tracking_bytes,
            ..Config::new(model)
        };
        let a = analyse(trace, traced.config(config))?;
        let mut m = model_result(
            model,
            &a,
            traced.path_per_insert(&a),
            native.inserts_per_s,
            o.persist_latency_ns,
        );
        let thesis_setting =
            o.persist_latency_ns == 500.0 && o.atomic_persist_bytes == 8 && o.tracking_bytes == 8;
        m.thesis = thesis_setting.then(|| thesis_value(queue, threads, model)).flatten();
        models.push(m);
    }
    Ok(Row {
        queue,
        threads,
        options: *o,
        native,
        traced_inserts: inserts,
        trace_events: trace.len() as u64,
        switch_fraction: traced.switch_fraction,
        models,
    })
}

/// A rate in compact human units.
pub fn human_rate(per_s: f64) -> String {
    if !per_s.is_finite() {
        return "unbounded".into();
    }
    let (v, unit) = match per_s {
        x if x >= 1e9 => (x / 1e9, "G"),
        x if x >= 1e6 => (x / 1e6, "M"),
        x if x >= 1e3 => (x / 1e3, "k"),
        x => (x, ""),
    };
    format!("{v:.2}{unit}/s")
}

/// A normalised rate the way Table 8.1 prints it (two significant digits).
pub fn two_digits(x: f64) -> String {
    if !x.is_finite() {
        return "inf".into();
    }
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else if x >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Latency in compact units.
pub fn human_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "inf".into();
    }
    if ns >= 1e6 {
        format!("{:.3}ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2}us", ns / 1e3)
    } else {
        format!("{ns:.1}ns")
    }
}

/// Table 8.1 as text: one line per row, ours beside the thesis's.
pub fn table_text(rows: &[Row]) -> String {
    let mut s = String::new();
    if let Some(r) = rows.first() {
        s += &format!(
            "Table 8.1: persist-bound insert rate / native insert rate, {} persists, {}-byte \
             atomic persists, {}-byte tracking (thesis value in brackets; the thesis has 1 and 8 \
             threads); {} schedule\n",
            human_ns(r.options.persist_latency_ns),
            r.options.atomic_persist_bytes,
            r.options.tracking_bytes,
            r.options.schedule.name()
        );
    }
    s += &format!(
        "{:<5} {:>7} {:>12} {:>16} {:>16} {:>16}   {}\n",
        "queue",
        "threads",
        "native",
        "strict",
        "epoch",
        "strand",
        "path/insert (strict epoch strand), switches"
    );
    for r in rows {
        let cell = |m: &ModelResult| match m.thesis {
            Some(t) => format!("{} ({})", two_digits(m.normalized), two_digits(t)),
            None => two_digits(m.normalized),
        };
        let paths: Vec<String> =
            r.models.iter().map(|m| format!("{:.3}", m.path_per_insert)).collect();
        s += &format!(
            "{:<5} {:>7} {:>12} {:>16} {:>16} {:>16}   {} {:>8.2}\n",
            r.queue.name(),
            r.threads,
            human_rate(r.native.inserts_per_s),
            cell(&r.models[0]),
            cell(&r.models[1]),
            cell(&r.models[2]),
            paths.join(" "),
            r.switch_fraction
        );
    }
    s
}

//! The figures of the persistency specs — thesis Table 8.1 and Figs. 8.1–8.3 (§8.2) — drawn
//! with the reproduction report's plotter (`experiments::plot`): ours in colour, with the
//! native rate's range over the repetitions as error bars; the thesis's values in black.
//! A value that is not finite (strand persistency's unbounded rate on the steady-state reading)
//! is not drawn; the panel's title says so, and where the spec measured the finite-trace
//! reading that model is drawn on it instead, named with its trace lengths.

use crate::analyse::Model;
use crate::report::thesis_value;
use crate::spec::{metric_value, Axis, Point, Reading, SweepResult};
use experiments::plot::{Figure, Panel, Reference, Series, XY};

fn log(x: f64) -> f64 {
    x.log10()
}

/// The points of one panel: one queue at one thread count.
fn groups(r: &SweepResult) -> Vec<(crate::queue::Design, u64)> {
    let mut g: Vec<_> = r.points.iter().map(|p| (p.queue, p.threads)).collect();
    g.dedup();
    g
}

fn models(points: &[&Point]) -> Vec<Model> {
    Model::ALL.into_iter().filter(|m| points.iter().any(|p| p.model == *m)).collect()
}

/// `strand, finite trace (100–150 inserts)`: a series name for a point's finite-trace reading.
fn finite_name(m: Model, p: &Point) -> String {
    let n: Vec<u64> = p.finite.iter().map(|f| f.trace_inserts).collect();
    let lengths = match (n.first(), n.last()) {
        (Some(a), Some(b)) if a != b => format!("{a}–{b}"),
        (Some(a), _) => a.to_string(),
        _ => String::new(),
    };
    format!("ours: {}, finite trace ({lengths} inserts)", m.name())
}

fn unbounded_note(title: &mut String, skipped: &[Model]) {
    if !skipped.is_empty() {
        let names: Vec<&str> = skipped.iter().map(|m| m.name()).collect();
        *title +=
            &format!(" ({} unbounded on the steady-state reading, not drawn)", names.join(", "));
    }
}

/// The figure of a sweep; `subtitle` says what ran where.
pub fn figure(r: &SweepResult, subtitle: &str) -> Figure {
    let axis = r.points.first().map(|p| p.axis).unwrap_or(Axis::PersistLatency);
    let values = {
        let mut v: Vec<f64> = r.points.iter().map(|p| p.value).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let mut fig = Figure {
        title: format!("{} — {}", r.title, r.source),
        subtitle: subtitle.to_string(),
        ..Figure::default()
    };
    match axis {
        Axis::PersistLatency if values.len() == 1 => table_8_1(r, &mut fig),
        Axis::PersistLatency => fig_8_1(r, &mut fig),
        Axis::AtomicPersist | Axis::Tracking => fig_8_2_3(r, axis, &mut fig),
    }
    fig
}

/// Table 8.1: normalised rate per queue (categories), one series per model.
fn table_8_1(r: &SweepResult, fig: &mut Figure) {
    let mut designs: Vec<_> = r.points.iter().map(|p| p.queue).collect();
    designs.dedup();
    let mut threads: Vec<u64> = r.points.iter().map(|p| p.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    fig.x_label = "queue".into();
    fig.y_label = "persist-bound rate / native rate (log)".into();
    fig.log_y = true;
    fig.categories = Some(designs.iter().map(|d| d.name().to_string()).collect());
    for t in threads {
        let pts: Vec<&Point> = r.points.iter().filter(|p| p.threads == t).collect();
        let mut panel =
            Panel { title: format!("{t} thread(s), 500 ns persists"), ..Panel::default() };
        let mut skipped = Vec::new();
        for m in models(&pts) {
            let mut series = Series { name: format!("ours: {}", m.name()), points: Vec::new() };
            let mut finite = Series::default();
            for (i, d) in designs.iter().enumerate() {
                let Some(p) = pts.iter().find(|p| p.model == m && p.queue == *d) else { continue };
                // The thesis's value is drawn even where ours is unbounded and is not.
                if let Some(v) = thesis_value(*d, t, m) {
                    panel.references.push(Reference::Point {
                        x: i as f64,
                        ys: vec![log(v)],
                        label: format!("{} (Table 8.1)", m.name()),
                        short: format!("{v}"),
                    });
                }
                if !p.normalized.is_finite() {
                    skipped.push(m);
                    if let Some([y, lo, hi]) = p.reading_values("normalized", Reading::FiniteTrace)
                    {
                        finite.name = finite_name(m, p);
                        finite.points.push(XY {
                            x: i as f64,
                            y: log(y),
                            y_lo: log(lo),
                            y_hi: log(hi),
                        });
                    }
                    continue;
                }
                let lo = p.persist_bound_per_s / p.native_max_per_s;
                let hi = p.persist_bound_per_s / p.native_min_per_s;
                series.points.push(XY {
                    x: i as f64,
                    y: log(p.normalized),
                    y_lo: log(lo),
                    y_hi: log(hi),
                });
            }
            if !series.points.is_empty() {
                panel.series.push(series);
            }
            if !finite.points.is_empty() {
                panel.series.push(finite);
            }
        }
        skipped.dedup();
        unbounded_note(&mut panel.title, &skipped);
        fig.panels.push(panel);
    }
}

/// Fig. 8.1: achievable insert rate vs persist latency, one series per model, the thesis's
/// break-even latencies as dashed lines and ours as marks.
fn fig_8_1(r: &SweepResult, fig: &mut Figure) {
    fig.x_label = "persist latency, ns (log)".into();
    fig.y_label = "achievable inserts/s (log)".into();
    fig.log_x = true;
    fig.log_y = true;
    for (design, threads) in groups(r) {
        let pts: Vec<&Point> =
            r.points.iter().filter(|p| p.queue == design && p.threads == threads).collect();
        let mut panel = Panel {
            title: format!("{} ({}), {threads} thread(s)", design.title(), design.name()),
            ..Panel::default()
        };
        for m in models(&pts) {
            let mut series = Series { name: format!("ours: {}", m.name()), points: Vec::new() };
            for p in pts.iter().filter(|p| p.model == m) {
                let lo = p.persist_bound_per_s.min(p.native_min_per_s);
                let hi = p.persist_bound_per_s.min(p.native_max_per_s);
                series.points.push(XY {
                    x: log(p.value),
                    y: log(p.achievable_per_s),
                    y_lo: log(lo),
                    y_hi: log(hi),
                });
            }
            let first = pts.iter().find(|p| p.model == m);
            let finite = first
                .filter(|p| !p.break_even_latency_ns.is_finite())
                .and_then(|p| finite_latency_series(m, &pts, p, &mut panel));
            if let Some(p) = first {
                if p.break_even_latency_ns.is_finite() {
                    let label = format!(
                        "{} {}",
                        m.name(),
                        crate::report::human_ns(p.break_even_latency_ns)
                    );
                    panel.marks.push((log(p.break_even_latency_ns), label));
                }
            }
            panel.series.push(series);
            panel.series.extend(finite);
        }
        for c in r.claims.iter().filter(|c| {
            c.queue == design && c.threads == threads && c.metric == "break_even_latency_ns"
        }) {
            if let Some(x) = c.expected {
                let label = format!("{} break-even {}", c.model.name(), c.paper);
                panel.references.push(Reference::X { x: log(x), label });
            }
        }
        let unbounded: Vec<Model> = models(&pts)
            .into_iter()
            .filter(|m| pts.iter().any(|p| p.model == *m && !p.break_even_latency_ns.is_finite()))
            .collect();
        if !unbounded.is_empty() {
            let names: Vec<&str> = unbounded.iter().map(|m| m.name()).collect();
            panel.title += &format!(
                " ({}: compute-bound at every latency on the steady-state reading)",
                names.join(", ")
            );
        }
        fig.panels.push(panel);
    }
}

/// Fig. 8.1's curve of a model on the finite-trace reading (drawn where its steady-state
/// reading is unbounded): the lower of the native and the persist-bound rate at the first trace
/// length, the bars over every trace length and native run; its break-even marked.
fn finite_latency_series(
    m: Model,
    pts: &[&Point],
    first: &Point,
    panel: &mut Panel,
) -> Option<Series> {
    let mut series = Series { name: finite_name(m, first), points: Vec::new() };
    for p in pts.iter().filter(|p| p.model == m) {
        let paths = p.paths(Reading::FiniteTrace);
        let natives = [p.native_per_s, p.native_min_per_s, p.native_max_per_s];
        let at = |path: f64, native: f64| {
            metric_value("normalized", path, p.persist_latency_ns, native).min(1.0) * native
        };
        let y = at(*paths.first()?, p.native_per_s);
        let all: Vec<f64> = paths.iter().flat_map(|&q| natives.map(|n| at(q, n))).collect();
        let lo = all.iter().copied().fold(y, f64::min);
        let hi = all.iter().copied().fold(y, f64::max);
        series.points.push(XY { x: log(p.value), y: log(y), y_lo: log(lo), y_hi: log(hi) });
    }
    let [be, _, _] = first.reading_values("break_even_latency_ns", Reading::FiniteTrace)?;
    if be.is_finite() {
        let n = first.finite.first().map_or(0, |f| f.trace_inserts);
        let label = format!("{} (N={n}) {}", m.name(), crate::report::human_ns(be));
        panel.marks.push((log(be), label));
    }
    Some(series)
}

/// Figs. 8.2 and 8.3: persist critical path per insert vs a block size, one panel per queue.
fn fig_8_2_3(r: &SweepResult, axis: Axis, fig: &mut Figure) {
    fig.x_label = match axis {
        Axis::AtomicPersist => "atomic persist size, bytes (log)",
        _ => "tracking granularity, bytes (log)",
    }
    .into();
    fig.y_label = "persist critical path per insert".into();
    fig.log_x = true;
    fig.y_from_zero = true;
    for (design, threads) in groups(r) {
        let pts: Vec<&Point> =
            r.points.iter().filter(|p| p.queue == design && p.threads == threads).collect();
        let mut panel = Panel {
            title: format!("{} ({}), {threads} thread(s)", design.title(), design.name()),
            ..Panel::default()
        };
        for m in models(&pts) {
            let points = pts
                .iter()
                .filter(|p| p.model == m)
                .map(|p| XY {
                    x: log(p.value),
                    y: p.path_per_insert,
                    y_lo: p.path_per_insert,
                    y_hi: p.path_per_insert,
                })
                .collect();
            panel.series.push(Series { name: format!("ours: {}", m.name()), points });
        }
        fig.panels.push(panel);
    }
}

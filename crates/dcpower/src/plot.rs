//! The appendices' figures for the committed results, drawn with the reproduction report's
//! plotter (`experiments::plot`): Fig. A.10's data (Table A.3 at U = 25%, app. A §A.4.8), whose
//! bar heights the thesis does not print, and Fig. B.7's comparison (app. B §B.5.2) on our
//! synthetic traces. A figure drawn from a synthetic trace says so in its title and in every
//! panel's title, so it cannot be mistaken for the paper's production traces.

use crate::report::{ModelReport, RouteReport};
use crate::topology::Kind;
use experiments::plot::{Figure, Panel, Reference, Series, XY};

/// Every title of a figure drawn from generated traces carries this.
pub const SYNTHETIC_LABEL: &str = "SYNTHETIC trace (tuned to the paper's mean and sd)";

fn point(x: f64, ys: &[f64]) -> XY {
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = ys.iter().sum::<f64>() / ys.len().max(1) as f64;
    XY { x, y: mean, y_lo: lo, y_hi: hi }
}

/// Fig. A.10's data: each scenario's power by subsystem (kW), ours only.
pub fn model_figure(r: &ModelReport, subtitle: &str) -> Figure {
    let names: Vec<String> = r.scenarios.iter().map(|s| s.scenario.name.to_string()).collect();
    type Part = fn(&crate::model::Breakdown) -> f64;
    let parts: [(&str, Part); 5] = [
        ("ours: servers", |b| b.servers_kw),
        ("ours: power conditioning", |b| b.conditioning_kw()),
        ("ours: cooling (CRAH + chiller)", |b| b.cooling_kw()),
        ("ours: misc", |b| b.misc_kw),
        ("ours: total", |b| b.total_kw),
    ];
    let series = parts
        .iter()
        .map(|(name, f)| Series {
            name: (*name).to_string(),
            points: r
                .scenarios
                .iter()
                .enumerate()
                .map(|(i, s)| point(i as f64, &[f(&s.breakdown)]))
                .collect(),
        })
        .collect();
    Figure {
        title: format!(
            "Fig. A.10 data: Table A.3 at U = {:.0}% (model output; the thesis prints no bar \
             heights)",
            r.utilisation * 100.0
        ),
        subtitle: subtitle.to_string(),
        x_label: "scenario (Table A.3)".into(),
        y_label: "power, kW".into(),
        y_from_zero: true,
        categories: Some(names),
        panels: vec![Panel { title: "power by subsystem, kW".into(), series, ..Panel::default() }],
        ..Figure::default()
    }
}

/// Fig. B.7's comparison per topology over `reports` (one per trace seed): ours is the mean with
/// the seeds' range as error bars; the paper's numbers in black where it prints them.
pub fn route_figure(reports: &[&RouteReport], subtitle: &str) -> Figure {
    let kinds: Vec<Kind> = Kind::ALL
        .into_iter()
        .filter(|k| reports.iter().all(|r| r.results.iter().any(|x| x.topology == *k)))
        .collect();
    let values = |k: Kind, f: fn(&crate::sim::RouteResult) -> f64| -> Vec<f64> {
        reports.iter().filter_map(|r| r.results.iter().find(|x| x.topology == k).map(f)).collect()
    };
    let series = |name: &str, f: fn(&crate::sim::RouteResult) -> f64, scale: f64| Series {
        name: name.to_string(),
        points: kinds
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let v: Vec<f64> = values(*k, f).iter().map(|v| v * scale).collect();
                point(i as f64, &v)
            })
            .collect(),
    };
    let idx = |k: Kind| kinds.iter().position(|x| *x == k).map(|i| i as f64);
    let mut saving = Panel {
        title: "saving, % (SYNTHETIC trace)".into(),
        series: vec![series("ours: 1 − routed / static", |x| x.saving, 100.0)],
        ..Panel::default()
    };
    let mut over = Panel {
        title: "routed over the bound, % (SYNTHETIC trace)".into(),
        series: vec![series("ours: routed / bound − 1", |x| x.routed_over_bound, 100.0)],
        ..Panel::default()
    };
    let ep = reports.first().and_then(|r| r.paper_energy_proportional);
    if let Some([xy, serp, full, _]) = ep {
        for (k, v) in [(Kind::XY, xy), (Kind::Serpentine, serp), (Kind::FullyConnected, full)] {
            if let Some(x) = idx(k) {
                saving.references.push(Reference::Point {
                    x,
                    ys: vec![v * 100.0],
                    label: format!("Fig. B.10: {} saving", k.name()),
                    short: format!("{:.0}%", v * 100.0),
                });
            }
        }
    } else if let Some(p) = reports.first().map(|r| &r.paper) {
        if let Some(x) = idx(Kind::FullyConnected) {
            saving.references.push(Reference::Point {
                x,
                ys: vec![p.fully_connected_saving * 100.0],
                label: "Fig. B.7: fully-connected saving".into(),
                short: format!("{:.0}%", p.fully_connected_saving * 100.0),
            });
            over.references.push(Reference::Point {
                x,
                ys: vec![0.0, p.fully_connected_over_bound * 100.0],
                label: "Fig. B.7: fully-connected within 2% of the bound".into(),
                short: "≤ 2%".into(),
            });
        }
        if let Some(x) = idx(Kind::Wrapped) {
            over.references.push(Reference::Point {
                x,
                ys: vec![p.wrapped_routed_over_bound * 100.0],
                label: "Fig. B.7: wrapped routed over the bound".into(),
                short: format!("+{:.0}%", p.wrapped_routed_over_bound * 100.0),
            });
        }
    }
    let capacity = Panel {
        title: "capacity needed, kW (SYNTHETIC trace)".into(),
        series: vec![
            series("ours: static (no routing)", |x| x.without_routing_kw, 1.0),
            series("ours: Power Routing", |x| x.with_routing_kw, 1.0),
            series("ours: bound (c + 1)/c × peak", |x| x.bound_kw, 1.0),
        ],
        ..Panel::default()
    };
    Figure {
        title: format!(
            "Fig. B.7 on a {SYNTHETIC_LABEL}, not the paper's production traces ({} seeds)",
            reports.len()
        ),
        subtitle: subtitle.to_string(),
        x_label: "topology".into(),
        y_label: "kW or %".into(),
        y_from_zero: true,
        categories: Some(kinds.iter().map(|k| k.name().to_string()).collect()),
        panels: vec![capacity, saving, over],
        ..Figure::default()
    }
}

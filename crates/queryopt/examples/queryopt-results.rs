//! Writes the committed results of thesis ch. III under a directory (default
//! `results/queryopt`): scans on the disk and SSD models (Figs. 3.1, 3.2), pages read against
//! the expectation (Fig. 3.3), the scaled Table 3.1 join grid (Fig. 3.4), every claim's verdict
//! (`claims.txt`, `claims.json`) and the figures. The devices are accounted models (Table 2.1's parameters);
//! CPU time is this machine's. Run (`--quick`: small tables, for a smoke run):
//! `cargo run --release -p queryopt --example queryopt-results -- results/queryopt`.

use experiments::plot::{render, Figure, Panel, Reference, Series, XY};
use queryopt::claims::{self, table_3_1_speedup};
use queryopt::cli::TABLE_3_1_GB;
use queryopt::join::JoinAlgo;
use queryopt::report::{
    self, DeviceKind, JoinOptions, JoinReport, PagesReport, ScanOptions, ScanReport,
};
use queryopt::scan::{ScanOp, ScanParams};
use queryopt::verdict::{self, Claim};
use std::path::Path;
use std::process::{Command, ExitCode};

fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown commit".into())
}

fn scan_figure(r: &ScanReport, sub: &str) -> Figure {
    let mut panels = Vec::new();
    for d in &r.devices {
        let mut panel =
            Panel { title: format!("{} (accounted model)", d.device), ..Panel::default() };
        for op in ScanOp::ALL {
            let points = d
                .runs
                .iter()
                .filter(|x| x.operator == op && x.selectivity > 0.0 && x.time_s > 0.0)
                .map(|x| {
                    let (sx, sy) = ((x.selectivity * 100.0).log10(), x.time_s.log10());
                    XY { x: sx, y: sy, y_lo: sy, y_hi: sy }
                })
                .collect();
            panel.series.push(Series { name: format!("ours: {}", op.name()), points });
        }
        let marks: &[(f64, &str)] = if d.device == "disk-model" {
            &[(4.0, "Fig. 3.1: relation best above 4%"), (0.1, "Fig. 3.1: rowid-sort from 0.1%")]
        } else {
            &[(0.5, "Fig. 3.2: index vs relation above 0.5%")]
        };
        for (x, label) in marks {
            panel.references.push(Reference::X { x: x.log10(), label: (*label).into() });
        }
        panels.push(panel);
    }
    Figure {
        title: "Figs. 3.1–3.2: scans on the accounted disk and SSD models (Table 2.1)".into(),
        subtitle: sub.into(),
        x_label: "selectivity, % (log)".into(),
        y_label: "time, s (log): modelled I/O + this machine's CPU".into(),
        log_x: true,
        log_y: true,
        panels,
        ..Figure::default()
    }
}

/// Fig. 3.3: the share of a table's pages a rowid-sort scan reads, per tuples per page. The
/// thesis plots Yue & Wong's expectation and prints no values, so its curves are drawn from the
/// formula (Yao's exact expectation of the same quantity) at our selectivities, in black.
fn pages_figure(r: &PagesReport, sub: &str) -> Figure {
    let mut tpps: Vec<usize> = r.table.iter().map(|x| x.tuples_per_page).collect();
    tpps.dedup();
    let mut panel = Panel::default();
    for tpp in tpps {
        let rows = r.table.iter().filter(|x| x.tuples_per_page == tpp && x.table_pages > 0);
        let mut points = Vec::new();
        for x in rows {
            let (sx, share) = ((x.selectivity * 100.0).log10(), 100.0 / x.table_pages as f64);
            let sy = x.measured_pages as f64 * share;
            points.push(XY { x: sx, y: sy, y_lo: sy, y_hi: sy });
            panel.references.push(Reference::Point {
                x: sx,
                ys: vec![x.expected_pages_yao * share],
                label: "Fig. 3.3's curves: the expectation it plots (Yao), computed".into(),
                short: String::new(),
            });
        }
        let name = match tpp {
            19 => "ours: 19 tuples/page (Wisconsin)".to_string(),
            29 => "ours: 29 tuples/page (TPC-H Lineitem)".to_string(),
            30 => "ours: 30 tuples/page (TPC-H Orders)".to_string(),
            n => format!("ours: {n} tuples/page"),
        };
        panel.series.push(Series { name, points });
    }
    // §3.3's claim on it: at 5% selectivity most of the table's pages are read.
    panel.references.push(Reference::Accepted { x: Some(5f64.log10()), lo: 50.0, hi: 100.0 });
    Figure {
        title: "Fig. 3.3: pages read by rowid-sort scans vs the expectation".into(),
        subtitle: sub.into(),
        note: "black: the formula Fig. 3.3 plots (it prints no values); grey band: the claim \
               \"the majority of pages\" at 5%"
            .into(),
        x_label: "selectivity, % (log)".into(),
        y_label: "pages read, % of the table".into(),
        log_x: true,
        y_from_zero: true,
        panels: vec![panel],
        ..Figure::default()
    }
}

fn join_figure(r: &JoinReport, sub: &str) -> Figure {
    let mut projs: Vec<f64> = r.points.iter().map(|p| p.projectivity).collect();
    projs.sort_by(f64::total_cmp);
    projs.dedup();
    // Points run device by device: keep each size once, in Table 3.1's order.
    let mut sizes: Vec<(u64, u64)> = Vec::new();
    for p in &r.points {
        if !sizes.contains(&(p.rows_r, p.rows_s)) {
            sizes.push((p.rows_r, p.rows_s));
        }
    }
    let mut panels = Vec::new();
    for &proj in &projs {
        let mut panel = Panel {
            title: format!("{:.0}% projectivity: disk ÷ SSD time", proj * 100.0),
            ..Panel::default()
        };
        for algo in [JoinAlgo::SortMerge, JoinAlgo::HybridHash] {
            let points = sizes
                .iter()
                .enumerate()
                .filter_map(|(i, &(rr, rs))| {
                    let s = r.ssd_vs_disk.iter().find(|x| {
                        x.rows_r == rr
                            && x.rows_s == rs
                            && x.projectivity == proj
                            && x.algorithm == algo
                    })?;
                    Some(XY {
                        x: i as f64,
                        y: s.ssd_speedup,
                        y_lo: s.ssd_speedup,
                        y_hi: s.ssd_speedup,
                    })
                })
                .collect();
            panel.series.push(Series { name: format!("ours: {}", algo.name()), points });
        }
        for i in 0..sizes.len() {
            if let Some((sm, hh)) = table_3_1_speedup(proj > 0.1, i) {
                panel.references.push(Reference::Point {
                    x: i as f64,
                    ys: vec![sm.min(hh), sm.max(hh)],
                    label: "Table 3.1: disk ÷ SSD (sort-merge, hybrid hash)".into(),
                    short: String::new(),
                });
            }
        }
        panels.push(panel);
    }
    Figure {
        title: "Fig. 3.4: SSD speed-up of joins, accounted models, Table 3.1 scaled 1/100".into(),
        subtitle: sub.into(),
        x_label: "R × S (thesis GB)".into(),
        y_label: "disk time ÷ SSD time".into(),
        y_from_zero: true,
        categories: Some(
            TABLE_3_1_GB.iter().take(sizes.len()).map(|(a, b)| format!("{a}×{b}")).collect(),
        ),
        panels,
        ..Figure::default()
    }
}

/// Runs of the whole grid: the modelled I/O is deterministic, the CPU time added to it is not.
const REPEAT: usize = 3;

fn run(out: &Path, quick: bool) -> Result<(), String> {
    let e = |e: queryopt::Error| e.to_string();
    std::fs::create_dir_all(out).map_err(|err| format!("{}: {err}", out.display()))?;
    let write = |name: &str, text: &str| {
        std::fs::write(out.join(name), text).map_err(|err| format!("{name}: {err}"))
    };
    let json = |v: &dyn erased::Json| v.json();
    let (rows, rows_per_gb) = if quick { (50_000, 2_000) } else { (1_000_000, 50_000) };
    let kinds = [DeviceKind::SsdModel, DeviceKind::DiskModel];
    let sub = format!(
        "{} at {}: scans {rows} rows, joins {rows_per_gb} rows per thesis GB, 256-page memory; \
         claims over {REPEAT} runs, figures of the last",
        if quick { "QUICK run" } else { "full run" },
        commit()
    );

    let mut reps: Vec<Vec<Claim>> = Vec::new();
    for rep in 1..=REPEAT {
        // Each repetition rewrites the reports and figures; the last one's are committed.
        let scan = report::scan_report(
            &kinds,
            &ScanOptions {
                rows,
                tuples_per_page: 19,
                selectivities: report::DEFAULT_SELECTIVITIES.to_vec(),
                operators: ScanOp::ALL.to_vec(),
                params: ScanParams { extent_pages: 32, buffer_pages: 256 },
                seed: 1,
                prune_factor: 10.0,
                allow_buffered: false,
            },
        )
        .map_err(e)?;
        write("scan.txt", &report::scan_text(&scan))?;
        write("scan.json", &json(&scan))?;
        render(
            &scan_figure(&scan, &sub),
            &out.join("fig3.1-3.2.svg"),
            &out.join("fig3.1-3.2.png"),
        )?;

        let pages =
            report::pages_report(rows, &[19, 29, 30], report::PAGES_SELECTIVITIES, 1).map_err(e)?;
        write("pages.txt", &report::pages_text(&pages))?;
        write("pages.json", &json(&pages))?;
        render(&pages_figure(&pages, &sub), &out.join("fig3.3.svg"), &out.join("fig3.3.png"))?;

        let sizes = TABLE_3_1_GB
            .iter()
            .map(|&(r, s)| {
                ((r * rows_per_gb as f64).round() as u64, (s * rows_per_gb as f64).round() as u64)
            })
            .collect();
        let join = report::join_report(
            &kinds,
            &JoinOptions {
                sizes,
                projectivities: vec![0.05, 0.25],
                algorithms: vec![JoinAlgo::SortMerge, JoinAlgo::HybridHash],
                memory_pages: 256,
                extent_pages: 32,
                seed: 1,
                allow_buffered: false,
            },
        )
        .map_err(e)?;
        write("join.txt", &report::join_text(&join))?;
        write("join.json", &json(&join))?;
        render(&join_figure(&join, &sub), &out.join("fig3.4.svg"), &out.join("fig3.4.png"))?;
        reps.push(
            claims::input_claims()
                .into_iter()
                .chain(claims::scan_claims(&scan))
                .chain(claims::pages_claims(&pages))
                .chain(claims::join_claims(&join))
                .collect(),
        );
        eprintln!("repetition {rep} of {REPEAT} done");
    }
    let all = verdict::merge(&reps);
    verdict::check(&all).map_err(|x| e(x.into()))?;
    let text = format!("Thesis ch. III beside ours ({sub}):\n{}", verdict::text(&all));
    write("claims.txt", &text)?;
    write("claims.json", &json(&all))?;
    manifest(out, quick, &sub)?;
    print!("{text}");
    Ok(())
}

/// `experiment.json`: what `nvmdb report --seed DIR` needs to list these claims beside the
/// reproduction's specs (judged again there from their numbers).
fn manifest(out: &Path, quick: bool, sub: &str) -> Result<(), String> {
    let m = experiments::report::seeds::Manifest {
        seed: "query optimisation".into(),
        name: "thesis-ch3-queryopt".into(),
        title: "SSD query optimisation: scans and joins on disk and SSD".into(),
        source: "Pelley, PhD thesis 2014, ch. III, §3.3–§3.4, Figs. 3.1–3.4, Table 3.1".into(),
        description: "Scan operators and join algorithms on accounted disk and SSD models: \
                      the relation / rowid-sort / index scan break-evens, Yao's expected pages, \
                      the join speed-ups and the winning algorithm."
            .into(),
        command: format!(
            "cargo run --release -p queryopt --example queryopt-results -- {}{}",
            out.display(),
            if quick { " --quick" } else { "" }
        ),
        claims: "claims.json".into(),
        ours_range: format!("{REPEAT} runs of the grid (this machine's CPU time differs)"),
        figures: vec!["fig3.1-3.2.svg".into(), "fig3.3.svg".into(), "fig3.4.svg".into()],
        quick,
        notes: vec![
            format!(
                "accounted models, not devices: the disk and SSD are Table 2.1's latency and \
                 bandwidth (modelled I/O time + this machine's CPU time); {sub}"
            ),
            "Fig. 3.3's curves are the expectation it plots (Yao's exact form of Yue & Wong's), \
             computed at our selectivities: the thesis prints no values"
                .into(),
        ],
    };
    m.write(out, "experiment.json").map_err(|err| format!("experiment.json: {err}"))
}

mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string_pretty(self)
                .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"))
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let out = args.iter().find(|a| !a.starts_with("--")).cloned();
    let out = out.unwrap_or_else(|| "results/queryopt".into());
    match run(Path::new(&out), quick) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

//! `nvmdb report`: from `DIR/results.jsonl` and the specs, one figure per `[[plot]]` (SVG and
//! PNG in `figures/`), the verdict on every claim, and `index.html`, `report.md` and
//! `verdicts.json` showing each figure beside what the paper says.
//!
//! A spec whose engine or flag the bench does not have yet still gets its section: "not yet
//! runnable: engine wal missing", with the paper's claims listed, so the page is the to-do list
//! of the reproduction as well as its result.
//!
//! This module builds the [`Report`] (data, verdicts, figures); `page.rs` writes its pages.

use crate::analysis::{self, ClaimResult, Class, Verdict, QUICK_VERDICT};
use crate::data::{Dataset, PointData, ENDED_EARLY, HARNESS_LIMIT};
use crate::plot::{self, Figure, Panel, Reference, Series, XY};
use crate::provenance::Provenance;
use crate::results::{self, Row, StoreError};
use crate::spec::{ErrorBars, Normalize, PlotSpec, Spec, SpecError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

mod page;
pub mod seeds;
pub use page::*;

/// A report that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}: no results.jsonl and no spec given; run `nvmdb sweep SPEC --out {0}` first")]
    Empty(String),
    #[error("plot: {0}")]
    Plot(String),
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{0}")]
    Corrections(String),
}

#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// The sweep's output directory.
    pub dir: PathBuf,
    /// More specs (files or directories of `*.toml`), also those without results.
    pub specs: Vec<PathBuf>,
    /// Where to write the report (default: `dir`).
    pub out: Option<PathBuf>,
    /// Result directories of the seeds run by their own commands ([`seeds`]): each gets its
    /// section, its claims judged again from their numbers.
    pub seeds: Vec<PathBuf>,
}

/// Counts of a spec's points by what happened to them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PointCounts {
    pub total: usize,
    pub measured: usize,
    pub unsupported: usize,
    pub failed: usize,
    pub not_run: usize,
}

/// One spec's part of the report.
#[derive(Clone, Debug, Serialize)]
pub struct SpecReport {
    pub name: String,
    pub title: String,
    pub source: String,
    pub description: String,
    pub needs: Vec<String>,
    /// `measured`, `not yet runnable: engine wal missing`, `partly runnable: ...`, `not run`.
    pub status: String,
    pub points: PointCounts,
    /// Figure files relative to the report directory (`figures/x.svg`, `figures/x.png`) and
    /// their native size in pixels.
    pub figures: Vec<(String, String, (u32, u32))>,
    pub claims: Vec<ClaimResult>,
    pub notes: Vec<String>,
    /// Whether the numbers come from `--quick` runs: then no verdict says "reproduced".
    pub quick: bool,
    /// Host, versions, commits and dates of this spec's runs.
    pub provenance: Provenance,
    /// The seed whose own command wrote it ([`seeds`]); `None` for a spec of `nvmdb sweep`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub specs: Vec<SpecReport>,
    /// Host, versions, commits and dates of every run in the results.
    pub provenance: Provenance,
    /// When the report was written (UTC).
    pub written: String,
    #[serde(skip)]
    pub out: PathBuf,
}

/// Reads the results and specs of `options.dir` and computes every figure and verdict.
pub fn build(options: &ReportOptions) -> Result<Report, ReportError> {
    let out = options.out.clone().unwrap_or_else(|| options.dir.clone());
    let loaded = results::read_rows(&options.dir.join(results::RESULTS_FILE))?;
    let specs = load_specs(options, &loaded.rows)?;
    let corrections =
        crate::provenance::Corrections::load(&options.dir).map_err(ReportError::Corrections)?;
    if specs.is_empty() && options.seeds.is_empty() {
        return Err(ReportError::Empty(options.dir.display().to_string()));
    }
    let figures_dir = out.join("figures");
    std::fs::create_dir_all(&figures_dir)
        .map_err(|error| ReportError::Io { path: figures_dir.clone(), error })?;
    let mut reports = Vec::new();
    for spec in &specs {
        reports.push(spec_report(spec, &loaded.rows, &figures_dir, &corrections)?);
    }
    for dir in &options.seeds {
        reports.extend(seeds::load(dir, &out)?);
    }
    if loaded.skipped_lines > 0 {
        if let Some(first) = reports.first_mut() {
            let n = loaded.skipped_lines;
            first.notes.push(format!("{n} unreadable line(s) in results.jsonl were skipped"));
        }
    }
    let provenance = Provenance::of_corrected(&loaded.rows, &corrections);
    Ok(Report { specs: reports, provenance, written: crate::provenance::now_utc_minute(), out })
}

/// Specs named on the command line win over the copies in `DIR/specs/`; copies are used for
/// every other spec that has rows. A copy that a given spec replaces is never read: it may
/// predate a rule the given one meets (fewer repetitions than a reproduction now needs).
fn load_specs(options: &ReportOptions, rows: &[Row]) -> Result<Vec<Spec>, ReportError> {
    let mut given: BTreeMap<String, Spec> = BTreeMap::new();
    let mut given_order: Vec<String> = Vec::new();
    for path in options.specs.iter().map(|p| spec_files(p)).collect::<Result<Vec<_>, _>>()? {
        for path in path {
            let spec = Spec::load(&path)?;
            if !given.contains_key(&spec.name) {
                given_order.push(spec.name.clone());
            }
            given.insert(spec.name.clone(), spec);
        }
    }
    let saved = options.dir.join(results::SPECS_DIR);
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for name in rows.iter().map(Row::spec) {
        if !seen.insert(name.to_string()) {
            continue;
        }
        if let Some(spec) = given.remove(name) {
            out.push(spec);
            continue;
        }
        let path = saved.join(format!("{name}.toml"));
        if path.exists() {
            out.push(Spec::load(&path)?);
        }
    }
    out.extend(given_order.into_iter().filter_map(|n| given.remove(&n)));
    Ok(out)
}

/// Review 5's provenance notes (problems 2 and 8): points that ran other settings than the
/// spec, rows whose build cannot be checked, and the corrections kept beside the rows.
fn provenance_notes(
    data: &Dataset,
    spec_rows: &[&Row],
    corrections: &crate::provenance::Corrections,
) -> Vec<String> {
    let mut notes = Vec::new();
    let older = data.older_spec();
    if let Some((_, diff)) = older.first() {
        let alike = older.iter().filter(|(_, d)| d == diff).count();
        let others = if alike < older.len() {
            format!("; {} other point(s) differ otherwise", older.len() - alike)
        } else {
            String::new()
        };
        notes.push(format!(
            "{}: {} of {} point(s) ran other settings than this spec gives them (settings \
             differ: {diff}, at {alike} point(s){others}); they are drawn but no claim is \
             judged on them: rerun the spec as committed",
            crate::data::OLDER_SPEC,
            older.len(),
            data.points.iter().filter(|p| p.ran).count()
        ));
    }
    let unverifiable = crate::provenance::unverifiable(spec_rows);
    if unverifiable > 0 {
        notes.push(format!(
            "unverifiable build: {unverifiable} of the {} row(s) used carry no code_commit, so whether \
             their binary was built from the commit they name cannot be checked",
            spec_rows.len()
        ));
    }
    notes.extend(corrections.notes(spec_rows));
    notes
}

/// `path` itself, or the `*.toml` files of a directory in name order.
pub fn spec_files(path: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let io = |error| ReportError::Io { path: path.to_path_buf(), error };
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

fn spec_report(
    spec: &Spec,
    rows: &[Row],
    figures_dir: &Path,
    corrections: &crate::provenance::Corrections,
) -> Result<SpecReport, ReportError> {
    let data = Dataset::build_with(spec, rows, corrections);
    let (points, status) = status(&data);
    let quick = data.any_quick();
    // The rows the figures and verdicts use: rows superseded by newer settings of their
    // point are counted apart (below), not described as if they decided anything.
    let spec_rows: Vec<&Row> =
        rows.iter().filter(|r| r.spec() == spec.name && data.uses(r)).collect();
    // Figures credit the code a correction says the rows ran, as the notes below say.
    let provenance = Provenance::of_corrected(spec_rows.iter().copied(), corrections);
    let mut notes = Vec::new();
    if quick {
        notes.push(format!(
            "{QUICK_VERDICT}: --quick runs are short, on a reduced grid, one repetition; they \
             show that the pipeline works, not what the paper measured"
        ));
    }
    let reps: Vec<usize> = data.points.iter().map(|p| p.repetitions).filter(|&n| n > 0).collect();
    if let (Some(lo), Some(hi)) = (reps.iter().min(), reps.iter().max()) {
        let range = if lo == hi { format!("{hi}") } else { format!("{lo}-{hi}") };
        notes.push(format!(
            "{range} successful repetition(s) per point; each point's number is its fastest \
             repetition, error bars its spread over all of them"
        ));
    }
    let wrong = data.wrong_builds();
    if wrong > 0 {
        notes.push(format!(
            "{wrong} run(s) refused: their binary was built from another commit \
             (config.git_commit) than the code their sweep ran (code_commit)"
        ));
    }
    notes.extend(provenance_notes(&data, &spec_rows, corrections));
    if let Some((newest, older)) = crate::provenance::older_builds(&spec_rows) {
        let list: Vec<String> = older.iter().map(|(c, n)| format!("{n} of commit {c}")).collect();
        notes.push(format!(
            "older builds: {} row(s) ran another build than the spec's latest runs (commit \
             {newest}): {}",
            older.iter().map(|(_, n)| n).sum::<usize>(),
            list.join(", ")
        ));
    }
    let (limited, limited_points) = data.harness_limited();
    if limited > 0 {
        let n = limited_points.len();
        let shown: Vec<&str> = limited_points.iter().take(4).copied().collect();
        let more = if n > 4 { format!(", … {} more", n - 4) } else { String::new() };
        notes.push(format!(
            "{HARNESS_LIMIT}: {limited} run(s) at {n} point(s) hit a limit of the harness (the \
             driver's pending-commit cap, pending_full_waits > 0, or a page flusher more than \
             {} pages behind its dirty-page budget) and are excluded from the figures and \
             verdicts: {}{more}",
            crate::data::FLUSHER_SLACK_PAGES,
            shown.join("; ")
        ));
    }
    let early = data.ended_early();
    if !early.is_empty() {
        let runs: usize = early.iter().map(|(_, n)| n).sum();
        let shown: Vec<&str> = early.iter().take(4).map(|(s, _)| s.as_str()).collect();
        let more =
            if early.len() > 4 { format!("; … {} more", early.len() - 4) } else { String::new() };
        notes.push(format!(
            "{ENDED_EARLY}: {runs} run(s) at {} point(s) ended before the duration they asked \
             for; they are kept, their rates are per measured second and their totals cover \
             the measured time only: {}{more}",
            early.len(),
            shown.join("; ")
        ));
    }
    if data.superseded > 0 {
        let unverifiable = match data.superseded_unverifiable {
            0 => String::new(),
            n => format!(", {n} of them without code_commit"),
        };
        notes.push(format!(
            "{} row(s) of older settings of the same points were ignored{unverifiable}: no \
             figure or verdict uses them, and the build and provenance notes above do not \
             count them",
            data.superseded
        ));
    }
    let check_failed: usize = data.points.iter().map(|p| p.check_failed).sum();
    if check_failed > 0 {
        notes.push(format!(
            "{check_failed} run(s) failed the consistency checker and are left out of the numbers"
        ));
    }
    let mut figures = Vec::new();
    if points.measured > 0 {
        for (i, p) in spec.plots.iter().enumerate() {
            let (mut fig, fig_notes) = figure(spec, p, &data);
            fig.subtitle = provenance.line();
            if quick {
                fig.title = format!("{QUICK_VERDICT} — {}", fig.title);
            }
            notes.extend(fig_notes);
            let stem = if spec.plots.len() == 1 {
                spec.name.clone()
            } else {
                format!("{}-{}", spec.name, i + 1)
            };
            let (svg, png) = (format!("{stem}.svg"), format!("{stem}.png"));
            plot::render(&fig, &figures_dir.join(&svg), &figures_dir.join(&png))
                .map_err(ReportError::Plot)?;
            let dims = plot::size(&fig);
            figures.push((format!("figures/{svg}"), format!("figures/{png}"), dims));
        }
    }
    let rep_data: Vec<Dataset> = (0..data.max_repetitions()).map(|i| data.repetition(i)).collect();
    let mut claims: Vec<ClaimResult> = spec
        .claims
        .iter()
        .map(|c| analysis::evaluate_with_repetitions(c, &data, &rep_data))
        .collect();
    if quick {
        for c in &mut claims {
            c.verdict = c.verdict.clone().for_quick();
        }
    }
    Ok(SpecReport {
        name: spec.name.clone(),
        title: spec.title.clone(),
        source: spec.source.clone(),
        description: spec.description.clone(),
        needs: spec.needs.clone(),
        status,
        points,
        figures,
        claims,
        notes,
        quick,
        provenance,
        seed: None,
    })
}

fn status(data: &Dataset) -> (PointCounts, String) {
    let mut c = PointCounts { total: data.points.len(), ..PointCounts::default() };
    let mut reasons = std::collections::BTreeSet::new();
    for p in &data.points {
        if !p.ok.is_empty() {
            c.measured += 1;
        } else if let Some(r) = &p.unsupported {
            c.unsupported += 1;
            reasons.insert(r.clone());
        } else if p.ran {
            c.failed += 1;
        } else {
            c.not_run += 1;
        }
    }
    let reasons = reasons.into_iter().collect::<Vec<_>>().join(", ");
    let text = if c.measured == 0 && c.unsupported > 0 {
        format!("not yet runnable: {reasons}")
    } else if c.unsupported > 0 {
        format!("partly runnable: {reasons} ({} of {} points measured)", c.measured, c.total)
    } else if c.measured == 0 && c.failed > 0 {
        format!("failed: {} of {} points have only failed runs", c.failed, c.total)
    } else if c.measured == 0 {
        "not run yet".to_string()
    } else if c.measured < c.total {
        format!("partly measured: {} of {} points", c.measured, c.total)
    } else {
        "measured".to_string()
    };
    (c, text)
}

/// The mean `metric` of `n`'s reference points that share `point`'s values of `n.same` (by
/// default the plot's panel key).
fn reference_mean(
    n: &Normalize,
    metric: &str,
    plot: &PlotSpec,
    data: &Dataset,
    point: &PointData,
) -> Option<f64> {
    let same: Vec<String> = n.same.clone().unwrap_or_else(|| plot.panels.iter().cloned().collect());
    let refs: Vec<f64> = data
        .select(&[&n.reference])
        .into_iter()
        .filter(|r| same.iter().all(|k| r.value(k) == point.value(k)))
        .filter_map(|r| r.metric(metric).map(|s| s.mean))
        .collect();
    (!refs.is_empty()).then(|| refs.iter().sum::<f64>() / refs.len() as f64)
}

/// The reference of `point` for normalisation.
fn reference(plot: &PlotSpec, data: &Dataset, point: &PointData) -> Option<f64> {
    reference_mean(plot.normalize.as_ref()?, &plot.y, plot, data, point)
}

/// With `x_per_txn_time`: the time one worker spent per transaction at `point`'s reference
/// (`config.threads / tps`), in nanoseconds, as [`crate::latency_axis`] divides break-evens by.
fn txn_time_ns(plot: &PlotSpec, data: &Dataset, point: &PointData) -> Option<f64> {
    let n = plot.x_per_txn_time.as_ref()?;
    let seconds = reference_mean(n, crate::latency_axis::TXN_TIME_METRIC, plot, data, point)?;
    (seconds > 0.0).then_some(seconds * 1e9)
}

/// `point`'s x on a numeric axis, before any log: its value (a quantity in base units, or a
/// metric) times `x_scale`; with `x_per_txn_time`, its time divided by the reference's time
/// per transaction first. `None` without a value or, when dividing, without a reference.
fn numeric_x(plot: &PlotSpec, data: &Dataset, point: &PointData) -> Option<f64> {
    let x = point.quantity(&plot.x).or_else(|| point.metric(&plot.x).map(|s| s.mean))?;
    let per = match &plot.x_per_txn_time {
        Some(_) => txn_time_ns(plot, data, point)?,
        None => 1.0,
    };
    Some(x / per * plot.x_scale)
}

fn axis_label(spec: &Spec, given: &Option<String>, key: &str, scale: f64) -> String {
    if let Some(l) = given {
        return l.clone();
    }
    let _ = spec;
    if scale == 1.0 {
        key.to_string()
    } else {
        format!("{key} × {}", crate::units::format_number(scale))
    }
}

/// The figure of one `[[plot]]`, and notes on points left out.
fn figure(spec: &Spec, plot: &PlotSpec, data: &Dataset) -> (Figure, Vec<String>) {
    let mut notes = Vec::new();
    let points: Vec<&PointData> =
        data.select(&[&plot.filter]).into_iter().filter(|p| !p.ok.is_empty()).collect();
    // x is categorical when it is an axis whose labels are not numbers.
    let categories: Option<Vec<String>> = spec.axis(&plot.x).and_then(|a| {
        let numeric = a.values.iter().all(|v| crate::units::parse_quantity(&v.label).is_some());
        (!numeric).then(|| a.values.iter().map(|v| v.label.clone()).collect())
    });
    let mut panels: Vec<Panel> = Vec::new();
    // With `x_per_txn_time`, each panel's time per transaction (`None`: its points have more
    // than one), which our break-even marks are divided by as the points are.
    let mut panel_txn_ns: BTreeMap<String, Option<f64>> = BTreeMap::new();
    let mut skipped = 0;
    for p in points {
        let x = match &categories {
            Some(names) => {
                p.value(&plot.x).and_then(|v| names.iter().position(|n| *n == v)).map(|i| i as f64)
            }
            None => numeric_x(plot, data, p),
        };
        let Some(stats) = p.metric(&plot.y) else {
            skipped += 1;
            continue;
        };
        let norm = match &plot.normalize {
            Some(_) => match reference(plot, data, p) {
                Some(r) if r != 0.0 => r,
                _ => {
                    skipped += 1;
                    continue;
                }
            },
            None => 1.0,
        };
        let Some(x) = x else {
            skipped += 1;
            continue;
        };
        let k = plot.y_scale / norm;
        // The point is its fastest repetition; its bars are the spread over all of them.
        let spread = p.spread(&plot.y).unwrap_or(stats);
        let (lo, hi) = match plot.error {
            ErrorBars::Minmax => (spread.min.min(stats.mean), spread.max.max(stats.mean)),
            ErrorBars::Stddev => (stats.mean - spread.stddev, stats.mean + spread.stddev),
            ErrorBars::None => (stats.mean, stats.mean),
        };
        let mut xy = XY { x, y: stats.mean * k, y_lo: lo * k, y_hi: hi * k };
        if plot.log_x {
            if xy.x <= 0.0 {
                skipped += 1;
                continue;
            }
            xy.x = xy.x.log10();
        }
        if plot.log_y {
            if xy.y <= 0.0 {
                skipped += 1;
                continue;
            }
            let log = |v: f64| if v > 0.0 { v.log10() } else { xy.y.log10() };
            xy = XY { x: xy.x, y: xy.y.log10(), y_lo: log(xy.y_lo), y_hi: log(xy.y_hi) };
        }
        let panel_name = plot.panels.as_ref().and_then(|k| p.value(k)).unwrap_or_default();
        if let Some(t) = txn_time_ns(plot, data, p) {
            let seen = panel_txn_ns.entry(panel_name.clone()).or_insert(Some(t));
            if *seen != Some(t) {
                *seen = None;
            }
        }
        let series_name =
            plot.series.as_ref().and_then(|k| p.value(k)).unwrap_or_else(|| "all".into());
        let panel = match panels.iter_mut().position(|q| q.title == panel_name) {
            Some(i) => &mut panels[i],
            None => {
                panels.push(Panel { title: panel_name, ..Panel::default() });
                panels.last_mut().expect("just pushed")
            }
        };
        let series = match panel.series.iter_mut().position(|s| s.name == series_name) {
            Some(i) => &mut panel.series[i],
            None => {
                panel.series.push(Series { name: series_name, points: Vec::new() });
                panel.series.last_mut().expect("just pushed")
            }
        };
        series.points.push(xy);
    }
    for panel in &mut panels {
        for s in &mut panel.series {
            s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
    }
    if categories.is_none() {
        mark_breakevens(spec, plot, data, &panel_txn_ns, &mut panels);
        paper_lines(spec, plot, &mut panels);
    }
    paper_markers(spec, plot, data, categories.as_deref(), &mut panels);
    if skipped > 0 {
        notes.push(format!(
            "{skipped} measured point(s) left out of the plot (no value for x or y, no \
             normalisation reference, or not positive on a log axis)"
        ));
    }
    let title = plot.title.clone().unwrap_or_else(|| spec.title.clone());
    let note = plot.note.clone().unwrap_or_default();
    if !note.is_empty() {
        notes.push(format!("{title}: {note}"));
    }
    let fig = Figure {
        title,
        subtitle: String::new(),
        note,
        x_label: axis_label(spec, &plot.x_label, &plot.x, plot.x_scale),
        y_label: axis_label(spec, &plot.y_label, &plot.y, plot.y_scale),
        log_x: plot.log_x,
        log_y: plot.log_y,
        y_from_zero: plot.y_from_zero,
        categories,
        panel_key: plot.panels.clone(),
        panels,
    };
    (fig, notes)
}

/// Vertical marks at the break-even points of claims drawn along this plot's x axis. On an x
/// divided by the time per transaction (`x_per_txn_time`), a crossing is divided by its
/// panel's time (`panel_txn_ns`) as the points are; a panel without one gets no mark.
fn mark_breakevens(
    spec: &Spec,
    plot: &PlotSpec,
    data: &Dataset,
    panel_txn_ns: &BTreeMap<String, Option<f64>>,
    panels: &mut [Panel],
) {
    let per_txn = plot.x_per_txn_time.is_some();
    let same_x = |c: &crate::spec::ClaimSpec| {
        c.x.as_deref() == Some(plot.x.as_str())
            && if per_txn { c.x_scale > 0.0 } else { (c.x_scale - plot.x_scale).abs() < 1e-12 }
    };
    for claim in spec.claims.iter().filter(|c| same_x(c)) {
        for (conds, crossing) in analysis::crossings(claim, data) {
            for panel in panels.iter_mut() {
                // A group restricted to another panel's value does not belong here.
                let fits = plot.panels.as_ref().is_none_or(|key| {
                    conds.0.iter().filter(|(k, _)| k == key).all(|(_, allowed)| {
                        allowed.iter().any(|a| crate::spec::values_equal(a, &panel.title))
                    })
                });
                // The crossing is in the claim's unit (x × its x_scale).
                let x = match panel_txn_ns.get(&panel.title) {
                    _ if !per_txn => crossing,
                    Some(Some(t)) => crossing / claim.x_scale / t * plot.x_scale,
                    _ => continue,
                };
                let plotted = match (plot.log_x, x > 0.0) {
                    (true, false) => continue,
                    (true, true) => x.log10(),
                    (false, _) => x,
                };
                if fits {
                    let label = format!("{}: {}", claim.id, crate::units::format_number(x));
                    panel.marks.push((plotted, label));
                }
            }
        }
    }
}

/// Whether a claim restricted by `filter` speaks about `panel` of a plot paneled by `key`.
fn claim_fits_panel(filter: &crate::spec::Conditions, key: Option<&String>, panel: &str) -> bool {
    key.is_none_or(|key| {
        filter
            .0
            .iter()
            .filter(|(k, _)| k == key)
            .all(|(_, allowed)| allowed.iter().any(|a| crate::spec::values_equal(a, panel)))
    })
}

/// The paper's break-even and threshold values along this plot's x axis, as dashed lines.
fn paper_lines(spec: &Spec, plot: &PlotSpec, panels: &mut [Panel]) {
    use crate::spec::ClaimKind;
    // The papers give break-evens in absolute µs and print their throughput only in figures:
    // on an x divided by the time per transaction they have no place.
    if plot.x_per_txn_time.is_some() {
        return;
    }
    let along_x = |c: &crate::spec::ClaimSpec| {
        matches!(c.kind, ClaimKind::Breakeven | ClaimKind::Threshold)
            && c.x.as_deref() == Some(plot.x.as_str())
            && (c.x_scale - plot.x_scale).abs() < 1e-12
    };
    for claim in spec.claims.iter().filter(|c| along_x(c)) {
        let (lo, hi) = analysis::accepted_interval(claim);
        let on_axis = |v: f64| match (plot.log_x, v > 0.0) {
            (true, false) => f64::NEG_INFINITY,
            (true, true) => v.log10(),
            (false, _) => v,
        };
        if !lo.is_nan() && !hi.is_nan() {
            for panel in panels.iter_mut() {
                if claim_fits_panel(&claim.filter, plot.panels.as_ref(), &panel.title) {
                    let band = Reference::Accepted { x: None, lo: on_axis(lo), hi: on_axis(hi) };
                    panel.references.push(band);
                }
            }
        }
        for (x, text) in analysis::paper_numbers(claim) {
            let plotted = match (plot.log_x, x > 0.0) {
                (true, false) => continue,
                (true, true) => x.log10(),
                (false, _) => x,
            };
            for panel in panels.iter_mut() {
                if claim_fits_panel(&claim.filter, plot.panels.as_ref(), &panel.title) {
                    let label = format!("{} {text}", claim.id);
                    panel.references.push(Reference::X { x: plotted, label });
                }
            }
        }
    }
}

/// Where `point`, at metric value `y` (the plot's `y`, unscaled), is drawn: the same mapping
/// as the measured points (scale, normalisation, log axes).
fn place(
    plot: &PlotSpec,
    data: &Dataset,
    categories: Option<&[String]>,
    point: &PointData,
    y: f64,
) -> Option<(f64, f64)> {
    let x = match categories {
        Some(names) => point
            .value(&plot.x)
            .and_then(|v| names.iter().position(|n| *n == v))
            .map(|i| i as f64)?,
        None => numeric_x(plot, data, point)?,
    };
    let norm = match &plot.normalize {
        Some(_) => reference(plot, data, point).filter(|r| *r != 0.0)?,
        None => 1.0,
    };
    let y = y * plot.y_scale / norm;
    let x = match (categories.is_none() && plot.log_x, x > 0.0) {
        (true, false) => return None,
        (true, true) => x.log10(),
        (false, _) => x,
    };
    let y = match (plot.log_y, y > 0.0) {
        (true, false) => return None,
        (true, true) => y.log10(),
        (false, _) => y,
    };
    Some((x, y))
}

/// The paper's ratio and value claims on this plot's y metric, as diamonds at the points they
/// are about (a ratio's value relative to our measured denominator).
fn paper_markers(
    spec: &Spec,
    plot: &PlotSpec,
    data: &Dataset,
    categories: Option<&[String]>,
    panels: &mut [Panel],
) {
    for claim in spec.claims.iter().filter(|c| c.metric.trim() == plot.y.trim()) {
        let texts: Vec<String> =
            analysis::paper_numbers(claim).into_iter().map(|(_, t)| t).collect();
        for (id, ends) in analysis::accepted_points(claim, data) {
            let Some(point) = data.points.iter().find(|p| p.id == id) else { continue };
            if point.ok.is_empty() || !plot.filter.matches(&point.lookup()) {
                continue;
            }
            let Some(&(x, _)) = place(plot, data, categories, point, 1.0).as_ref() else {
                continue;
            };
            // An end that has no place on the axis (0 on a log axis) reaches the panel's edge.
            let at =
                |y: f64, edge: f64| place(plot, data, categories, point, y).map_or(edge, |p| p.1);
            let (lo, hi) = (at(ends[0], f64::NEG_INFINITY), at(ends[1], f64::INFINITY));
            let panel_name = plot.panels.as_ref().and_then(|k| point.value(k)).unwrap_or_default();
            if let Some(panel) = panels.iter_mut().find(|p| p.title == panel_name) {
                panel.references.push(Reference::Accepted { x: Some(x), lo, hi });
            }
        }
        for (id, ys) in analysis::paper_points(claim, data) {
            let Some(point) = data.points.iter().find(|p| p.id == id) else { continue };
            if point.ok.is_empty() || !plot.filter.matches(&point.lookup()) {
                continue;
            }
            let placed: Vec<(f64, f64)> =
                ys.iter().filter_map(|&y| place(plot, data, categories, point, y)).collect();
            let Some(&(x, _)) = placed.first() else { continue };
            let panel_name = plot.panels.as_ref().and_then(|k| point.value(k)).unwrap_or_default();
            if let Some(panel) = panels.iter_mut().find(|p| p.title == panel_name) {
                let short = texts.join(", ");
                let label = format!("{} {short}", claim.id);
                let ys = placed.into_iter().map(|(_, y)| y).collect();
                panel.references.push(Reference::Point { x, ys, label, short });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SPEC: &str = r#"
        [spec]
        name = "t"
        title = "Throughput vs persist latency"
        source = "s"
        reps = 3
        [base]
        workload = "tpcb"
        [grid]
        engine = ["inplace", "wal"]
        persist_latency = ["0", "4us"]
        [[plot]]
        x = "persist_latency"
        x_scale = 0.001
        y = "tps"
        series = "engine"
        [[claim]]
        id = "ratio-0us"
        text = "In-Place ÷ WAL at 0 µs"
        source = "s"
        kind = "ratio"
        where = { persist_latency = "0" }
        numerator = { engine = "inplace" }
        denominator = { engine = "wal" }
        expected = 1.5
        unit = "×"
        [[claim]]
        id = "be"
        text = "break-even"
        source = "s"
        kind = "breakeven"
        x = "persist_latency"
        x_scale = 0.001
        a = { engine = "inplace" }
        b = { engine = "wal" }
        expected = 3.5
        unit = "µs"
    "#;

    /// A sweep directory with one row per point; the ratio at 0 µs is 1.5 and the curves
    /// cross at 8/3 µs (within 25% of 3.5), so a full run reads "reproduced" on both claims.
    fn sweep(quick: bool) -> (tempfile::TempDir, Report) {
        let dir = tempfile::tempdir().unwrap();
        let tps = [("inplace", "0", 150.0), ("inplace", "4us", 50.0), ("wal", "0", 100.0)];
        let tps = tps.into_iter().chain([("wal", "4us", 75.0)]);
        let mut lines = String::new();
        for (i, (engine, latency, tps)) in tps.enumerate() {
            // Every flag of the run, as the runner records them (`--quick` shortens the runs).
            let mut flags =
                json!({"engine": engine, "persist_latency": latency, "workload": "tpcb"});
            if quick {
                flags["duration"] = json!("1s");
                flags["warmup"] = json!("200ms");
            }
            let row = json!({
                "spec": "t", "point": format!("engine={engine},persist_latency={latency}"),
                "rep": 0, "hash": format!("h{i}"), "status": "ok", "quick": quick,
                "started_unix_s": 1_795_620_488.0 + i as f64, "host": "vm", "tps": tps,
                "grid": {"engine": engine, "persist_latency": latency},
                "flags": flags,
                "config": {"host_cpu": "AMD EPYC", "host_cores": 2, "host_flush": "clwb",
                           "nvmdb_version": "0.1.0",
                           "git_commit": "829029a3c36b7b961f48cdfa50a8a71020d2110b"},
            });
            lines.push_str(&format!("{row}\n"));
        }
        std::fs::write(dir.path().join(results::RESULTS_FILE), lines).unwrap();
        results::save_spec(dir.path(), "t", SPEC).unwrap();
        let report =
            build(&ReportOptions { dir: dir.path().to_path_buf(), ..Default::default() }).unwrap();
        write(&report).unwrap();
        (dir, report)
    }

    fn read(dir: &tempfile::TempDir, name: &str) -> String {
        std::fs::read_to_string(dir.path().join(name)).unwrap()
    }

    #[test]
    fn a_quick_sweep_never_reads_reproduced() {
        let (dir, report) = sweep(true);
        let claims = &report.specs[0].claims;
        assert!(report.specs[0].quick);
        for c in claims {
            assert!(c.verdict.label().starts_with(QUICK_VERDICT), "{}", c.verdict.label());
        }
        assert_eq!(claims[0].verdict.label(), "quick: not a reproduction (in the paper's range)");
        let (html, md, json) =
            (read(&dir, "index.html"), read(&dir, "report.md"), read(&dir, "verdicts.json"));
        for text in [&html, &md, &json] {
            assert!(!text.contains("reproduced"), "{text}");
            assert!(text.contains(QUICK_VERDICT));
        }
        assert!(html.contains("class=\"banner\""));
        assert!(json.contains("\"verdict\": \"quick\""), "{json}");
        // Every figure title carries the mark.
        let svg = read(&dir, "figures/t.svg");
        assert!(svg.contains("quick: not a reproduction — Throughput vs persist latency"));
    }

    #[test]
    fn a_full_sweep_still_reads_reproduced() {
        let (dir, report) = sweep(false);
        assert_eq!(report.specs[0].claims[0].verdict, Verdict::Reproduced);
        assert!(!read(&dir, "index.html").contains(QUICK_VERDICT));
        assert!(!read(&dir, "figures/t.svg").contains(QUICK_VERDICT));
    }

    #[test]
    fn the_footer_and_figures_say_host_date_commit_and_version() {
        let (dir, _) = sweep(true);
        let html = read(&dir, "index.html");
        let footer = &html[html.find("<footer>").unwrap()..];
        for fact in [
            "host vm: AMD EPYC, 2 cores, flush clwb",
            "2026-11-25 15:28",
            "nvmdb 0.1.0",
            "commit 829029a3c36b",
            "Report written",
        ] {
            assert!(footer.contains(fact), "{fact} missing from {footer}");
            assert!(read(&dir, "report.md").contains(fact), "{fact} missing from report.md");
        }
        let svg = read(&dir, "figures/t.svg");
        assert!(svg.contains("nvmdb 0.1.0 (commit 829029a3c36b)"));
    }

    #[test]
    fn the_papers_values_are_drawn_beside_ours() {
        let (dir, report) = sweep(false);
        let svg = read(&dir, "figures/t.svg");
        // The break-even claim: a dashed line at the paper's 3.5 µs, our crossing beside it.
        assert!(svg.contains("paper: be ≈ 3.5 µs"), "{svg}");
        assert!(svg.contains("ours: be: 2.6"), "{svg}");
        // The ratio claim: a diamond at 1.5× our WAL point, on the In-Place point at 0 µs.
        assert!(svg.contains("paper: ratio-0us ≈ 1.5×"));
        let (w, h) = report.specs[0].figures[0].2;
        let html = read(&dir, "index.html");
        assert!(html.contains(&format!("<img src=\"figures/t.svg\" width=\"{w}\" height=\"{h}\"")));
    }

    #[test]
    fn paper_markers_sit_at_the_claims_point() {
        let (dir, _) = sweep(false);
        let spec = Spec::parse(SPEC, Path::new("t.toml")).unwrap();
        let rows = results::read_rows(&dir.path().join(results::RESULTS_FILE)).unwrap().rows;
        let data = Dataset::build(&spec, &rows);
        let (fig, _) = figure(&spec, &spec.plots[0], &data);
        let refs = &fig.panels[0].references;
        assert!(refs.contains(&Reference::X { x: 3.5, label: "be ≈ 3.5 µs".into() }), "{refs:?}");
        // 1.5 × the WAL's 100 TPS, drawn at the In-Place point at x = 0.
        let point = refs.iter().find_map(|r| match r {
            Reference::Point { x, ys, .. } => Some((*x, ys.clone())),
            _ => None,
        });
        assert_eq!(point, Some((0.0, vec![150.0])));
        // Beside each marker, the interval the claim accepts: 1.5× ± 25% of WAL's 100 TPS at the
        // In-Place point; the break-even's 3.5 µs ± 25% as a band along x.
        assert!(refs.contains(&Reference::Accepted { x: Some(0.0), lo: 112.5, hi: 187.5 }));
        assert!(refs.contains(&Reference::Accepted { x: None, lo: 2.625, hi: 4.375 }), "{refs:?}");
    }

    /// Issue 38's normalised latency axis: x = persist latency ÷ In-Place's time per
    /// transaction at latency 0 (`threads / tps`, here 2 / 200,000 tps = 10 µs), per panel;
    /// our break-even divided as the points are, the paper's absolute µs not drawn.
    #[test]
    fn x_per_txn_time_divides_latency_by_the_references_time_per_transaction() {
        let text = SPEC.replace("[base]\n", "[base]\nthreads = 2\n").replace(
            "series = \"engine\"\n",
            "series = \"engine\"\nx_per_txn_time = { where = { engine = \"inplace\", \
             persist_latency = \"0\" } }\n",
        );
        let text = text.replace("x_scale = 0.001\n        y = \"tps\"", "y = \"tps\"");
        let spec = Spec::parse(&text, Path::new("t.toml")).unwrap();
        assert!(spec.plots[0].x_per_txn_time.is_some() && spec.plots[0].x_scale == 1.0);
        // In-Place 200k -> 50k, WAL 100k -> 75k tps over 0-4 µs: they cross at 3.2 µs.
        let tps = [("inplace", "0", 200e3), ("inplace", "4us", 50e3), ("wal", "0", 100e3)];
        let rows: Vec<Row> = tps
            .into_iter()
            .chain([("wal", "4us", 75e3)])
            .map(|(engine, latency, tps)| {
                let flags = json!({"engine": engine, "persist_latency": latency,
                                   "workload": "tpcb", "threads": 2});
                let row = json!({
                    "spec": "t", "point": format!("engine={engine},persist_latency={latency}"),
                    "rep": 0, "hash": "h", "status": "ok", "started_unix_s": 1.0, "tps": tps,
                    "grid": {"engine": engine, "persist_latency": latency}, "flags": flags,
                    "config": {"threads": 2},
                });
                match row {
                    serde_json::Value::Object(m) => Row(m),
                    _ => unreachable!(),
                }
            })
            .collect();
        let data = Dataset::build(&spec, &rows);
        let (fig, notes) = figure(&spec, &spec.plots[0], &data);
        assert!(notes.is_empty(), "{notes:?}");
        let panel = &fig.panels[0];
        let xs = |name: &str| -> Vec<f64> {
            let s = panel.series.iter().find(|s| s.name == name).unwrap();
            s.points.iter().map(|p| p.x).collect()
        };
        // 4 µs ÷ 10 µs, for both methods: one reference per panel.
        assert_eq!(xs("inplace"), vec![0.0, 0.4]);
        assert_eq!(xs("wal"), vec![0.0, 0.4]);
        assert_eq!(panel.series[0].points[1].y, 50e3, "y is left as it is");
        let (x, label) = &panel.marks[0];
        assert!((x - 0.32).abs() < 1e-9, "{x}");
        assert_eq!(label, "be: 0.32");
        assert!(!panel.references.iter().any(|r| matches!(r, Reference::X { .. })), "{panel:?}");
        // Without a reference point there is nothing to divide by: the point is left out.
        let no_ref: Vec<Row> = rows.iter().skip(1).cloned().collect();
        let (fig, notes) = figure(&spec, &spec.plots[0], &Dataset::build(&spec, &no_ref));
        assert!(fig.panels.iter().all(|p| p.series.is_empty()), "{fig:?}");
        assert!(notes[0].starts_with("3 measured point(s) left out"), "{notes:?}");
    }

    /// Guards issue 38's figures: a panel titled `2` (the value alone), workloads joined by
    /// lines that suggest a trend, and one label printed twice (`≈ 1.5×≈ 1.5×`).
    #[test]
    fn panels_say_their_key_and_categories_are_not_joined() {
        let text = "[spec]\ntitle = \"t\"\nsource = \"s\"\n[grid]\n\
                    engine = [\"inplace\", \"wal\"]\nthreads = [\"2\"]\n\
                    [[plot]]\nx = \"engine\"\ny = \"tps\"\npanels = \"threads\"\n";
        let spec = Spec::parse(text, Path::new("t.toml")).unwrap();
        let data = Dataset::build(&spec, &[]);
        let (fig, _) = figure(&spec, &spec.plots[0], &data);
        assert_eq!(fig.panel_key.as_deref(), Some("threads"));
        assert!(fig.categories.is_some());
        let mut fig = fig;
        let ys = vec![10.0];
        let marker = |label: &str| Reference::Point {
            x: 0.0,
            ys: ys.clone(),
            label: label.into(),
            short: "≈ 1.5×".into(),
        };
        let series = vec![plot::Series {
            name: "a".into(),
            points: vec![
                XY { x: 0.0, y: 9.0, y_lo: 9.0, y_hi: 9.0 },
                XY { x: 1.0, y: 8.0, y_lo: 8.0, y_hi: 8.0 },
            ],
        }];
        fig.panels = vec![Panel {
            title: "2".into(),
            series,
            marks: vec![],
            references: vec![marker("one ≈ 1.5×"), marker("two ≈ 1.5×")],
        }];
        let dir = tempfile::tempdir().unwrap();
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        plot::render(&fig, &svg, &png).unwrap();
        let svg = std::fs::read_to_string(svg).unwrap();
        assert!(svg.contains("threads = 2"), "{svg}");
        assert_eq!(svg.lines().filter(|l| l.trim() == "≈ 1.5×").count(), 1, "{svg}");
        let line = format!("stroke=\"#{:02X}{:02X}{:02X}\"", 0x00, 0x72, 0xB2);
        // The legend's sample is a level line; a line joining the two points would slope.
        let slopes = |l: &str| {
            let pts = l.split("points=\"").nth(1).unwrap_or_default();
            let ys: Vec<&str> =
                pts.split_whitespace().filter_map(|p| p.split(',').nth(1)).collect();
            ys.windows(2).any(|w| w[0] != w[1])
        };
        let joined =
            svg.lines().any(|l| l.starts_with("<polyline") && l.contains(&line) && slopes(l));
        assert!(!joined, "categories joined by a line: {svg}");
    }
}

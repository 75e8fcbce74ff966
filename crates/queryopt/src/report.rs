//! The experiments behind `nvmdb scan` and `nvmdb join`: devices made from names, sweeps over
//! selectivity (Fig. 3.1–3.2), measured vs expected pages (Fig. 3.3), join grids (Fig. 3.4,
//! Table 3.1), with the thesis's numbers beside ours.

use crate::device::{
    probe, BlockDevice, DeviceProfile, FileDevice, MemDevice, Modelled, ProbeResult,
};
use crate::error::{invalid, Error, Result};
use crate::join::{self, JoinAlgo, JoinParams, JoinRun};
use crate::optimizer::{measured_breakevens, Breakeven, CostModel};
use crate::pages::{cardenas, page_fraction, yao, PagesRow};
use crate::scan::{self, ScanOp, ScanParams, ScanRun};
use crate::wisconsin::{load, Layout, Table};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Selectivities of the default scan sweep (Fig. 3.1–3.2 span 0–10% and beyond).
pub const DEFAULT_SELECTIVITIES: &[f64] = &[
    1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.04, 0.07, 0.1, 0.2, 0.5,
    1.0,
];
/// Selectivities of the measured-vs-expected pages comparison.
pub const PAGES_SELECTIVITIES: &[f64] = &[1e-4, 1e-3, 0.005, 0.01, 0.02, 0.05, 0.1];
/// Random reads the file probe issues.
const PROBE_READS: u64 = 2000;

/// Which device to run on.
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceKind {
    SsdModel,
    DiskModel,
    /// A file in this directory (or this file path).
    File(PathBuf),
}

impl DeviceKind {
    /// `ssd-model`, `disk-model`, `file` (with `path`).
    pub fn parse(s: &str, path: &Path) -> Result<DeviceKind> {
        match s {
            "ssd-model" | "ssd" => Ok(DeviceKind::SsdModel),
            "disk-model" | "disk" => Ok(DeviceKind::DiskModel),
            "file" => Ok(DeviceKind::File(path.to_path_buf())),
            other => Err(invalid("device", other, "ssd-model, disk-model or file (with --path)")),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            DeviceKind::SsdModel => "ssd-model",
            DeviceKind::DiskModel => "disk-model",
            DeviceKind::File(_) => "file",
        }
    }
}

/// A device ready for loading, and what is known about it.
pub struct Opened {
    pub dev: Box<dyn BlockDevice>,
    pub profile: Option<DeviceProfile>,
    pub direct: Option<bool>,
    pub path: Option<String>,
}

/// Makes the device; `rows` scales the disk model (see [`DeviceProfile::disk`]).
pub fn open(kind: &DeviceKind, rows: u64, allow_buffered: bool) -> Result<Opened> {
    Ok(match kind {
        DeviceKind::SsdModel => {
            let p = DeviceProfile::ssd();
            let dev = Box::new(Modelled::new(MemDevice::new(), p.clone()));
            Opened { dev, profile: Some(p), direct: None, path: None }
        }
        DeviceKind::DiskModel => {
            let p = DeviceProfile::disk(rows);
            let dev = Box::new(Modelled::new(MemDevice::new(), p.clone()));
            Opened { dev, profile: Some(p), direct: None, path: None }
        }
        DeviceKind::File(path) => {
            let file = if path.is_dir() {
                path.join(format!("queryopt-{}.tbl", std::process::id()))
            } else {
                path.clone()
            };
            let dev = FileDevice::create(&file, allow_buffered)?;
            let direct = dev.direct();
            if !direct {
                eprintln!(
                    "notice: {} refuses O_DIRECT; reading through the page cache, so times \
                     are memory speed, not the device's",
                    file.display()
                );
            }
            let path = Some(file.display().to_string());
            Opened { dev: Box::new(dev), profile: None, direct: Some(direct), path }
        }
    })
}

/// Options of a scan sweep.
#[derive(Clone, Debug)]
pub struct ScanOptions {
    pub rows: u64,
    pub tuples_per_page: usize,
    pub selectivities: Vec<f64>,
    pub operators: Vec<ScanOp>,
    pub params: ScanParams,
    pub seed: u64,
    /// Stop running index and rowid-sort scans once slower than this many times the best.
    pub prune_factor: f64,
    pub allow_buffered: bool,
}

/// A scan sweep on one device.
#[derive(Clone, Debug, Serialize)]
pub struct ScanDeviceReport {
    pub device: String,
    pub path: Option<String>,
    pub direct_io: Option<bool>,
    /// The modelled device's profile, or the one measured by the probe on a file.
    pub profile: DeviceProfile,
    pub probe: Option<ProbeResult>,
    pub table: Layout,
    pub table_pages: u64,
    pub load_s: f64,
    pub runs: Vec<ScanRun>,
    pub best: Vec<(f64, ScanOp)>,
    pub measured_breakevens: Vec<Breakeven>,
    /// On a modelled device: the crossings of the modelled I/O time alone.
    pub measured_io_breakevens: Vec<Breakeven>,
    pub model_breakevens: Vec<Breakeven>,
}

/// What the thesis reports, to print beside ours.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    pub source: &'static str,
    pub claim: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScanReport {
    pub devices: Vec<ScanDeviceReport>,
    /// Per selectivity, what the disk-optimal choice costs on the SSD (§3.3's question: does an
    /// SSD-oblivious optimiser lose much?).
    pub disk_choice_on_ssd: Vec<CrossChoice>,
    pub thesis: Vec<Claim>,
}

/// The disk model's best operator run on the SSD model.
#[derive(Clone, Debug, Serialize)]
pub struct CrossChoice {
    pub selectivity: f64,
    pub disk_best: ScanOp,
    pub ssd_best: ScanOp,
    /// SSD time of the disk's choice over the SSD's best, minus one; `None` if the disk's
    /// choice was pruned on the SSD (more than `--prune` times slower).
    pub ssd_penalty: Option<f64>,
}

fn cross_choices(devices: &[ScanDeviceReport]) -> Vec<CrossChoice> {
    let find = |name: &str| devices.iter().find(|d| d.device == name);
    let (Some(disk), Some(ssd)) = (find("disk-model"), find("ssd-model")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for &(s, disk_best) in &disk.best {
        let Some(&(_, ssd_best)) = ssd.best.iter().find(|b| b.0 == s) else { continue };
        let t = |op: ScanOp| {
            ssd.runs.iter().find(|r| r.operator == op && r.selectivity == s).map(|r| r.time_s)
        };
        let ssd_penalty = match (t(disk_best), t(ssd_best)) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b - 1.0),
            _ => None,
        };
        out.push(CrossChoice { selectivity: s, disk_best, ssd_best, ssd_penalty });
    }
    out
}

/// Runs the scan sweep on each device.
pub fn scan_report(kinds: &[DeviceKind], opts: &ScanOptions) -> Result<ScanReport> {
    let mut devices = Vec::new();
    for kind in kinds {
        devices.push(scan_device(kind, opts)?);
    }
    let thesis = vec![
        Claim {
            source: "thesis §3.3, Fig. 3.1",
            claim: "disk: relation scan best above 4% selectivity, rowid-sort scan from about \
                    0.1% to 4%, index scan only for vanishingly small selectivities",
        },
        Claim {
            source: "thesis §3.3, Fig. 3.2",
            claim: "SSD: both break-evens shift up; the index scan's break-even with the \
                    relation scan moves above 0.5%; the rowid-sort range narrows",
        },
    ];
    Ok(ScanReport { disk_choice_on_ssd: cross_choices(&devices), devices, thesis })
}

fn scan_device(kind: &DeviceKind, opts: &ScanOptions) -> Result<ScanDeviceReport> {
    let mut opened = open(kind, opts.rows, opts.allow_buffered)?;
    let layout = Layout::new(opts.rows, opts.tuples_per_page)?;
    let t = Instant::now();
    let table = load(opened.dev.as_mut(), layout, 0, true, opts.seed)?;
    let load_s = t.elapsed().as_secs_f64();
    let (profile, probe) = match opened.profile.take() {
        Some(p) => (p, None),
        None => {
            let mut pr = probe(opened.dev.as_mut(), PROBE_READS, opts.seed)?;
            pr.direct = opened.direct.unwrap_or(false);
            let bytes_per_s = pr.sequential_mb_per_s * 1e6;
            let p = DeviceProfile::measured("file", pr.random_read_us * 1e3, bytes_per_s);
            (p, Some(pr))
        }
    };
    let mut sels = opts.selectivities.clone();
    sels.sort_by(f64::total_cmp);
    sels.dedup();
    let mut runs: Vec<ScanRun> = Vec::new();
    let mut pruned: Vec<ScanOp> = Vec::new();
    let mut best = Vec::new();
    for &s in &sels {
        let mut here: Vec<ScanRun> = Vec::new();
        for &op in &opts.operators {
            if pruned.contains(&op) {
                continue;
            }
            here.push(scan::run(opened.dev.as_mut(), &table, op, s, opts.params)?);
        }
        check_same_aggregate(&here)?;
        let Some(fastest) = here.iter().min_by(|a, b| a.time_s.total_cmp(&b.time_s)) else {
            continue;
        };
        let fastest_s = fastest.time_s;
        best.push((s, fastest.operator));
        for r in &here {
            let grows = r.operator != ScanOp::Relation;
            if grows && r.time_s > opts.prune_factor * fastest_s {
                pruned.push(r.operator);
            }
        }
        runs.extend(here);
    }
    let modelled = probe.is_none();
    let model = CostModel {
        profile: profile.clone(),
        rows: opts.rows,
        tuples_per_page: opts.tuples_per_page as u64,
        buffer_pages: opts.params.buffer_pages as u64,
    };
    Ok(ScanDeviceReport {
        device: kind.name().into(),
        path: opened.path,
        direct_io: opened.direct,
        profile,
        probe,
        table: layout,
        table_pages: table.pages(),
        load_s,
        measured_breakevens: measured_breakevens(&runs, |r| r.time_s),
        measured_io_breakevens: if modelled {
            measured_breakevens(&runs, |r| r.io_s)
        } else {
            Vec::new()
        },
        model_breakevens: model.breakevens(),
        runs,
        best,
    })
}

fn check_same_aggregate(runs: &[ScanRun]) -> Result<()> {
    if let Some(first) = runs.first() {
        if let Some(bad) = runs.iter().find(|r| r.aggregate != first.aggregate) {
            return Err(Error::OutOfRange(format!(
                "{} and {} disagree at selectivity {}: {:?} vs {:?}",
                first.operator.name(),
                bad.operator.name(),
                first.selectivity,
                first.aggregate,
                bad.aggregate
            )));
        }
    }
    Ok(())
}

/// Measured distinct pages of rowid-sort scans vs the expected pages, per tuples-per-page.
#[derive(Clone, Debug, Serialize)]
pub struct PagesReport {
    pub rows: u64,
    pub formula: &'static str,
    pub table: Vec<PagesRow>,
    pub thesis: Vec<Claim>,
}

pub fn pages_report(rows: u64, tpps: &[usize], sels: &[f64], seed: u64) -> Result<PagesReport> {
    let mut table = Vec::new();
    for &tpp in tpps {
        let layout = Layout::new(rows, tpp)?;
        let mut dev = MemDevice::new();
        let t: Table = load(&mut dev, layout, 0, true, seed)?;
        let params = ScanParams { extent_pages: 32, buffer_pages: 1 };
        for &s in sels {
            let run = scan::run(&mut dev, &t, ScanOp::RowidSort, s, params)?;
            let k = run.aggregate.count;
            // Yao assumes full pages; a last partial page is negligible at these sizes.
            let n = t.pages() * tpp as u64;
            let expected = yao(n, tpp as u64, k);
            table.push(PagesRow {
                tuples_per_page: tpp,
                selectivity: s,
                tuples_selected: k,
                table_pages: t.pages(),
                measured_pages: run.data_pages_read,
                expected_pages_yao: expected,
                expected_pages_cardenas: cardenas(t.pages() as f64, k as f64),
                expected_fraction_large_table: page_fraction(s, tpp as f64),
                error_vs_yao: if expected > 0.0 {
                    run.data_pages_read as f64 / expected - 1.0
                } else {
                    0.0
                },
            });
        }
    }
    Ok(PagesReport {
        rows,
        formula: "Yao (1977) exact expectation m(1 - C(n-p,k)/C(n,k)), the expectation Yue & \
                  Wong (1975) compute; the thesis does not print the formula",
        table,
        thesis: vec![Claim {
            source: "thesis §3.3, Fig. 3.3",
            claim: "with 19 tuples per 4 KiB page (Wisconsin), 29 (TPC-H lineitem) or 30 \
                    (orders), index access touches most pages even at a few percent selectivity",
        }],
    })
}

/// Options of a join grid.
#[derive(Clone, Debug)]
pub struct JoinOptions {
    /// (rows of R, rows of S) pairs.
    pub sizes: Vec<(u64, u64)>,
    pub projectivities: Vec<f64>,
    pub algorithms: Vec<JoinAlgo>,
    pub memory_pages: usize,
    pub extent_pages: usize,
    pub seed: u64,
    pub allow_buffered: bool,
}

/// One join configuration on one device: every algorithm's run and their spread.
#[derive(Clone, Debug, Serialize)]
pub struct JoinPoint {
    pub device: String,
    pub rows_r: u64,
    pub rows_s: u64,
    pub projectivity: f64,
    pub runs: Vec<JoinRun>,
    /// (slowest − fastest) / fastest over the algorithms run, as a fraction.
    pub spread: f64,
    pub best: JoinAlgo,
}

/// Per configuration and algorithm, the disk model's time over the SSD model's.
#[derive(Clone, Debug, Serialize)]
pub struct Speedup {
    pub rows_r: u64,
    pub rows_s: u64,
    pub projectivity: f64,
    pub algorithm: JoinAlgo,
    pub disk_s: f64,
    pub ssd_s: f64,
    pub ssd_speedup: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct JoinReport {
    pub memory_pages: usize,
    pub points: Vec<JoinPoint>,
    pub ssd_vs_disk: Vec<Speedup>,
    pub thesis: Vec<Claim>,
}

pub fn join_report(kinds: &[DeviceKind], opts: &JoinOptions) -> Result<JoinReport> {
    let mut points = Vec::new();
    for kind in kinds {
        for &(rows_r, rows_s) in &opts.sizes {
            let mut opened = open(kind, rows_r.max(rows_s), opts.allow_buffered)?;
            let dev = opened.dev.as_mut();
            let r = load(dev, Layout::new(rows_r, 19)?, 0, false, opts.seed)?;
            let s = load(dev, Layout::new(rows_s, 19)?, r.end_page(), false, opts.seed + 1)?;
            let temp = s.end_page();
            for &proj in &opts.projectivities {
                let params = JoinParams {
                    memory_pages: opts.memory_pages,
                    projectivity: proj,
                    extent_pages: opts.extent_pages,
                };
                let mut runs = Vec::new();
                for &algo in &opts.algorithms {
                    runs.push(join::run(dev, &r, &s, algo, params, temp)?);
                }
                if let Some(bad) = runs.iter().find(|x| x.aggregate != runs[0].aggregate) {
                    return Err(Error::OutOfRange(format!(
                        "{} and {} disagree: {:?} vs {:?}",
                        runs[0].algorithm.name(),
                        bad.algorithm.name(),
                        runs[0].aggregate,
                        bad.aggregate
                    )));
                }
                let times: Vec<f64> = runs.iter().map(|x| x.time_s).collect();
                let min = times.iter().copied().fold(f64::INFINITY, f64::min);
                let max = times.iter().copied().fold(0.0, f64::max);
                let best = runs
                    .iter()
                    .min_by(|a, b| a.time_s.total_cmp(&b.time_s))
                    .map(|x| x.algorithm)
                    .unwrap_or(JoinAlgo::SortMerge);
                points.push(JoinPoint {
                    device: kind.name().into(),
                    rows_r,
                    rows_s,
                    projectivity: proj,
                    spread: if min > 0.0 { max / min - 1.0 } else { 0.0 },
                    best,
                    runs,
                });
            }
        }
    }
    let ssd_vs_disk = speedups(&points);
    Ok(JoinReport {
        memory_pages: opts.memory_pages,
        points,
        ssd_vs_disk,
        thesis: vec![
            Claim {
                source: "thesis §3.4, Fig. 3.4, Table 3.1",
                claim: "Flash SSD 5x to 6x faster than disk for both join algorithms",
            },
            Claim {
                source: "thesis §3.4, Table 3.1",
                claim: "sort-merge vs hybrid hash differ typically by over 20% on disk, often by \
                        less than 1% on SSD",
            },
        ],
    })
}

fn speedups(points: &[JoinPoint]) -> Vec<Speedup> {
    let mut out = Vec::new();
    for d in points.iter().filter(|p| p.device == "disk-model") {
        let same = |p: &&JoinPoint| {
            p.device == "ssd-model"
                && p.rows_r == d.rows_r
                && p.rows_s == d.rows_s
                && p.projectivity == d.projectivity
        };
        let Some(s) = points.iter().find(same) else { continue };
        for dr in &d.runs {
            if let Some(sr) = s.runs.iter().find(|x| x.algorithm == dr.algorithm) {
                out.push(Speedup {
                    rows_r: d.rows_r,
                    rows_s: d.rows_s,
                    projectivity: d.projectivity,
                    algorithm: dr.algorithm,
                    disk_s: dr.time_s,
                    ssd_s: sr.time_s,
                    ssd_speedup: dr.time_s / sr.time_s.max(1e-12),
                });
            }
        }
    }
    out
}

fn pct(x: f64) -> String {
    let p = x * 100.0;
    if p == 0.0 {
        "0%".into()
    } else if p < 0.01 {
        format!("{p:.5}%")
    } else if p < 1.0 {
        format!("{p:.3}%")
    } else {
        format!("{p:.1}%")
    }
}

fn breakevens_text(list: &[Breakeven]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = list
        .iter()
        .map(|b| {
            let approx = if b.bracketed { "~" } else { "" };
            format!("{}→{} at {approx}{}", b.from.name(), b.to.name(), pct(b.selectivity))
        })
        .collect();
    parts.join(", ")
}

pub fn scan_text(r: &ScanReport) -> String {
    let mut out = String::new();
    for d in &r.devices {
        out += &format!(
            "{}: {} rows, {} tuples/page, {} pages{}\n",
            d.device,
            d.table.rows,
            d.table.tuples_per_page,
            d.table_pages,
            match (&d.probe, d.direct_io) {
                (Some(p), Some(direct)) => format!(
                    "; probe: {:.1} µs random 4 KiB read, {:.0} MB/s sequential{}",
                    p.random_read_us,
                    p.sequential_mb_per_s,
                    if direct { " (O_DIRECT)" } else { " (buffered!)" }
                ),
                _ => String::new(),
            }
        );
        out += "  selectivity    index_s  rowid-sort_s  relation_s  best\n";
        let mut sels: Vec<f64> = d.runs.iter().map(|x| x.selectivity).collect();
        sels.dedup();
        for s in sels {
            let t = |op: ScanOp| {
                d.runs
                    .iter()
                    .find(|x| x.operator == op && x.selectivity == s)
                    .map(|x| format!("{:.4}", x.time_s))
                    .unwrap_or_else(|| "-".into())
            };
            let best = d.best.iter().find(|b| b.0 == s).map(|b| b.1.name()).unwrap_or("-");
            out += &format!(
                "  {:>11} {:>10} {:>13} {:>11}  {best}\n",
                pct(s),
                t(ScanOp::Index),
                t(ScanOp::RowidSort),
                t(ScanOp::Relation)
            );
        }
        out += &format!("  break-even (measured): {}\n", breakevens_text(&d.measured_breakevens));
        if !d.measured_io_breakevens.is_empty() {
            let io = breakevens_text(&d.measured_io_breakevens);
            out += &format!("  break-even (I/O only): {io}\n");
        }
        out += &format!("  break-even (model):    {}\n", breakevens_text(&d.model_breakevens));
    }
    if !r.disk_choice_on_ssd.is_empty() {
        out += "disk's choice on the SSD: selectivity disk_best ssd_best ssd_penalty\n";
        for c in &r.disk_choice_on_ssd {
            let penalty = c.ssd_penalty.map(pct).unwrap_or_else(|| "pruned".into());
            out += &format!(
                "  {:>11} {:<11} {:<11} {penalty}\n",
                pct(c.selectivity),
                c.disk_best.name(),
                c.ssd_best.name()
            );
        }
    }
    for c in &r.thesis {
        out += &format!("thesis ({}): {}\n", c.source, c.claim);
    }
    out
}

pub fn pages_text(r: &PagesReport) -> String {
    let mut out = format!("{} rows; expected = {}\n", r.rows, r.formula);
    out += "  tpp  selectivity  tuples   pages  measured  expected(Yao)  error   Fig3.3 fraction\n";
    for row in &r.table {
        out += &format!(
            "  {:>3} {:>12} {:>7} {:>7} {:>9} {:>14.1} {:>+6.2}%  {:>6.1}%\n",
            row.tuples_per_page,
            pct(row.selectivity),
            row.tuples_selected,
            row.table_pages,
            row.measured_pages,
            row.expected_pages_yao,
            row.error_vs_yao * 100.0,
            row.expected_fraction_large_table * 100.0
        );
    }
    out
}

pub fn join_text(r: &JoinReport) -> String {
    let mut out = format!("memory limit {} pages\n", r.memory_pages);
    out += "  device       R rows    S rows  proj  algorithm     time_s   io_s  spill_pages  \
            peak_mem  spread\n";
    for p in &r.points {
        for (i, x) in p.runs.iter().enumerate() {
            out += &format!(
                "  {:<11} {:>7} {:>9} {:>5} {:<12} {:>8.3} {:>6.3} {:>12} {:>9} {}\n",
                p.device,
                p.rows_r,
                p.rows_s,
                pct(p.projectivity),
                x.algorithm.name(),
                x.time_s,
                x.io_s,
                x.detail.spill_pages_written,
                x.peak_memory_pages,
                if i == 0 { pct(p.spread) } else { String::new() }
            );
        }
    }
    for s in &r.ssd_vs_disk {
        out += &format!(
            "  SSD speed-up {}x{} proj {} {}: {:.2}x\n",
            s.rows_r,
            s.rows_s,
            pct(s.projectivity),
            s.algorithm.name(),
            s.ssd_speedup
        );
    }
    for c in &r.thesis {
        out += &format!("thesis ({}): {}\n", c.source, c.claim);
    }
    out
}

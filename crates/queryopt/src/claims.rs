//! The thesis's ch. III numbers (§3.1, §3.3 Figs. 3.1–3.3, §3.4 Fig. 3.4 and Table 3.1) judged
//! beside ours under [`crate::verdict`]'s rules. Table 2.1's device parameters are inputs of
//! the accounted disk and SSD models, listed apart; the break-evens, speed-ups and winners the
//! operators produce on them are the outputs. Each cause is computed from the run it explains.

use crate::device::DeviceProfile;
use crate::join::JoinAlgo;
use crate::report::{JoinPoint, JoinReport, PagesReport, ScanDeviceReport, ScanReport};
use crate::scan::{ScanOp, ScanRun};
use crate::verdict::{printed, Bound, Claim, Role};

const PAGE: f64 = 4096.0;

fn device<'a>(r: &'a ScanReport, name: &str) -> Option<&'a ScanDeviceReport> {
    r.devices.iter().find(|d| d.device == name)
}

/// Where operator `a`'s time first exceeds `b`'s along the selectivity grid (log-interpolated);
/// where `a` was pruned as far too slow, the log-midpoint of the bracketing grid points.
pub fn crossing(runs: &[ScanRun], a: ScanOp, b: ScanOp, time: fn(&ScanRun) -> f64) -> Option<f64> {
    let mut sels: Vec<f64> = runs.iter().map(|r| r.selectivity).filter(|s| *s > 0.0).collect();
    sels.sort_by(f64::total_cmp);
    sels.dedup();
    let t =
        |op: ScanOp, s: f64| runs.iter().find(|r| r.operator == op && r.selectivity == s).map(time);
    for w in sels.windows(2) {
        let (s0, s1) = (w[0], w[1]);
        let (Some(a0), Some(b0)) = (t(a, s0), t(b, s0)) else { continue };
        if a0 > b0 {
            return Some(s0);
        }
        match (t(a, s1), t(b, s1)) {
            (Some(a1), Some(b1)) if a1 > b1 && a0 > 0.0 && b0 > 0.0 && a1 > 0.0 && b1 > 0.0 => {
                let (d0, d1) = ((a0 / b0).ln(), (a1 / b1).ln());
                let f = if d1 != d0 { -d0 / (d1 - d0) } else { 0.5 };
                return Some((s0.ln() + f.clamp(0.0, 1.0) * (s1.ln() - s0.ln())).exp());
            }
            (None, Some(_)) => return Some((s0 * s1).sqrt()),
            _ => {}
        }
    }
    None
}

fn pct(v: f64) -> String {
    format!("{:.3}%", v * 100.0)
}

/// Table 2.1's parameters as the models hold them: inputs, never reproduced.
pub fn input_claims() -> Vec<Claim> {
    let (ssd, disk) = (DeviceProfile::ssd(), DeviceProfile::disk(10_000_000));
    let disk_random_ms = (disk.avg_seek_ns + 0.5 * 60e9 / disk.rpm) / 1e6;
    let input = |what, paper, ours: f64, cause: &str| {
        Claim::new(
            what,
            "Table 2.1",
            Role::Input,
            Bound::Paper,
            paper,
            &[ours],
            (paper, paper),
            cause,
        )
    };
    let model = "an input of the accounted device model";
    vec![
        input("SSD random 4 KiB read, µs", 90.0, ssd.access_ns / 1e3, model),
        input(
            "disk random read (7 ms seek + half a 10K rpm turn), ms",
            10.0,
            disk_random_ms,
            model,
        ),
        input("SSD sequential read, MB/s", 190.0, ssd.seq_bytes_per_s / 1e6, model),
        input("disk sequential read, MB/s", 120.0, disk.seq_bytes_per_s / 1e6, model),
        Claim::new(
            "SSD over disk, random reads (\"over 100×\")",
            "§3.1",
            Role::Input,
            Bound::Paper,
            100.0,
            &[disk_random_ms * 1e3 / (ssd.access_ns / 1e3)],
            (100.0, f64::INFINITY),
            "restates the two latencies above: not a reproduction",
        ),
        Claim::new(
            "SSD over disk, sequential reads (\"modest (2×)\")",
            "§3.1",
            Role::Input,
            Bound::Paper,
            2.0,
            &[ssd.seq_bytes_per_s / disk.seq_bytes_per_s],
            (2.0, 2.0),
            "restates the two bandwidths above: not a reproduction",
        ),
    ]
}

/// Figs. 3.1 and 3.2 (§3.3): break-evens on the two models.
pub fn scan_claims(r: &ScanReport) -> Vec<Claim> {
    let mut out = Vec::new();
    let total = |x: &ScanRun| x.time_s;
    let io = |x: &ScanRun| x.io_s;
    let out_paper = Role::Output;
    if let Some(d) = device(r, "disk-model") {
        let c_total = crossing(&d.runs, ScanOp::RowidSort, ScanOp::Relation, total);
        let c_io = crossing(&d.runs, ScanOp::RowidSort, ScanOp::Relation, io);
        let band = near_tie(&d.runs, 0.005, 0.2);
        if let (Some(t), Some(i)) = (c_total, c_io) {
            out.push(Claim::new(
                "disk: relation scan best above (rowid-sort → relation crossing)",
                "§3.3, Fig. 3.1",
                out_paper,
                Bound::Paper,
                0.04,
                &[i, t],
                printed(0.04, 2),
                format!(
                    "accounted disk model: the rowid-sort scan's modelled I/O alone crosses the \
                     relation scan at {}, I/O + this machine's CPU at {} (ours is the range of \
                     the two); from 0.5% to 20% their times are within {} of each other, so \
                     small terms (CPU per tuple, index leaves) place the crossing; DB2's 2011 \
                     CPU and I/O path are not ours",
                    pct(i),
                    pct(t),
                    pct(band)
                ),
            ));
        }
        let first = d.runs.iter().map(|x| x.selectivity).fold(f64::INFINITY, f64::min);
        let ix = crossing(&d.runs, ScanOp::Index, ScanOp::RowidSort, total).unwrap_or(first);
        out.push(Claim::new(
            "disk: rowid-sort scan best from (index → rowid-sort crossing)",
            "§3.3, Fig. 3.1",
            out_paper,
            Bound::Paper,
            0.001,
            &[ix],
            printed(0.001, 3),
            format!(
                "our rowid-sort scan keeps its rowid list in memory (no temporary table, no I/O \
                 charged), so at one tuple it reads the same leaf and page as the index scan and \
                 ties; it is best from the grid's first point ({}); the thesis's 0.1% implies a \
                 setup cost (DB2's temporary table) the model does not charge",
                pct(ix)
            ),
        ));
    }
    if let Some(s) = device(r, "ssd-model") {
        if let Some(c) = crossing(&s.runs, ScanOp::Index, ScanOp::Relation, total) {
            out.push(Claim::new(
                "SSD: index vs relation scan break-even above 0.5%",
                "§3.3, Fig. 3.2",
                out_paper,
                Bound::Paper,
                0.005,
                &[c],
                (0.005, 1.0),
                format!(
                    "accounted SSD model: the index scan crosses the relation scan at {}",
                    pct(c)
                ),
            ));
        }
    }
    if let (Some(d), Some(s)) = (device(r, "disk-model"), device(r, "ssd-model")) {
        let c = |dev: &ScanDeviceReport, f: fn(&ScanRun) -> f64| {
            crossing(&dev.runs, ScanOp::RowidSort, ScanOp::Relation, f)
        };
        if let (Some(dt), Some(di), Some(st), Some(si)) =
            (c(d, total), c(d, io), c(s, total), c(s, io))
        {
            out.push(Claim::new(
                "rowid-sort → relation crossing moves up from disk to SSD (SSD / disk)",
                "§3.3, Fig. 3.2",
                out_paper,
                Bound::Paper,
                1.0,
                &[si / di, st / dt],
                (1.0 + 1e-9, f64::INFINITY),
                format!(
                    "on modelled I/O alone it moves up ({} → {}); with this machine's CPU added \
                     the disk's crossing lands at the far end of its near-tie band ({} → {}), \
                     so the direction depends on which measure is used",
                    pct(di),
                    pct(si),
                    pct(dt),
                    pct(st)
                ),
            ));
        }
        let differing: Vec<f64> = r
            .disk_choice_on_ssd
            .iter()
            // A tie (index and rowid-sort read the same pages at one tuple) is no wrong choice:
            // count the points where the disk's choice costs over 1% on the SSD, or was pruned.
            .filter(|x| x.disk_best != x.ssd_best && x.ssd_penalty.is_none_or(|p| p > 0.01))
            .map(|x| x.selectivity)
            .collect();
        let decades = match (differing.first(), differing.last()) {
            (Some(a), Some(b)) if *a > 0.0 => (b / a).log10(),
            _ => 0.0,
        };
        out.push(Claim::new(
            "selectivities where disk and SSD choose differently span (decades)",
            "§3.3, Fig. 3.2 caption (\"so narrow\")",
            out_paper,
            Bound::Ours,
            0.0,
            &[decades],
            (0.0, 1.0),
            format!(
                "\"narrow\" is not a number: one decade is our tolerance; the disk's choice \
                 costs over 1% on the SSD at {} of {} grid points, from the first to the last",
                differing.len(),
                r.disk_choice_on_ssd.len()
            ),
        ));
    }
    out
}

/// The largest |rowid-sort / relation − 1| between selectivities `lo` and `hi`.
fn near_tie(runs: &[ScanRun], lo: f64, hi: f64) -> f64 {
    let t = |op: ScanOp, s: f64| {
        runs.iter().find(|r| r.operator == op && r.selectivity == s).map(|r| r.time_s)
    };
    runs.iter()
        .filter(|r| r.operator == ScanOp::Relation && r.selectivity >= lo && r.selectivity <= hi)
        .filter_map(|r| t(ScanOp::RowidSort, r.selectivity).map(|x| (x / r.time_s - 1.0).abs()))
        .fold(0.0, f64::max)
}

/// Fig. 3.3 (§3.3): pages read at a few percent selectivity.
pub fn pages_claims(r: &PagesReport) -> Vec<Claim> {
    let at: Vec<f64> = r
        .table
        .iter()
        .filter(|x| (x.selectivity - 0.05).abs() < 1e-12 && x.table_pages > 0)
        .map(|x| x.measured_pages as f64 / x.table_pages as f64)
        .collect();
    if at.is_empty() {
        return Vec::new();
    }
    vec![Claim::new(
        "pages read at 5% selectivity, 19/29/30 tuples per page (fraction of the table)",
        "§3.3, Fig. 3.3",
        Role::Output,
        Bound::Paper,
        0.5,
        &at,
        (0.5 + 1e-9, 1.0),
        "the measured distinct pages of rowid-sort scans on our randomly placed tables",
    )]
}

fn geo(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len().max(1) as f64).exp()
}

fn time(p: &JoinPoint, a: JoinAlgo) -> Option<f64> {
    p.runs.iter().find(|r| r.algorithm == a).map(|r| r.time_s)
}

/// Fig. 3.4 and Table 3.1 (§3.4): speed-ups, winners and spreads on the scaled grid.
pub fn join_claims(r: &JoinReport) -> Vec<Claim> {
    let mut out = Vec::new();
    let mut projs: Vec<f64> = r.points.iter().map(|p| p.projectivity).collect();
    projs.sort_by(f64::total_cmp);
    projs.dedup();
    for &proj in &projs {
        let ups: Vec<f64> = r
            .ssd_vs_disk
            .iter()
            .filter(|x| x.projectivity == proj)
            .map(|x| x.ssd_speedup)
            .collect();
        if ups.is_empty() {
            continue;
        }
        let disk: Vec<&JoinPoint> = r
            .points
            .iter()
            .filter(|p| p.device == "disk-model" && p.projectivity == proj)
            .collect();
        let runs = disk.iter().flat_map(|p| p.runs.iter());
        let (mut transfer, mut io, mut random, mut requests) = (0.0, 0.0, 0u64, 0u64);
        for x in runs {
            let pages = (x.io.pages_read + x.io.pages_written) as f64;
            transfer += pages * PAGE / DeviceProfile::disk(1).seq_bytes_per_s;
            io += x.io_s;
            random += x.io.random_requests;
            requests += x.io.read_requests + x.io.write_requests;
        }
        let what: &'static str = if proj < 0.1 {
            "SSD speed-up over disk, 5% projectivity (both algorithms, every size)"
        } else {
            "SSD speed-up over disk, 25% projectivity (both algorithms, every size)"
        };
        out.push(Claim::groups(
            what,
            "§3.4, Fig. 3.4, Table 3.1",
            Role::Output,
            Bound::Paper,
            5.5,
            &ups,
            (5.0, 6.0),
            format!(
                "accounted models, so the ratio is the models' I/O mix: on disk {:.0}% of the \
                 modelled I/O time is sequential transfer and {} of {} requests pay a seek; \
                 transfer alone gives 190/120 = 1.58×, each seek 10 ms vs 90 µs = 111×, and \
                 ours falls between ({:.1}–{:.1}×, geometric mean {:.1}×); DB2's request \
                 pattern, which set the thesis's mix, is not known",
                100.0 * transfer / io.max(1e-12),
                random,
                requests,
                ups.iter().copied().fold(f64::INFINITY, f64::min),
                ups.iter().copied().fold(0.0, f64::max),
                geo(&ups)
            ),
        ));
        let winner = if proj < 0.1 { JoinAlgo::SortMerge } else { JoinAlgo::HybridHash };
        let wins = disk.iter().filter(|p| p.best == winner).count() as f64;
        let n = disk.len().max(1) as f64;
        let (paper, what): (f64, &'static str) = if proj < 0.1 {
            (1.0, "disk, 5% projectivity: sort-merge wins (fraction of sizes)")
        } else {
            (5.0 / 6.0, "disk, 25% projectivity: hybrid hash wins (fraction of sizes)")
        };
        let io_of = |a: JoinAlgo| -> (u64, u64, f64) {
            let mut t = (0, 0, 0.0);
            for p in &disk {
                if let Some(x) = p.runs.iter().find(|x| x.algorithm == a) {
                    t.0 += x.io.read_requests + x.io.write_requests;
                    t.1 += x.io.random_requests;
                    t.2 += x.io_s;
                }
            }
            t
        };
        let (sm, hh) = (io_of(JoinAlgo::SortMerge), io_of(JoinAlgo::HybridHash));
        out.push(Claim::new(
            what,
            "§3.4, Table 3.1",
            Role::Output,
            Bound::Paper,
            paper,
            &[wins / n],
            (paper, 1.0),
            format!(
                "accounted disk model: over the sizes sort-merge issues {} requests ({} seeks, \
                 {:.1} s of modelled I/O) and hybrid hash {} ({} seeks, {:.1} s); the winner is \
                 the one the model charges less I/O + CPU, and DB2's partition sizes and \
                 request pattern, which decided the thesis's winner, are not modelled",
                sm.0, sm.1, sm.2, hh.0, hh.1, hh.2
            ),
        ));
    }
    let spreads = |dev: &str| -> Vec<f64> {
        let mut v: Vec<f64> = r
            .points
            .iter()
            .filter(|p| p.device == dev)
            .filter_map(|p| {
                let (a, b) = (time(p, JoinAlgo::SortMerge)?, time(p, JoinAlgo::HybridHash)?);
                Some(a.max(b) / a.min(b) - 1.0)
            })
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (disk, ssd) = (spreads("disk-model"), spreads("ssd-model"));
    let median = |v: &[f64]| if v.is_empty() { f64::NAN } else { v[v.len() / 2] };
    if !disk.is_empty() && !ssd.is_empty() {
        out.push(Claim::new(
            "disk: sort-merge vs hybrid hash differ (median spread)",
            "§3.4 (\"typically over 20%\")",
            Role::Output,
            Bound::Paper,
            0.2,
            &[median(&disk)],
            (0.2 + 1e-9, f64::INFINITY),
            format!(
                "spreads on the disk model range {:.0}–{:.0}%; the small joins nearly fit memory",
                disk[0] * 100.0,
                disk[disk.len() - 1] * 100.0
            ),
        ));
        out.push(Claim::new(
            "SSD spread over disk spread (medians)",
            "§3.4, Table 3.1 (\"far lower on Flash SSD\")",
            Role::Output,
            Bound::Paper,
            table_3_1_spread_ratio(),
            &[median(&ssd) / median(&disk)],
            (0.0, 1.0 - 1e-9),
            format!(
                "median spread SSD {:.1}% vs disk {:.1}%",
                median(&ssd) * 100.0,
                median(&disk) * 100.0
            ),
        ));
    }
    out
}

/// Table 3.1's run times in seconds, per projectivity (5%, 25%) and size pair (in the order of
/// `cli::TABLE_3_1_GB`): disk sort-merge, disk hybrid hash, SSD sort-merge, SSD hybrid hash.
pub const TABLE_3_1_SECONDS: [[[f64; 4]; 6]; 2] = [
    [
        [187.0, 202.0, 40.0, 34.0],
        [358.0, 451.0, 80.0, 72.0],
        [487.0, 574.0, 103.0, 93.0],
        [649.0, 795.0, 142.0, 140.0],
        [816.0, 997.0, 166.0, 166.0],
        [1084.0, 1189.0, 202.0, 183.0],
    ],
    [
        [236.0, 355.0, 48.0, 48.0],
        [751.0, 662.0, 97.0, 101.0],
        [947.0, 781.0, 125.0, 122.0],
        [1415.0, 1182.0, 174.0, 173.0],
        [1581.0, 1298.0, 199.0, 199.0],
        [2081.0, 1955.0, 250.0, 634.0],
    ],
];

/// The thesis's SSD speed-up (disk ÷ SSD) from Table 3.1: (sort-merge, hybrid hash).
pub fn table_3_1_speedup(projectivity_25: bool, size: usize) -> Option<(f64, f64)> {
    let row = TABLE_3_1_SECONDS.get(usize::from(projectivity_25))?.get(size)?;
    Some((row[0] / row[2], row[1] / row[3]))
}

/// The thesis's own median SSD spread over its median disk spread (Table 3.1, both
/// projectivities): what "far lower on Flash SSD" means in its numbers.
pub fn table_3_1_spread_ratio() -> f64 {
    let mut disk = Vec::new();
    let mut ssd = Vec::new();
    for row in TABLE_3_1_SECONDS.iter().flatten() {
        disk.push(row[0].max(row[1]) / row[0].min(row[1]) - 1.0);
        ssd.push(row[2].max(row[3]) / row[2].min(row[3]) - 1.0);
    }
    disk.sort_by(f64::total_cmp);
    ssd.sort_by(f64::total_cmp);
    ssd[ssd.len() / 2] / disk[disk.len() / 2]
}

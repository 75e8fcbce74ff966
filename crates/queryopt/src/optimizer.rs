//! The access-path choice of thesis §3.3 as an optimiser would make it: analytic I/O costs of
//! the three scans on a [`DeviceProfile`], the cheapest per selectivity, and the break-even
//! selectivities where the choice changes, both from this model and from measured runs.
//!
//! Cost model (I/O only; CPU is what the measured runs add):
//! - relation: one positioning + `P` pages at the sequential rate;
//! - index: one positioned single-page read per leaf and per buffer-pool miss, with
//!   `misses = max(D, k · (1 − B / P))` for `k` matches, `D` distinct pages (Yao), `B` frames;
//! - rowid-sort: the leaves sequentially, then `D` pages in page order; each gap of `g − 1`
//!   unread pages costs, on a disk, the lesser of a short seek + half a rotation and letting the
//!   gap pass under the head, on an SSD one access unless the gap is empty.

use crate::device::DeviceProfile;
use crate::pages::yao;
use crate::scan::{ScanOp, ScanRun};
use crate::wisconsin::INDEX_ENTRIES_PER_PAGE;
use serde::Serialize;

/// A table and the operators' knobs, for costing.
#[derive(Clone, Debug)]
pub struct CostModel {
    pub profile: DeviceProfile,
    pub rows: u64,
    pub tuples_per_page: u64,
    pub buffer_pages: u64,
}

impl CostModel {
    fn pages(&self) -> f64 {
        self.rows.div_ceil(self.tuples_per_page) as f64
    }

    /// A positioned one-page read inside the table (mean distance a third of the table).
    fn random_read_ns(&self) -> f64 {
        let p = &self.profile;
        p.access_ns + p.seek_ns(self.pages() / 3.0) + p.half_rotation_ns() + p.transfer_ns(1.0)
    }

    /// Modelled I/O seconds of `op` at selectivity `s`.
    pub fn cost_s(&self, op: ScanOp, s: f64) -> f64 {
        let p = &self.profile;
        let pages = self.pages();
        let k = (s * self.rows as f64).round();
        let distinct = || yao(self.rows, self.tuples_per_page, k as u64);
        let leaves = (k / INDEX_ENTRIES_PER_PAGE as f64).ceil();
        let ns = match op {
            ScanOp::Relation => p.position_ns(None, 0) + p.transfer_ns(pages),
            ScanOp::Index => {
                let misses = distinct().max(k * (1.0 - self.buffer_pages as f64 / pages).max(0.0));
                (leaves + misses) * self.random_read_ns()
            }
            ScanOp::RowidSort => {
                if k == 0.0 {
                    return 0.0;
                }
                let d = distinct();
                let gap = pages / d; // mean distance between touched pages
                let skip = (gap - 1.0).max(0.0);
                let per_gap = if p.rotating() {
                    p.transfer_ns(skip).min(p.seek_ns(gap) + p.half_rotation_ns())
                } else {
                    // Runs of adjacent pages are one request: a page starts a request unless
                    // its predecessor is also touched.
                    p.access_ns * (1.0 - d / pages)
                };
                p.position_ns(None, 0) + p.transfer_ns(leaves) + d * (per_gap + p.transfer_ns(1.0))
            }
        };
        ns / 1e9
    }

    /// The cheapest operator at `s`.
    pub fn best(&self, s: f64) -> ScanOp {
        let mut best = ScanOp::Relation;
        for op in ScanOp::ALL {
            if self.cost_s(op, s) < self.cost_s(best, s) {
                best = op;
            }
        }
        best
    }

    /// Where the cheapest operator changes, from one tuple to the whole table.
    pub fn breakevens(&self) -> Vec<Breakeven> {
        let lo = 1.0 / self.rows as f64;
        let steps = 400;
        let at = |i: usize| lo * (1.0 / lo).powf(i as f64 / steps as f64);
        let mut out = Vec::new();
        let mut prev = self.best(at(0));
        for i in 1..=steps {
            let s = at(i);
            let now = self.best(s);
            if now != prev {
                // Bisect in log space between at(i - 1) and s.
                let (mut a, mut b) = (at(i - 1).ln(), s.ln());
                for _ in 0..60 {
                    let m = 0.5 * (a + b);
                    if self.best(m.exp()) == prev {
                        a = m;
                    } else {
                        b = m;
                    }
                }
                let sel = (0.5 * (a + b)).exp();
                out.push(Breakeven { from: prev, to: now, selectivity: sel, bracketed: false });
                prev = now;
            }
        }
        out
    }
}

/// Where the best operator changes from `from` (below) to `to` (above).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Breakeven {
    pub from: ScanOp,
    pub to: ScanOp,
    pub selectivity: f64,
    /// True when one curve was not measured at the upper point (pruned as far too slow), so the
    /// crossing is only known to lie between two grid points; the log-midpoint is given.
    pub bracketed: bool,
}

/// The fastest measured operator at each selectivity and the crossings between them,
/// interpolated in log-log space between the grid points that bracket a change.
/// `time` picks the measure: [`ScanRun::time_s`] (what a query takes) or, on a modelled device,
/// [`ScanRun::io_s`] (the device alone, without this machine's CPU).
pub fn measured_breakevens(runs: &[ScanRun], time: fn(&ScanRun) -> f64) -> Vec<Breakeven> {
    let measure = time;
    let mut sels: Vec<f64> = runs.iter().map(|r| r.selectivity).collect();
    sels.sort_by(f64::total_cmp);
    sels.dedup();
    let time = |op: ScanOp, s: f64| {
        runs.iter().find(|r| r.operator == op && r.selectivity == s).map(measure)
    };
    let best = |s: f64| {
        ScanOp::ALL
            .into_iter()
            .filter_map(|op| time(op, s).map(|t| (op, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(op, _)| op)
    };
    let mut out = Vec::new();
    for w in sels.windows(2) {
        let (s0, s1) = (w[0], w[1]);
        let (Some(a), Some(b)) = (best(s0), best(s1)) else { continue };
        if a == b {
            continue;
        }
        let point = match (time(a, s0), time(b, s0), time(a, s1), time(b, s1)) {
            (Some(a0), Some(b0), Some(a1), Some(b1)) if s0 > 0.0 && b0 > 0.0 && b1 > 0.0 => {
                // d(s) = ln(t_a / t_b) goes from <= 0 at s0 to > 0 at s1.
                let (d0, d1) = ((a0 / b0).max(1e-300).ln(), (a1 / b1).max(1e-300).ln());
                let f = if d1 != d0 { -d0 / (d1 - d0) } else { 0.5 };
                Some((s0.ln() + f.clamp(0.0, 1.0) * (s1.ln() - s0.ln())).exp())
            }
            _ => None,
        };
        let bracketed = point.is_none();
        let selectivity = point.unwrap_or_else(|| (s0.max(1e-12) * s1).sqrt());
        out.push(Breakeven { from: a, to: b, selectivity, bracketed });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_prefers_the_relation_scan_sooner_than_ssd() {
        let disk = CostModel {
            profile: DeviceProfile::disk(1_000_000),
            rows: 1_000_000,
            tuples_per_page: 19,
            buffer_pages: 256,
        };
        let ssd = CostModel { profile: DeviceProfile::ssd(), ..disk.clone() };
        let last = |m: &CostModel| m.breakevens().last().map(|b| b.selectivity).unwrap();
        assert!(last(&disk) < last(&ssd));
        assert_eq!(disk.best(0.5), ScanOp::Relation);
        // One tuple: index and rowid-sort scans do the same two reads (leaf, page).
        let (ix, rs) = (ssd.cost_s(ScanOp::Index, 1e-6), ssd.cost_s(ScanOp::RowidSort, 1e-6));
        assert!((ix / rs - 1.0).abs() < 0.01, "{ix} {rs}");
        assert_ne!(ssd.best(0.001), ScanOp::Relation);
        // The relation scan of 52,632 pages at 120 MB/s plus one 10 ms random read.
        let rel = disk.cost_s(ScanOp::Relation, 0.1);
        assert!((rel - (0.010 + 52_632.0 * 4096.0 / 120e6)).abs() < 1e-3, "{rel}");
    }
}

//! Trace-driven Power Routing simulator — thesis app. B §B.5.1–§B.5.3. Each minute a server's
//! budget is its demand in the previous minute (§B.3.3); the current feed assignment stays while
//! it fits with phases within 20% (slack on a server's active feed is granted without
//! rescheduling, §B.3.2), otherwise the scheduler runs. The metric is the least total PDU
//! capacity (all PDUs equal, each phase a third) with zero throttling, with Power Routing and with
//! the static assignment of §B.5.2.
//! Invariant: the reported routed capacity ran the whole trace with no throttled watt, and so
//! (by the schedule's invariant) with every PDU able to absorb any single PDU failure.

use crate::error::{invalid, Result};
use crate::schedule::{self, FeedLoads, Mix, Wiring};
use crate::topology::{Kind, Topology, PHASES};
use crate::trace::{Trace, TraceSpec};
use serde::Serialize;

/// Bisection stops when the bracket is this share of the upper end (0.2%).
const SEARCH_PRECISION: f64 = 0.002;
/// Upper bound on bisection steps (the bracket shrinks 2× per step).
const MAX_SEARCH_STEPS: u32 = 30;

/// One `route` experiment.
#[derive(Clone, Debug, Serialize)]
pub struct RouteSpec {
    pub topology: Kind,
    pub pdus: usize,
    pub servers_per_rack: usize,
    pub mix: Mix,
    pub trace: TraceSpec,
}

/// Capacities for one topology (one group of bars in Fig. B.7), all totals over the PDUs, kW.
/// Every PDU gets the same capacity and each of its phases a third, so a total is 3N times the
/// worst phase's need.
#[derive(Clone, Debug, Serialize)]
pub struct RouteResult {
    pub topology: Kind,
    pub pdus: usize,
    /// Fail-over connectivity c.
    pub connectivity: usize,
    /// Peak of the summed budgets (the solid line of Fig. B.6/B.7).
    pub peak_kw: f64,
    /// (c + 1)/c × peak: perfect fractional balance (the dashed line of Fig. B.6/B.7).
    pub bound_kw: f64,
    /// The LP relaxation's own bound for this wiring: servers split fractionally over their two
    /// feeds, each phase separately (phase balance off), worst minute. The gap to `bound_kw` is
    /// the cost of the wiring (phases, pairs), the gap above it that of rounding whole servers.
    pub lp_bound_kw: f64,
    /// Static assignment balancing each server's mean power (§B.5.2, no Power Routing).
    pub without_routing_kw: f64,
    /// Power Routing: the least capacity with zero throttling over the trace.
    pub with_routing_kw: f64,
    /// 1 − with / without.
    pub saving: f64,
    /// with / bound − 1.
    pub routed_over_bound: f64,
    /// Minutes in which the scheduler ran at the reported capacity.
    pub reschedules: usize,
    /// Of those, minutes whose LP needed (B.3) dropped to be feasible.
    pub phase_balance_relaxed: usize,
    /// Worst phase imbalance at the reported capacity, as a share of a phase's capacity.
    pub max_phase_imbalance: f64,
}

/// What one simulated run at a fixed capacity saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunOutcome {
    /// Requested minus granted power, summed over minutes, kW·min.
    pub throttled_kw_min: f64,
    pub requested_kw_min: f64,
    pub reschedules: usize,
    pub phase_balance_relaxed: usize,
    pub max_phase_imbalance_kw: f64,
}

/// A topology wired for a trace, with the static assignment.
pub struct Setup<'a> {
    pub trace: &'a Trace,
    pub topology: Topology,
    pub wiring: Wiring,
    pub static_active: Vec<u8>,
}

impl<'a> Setup<'a> {
    /// Wires the trace's servers and computes the static assignment: the scheduler's LP and
    /// rounding on each server's mean power (§B.5.2 assumes the mean is known a priori).
    pub fn new(
        trace: &'a Trace,
        kind: Kind,
        pdus: usize,
        servers_per_rack: usize,
        mix: Mix,
    ) -> Result<Self> {
        let topology = Topology::new(kind, pdus)?;
        let wiring = Wiring::layout(&topology, trace.servers(), servers_per_rack, mix)?;
        let minutes = trace.demand_kw.len() as f64;
        let mean: Vec<f64> = (0..trace.servers())
            .map(|s| trace.demand_kw.iter().map(|row| row[s]).sum::<f64>() / minutes)
            .collect();
        let c = topology.connectivity() as f64;
        let ideal_phase_cap = mean.iter().sum::<f64>() * (c + 1.0) / c / (pdus * PHASES) as f64;
        let frac = schedule::fractional(&wiring, &mean, ideal_phase_cap, true)?
            .map_or_else(
                || schedule::fractional(&wiring, &mean, ideal_phase_cap, false),
                |f| Ok(Some(f)),
            )?
            .ok_or_else(|| invalid("layout", kind, "static assignment LP infeasible"))?;
        let static_active = schedule::round(&wiring, &mean, &frac, ideal_phase_cap);
        Ok(Self { trace, topology, wiring, static_active })
    }

    /// Budgets for minute `t` ≥ 1: the previous minute's demand.
    fn budgets(&self, t: usize) -> &[f64] {
        &self.trace.demand_kw[t - 1]
    }

    fn minutes(&self) -> usize {
        self.trace.demand_kw.len()
    }

    /// Per-phase capacity the static assignment needs over the whole trace.
    pub fn static_phase_need(&self) -> f64 {
        (1..self.minutes())
            .map(|t| FeedLoads::new(&self.wiring, &self.static_active, self.budgets(t)).max_need())
            .fold(0.0, f64::max)
    }

    /// Runs the trace with Power Routing at `phase_cap_kw` per phase. With `stop_on_throttle`
    /// it returns at the first throttled minute (enough for the capacity search).
    pub fn run(&self, phase_cap_kw: f64, stop_on_throttle: bool) -> Result<RunOutcome> {
        let mut out = RunOutcome::default();
        let mut active = self.static_active.clone();
        for t in 1..self.minutes() {
            let budgets = self.budgets(t);
            out.requested_kw_min += budgets.iter().sum::<f64>();
            let loads = FeedLoads::new(&self.wiring, &active, budgets);
            // Keep the assignment while it fits and its phases stay balanced (§B.4).
            let balanced = loads.max_phase_imbalance_kw() <= schedule::PHASE_BALANCE * phase_cap_kw;
            if balanced && loads.max_need() <= phase_cap_kw * (1.0 + 1e-9) {
                out.max_phase_imbalance_kw =
                    out.max_phase_imbalance_kw.max(loads.max_phase_imbalance_kw());
                continue;
            }
            let s = schedule::schedule(&self.wiring, budgets, &self.trace.idle_kw, phase_cap_kw)?;
            out.reschedules += 1;
            out.phase_balance_relaxed += usize::from(s.phase_balance_relaxed);
            out.throttled_kw_min += s.throttled_kw;
            let after = FeedLoads::new(&self.wiring, &s.active, &s.caps_kw);
            out.max_phase_imbalance_kw =
                out.max_phase_imbalance_kw.max(after.max_phase_imbalance_kw());
            active = s.active;
            if stop_on_throttle && out.throttled_kw_min > 1e-6 {
                break;
            }
        }
        Ok(out)
    }

    /// Worst minute's per-phase need under the fractional LP without phase balance: with
    /// capacity 1 kW, the LP's Slack is 1 − need.
    pub fn lp_phase_need(&self) -> Result<f64> {
        let mut worst: f64 = 0.0;
        for t in 1..self.minutes() {
            let frac = schedule::fractional(&self.wiring, self.budgets(t), 1.0, false)?
                .ok_or_else(|| invalid("layout", self.topology.kind, "LP relaxation infeasible"))?;
            worst = worst.max(1.0 - frac.slack_kw);
        }
        Ok(worst)
    }

    /// Peak of the summed budgets.
    pub fn peak_kw(&self) -> f64 {
        (1..self.minutes()).map(|t| self.budgets(t).iter().sum::<f64>()).fold(0.0, f64::max)
    }

    /// The whole comparison for this topology.
    pub fn evaluate(&self) -> Result<RouteResult> {
        let phases = (self.topology.pdus * PHASES) as f64;
        let c = self.topology.connectivity();
        let peak = self.peak_kw();
        let bound = peak * (c as f64 + 1.0) / c as f64;
        let static_phase = self.static_phase_need();
        let lp_phase = self.lp_phase_need()?;
        // Bisect between the bound (no schedule does better) and the static need (the static
        // assignment itself fits there, so the run never throttles).
        let (mut lo, mut hi) = (bound / phases, static_phase);
        let mut steps = 0;
        while hi - lo > SEARCH_PRECISION * hi && steps < MAX_SEARCH_STEPS {
            let mid = 0.5 * (lo + hi);
            if self.run(mid, true)?.throttled_kw_min > 1e-6 {
                lo = mid;
            } else {
                hi = mid;
            }
            steps += 1;
        }
        let at_hi = self.run(hi, false)?;
        debug_assert!(at_hi.throttled_kw_min <= 1e-6);
        let (without, with) = (static_phase * phases, hi * phases);
        Ok(RouteResult {
            topology: self.topology.kind,
            pdus: self.topology.pdus,
            connectivity: c,
            peak_kw: peak,
            bound_kw: bound,
            lp_bound_kw: lp_phase * phases,
            without_routing_kw: without,
            with_routing_kw: with,
            saving: 1.0 - with / without,
            routed_over_bound: with / bound - 1.0,
            reschedules: at_hi.reschedules,
            phase_balance_relaxed: at_hi.phase_balance_relaxed,
            max_phase_imbalance: at_hi.max_phase_imbalance_kw / hi,
        })
    }
}

/// Generates the trace and evaluates `spec.topology`.
pub fn route(spec: &RouteSpec) -> Result<RouteResult> {
    let trace = spec.trace.generate()?;
    Setup::new(&trace, spec.topology, spec.pdus, spec.servers_per_rack, spec.mix)?.evaluate()
}

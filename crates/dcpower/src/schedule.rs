//! The Power Routing scheduler — thesis app. B §B.4: (1) an LP relaxation assigning each feed
//! pair's power fractionally to its two feeds, maximising the least spare capacity (Slack) under
//! single-PDU-failure reserve (B.2) and phase balance within 20% of a phase's capacity (B.3);
//! (2) greedy rounding, largest server first, towards the fractional targets; (3) if a feed is
//! still over capacity, a second LP choosing power caps that maximise the power granted.
//! Invariant: a schedule's caps keep every feed within capacity with all PDUs up and after any
//! single PDU fails (its servers switching to their other feed); see [`FeedLoads::max_need`].

use crate::error::{invalid, Error, Result};
use crate::topology::{Topology, PHASES};
use microlp::{ComparisonOp, OptimizationDirection, Problem, Variable};
use serde::Serialize;
use std::collections::BTreeMap;

/// Phase-balance margin of (B.3): phases of one PDU differ by at most this share of a phase's
/// capacity ("within a 20% margin", §B.3.2).
pub const PHASE_BALANCE: f64 = 0.2;
/// Absolute slack, kW, allowed on capacity checks for LP round-off.
const TOLERANCE_KW: f64 = 1e-6;

/// How a zone's PDU pairs are spread over its servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// A zone's racks in contiguous blocks, one pair per block: one application's neighbouring
    /// racks share few PDUs, the correlated placement §B.5.1 describes.
    Blocks,
    /// Every server of a rack on the rack's pair; racks take the zone's pairs in turn.
    PerRack,
    /// Servers of a rack cycle over all of the zone's pairs.
    WithinRack,
}

/// Which feeds (PDU × phase, index `pdu * 3 + phase`) each server is wired to, and the servers
/// grouped by feed pair (the `Power_{i,j}` of §B.4).
#[derive(Clone, Debug)]
pub struct Wiring {
    pub pdus: usize,
    /// Per server, its two feeds; `feeds[s][0] < feeds[s][1]`, on different PDUs.
    pub feeds: Vec<[usize; 2]>,
    groups: Vec<[usize; 2]>,
    members: Vec<Vec<usize>>,
}

pub fn pdu_of(feed: usize) -> usize {
    feed / PHASES
}

impl Wiring {
    /// Lays `servers` (in cluster order) into racks of `servers_per_rack` and gives each
    /// contiguous block of racks one of the topology's zones, as collocated servers of one
    /// application share a zone in practice (§B.5.1). Within a zone, `mix` spreads the zone's
    /// pairs over racks or servers (§B.5.1 varies only phases within a rack; §B.3.1's whips can
    /// mix feed combinations). Each PDU hands out its phases round robin, so its phases start
    /// balanced by server count.
    pub fn layout(
        topology: &Topology,
        servers: usize,
        servers_per_rack: usize,
        mix: Mix,
    ) -> Result<Self> {
        if servers_per_rack == 0 || servers_per_rack > 200 {
            return Err(invalid("servers per rack", servers_per_rack, "must be in 1..=200"));
        }
        let racks = servers.div_ceil(servers_per_rack);
        let zones = &topology.zones;
        let zone_of = |rack: usize| rack * zones.len() / racks.max(1);
        // First rack and rack count of each zone.
        let mut first = vec![usize::MAX; zones.len()];
        let mut count = vec![0usize; zones.len()];
        for rack in 0..racks {
            let z = zone_of(rack);
            first[z] = first[z].min(rack);
            count[z] += 1;
        }
        let mut next_phase = vec![0usize; topology.pdus];
        let mut phase_of = |pdu: usize| {
            let phase = next_phase[pdu] % PHASES;
            next_phase[pdu] += 1;
            pdu * PHASES + phase
        };
        let feeds = (0..servers)
            .map(|s| {
                let rack = s / servers_per_rack;
                let z = zone_of(rack);
                let zone = &zones[z];
                let slot = match mix {
                    Mix::Blocks => (rack - first[z]) * zone.len() / count[z].max(1),
                    Mix::PerRack => rack,
                    Mix::WithinRack => s % servers_per_rack + rack,
                };
                let (a, b) = zone[slot % zone.len()];
                [phase_of(a), phase_of(b)]
            })
            .collect();
        Self::from_feeds(topology.pdus, feeds)
    }

    /// Wiring from explicit feeds (for tests and other layouts).
    pub fn from_feeds(pdus: usize, feeds: Vec<[usize; 2]>) -> Result<Self> {
        let mut index: BTreeMap<[usize; 2], usize> = BTreeMap::new();
        let (mut groups, mut members) = (Vec::new(), Vec::<Vec<usize>>::new());
        let mut sorted = Vec::with_capacity(feeds.len());
        for (s, f) in feeds.into_iter().enumerate() {
            let f = [f[0].min(f[1]), f[0].max(f[1])];
            if f[1] >= pdus * PHASES || pdu_of(f[0]) == pdu_of(f[1]) {
                return Err(invalid(
                    "server wiring",
                    format!("server {s} on feeds {f:?}"),
                    "each server needs feeds on two different existing PDUs",
                ));
            }
            let g = *index.entry(f).or_insert_with(|| {
                groups.push(f);
                members.push(Vec::new());
                groups.len() - 1
            });
            members[g].push(s);
            sorted.push(f);
        }
        Ok(Self { pdus, feeds: sorted, groups, members })
    }

    pub fn feed_count(&self) -> usize {
        self.pdus * PHASES
    }
}

/// Per-feed load, and what would fail over onto each feed from each other PDU.
#[derive(Clone, Debug)]
pub struct FeedLoads {
    pub load_kw: Vec<f64>,
    /// `failover_kw[i][q]`: power now on PDU q whose other feed is i.
    pub failover_kw: Vec<Vec<f64>>,
}

impl FeedLoads {
    /// Loads when server s draws `power[s]` on feed `feeds[s][active[s]]`.
    pub fn new(wiring: &Wiring, active: &[u8], power: &[f64]) -> Self {
        let mut load_kw = vec![0.0; wiring.feed_count()];
        let mut failover_kw = vec![vec![0.0; wiring.pdus]; wiring.feed_count()];
        for (s, f) in wiring.feeds.iter().enumerate() {
            let side = usize::from(active[s]);
            let (on, standby) = (f[side], f[1 - side]);
            load_kw[on] += power[s];
            failover_kw[standby][pdu_of(on)] += power[s];
        }
        Self { load_kw, failover_kw }
    }

    /// Capacity feed i needs: its load plus the worst single PDU failure's fail-over onto it.
    pub fn need(&self, i: usize) -> f64 {
        self.load_kw[i] + self.failover_kw[i].iter().copied().fold(0.0, f64::max)
    }

    /// The largest per-phase capacity any feed needs.
    pub fn max_need(&self) -> f64 {
        (0..self.load_kw.len()).map(|i| self.need(i)).fold(0.0, f64::max)
    }

    /// Largest difference between two phases of one PDU, kW.
    pub fn max_phase_imbalance_kw(&self) -> f64 {
        self.load_kw
            .chunks(PHASES)
            .map(|p| {
                let hi = p.iter().copied().fold(f64::MIN, f64::max);
                let lo = p.iter().copied().fold(f64::MAX, f64::min);
                hi - lo
            })
            .fold(0.0, f64::max)
    }
}

/// The LP relaxation's answer: per group, the power routed to its lower-numbered feed.
#[derive(Clone, Debug)]
pub struct Fractional {
    pub to_first_kw: Vec<f64>,
    pub slack_kw: f64,
}

/// A schedule: each server's active feed and power cap.
#[derive(Clone, Debug, Serialize)]
pub struct Schedule {
    /// Index into the server's two feeds.
    pub active: Vec<u8>,
    pub caps_kw: Vec<f64>,
    /// Slack of the fractional LP (negative: demand exceeds what any schedule can supply).
    pub slack_kw: f64,
    /// Requested minus granted power, kW.
    pub throttled_kw: f64,
    /// The LP with (B.3) was infeasible and was solved without it.
    pub phase_balance_relaxed: bool,
    /// The caps LP ran (rounding left a feed over capacity).
    pub capped: bool,
}

fn solver_error(stage: &'static str, e: microlp::Error) -> Error {
    Error::Solver { stage, message: e.to_string() }
}

/// Solves `problem`; `Ok(None)` if infeasible.
fn solve(problem: &Problem, stage: &'static str) -> Result<Option<microlp::Solution>> {
    match problem.solve() {
        Ok(outcome) => outcome
            .into_solution()
            .map(Some)
            .map_err(|_| Error::Solver { stage, message: "interrupted".into() }),
        Err(microlp::Error::Infeasible) => Ok(None),
        Err(e) => Err(solver_error(stage, e)),
    }
}

/// A linear expression under construction: merges repeated variables.
#[derive(Default)]
struct Expr {
    terms: BTreeMap<usize, (Variable, f64)>,
    constant: f64,
}

impl Expr {
    fn add(&mut self, v: Variable, coeff: f64) {
        self.terms.entry(v.idx()).or_insert((v, 0.0)).1 += coeff;
    }
    /// Adds `self ≤ rhs`; returns false if it has no variables left and is violated.
    fn constrain_le(self, problem: &mut Problem, rhs: f64) -> bool {
        let terms: Vec<(Variable, f64)> =
            self.terms.into_values().filter(|&(_, c)| c != 0.0).collect();
        if terms.is_empty() {
            return self.constant <= rhs + TOLERANCE_KW;
        }
        problem.add_constraint(terms, ComparisonOp::Le, rhs - self.constant);
        true
    }
}

/// Step 1 (B.1–B.5): the fractional feed assignment maximising Slack; x_g is the power of group
/// g on its first feed, so (B.1) and (B.5) become 0 ≤ x_g ≤ Power_g. `Ok(None)`: infeasible.
pub fn fractional(
    wiring: &Wiring,
    budgets_kw: &[f64],
    phase_cap_kw: f64,
    phase_balance: bool,
) -> Result<Option<Fractional>> {
    let power: Vec<f64> =
        wiring.members.iter().map(|m| m.iter().map(|&s| budgets_kw[s]).sum()).collect();
    let mut problem = Problem::new(OptimizationDirection::Maximize);
    let slack = problem.add_var(1.0, (f64::NEG_INFINITY, f64::INFINITY));
    let x: Vec<Variable> = power.iter().map(|&p| problem.add_var(0.0, (0.0, p))).collect();
    // load_i as an expression; failover[i][q] likewise.
    let feeds = wiring.feed_count();
    let mut load: Vec<Expr> = (0..feeds).map(|_| Expr::default()).collect();
    let mut fail: Vec<BTreeMap<usize, Expr>> = (0..feeds).map(|_| BTreeMap::new()).collect();
    for (g, &[a, b]) in wiring.groups.iter().enumerate() {
        load[a].add(x[g], 1.0);
        load[b].add(x[g], -1.0);
        load[b].constant += power[g];
        // If b's PDU fails, b's share (Power − x) lands on a, and vice versa.
        let to_a = fail[a].entry(pdu_of(b)).or_default();
        to_a.add(x[g], -1.0);
        to_a.constant += power[g];
        fail[b].entry(pdu_of(a)).or_default().add(x[g], 1.0);
    }
    for i in 0..feeds {
        let base = || {
            let mut e = Expr { constant: load[i].constant, ..Expr::default() };
            for &(v, c) in load[i].terms.values() {
                e.add(v, c);
            }
            e.add(slack, 1.0);
            e
        };
        // Slack is in every row, so none is empty: the returned flag is always true.
        if fail[i].is_empty() {
            base().constrain_le(&mut problem, phase_cap_kw);
        }
        for f in fail[i].values() {
            let mut e = base();
            e.constant += f.constant;
            for &(v, c) in f.terms.values() {
                e.add(v, c);
            }
            e.constrain_le(&mut problem, phase_cap_kw); // (B.2)
        }
    }
    let mut feasible = true;
    if phase_balance {
        for pdu in 0..wiring.pdus {
            for p in 0..PHASES {
                for q in p + 1..PHASES {
                    for sign in [1.0, -1.0] {
                        let (i, j) = (pdu * PHASES + p, pdu * PHASES + q);
                        let constant = sign * (load[i].constant - load[j].constant);
                        let mut e = Expr { constant, ..Expr::default() };
                        for &(v, c) in load[i].terms.values() {
                            e.add(v, sign * c);
                        }
                        for &(v, c) in load[j].terms.values() {
                            e.add(v, -sign * c);
                        }
                        // (B.3)
                        feasible &= e.constrain_le(&mut problem, PHASE_BALANCE * phase_cap_kw);
                    }
                }
            }
        }
    }
    if !feasible {
        return Ok(None);
    }
    let Some(solution) = solve(&problem, "feed-assignment LP")? else {
        return Ok(None);
    };
    let to_first_kw = x.iter().zip(&power).map(|(&v, &p)| solution[v].clamp(0.0, p)).collect();
    Ok(Some(Fractional { to_first_kw, slack_kw: solution[slack] }))
}

/// Step 2: whole servers onto feeds, largest first, each to the side with more of its fractional
/// target left; a server fitting neither side is "pending" and then goes to whichever of its
/// feeds has the most capacity left once all others are placed.
pub fn round(wiring: &Wiring, budgets_kw: &[f64], frac: &Fractional, phase_cap_kw: f64) -> Vec<u8> {
    let mut active = vec![0u8; wiring.feeds.len()];
    let mut pending = Vec::new();
    for (g, members) in wiring.members.iter().enumerate() {
        let total: f64 = members.iter().map(|&s| budgets_kw[s]).sum();
        let mut left = [frac.to_first_kw[g], total - frac.to_first_kw[g]];
        let mut order = members.clone();
        order.sort_by(|&a, &b| budgets_kw[b].total_cmp(&budgets_kw[a]).then(a.cmp(&b)));
        for s in order {
            let first = if left[0] >= left[1] { 0 } else { 1 };
            let budget = budgets_kw[s];
            let side = [first, 1 - first].into_iter().find(|&k| budget <= left[k] + TOLERANCE_KW);
            match side {
                Some(k) => {
                    active[s] = k as u8;
                    left[k] -= budget;
                }
                None => pending.push(s),
            }
        }
    }
    pending.sort_by(|&a, &b| budgets_kw[b].total_cmp(&budgets_kw[a]).then(a.cmp(&b)));
    for s in pending {
        let mut best = (f64::NEG_INFINITY, 0u8);
        for side in 0..2u8 {
            active[s] = side;
            let loads = FeedLoads::new(wiring, &active, budgets_kw);
            let headroom = phase_cap_kw - loads.need(wiring.feeds[s][usize::from(side)]);
            if headroom > best.0 {
                best = (headroom, side);
            }
        }
        active[s] = best.1;
    }
    active
}

/// Step 3: caps maximising the power granted so that no feed exceeds `phase_cap_kw` with all PDUs
/// up or after any one fails. Caps stay between idle power and the budget (a server throttles no
/// lower than idle, §B.4), falling back to a floor of 0 if idle alone does not fit.
pub fn caps(
    wiring: &Wiring,
    active: &[u8],
    budgets_kw: &[f64],
    idle_kw: &[f64],
    phase_cap_kw: f64,
) -> Result<Vec<f64>> {
    // Directed groups: (active feed, standby feed) → servers.
    let mut directed: BTreeMap<[usize; 2], Vec<usize>> = BTreeMap::new();
    for (s, f) in wiring.feeds.iter().enumerate() {
        let side = usize::from(active[s]);
        directed.entry([f[side], f[1 - side]]).or_default().push(s);
    }
    for floor_at_idle in [true, false] {
        let mut problem = Problem::new(OptimizationDirection::Maximize);
        let mut vars = Vec::with_capacity(directed.len());
        let mut on: Vec<Vec<Variable>> = vec![Vec::new(); wiring.feed_count()];
        let mut fail: Vec<BTreeMap<usize, Vec<Variable>>> =
            vec![BTreeMap::new(); wiring.feed_count()];
        for (&[a, b], members) in &directed {
            let budget: f64 = members.iter().map(|&s| budgets_kw[s]).sum();
            let floor: f64 = if floor_at_idle {
                members.iter().map(|&s| idle_kw[s].min(budgets_kw[s])).sum()
            } else {
                0.0
            };
            let v = problem.add_var(1.0, (floor.min(budget), budget));
            vars.push((v, budget, members));
            on[a].push(v);
            fail[b].entry(pdu_of(a)).or_default().push(v);
        }
        for i in 0..wiring.feed_count() {
            let mut rows: Vec<Vec<Variable>> = fail[i].values().cloned().collect();
            if rows.is_empty() {
                rows.push(Vec::new());
            }
            for extra in rows {
                let mut e = Expr::default();
                on[i].iter().chain(&extra).for_each(|&v| e.add(v, 1.0));
                // Only variables here (no constants), so an empty row is 0 ≤ cap: true.
                e.constrain_le(&mut problem, phase_cap_kw);
            }
        }
        let Some(solution) = solve(&problem, "capping LP")? else {
            continue;
        };
        let mut caps_kw = budgets_kw.to_vec();
        for (v, budget, members) in vars {
            let ratio = if budget > 0.0 { (solution[v] / budget).clamp(0.0, 1.0) } else { 1.0 };
            for &s in members {
                caps_kw[s] = budgets_kw[s] * ratio;
            }
        }
        return Ok(caps_kw);
    }
    Err(Error::Solver { stage: "capping LP", message: "infeasible even with zero caps".into() })
}

/// The whole scheduler: fractional LP, rounding, and capping if rounding overloads a feed.
pub fn schedule(
    wiring: &Wiring,
    budgets_kw: &[f64],
    idle_kw: &[f64],
    phase_cap_kw: f64,
) -> Result<Schedule> {
    if !(phase_cap_kw.is_finite() && phase_cap_kw > 0.0) {
        return Err(invalid("phase capacity kW", phase_cap_kw, "must be positive"));
    }
    if budgets_kw.len() != wiring.feeds.len() || idle_kw.len() != wiring.feeds.len() {
        return Err(invalid("budgets", budgets_kw.len(), "need one budget per wired server"));
    }
    let mut relaxed = false;
    let frac = match fractional(wiring, budgets_kw, phase_cap_kw, true)? {
        Some(f) => f,
        None => {
            relaxed = true;
            fractional(wiring, budgets_kw, phase_cap_kw, false)?.ok_or(Error::Solver {
                stage: "feed-assignment LP",
                message: "infeasible without phase balance (Slack is free: cannot happen)".into(),
            })?
        }
    };
    let active = round(wiring, budgets_kw, &frac, phase_cap_kw);
    let loads = FeedLoads::new(wiring, &active, budgets_kw);
    let capped = loads.max_need() > phase_cap_kw + TOLERANCE_KW;
    let caps_kw = if capped {
        caps(wiring, &active, budgets_kw, idle_kw, phase_cap_kw)?
    } else {
        budgets_kw.to_vec()
    };
    let throttled_kw = budgets_kw.iter().zip(&caps_kw).map(|(b, c)| (b - c).max(0.0)).sum();
    Ok(Schedule {
        active,
        caps_kw,
        slack_kw: frac.slack_kw,
        throttled_kw,
        phase_balance_relaxed: relaxed,
        capped,
    })
}

/// Loads after PDU `failed` goes down: every server active on it switches to its other feed.
pub fn loads_after_failure(
    wiring: &Wiring,
    active: &[u8],
    power: &[f64],
    failed: usize,
) -> Vec<f64> {
    let mut load = vec![0.0; wiring.feed_count()];
    for (s, f) in wiring.feeds.iter().enumerate() {
        let side = usize::from(active[s]);
        let on = if pdu_of(f[side]) == failed { f[1 - side] } else { f[side] };
        load[on] += power[s];
    }
    load
}

//! Reports for `nvmdb dcpower model` and `nvmdb dcpower route`: our numbers beside the paper's
//! (thesis app. A §A.4.3–§A.4.8, Table A.1, Table A.3, Fig. A.10; app. B §B.5, Fig. B.7, B.10),
//! as JSON-serialisable structures and as text tables. Invariant: every paper number here is
//! quoted from the thesis text; figures whose values the text does not give are marked so.

use crate::cooling::chiller_power_kw;
use crate::error::Result;
use crate::model::{self, Breakdown, Facility, ModelParams, Scenario};
use crate::schedule::Mix;
use crate::sim::{self, RouteResult, RouteSpec};
use crate::topology::Kind;
use crate::trace::{TraceSpec, TraceStats};
use crate::verdict::{self, printed, Bound, Claim, Role};
use serde::Serialize;
use std::fmt::Write;

/// Table A.3's utilisation: "We analyze each data center at 25% utilization" (§A.4.8).
pub const CASE_STUDY_U: f64 = 0.25;

/// A row of Table A.3 with its Fig. A.10 bar.
#[derive(Clone, Debug, Serialize)]
pub struct ScenarioRow {
    pub scenario: Scenario,
    pub breakdown: Breakdown,
}

/// Everything `dcpower model` prints.
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    pub params: ModelParams,
    pub facility: Facility,
    pub utilisation: f64,
    /// Table A.3 rows at U = 25% and their power breakdown (the data of Fig. A.10).
    pub scenarios: Vec<ScenarioRow>,
    /// Table A.1's shares (servers, cooling, power conditioning, network + lighting) beside ours
    /// for the Austin facility at U = 25% and at peak.
    pub table_a1_paper: [f64; 4],
    pub table_a1_austin_case_study: [f64; 4],
    pub table_a1_austin_peak: [f64; 4],
    pub claims: Vec<Claim>,
    /// Fig. A.10's bar heights are drawn, not printed, in the thesis: no per-bar paper values.
    pub fig_a10_paper_values: Option<()>,
}

/// Builds the model report for the default parameters.
pub fn model_report(u_total: f64) -> Result<ModelReport> {
    let params = ModelParams::default();
    let scenarios = model::table_a3();
    let facility = model::size_facility(&params, &scenarios[0])?;
    let rows = scenarios
        .iter()
        .map(|s| {
            Ok(ScenarioRow {
                scenario: s.clone(),
                breakdown: model::evaluate(&params, &facility, s, u_total)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let austin_peak = model::evaluate(&params, &facility, &scenarios[0], 1.0)?;
    let claims = model_claims(&params, &facility, &rows, &austin_peak);
    Ok(ModelReport {
        table_a1_paper: [0.56, 0.30, 0.08, 0.06],
        table_a1_austin_case_study: model::shares(&rows[0].breakdown),
        table_a1_austin_peak: model::shares(&austin_peak),
        params,
        facility,
        utilisation: u_total,
        scenarios: rows,
        claims,
        fig_a10_paper_values: None,
    })
}

fn model_claims(
    p: &ModelParams,
    f: &Facility,
    rows: &[ScenarioRow],
    austin_peak: &Breakdown,
) -> Vec<Claim> {
    let b = |i: usize| &rows[i].breakdown;
    let c = &p.cooling;
    let h0 = f.chiller_idle_heat_fraction;
    let chiller = |water| chiller_power_kw(c, 8000.0, h0, 8000.0, 85.0, water);
    let conditioning = austin_peak.conditioning_kw() / austin_peak.servers_kw;
    let pdu_in = austin_peak.servers_kw + austin_peak.pdu_loss_kw;
    let yes = |v: bool| f64::from(u8::from(v));
    let exactly = |v: f64| (v, v);
    let (out, inp, fit) = (Role::Output, Role::Input, Role::Fitted);
    let paper = Bound::Paper;
    let shares = model::shares(austin_peak);
    let (cons, nap) = (b(2), b(3));
    // PowerNap's saving falls short of 22% by what does not follow the servers down: the
    // fixed misc power and the idle parts of the conditioning and cooling plant.
    let nap_cause = format!(
        "ours saves {:.0} kW of {:.0} kW: servers −{:.0} kW, conditioning −{:.0} kW, cooling \
         −{:.0} kW; misc ({:.0} kW, 6% of the design peak) does not fall, and the PDU/UPS idle \
         losses (our split of the 3%/9% constants) fall only with load; the thesis prints no \
         breakdown to tell which part of its model saves more",
        cons.total_kw - nap.total_kw,
        cons.total_kw,
        cons.servers_kw - nap.servers_kw,
        cons.conditioning_kw() - nap.conditioning_kw(),
        cons.cooling_kw() - nap.cooling_kw(),
        nap.misc_kw
    );
    let containers_cause = format!(
        "κ 0.9 → 0.99 saves only {:.0} of {:.0} kW of cooling in our model (cooling {:.0} kW vs \
         conditioning {:.0} kW with containers); Fig. A.10 prints no bar heights to calibrate \
         the CRAH/chiller split against",
        b(4).cooling_kw() - b(5).cooling_kw(),
        b(4).cooling_kw(),
        b(5).cooling_kw(),
        b(5).conditioning_kw()
    );
    vec![
        Claim::new(
            "Austin total power at U = 100%, kW",
            "§A.4.8",
            inp,
            paper,
            10_000.0,
            &[austin_peak.total_kw],
            exactly(10_000.0),
            "the fleet is sized so that Austin draws 10 MW at U = 1",
        ),
        Claim::new(
            "power-conditioning loss at peak / server power",
            "§A.4.3, Fig. A.5",
            inp,
            paper,
            0.12,
            &[conditioning],
            exactly(0.12),
            "the sum of the PDU 3% and UPS 9% constants below",
        ),
        Claim::new(
            "PDU loss at full load / PDU input",
            "§A.4.3",
            inp,
            paper,
            0.03,
            &[austin_peak.pdu_loss_kw / pdu_in],
            exactly(0.03),
            "constant from §A.4.3 (our split: 1.5% fixed + 1.5% square-law)",
        ),
        Claim::new(
            "UPS loss at full load / power through it (ΣP_PDU)",
            "§A.4.3",
            inp,
            paper,
            0.09,
            &[austin_peak.ups_loss_kw / pdu_in],
            exactly(0.09),
            "constant from §A.4.3 (our split: 4% fixed + 5% of ΣP_PDU, the load term of (A.5))",
        ),
        Claim::new(
            "chiller at U = 1 (8 MW, 85 °F, 45 °F water), kW",
            "§A.4.6",
            inp,
            paper,
            3200.0,
            &[chiller(45.0)],
            exactly(3200.0),
            "the §A.4.6 polynomial is our chiller curve; at U = 1 it gives 3126 kW where the \
             text says 3,200 kW",
        ),
        Claim::new(
            "chiller 45 °F minus 55 °F water at peak, kW",
            "§A.4.6, Fig. A.8",
            fit,
            paper,
            500.0,
            &[chiller(45.0) - chiller(55.0)],
            exactly(500.0),
            "\"nearly 500kW\": our 16 °F heat-exchanger approach is fitted to it",
        ),
        Claim::new(
            "Table A.1 power-conditioning share, Austin at peak",
            "Table A.1",
            inp,
            paper,
            0.08,
            &[shares[2]],
            exactly(0.08),
            "follows from the 12% conditioning constant over server power",
        ),
        Claim::new(
            "Table A.1 network + lighting share, Austin at peak",
            "Table A.1, §A.4.7",
            inp,
            paper,
            0.06,
            &[shares[3]],
            exactly(0.06),
            "misc is fixed at 6% of the design peak (§A.4.7)",
        ),
        Claim::new(
            "Table A.1 server share, Austin at peak",
            "Table A.1",
            out,
            Bound::Ours,
            0.56,
            &[shares[0]],
            (0.54, 0.58),
            "Table A.1 is a typical facility, not Austin; ±2 points is our tolerance",
        ),
        Claim::new(
            "Table A.1 cooling share, Austin at peak",
            "Table A.1",
            out,
            Bound::Ours,
            0.30,
            &[shares[1]],
            (0.28, 0.32),
            "Table A.1 is a typical facility, not Austin; ±2 points is our tolerance",
        ),
        Claim::new(
            "server utilisation, ℓ = 0.95",
            "§A.4.8",
            out,
            paper,
            0.26,
            &[b(1).server_utilisation],
            printed(0.26, 2),
            "",
        ),
        Claim::new(
            "server utilisation, ℓ = 0.25 (+Consolidation)",
            "§A.4.8",
            out,
            paper,
            0.57,
            &[b(2).server_utilisation],
            printed(0.57, 2),
            "",
        ),
        Claim::new(
            "active servers, ℓ = 0.95",
            "§A.4.8",
            out,
            paper,
            0.81,
            &[b(1).active_servers_fraction],
            printed(0.81, 2),
            "the thesis's own (A.2) gives U + (1 − U)ℓ = 96.25%; 81% would be ℓ = 0.75",
        ),
        Claim::new(
            "active servers, ℓ = 0.25",
            "§A.4.8",
            out,
            paper,
            0.44,
            &[b(2).active_servers_fraction],
            printed(0.44, 2),
            "",
        ),
        Claim::new(
            "+PowerNap total power reduction vs +Consolidation",
            "§A.4.8",
            out,
            paper,
            0.22,
            &[1.0 - nap.total_kw / cons.total_kw],
            printed(0.22, 2),
            nap_cause,
        ),
        Claim::new(
            "PUE rises with consolidation (1 = yes)",
            "§A.4.8",
            out,
            paper,
            1.0,
            &[yes(b(2).pue > b(1).pue)],
            exactly(1.0),
            "",
        ),
        Claim::new(
            "Austin chiller above Ann Arbor's (1 = yes)",
            "§A.4.8",
            out,
            paper,
            1.0,
            &[yes(b(0).chiller_kw > b(1).chiller_kw)],
            exactly(1.0),
            "",
        ),
        Claim::new(
            "+Containers: conditioning exceeds cooling (1 = yes)",
            "§A.4.8",
            out,
            paper,
            1.0,
            &[yes(b(5).conditioning_kw() > b(5).cooling_kw())],
            exactly(1.0),
            containers_cause,
        ),
    ]
}

/// Text rendering of the model report.
pub fn model_text(r: &ModelReport) -> String {
    let mut s = String::new();
    let f = &r.facility;
    let _ = writeln!(
        s,
        "Facility sized so Austin draws 10 MW at U = 100%: {:.0} servers ({:.0} kW peak), \
         {:.0} CRAHs, chiller rated {:.0} kW, misc {:.0} kW",
        f.servers, f.server_peak_kw, f.crah_units, f.chiller_rated_kw, f.misc_kw
    );
    let _ = writeln!(s, "\nTable A.3 at U = {:.0}% (kW; Fig. A.10's data):", r.utilisation * 100.0);
    let _ = writeln!(
        s,
        "{:<15} {:>4} {:>4} {:>4} {:>3} {:>3} {:>5} {:>6} {:>7} {:>5} {:>5} {:>5} {:>6} {:>4} \
         {:>6} {:>5}",
        "scenario",
        "ℓ",
        "κ",
        "idle",
        "T",
        "opt",
        "u",
        "active",
        "servers",
        "PDU",
        "UPS",
        "CRAH",
        "chill",
        "misc",
        "total",
        "PUE"
    );
    for row in &r.scenarios {
        let (c, b) = (&row.scenario, &row.breakdown);
        let _ = writeln!(
            s,
            "{:<15} {:>4.2} {:>4.2} {:>4.2} {:>3.0} {:>3} {:>5.3} {:>5.1}% {:>7.0} {:>5.0} {:>5.0} \
             {:>5.0} {:>6.0} {:>4.0} {:>6.0} {:>5.2}",
            c.name,
            c.load_balancing,
            c.containment,
            c.idle_fraction,
            c.outside_f,
            if c.optimal_cooling { "yes" } else { "no" },
            b.server_utilisation,
            b.active_servers_fraction * 100.0,
            b.servers_kw,
            b.pdu_loss_kw,
            b.ups_loss_kw,
            b.crah_kw,
            b.chiller_kw,
            b.misc_kw,
            b.total_kw,
            b.pue
        );
    }
    let _ = writeln!(s, "(Fig. A.10's bar heights are not given in the thesis text.)");
    let pct = |v: [f64; 4]| v.map(|x| format!("{:.0}%", x * 100.0)).join(" / ");
    let _ =
        writeln!(s, "\nTable A.1 shares (servers / cooling / conditioning / network+lighting):");
    let _ = writeln!(s, "  paper                 {}", pct(r.table_a1_paper));
    let _ = writeln!(s, "  ours, Austin, U = 25% {}", pct(r.table_a1_austin_case_study));
    let _ = writeln!(s, "  ours, Austin, U = 100% {}", pct(r.table_a1_austin_peak));
    let _ = writeln!(s, "\nThe paper's numbers beside ours (Table A.3's model at U = 100% / 25%):");
    s += &verdict::text(&r.claims);
    s
}

/// What the paper reports for Fig. B.7 (6 PDUs, real traces) and Fig. B.10.
#[derive(Clone, Debug, Serialize)]
pub struct PaperRouting {
    pub trace_mean_kw: f64,
    pub trace_max_kw: f64,
    pub trace_sd_kw: f64,
    pub average_saving_except_wrapped: f64,
    pub fully_connected_over_bound: f64,
    pub fully_connected_saving: f64,
    pub serpentine_routed_vs_wrapped_static: f64,
    pub wrapped_routed_over_bound: f64,
}

/// Everything `dcpower route` prints.
#[derive(Clone, Debug, Serialize)]
pub struct RouteReport {
    /// Always true: the traces are synthetic (see `dcpower::trace`), not the paper's.
    pub synthetic_traces: bool,
    pub trace: TraceSpec,
    pub trace_stats: TraceStats,
    pub servers_per_rack: usize,
    pub mix: Mix,
    pub results: Vec<RouteResult>,
    /// Mean saving over the non-wrapped topologies evaluated (paper: 12%).
    pub average_saving_except_wrapped: Option<f64>,
    /// 1 − serpentine with routing / wrapped without (paper: 32%; 47% energy-proportional).
    pub serpentine_routed_vs_wrapped_static: Option<f64>,
    pub paper: PaperRouting,
    /// Fig. B.10 (idle power 10% of peak): X-Y, serpentine, fully-connected savings and
    /// serpentine-with-routing vs wrapped-without; shown for comparison when idle ≤ 0.1.
    pub paper_energy_proportional: Option<[f64; 4]>,
    /// The paper's numbers judged on this one trace (see [`route_claims`] for several seeds).
    pub claims: Vec<Claim>,
}

/// Runs `route` for each topology in `kinds` on one generated trace.
pub fn route_report(
    kinds: &[Kind],
    pdus: usize,
    servers_per_rack: usize,
    mix: Mix,
    trace: TraceSpec,
) -> Result<RouteReport> {
    let generated = trace.generate()?;
    let results = kinds
        .iter()
        .map(|&k| sim::Setup::new(&generated, k, pdus, servers_per_rack, mix)?.evaluate())
        .collect::<Result<Vec<_>>>()?;
    let find = |k: Kind| results.iter().find(|r| r.topology == k);
    let shuffled: Vec<f64> =
        results.iter().filter(|r| r.topology != Kind::Wrapped).map(|r| r.saving).collect();
    let average =
        (!shuffled.is_empty()).then(|| shuffled.iter().sum::<f64>() / shuffled.len() as f64);
    let serp = match (find(Kind::Serpentine), find(Kind::Wrapped)) {
        (Some(s), Some(w)) => Some(1.0 - s.with_routing_kw / w.without_routing_kw),
        _ => None,
    };
    // §B.5.1 quotes the mixed trace's statistics; §B.5.5 those with idle power at 10% of peak.
    let energy_proportional = trace.idle_fraction <= 0.1 + 1e-9;
    let (mean, max, sd) =
        if energy_proportional { (99.8, 153.9, 18.9) } else { (180.5, 208.7, 9.0) };
    let paper = PaperRouting {
        trace_mean_kw: mean,
        trace_max_kw: max,
        trace_sd_kw: sd,
        average_saving_except_wrapped: 0.12,
        fully_connected_over_bound: 0.02,
        fully_connected_saving: 0.13,
        serpentine_routed_vs_wrapped_static: 0.32,
        wrapped_routed_over_bound: 0.20,
    };
    let mut report = RouteReport {
        synthetic_traces: true,
        trace_stats: generated.stats(),
        paper_energy_proportional: energy_proportional.then_some([0.22, 0.29, 0.28, 0.47]),
        trace,
        servers_per_rack,
        mix,
        results,
        average_saving_except_wrapped: average,
        serpentine_routed_vs_wrapped_static: serp,
        paper,
        claims: Vec::new(),
    };
    report.claims = route_claims(&[&report]);
    Ok(report)
}

/// The paper's Fig. B.7 (or, with idle power ≤ 10% of peak, Fig. B.10) numbers judged on
/// `reports` (the same setting on several trace seeds; ours is their range). The trace's own
/// mean, max and sd are inputs: the generator is tuned to the paper's mean and sd.
pub fn route_claims(reports: &[&RouteReport]) -> Vec<Claim> {
    let Some(first) = reports.first() else { return Vec::new() };
    let p = &first.paper;
    let stats = |f: fn(&TraceStats) -> f64| -> Vec<f64> {
        reports.iter().map(|r| f(&r.trace_stats)).collect()
    };
    let (means, maxes, sds) = (stats(|t| t.mean_kw), stats(|t| t.max_kw), stats(|t| t.sd_kw));
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.1}–{hi:.1}")
    };
    let synthetic = format!(
        "SYNTHETIC traces ({} seeds; total mean {} kW, max {} kW, sd {} kW vs the paper's \
         production traces {:.1} / {:.1} / {:.1}): the saving is set by how servers' peaks \
         coincide on a PDU pair, which our generator (per-server AR(1) around cluster diurnal \
         shapes) decides and the paper's traces fix; the synthetic trace cannot reproduce it",
        reports.len(),
        range(&means),
        range(&maxes),
        range(&sds),
        p.trace_mean_kw,
        p.trace_max_kw,
        p.trace_sd_kw
    );
    let tuned = "a property of our SYNTHETIC trace, whose generator is tuned to the paper's \
                 mean and sd: what we put in, not a Power Routing result";
    let src = if first.paper_energy_proportional.is_some() { "§B.5.5" } else { "§B.5.1" };
    let mut claims = vec![
        Claim::new(
            "trace total power mean, kW",
            src,
            Role::Input,
            Bound::Paper,
            p.trace_mean_kw,
            &means,
            (p.trace_mean_kw, p.trace_mean_kw),
            tuned,
        ),
        Claim::new(
            "trace total power sd, kW",
            src,
            Role::Input,
            Bound::Paper,
            p.trace_sd_kw,
            &sds,
            (p.trace_sd_kw, p.trace_sd_kw),
            tuned,
        ),
        Claim::new(
            "trace total power max, kW",
            src,
            Role::Input,
            Bound::Paper,
            p.trace_max_kw,
            &maxes,
            (p.trace_max_kw, p.trace_max_kw),
            tuned,
        ),
    ];
    let per = |k: Kind, f: fn(&RouteResult) -> f64| -> Vec<f64> {
        reports.iter().filter_map(|r| r.results.iter().find(|x| x.topology == k).map(f)).collect()
    };
    let all = |f: fn(&RouteReport) -> Option<f64>| -> Vec<f64> {
        reports.iter().filter_map(|r| f(r)).collect()
    };
    let mut out = |what, source, paper: f64, ours: Vec<f64>, accept| {
        if ours.len() == reports.len() {
            claims.push(Claim::new(
                what,
                source,
                Role::Output,
                Bound::Paper,
                paper,
                &ours,
                accept,
                synthetic.clone(),
            ));
        }
    };
    if let Some([xy, serp, full, vs]) = first.paper_energy_proportional {
        let src = "§B.5.5, Fig. B.10";
        out("x-y saving (idle 10%)", src, xy, per(Kind::XY, |x| x.saving), printed(xy, 2));
        let serp_saving = per(Kind::Serpentine, |x| x.saving);
        out("serpentine saving (idle 10%)", src, serp, serp_saving, printed(serp, 2));
        let full_saving = per(Kind::FullyConnected, |x| x.saving);
        out("fully-connected saving (idle 10%)", src, full, full_saving, printed(full, 2));
        let v = all(|r| r.serpentine_routed_vs_wrapped_static);
        out("serpentine routed vs wrapped static (idle 10%)", src, vs, v, printed(vs, 2));
    } else {
        let src = "§B.5.2, Fig. B.7";
        let avg = all(|r| r.average_saving_except_wrapped);
        let a = p.average_saving_except_wrapped;
        out("average saving, shuffled topologies", src, a, avg, printed(a, 2));
        let over = per(Kind::FullyConnected, |x| x.routed_over_bound);
        let within = p.fully_connected_over_bound;
        out("fully-connected routed over bound (\"within 2%\")", src, within, over, (0.0, within));
        let full = p.fully_connected_saving;
        let full_saving = per(Kind::FullyConnected, |x| x.saving);
        out("fully-connected saving", src, full, full_saving, printed(full, 2));
        let vs = p.serpentine_routed_vs_wrapped_static;
        let v = all(|r| r.serpentine_routed_vs_wrapped_static);
        out("serpentine routed vs wrapped static", src, vs, v, printed(vs, 2));
        let w = p.wrapped_routed_over_bound;
        let wrapped = per(Kind::Wrapped, |x| x.routed_over_bound);
        out("wrapped routed over bound", src, w, wrapped, printed(w, 2));
    }
    claims
}

/// Text rendering of the route report.
pub fn route_text(r: &RouteReport) -> String {
    let mut s = String::new();
    let t = &r.trace_stats;
    let _ = writeln!(
        s,
        "SYNTHETIC traces (the paper's production traces are not available): {} servers, {} min, \
         idle {:.0}% of peak, seed {}, pairs {}; total power mean {:.1} kW, max {:.1} kW, \
         sd {:.1} kW (paper's traces: {:.1} / {:.1} / {:.1})",
        r.trace.servers,
        r.trace.minutes,
        r.trace.idle_fraction * 100.0,
        r.trace.seed,
        match r.mix {
            Mix::Blocks => "in blocks of racks",
            Mix::PerRack => "per rack",
            Mix::WithinRack => "mixed within racks",
        },
        t.mean_kw,
        t.max_kw,
        t.sd_kw,
        r.paper.trace_mean_kw,
        r.paper.trace_max_kw,
        r.paper.trace_sd_kw
    );
    let _ = writeln!(
        s,
        "\n{:<16} {:>4} {:>2} {:>8} {:>8} {:>8} {:>10} {:>10} {:>7} {:>9} {:>7}",
        "topology",
        "PDUs",
        "c",
        "peak kW",
        "bound kW",
        "LP kW",
        "static kW",
        "routed kW",
        "saving",
        "vs bound",
        "resched"
    );
    for x in &r.results {
        let _ = writeln!(
            s,
            "{:<16} {:>4} {:>2} {:>8.1} {:>8.1} {:>8.1} {:>10.1} {:>10.1} {:>6.1}% {:>+8.1}% {:>7}",
            x.topology.name(),
            x.pdus,
            x.connectivity,
            x.peak_kw,
            x.bound_kw,
            x.lp_bound_kw,
            x.without_routing_kw,
            x.with_routing_kw,
            x.saving * 100.0,
            x.routed_over_bound * 100.0,
            x.reschedules
        );
    }
    let p = &r.paper;
    let _ = writeln!(s, "\nPaper (Fig. B.7, real traces) beside ours (synthetic traces):");
    if let Some(a) = r.average_saving_except_wrapped {
        let _ = writeln!(
            s,
            "  average saving, shuffled topologies: paper {:.0}%, ours {:.1}%",
            p.average_saving_except_wrapped * 100.0,
            a * 100.0
        );
    }
    for x in &r.results {
        let (paper_bound, paper_saving) = match x.topology {
            Kind::FullyConnected => ("within 2%", "13%"),
            Kind::Wrapped => ("+20%", "n/a"),
            _ => ("near", "n/a"),
        };
        let _ = writeln!(
            s,
            "  {:<16} routed vs bound: paper {paper_bound}, ours {:+.1}% ({:+.1}% vs the LP \
             bound); saving: paper {paper_saving}, ours {:.1}%",
            x.topology.name(),
            x.routed_over_bound * 100.0,
            (x.with_routing_kw / x.lp_bound_kw - 1.0) * 100.0,
            x.saving * 100.0
        );
    }
    if let Some(v) = r.serpentine_routed_vs_wrapped_static {
        let _ = writeln!(
            s,
            "  serpentine routed vs wrapped static: paper −{:.0}%, ours −{:.1}%",
            p.serpentine_routed_vs_wrapped_static * 100.0,
            v * 100.0
        );
    }
    if let Some([xy, serp, full, vs]) = r.paper_energy_proportional {
        let _ = writeln!(
            s,
            "  Fig. B.10 (idle 10%): paper savings x-y {:.0}%, serpentine {:.0}%, fully {:.0}%, \
             serpentine routed vs wrapped static {:.0}%",
            xy * 100.0,
            serp * 100.0,
            full * 100.0,
            vs * 100.0
        );
    }
    let _ = writeln!(s, "\nVerdicts (SYNTHETIC trace, one seed):");
    s += &verdict::text(&r.claims);
    s
}

/// The route experiment for a single topology (a convenience for tests and callers).
pub fn route_one(spec: &RouteSpec) -> Result<RouteResult> {
    sim::route(spec)
}

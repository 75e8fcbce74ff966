//! The abstract model (thesis app. A) against the numbers the paper states: Table A.1's shares,
//! the chiller polynomial, power-conditioning losses, and Table A.3 at U = 25%.
//! Would catch: a mis-transcribed coefficient, a broken (A.2), or a component left out of the sum.

use dcpower::cooling::{chiller_power_kw, CoolingParams};
use dcpower::model::{self, ModelParams};
use dcpower::report::{self, CASE_STUDY_U};

#[test]
fn server_utilisation_follows_a2() {
    assert_eq!(model::server_utilisation(0.25, 1.0), 0.25); // perfect balance: u = U
    assert_eq!(model::server_utilisation(0.25, 0.0), 1.0); // perfect consolidation: u = 1
    assert!((model::server_utilisation(0.25, 0.95) - 0.2597).abs() < 1e-4);
    assert!((model::server_utilisation(0.25, 0.25) - 0.5714).abs() < 1e-4);
    assert_eq!(model::server_utilisation(0.0, 0.0), 0.0);
}

#[test]
fn chiller_polynomial_is_the_papers_at_its_reference_conditions() {
    let c = CoolingParams::default();
    // Heat is linear in U at ℓ = 0, from `h0` of rated at U = 0 to rated at U = 1.
    let h0 = 0.12;
    for u in [0.0, 0.25, 0.5, 1.0] {
        let paper = 742.8 * u * u + 1844.6 * u + 538.7;
        let ours = chiller_power_kw(&c, 8000.0, h0, 8000.0 * (h0 + (1.0 - h0) * u), 85.0, 45.0);
        assert!((ours - paper).abs() < 1e-9, "U = {u}: {ours} vs {paper}");
    }
    // "The difference in chiller power for a 45°F and 55°F chilled water supply at peak load is
    // nearly 500kW" (§A.4.6): within 450..=500.
    let diff = chiller_power_kw(&c, 8000.0, h0, 8000.0, 85.0, 45.0)
        - chiller_power_kw(&c, 8000.0, h0, 8000.0, 85.0, 55.0);
    assert!((450.0..=500.0).contains(&diff), "{diff}");
    // Hotter outside air costs more (Fig. A.9).
    assert!(
        chiller_power_kw(&c, 8000.0, h0, 4000.0, 95.0, 45.0)
            > chiller_power_kw(&c, 8000.0, h0, 4000.0, 75.0, 45.0)
    );
}

#[test]
fn conditioning_losses_match_section_a43() {
    let p = ModelParams::default();
    let peak = 10_000.0;
    let (pdu, ups) = model::conditioning_losses(&p, peak, peak);
    assert!((pdu / peak - 0.03).abs() < 1e-12, "PDU 3% of its load at peak");
    // (A.5) charges π_UPS on ΣP_PDU, the power the UPS passes on: 9% of that at peak.
    assert!((ups / (peak + pdu) - 0.09).abs() < 0.005, "UPS ≈ 9% at peak");
    assert!(((pdu + ups) / peak - 0.12).abs() < 0.005, "12% of server power at peak (Fig. A.5)");
}

#[test]
fn table_a1_shares_within_tolerance_for_the_conventional_facility() {
    let r = report::model_report(CASE_STUDY_U).unwrap();
    // Table A.1: servers 56%, cooling 30%, conditioning 8%, network + lighting 6%. Our legacy
    // facility at peak lands within 8 points of each share (the paper gives no operating point).
    for (ours, paper) in r.table_a1_austin_peak.iter().zip(r.table_a1_paper) {
        assert!((ours - paper).abs() <= 0.08, "{:?} vs {:?}", r.table_a1_austin_peak, paper);
    }
}

#[test]
fn table_a3_at_25_percent() {
    let r = report::model_report(CASE_STUDY_U).unwrap();
    assert_eq!(r.scenarios.len(), 6);
    for row in &r.scenarios {
        let b = &row.breakdown;
        let sum =
            b.servers_kw + b.pdu_loss_kw + b.ups_loss_kw + b.crah_kw + b.chiller_kw + b.misc_kw;
        assert!(
            (sum - b.total_kw).abs() < 1e-6,
            "{}: components sum to the total",
            row.scenario.name
        );
        assert!(b.pue > 1.0 && b.pue.is_finite());
        assert!(b.cooling.server_inlet_f <= 77.0 + 1e-6, "{}: inlet limit", row.scenario.name);
    }
    let b = |i: usize| &r.scenarios[i].breakdown;
    // Each feature saves power (Fig. A.10's bars fall left to right).
    for i in 1..6 {
        assert!(b(i).total_kw < b(i - 1).total_kw, "scenario {i} saves power");
    }
    let find = |what: &str| r.claims.iter().find(|c| c.what.starts_with(what)).unwrap();
    for what in [
        "server utilisation, ℓ = 0.95",
        "server utilisation, ℓ = 0.25",
        "active servers, ℓ = 0.25",
        "PUE rises with consolidation",
        "Austin chiller above",
    ] {
        let c = find(what);
        assert!(c.counts_as_reproduced(), "{what}: paper {} ours {}", c.paper, c.ours_lo);
    }
    // The paper's "81%" active servers contradicts its own (A.2); we follow (A.2).
    assert!((b(1).active_servers_fraction - 0.9625).abs() < 1e-12);
}

#[test]
fn impossible_parameters_are_errors_not_panics() {
    assert!(report::model_report(1.5).is_err());
    assert!(report::model_report(f64::NAN).is_err());
    let p = ModelParams::default();
    let mut s = model::table_a3()[0].clone();
    s.containment = 0.0;
    assert!(model::size_facility(&p, &s).is_err());
}

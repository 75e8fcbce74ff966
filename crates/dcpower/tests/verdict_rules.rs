//! Issue 36/38's verdict rules for appendices A and B: inputs and fitted constants are never
//! counted as reproduced outputs, a "differs" needs its cause, a range straddling the bound is
//! inconclusive, and anything drawn from a synthetic trace says so.

use dcpower::report::{self, route_claims, CASE_STUDY_U};
use dcpower::schedule::Mix;
use dcpower::topology::Kind;
use dcpower::trace::TraceSpec;
use dcpower::verdict::{self, printed, Bound, Claim, Role, Verdict};

/// Guards: an input that equals the paper's number is not a reproduced output.
#[test]
fn an_input_matching_the_paper_is_not_counted_as_reproduced() {
    let c = Claim::new("x", "§", Role::Input, Bound::Paper, 0.03, &[0.03], (0.03, 0.03), "in");
    assert_eq!(c.verdict, Verdict::NotJudged);
    assert!(!c.counts_as_reproduced());
    let f = Claim::new("y", "§", Role::Fitted, Bound::Paper, 500.0, &[500.0], (499.0, 501.0), "f");
    assert!(!f.counts_as_reproduced());
    let s = verdict::summary(&[c, f]);
    assert_eq!((s.reproduced, s.inputs_and_fitted), (0, 2));
}

/// Guards: PDU 3%, UPS 9%, the 500 kW chiller gap and the 10 MW design point are listed as
/// inputs / fitted constants in the model report, in their own section, never as outputs.
#[test]
fn app_a_inputs_and_fitted_constants_are_listed_apart() {
    let r = report::model_report(CASE_STUDY_U).unwrap();
    verdict::check(&r.claims).unwrap();
    for what in ["PDU loss", "UPS loss", "chiller 45 °F minus 55 °F", "Austin total power"] {
        let c = r.claims.iter().find(|c| c.what.starts_with(what)).unwrap();
        assert_ne!(c.role, Role::Output, "{what} is an input or fitted constant");
        assert!(!c.counts_as_reproduced(), "{what}");
    }
    let gap = r.claims.iter().find(|c| c.what.starts_with("chiller 45 °F minus")).unwrap();
    assert_eq!(gap.role, Role::Fitted);
    let text = report::model_text(&r);
    let inputs_at = text.find("Inputs and fitted constants").unwrap();
    let pdu_at = text.find("PDU loss at full load").unwrap();
    assert!(pdu_at > inputs_at, "PDU 3% is printed in the inputs section");
    let summary = verdict::summary(&r.claims);
    let outputs_paper = r
        .claims
        .iter()
        .filter(|c| c.role == Role::Output && c.bound == Bound::Paper)
        .filter(|c| c.verdict == Verdict::Reproduced)
        .count();
    assert_eq!(summary.reproduced, outputs_paper);
}

/// Guards: a claim that differs or is inconclusive without a cause is rejected.
#[test]
fn a_difference_without_a_cause_is_rejected() {
    let c = Claim::new("z", "§", Role::Output, Bound::Paper, 0.22, &[0.20], printed(0.22, 2), "");
    assert_eq!(c.verdict, Verdict::Differs);
    assert!(verdict::check(&[c]).is_err());
    let ok = Claim::new("z", "§", Role::Output, Bound::Paper, 0.22, &[0.20], (0.215, 0.225), "w");
    assert!(verdict::check(&[ok]).is_ok());
}

/// Guards: ours as a range that straddles the bound is inconclusive, not reproduced.
#[test]
fn a_range_straddling_the_bound_is_inconclusive() {
    let c =
        Claim::new("r", "§", Role::Output, Bound::Paper, 0.12, &[0.11, 0.13], (0.115, 0.125), "n");
    assert_eq!(c.verdict, Verdict::Inconclusive);
    let ours = Claim::new("o", "§", Role::Output, Bound::Ours, 0.56, &[0.56], (0.54, 0.58), "");
    assert_eq!(ours.verdict, Verdict::Reproduced);
    assert!(!ours.counts_as_reproduced(), "our tolerance is reported apart");
}

/// Guards: a synthetic trace is labelled in the route report, its claims and its figure.
#[test]
fn a_synthetic_trace_is_labelled_on_the_plot_and_in_the_report() {
    let trace = TraceSpec { servers: 120, minutes: 60, ..TraceSpec::default() };
    let r = report::route_report(&Kind::ALL, 6, 20, Mix::Blocks, trace).unwrap();
    assert!(r.synthetic_traces);
    assert!(report::route_text(&r).contains("SYNTHETIC"));
    let claims = route_claims(&[&r]);
    verdict::check(&claims).unwrap();
    for c in &claims {
        if c.what.starts_with("trace total power") {
            assert_eq!(c.role, Role::Input, "{}: the trace's statistics are tuned inputs", c.what);
        } else if c.verdict != Verdict::Reproduced {
            assert!(c.cause.contains("SYNTHETIC"), "{}: cause names the synthetic trace", c.what);
        }
    }
    let fig = dcpower::plot::route_figure(&[&r], "test");
    assert!(fig.title.contains("SYNTHETIC"));
    assert!(fig.panels.iter().all(|p| p.title.contains("SYNTHETIC")));
    assert_eq!(fig.categories.as_ref().map(Vec::len), Some(4));
}

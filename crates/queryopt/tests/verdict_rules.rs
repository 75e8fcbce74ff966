//! Issue 36/38's verdict rules for thesis ch. III: Table 2.1's device parameters (and what only
//! restates them) are inputs, never counted; a "differs" needs its cause; every configuration
//! of an aggregate must agree; and the join claims judge what the operators do on the models.

use queryopt::claims::{self, table_3_1_speedup};
use queryopt::join::JoinAlgo;
use queryopt::report::{self, DeviceKind, JoinOptions};
use queryopt::verdict::{self, Bound, Claim, Role, Verdict};

/// Guards: a claim that restates the accounted models' inputs is not counted as reproduced.
#[test]
fn the_device_models_inputs_are_not_counted_as_reproduced() {
    let inputs = claims::input_claims();
    assert!(inputs.len() >= 4);
    verdict::check(&inputs).unwrap();
    for c in &inputs {
        assert_eq!(c.role, Role::Input, "{}", c.what);
        assert_eq!(c.verdict, Verdict::NotJudged, "{}", c.what);
        assert!(!c.counts_as_reproduced(), "{}", c.what);
    }
    let s = verdict::summary(&inputs);
    assert_eq!((s.reproduced, s.inputs_and_fitted), (0, inputs.len()));
    let text = verdict::text(&inputs);
    assert!(text.contains("Inputs and fitted constants"));
    assert!(!text.contains("Outputs, judged on the paper's bound"));
}

/// Guards: a claim that differs without a cause is rejected.
#[test]
fn a_difference_without_a_cause_is_rejected() {
    let c = Claim::new("s", "§3.4", Role::Output, Bound::Paper, 5.5, &[2.0], (5.0, 6.0), "");
    assert_eq!(c.verdict, Verdict::Differs);
    assert!(verdict::check(&[c]).is_err());
}

/// Guards: configurations on both sides of the bound make an aggregate differ (every group
/// must agree), while repetitions straddling it are inconclusive.
#[test]
fn groups_on_both_sides_of_the_bound_differ_repetitions_are_inconclusive() {
    let ours = [2.1, 5.5, 10.6];
    let g = Claim::groups("g", "§", Role::Output, Bound::Paper, 5.5, &ours, (5.0, 6.0), "why");
    assert_eq!(g.verdict, Verdict::Differs);
    let r = Claim::new("r", "§", Role::Output, Bound::Paper, 5.5, &ours, (5.0, 6.0), "why");
    assert_eq!(r.verdict, Verdict::Inconclusive);
    let ok = Claim::groups("k", "§", Role::Output, Bound::Paper, 5.5, &[5.2, 5.8], (5.0, 6.0), "");
    assert!(ok.counts_as_reproduced());
}

/// Guards: the thesis's Table 3.1 ratios are quoted, not invented.
#[test]
fn table_3_1_speedups_are_the_thesis_numbers() {
    let (sm, hh) = table_3_1_speedup(false, 0).unwrap();
    assert!((sm - 187.0 / 40.0).abs() < 1e-12 && (hh - 202.0 / 34.0).abs() < 1e-12);
    let (sm, hh) = table_3_1_speedup(true, 5).unwrap();
    assert!((sm - 2081.0 / 250.0).abs() < 1e-12 && (hh - 1955.0 / 634.0).abs() < 1e-12);
    assert!(table_3_1_speedup(true, 6).is_none());
    let ratio = claims::table_3_1_spread_ratio();
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");
}

/// Guards: a small join grid yields judged speed-up and winner claims, each with its cause
/// where it is not reproduced.
#[test]
fn join_claims_judge_speedups_and_winners_with_causes() {
    let opts = JoinOptions {
        sizes: vec![(3000, 3000), (6000, 6000)],
        projectivities: vec![0.05, 0.25],
        algorithms: vec![JoinAlgo::SortMerge, JoinAlgo::HybridHash],
        memory_pages: 32,
        extent_pages: 8,
        seed: 1,
        allow_buffered: false,
    };
    let r = report::join_report(&[DeviceKind::SsdModel, DeviceKind::DiskModel], &opts).unwrap();
    let c = claims::join_claims(&r);
    verdict::check(&c).unwrap();
    let speedups: Vec<&Claim> = c.iter().filter(|x| x.what.starts_with("SSD speed-up")).collect();
    assert_eq!(speedups.len(), 2);
    for x in &c {
        assert_eq!(x.role, Role::Output);
        if x.verdict != Verdict::Reproduced {
            assert!(!x.cause.is_empty(), "{}", x.what);
        }
    }
    assert!(c.iter().any(|x| x.what.contains("hybrid hash wins")));
}

/// Guards: every claim a spec in `experiments/queryopt/` names is judged in the committed
/// results, with the spec's number and bound.
#[test]
fn the_specs_claims_are_judged_in_the_committed_results() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let claims = std::fs::read_to_string(format!("{root}/results/queryopt/claims.json")).unwrap();
    let claims: serde_json::Value = serde_json::from_str(&claims).unwrap();
    let claims = claims.as_array().unwrap();
    let find = |what: &str| claims.iter().find(|c| c["what"] == what);
    let mut judged = 0;
    let dir = format!("{root}/experiments/queryopt");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let spec: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = path.display().to_string();
        let list = spec["claim"].as_array().unwrap();
        assert!(list.iter().any(|c| c.get("what").is_some()), "{name}: no judged claim");
        for c in list {
            let Some(what) = c.get("what").and_then(|w| w.as_str()) else {
                assert!(
                    c.get("not_judged").is_some(),
                    "{name}: a claim neither judged nor excused"
                );
                continue;
            };
            let got = find(what).unwrap_or_else(|| panic!("{name}: \"{what}\" not in claims.json"));
            assert_eq!(got["bound"].as_str(), c["bound"].as_str(), "{name}: {what}");
            if let Some(p) = c["paper"].as_float() {
                assert!((got["paper"].as_f64().unwrap() - p).abs() < 1e-9, "{name}: {what}");
            }
            for also in c.get("also").and_then(|a| a.as_array()).into_iter().flatten() {
                assert!(find(also.as_str().unwrap()).is_some(), "{name}: {also}");
            }
            judged += 1;
        }
    }
    assert!(judged >= 7, "{judged}");
}

/// Guards: repetitions that reach different verdicts make a claim inconclusive, with the split
/// in its cause (CPU noise may not decide a verdict).
#[test]
fn repetitions_that_disagree_are_inconclusive() {
    let judge =
        |v: f64| Claim::new("w", "§", Role::Output, Bound::Paper, 1.0, &[v], (1.0, 1.0), "c");
    let merged = verdict::merge(&[vec![judge(1.0)], vec![judge(0.833)], vec![judge(1.0)]]);
    assert_eq!(merged[0].verdict, Verdict::Inconclusive);
    assert!(merged[0].cause.contains("disagree"), "{}", merged[0].cause);
    assert_eq!((merged[0].ours_lo, merged[0].ours_hi), (0.833, 1.0));
    let same = verdict::merge(&[vec![judge(1.0)], vec![judge(1.0)]]);
    assert!(same[0].counts_as_reproduced());
    verdict::check(&merged).unwrap();
}

//! The seeds run by their own commands (persistency, query optimisation, power) in
//! `nvmdb report --seed DIR` (issue 36): each gets its section, every claim judged again from
//! its numbers by the shared rule, a differs without a cause says "cause not established", an
//! input or a fitted constant never counts as reproduced, the summary counts them and the
//! figures are linked relative to the report. Would catch a seed's words pasted as its verdict.

use experiments::analysis::{Class, Verdict, CAUSE_UNKNOWN};
use experiments::report::seeds::Manifest;
use experiments::report::{self, ReportOptions};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A seed directory `root/name` holding `claims` and a manifest for them (and an SVG figure).
fn seed_dir(root: &Path, name: &str, seed: &str, claims: Value) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("c.claims.json"), claims.to_string()).unwrap();
    std::fs::write(dir.join("c.svg"), "<svg width=\"640\" height=\"480\"></svg>").unwrap();
    let m = Manifest {
        seed: seed.into(),
        name: format!("{name}-x"),
        title: "t".into(),
        source: "thesis".into(),
        description: String::new(),
        command: format!("make {name}"),
        claims: "c.claims.json".into(),
        figures: vec!["c.svg".into()],
        ours_range: "3 runs".into(),
        quick: false,
        notes: vec!["a SYNTHETIC trace".into()],
    };
    m.write(&dir, "c.experiment.json").unwrap();
    dir
}

/// The report of the seed directories alone (no sweep rows), written under `root/report`.
fn report_of(root: &Path, seeds: Vec<PathBuf>) -> (report::Report, String) {
    let out = root.join("report");
    std::fs::create_dir_all(&out).unwrap();
    let options = ReportOptions { dir: out, seeds, ..Default::default() };
    let built = report::build(&options).unwrap();
    report::write(&built).unwrap();
    let md = std::fs::read_to_string(root.join("report/report.md")).unwrap();
    (built, md)
}

/// A persistency claim as `nvmdb persistency sweep` writes it.
fn persistency_claim(id: &str, lo: Value, hi: Value, min: Value, max: Value, v: &str) -> Value {
    json!({"id": id, "text": id, "paper": "12.0 (Table 8.1)", "expected": 12.0, "ours": lo,
           "ours_lo": lo, "ours_hi": hi, "min": min, "max": max, "bound": "paper",
           "verdict": v, "cause": null})
}

/// A claim as `experiments::verdict::Claim` serialises (queryopt, dcpower).
fn verdict_claim(what: &str, role: &str, ours: [f64; 2], accept: [f64; 2], over: &str) -> Value {
    json!({"what": what, "source": "§3.3", "role": role, "bound": "paper", "paper": 2.0,
           "ours_lo": ours[0], "ours_hi": ours[1], "accept_lo": accept[0],
           "accept_hi": accept[1], "over": over, "verdict": "reproduced", "cause": ""})
}

/// Guards the persistency section: a differs claim whose file gives no cause prints "cause
/// not established", and the verdict comes from the numbers, not from the file's word.
#[test]
fn persistency_differs_without_a_cause_prints_cause_not_established() {
    let root = tempfile::tempdir().unwrap();
    let claims = json!([
        // The file says "reproduced"; its numbers lie outside the bound.
        persistency_claim("strict", json!(0.5), json!(0.6), json!(6.0), json!(24.0), "reproduced"),
        persistency_claim("epoch", json!(7.0), json!(8.0), json!(6.0), json!(24.0), "reproduced"),
    ]);
    let dir = seed_dir(root.path(), "persistency", "persistency", claims);
    let (built, md) = report_of(root.path(), vec![dir]);
    let claims = &built.specs[0].claims;
    assert_eq!(claims[0].verdict, Verdict::Differs);
    assert_eq!(claims[0].cause.as_deref(), Some(CAUSE_UNKNOWN));
    assert_eq!(claims[1].verdict, Verdict::Reproduced);
    assert!(md.contains("## Seed: persistency"), "{md}");
    assert!(md.contains(&format!("differs (accepted 6–24) — cause: {CAUSE_UNKNOWN}")), "{md}");
    assert!(md.contains("1 reproduced, 1 differ"), "{md}");
}

/// Guards serde's null for a non-finite number: persistency's unbounded rate (a path of 0) is
/// judged unbounded (above every finite maximum), a NaN is inconclusive, "not measured" no data.
#[test]
fn persistency_null_reads_unbounded_nan_or_not_measured_by_the_writers_verdict() {
    let root = tempfile::tempdir().unwrap();
    let null = Value::Null;
    let claims = json!([
        persistency_claim("side", null.clone(), null.clone(), json!(1.0), null.clone(), "x"),
        persistency_claim("ratio", null.clone(), null.clone(), json!(6.0), json!(24.0), "x"),
        persistency_claim(
            "nan",
            null.clone(),
            null.clone(),
            json!(6.0),
            null.clone(),
            "inconclusive"
        ),
        persistency_claim("none", null.clone(), null.clone(), json!(6.0), null, "not_measured"),
    ]);
    let dir = seed_dir(root.path(), "persistency", "persistency", claims);
    let (built, _) = report_of(root.path(), vec![dir]);
    let v: Vec<&Verdict> = built.specs[0].claims.iter().map(|c| &c.verdict).collect();
    assert_eq!(v[0], &Verdict::Reproduced);
    assert_eq!(v[1], &Verdict::Differs);
    assert!(matches!(v[2], Verdict::Inconclusive(_)), "{v:?}");
    assert!(matches!(v[3], Verdict::NoData(_)), "{v:?}");
    assert!(built.specs[0].claims[2].cause.is_some());
}

/// Guards the query-optimisation section: an input matching the paper is listed apart and
/// never counted as reproduced; a differs without a cause says so; a range over configurations
/// (`over = groups`) that straddles the bound differs, over repetitions it is inconclusive.
#[test]
fn queryopt_inputs_never_count_and_groups_straddling_differ() {
    let root = tempfile::tempdir().unwrap();
    let claims = json!([
        verdict_claim("SSD random read", "input", [90.0, 90.0], [90.0, 90.0], "repetitions"),
        verdict_claim("speed-up", "output", [1.0, 1.5], [5.0, 6.0], "repetitions"),
        verdict_claim("crossing reps", "output", [0.03, 0.04], [0.035, 0.045], "repetitions"),
        verdict_claim("crossing groups", "output", [0.03, 0.04], [0.035, 0.045], "groups"),
    ]);
    let dir = seed_dir(root.path(), "queryopt", "query optimisation", claims);
    let (built, md) = report_of(root.path(), vec![dir]);
    let c = &built.specs[0].claims;
    assert_eq!((c[0].class, &c[0].verdict), (Class::Input, &Verdict::NotJudged("input".into())));
    assert_eq!(c[1].verdict, Verdict::Differs);
    assert_eq!(c[1].cause.as_deref(), Some(CAUSE_UNKNOWN));
    assert!(matches!(c[2].verdict, Verdict::Inconclusive(_)), "{:?}", c[2].verdict);
    assert_eq!(c[3].verdict, Verdict::Differs);
    let t = report::tally(&built);
    assert_eq!((t.paper.agree, t.paper.differ, t.paper.inconclusive), (0, 2, 1));
    assert_eq!((t.inputs.total(), t.inputs.agree), (1, 0));
    assert!(md.contains("## Seed: query optimisation"), "{md}");
    assert!(md.contains("### Inputs and fitted constants"), "{md}");
    assert!(md.contains("Paper claims against the paper's bounds: 0 reproduced"), "{md}");
    assert!(md.contains("1 inputs and fitted constants"), "{md}");
}

/// Guards the power section: a fitted constant that equals the paper's number is never
/// counted as reproduced, the synthetic trace's note is printed, the figure is linked
/// relative to the report (`../power/c.svg`), and the summary adds the seeds to the counts.
#[test]
fn power_fitted_constants_never_count_and_figures_are_linked() {
    let root = tempfile::tempdir().unwrap();
    let claims = json!([
        verdict_claim("chiller gap", "fitted", [2.0, 2.0], [2.0, 2.0], "repetitions"),
        verdict_claim("PUE", "output", [1.9, 2.1], [1.5, 2.5], "repetitions"),
    ]);
    let dir = seed_dir(root.path(), "power", "power", claims);
    let (built, md) = report_of(root.path(), vec![dir]);
    let c = &built.specs[0].claims;
    assert_eq!(c[0].verdict, Verdict::NotJudged("fitted constant".into()));
    assert_eq!(c[1].verdict, Verdict::Reproduced);
    let t = report::tally(&built);
    assert_eq!((t.paper.agree, t.inputs.total()), (1, 1));
    assert!(md.contains("Paper claims against the paper's bounds: 1 reproduced"), "{md}");
    assert!(md.contains("a SYNTHETIC trace"), "{md}");
    assert!(md.contains("[c](../power/c.svg) ([PNG](../power/c.svg))"), "{md}");
    let html = std::fs::read_to_string(root.path().join("report/index.html")).unwrap();
    assert!(html.contains("<img src=\"../power/c.svg\" width=\"640\" height=\"480\""), "{html}");
}

/// Guards a damaged seed directory: no manifest, or a claims file that is not claims, is a
/// one-line error naming the file, not a panic or a silently empty section.
#[test]
fn a_damaged_seed_directory_is_an_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let options =
        ReportOptions { dir: root.path().into(), seeds: vec![empty], ..Default::default() };
    let err = report::build(&options).unwrap_err().to_string();
    assert!(err.contains("not a seed's result directory"), "{err}");
    let dir = seed_dir(root.path(), "bad", "bad", json!([{"no": "claim"}]));
    std::fs::write(dir.join("c.claims.json"), "[{\"no\": 1}]").unwrap();
    let options = ReportOptions { dir: root.path().into(), seeds: vec![dir], ..Default::default() };
    let err = report::build(&options).unwrap_err().to_string();
    assert!(err.contains("c.claims.json") && err.contains("claim 0 is not a claim"), "{err}");
}

/// Guards the committed seed results staying readable by the report: every committed seed
/// directory has manifests, every claim gets a verdict, and every differs states a cause.
#[test]
fn the_committed_seed_directories_are_reported() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results");
    let root = tempfile::tempdir().unwrap();
    let seeds = ["persistency", "queryopt", "dcpower"].map(|s| results.join(s)).to_vec();
    let (built, md) = report_of(root.path(), seeds);
    for seed in ["persistency", "query optimisation", "power"] {
        assert!(md.contains(&format!("## Seed: {seed}")), "{seed}");
    }
    let claims: Vec<_> = built.specs.iter().flat_map(|s| &s.claims).collect();
    assert!(claims.len() > 50, "{}", claims.len());
    for c in claims {
        if matches!(c.verdict, Verdict::Differs | Verdict::Inconclusive(_)) {
            assert!(c.cause.as_deref().is_some_and(|s| !s.is_empty()), "{}", c.text);
        }
    }
}

/// A claim that names what its range covers (persistency's finite-trace claims: native runs
/// and trace lengths) is printed with its own words, the others with the manifest's. Would
/// catch a steady-state claim said to range over trace lengths it never had.
#[test]
fn a_claims_own_range_replaces_the_manifests() {
    let judge = |v: &Value| experiments::report::seeds::claim(v, "3 runs").unwrap().repetitions;
    let plain = persistency_claim("a", json!(2.0), json!(3.0), json!(1.0), Value::Null, "x");
    assert_eq!(judge(&plain).as_deref(), Some("range over 3 runs"));
    let mut own = plain.clone();
    own["ours_range"] = json!("3 runs and traces of 100 and 150 inserts (lengths ours)");
    assert_eq!(
        judge(&own).as_deref(),
        Some("range over 3 runs and traces of 100 and 150 inserts (lengths ours)")
    );
}

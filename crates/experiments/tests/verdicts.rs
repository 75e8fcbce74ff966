//! Claims against synthetic measurements: break-even points by interpolation, thresholds,
//! ratio aggregates, tolerances, and claims whose engine cannot run yet. Guards the numbers
//! the report puts beside the paper's.

use experiments::analysis::{self, Verdict};
use experiments::data::Dataset;
use experiments::{Row, Spec};
use serde_json::json;
use std::path::Path;

const GRID: &str = r#"
[spec]
name = "v"
title = "v"
source = "s"
reps = 3
[base]
workload = "tpcb"
[grid]
engine = ["inplace", "wal", "group"]
persist_latency = ["0", "1us", "2us", "4us", "5us"]
"#;

/// In-Place falls 100 -> 20, WAL flat at 60 (crossing between 2 and 4 µs), Group flat at 90.
fn tps(engine: &str, lat_us: f64) -> Option<f64> {
    match engine {
        "inplace" => Some(100.0 - 16.0 * lat_us),
        "wal" => Some(60.0),
        "group" => Some(90.0),
        _ => None,
    }
}

fn rows(spec: &Spec, unsupported: &[&str]) -> Vec<Row> {
    let (points, _) = experiments::grid::expand(spec, &Default::default()).unwrap();
    let mut out = Vec::new();
    for p in points {
        let engine = p.value("engine").unwrap();
        let lat = experiments::units::parse_quantity(&p.value("persist_latency").unwrap()).unwrap();
        for rep in 0..2u32 {
            let noise = if rep == 0 { -1.0 } else { 1.0 };
            let mut v = json!({
                "spec": spec.name, "point": p.id, "rep": rep, "hash": p.hash,
                "grid": {"engine": engine, "persist_latency": p.value("persist_latency")},
                "flags": {"workload": "tpcb"}, "started_unix_s": 1.0,
            });
            if unsupported.contains(&engine.as_str()) {
                v["status"] = json!("unsupported");
                v["unsupported"] = json!({"reason": format!("engine {engine} missing")});
            } else {
                v["status"] = json!("ok");
                v["tps"] = json!(tps(&engine, lat / 1000.0).unwrap() + noise);
            }
            out.push(Row(v.as_object().unwrap().clone()));
        }
    }
    out
}

fn verdicts(claims: &str, unsupported: &[&str]) -> Vec<analysis::ClaimResult> {
    let spec = Spec::parse(&format!("{GRID}{claims}"), Path::new("v.toml")).unwrap();
    let data = Dataset::build(&spec, &rows(&spec, unsupported));
    spec.claims.iter().map(|c| analysis::evaluate(c, &data)).collect()
}

const BREAKEVEN: &str = r#"
[[claim]]
id = "b"
text = "t"
source = "s"
kind = "breakeven"
x = "persist_latency"
x_scale = 0.001
a = { engine = "inplace" }
b = { engine = "wal" }
unit = "µs"
"#;

#[test]
fn breakeven_is_interpolated() {
    // Means: inplace 68 at 2 µs, 36 at 4 µs; wal 60: 2 + 2 * 8 / 32 = 2.5 µs.
    let v = verdicts(&format!("{BREAKEVEN}expected = 2.5\ntolerance_abs = 0.01\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Reproduced, "{v:?}");
    assert!((v[0].value.unwrap() - 2.5).abs() < 1e-9);
    assert_eq!(v[0].measured, "2.5 µs");
    let v = verdicts(&format!("{BREAKEVEN}expected = 3.5\ntolerance_abs = 0.75\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Differs);
}

/// Issue 38: a crossing outside the measured range was read as agreeing with a paper value on
/// the same side; only an interpolated crossing can agree now.
#[test]
fn no_crossing_in_the_measured_range_is_never_agreement() {
    let claim = BREAKEVEN.replace("\"wal\"", "\"group\"").replace("\"inplace\"", "\"wal\"");
    // WAL stays below Group Commit everywhere: the crossing is below 0 µs if anywhere, and
    // every value there lies outside [5, inf): differs, with that cause.
    let v = verdicts(&format!("{claim}range = [5.0, inf]\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Differs);
    assert_eq!(v[0].measured, "< 0 µs (no crossing)");
    assert!(v[0].cause.as_deref().unwrap().contains("no crossing within the measured range"));
    // Group Commit above WAL up to 5 µs: the bound "above 5 µs" may hold, but no crossing was
    // measured: inconclusive, not reproduced.
    let swapped = BREAKEVEN.replace("\"wal\"", "\"wal2\"").replace("\"inplace\"", "\"group\"");
    let swapped = swapped.replace("\"wal2\"", "\"wal\"");
    let v = verdicts(&format!("{swapped}range = [5.0, inf]\n"), &[]);
    assert!(matches!(v[0].verdict, Verdict::Inconclusive(_)), "{v:?}");
    assert_eq!(v[0].measured, "> 5 µs (no crossing)");
}

#[test]
fn ratio_aggregates_and_tolerances() {
    let ratio = r#"
[[claim]]
id = "r"
text = "t"
source = "s"
kind = "ratio"
numerator = { engine = "inplace" }
denominator = { engine = "wal" }
per = ["persist_latency"]
unit = "×"
"#;
    // Ratios: 100/60, 84/60, 68/60, 36/60, 20/60.
    let v =
        verdicts(&format!("{ratio}aggregate = \"max\"\nexpected = 1.6\ntolerance = 0.05\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Reproduced, "{}", v[0].measured);
    // Each point is its fastest repetition (+1 here): 101/61 at 0 µs. Every group shows its
    // value and its own verdict against the bound.
    let shown = "max 1.66× (0 1.66× ✓, 1us 1.39× ✗";
    assert!(v[0].measured.starts_with(shown), "{}", v[0].measured);
    let v = verdicts(&format!("{ratio}aggregate = \"min\"\nrange = [0.5, 2.0]\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Differs);
    assert!((v[0].value.unwrap() - 21.0 / 61.0).abs() < 1e-9);
    // "all": every group must agree.
    let v = verdicts(&format!("{ratio}range = [0.3, 2.0]\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Reproduced);
    // No tolerance given: 25%.
    let v = verdicts(&format!("{ratio}aggregate = \"max\"\nexpected = 2.1\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Reproduced);
    let v = verdicts(&format!("{ratio}aggregate = \"max\"\nexpected = 2.3\n"), &[]);
    assert_eq!(v[0].verdict, Verdict::Differs);
}

#[test]
fn threshold_is_interpolated() {
    // 1/tps rises with latency; the reference is 0 µs and the target twice its value.
    let claim = r#"
[[claim]]
id = "t"
text = "t"
source = "s"
kind = "threshold"
metric = "1 / tps"
x = "persist_latency"
x_scale = 0.001
where = { engine = "inplace" }
reference = { persist_latency = "0" }
fraction = 2.0
expected = 2.8
tolerance_abs = 0.1
unit = "µs"
"#;
    // Each point's fastest repetition is its +1 one.
    let inv = |t: f64| 1.0 / (t + 1.0);
    let (target, y2, y4) = (2.0 * inv(100.0), inv(68.0), inv(36.0));
    let x = 2.0 + 2.0 * (target - y2) / (y4 - y2);
    let v = verdicts(claim, &[]);
    assert_eq!(v[0].verdict, Verdict::Reproduced, "{v:?}");
    assert!((v[0].value.unwrap() - x).abs() < 1e-9, "{} vs {x}", v[0].value.unwrap());
    // A target the curve never reaches lies beyond the last x.
    let v = verdicts(&claim.replace("fraction = 2.0", "fraction = 10.0"), &[]);
    assert_eq!(v[0].measured, "> 5 µs (never reached)");
    assert_eq!(v[0].verdict, Verdict::Differs);
}

#[test]
fn missing_engines_block_claims() {
    let v = verdicts(&format!("{BREAKEVEN}expected = 2.5\n"), &["wal"]);
    assert_eq!(v[0].verdict.label(), "not yet runnable: engine wal missing");
    assert_eq!(v[0].measured, "–");
    let value = r#"
[[claim]]
id = "v"
text = "t"
source = "s"
kind = "value"
metric = "tps"
where = { engine = "inplace", persist_latency = "0" }
expected = 100.0
tolerance = 0.05
[[claim]]
id = "m"
text = "t"
source = "s"
kind = "value"
metric = "wear.max_line_writes"
where = { engine = "inplace", persist_latency = "0" }
range = [1e8, inf]
"#;
    let v = verdicts(value, &["wal"]);
    assert_eq!(v[0].verdict, Verdict::Reproduced);
    assert_eq!(v[1].verdict.label(), "no data: the bench rows have no `wear.max_line_writes`");
}

/// Found by review (issue 16): a max/min/mean over groups silently dropped the groups without
/// a number, so a claim could read "reproduced" on the groups that crossed alone.
#[test]
fn an_aggregate_over_groups_without_a_number_is_not_reproduced() {
    let v = max_breakeven_over_two_workloads("[0.0, 10.0]");
    assert!(matches!(v.verdict, Verdict::Inconclusive(_)), "{v:?}");
    assert!(v.cause.as_deref().unwrap().contains("1 of 2 groups"), "{v:?}");
}

/// Found in the fig5.6 sweep (issue 16): "> 3 GiB/s (never reached)" made "the largest
/// bandwidth any method needs is 1.7 GB/s" read "no data", though the max is known to exceed
/// 3 GiB/s. A one-sided group settles a max (min) when every value above (below) it differs.
#[test]
fn a_one_sided_group_settles_a_max_that_no_value_beyond_it_could_reproduce() {
    // w2 never crosses up to 4 µs, so the max is above 4 µs: outside [0, 3] whatever it is.
    let v = max_breakeven_over_two_workloads("[0.0, 3.0]");
    assert_eq!(v.verdict, Verdict::Differs, "{v:?}");
    assert!(v.measured.starts_with("max > 4 µs"), "{}", v.measured);
}

fn max_breakeven_over_two_workloads(range: &str) -> analysis::ClaimResult {
    let spec = Spec::parse(
        &r#"
[spec]
name = "g"
title = "g"
source = "s"
reps = 3
[grid]
workload = ["w1", "w2"]
engine = ["inplace", "wal"]
persist_latency = ["0", "2us", "4us"]

[[claim]]
id = "b"
text = "t"
source = "s"
kind = "breakeven"
x = "persist_latency"
x_scale = 0.001
a = { engine = "inplace" }
b = { engine = "wal" }
per = ["workload"]
aggregate = "max"
range = RANGE
unit = "µs"
"#
        .replace("RANGE", range),
        Path::new("g.toml"),
    )
    .unwrap();
    let (points, _) = experiments::grid::expand(&spec, &Default::default()).unwrap();
    let rows: Vec<Row> = points
        .iter()
        .map(|p| {
            let (w, e) = (p.value("workload").unwrap(), p.value("engine").unwrap());
            let lat = p.value("persist_latency").unwrap();
            let lat_us = experiments::units::parse_quantity(&lat).unwrap() / 1000.0;
            // w1: In-Place falls through WAL's 60 at 2.5 µs; w2: it stays above.
            let tps = match (w.as_str(), e.as_str()) {
                (_, "wal") => 60.0,
                ("w1", _) => 100.0 - 16.0 * lat_us,
                _ => 100.0,
            };
            let v = json!({
                "spec": spec.name, "point": p.id, "rep": 0, "hash": p.hash, "status": "ok",
                "grid": {"workload": w, "engine": e, "persist_latency": lat},
                "flags": {}, "started_unix_s": 1.0, "tps": tps, "config": {"threads": 2},
            });
            Row(v.as_object().unwrap().clone())
        })
        .collect();
    let data = Dataset::build(&spec, &rows);
    analysis::evaluate(&spec.claims[0], &data)
}

/// Guards issue 38's latency axis: a break-even on a persist-latency axis shows, beside it,
/// that latency ÷ the time one thread spends on a transaction of the `a` curve at latency 0
/// (threads ÷ tps), per group, with a group that never crosses given as the range's end.
#[test]
fn a_latency_breakeven_is_shown_normalised_by_the_transaction_time() {
    let v = max_breakeven_over_two_workloads("[0.0, 10.0]");
    // w1: 2 threads at 100 tps at 0 µs, 20 ms a transaction; crosses at 2.5 µs.
    let w1 = &v.normalized[0];
    assert_eq!((w1.group.as_str(), w1.relation), ("w1", "="));
    assert!((w1.latency_ns - 2500.0).abs() < 1e-6, "{w1:?}");
    assert!((w1.txn_time_ns - 2e7).abs() < 1e-3, "{w1:?}");
    assert!((w1.ratio - 2500.0 / 2e7).abs() < 1e-15, "{w1:?}");
    // w2 stays above WAL up to 4 µs: the break-even is beyond 4 µs ÷ 20 ms.
    let w2 = &v.normalized[1];
    assert_eq!((w2.group.as_str(), w2.relation, w2.latency_ns), ("w2", ">", 4000.0));
    assert_eq!(
        v.normalized_text.as_deref(),
        Some(
            "÷ time a transaction (engine=inplace, threads ÷ tps at latency 0): \
             w1 1.25e-4 (2.5 µs ÷ 20000 µs), w2 > 2.00e-4 (4 µs ÷ 20000 µs)"
        )
    );
    assert!(v.measured_text().starts_with(&format!("{}; ÷ time a transaction", v.measured)));
}

/// Only a break-even on a latency axis is normalised, and only where the rows say how many
/// threads ran.
#[test]
fn only_latency_breakevens_are_normalised() {
    let v = verdicts(&format!("{BREAKEVEN}expected = 2.5\n"), &[]);
    // These rows carry no `config.threads`: nothing to divide by, nothing shown.
    assert!(v[0].normalized.is_empty() && v[0].measured_text() == v[0].measured);
    let parse = |claim: &str| {
        Spec::parse(&format!("{GRID}{claim}expected = 2.5\n"), Path::new("v.toml")).unwrap()
    };
    assert!(experiments::latency_axis::applies(&parse(BREAKEVEN).claims[0]));
    let ratio = BREAKEVEN
        .replace("kind = \"breakeven\"", "kind = \"ratio\"")
        .replace("a = {", "numerator = {")
        .replace("b = {", "denominator = {")
        .replace("x = \"persist_latency\"\nx_scale = 0.001\n", "");
    assert!(!experiments::latency_axis::applies(&parse(&ratio).claims[0]));
}

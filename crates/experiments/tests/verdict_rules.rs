//! The verdict rules of issue 38, each on synthetic rows: a verdict a hostile reviewer would
//! sign. Repetitions that straddle the bound are inconclusive; an `ours` bound and an
//! implementation check never count as reproduced; a crossing below the first measured point
//! is not agreement; a run that hit the harness's pending-commit cap is excluded; every group
//! of an aggregate shows its own verdict; a "differs" prints its cause.

use experiments::analysis::{self, Class, Verdict, CAUSE_UNKNOWN};
use experiments::data::Dataset;
use experiments::report::{self, ReportOptions};
use experiments::{results, Row, Spec};
use serde_json::json;
use std::path::Path;

/// Two engines at three persist latencies, three repetitions.
const GRID: &str = r#"
[spec]
name = "r"
title = "r"
source = "s"
reps = 3
[base]
workload = "tpcb"
[grid]
engine = ["inplace", "wal"]
persist_latency = ["0", "2us", "4us"]
"#;

/// One row per point and repetition, with the throughput `tps` gives and the pending-commit
/// waits `waits` gives.
fn rows(
    spec: &Spec,
    tps: impl Fn(&str, f64, u32) -> f64,
    waits: impl Fn(&str, f64, u32) -> u64,
) -> Vec<Row> {
    let (points, _) = experiments::grid::expand(spec, &Default::default()).unwrap();
    let mut out = Vec::new();
    for p in points {
        let engine = p.value("engine").unwrap();
        let lat = p.value("persist_latency").unwrap();
        let lat_us = experiments::units::parse_quantity(&lat).unwrap() / 1000.0;
        // Every flag of the run, as the runner records them.
        let flags: serde_json::Map<String, serde_json::Value> =
            p.flags.iter().map(|(k, v)| (k.clone(), json!(v.to_string()))).collect();
        for rep in 0..3u32 {
            let v = json!({
                "spec": spec.name, "point": p.id, "rep": rep, "hash": p.hash, "status": "ok",
                "grid": {"engine": engine, "persist_latency": lat},
                "flags": flags, "started_unix_s": 1.0 + f64::from(rep),
                "tps": tps(&engine, lat_us, rep),
                "pending_full_waits": waits(&engine, lat_us, rep),
            });
            out.push(Row(v.as_object().unwrap().clone()));
        }
    }
    out
}

fn parse(claims: &str) -> Spec {
    Spec::parse(&format!("{GRID}{claims}"), Path::new("r.toml")).unwrap()
}

fn judge(claims: &str, rows_of: impl Fn(&Spec) -> Vec<Row>) -> Vec<analysis::ClaimResult> {
    let spec = parse(claims);
    let data = Dataset::build(&spec, &rows_of(&spec));
    spec.claims.iter().map(|c| analysis::evaluate(c, &data)).collect()
}

/// `steady`, except that repetition 1 of In-Place at 0 µs ran in a slow state of the VM: 0.8×
/// on that repetition.
fn slow_rep_1(e: &str, l: f64, rep: u32) -> f64 {
    if e == "inplace" && l == 0.0 && rep == 1 {
        80.0
    } else {
        steady(e, l, rep)
    }
}

/// In-Place ÷ WAL at 0 µs, the paper's 1.5× ± 10%.
const RATIO: &str = r#"
[[claim]]
id = "ratio"
text = "In-Place ÷ WAL at 0 µs"
source = "s"
kind = "ratio"
where = { persist_latency = "0" }
numerator = { engine = "inplace" }
denominator = { engine = "wal" }
expected = 1.5
tolerance = 0.1
unit = "×"
"#;

fn steady(engine: &str, lat_us: f64, _rep: u32) -> f64 {
    match engine {
        "inplace" => 150.0 - 20.0 * lat_us,
        _ => 100.0,
    }
}

fn no_waits(_: &str, _: f64, _: u32) -> u64 {
    0
}

/// Guards issue 38's "noise decides verdicts": a claim whose value on each repetition alone
/// falls inside the bound on some and outside on others is inconclusive, whatever the
/// fastest run says, and prints the interval and the bound.
#[test]
fn a_straddling_interval_is_inconclusive() {
    let v = judge(RATIO, |s| rows(s, slow_rep_1, no_waits));
    let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.contains("straddle") && why.contains("0.8–1.5×"), "{why}");
    assert!(why.contains("1.35–1.65×"), "{why}");
    assert_eq!(v[0].accepted, "1.35–1.65×");
    assert_eq!(
        v[0].repetitions.as_deref(),
        Some("0.8–1.5× over 3 repetitions (2 of 3 repetitions agree)")
    );
    // The same claim on steady repetitions is reproduced, with its interval shown.
    let v = judge(RATIO, |s| rows(s, steady, no_waits));
    assert_eq!(v[0].verdict, Verdict::Reproduced, "{v:?}");
    assert_eq!(
        v[0].repetitions.as_deref(),
        Some("1.5–1.5× over 3 repetitions (3 of 3 repetitions agree)")
    );
}

/// An inconclusive claim prints its measured reason and, where the spec has one, its `why`
/// (what was found about the disagreement): before, the `why` of an inconclusive claim was
/// dropped, so pelley-fig1's and product-real-hardware's explanations never reached the report.
#[test]
fn an_inconclusive_claim_prints_the_specs_why_beside_the_measured_reason() {
    let with_why = RATIO.replace(
        "id = \"ratio\"\n",
        "id = \"ratio\"\nwhy = \"repetition 1 ran in the slow state\"\n",
    );
    assert_ne!(with_why, RATIO);
    let v = judge(&with_why, |s| rows(s, slow_rep_1, no_waits));
    assert!(matches!(v[0].verdict, Verdict::Inconclusive(_)), "{v:?}");
    let cause = v[0].cause.as_deref().unwrap();
    assert!(cause.contains("straddle") && cause.ends_with("ran in the slow state"), "{cause}");
    // Without a why, the measured reason alone.
    let v = judge(RATIO, |s| rows(s, slow_rep_1, no_waits));
    let cause = v[0].cause.as_deref().unwrap();
    assert!(cause.contains("straddle") && !cause.contains("slow state"), "{cause}");
    // A reproduced claim with a why prints no cause.
    let v = judge(&with_why, |s| rows(s, steady, no_waits));
    assert_eq!((&v[0].verdict, v[0].cause.as_deref()), (&Verdict::Reproduced, None), "{v:?}");
}

/// Guards issue 38's "invented tolerances counted as paper bounds": a claim whose bound is
/// ours, and a claim that is not the paper's, are reported apart and never counted as
/// reproduced, even when their numbers agree.
#[test]
fn an_ours_bound_and_a_check_are_not_counted_as_reproduced() {
    let ours = format!(
        "{RATIO}bound = \"ours\"\nbound_reason = \"the paper gives no number\"\n{}",
        RATIO
            .replace("id = \"ratio\"", "id = \"check\"")
            .replace("unit = \"×\"", "unit = \"×\"\nrole = \"check\"")
    );
    let claims = format!("{RATIO}{}", ours.replace("id = \"ratio\"", "id = \"ours\""));
    let dir = tempfile::tempdir().unwrap();
    let spec = parse(&claims);
    let mut lines = String::new();
    for r in rows(&spec, steady, no_waits) {
        lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
    }
    std::fs::write(dir.path().join(results::RESULTS_FILE), lines).unwrap();
    results::save_spec(dir.path(), "r", &format!("{GRID}{claims}")).unwrap();
    let built =
        report::build(&ReportOptions { dir: dir.path().to_path_buf(), ..Default::default() })
            .unwrap();
    let claims = &built.specs[0].claims;
    let classes: Vec<Class> = claims.iter().map(|c| c.class).collect();
    assert_eq!(classes, [Class::Paper, Class::OurTolerance, Class::Check]);
    assert!(claims.iter().all(|c| c.verdict == Verdict::Reproduced), "{claims:?}");
    let t = report::tally(&built);
    assert_eq!((t.paper.agree, t.our_tolerance.agree, t.checks.agree), (1, 1, 1));
    assert_eq!(claims[1].verdict_label(), "within our tolerance");
    assert_eq!(claims[2].verdict_label(), "check passes");
    let md = report::markdown(&built);
    assert!(md.contains("Paper claims against the paper's bounds: 1 reproduced,"), "{md}");
    assert!(md.contains("1 against our tolerance (1 within"), "{md}");
    assert!(md.contains("1 implementation checks (1 pass"), "{md}");
    // Each in its own section, after the paper's.
    let (paper, ours, checks) = (
        md.find("## Paper claims").unwrap(),
        md.find("## Our tolerance").unwrap(),
        md.find("## Implementation checks").unwrap(),
    );
    assert!(paper < ours && ours < checks);
    assert!(md[ours..checks].contains("within our tolerance (accepted 1.35–1.65×)"), "{md}");
}

/// Guards issue 38's Fig. 4 knee: a threshold reached at or below the first measured point
/// ("at or below 5 pages", interpolated nowhere) agreed with the paper's 5–20. It is now "no
/// crossing within the measured range": inconclusive where the bound reaches below the first
/// point, differs where it does not.
#[test]
fn a_crossing_below_the_first_point_is_not_agreement() {
    // In-Place falls from 150; 99% of its 0 µs throughput is already passed at 2 µs.
    let threshold = r#"
[[claim]]
id = "knee"
text = "t"
source = "s"
kind = "threshold"
metric = "1 / tps"
x = "persist_latency"
x_scale = 0.001
where = { engine = "inplace" }
reference = { persist_latency = "0" }
fraction = 1.01
unit = "µs"
"#;
    let v = judge(&format!("{threshold}range = [0.0, 5.0]\n"), |s| rows(s, steady, no_waits));
    assert_eq!(v[0].measured, "≤ 2 µs (at the first point)");
    let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.contains("no crossing within the measured range"), "{why}");
    let v = judge(&format!("{threshold}range = [3.0, 5.0]\n"), |s| rows(s, steady, no_waits));
    assert_eq!(v[0].verdict, Verdict::Differs, "{v:?}");
    let cause = v[0].cause.as_deref().unwrap();
    assert!(cause.contains("no crossing within the measured range"), "{cause}");
}

/// Guards issue 38's artefact 1: Group Commit runs that hit the driver's pending-commit cap
/// measured the harness, not the method. Such a run is excluded; a claim whose every run is
/// excluded says "harness limit", and the report flags the runs.
#[test]
fn a_row_with_pending_full_waits_is_excluded() {
    // WAL at 0 µs hit the cap on every repetition; In-Place at 0 µs on its fastest one.
    let capped = |e: &str, l: f64, rep: u32| u64::from(l == 0.0 && (e == "wal" || rep == 2));
    let fast = |e: &str, l: f64, rep: u32| steady(e, l, rep) + f64::from(rep);
    let v = judge(RATIO, |s| rows(s, fast, capped));
    let Verdict::NoData(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.starts_with("harness limit"), "{why}");
    // Only In-Place's capped run is left out: its point is its fastest uncapped one (151).
    let value = RATIO.replace("kind = \"ratio\"", "kind = \"value\"\nmetric = \"tps\"");
    let value = value.replace("numerator = { engine = \"inplace\" }\n", "");
    let value = value.replace("denominator = { engine = \"wal\" }\n", "");
    let value = value.replace(
        "where = { persist_latency = \"0\" }",
        "where = { persist_latency = \"0\", engine = \"inplace\" }",
    );
    let v = judge(&value.replace("expected = 1.5", "expected = 151.0"), |s| rows(s, fast, capped));
    assert_eq!(v[0].value, Some(151.0), "{v:?}");
    // The report says which runs it left out.
    let spec = parse(RATIO);
    let data = Dataset::build(&spec, &rows(&spec, fast, capped));
    let (runs, points) = data.harness_limited();
    assert_eq!((runs, points.len()), (4, 2));
}

/// Guards issue 38's "min/max hides out-of-band workloads": every group of an aggregate shows
/// its value and its own verdict, and an `all` claim fails on one group outside.
#[test]
fn every_group_shows_its_own_verdict() {
    let per =
        RATIO.replace("where = { persist_latency = \"0\" }\n", "per = [\"persist_latency\"]\n");
    let v = judge(&format!("{per}aggregate = \"max\"\n"), |s| rows(s, steady, no_waits));
    assert_eq!(v[0].verdict, Verdict::Reproduced);
    assert_eq!(v[0].measured, "max 1.5× (0 1.5× ✓, 2us 1.1× ✗, 4us 0.7× ✗)");
    let v = judge(&per, |s| rows(s, steady, no_waits));
    assert_eq!(v[0].verdict, Verdict::Differs);
    assert_eq!(v[0].measured, "0 1.5× ✓, 2us 1.1× ✗, 4us 0.7× ✗");
}

/// Guards issue 38's "37 differs with no cause": a "differs" prints the spec's `why`, or says
/// plainly that no cause is established.
#[test]
fn a_differs_prints_its_cause() {
    let off = RATIO.replace("expected = 1.5", "expected = 3.0");
    let v = judge(&off, |s| rows(s, steady, no_waits));
    assert_eq!(v[0].verdict, Verdict::Differs);
    assert_eq!(v[0].cause.as_deref(), Some(CAUSE_UNKNOWN));
    let why = format!("{off}why = \"our transactions are 10x shorter\"\n");
    let v = judge(&why, |s| rows(s, steady, no_waits));
    assert_eq!(v[0].cause.as_deref(), Some("our transactions are 10x shorter"));
    assert_eq!(
        v[0].verdict_text(),
        "differs (accepted 2.7–3.3×) — cause: our transactions are 10x shorter"
    );
}

/// Guards the repetition rule: a spec with reproduction claims needs three repetitions; one
/// with only implementation checks (or none) may have fewer.
#[test]
fn a_reproduction_needs_three_repetitions() {
    let two = format!("{GRID}{RATIO}").replace("reps = 3", "reps = 2");
    let e = Spec::parse(&two, Path::new("r.toml")).unwrap_err().to_string();
    assert!(e.contains("spec.reps") && e.contains("at least 3"), "{e}");
    let check = two.replace("unit = \"×\"", "unit = \"×\"\nrole = \"check\"");
    assert_eq!(Spec::parse(&check, Path::new("r.toml")).unwrap().reps, 2);
    // Without `reps`, a spec gets three.
    let unset = format!("{GRID}{RATIO}").replace("reps = 3\n", "");
    assert_eq!(Spec::parse(&unset, Path::new("r.toml")).unwrap().reps, 3);
}

/// Guards issue 38's provenance: rows labelled with one commit ran another's code. A row whose
/// binary was built from another commit (`config.git_commit`) than the checkout its sweep ran
/// in (`code_commit`) is refused; rows of a build other than the latest are flagged.
#[test]
fn a_row_whose_binary_is_not_its_checkout_is_refused() {
    let spec = parse(RATIO);
    let mut rows = rows(&spec, steady, no_waits);
    for r in &mut rows {
        let wal = r.0["grid"]["engine"] == "wal";
        // WAL's rows ran a stale binary; In-Place's an older build than the latest rows.
        let (code, built) = if wal { ("bbbb", "aaaa") } else { ("aaaa", "aaaa") };
        r.0.insert("code_commit".into(), json!(code));
        r.0.insert("config".into(), json!({ "git_commit": built }));
    }
    let data = Dataset::build(&spec, &rows);
    assert_eq!(data.wrong_builds(), 9);
    let v = analysis::evaluate(&spec.claims[0], &data);
    let Verdict::NoData(why) = &v.verdict else { panic!("{v:?}") };
    assert!(why.contains("refused") && why.contains("another commit"), "{why}");
    // Flagged, not refused: rows of a build other than the latest run's.
    rows[0].0.insert("config".into(), json!({ "git_commit": "cccc" }));
    rows[0].0.insert("code_commit".into(), json!("cccc"));
    let refs: Vec<&Row> = rows.iter().collect();
    let (newest, older) = experiments::provenance::older_builds(&refs).unwrap();
    assert_eq!(newest, "aaaa");
    assert_eq!(older, [("cccc".to_string(), 1)]);
}

/// Guards issue 38's "combined apart" cause: a claim every repetition alone agrees with but
/// whose fastest-of-each-point value does not (or the reverse) is inconclusive because the
/// verdict depends on how repetitions combine — not "the repetitions straddle", not reproduced.
#[test]
fn a_claim_that_each_repetition_passes_but_their_combination_fails_is_inconclusive() {
    // Each repetition's In-Place curve crosses WAL's flat 100 at 2.5 µs (150, 110, 70 and 200,
    // 120, 40 at 0, 2, 4 µs); the fastest of each point (200, 120, 70) crosses at 2.8 µs.
    let split = |e: &str, l: f64, rep: u32| match (e, rep) {
        ("inplace", 1) => 200.0 - 40.0 * l,
        ("inplace", _) => 150.0 - 20.0 * l,
        _ => 100.0,
    };
    let breakeven = r#"
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
range = [2.4, 2.6]
"#;
    let v = judge(breakeven, |s| rows(s, split, no_waits));
    assert_eq!(v[0].value, Some(2.8), "{v:?}");
    let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.starts_with("each repetition alone is within the accepted 2.4–2.6 µs"), "{why}");
    assert!(why.contains("2.4–2.6 µs (2.5–2.5 µs), but"), "{why}");
    assert!(why.contains("the fastest run of each point gives 2.8 µs"), "{why}");
    assert!(why.contains("depends on how repetitions combine") && !why.contains("straddle"));
    assert_eq!(v[0].cause.as_deref(), Some(why.as_str()));
    assert!(v[0].verdict_text().starts_with("inconclusive (accepted 2.4–2.6 µs) — cause: each"));

    // The reverse: one repetition below the bound and two above, none inside, while the
    // fastest of each point (In-Place 150 from repetition 0, WAL 100 from repetition 1) agrees.
    let sides = |e: &str, l: f64, rep: u32| match (e, rep) {
        ("inplace", 0) => 150.0 - 20.0 * l,
        ("inplace", _) => 90.0,
        (_, 0) => 80.0,
        (_, 1) => 100.0,
        _ => 50.0,
    };
    let v = judge(RATIO, |s| rows(s, sides, no_waits));
    assert_eq!(v[0].value, Some(1.5), "{v:?}");
    let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.starts_with("each repetition alone is outside the accepted 1.35–1.65×"), "{why}");
    assert!(why.contains("gives 1.5×: the verdict depends on how repetitions combine"), "{why}");
}

/// In-Place ÷ WAL per persist latency, each group judged against 1.5× ± 10%.
fn per_latency(aggregate: &str) -> String {
    let per =
        RATIO.replace("where = { persist_latency = \"0\" }\n", "per = [\"persist_latency\"]\n");
    format!("{per}aggregate = \"{aggregate}\"\n")
}

/// Guards review 5's problem 3 (table4.2 tpcc/tpcb, fig3 800ns-100k-pages read "differs"):
/// with `all`, `min` or `max` a claim differs only if one group is outside the bound on the
/// fastest run and on every repetition; when each repetition fails on another group, the
/// groups' repetitions straddle and the claim is inconclusive.
#[test]
fn a_claim_no_group_of_which_fails_on_every_repetition_is_inconclusive() {
    // Each repetition has one group at 2.5× (outside), a different one each time; the fastest
    // run of every In-Place point is that 2.5× run, so the fastest run fails every group.
    let rotating = |e: &str, l: f64, rep: u32| match (e, l as u32, rep) {
        ("inplace", 0, 1) | ("inplace", 2, 0) | ("inplace", 4, 2) => 250.0,
        ("inplace", _, _) => 150.0,
        _ => 100.0,
    };
    for aggregate in ["all", "max"] {
        let v = judge(&per_latency(aggregate), |s| rows(s, rotating, no_waits));
        let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{aggregate}: {v:?}") };
        assert!(why.contains("no group is outside the accepted 1.35–1.65×"), "{why}");
        assert!(why.contains("0 outside on 1 of 3, 2us outside on 1 of 3"), "{why}");
        assert_eq!(v[0].cause.as_deref(), Some(why.as_str()));
    }
    // One group outside on every repetition decides it, whatever the others do.
    let robust = |e: &str, l: f64, rep: u32| match (e, l as u32) {
        ("inplace", 0) => 250.0,
        _ => rotating(e, l, rep),
    };
    for aggregate in ["all", "max"] {
        let v = judge(&per_latency(aggregate), |s| rows(s, robust, no_waits));
        assert_eq!(v[0].verdict, Verdict::Differs, "{aggregate}: {v:?}");
    }
    // A group below a max that is above the bound does not make it robust: only the groups
    // above move a max.
    let below = |e: &str, l: f64, rep: u32| match (e, l as u32) {
        ("inplace", 4) => 50.0,
        _ => rotating(e, l, rep),
    };
    let v = judge(&per_latency("max"), |s| rows(s, below, no_waits));
    assert!(matches!(v[0].verdict, Verdict::Inconclusive(_)), "{v:?}");
}

/// Guards review 5's problem 4 (fig5 group-over-wal, fig5.7 perfect-leveling-1e6 read "no
/// data"): a group without data keeps a claim open only if it could change the verdict. A
/// max already above its bound on every repetition, or an `all` with a group outside, is
/// decided; a max inside its bound, or a mean, still waits for the missing group.
#[test]
fn a_missing_group_that_cannot_change_the_verdict_does_not_hide_it() {
    // In-Place at 4 µs hits the pending-commit cap on every repetition: its group is missing.
    let capped = |e: &str, l: f64, _: u32| u64::from(e == "inplace" && l == 4.0);
    let high = |e: &str, l: f64, rep: u32| match (e, l as u32) {
        ("inplace", 0) => 250.0,
        _ => steady(e, l, rep),
    };
    for aggregate in ["all", "max"] {
        let v = judge(&per_latency(aggregate), |s| rows(s, high, capped));
        assert_eq!(v[0].verdict, Verdict::Differs, "{aggregate}: {v:?}");
        assert!(v[0].measured.contains("decided without the 1 group(s) with no data"), "{v:?}");
        assert!(v[0].measured.contains("harness limit"), "{v:?}");
        assert_eq!(v[0].repetitions.as_deref(), Some("0 of 3 repetitions agree"));
    }
    // Inside the bound, the missing group could still take a max out of it: no data.
    let inside = |e: &str, _: f64, _: u32| if e == "inplace" { 150.0 } else { 100.0 };
    let v = judge(&per_latency("max"), |s| rows(s, inside, capped));
    assert!(matches!(v[0].verdict, Verdict::NoData(_)), "{v:?}");
    // A mean depends on every group.
    let v = judge(&per_latency("mean"), |s| rows(s, high, capped));
    assert!(matches!(v[0].verdict, Verdict::NoData(_)), "{v:?}");
    // A min is settled by a group below it, not by one above.
    let low = |e: &str, l: f64, rep: u32| match (e, l as u32) {
        ("inplace", 0) => 50.0,
        _ => high(e, l, rep),
    };
    let v = judge(&per_latency("min"), |s| rows(s, low, capped));
    assert_eq!(v[0].verdict, Verdict::Differs, "{v:?}");
    let high_only = |e: &str, l: f64, _: u32| match (e, l as u32) {
        ("inplace", 0) => 250.0,
        ("inplace", _) => 150.0,
        _ => 100.0,
    };
    let v = judge(&per_latency("min"), |s| rows(s, high_only, capped));
    assert!(matches!(v[0].verdict, Verdict::NoData(_)), "{v:?}");
}

/// Guards issue 38 (thesis-fig5.7's perfect-leveling-1e6 read "differs" with its wal groups
/// not yet run, although TPC-C In-Place was outside on one repetition of three): repetitions
/// that miss a group still count for the groups they measured, so a group outside on its
/// fastest run only, with another group missing, is inconclusive, not "differs".
#[test]
fn a_group_outside_on_one_repetition_is_inconclusive_while_another_group_is_missing() {
    let capped = |e: &str, l: f64, _: u32| u64::from(e == "inplace" && l == 4.0);
    let one_fast = |e: &str, l: f64, rep: u32| match (e, l as u32, rep) {
        ("inplace", 0, 0) => 250.0,
        ("inplace", _, _) => 150.0,
        _ => 100.0,
    };
    let v = judge(&per_latency("all"), |s| rows(s, one_fast, capped));
    let Verdict::Inconclusive(why) = &v[0].verdict else { panic!("{v:?}") };
    assert!(why.contains("0 outside on 1 of 3"), "{why}");
    // Outside on every repetition, it still decides the claim without the missing group.
    let always = |e: &str, l: f64, rep: u32| match (e, l as u32) {
        ("inplace", 0) => 250.0,
        _ => one_fast(e, l, rep),
    };
    let v = judge(&per_latency("all"), |s| rows(s, always, capped));
    assert_eq!(v[0].verdict, Verdict::Differs, "{v:?}");
}

/// Guards review 5's problem 2 (six specs' rows, run without `flusher=pelley` and with
/// `max_pending` 4096, judged as the committed specs that give both): a point whose rows ran
/// other settings than the spec it is judged under is marked "ran an older spec" with the
/// settings that differ, still drawn, and no claim is judged on it.
#[test]
fn a_point_that_ran_an_older_spec_is_drawn_but_not_judged() {
    let old = parse(RATIO);
    let rows = rows(&old, steady, no_waits);
    let committed = Spec::parse(
        &format!("{GRID}{RATIO}")
            .replace("workload = \"tpcb\"", "workload = \"tpcb\"\nscale = \"50\""),
        Path::new("r.toml"),
    )
    .unwrap();
    let data = Dataset::build(&committed, &rows);
    let older = data.older_spec();
    assert_eq!(older.len(), 6, "{older:?}");
    assert!(older.iter().all(|(_, d)| *d == "scale: – → 50"), "{older:?}");
    // Drawn: the point keeps its numbers.
    assert_eq!(data.points[0].metric("tps").map(|s| s.n), Some(1));
    let v = analysis::evaluate(&committed.claims[0], &data);
    let Verdict::NoData(why) = &v.verdict else { panic!("{v:?}") };
    assert!(why.contains("ran an older spec (settings differ: scale: – → 50)"), "{why}");
    // The spec the rows ran still judges them.
    let v = analysis::evaluate(&old.claims[0], &Dataset::build(&old, &rows));
    assert_eq!(v.verdict, Verdict::Reproduced, "{v:?}");
}

/// Guards review 5's problem 8 (443 rows labelled 24ef3e8 ran 5595ad7's code; 1,551 rows
/// without `code_commit` passed the build check vacuously): the report flags rows that carry
/// no `code_commit` as unverifiable and prints the corrections kept beside the rows in
/// `corrections.toml`, without rewriting a row.
#[test]
fn rows_without_code_commit_are_unverifiable_and_corrections_are_printed() {
    let dir = tempfile::tempdir().unwrap();
    let spec = parse(RATIO);
    let mut lines = String::new();
    for (i, mut r) in rows(&spec, steady, no_waits).into_iter().enumerate() {
        r.0.insert("config".into(), json!({ "git_commit": "24ef3e810ae1aaaa" }));
        if i % 2 == 0 {
            r.0.insert("code_commit".into(), json!("24ef3e810ae1aaaa"));
        }
        lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
    }
    std::fs::write(dir.path().join(results::RESULTS_FILE), &lines).unwrap();
    results::save_spec(dir.path(), "r", &format!("{GRID}{RATIO}")).unwrap();
    let corrections = "[[code_commit]]\nlabelled = \"24ef3e8\"\nran = \"5595ad7\"\n\
                       started_from_unix_s = 2.0\nreason = \"the checkout was newer\"\n";
    std::fs::write(dir.path().join("corrections.toml"), corrections).unwrap();
    let options = ReportOptions { dir: dir.path().to_path_buf(), ..Default::default() };
    let built = report::build(&options).unwrap();
    let notes = &built.specs[0].notes;
    let has = |s: &str| notes.iter().any(|n| n.contains(s));
    assert!(has("unverifiable build: 9 of the 18 row(s) used carry no code_commit"), "{notes:?}");
    // Repetitions 1 and 2 started at 2 and 3 s: 12 rows.
    assert!(
        has("provenance correction (corrections.toml): 12 row(s) labelled commit 24ef3e8 ran \
             commit 5595ad7's code: the checkout was newer"),
        "{notes:?}"
    );
    let text = std::fs::read_to_string(dir.path().join(results::RESULTS_FILE)).unwrap();
    assert_eq!(text, lines, "a correction never rewrites a row");
    // A damaged corrections file is a clear error naming it, not a panic.
    std::fs::write(dir.path().join("corrections.toml"), "[[code_commit]]\nlabelled = 3\n").unwrap();
    let e = report::build(&options).unwrap_err().to_string();
    assert!(e.contains("corrections.toml"), "{e}");
}

/// Guards the provenance notes against describing rows nothing uses (pelley-fig6's 108 rows of
/// an older setting, all without `code_commit`, read "unverifiable build: 108 of 216" and
/// "older builds: 108" beside verdicts that rest only on the 108 newer rows): the build notes
/// count the rows the points use, and the superseded ones are counted apart.
#[test]
fn superseded_rows_are_counted_apart_from_the_rows_the_verdicts_use() {
    let dir = tempfile::tempdir().unwrap();
    let committed = format!("{GRID}{RATIO}")
        .replace("workload = \"tpcb\"", "workload = \"tpcb\"\nscale = \"50\"");
    let old = parse(RATIO);
    let new = Spec::parse(&committed, Path::new("r.toml")).unwrap();
    let mut lines = String::new();
    for mut r in rows(&old, steady, no_waits) {
        r.0.insert("config".into(), json!({ "git_commit": "aaaa000000000000" }));
        lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
    }
    for mut r in rows(&new, steady, no_waits) {
        let started = r.started() + 100.0;
        r.0.insert("started_unix_s".into(), json!(started));
        r.0.insert("config".into(), json!({ "git_commit": "bbbb000000000000" }));
        r.0.insert("code_commit".into(), json!("bbbb000000000000"));
        lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
    }
    std::fs::write(dir.path().join(results::RESULTS_FILE), &lines).unwrap();
    results::save_spec(dir.path(), "r", &committed).unwrap();
    let options = ReportOptions { dir: dir.path().to_path_buf(), ..Default::default() };
    let built = report::build(&options).unwrap();
    let notes = &built.specs[0].notes;
    let has = |s: &str| notes.iter().any(|n| n.contains(s));
    assert!(!has("unverifiable build"), "{notes:?}");
    assert!(!has("older builds"), "{notes:?}");
    assert!(
        has("18 row(s) of older settings of the same points were ignored, 18 of them without \
             code_commit"),
        "{notes:?}"
    );
    // The newer rows decide: the claim is judged on them, not refused as an older spec.
    assert!(!has("ran an older spec"), "{notes:?}");
}

/// Guards the rows of a sweep whose checkout moved on while its earlier-built binary ran (session
/// of 2026-11-27: N-Store rows of binary 77fa322 named code_commit 21a8ae4 and were all refused):
/// without a correction they are refused as wrong builds; a `[[checkout_moved]]` correction
/// vouches for exactly the rows it covers, which are then judged, and says so.
#[test]
fn a_checkout_moved_correction_vouches_only_for_the_rows_it_covers() {
    let spec = parse(RATIO);
    let write = |dir: &std::path::Path, corrections: Option<&str>| {
        let mut lines = String::new();
        for r in rows(&spec, steady, no_waits) {
            let mut r = r;
            r.0.insert("config".into(), json!({ "git_commit": "77fa32228001aaaa" }));
            r.0.insert("code_commit".into(), json!("21a8ae4bbbbb"));
            lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
        }
        std::fs::write(dir.join(results::RESULTS_FILE), &lines).unwrap();
        results::save_spec(dir, "r", &format!("{GRID}{RATIO}")).unwrap();
        if let Some(c) = corrections {
            std::fs::write(dir.join("corrections.toml"), c).unwrap();
        }
        let options = ReportOptions { dir: dir.to_path_buf(), ..Default::default() };
        report::build(&options).unwrap().specs[0].notes.clone()
    };
    let refused = |notes: &[String]| {
        notes
            .iter()
            .find(|n| n.contains("run(s) refused"))
            .map(|n| n.split(' ').next().unwrap().to_string())
    };
    let none = tempfile::tempdir().unwrap();
    let notes = write(none.path(), None);
    assert_eq!(refused(&notes).as_deref(), Some("18"), "{notes:?}");
    // The window covers repetitions 1 and 2 (started at 2 and 3 s): 12 rows judged, 6 refused.
    let some = tempfile::tempdir().unwrap();
    let c = "[[checkout_moved]]\nbuilt = \"77fa322\"\nlabelled = \"21a8ae4\"\nran = \"77fa322\"\n\
             started_from_unix_s = 2.0\nstarted_to_unix_s = 3.5\nreason = \"main moved on\"\n";
    let notes = write(some.path(), Some(c));
    assert_eq!(refused(&notes).as_deref(), Some("6"), "{notes:?}");
    assert!(
        notes.iter().any(|n| n.contains(
            "12 row(s) name code_commit 21a8ae4 and binary 77fa322; they ran commit 77fa322's \
             code, so they are judged: main moved on"
        )),
        "{notes:?}"
    );
    // A correction naming another binary vouches for nothing.
    let other = tempfile::tempdir().unwrap();
    let notes = write(other.path(), Some(&c.replace("77fa322", "5595ad7")));
    assert_eq!(refused(&notes).as_deref(), Some("18"), "{notes:?}");
}

/// Guards issue 38's fig5 subtitle: its rows' binary says `2d8bf738fea4-dirty` and their
/// code_commit `d7b15ab`, which corrections.toml says they ran, yet the figure named the dirty
/// binary. Figures and the page footer credit a correction's `ran` and say so; a correction
/// whose rows ran their binary's commit changes no subtitle; a `ran` that is neither recorded
/// commit is refused.
#[test]
fn figure_subtitles_credit_the_commit_a_correction_says_the_rows_ran() {
    let spec = parse(RATIO);
    let plot = "[[plot]]\nx = \"persist_latency\"\ny = \"tps\"\nseries = \"engine\"\n";
    let write = |dir: &std::path::Path, (built, named): (&str, &str), corrections: &str| {
        let mut lines = String::new();
        for mut r in rows(&spec, steady, no_waits) {
            let config = json!({ "git_commit": built, "nvmdb_version": "0.1.0" });
            r.0.insert("config".into(), config);
            r.0.insert("code_commit".into(), json!(named));
            r.0.insert("host".into(), json!("vm"));
            lines.push_str(&format!("{}\n", serde_json::Value::Object(r.0)));
        }
        std::fs::write(dir.join(results::RESULTS_FILE), &lines).unwrap();
        results::save_spec(dir, "r", &format!("{GRID}{RATIO}{plot}")).unwrap();
        std::fs::write(dir.join("corrections.toml"), corrections).unwrap();
        let options = ReportOptions { dir: dir.to_path_buf(), ..Default::default() };
        report::build(&options).map(|r| {
            let svg = std::fs::read_to_string(dir.join("figures/r.svg")).unwrap();
            (r.specs[0].provenance.line(), r.provenance.line(), svg)
        })
    };
    let correction = |built: &str, labelled: &str, ran: &str| {
        format!(
            "[[checkout_moved]]\nbuilt = \"{built}\"\nlabelled = \"{labelled}\"\nran = \"{ran}\"\n\
             started_from_unix_s = 0.0\nstarted_to_unix_s = 100.0\nreason = \"r\"\n"
        )
    };
    let (dirty, committed) = (
        "2d8bf738fea4a18864a33b084e6b15519a7c9cb6-dirty",
        "d7b15ab549649a9ecd3ec65f748b3dd9812eeee7",
    );
    let dir = tempfile::tempdir().unwrap();
    let c = correction(dirty, committed, committed);
    let (subtitle, footer, svg) = write(dir.path(), (dirty, committed), &c).unwrap();
    let credited = "nvmdb 0.1.0 (commit d7b15ab54964; corrections.toml: 18 row(s) labelled \
                    2d8bf738fea4-dirty ran d7b15ab54964)";
    assert!(subtitle.ends_with(credited), "{subtitle}");
    assert!(footer.ends_with(credited), "{footer}");
    assert!(svg.contains(&format!("\n{subtitle}\n")), "the figure's subtitle: {svg}");
    // The rows of a checkout that moved on ran their binary: the subtitle names it, as before.
    let dir = tempfile::tempdir().unwrap();
    let c = correction("77fa322", "21a8ae4", "77fa322");
    let (subtitle, _, _) = write(dir.path(), ("77fa32228001aaaa", "21a8ae4bbbbb"), &c).unwrap();
    assert!(subtitle.ends_with("nvmdb 0.1.0 (commit 77fa32228001)"), "{subtitle}");
    // A third commit is not what these rows ran by this correction's account.
    let dir = tempfile::tempdir().unwrap();
    let c = correction(dirty, committed, "5595ad7");
    let e = write(dir.path(), (dirty, committed), &c).unwrap_err().to_string();
    assert!(e.contains("corrections.toml") && e.contains("`ran` (\"5595ad7\") must be"), "{e}");
}

//! `nvmdb crashtest` end to end on In-Place Updates: hundreds of simulated crash points on YCSB
//! and TPC-B under every policy (and crashes inside recovery) verify clean; the default campaign
//! reports splits, merges, page frees and the rest inside its crash windows and crashes while
//! loading; the engine broken on purpose (every `fault=`) is caught by a default campaign, and a
//! printed replay reproduces the violation; SIGKILLed children on `shm` and `file` recover; bad
//! options are one line and exit 2. Would catch: a crash tester that never fails or never
//! reaches a split or merge, or a regression in inplace's persist ordering or recovery.

use std::process::{Command, Output};

fn crashtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .arg("crashtest")
        .args(args)
        .output()
        .expect("the nvmdb binary runs")
}

fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs a campaign that must verify clean; returns its JSON.
fn clean(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = crashtest(&all);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["violations"], 0, "{json}");
    json
}

fn reached_most(json: &serde_json::Value) {
    let (crashes, iterations) = (json["crashes"].as_u64(), json["iterations"].as_u64());
    let (crashes, iterations) = (crashes.unwrap(), iterations.unwrap());
    assert!(crashes * 10 >= iterations * 9, "{crashes} of {iterations} crash points reached");
}

#[test]
fn inplace_survives_crash_points_on_ycsb_under_every_policy() {
    let json = clean(&[
        "--engine=inplace",
        "--workload=ycsb",
        "--mix=write-heavy",
        "--engine-opt=node_capacity=8",
        "--crashes=150",
        "--policy=all",
        "--recovery-crashes=1",
        "--seed=3",
    ]);
    reached_most(&json);
    assert!(json["acks_verified"].as_u64().unwrap() > 0, "{json}");
    assert!(json["recovery_crashes"].as_u64().unwrap() > 0, "{json}");
    assert!(json["recovery_ms"]["p50"].as_f64().unwrap() > 0.0, "{json}");
}

#[test]
fn inplace_survives_crash_points_on_tpcb_with_two_threads() {
    let json = clean(&[
        "--engine=inplace",
        "--workload=tpcb",
        "--engine-opt=node_capacity=8",
        "--threads=2",
        "--crashes=150",
        "--seed=4",
    ]);
    reached_most(&json);
    assert_eq!(json["policies"], serde_json::json!(["persisted", "evict", "torn"]));
}

#[test]
fn json_has_every_documented_key() {
    let json = clean(&["--engine=inplace", "--workload=tpcb", "--crashes=3", "--event=fence"]);
    for key in [
        "engine",
        "workload",
        "crashes",
        "violations",
        "violations_by_kind",
        "recovery_ms",
        "seed",
        "iterations",
        "acks_verified",
        "first_violations",
        "coverage",
        "ages",
        "history",
        "load_crashes",
        "aimed_crashes",
    ] {
        assert!(json.get(key).is_some(), "missing {key}: {json}");
    }
    for kind in ["durability", "consistency", "integrity", "recovery", "run", "panic"] {
        assert_eq!(json["violations_by_kind"][kind], 0, "{json}");
    }
    assert!(json["recovery_ms"]["max"].is_number());
    assert_eq!((json["engine"].as_str(), json["seed"].as_u64()), (Some("inplace"), Some(42)));
}

/// The default campaign's crash windows hold every kind of structural change.
/// Would catch: crash points that never fall inside a split, merge or page free (the campaign
/// then proves nothing about them), or counters that stopped counting.
#[test]
fn default_tpcc_campaign_reports_splits_and_merges_inside_its_crash_windows() {
    let json = clean(&["--engine=inplace", "--workload=tpcc", "--crashes=60"]);
    reached_most(&json);
    let coverage = &json["coverage"];
    for kind in ["splits", "merges", "heap_growths", "page_frees", "deletes", "commits"] {
        assert!(coverage["events"][kind].as_u64().unwrap() > 0, "no {kind}: {json}");
        assert!(coverage["windows_with"][kind].as_u64().unwrap() > 0, "no {kind}: {json}");
    }
    assert_eq!(json["engine_opts"]["node_capacity"], "16", "{json}");
    assert_eq!(json["ages"].as_array().map(Vec::len), Some(4), "{json}");
    assert_eq!(json["load_crashes"], 6, "every 10th crash falls in the load: {json}");
    assert!(json["aimed_crashes"].as_u64().unwrap() > 10, "{json}");
}

/// Crashes while formatting, creating tables and loading recover to a region that opens and
/// keeps every acknowledged table and row; a printed `load:` case replays.
/// Would catch: a half-formatted region that fails to open, or lost or damaged loaded rows.
#[test]
fn crashes_while_loading_recover_and_replay() {
    let json = clean(&["--engine=inplace", "--workload=tpcb", "--crashes=40", "--load-every=1"]);
    assert_eq!(json["load_crashes"], json["crashes"], "{json}");
    reached_most(&json);
    assert!(json["acks_verified"].as_u64().unwrap() > 0, "{json}");
    let json = clean(&[
        "--engine=inplace",
        "--workload=tpcb",
        "--replay=load:77:fence:40",
        "--policy=torn",
    ]);
    assert_eq!((json["iterations"].as_u64(), json["load_crashes"].as_u64()), (Some(1), Some(1)));
}

/// Runs the broken engine; returns the JSON of a campaign that must find violations.
fn caught(workload: &str, fault: &str, seed: &str) -> serde_json::Value {
    caught_in(workload, fault, seed, 90)
}

/// `caught` with `crashes` crash points.
fn caught_in(workload: &str, fault: &str, seed: &str, crashes: u32) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let out = crashtest(&[
        "--engine=inplace",
        &format!("--workload={workload}"),
        &fault,
        &format!("--crashes={crashes}"),
        &format!("--seed={seed}"),
        "--json",
    ]);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "a broken engine must fail: {json}");
    assert!(json["violations"].as_u64().unwrap() > 0, "{json}");
    let first = &json["first_violations"][0];
    let crash = first["crash"].as_str().unwrap();
    assert!(crash.starts_with("seed ") && crash.contains(" event ") && crash.contains(" policy "));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("violation (") && stderr.contains("--replay "), "{stderr}");
    json
}

/// Recovery that frees a rolled-back log before the restored bytes are durable: only a crash
/// right after recovery (or inside it) shows it; every campaign now cuts there.
#[test]
fn recovery_rollback_not_persisted_is_caught() {
    let json = caught("tpcb", "recovery-rollback-not-persisted", "5");
    let message = json["first_violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("crash right after recovery"), "{json}");
}

/// A page freed in the allocator before the merge that frees it commits: a crash in between
/// rolls the merge back over a page marked free. Only a crash in the few fences after a page
/// free shows it; the default campaign aims there.
#[test]
fn free_before_commit_is_caught_by_the_default_tpcc_campaign() {
    let json = caught_in("tpcc", "free-before-commit", "1", 100);
    assert!(json["violations_by_kind"]["integrity"].as_u64().unwrap() > 0, "{json}");
}

/// Also on TPC-C (the test above uses TPC-B): recovery that frees a rolled-back log before its
/// restored bytes are durable.
#[test]
fn recovery_rollback_not_persisted_is_caught_on_tpcc() {
    caught_in("tpcc", "recovery-rollback-not-persisted", "1", 60);
}

#[test]
fn commit_before_data_is_caught_and_replays() {
    let json = caught("tpcb", "commit-before-data", "5");
    // The printed replay arguments rerun exactly that crash and find the same violation.
    let first = &json["first_violations"][0];
    let replay: Vec<&str> = first["replay"].as_str().unwrap().split(' ').collect();
    let mut args = vec![
        "--engine=inplace",
        "--workload=tpcb",
        "--engine-opt=fault=commit-before-data",
        "--seed=5",
        "--json",
    ];
    args.extend(replay);
    let out = crashtest(&args);
    let again = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "{again}");
    assert_eq!(again["iterations"], 1);
    assert_eq!(again["first_violations"][0]["message"], first["message"], "{again}");
}

#[test]
fn update_before_undo_is_caught_on_ycsb_and_tpcb() {
    caught("ycsb", "update-before-undo", "6");
    caught("tpcb", "update-before-undo", "7");
}

fn kill(medium: &str, path: Option<&std::path::Path>) {
    let mut args = vec![
        "--engine=inplace".to_string(),
        "--workload=tpcb".to_string(),
        "--kill".to_string(),
        "--crashes=4".to_string(),
        "--kill-window=300ms".to_string(),
        "--threads=2".to_string(),
        format!("--medium={medium}"),
        "--json".to_string(),
    ];
    if let Some(p) = path {
        args.push(format!("--path={}", p.display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crashtest(&args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!((json["violations"].as_u64(), json["crashes"].as_u64()), (Some(0), Some(4)));
    assert!(json["acks_verified"].as_u64().unwrap() > 0, "the children acknowledged nothing");
    assert_eq!(json["mode"], "kill");
}

#[test]
fn killed_children_recover_on_shm_and_file() {
    kill("shm", None);
    let dir = std::env::temp_dir().join(format!("nvmdb-crashtest-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let region = dir.join("r.region");
    kill("file", Some(&region));
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "a clean campaign removes its files: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_options_are_one_line_and_exit_2() {
    for (args, expect) in [
        (&["--engine=nope"][..], "unknown engine"),
        (&["--engine=mem"], "nothing to crash-test"),
        (&["--engine=inplace", "--policy=sometimes"], "--policy"),
        (&["--engine=inplace", "--event=flush"], "--event"),
        (&["--engine=inplace", "--replay=1:fence:3"], "needs one --policy"),
        (&["--engine=inplace", "--replay=1:fence", "--policy=torn"], "SEED:EVENT:COUNT"),
        (&["--engine=inplace", "--crashes=0"], "--crashes"),
        (&["--engine=inplace", "--threads=0"], "--threads"),
        (&["--engine=inplace", "--size=lots"], "--size"),
        (&["--engine=inplace", "--engine-opt=colour=blue"], "no option `colour`"),
        (&["--engine=inplace", "--workload=tpcx"], "unknown workload"),
        (&["--engine=inplace", "--kill", "--policy=torn"], "--policy"),
        (&["--engine=inplace", "--kill", "--medium=sim"], "--medium"),
        (&["--engine=inplace", "--path=/tmp/x"], "--kill only"),
        (&["--engine=inplace", "--size=64KiB"], "--size"),
    ] {
        let out = crashtest(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line, got {stderr:?}");
        assert!(stderr.starts_with("error: ") && stderr.contains(expect), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

//! `nvmdb persistency`: a Table 8.1 row as JSON, a spec sweep, the queue crash test (clean, and
//! failing on a test-only fault), and one-line errors (exit 2) for bad input.
//! Would catch: the subcommand unwired, a JSON shape change, a crash test that cannot fail, or
//! a panic on bad input.

use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

#[test]
fn table_row_as_json() {
    let out = nvmdb(&[
        "persistency",
        "--queue",
        "qh",
        "--threads",
        "1",
        "--trace-inserts",
        "300",
        "--rate-inserts",
        "1000",
        "--json",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON row");
    assert_eq!(row["queue"], "qh");
    let models = row["models"].as_array().unwrap();
    assert_eq!(models.len(), 3);
    let path = |i: usize| models[i]["path_per_insert"].as_f64().unwrap();
    assert!(path(0) > path(1) && path(1) > path(2), "{models:?}");
    assert_eq!(models[0]["thesis"].as_f64(), Some(0.032));
    assert!(row["native"]["inserts_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn sweep_spec_runs_quick() {
    let spec = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/persistency/thesis-fig8.2-atomic-persist.toml"
    );
    let dir = std::env::temp_dir().join(format!("nvmdb-persistency-cli-{}", std::process::id()));
    let out =
        nvmdb(&["persistency", "sweep", spec, "--quick", "--json", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["points"].as_array().unwrap().is_empty());
    let claims = v["claims"].as_array().unwrap();
    assert!(claims.iter().all(|c| c["ours"].is_number()));
    for c in claims {
        assert!(matches!(c["bound"].as_str(), Some("paper" | "ours")), "{c}");
        assert!(
            matches!(c["verdict"].as_str(), Some("reproduced" | "differs" | "inconclusive")),
            "{c}"
        );
    }
    for ext in ["jsonl", "txt", "claims.json", "svg", "png"] {
        assert!(dir.join(format!("thesis-fig8.2-atomic-persist.{ext}")).exists(), "{ext}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn crashtest_passes_and_catches_a_fault() {
    let ok =
        nvmdb(&["persistency", "crashtest", "--queue", "2lc", "--threads", "2", "--points", "30"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stdout));
    let bad = nvmdb(&[
        "persistency",
        "crashtest",
        "--fault",
        "qh-skip-end-barrier",
        "--threads",
        "1",
        "--points",
        "200",
        "--policy",
        "evict",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", String::from_utf8_lossy(&bad.stdout));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("violation"));
}

/// Guards the wrap-around crash test from the command line: clean across wraps, and the
/// dropped wrap-around barrier is found.
#[test]
fn crashtest_across_wraps_passes_and_catches_the_tail_fault() {
    let ok = nvmdb(&[
        "persistency",
        "crashtest",
        "--queue",
        "qh",
        "--threads",
        "2",
        "--points",
        "30",
        "--wrap-slots",
        "4",
    ]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stdout));
    let bad = nvmdb(&[
        "persistency",
        "crashtest",
        "--fault",
        "cwl-skip-tail-barrier",
        "--threads",
        "1",
        "--points",
        "300",
        "--wrap-slots",
        "4",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", String::from_utf8_lossy(&bad.stdout));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("violation"));
}

#[test]
fn bad_input_is_a_one_line_error() {
    for args in [
        &["persistency", "--queue", "ring"][..],
        &["persistency", "--persist-latency", "5 parsecs"],
        &["persistency", "--persist-latency", "0ns"],
        &["persistency", "--atomic-persist", "12"],
        &["persistency", "--tracking", "8192"],
        &["persistency", "--threads", "0"],
        &["persistency", "--schedule", "chaos"],
        &["persistency", "--trace-inserts", "0"],
        &["persistency", "sweep", "/nonexistent/spec.toml"],
        &["persistency", "crashtest", "--fault", "skip-everything"],
        &["persistency", "crashtest", "--policy", "gentle"],
        &["persistency", "crashtest", "--inserts", "0"],
        &["persistency", "crashtest", "--wrap-slots", "1"],
        &["persistency", "engines", "--engine", "paper"],
    ] {
        let out = nvmdb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: invalid"), "{args:?}: {err}");
    }
}

//! `nvmdb check` on `wal` regions with distributed logs (`log=txn:N|page:N`): it describes the
//! log (layout, number of logs, cache mode, per-log capacity, GSN horizon, redo points) and
//! opens the region with the layout it was formatted with.
//! Would catch: a check that opens such a region with default options (refused: "formatted with
//! log=txn:2"), or an inspection that says nothing of the logs.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("nvmdb-dlog-{}-{name}.region", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A TPC-B region benchmarked for a moment with `log`, kept; then `nvmdb check --json`.
fn bench_then_check(name: &str, log: &str, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let path = scratch(name);
    let p = path.to_str().unwrap();
    let log = format!("log={log}");
    let mut args = vec![
        "bench",
        "--engine",
        "wal",
        "--engine-opt",
        &log,
        "--workload",
        "tpcb",
        "--workload-opt",
        "accounts_per_branch=500",
        "--txns",
        "300",
        "--medium",
        "file",
        "--path",
        p,
        "--keep",
        "--size",
        "128MiB",
    ];
    args.extend_from_slice(extra);
    let out = nvmdb(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = nvmdb(&["check", "--path", p, "--json"]);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let human = nvmdb(&["check", "--path", p]);
    let text = String::from_utf8_lossy(&human.stdout).into_owned();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(format!("{p}.base"));
    (out.status.code(), serde_json::json!({ "json": json, "text": text }))
}

#[test]
fn check_describes_a_transaction_partitioned_log_and_opens_it() {
    let (code, out) = bench_then_check("txn", "txn:2", &[]);
    let (json, text) = (&out["json"], out["text"].as_str().unwrap_or(""));
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["ok"], true, "{json}");
    let log = &json["inspection"]["log"];
    assert_eq!(log["layout"], "txn:2", "{log}");
    assert_eq!(log["logs"], 2);
    assert_eq!(log["cache"], "volatile");
    let per = log["per_log_bytes"].as_u64().unwrap();
    assert!(per > 0 && 2 * per <= log["log_bytes"].as_u64().unwrap(), "{log}");
    assert!(log["horizon"].as_u64().unwrap() > 0, "the horizon never moved: {log}");
    assert_eq!(log["redo_points"].as_array().unwrap().len(), 2, "{log}");
    assert_eq!(log["ends"].as_array().unwrap().len(), 2, "{log}");
    assert!(text.contains("txn:2 (2 logs of"), "{text}");
    assert!(text.contains("GSN horizon"), "{text}");
}

#[test]
fn check_describes_a_page_partitioned_log_with_durable_caches() {
    let (code, out) = bench_then_check("page", "page:3", &["--engine-opt", "cache=durable"]);
    let (json, text) = (&out["json"], out["text"].as_str().unwrap_or(""));
    assert_eq!(code, Some(0), "{json}");
    let log = &json["inspection"]["log"];
    assert_eq!(log["layout"], "page:3", "{log}");
    assert_eq!(log["logs"], 3);
    assert_eq!(log["cache"], "durable");
    assert_eq!(log["redo_points"].as_array().unwrap().len(), 3, "{log}");
    assert!(text.contains("page:3 (3 logs of"), "{text}");
}

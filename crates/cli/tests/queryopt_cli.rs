//! `nvmdb scan` and `nvmdb join`: JSON reports with break-evens, expected pages and join
//! speed-ups, and one-line errors (exit 2) for bad parameters.
//! Would catch: the subcommands unwired, a JSON shape change, or a panic on bad input.

use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn scan_reports_breakevens_on_both_models() {
    let v = json(&nvmdb(&["scan", "--rows", "20000", "--json"]));
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for d in devices {
        assert!(!d["runs"].as_array().unwrap().is_empty());
        assert!(!d["model_breakevens"].as_array().unwrap().is_empty(), "{}", d["device"]);
    }
    assert!(!v["disk_choice_on_ssd"].as_array().unwrap().is_empty());
}

#[test]
fn scan_expected_pages_and_file_device() {
    let v = json(&nvmdb(&["scan", "--expected-pages", "--rows", "20000", "--json"]));
    let rows = v["table"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 7);
    for r in rows {
        assert!(r["error_vs_yao"].as_f64().unwrap().abs() < 0.2, "{r}");
    }
    let dir = std::env::temp_dir();
    let dir = dir.to_str().unwrap();
    let out = nvmdb(&["scan", "--device", "file", "--path", dir, "--rows", "5000", "--json"]);
    if out.status.success() {
        let v = json(&out);
        assert!(v["devices"][0]["probe"]["random_read_us"].as_f64().unwrap() > 0.0);
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("O_DIRECT") || err.contains("in memory"), "{err}");
    }
}

#[test]
fn join_reports_spread_and_speedup() {
    let args = ["join", "--rows-r", "3000", "--rows-s", "4000", "--memory-pages", "16"];
    let v = json(&nvmdb(&[&args[..], &["--projectivity", "0.05,0.25", "--json"]].concat()));
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4);
    assert_eq!(points[0]["runs"][0]["aggregate"]["matches"], 3000);
    assert_eq!(v["ssd_vs_disk"].as_array().unwrap().len(), 4);
}

#[test]
fn bad_parameters_are_one_line_errors() {
    for args in [
        &["scan", "--selectivity", "2"][..],
        &["scan", "--selectivity", "abc"],
        &["scan", "--rows", "0"],
        &["scan", "--device", "tape"],
        &["scan", "--operator", "bitmap"],
        &["scan", "--tuples-per-page", "100"],
        &["scan", "--device", "file", "--path", "/dev/shm"],
        &["join", "--memory-pages", "2"],
        &["join", "--projectivity", "0"],
        &["join", "--algorithm", "nested"],
        &["join", "--rows-r", "0"],
    ] {
        let out = nvmdb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

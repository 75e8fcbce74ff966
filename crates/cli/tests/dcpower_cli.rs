//! `nvmdb dcpower model|route`: JSON reports with Table A.3's six scenarios and per-topology
//! capacities, and one-line errors (exit 2) for impossible parameters.
//! Would catch: the subcommand unwired, a JSON shape change, or a panic on bad input.

use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn model_reports_table_a3() {
    let v = json(&nvmdb(&["dcpower", "model", "--json"]));
    let rows = v["scenarios"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0]["scenario"]["name"], "Austin");
    for row in rows {
        assert!(row["breakdown"]["pue"].as_f64().unwrap() > 1.0);
    }
    assert!(!v["claims"].as_array().unwrap().is_empty());
    let text = nvmdb(&["dcpower", "model"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("+Containers"));
}

#[test]
fn route_reports_capacity_with_and_without_routing() {
    let args =
        ["dcpower", "route", "--topology", "fully-connected", "--pdus", "6", "--servers", "200"];
    let out = nvmdb(&[&args[..], &["--minutes", "90", "--json"]].concat());
    let v = json(&out);
    assert_eq!(v["synthetic_traces"], true);
    let r = &v["results"][0];
    assert_eq!(r["topology"], "fully-connected");
    let with = r["with_routing_kw"].as_f64().unwrap();
    assert!(with <= r["without_routing_kw"].as_f64().unwrap() + 1e-6);
    assert!(with >= r["bound_kw"].as_f64().unwrap() - 1e-6);
}

#[test]
fn impossible_parameters_are_one_line_errors() {
    for args in [
        &["dcpower", "route", "--pdus", "1"][..],
        &["dcpower", "route", "--topology", "ring"],
        &["dcpower", "route", "--topology", "serpentine", "--pdus", "4"],
        &["dcpower", "model", "--utilisation", "2"],
    ] {
        let out = nvmdb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.starts_with("error: invalid"), "{err}");
    }
}

//! A bench row records what the run really had (issue 39): the flush that runs (`none` on
//! `dram`), every option the engine applied (defaults included), and no setting the engine
//! ignored (`max_pending` where no commit ever waited). Would catch a row that describes the
//! flags instead of the run, which the reproduction report then repeats.

mod common;

use common::json_of;

fn row(args: &[&str]) -> serde_json::Value {
    let out = common::run(&["bench", "--txns=100"], args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    json["config"].clone()
}

const TPCB: [&str; 2] = ["--workload=tpcb", "--workload-opt=accounts_per_branch=1000"];

/// Regression (issue 39): `--medium dram` rows said `"flush": "clwb"` though none runs.
#[test]
fn a_dram_row_says_flush_none() {
    let dram = row(&["--engine=inplace", "--medium=dram", "--size=64MiB", TPCB[0], TPCB[1]]);
    assert_eq!(dram["flush"], "none", "{dram}");
    let asked = row(&[
        "--engine=inplace",
        "--medium=dram",
        "--size=64MiB",
        "--flush=clflush",
        TPCB[0],
        TPCB[1],
    ]);
    assert_eq!(asked["flush"], "clflush", "{asked}");
    let eadr =
        row(&["--engine=inplace", "--medium=dram", "--size=64MiB", "--eadr", TPCB[0], TPCB[1]]);
    assert_eq!(eadr["flush"], "none", "eADR flushes nothing: {eadr}");
}

/// Regression (issue 39): `engine_opts` held only the options given, not `protocol=lean` or
/// `batch_period_ms=20`.
#[test]
fn a_rows_engine_opts_contain_the_defaults() {
    let inplace = row(&["--engine=inplace", "--medium=dram", "--size=64MiB", TPCB[0], TPCB[1]]);
    assert_eq!(inplace["engine_opts"]["protocol"], "lean", "{inplace}");
    let group = row(&[
        "--engine=group",
        "--medium=dram",
        "--size=64MiB",
        "--engine-opt=node_capacity=64",
        TPCB[0],
        TPCB[1],
    ]);
    let opts = &group["engine_opts"];
    assert_eq!(opts["batch_period_ms"], "20", "{group}");
    assert_eq!(opts["node_capacity"], "64", "a given option stays as given: {group}");
    assert!(opts.get("protocol").is_none(), "group takes no protocol: {group}");
    assert!(opts.get("fault").is_none(), "no fault is set: {group}");
    let nvwal = row(&["--engine=sqlite-nvwal", "--medium=dram", "--workload=mobibench"]);
    assert_eq!(nvwal["engine_opts"]["nvwal"], "ls", "{nvwal}");
    assert_eq!(nvwal["engine_opts"]["diff"], "on", "{nvwal}");
}

/// Regression (issue 39): `max_pending` was recorded for `redb`, whose commits are durable on
/// return, so the setting never applied; it stays where commits do wait (`group`).
#[test]
fn settings_an_engine_ignores_are_omitted() {
    let redb = row(&["--engine=redb", "--workload=ycsb", "--records=1000", "--max-pending=8"]);
    assert!(redb["max_pending"].is_null(), "{redb}");
    assert!(redb["flush"].is_null() && redb["medium"].is_null(), "{redb}");
    let group = row(&[
        "--engine=group",
        "--medium=dram",
        "--size=64MiB",
        "--threads=2",
        "--max-pending=8",
        TPCB[0],
        TPCB[1],
    ]);
    assert_eq!(group["max_pending"], 8, "{group}");
}

/// `--write-latency` (NVWAL's per-line NVRAM write latency) is recorded beside the barrier.
#[test]
fn a_row_records_the_write_latency_per_line() {
    let r = row(&[
        "--engine=sqlite-nvwal",
        "--medium=dram",
        "--workload=mobibench",
        "--write-latency=500ns",
        "--persist-latency=1us",
    ]);
    assert_eq!(r["write_latency_ns"], 500, "{r}");
    assert_eq!(r["persist_latency_ns"], 1000, "{r}");
}

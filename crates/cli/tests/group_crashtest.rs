//! `nvmdb crashtest` on NVRAM Group Commit: simulated crashes during batch persists (and inside
//! recovery) on YCSB and TPC-B verify clean, with deterministic count-closed batches and with
//! time-closed batches under two threads; each test-only fault of the batch persist is caught.
//! Would catch: a batch log that does not restore the previous batch, a batch acknowledged
//! before it is durable, or staged lines copied in place before the log can undo them.

mod common;

use common::{assert_clean, json_of};
use std::process::Output;

fn crashtest(args: &[&str]) -> Output {
    let common = ["crashtest", "--engine=group", "--size=16MiB", "--engine-opt=staging_bytes=4MiB"];
    common::run(&common, args)
}

fn clean(args: &[&str]) -> serde_json::Value {
    let json = assert_clean(&crashtest(args));
    let (crashes, iterations) = (json["crashes"].as_u64(), json["iterations"].as_u64());
    assert!(crashes.unwrap() * 10 >= iterations.unwrap() * 9, "{json}");
    json
}

#[test]
fn group_survives_crashes_in_count_closed_batches_on_ycsb_and_tpcb() {
    for workload in [["--workload=ycsb", "--mix=write-heavy"], ["--workload=tpcb", "--scale=1"]] {
        let json = clean(&[
            workload[0],
            workload[1],
            "--engine-opt=node_capacity=8",
            "--engine-opt=batch_txns=4",
            "--crashes=120",
            "--policy=all",
            "--recovery-crashes=1",
            "--seed=5",
        ]);
        assert!(json["recovery_crashes"].as_u64().unwrap() > 0, "{json}");
    }
}

#[test]
fn group_survives_crashes_in_time_closed_batches_with_two_threads() {
    clean(&[
        "--workload=tpcb",
        "--threads=2",
        "--max-pending=1",
        "--engine-opt=batch_period_ms=1",
        "--engine-opt=persist_threads=2",
        "--crashes=100",
        "--seed=6",
    ]);
}

/// Runs a campaign with `fault` and returns the violation kinds it found.
fn caught(fault: &str, extra: &[&str]) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let mut args = vec!["--workload=tpcb", fault.as_str(), "--seed=7"];
    if !extra.iter().any(|a| a.starts_with("--crashes")) {
        args.push("--crashes=150");
    }
    args.extend_from_slice(extra);
    let out = crashtest(&args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "the fault went unnoticed: {json}");
    assert!(json["violations"].as_u64().unwrap() > 0, "{json}");
    json["violations_by_kind"].clone()
}

#[test]
fn skipping_the_batch_log_barrier_is_caught() {
    // A few percent of crash points catch it: 300 points miss with p < 1e-4.
    let kinds = caught("batch-skip-log-barrier", &["--engine-opt=batch_txns=5", "--crashes=300"]);
    assert!(kinds["recovery"].as_u64().unwrap_or(0) > 0, "{kinds}");
}

#[test]
fn copying_staged_lines_before_the_log_is_caught() {
    caught("batch-copy-before-log", &["--engine-opt=batch_txns=5"]);
}

#[test]
fn acknowledging_a_batch_before_its_last_barrier_is_caught() {
    // Acks are observed by a second thread waiting for the batch while the closer still runs.
    // About 3% of crash points fall in the window a waiter can see: 400 fence points miss it
    // with p < 1e-5.
    let kinds = caught(
        "batch-ack-early",
        &["--threads=2", "--max-pending=1", "--engine-opt=batch_period_ms=1", "--crashes=400"],
    );
    assert!(kinds["durability"].as_u64().unwrap_or(0) > 0, "{kinds}");
}

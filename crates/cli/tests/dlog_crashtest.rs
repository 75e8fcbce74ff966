//! `nvmdb crashtest` on `wal` with a distributed log (Wang & Johnson, VLDB 2014): transaction-
//! and page-partitioned logs, volatile caches (passive group commit) and durable ones (eADR),
//! survive simulated crashes on TPC-B; each test-only fault of the protocol is caught. Would
//! catch: a commit acknowledged before every log is durable up to its GSN, a commit that leaves
//! one of its logs unforced, redo past the GSN horizon, or redo across logs out of GSN order;
//! and, on every cut image, a persisted GSN horizon that covers a record the image lacks (the
//! log's stated invariant, checked on the image itself: issue 37, hole (b)).

mod common;

use common::{assert_clean, json_of};
use std::process::Output;

fn crashtest(log: &str, args: &[&str]) -> Output {
    let log = format!("--engine-opt=log={log}");
    let common = [
        "crashtest",
        "--engine=wal",
        "--workload=tpcb",
        "--size=48MiB",
        "--engine-opt=log_bytes=16MiB",
        "--engine-opt=node_capacity=8",
        "--engine-opt=max_dirty_pages=16",
    ];
    let mut fixed = common.to_vec();
    fixed.push(&log);
    common::run(&fixed, args)
}

fn clean(log: &str, args: &[&str]) -> serde_json::Value {
    let out = crashtest(log, args);
    assert_clean(&out)
}

#[test]
fn page_partitioned_logs_survive_crashes_with_a_crash_in_recovery() {
    // `--max-pending=4`: the driver waits for durability every 4 commits, so acknowledgements
    // (the commit daemon's) reach every window even when the daemon is starved of CPU; without
    // it one run at high load verified 0 acks in 16 crashes.
    let args = ["--crashes=16", "--policy=all", "--recovery-crashes=1", "--seed=21"];
    clean("page:2", &[&args[..], &["--max-pending=4"]].concat());
}

#[test]
fn txn_partitioned_logs_survive_crashes_with_two_threads() {
    // Two workers in two logs: a commit waits for the other worker's log (min_dgsn), which a
    // straggler holds back until it commits or the daemon nudges it.
    let json = clean("txn:2", &["--threads=2", "--crashes=16", "--seed=22"]);
    // Every reached cut but one whose shutdown failed is checked against the horizon.
    let checked = json["images_checked"].as_u64().unwrap_or(0);
    assert!(checked >= 12, "the horizon invariant checked {checked} of 16 cut images: {json}");
}

#[test]
fn durable_caches_survive_crashes_without_a_daemon() {
    clean("page:2", &["--engine-opt=cache=durable", "--eadr", "--crashes=12", "--seed=23"]);
}

fn caught(log: &str, fault: &str, extra: &[&str]) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let mut args = vec![fault.as_str(), "--seed=24"];
    args.extend_from_slice(extra);
    let out = crashtest(log, &args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "the fault went unnoticed: {json}");
    json["violations_by_kind"].clone()
}

#[test]
fn a_commit_acknowledged_before_the_horizon_covers_it_is_caught() {
    let kinds = caught("page:2", "dlog-ack-own-logs", &["--crashes=16"]);
    assert!(kinds["durability"].as_u64().unwrap_or(0) > 0, "{kinds}");
}

#[test]
fn a_commit_that_leaves_a_lagging_log_unforced_is_caught() {
    caught("page:2", "dlog-skip-lagging-log", &["--crashes=20"]);
}

#[test]
fn redo_past_the_gsn_horizon_is_caught() {
    caught("page:2", "dlog-redo-past-horizon", &["--crashes=20"]);
}

/// Regression (issue 37, hole (b)): a persisted GSN horizon covering a record that no log has
/// forced is caught on the cut image itself (`invariant`), not only when a lost record happens
/// to break an acknowledged commit that the checks read.
#[test]
fn a_horizon_covering_an_unforced_record_is_caught_on_the_cut_image() {
    let kinds = caught("page:2", "dlog-skip-lagging-log", &["--crashes=20"]);
    assert!(kinds["invariant"].as_u64().unwrap_or(0) > 0, "{kinds}");
}

/// The two-worker transaction-partitioned campaign behind the closing note (slow): 1,500 cuts,
/// about the rate at which an ordering mistake of the horizon shows in the other checks; every
/// cut image is checked against the horizon invariant.
#[test]
#[ignore]
fn two_worker_txn_partitioned_campaign_holds_the_horizon_invariant_at_every_cut() {
    let json = clean("txn:2", &["--threads=2", "--crashes=1500", "--seed=37", "--jobs=2"]);
    let checked = json["images_checked"].as_u64().unwrap_or(0);
    eprintln!(
        "{} crashes, {checked} images checked, {} acks",
        json["crashes"], json["acks_verified"]
    );
    assert!(checked >= 1300, "{checked} of 1500 cut images checked: {json}");
}

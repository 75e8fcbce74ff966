//! `nvmdb crashtest` on NVRAM Disk-Replacement (`wal`): simulated crashes during log forces,
//! page flushes and checkpoints (and inside recovery) on YCSB and TPC-B verify clean with both
//! page-flush methods and every central-log insert and force path (Aether's consolidation array
//! and flush pipelining, the defaults, and the baselines); each test-only fault is caught.
//! Would catch: a commit acknowledged before its log records are durable, a page written before
//! its log (the WAL rule), a checkpoint that moves the redo point before its pages are durable,
//! or a stale log tail redone after a crash; with `flusher=pelley` (issue 38), a redo point moved
//! past the recLSN of a page still dirty.

mod common;

use common::{assert_clean, json_of};
use std::process::{Command, Output};

fn crashtest(args: &[&str]) -> Output {
    let common = [
        "crashtest",
        "--engine=wal",
        "--size=32MiB",
        "--engine-opt=log_bytes=8MiB",
        "--engine-opt=node_capacity=8",
        "--engine-opt=max_dirty_pages=16",
    ];
    common::run(&common, args)
}

fn clean(args: &[&str]) -> serde_json::Value {
    let out = crashtest(args);
    assert_clean(&out)
}

#[test]
fn wal_survives_crashes_on_ycsb_and_tpcb_with_both_page_flushes() {
    for (workload, flush) in [
        (["--workload=ycsb", "--mix=write-heavy"], "--engine-opt=page_flush=paper"),
        (["--workload=tpcb", "--scale=1"], "--engine-opt=page_flush=direct"),
    ] {
        let json = clean(&[
            workload[0],
            workload[1],
            flush,
            "--crashes=120",
            "--policy=all",
            "--recovery-crashes=1",
            "--seed=8",
        ]);
        assert!(json["recovery_crashes"].as_u64().unwrap() > 0, "{json}");
    }
}

/// Guards Pelley's flusher (issue 38): oldest-first write-back with the redo point at the
/// oldest recLSN left survives crashes in page flushes, log forces and recovery.
#[test]
fn wal_with_pelleys_flusher_survives_crashes() {
    for (workload, flush, threads) in [
        (["--workload=ycsb", "--mix=write-heavy"], "--engine-opt=page_flush=paper", "--threads=1"),
        (["--workload=tpcb", "--scale=1"], "--engine-opt=page_flush=direct", "--threads=2"),
    ] {
        clean(&[
            workload[0],
            workload[1],
            flush,
            threads,
            "--engine-opt=flusher=pelley",
            "--crashes=100",
            "--policy=all",
            "--recovery-crashes=1",
            "--seed=11",
        ]);
    }
}

#[test]
fn wal_survives_crashes_with_two_threads() {
    clean(&["--workload=tpcb", "--threads=2", "--crashes=100", "--seed=9"]);
}

fn caught(fault: &str, extra: &[&str]) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let mut args = vec!["--workload=tpcb", fault.as_str(), "--seed=10"];
    args.extend_from_slice(extra);
    let out = crashtest(&args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "the fault went unnoticed: {json}");
    json["violations_by_kind"].clone()
}

/// Guards the baselines kept beside Aether's paths: decoupled fill alone and the global insert
/// lock, each with inline forces, and the consolidation array with inline forces, so a
/// commit acknowledged before its records are durable is caught on every path.
#[test]
fn wal_survives_crashes_on_every_central_log_insert_and_force_path() {
    for (insert, force) in [
        ("--engine-opt=log_insert=aether", "--engine-opt=log_force=inline"),
        ("--engine-opt=log_insert=locked", "--engine-opt=log_force=inline"),
        ("--engine-opt=log_insert=consolidated", "--engine-opt=log_force=inline"),
        ("--engine-opt=log_insert=locked", "--engine-opt=log_force=pipelined"),
    ] {
        clean(&["--workload=tpcb", "--threads=2", insert, force, "--crashes=40", "--seed=11"]);
    }
}

#[test]
fn a_commit_acknowledged_before_its_lsns_are_durable_is_caught() {
    // With the flush daemon's forces (the default) and with the committer's own.
    for force in ["--engine-opt=log_force=pipelined", "--engine-opt=log_force=inline"] {
        let kinds = caught("wal-skip-log-barrier", &["--crashes=100", force]);
        assert!(kinds["durability"].as_u64().unwrap_or(0) > 0, "{force}: {kinds}");
    }
}

#[test]
fn a_page_written_before_its_log_is_caught() {
    // Its window is a checkpoint's page writes: a tiny page budget and longer runs make
    // checkpoints frequent (about 5% of crash points catch it; 200 points miss with p < 1e-4).
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--engine=wal", "--workload=tpcb", "--size=32MiB"])
        .args(["--engine-opt=log_bytes=8MiB", "--engine-opt=node_capacity=8"])
        .args(["--engine-opt=max_dirty_pages=4", "--engine-opt=fault=wal-page-before-log"])
        .args(["--crashes=200", "--event=fence", "--policy=evict", "--txns=200", "--seed=10"])
        .arg("--json")
        .output()
        .expect("the nvmdb binary runs");
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "the fault went unnoticed: {json}");
}

#[test]
fn a_redo_point_moved_before_its_pages_are_durable_is_caught() {
    caught("wal-checkpoint-before-pages", &["--crashes=150"]);
}

/// Guards Pelley's flusher's redo point (issue 38): moved to the log's end while pages are
/// still dirty, a crash loses their committed changes; crashtest must see it.
#[test]
fn a_redo_point_moved_past_dirty_pages_is_caught() {
    let kinds =
        caught("wal-flusher-redo-past-dirty", &["--engine-opt=flusher=pelley", "--crashes=100"]);
    let lost =
        kinds["durability"].as_u64().unwrap_or(0) + kinds["consistency"].as_u64().unwrap_or(0);
    assert!(lost > 0, "{kinds}");
}

/// Guards store groups (issue 35, `wal/capture.rs`): an update's undo record and row are one
/// insert into the central log; a group logged without its last store (the row or its
/// checksum) leaves a committed update that redo cannot rebuild, and crashtest must see it.
#[test]
fn a_store_group_logged_without_its_last_store_is_caught() {
    let kinds = caught("wal-group-drops-last-store", &["--crashes=100"]);
    let lost =
        kinds["durability"].as_u64().unwrap_or(0) + kinds["consistency"].as_u64().unwrap_or(0);
    assert!(lost > 0, "{kinds}");
}

#[test]
fn wal_through_the_file_system_survives_process_kills() {
    // N-Store's traditional InP: pwrite + fdatasync instead of load/store + fences.
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--engine=wal", "--workload=tpcb", "--kill", "--crashes=4"])
        .args(["--size=128MiB", "--engine-opt=io=fs", "--json"])
        .output()
        .expect("the nvmdb binary runs");
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["violations"], 0, "{json}");
    assert!(json["acks_verified"].as_u64().unwrap() > 0, "{json}");
}

/// Regression (issue 36): `crashtest --engine wal --engine-opt log=txn:2` failed at the default
/// region size (the per-transaction logs did not fit); the default region now holds
/// the workload's default plus the engine's own logs (`registry::default_region_bytes`).
#[test]
fn wal_distributed_log_crashtest_runs_at_the_default_region_size() {
    let out = common::run(
        &["crashtest", "--engine=wal", "--engine-opt=log=txn:2"],
        &["--crashes=60", "--seed=12"],
    );
    let json = assert_clean(&out);
    // More than the plain 8 MiB default: the engine's logs were added.
    assert!(json["size_bytes"].as_u64().unwrap_or(0) > 8 << 20, "{json}");
}

//! `nvmdb crashtest` on the log-structured engine: NVM-Log on `sim` (crashes inside commits,
//! memtable flushes and compactions, and inside recovery) on YCSB and TPC-C, Log (`io=fs`) by
//! process kills; each test-only fault is caught. Would catch: memtable links persisted before
//! their nodes and pointer record, a run named by the manifest before it is durable, merged runs
//! dropped before their merge is published, or a log replay that loses acknowledged commits.

mod common;

use common::{assert_clean, json_of};
use std::process::{Command, Output};

fn crashtest(args: &[&str]) -> Output {
    // Small memtables (16 KiB for YCSB's 34-byte rows, 128 KiB for TPC-C) and 200-transaction
    // windows: most windows hold a memtable flush and compactions.
    // Short histories keep the suite fast; long campaigns are commands (see the note).
    let common = ["crashtest", "--engine=lsm", "--size=32MiB", "--history=300", "--ages=2"];
    common::run(&common, args)
}

fn clean(args: &[&str]) -> serde_json::Value {
    let out = crashtest(args);
    assert_clean(&out)
}

#[test]
fn nvm_log_survives_crashes_on_ycsb_and_tpcc() {
    let ycsb: &[&str] = &[
        "--workload=ycsb",
        "--mix=write-heavy",
        "--records=2000",
        "--workload-opt=field_length=1",
        "--engine-opt=memtable_bytes=16KiB",
        "--txns=200",
        "--crashes=40",
    ];
    let tpcc: &[&str] = &[
        "--workload=tpcc",
        "--scale=1",
        "--workload-opt=items=1000",
        "--engine-opt=memtable_bytes=128KiB",
        "--txns=50",
        "--crashes=20",
    ];
    for workload in [ycsb, tpcc] {
        let mut args = workload.to_vec();
        args.extend(["--policy=all", "--recovery-crashes=1", "--seed=8"]);
        let json = clean(&args);
        assert!(json["recovery_crashes"].as_u64().unwrap_or(0) > 0, "{json}");
    }
}

/// YCSB-A on 2,000 one-byte rows and a 16 KiB memtable (flushes and merges every few
/// commits), 200 transactions a crash point, with `extra`.
fn small_ycsb(extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--workload=ycsb",
        "--mix=a",
        "--records=2000",
        "--workload-opt=field_length=1",
        "--engine-opt=memtable_bytes=16KiB",
        "--txns=200",
    ];
    args.extend_from_slice(extra);
    clean(&args)
}

/// One commit at a time under the commit latch (`group_commit=off`; on is the default).
#[test]
fn nvm_log_survives_crashes_with_two_threads() {
    small_ycsb(&["--engine-opt=group_commit=off", "--threads=2", "--crashes=30"]);
}

/// Group commit (`group_commit=on`): a crash inside a group's commit keeps all of it or none,
/// and no member is acknowledged before the group is durable.
#[test]
fn nvm_log_group_commit_survives_crashes_with_four_threads() {
    // The leader waits 200 µs for others to queue, so that crashes land inside groups.
    let delay = "--engine-opt=group_commit_delay_us=200";
    small_ycsb(&["--engine-opt=group_commit=on", delay, "--threads=4", "--crashes=30"]);
}

fn caught(fault: &str, extra: &[&str]) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let mut args = vec!["--workload=ycsb", "--mix=write-heavy", "--records=2000", &fault];
    args.extend(["--workload-opt=field_length=1", "--engine-opt=memtable_bytes=16KiB"]);
    args.push("--txns=200");
    args.extend_from_slice(extra);
    let out = crashtest(&args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "the fault went unnoticed: {json}");
    json
}

#[test]
fn links_persisted_before_their_nodes_are_caught() {
    caught("lsm-skip-log-persist", &["--crashes=60", "--seed=3"]);
}

/// The same fault inside commit groups (four threads, the leader waiting for others to queue):
/// a group's links made reachable before its nodes and pointer record are durable is caught.
#[test]
fn a_group_linked_before_its_nodes_are_persisted_is_caught() {
    let group = ["--engine-opt=group_commit=on", "--engine-opt=group_commit_delay_us=200"];
    let mut extra = vec!["--threads=4", "--crashes=60", "--seed=3"];
    extra.extend(group);
    caught("lsm-skip-log-persist", &extra);
}

#[test]
fn a_run_named_before_it_is_persisted_is_caught() {
    caught(
        "lsm-run-before-persist",
        &["--crashes=30", "--load-every=1", "--policy=persisted", "--seed=4"],
    );
}

#[test]
fn merged_runs_dropped_before_their_merge_is_published_is_caught() {
    caught(
        "lsm-drop-runs-before-publish",
        &["--crashes=30", "--load-every=1", "--event=fence", "--seed=5"],
    );
}

#[test]
fn log_through_the_file_system_survives_process_kills() {
    // N-Store's traditional Log engine: pwrite + fdatasync instead of load/store + fences.
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--engine=lsm", "--workload=ycsb", "--mix=write-heavy"])
        .args(["--records=5000", "--kill", "--crashes=4", "--size=128MiB"])
        .args(["--engine-opt=io=fs", "--engine-opt=memtable_bytes=256KiB", "--json"])
        .output()
        .expect("the nvmdb binary runs");
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["violations"], 0, "{json}");
    assert!(json["acks_verified"].as_u64().unwrap_or(0) > 0, "{json}");
}

//! `nvmdb crashtest` on Copy-on-Write Updates (`cow`): simulated crashes at stores and fences
//! (node writes, barriers, the master swap) on YCSB and TPC-C verify clean, one commit per swap
//! and with grouped commits under two threads; each test-only fault is caught; `io=fs` survives
//! process kills. Would catch: a master swapped before its pages are durable, a swap not
//! fenced before the pages, a page reused before the version freeing it is durable, a group
//! token acknowledged before its swap.

mod common;

use common::{assert_clean, json_of};
use std::process::{Command, Output};

fn crashtest(args: &[&str]) -> Output {
    let common = ["crashtest", "--engine=cow", "--size=32MiB", "--engine-opt=node_capacity=8"];
    common::run(&common, args)
}

fn clean(args: &[&str]) -> serde_json::Value {
    let out = crashtest(args);
    assert_clean(&out)
}

#[test]
fn cow_survives_crashes_on_ycsb_and_tpcc() {
    for workload in [["--workload=ycsb", "--mix=write-heavy"], ["--workload=tpcc", "--txns=60"]] {
        let json = clean(&[workload[0], workload[1], "--crashes=40", "--policy=all", "--seed=8"]);
        assert!(json["coverage"]["windows_with"]["splits"].as_u64().unwrap() > 0, "{json}");
    }
}

#[test]
fn cow_survives_crashes_with_grouped_commits_and_two_threads() {
    clean(&[
        "--workload=tpcc",
        "--threads=2",
        "--engine-opt=group_commit_ms=1",
        "--crashes=30",
        "--seed=9",
    ]);
}

#[test]
fn cow_survives_crashes_with_pipelined_commits_and_two_threads() {
    // The default (`pipeline=on`): a commit hands the writer slot on before it persists, so
    // two threads' commits overlap and their master swaps must stay in version order.
    for seed in ["--seed=11", "--seed=12"] {
        let json =
            clean(&["--workload=ycsb", "--mix=write-heavy", "--threads=2", "--crashes=40", seed]);
        assert!(json["acks_verified"].as_u64().unwrap() > 0, "{json}");
    }
}

#[test]
fn cow_survives_crashes_with_the_slot_held_to_durability() {
    // `pipeline=off`: LMDB's and N-Store's writer, which holds the slot until it is durable.
    clean(&[
        "--workload=ycsb",
        "--mix=write-heavy",
        "--threads=2",
        "--engine-opt=pipeline=off",
        "--crashes=30",
        "--seed=13",
    ]);
}

/// Runs `fault` with pipelined commits (the default) and with the slot held to durability;
/// each must be caught.
fn caught(fault: &str) -> serde_json::Value {
    let fault = format!("--engine-opt=fault={fault}");
    let mut kinds = serde_json::Value::Null;
    for pipeline in ["--engine-opt=pipeline=on", "--engine-opt=pipeline=off"] {
        let args = ["--workload=ycsb", "--mix=write-heavy", fault.as_str(), pipeline, "--seed=10"];
        let out = crashtest(&[&args[..], &["--crashes=30", "--policy=all"]].concat());
        let json = json_of(&out);
        assert_eq!(out.status.code(), Some(1), "the fault went unnoticed ({pipeline}): {json}");
        assert!(json["violations"].as_u64().unwrap() > 0, "{json}");
        kinds = json["violations_by_kind"].clone();
    }
    kinds
}

#[test]
fn a_master_swap_without_the_page_barrier_is_caught() {
    caught("cow-skip-node-persist");
}

#[test]
fn a_master_swapped_before_its_pages_is_caught() {
    caught("cow-swap-before-nodes");
}

#[test]
fn a_page_reused_before_its_version_is_durable_is_caught() {
    caught("cow-reuse-early");
}

#[test]
fn cow_through_the_file_system_survives_process_kills() {
    // N-Store's traditional CoW: pwrite + fdatasync instead of stores + fences.
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--engine=cow", "--workload=ycsb", "--mix=write-heavy", "--kill"])
        .args(["--crashes=4", "--size=64MiB", "--engine-opt=io=fs", "--json"])
        .output()
        .expect("the nvmdb binary runs");
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["violations"], 0, "{json}");
    assert!(json["acks_verified"].as_u64().unwrap() > 0, "{json}");
}

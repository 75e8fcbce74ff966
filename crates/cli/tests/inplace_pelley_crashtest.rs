//! `nvmdb crashtest` on In-Place Updates with Pelley's protocol (`--engine-opt protocol=pelley`:
//! `persist_wal` + `persist_page` per page update, VLDB 2014 Fig. 2): crash campaigns on YCSB,
//! TPC-B and TPC-C verify clean (crashes inside `persist_page`'s four barriers included, and
//! inside recovery), and the protocol broken on purpose is caught. Would catch: a page log left
//! valid (recovery copies a stale image over later commits), a page update that persists before
//! its undo entry, or an in-place write that never persists.

use std::process::{Command, Output};

fn crashtest(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .arg("crashtest")
        .args(["--engine=inplace", "--engine-opt=protocol=pelley", "--json"])
        .args(args)
        .output()
        .expect("the nvmdb binary runs")
}

fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    })
}

#[test]
fn pelleys_protocol_survives_crashes_on_ycsb_tpcb_and_tpcc() {
    for (workload, crashes) in [("ycsb", "80"), ("tpcb", "80"), ("tpcc", "40")] {
        let out = crashtest(&[
            &format!("--workload={workload}"),
            &format!("--crashes={crashes}"),
            "--recovery-crashes=1",
            "--seed=11",
        ]);
        let json = json_of(&out);
        assert_eq!(out.status.code(), Some(0), "{workload}: {json}");
        assert_eq!(json["violations"], 0, "{workload}: {json}");
        assert!(json["acks_verified"].as_u64().unwrap() > 0, "{workload}: {json}");
    }
}

/// `persist_page` before `persist_wal`: the update is in place, durable, with no undo entry.
#[test]
fn page_before_wal_is_caught() {
    let out =
        crashtest(&["--workload=tpcb", "--engine-opt=fault=pelley-page-before-wal", "--seed=5"]);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(1), "a broken engine must fail: {json}");
    assert!(json["violations"].as_u64().unwrap() > 0, "{json}");
}

/// The page log invalidated without the in-place write flushed: committed updates never
/// persist, so even the run without a crash fails its checker.
#[test]
fn page_not_flushed_is_caught() {
    let out = crashtest(&["--workload=tpcb", "--engine-opt=fault=pelley-page-not-flushed"]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("checker fails on a run without any crash"), "{stderr}");
}

//! `nvmdb crashtest --kill` on the PMDK and RocksDB peers: SIGKILLed children running TPC-C and
//! TATP on two threads reopen (PMDK rolls back, RocksDB replays its WAL) with every
//! acknowledged commit present. Would catch a peer that acknowledges before its commit is
//! durable, or that opens a killed database wrongly.

use std::process::Command;

/// Kills per campaign: a smoke test; `nvmdb crashtest --kill --crashes 50` is the long run.
const KILLS: u64 = 2;

fn kill(engine: &str, workload: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--kill", "--threads=2", "--kill-window=300ms"])
        .args([format!("--crashes={KILLS}"), format!("--engine={engine}")])
        .args([format!("--workload={workload}"), "--json".into()])
        // A small PMDK pool (PMDK writes all of it when it makes it); other peers ignore it.
        .arg("--engine-opt=pool_bytes=67108864")
        // A small TPC-C, so the children commit inside the window instead of loading.
        .args(if workload == "tpcc" {
            &["--workload-opt=items=1000", "--workload-opt=customers_per_district=30"][..]
        } else {
            &[]
        })
        .output()
        .expect("the nvmdb binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("not JSON ({e}): {text}\nstderr: {}", String::from_utf8_lossy(&out.stderr))
    });
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!((json["violations"].as_u64(), json["crashes"].as_u64()), (Some(0), Some(KILLS)));
    assert!(json["acks_verified"].as_u64() > Some(0), "the children acknowledged nothing");
    assert!(
        json["path"].as_str().is_some_and(|p| p.starts_with("/dev/shm/")),
        "a peer's directory on the default medium (shm) is on tmpfs: {}",
        json["path"]
    );
}

/// Regression (CI, 2026-11-28): with the peer's directory in the temporary directory (a disk)
/// PMDK msynced every flush to it at ~2 ms each, a child committed one TPC-C transaction in
/// 300 ms, and a kill 41 ms after `ready` left `acks_verified` at 0. On shm the directory is on
/// tmpfs, as `bench` puts it, and a 41 ms kill finds hundreds of acknowledged commits.
#[cfg(feature = "pmemobj")]
#[test]
fn regression_peer_kill_campaign_on_shm_keeps_its_directory_on_tmpfs() {
    let path = one_tatp_kill(&["--threads=1"]);
    assert!(path.starts_with("/dev/shm/nvmdb-crashtest-"), "{path}");
    assert!(!std::path::Path::new(&path).exists(), "the campaign removes {path}");
    // --medium file keeps the temporary directory.
    let path = one_tatp_kill(&["--medium=file"]);
    let tmp = std::env::temp_dir().display().to_string();
    assert!(path.starts_with(&tmp), "{path}");
}

/// One short PMDK kill on TATP with `extra` flags; returns the path the campaign reports.
#[cfg(feature = "pmemobj")]
fn one_tatp_kill(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["crashtest", "--kill", "--kill-window=50ms", "--crashes=1"])
        .args(["--engine=pmemobj", "--workload=tatp", "--json"])
        .arg("--engine-opt=pool_bytes=67108864")
        .args(extra)
        .output()
        .expect("the nvmdb binary runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(out.status.code(), Some(0), "{json}");
    json["path"].as_str().expect("the campaign reports its path").to_string()
}

#[cfg(feature = "pmemobj")]
#[test]
fn pmemobj_survives_kills_on_tpcc_and_tatp() {
    kill("pmemobj", "tpcc");
    kill("pmemobj", "tatp");
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_survives_kills_on_tpcc_and_tatp() {
    kill("rocksdb", "tpcc");
    kill("rocksdb", "tatp");
}

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

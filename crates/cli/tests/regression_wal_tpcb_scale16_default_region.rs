//! Regression (found on a 16-core machine, issue 35: `nvmdb bench --engine wal --workload tpcb
//! --scale 16 --threads 16` failed with "the tpcb workload at this scale does not fit the 256.0
//! MiB region"). `wal` and `group` lay their page area out once, so the default region must be
//! sized for the workload; only YCSB reported its size, and TPC-B, TPC-C and TATP got 256 MiB
//! whatever their scale. Would catch: a workload without an estimate, or one too small for
//! what it loads, on an engine whose region cannot grow.

use std::process::Command;

fn fits_with_defaults(engine: &str, workload: &[&str]) {
    let mut args = vec!["bench", "--engine", engine, "--workload"];
    args.extend_from_slice(workload);
    args.extend_from_slice(&["--medium", "dram", "--txns", "50", "--json"]);
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(&args).output().expect("nvmdb runs");
    assert!(
        out.status.success(),
        "{engine} {workload:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["checker"], "pass", "{engine} {workload:?}: {row}");
}

#[test]
fn wal_loads_tpcb_at_scale_16_in_its_default_region() {
    fits_with_defaults("wal", &["tpcb", "--scale", "16"]);
}

#[test]
fn wal_loads_tpcc_at_scale_4_in_its_default_region() {
    fits_with_defaults("wal", &["tpcc", "--scale", "4"]);
}

//! `--cpu-cache`, N-Store's read model (SIGMOD 2015 §2.2, issue 36): a row records the cache it
//! ran with and the lines charged per transaction, and the flag is refused beside Pelley's
//! `--cache-pages`. Would catch: a row that ran the model without saying so, a row whose
//! `per_txn` hides the read charge (the N-Store TPC-C rows had 0 and no one saw it), or two
//! read models charging the same reads.

mod common;

use common::json_of;

fn bench(args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let out = common::run(&["bench", "--txns=300"], args);
    (out.status.code(), json_of(&out))
}

const YCSB: [&str; 4] = ["--workload=ycsb", "--mix=read-only", "--records=20000", "--medium=dram"];

#[test]
fn a_row_records_the_cpu_cache_and_its_charged_lines() {
    for engine in ["--engine=cow", "--engine=lsm", "--engine=inplace"] {
        let mut args = YCSB.to_vec();
        args.extend([engine, "--read-latency=10ns", "--cpu-cache=64KiB"]);
        let (code, row) = bench(&args);
        assert_eq!(code, Some(0), "{row}");
        assert_eq!(row["config"]["cpu_cache_bytes"], 64 << 10, "{engine}: {row}");
        let lines = row["per_txn"]["lines_read_charged"].as_f64().unwrap();
        assert!(lines > 0.5, "{engine}: {lines} lines a read-only txn over 2 MB of rows");
        // The model's own time is in the row, and the net throughput takes it out.
        let model = row["per_txn"]["cpu_cache_model_ns"].as_f64().unwrap();
        let unabsorbed = row["per_txn"]["cpu_cache_unabsorbed_ns"].as_f64().unwrap();
        assert!(model > 0.0 && unabsorbed <= model, "{engine}: {row}");
        let (tps, net) = (row["tps"].as_f64().unwrap(), row["tps_net"].as_f64().unwrap());
        assert!(net >= tps, "{engine}: net {net} below {tps}");
        let mut args = YCSB.to_vec();
        args.extend([engine, "--read-latency=10ns"]);
        let (code, off) = bench(&args);
        assert_eq!(code, Some(0), "{off}");
        assert_eq!(off["config"]["cpu_cache_bytes"], 0, "{engine}: {off}");
        assert_eq!(off["per_txn"]["lines_read_charged"], 0.0, "{engine}: {off}");
        assert_eq!(off["tps_net"], off["tps"], "{engine}: {off}");
    }
}

#[test]
fn both_read_models_at_once_are_one_line_and_exit_2() {
    let mut args = YCSB.to_vec();
    args.extend(["--engine=inplace", "--cpu-cache=20MiB", "--cache-pages=100"]);
    let out = common::run(&["bench", "--txns=10"], &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--cpu-cache") && stderr.contains("--cache-pages"), "{stderr}");
    for bad in ["--cpu-cache=512", "--cpu-cache=2GiB", "--cpu-cache=lots"] {
        let mut args = YCSB.to_vec();
        args.extend(["--engine=inplace", bad]);
        let out = common::run(&["bench", "--txns=10"], &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{bad}: {stderr}");
    }
}

//! Regions that grow: a run whose database outgrows `--size` extends the file up to `--max-size`
//! and reopens; a run that fills even the maximum stops early with its results and the checker.
//! Would catch: a full region that loses the run's results, or a grown region that cannot reopen.

use std::path::PathBuf;
use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let p = PathBuf::from(format!("/dev/shm/nvmdb-grow-cli-{}-{name}.region", std::process::id()));
    let _ = std::fs::remove_file(&p);
    Scratch(p)
}

fn bench(path: &Scratch, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "--engine",
        "inplace",
        "--workload",
        "tpcb",
        "--workload-opt",
        "accounts_per_branch=500",
        "--medium",
        "shm",
        "--path",
        path.0.to_str().unwrap(),
        "--keep",
        "--json",
    ];
    args.extend_from_slice(extra);
    nvmdb(&args)
}

#[test]
fn a_database_larger_than_its_first_size_grows_the_file_and_reopens() {
    let path = scratch("grows");
    // TPC-B's history table grows with every transaction.
    let out = bench(&path, &["--txns", "60000", "--size", "4MiB", "--max-size", "256MiB"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let len = std::fs::metadata(&path.0).unwrap().len();
    assert!(len > 4 << 20, "the file grew: {len} bytes");
    let again = bench(&path, &["--txns", "500"]);
    assert!(again.status.success(), "reopen: {}", String::from_utf8_lossy(&again.stderr));
    let row: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(row["checker"], "pass", "{row}");
}

#[test]
fn a_run_that_fills_the_maximum_stops_with_its_results() {
    let path = scratch("full");
    // No warm-up: 12 MiB fills in about a second, and a region that fills during warm-up has
    // nothing measured (committed 0, which is honest but not what this test is about).
    let out = bench(
        &path,
        &["--duration", "60", "--warmup", "0", "--size", "4MiB", "--max-size", "12MiB"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("region is full"), "{stderr}");
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(row["region_full"].is_string(), "{row}");
    assert!(row["committed"].as_u64().unwrap() > 0, "{row}");
    assert_eq!(row["checker"], "pass", "{row}");
}

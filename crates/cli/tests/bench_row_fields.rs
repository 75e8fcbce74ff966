//! A bench row records what the run really had (issue 39): the flush that runs (`none` on
//! `dram`), every option the engine applied (defaults included), and no setting the engine
//! ignored (`max_pending` where no commit ever waited). Would catch a row that describes the
//! flags instead of the run, which the reproduction report then repeats.

mod common;

use common::json_of;

fn row(args: &[&str]) -> serde_json::Value {
    let out = common::run(&["bench", "--txns=100"], args);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    json["config"].clone()
}

const TPCB: [&str; 2] = ["--workload=tpcb", "--workload-opt=accounts_per_branch=1000"];

/// Regression (issue 39): `--medium dram` rows said `"flush": "clwb"` though none runs.
#[test]
fn a_dram_row_says_flush_none() {
    let dram = row(&["--engine=inplace", "--medium=dram", "--size=64MiB", TPCB[0], TPCB[1]]);
    assert_eq!(dram["flush"], "none", "{dram}");
    let asked = row(&[
        "--engine=inplace",
        "--medium=dram",
        "--size=64MiB",
        "--flush=clflush",
        TPCB[0],
        TPCB[1],
    ]);
    assert_eq!(asked["flush"], "clflush", "{asked}");
    let eadr =
        row(&["--engine=inplace", "--medium=dram", "--size=64MiB", "--eadr", TPCB[0], TPCB[1]]);
    assert_eq!(eadr["flush"], "none", "eADR flushes nothing: {eadr}");
}

/// Regression (issue 39): `engine_opts` held only the options given, not `protocol=lean` or
/// `batch_period_ms=20`.
#[test]
fn a_rows_engine_opts_contain_the_defaults() {
    let inplace = row(&["--engine=inplace", "--medium=dram", "--size=64MiB", TPCB[0], TPCB[1]]);
    assert_eq!(inplace["engine_opts"]["protocol"], "lean", "{inplace}");
    let group = row(&[
        "--engine=group",
        "--medium=dram",
        "--size=64MiB",
        "--engine-opt=node_capacity=64",
        TPCB[0],
        TPCB[1],
    ]);
    let opts = &group["engine_opts"];
    assert_eq!(opts["batch_period_ms"], "20", "{group}");
    assert_eq!(opts["node_capacity"], "64", "a given option stays as given: {group}");
    assert!(opts.get("protocol").is_none(), "group takes no protocol: {group}");
    assert!(opts.get("fault").is_none(), "no fault is set: {group}");
    let nvwal = row(&["--engine=sqlite-nvwal", "--medium=dram", "--workload=mobibench"]);
    assert_eq!(nvwal["engine_opts"]["nvwal"], "ls", "{nvwal}");
    assert_eq!(nvwal["engine_opts"]["diff"], "on", "{nvwal}");
}

/// Regression (issue 39): `max_pending` was recorded for `redb`, whose commits are durable on
/// return, so the setting never applied; it stays where commits do wait (`group`).
#[test]
fn settings_an_engine_ignores_are_omitted() {
    let redb = row(&["--engine=redb", "--workload=ycsb", "--records=1000", "--max-pending=8"]);
    assert!(redb["max_pending"].is_null(), "{redb}");
    assert!(redb["flush"].is_null() && redb["medium"].is_null(), "{redb}");
    let group = row(&[
        "--engine=group",
        "--medium=dram",
        "--size=64MiB",
        "--threads=2",
        "--max-pending=8",
        TPCB[0],
        TPCB[1],
    ]);
    assert_eq!(group["max_pending"], 8, "{group}");
}

/// `--write-latency` (NVWAL's per-line NVRAM write latency) is recorded beside the barrier.
#[test]
fn a_row_records_the_write_latency_per_line() {
    let r = row(&[
        "--engine=sqlite-nvwal",
        "--medium=dram",
        "--workload=mobibench",
        "--write-latency=500ns",
        "--persist-latency=1us",
    ]);
    assert_eq!(r["write_latency_ns"], 500, "{r}");
    assert_eq!(r["persist_latency_ns"], 1000, "{r}");
}

/// A run's whole JSON row; `dir` holds the region file (a tmpfs or a real-disk directory).
fn full_row(dir: &std::path::Path, name: &str, args: &[&str]) -> serde_json::Value {
    let path = dir.join(format!("nvmdb-row-fields-{}-{name}.region", std::process::id()));
    let path_flag = format!("--path={}", path.display());
    let mut all = vec![path_flag.as_str(), "--size=256MiB", TPCB[0], TPCB[1]];
    all.extend_from_slice(args);
    let out = common::run(&["bench", "--txns=200"], &all);
    let _ = std::fs::remove_file(&path);
    let json = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    json
}

/// Regression (issue 36): an `io=fs` engine's `fdatasync` on tmpfs cost nothing and its row did
/// not say so; the row now carries the file-system sync model, says whether it was charged,
/// and counts the syncs and the bytes written through the file.
#[test]
fn an_io_fs_row_says_its_syncs_are_charged() {
    let shm = std::path::Path::new("/dev/shm");
    let fs = full_row(shm, "fs", &["--engine=wal", "--engine-opt=io=fs", "--medium=shm"]);
    let config = &fs["config"];
    assert_eq!(config["fs_sync_charged"], true, "{config}");
    assert_eq!(config["fs_sync_ns"], 2_000, "the default (ours): {config}");
    assert_eq!(config["fs_write_bandwidth_bytes_per_s"], 1_000_000_000_u64, "{config}");
    assert!(fs["device"]["fs_syncs_charged"].as_u64().unwrap() > 0, "{fs}");
    let per_txn = |key: &str| fs["per_txn"][key].as_f64().unwrap();
    assert!(per_txn("fs_syncs") > 0.0, "{fs}");
    assert!(per_txn("bytes_written") > 0.0, "pwrites count: {fs}");
    // Every charged sync waited its 2 µs at least (group commit: fewer syncs than commits).
    assert!(per_txn("delay_ns") >= 2_000.0 * per_txn("fs_syncs"), "{fs}");
    // io=nvm: the model is recorded but nothing is charged (its barrier is a fence).
    let nvm = full_row(shm, "nvm", &["--engine=wal", "--medium=shm"]);
    assert!(nvm["config"]["fs_sync_charged"].is_null(), "{nvm}");
    assert_eq!(nvm["device"]["fs_syncs_charged"], 0, "{nvm}");
    // Turned off, an io=fs row says it was not charged.
    let off = full_row(
        shm,
        "off",
        &[
            "--engine=wal",
            "--engine-opt=io=fs",
            "--medium=shm",
            "--fs-sync-latency=0",
            "--fs-write-bandwidth=0",
        ],
    );
    assert_eq!(off["config"]["fs_sync_charged"], false, "{off}");
    assert_eq!(off["device"]["fs_syncs_charged"], 0, "{off}");
}

/// A real disk's `fdatasync` is the real cost: an `io=fs` row on one is not charged the model.
#[test]
fn an_io_fs_row_on_a_real_disk_is_not_charged_twice() {
    let dir = std::env::temp_dir();
    if matches!(pmem::filesystem_name(&dir).as_deref(), Ok("tmpfs" | "ramfs")) {
        eprintln!("skipped: {} is tmpfs here", dir.display());
        return;
    }
    let disk = full_row(&dir, "disk", &["--engine=wal", "--engine-opt=io=fs", "--medium=file"]);
    assert_eq!(disk["config"]["fs_sync_charged"], false, "{disk}");
    assert_eq!(disk["device"]["fs_syncs_charged"], 0, "{disk}");
}

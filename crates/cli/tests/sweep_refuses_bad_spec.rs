//! `nvmdb sweep` refuses, before any run, a spec whose points the bench would refuse (issue 36:
//! nvwal-fig7's stock SQLite inherited `medium = "dram"` and failed every repetition).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn sweep(spec: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["sweep", "--quick", "--dry-run", "--out"])
        .arg(out)
        .arg(spec)
        .output()
        .expect("the nvmdb binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("nvmdb-sweep-refuses-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Regression (issue 36): a peer engine given the base's `medium = "dram"` is an error up front
/// that names the spec, the point and the refused flag.
#[test]
fn sweep_refuses_a_peer_engine_given_a_region_medium() {
    let dir = scratch("peer-medium");
    let spec = dir.join("bad.toml");
    std::fs::write(
        &spec,
        r#"[spec]
name = "bad-medium"
title = "a peer given a region medium"
source = "test"
description = "test"
reps = 3

[base]
workload = "mobibench"
medium = "dram"
txns = 10

[grid]
engine = ["sqlite-nvwal", "sqlite"]

[[plot]]
x = "engine"
y = "tps"

[[claim]]
id = "c"
text = "t"
source = "test"
kind = "value"
expected = 1.0
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = sweep(&spec, &dir.join("out"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad-medium") && stderr.contains("engine=sqlite"), "{stderr}");
    assert!(stderr.contains("--medium") && stderr.lines().count() == 1, "{stderr}");
    assert!(!dir.join("out").join("results.jsonl").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression (issue 36): the committed NVWAL Fig. 7 spec, stock SQLite included, passes the
/// bench's flag checks at both scales.
#[test]
fn nvwal_fig7_stock_sqlite_config_runs() {
    let dir = scratch("fig7");
    let spec =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/nvwal-fig7-latency.toml");
    for quick in [true, false] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nvmdb"));
        cmd.args(["sweep", "--dry-run", "--out"]).arg(dir.join("out")).arg(&spec);
        if quick {
            cmd.arg("--quick");
        }
        let out = cmd.output().expect("the nvmdb binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stock: Vec<&str> = stdout.lines().filter(|l| l.contains("config=sqlite ")).collect();
        assert_eq!(stock.len(), 4, "{stdout}");
        for line in stock {
            assert!(!line.contains("--medium") && !line.contains("--size"), "{line}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

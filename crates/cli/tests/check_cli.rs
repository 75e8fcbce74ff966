//! `nvmdb check`: reports a healthy region as ok (exit 0) without changing a byte of it, a
//! damaged one as DAMAGED (exit 1), and `--repair` rewrites a zeroed superblock from its copy.
//! Also: a region held by another process cannot be checked or benchmarked (the lock).
//! Would catch: a check that writes to the file, accepts damage, or ignores the region lock.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nvmdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(args).output().expect("the nvmdb binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("nvmdb-check-{}-{name}.region", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn loaded(path: &Path) {
    let p = path.to_str().unwrap();
    let out = nvmdb(&[
        "bench",
        "--engine",
        "inplace",
        "--workload",
        "tpcb",
        "--workload-opt",
        "accounts_per_branch=500",
        "--txns",
        "300",
        "--medium",
        "file",
        "--path",
        p,
        "--keep",
        "--size",
        "16MiB",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn check(path: &Path, extra: &[&str]) -> (Option<i32>, serde_json::Value) {
    let mut args = vec!["check", "--path", path.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = nvmdb(&args);
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), json)
}

#[test]
fn check_reports_without_writing_and_repair_fixes_page_zero() {
    let path = scratch("ok");
    loaded(&path);
    let before = std::fs::read(&path).unwrap();
    let (code, json) = check(&path, &[]);
    assert_eq!(code, Some(0), "{json}");
    assert_eq!(json["ok"], true);
    let tables = json["check"]["tables"].as_array().unwrap();
    let accounts = tables.iter().find(|t| t["name"] == "tpcb_account").unwrap();
    assert_eq!(accounts["rows"], 500);
    assert_eq!(std::fs::read(&path).unwrap(), before, "check must not change the file");

    // Zero the superblock: still readable from its copy; --repair writes page 0 back.
    let mut bytes = before.clone();
    bytes[..256].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let (code, json) = check(&path, &[]);
    assert_eq!(code, Some(0), "{json}");
    assert!(json["inspection"]["verdict"].as_str().unwrap().contains("rewritten from its copy"));
    assert_eq!(std::fs::read(&path).unwrap()[..256], [0u8; 256], "not without --repair");
    let (code, _) = check(&path, &["--repair"]);
    assert_eq!(code, Some(0));
    assert_eq!(std::fs::read(&path).unwrap()[..256], before[..256], "page 0 repaired");

    // Damage the catalog page: DAMAGED, exit 1.
    bytes = before;
    bytes[2 * 8192 + 64..2 * 8192 + 80].fill(0xAB);
    std::fs::write(&path, &bytes).unwrap();
    let (code, json) = check(&path, &[]);
    assert_eq!(code, Some(1), "{json}");
    assert!(json["error"].as_str().unwrap().contains("catalog"), "{json}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_populated_region_with_both_superblocks_zeroed_is_not_reformatted() {
    let path = scratch("zeroed");
    loaded(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..2 * 8192].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let p = path.to_str().unwrap();
    let out = nvmdb(&[
        "bench",
        "--engine",
        "inplace",
        "--workload",
        "tpcb",
        "--txns",
        "10",
        "--medium",
        "file",
        "--path",
        p,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to format"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing written");
    std::fs::remove_file(&path).unwrap();
}

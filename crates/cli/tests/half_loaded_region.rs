//! A load interrupted by SIGKILL leaves a region that `nvmdb check` reports as half-loaded (not
//! damaged) and that `nvmdb bench` refuses to attach to with that reason; a finished load is
//! marked complete. Would catch: half-loaded data run and checked as if it were a database.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn nvmdb() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
}

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_load_killed_midway_is_reported_as_half_loaded() {
    let path =
        Scratch(PathBuf::from(format!("/dev/shm/nvmdb-half-loaded-{}.region", std::process::id())));
    let p = path.0.to_str().unwrap();
    let bench = ["bench", "--engine", "inplace", "--workload", "ycsb", "--records", "2000000"];
    let mut child = nvmdb()
        .args(bench)
        .args(["--medium", "shm", "--path", p, "--keep", "--size", "1GiB", "--txns", "10"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Loading 2M records takes tens of seconds. Kill it once the region is formatted (its
    // superblock magic published) and half a second more has loaded some rows: a fixed delay
    // fell before the format on a machine loaded 20x.
    let formatted = || {
        let mut magic = [0u8; 8];
        std::fs::File::open(&path.0)
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
            .is_ok_and(|()| &magic == b"NVMDB\0sb")
    };
    let start = std::time::Instant::now();
    while !formatted() {
        assert!(start.elapsed() < Duration::from_secs(120), "the loader never formatted");
        assert!(child.try_wait().unwrap().is_none(), "the loader exited before formatting");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();

    let out = nvmdb().args(["check", "--path", p, "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert!(json["load"].as_str().unwrap().starts_with("incomplete"), "{json}");

    let out = nvmdb().args(bench).args(["--path", p, "--txns", "10"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("half-loaded"), "{stderr}");
}

#[test]
fn a_finished_load_is_marked_complete() {
    let path =
        Scratch(PathBuf::from(format!("/dev/shm/nvmdb-full-loaded-{}.region", std::process::id())));
    let p = path.0.to_str().unwrap();
    let out = nvmdb()
        .args(["bench", "--engine", "inplace", "--workload", "tpcb", "--txns", "10"])
        .args(["--workload-opt", "accounts_per_branch=500", "--medium", "shm", "--path", p])
        .args(["--keep", "--size", "16MiB"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = nvmdb().args(["check", "--path", p, "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["load"], "complete (tpcb)", "{json}");
}

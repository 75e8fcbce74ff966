//! Ctrl-C in `nvmdb bench`: the first SIGINT ends a long run early with its results, the
//! checker's verdict and the temporary region file removed, and exits 130 (the run was cut
//! short, so it is not a success); a second exits at once (130), also
//! without leaving the file. Would catch: an interrupted benchmark that loses everything it
//! measured, or leaves a region file of hundreds of MiB behind in /dev/shm.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A `bench` child that would run for a minute, on a region file at `path` it creates.
fn start(path: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["bench", "--engine=inplace", "--workload=tpcb", "--size=64MiB"])
        .args(["--workload-opt=accounts_per_branch=1000", "--warmup=0", "--duration=60"])
        .arg(format!("--path={}", path.display()))
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the nvmdb binary runs")
}

fn temp_region(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvmdb-sigint-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("r.region")
}

/// Waits until the child has created its region and run for a moment.
fn wait_running(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(30), "the region never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
}

fn sigint(child: &Child) {
    let status = Command::new("kill").args(["-s", "INT", &child.id().to_string()]).status();
    assert!(status.expect("kill runs").success());
}

/// The child's output, killing it if it does not end within 30 s.
fn finish(mut child: Child) -> Output {
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("bench did not end after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

#[test]
fn first_sigint_reports_results_so_far_and_removes_the_region() {
    let path = temp_region("once");
    let child = start(&path);
    wait_running(&path);
    let asked = Instant::now();
    sigint(&child);
    let out = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(asked.elapsed() < Duration::from_secs(20), "it took {:?}", asked.elapsed());
    // Regression (issue 39): a run cut short exited 0, so a script took it for the whole run.
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert!(json["committed"].as_u64().unwrap_or(0) > 0, "{json}");
    assert_eq!(json["checker"], "pass", "{json}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!path.exists(), "the temporary region file is left behind");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn second_sigint_exits_at_once_and_removes_the_region() {
    let path = temp_region("twice");
    let child = start(&path);
    wait_running(&path);
    sigint(&child);
    sigint(&child);
    let out = finish(child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The first SIGINT may already have ended the run cleanly when the second arrives.
    assert!(matches!(out.status.code(), Some(130) | Some(0)), "{:?}: {stderr}", out.status);
    assert!(!path.exists(), "the temporary region file is left behind");
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

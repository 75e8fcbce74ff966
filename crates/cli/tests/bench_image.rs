//! `nvmdb bench --image`: the first run on `--medium dram` loads, saves the cleanly shut-down
//! database and runs on a copy of it; later runs start from the image without loading and see
//! the same database (the workload's checker passes on every one). Misuse and a damaged image
//! are one-line errors (exit 2), never a panic or a changed image.

use std::path::Path;
use std::process::{Command, Output};

fn bench(image: &Path, extra: &[&str]) -> Output {
    bench_on("dram", image, extra)
}

fn bench_on(medium: &str, image: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["bench", "--engine", "inplace", "--medium", medium, "--size", "64MiB"])
        .args(["--workload", "tpcb", "--scale", "1", "--threads", "2", "--txns", "300"])
        .args(["--image", &image.display().to_string(), "--json"])
        .args(extra)
        .output()
        .expect("the nvmdb binary runs")
}

/// A fresh scratch directory, removed when dropped.
struct Scratch(std::path::PathBuf);
impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("nvmdb-image-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn json(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status.code());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn failure(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn the_first_run_builds_the_image_and_the_next_runs_start_from_it() {
    let dir = Scratch::new("build");
    let image = dir.path().join("tpcb.img");
    let first = json(&bench(&image, &[]));
    assert_eq!(first["config"]["image_built"], true);
    assert_eq!(first["checker"], "pass");
    assert!(first["recovery_ms"].is_number(), "the run reopens the saved image: {first}");
    let saved = std::fs::read(&image).unwrap();
    assert_eq!(saved.len(), 64 << 20);
    for seed in ["1", "2"] {
        let next = json(&bench(&image, &["--seed", seed, "--persist-latency", "1us"]));
        assert_eq!(next["config"]["image_built"], false);
        assert_eq!(next["checker"], "pass", "{next}");
        assert_eq!(next["committed"], 600);
        // Loading is attaching now: milliseconds, not the load.
        assert_eq!(next["config"]["image"], image.display().to_string());
    }
    assert!(std::fs::read(&image).unwrap() == saved, "runs never write their image");
}

#[test]
fn misuse_and_damaged_images_are_one_line_errors() {
    let dir = Scratch::new("misuse");
    let image = dir.path().join("x.img");
    let shm = failure(&bench_on("shm", &image, &[]));
    assert!(shm.contains("--image") && shm.contains("dram"), "{shm}");
    assert!(!image.exists());
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["bench", "--engine", "sqlite", "--image", "/tmp/none.img", "--txns", "10"])
        .output()
        .unwrap();
    failure(&out);
    let as_dir = failure(&bench(dir.path(), &[]));
    assert!(as_dir.contains("directory"), "{as_dir}");
    // Not a region: a clear error naming the image, and the file is left as it was.
    let garbage = vec![0x5a_u8; 1 << 20];
    std::fs::write(&image, &garbage).unwrap();
    let damaged = failure(&bench(&image, &[]));
    assert!(damaged.contains("x.img") && damaged.contains("not an nvmdb region"), "{damaged}");
    assert_eq!(damaged.lines().count(), 1, "{damaged}");
    assert_eq!(std::fs::read(&image).unwrap(), garbage);
    std::fs::write(&image, b"").unwrap();
    let empty = failure(&bench(&image, &[]));
    assert!(empty.contains("empty"), "{empty}");
}

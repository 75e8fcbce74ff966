//! Catches two opens of one region file both succeeding (and damaging it): in one process, in two
//! processes, or a lock that outlives its region or its killed process, or a failed open that
//! changes the held file.

use pmem::{is_dax, Medium, PmemError, Region, RegionOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set in the environment of a child that holds a region (see [`child_holds_region`]).
const CHILD_ENV: &str = "NVMDB_REGION_LOCK_CHILD";
/// Longest a child may take to open its region.
const CHILD_START_SECS: u64 = 60;
/// Longest a child holds its region before giving up waiting to be killed.
const CHILD_HOLD_SECS: u64 = 120;

/// A fresh directory on tmpfs, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = PathBuf::from(format!("/dev/shm/nvmdb-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn options(medium: Medium, path: &Path, size_bytes: u64) -> RegionOptions {
    RegionOptions::new(medium, size_bytes).with_path(path)
}

/// Opens, expecting `Locked`; returns the holder and the one-line message.
fn open_locked(options: &RegionOptions) -> (Option<u32>, String) {
    let err = match Region::open(options) {
        Ok(_) => panic!("a second open of {:?} succeeded", options.path),
        Err(e) => e,
    };
    let message = err.to_string();
    assert!(!message.contains('\n'), "multi-line error: {message:?}");
    let path = options.path.as_ref().unwrap().display().to_string();
    assert!(message.contains(&path), "{message:?} does not name {path}");
    assert!(message.contains("use another --path"), "{message:?} says nothing to do");
    match err {
        PmemError::Locked { holder, .. } => (holder, message),
        other => panic!("expected Locked, got {other:?}"),
    }
}

#[test]
fn second_open_in_one_process_is_locked_until_the_last_clone_drops() {
    let dir = Scratch::new("same");
    let path = dir.path("r.region");
    for medium in [Medium::Shm, Medium::File] {
        let first = Region::open(&options(medium, &path, 8192)).unwrap();
        first.write_u64(0, 7);
        let clone = first.clone();
        drop(first);
        // Opened at size 0 (its size) and at a larger size: neither may change the held file.
        for size_bytes in [0, 1 << 20] {
            let (holder, message) = open_locked(&options(medium, &path, size_bytes));
            assert_eq!(holder, Some(std::process::id()));
            assert!(message.contains("already open in this process"), "{message}");
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192, "a failed open grew the file");
        assert_eq!(clone.read_u64(0), 7);
        drop(clone);
        let second = Region::open(&options(medium, &path, 0)).unwrap();
        assert_eq!(second.read_u64(0), 7);
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn racing_creator_that_loses_leaves_the_new_file_alone() {
    let dir = Scratch::new("create");
    let path = dir.path("new.region");
    let first = Region::open(&options(Medium::File, &path, 4096)).unwrap();
    first.write_u64(8, 9);
    // The second opener asks to create too: the file exists now, so it only fails to lock.
    open_locked(&options(Medium::File, &path, 4096));
    assert!(path.exists(), "the losing opener removed the holder's file");
    assert_eq!(first.read_u64(8), 9);
}

#[test]
fn is_dax_neither_takes_nor_breaks_the_lock() {
    let dir = Scratch::new("isdax");
    let path = dir.path("r.region");
    let held = Region::open(&options(Medium::File, &path, 4096)).unwrap();
    assert!(!is_dax(&path).unwrap());
    open_locked(&options(Medium::File, &path, 0));
    drop(held);
    // And a probe leaves nothing held behind it.
    assert!(!is_dax(&path).unwrap());
    Region::open(&options(Medium::File, &path, 0)).unwrap();
}

#[test]
fn private_shm_and_anonymous_regions_take_no_lock() {
    let a = Region::open(&RegionOptions::new(Medium::Shm, 4096)).unwrap();
    let b = Region::open(&RegionOptions::new(Medium::Shm, 4096)).unwrap();
    let c = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    let d = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    assert!(a.path().is_none() && b.path().is_none() && c.path().is_none() && d.path().is_none());
}

/// Not a test of its own: run by [`another_process_holds_the_region_until_killed`] in a child
/// process (this test binary, re-run with [`CHILD_ENV`] naming the region file). Opens the region,
/// says `ready` and waits to be killed.
#[test]
fn child_holds_region() {
    let Some(path) = std::env::var_os(CHILD_ENV) else { return };
    let region = Region::open(&options(Medium::File, Path::new(&path), 4096)).unwrap();
    region.write_u64(0, 42);
    println!("ready");
    std::thread::sleep(Duration::from_secs(CHILD_HOLD_SECS));
    drop(region);
}

#[test]
fn another_process_holds_the_region_until_killed() {
    let dir = Scratch::new("child");
    let path = dir.path("r.region");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holds_region", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // libtest prints "test child_holds_region ... " before the test's own output.
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ready = stdout.lines().any(|line| line.is_ok_and(|l| l.ends_with("ready")));
        let _ = ready_tx.send(ready);
    });
    if ready_rx.recv_timeout(Duration::from_secs(CHILD_START_SECS)) != Ok(true) {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child did not open the region within {CHILD_START_SECS} s");
    }

    let (holder, message) = open_locked(&options(Medium::File, &path, 0));
    match holder {
        Some(pid) => {
            assert_eq!(pid, child.id(), "{message}");
            assert!(message.contains(&format!("held by process {pid}")), "{message}");
        }
        // Where /proc cannot be read the holder is unknown, and the message says so.
        None => assert!(message.contains("another open file description"), "{message}"),
    }

    // SIGKILL: no destructor runs; the kernel must release the lock with the process.
    child.kill().unwrap();
    child.wait().unwrap();
    let region = Region::open(&options(Medium::File, &path, 0)).unwrap();
    assert_eq!(region.read_u64(0), 42);
}

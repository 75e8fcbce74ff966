//! The `sqlite-nvwal` engine end to end: the conformance suite (one writer, readers never
//! wait, through the VFS's in-process locks and wal-index), reopening a region after shutdown
//! and after a crash image, and `crashtest` campaigns on the `sim` medium that pass for `ls`,
//! `e` and `cs` and catch each fault option. Would catch: SQLite's recovery failing on a
//! rebuilt WAL, a lock the VFS grants twice, a fault the crash tester cannot see.

use bench::crash::{self, CrashOptions, Observer, SimTarget, Summary, ViolationKind};
use pmem::{Medium, Region, RegionOptions};
use sqlite_nvwal::engine::open_with;
use std::collections::BTreeMap;
use storage::conformance::{run_all, Writers};
use storage::Engine;
use workloads::mobibench::{MobiOp, Mobibench, MobibenchConfig};
use workloads::Workload;

fn extra(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn dram(bytes: u64) -> Region {
    Region::open(&RegionOptions::new(Medium::Dram, bytes)).expect("region")
}

#[test]
fn conformance() {
    run_all(&|| Box::new(open_with(dram(16 << 20), 2, &extra(&[])).expect("open")), Writers::One);
}

#[test]
fn conformance_cs_per_frame_no_diff() {
    // One 8 KiB block per frame: the log must hold SQLite's 1000 frames between checkpoints.
    let opts = extra(&[("nvwal", "cs"), ("heap", "per-frame"), ("diff", "off")]);
    run_all(&|| Box::new(open_with(dram(48 << 20), 2, &opts).expect("open")), Writers::One);
}

#[test]
fn bad_options_are_clear_errors() {
    for (k, v) in [("nvwal", "x"), ("diff", "maybe"), ("heap", "kernel"), ("block_bytes", "100")] {
        let err = open_with(dram(16 << 20), 1, &extra(&[(k, v)])).expect_err("rejected");
        assert!(err.to_string().contains(k), "{err}");
    }
    let err = open_with(dram(1 << 20), 1, &extra(&[])).expect_err("too small");
    assert!(err.to_string().contains("region"), "{err}");
}

#[test]
fn data_survives_shutdown_and_a_crash_image() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).expect("sim");
    let mut cfg = MobibenchConfig::new(MobiOp::Insert);
    cfg.ops_per_txn = 3;
    let w = Mobibench::new(cfg).expect("workload");
    {
        let e = open_with(region.clone(), 1, &extra(&[])).expect("open");
        assert!(e.recovery_report().formatted);
        w.load(&e, &|_, _| {}).expect("load");
        let mut worker = w.worker(0, 1);
        for _ in 0..50 {
            worker.run_one(&e).expect("txn");
        }
        // No shutdown: the crash image is what persisted so far.
        let image = region.crash_image(pmem::CrashPolicy::Persisted, 3).expect("image");
        let crashed = Region::from_image(&image, &RegionOptions::new(Medium::Sim, 16 << 20))
            .expect("image region");
        let r = open_with(crashed, 1, &extra(&[])).expect("recover");
        let again = Mobibench::new(w.config().clone()).expect("workload");
        again.attach(&r).expect("attach");
        again.check(&r).expect("consistent");
        r.check_integrity().expect("integrity");
        assert_eq!(r.check_integrity().expect("integrity").rows, 150, "every commit kept");
        e.shutdown().expect("shutdown");
    }
    let e = open_with(region, 1, &extra(&[])).expect("reopen");
    assert!(!e.recovery_report().formatted);
    assert_eq!(e.check_integrity().expect("integrity").rows, 150);
}

struct Quiet;
impl Observer for Quiet {}

fn campaign(opts: &[(&str, &str)], crashes: u64) -> Summary {
    let extra = extra(opts);
    let open = |region: Region| -> Result<Box<dyn Engine>, String> {
        open_with(region, 1, &extra)
            .map(|e| Box::new(e) as Box<dyn Engine>)
            .map_err(|e| e.to_string())
    };
    let make = || -> Box<dyn Workload> {
        let mut cfg = MobibenchConfig::new(MobiOp::Insert);
        cfg.ops_per_txn = 4;
        Box::new(Mobibench::new(cfg).expect("workload"))
    };
    let target = SimTarget {
        open: &open,
        workload: &make,
        region: RegionOptions::new(Medium::Sim, 16 << 20),
        image_check: None,
    };
    let options = CrashOptions {
        crashes,
        seed: 5,
        txns_per_thread: 30,
        jobs: 6,
        history: 40,
        ages: 2,
        // `cs` acknowledges asynchronously: a short FIFO makes the driver wait for syncs.
        max_pending: 4,
        ..CrashOptions::default()
    };
    crash::run_sim(&target, &options, &Quiet).expect("campaign runs")
}

#[test]
fn crashtest_passes_for_each_sync_mode() {
    for mode in ["ls", "e", "cs"] {
        let s = campaign(&[("nvwal", mode)], 18);
        assert_eq!(s.violations, 0, "{mode}: {:?}", s.kept.first());
        assert!(s.crashes >= 15, "{mode}: {} crash points reached", s.crashes);
        assert!(s.acks_verified > 0, "{mode}: no acks verified");
    }
}

/// Each planted persistence mistake is caught: a commit mark never flushed loses acknowledged
/// commits (durability); records not flushed before their mark are, since the record checksums
/// of format version 3, found at recovery as committed records that fail their checksum
/// (recovery refuses the region; before, they were lost commits).
#[test]
fn crashtest_catches_each_fault() {
    for (fault, kind) in [
        ("skip-commit-persist", ViolationKind::Durability),
        ("skip-frame-flush", ViolationKind::Recovery),
    ] {
        let s = campaign(&[("fault", fault)], 24);
        let caught = s.violations_by_kind.get(&kind).copied().unwrap_or(0);
        assert!(caught > 0, "fault {fault} not caught as {kind:?}: {:?}", s.violations_by_kind);
    }
}

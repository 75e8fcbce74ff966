//! `lsm` recovery: NVM-Log undoes a commit cut at any of its barriers (all or nothing); a crash
//! at every barrier of a memtable flush and its compactions loses no acknowledged commit and
//! leaks no run space; compaction bounds the runs and reclaims their space; Log (`io=fs`)
//! replays its log into a new memtable. Would catch: links persisted before their nodes, an
//! in-flight commit left linked after a crash, a manifest naming an unpersisted run, merged runs
//! dropped before their merge is published, run space leaked or reused across a crash.

use engines::lsm::Lsm;
use engines::wal::Io;
use engines::EngineOptions;
use pmem::{CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

const ROW: usize = 64;

fn options() -> EngineOptions {
    let mut o = EngineOptions { workers: 1, ..Default::default() };
    o.lsm.memtable_bytes = 64 << 10;
    o
}

fn reopen(image: &[u8]) -> (Region, Lsm) {
    let region = Region::from_image(image, &RegionOptions::default()).expect("image");
    let engine = Lsm::open(region.clone(), &options()).expect("recovers");
    (region, engine)
}

fn row(v: u64) -> Vec<u8> {
    let mut r = vec![0u8; ROW];
    r[..8].copy_from_slice(&v.to_le_bytes());
    r[8..16].copy_from_slice(&(!v).to_le_bytes());
    r
}

fn value(e: &dyn Engine, key: u64) -> Option<u64> {
    let t = e.table("t").expect("table");
    let mut txn = e.begin(0).expect("begin");
    let mut out = Vec::new();
    let found = txn.read(t, key, &mut out).expect("read");
    txn.commit().expect("commit");
    found.then(|| {
        let v = u64::from_le_bytes(out[..8].try_into().expect("8 bytes"));
        assert_eq!(out[8..16], (!v).to_le_bytes(), "row of key {key} is torn");
        v
    })
}

/// Writes `value` to `keys` in one transaction (insert or update).
fn put(e: &dyn Engine, keys: impl Iterator<Item = u64>, value: u64) {
    let t = e.table("t").expect("table");
    let mut txn = e.begin(0).expect("begin");
    for key in keys {
        if !txn.update(t, key, 0, &row(value)).expect("update") {
            txn.insert(t, key, &row(value)).expect("insert");
        }
    }
    txn.commit().expect("commit");
}

fn fresh() -> (Region, Lsm) {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).expect("region");
    let e = Lsm::open(region.clone(), &options()).expect("open");
    e.create_table(&TableSpec { name: "t".into(), row_bytes: ROW as u32, expected_rows: 100 })
        .expect("table");
    (region, e)
}

fn fences(region: &Region) -> u64 {
    region.sim().expect("sim").event_counts().1
}

#[test]
fn nvm_log_commit_cut_at_each_barrier_is_all_or_nothing() {
    for cut in 1..=3u64 {
        for policy in [CrashPolicy::Persisted, CrashPolicy::Evict] {
            let (region, e) = fresh();
            put(&e, 0..20, 1);
            let sim = region.sim().expect("sim");
            sim.arm(CrashPoint { event: pmem::CrashEvent::Fence, count: cut }, policy, cut);
            put(&e, 0..20, 2);
            let image = sim.take_image().expect("the cut fell inside the commit");
            let (_, r) = reopen(&image);
            let got: Vec<_> = (0..20).map(|k| value(&r, k)).collect();
            assert!(
                got.iter().all(|v| *v == Some(1)) || got.iter().all(|v| *v == Some(2)),
                "cut before fence {cut} ({policy:?}): {got:?}"
            );
            if cut == 3 && policy == CrashPolicy::Persisted {
                // The links were durable, the commit mark was not: recovery unlinked them.
                assert_eq!(got[0], Some(1));
                assert_eq!(r.recovery_report().txns_rolled_back, 1, "{:?}", r.recovery_report());
            }
            r.check_integrity().expect("integrity");
        }
    }
}

#[test]
fn compaction_bounds_runs_and_reclaims_space() {
    let (_, e) = fresh();
    let mut footprint_early = 0;
    for round in 0..400u64 {
        put(&e, (0..50).map(|i| (round * 7 + i * 13) % 600), round);
        if round == 100 {
            footprint_early = e.footprint_bytes().expect("footprint");
        }
    }
    let activity: std::collections::BTreeMap<_, _> = e.activity().into_iter().collect();
    assert!(activity["memtable_flushes"] > 20, "{activity:?}");
    assert!(activity["compactions"] > 10, "{activity:?}");
    let report = e.check_integrity().expect("integrity");
    assert_eq!(report.rows, 600);
    // Rewriting the same 600 keys: the runs' space is reused, not accumulated.
    let footprint = e.footprint_bytes().expect("footprint");
    assert!(footprint < 2 * footprint_early, "{footprint} vs {footprint_early} at round 100");
    // Delete everything: tombstones, then merges that reach the oldest run drop them.
    let t = e.table("t").expect("table");
    for chunk in 0..12u64 {
        let mut txn = e.begin(0).expect("begin");
        for key in chunk * 50..(chunk + 1) * 50 {
            assert!(txn.delete(t, key).expect("delete"));
        }
        txn.commit().expect("commit");
    }
    assert_eq!(e.check_integrity().expect("integrity").rows, 0);
}

#[test]
fn a_crash_at_every_barrier_of_a_flush_and_compaction_loses_nothing() {
    // Find a commit that flushes the memtable and compacts (many barriers), then cut at each.
    let (region, e) = fresh();
    let mut flushing_round = None;
    let compactions = |e: &Lsm| e.activity().into_iter().find(|a| a.0 == "compactions").unwrap().1;
    for round in 0..200u64 {
        let before = (fences(&region), compactions(&e));
        put(&e, (0..40).map(|i| (round * 11 + i * 17) % 500), round);
        if compactions(&e) > before.1 && round > 20 {
            flushing_round = Some((round, fences(&region) - before.0));
            break;
        }
    }
    let (target, barriers) = flushing_round.expect("a commit that flushes and compacts");
    for cut in 1..=barriers {
        let (region, e) = fresh();
        let mut last = std::collections::HashMap::new();
        for round in 0..target {
            let keys: Vec<u64> = (0..40).map(|i| (round * 11 + i * 17) % 500).collect();
            put(&e, keys.iter().copied(), round);
            for k in keys {
                last.insert(k, round);
            }
        }
        let sim = region.sim().expect("sim");
        sim.arm(CrashPoint { event: pmem::CrashEvent::Fence, count: cut }, CrashPolicy::Evict, cut);
        let keys: Vec<u64> = (0..40).map(|i| (target * 11 + i * 17) % 500).collect();
        put(&e, keys.iter().copied(), target);
        let image = sim.take_image().expect("cut inside the flushing commit");
        let (again, r) = reopen(&image);
        let committed = keys.iter().all(|&k| value(&r, k) == Some(target));
        for (&k, &v) in &last {
            let want = if committed && keys.contains(&k) { target } else { v };
            assert_eq!(value(&r, k), Some(want), "cut {cut}/{barriers}: key {k}");
        }
        r.check_integrity().unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        // A crash right after recovery recovers the same state.
        let image = again.crash_image(CrashPolicy::Persisted, 1).expect("image");
        let (_, twice) = reopen(&image);
        twice.check_integrity().expect("integrity after a second crash");
    }
}

#[test]
fn log_through_the_file_system_replays_its_log_into_a_new_memtable() {
    let dir = std::env::temp_dir().join(format!("nvmdb-lsm-fs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("region");
    let _ = std::fs::remove_file(&path);
    let mut o = EngineOptions { io: Io::Fs, ..options() };
    o.lsm.memtable_bytes = 16 << 10;
    let region_options = RegionOptions::new(Medium::File, 16 << 20).with_path(&path);
    {
        let e = Lsm::open(Region::open(&region_options).expect("region"), &o).expect("open");
        e.create_table(&TableSpec { name: "t".into(), row_bytes: ROW as u32, expected_rows: 1 })
            .expect("table");
        for round in 0..300u64 {
            put(&e, (0..20).map(|i| (round + i * 7) % 400), round);
        }
        let activity: std::collections::BTreeMap<_, _> = e.activity().into_iter().collect();
        assert!(activity["memtable_flushes"] > 2, "{activity:?}");
    }
    let e = Lsm::open(Region::open(&region_options).expect("region"), &o).expect("reopen");
    let report = e.recovery_report();
    assert!(report.records_applied > 0, "the log since the last flush is replayed: {report:?}");
    for key in 0..400u64 {
        let last = (0..300u64).filter(|r| (0..20).any(|i| (r + i * 7) % 400 == key)).max();
        assert_eq!(value(&e, key), last, "key {key}");
    }
    e.check_integrity().expect("integrity");
    // Opening an fs region as nvm is a clear error, not a misread.
    drop(e);
    let wrong = Lsm::open(Region::open(&region_options).expect("region"), &options());
    assert!(matches!(wrong, Err(storage::DbError::Invalid(_))), "{:?}", wrong.err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_full_region_is_a_clean_error() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 2 << 20)).expect("region");
    let e = Lsm::open(region, &options()).expect("open");
    let t = e
        .create_table(&TableSpec { name: "t".into(), row_bytes: 1000, expected_rows: 1 })
        .expect("table");
    let mut full = None;
    for key in 0..100_000u64 {
        let mut txn = e.begin(0).expect("begin");
        txn.insert(t, key, &[1u8; 1000]).expect("insert");
        if let Err(err) = txn.commit() {
            full = Some((key, err));
            break;
        }
    }
    let (key, err) = full.expect("the region fills");
    assert!(matches!(err, storage::DbError::RegionFull(_)), "{err}");
    // What was committed is still there and readable.
    assert!(key > 100);
    let mut txn = e.begin(0).expect("begin");
    let mut out = Vec::new();
    assert!(txn.read(t, key - 1, &mut out).expect("read"));
    drop(txn);
    e.check_integrity().expect("integrity");
}

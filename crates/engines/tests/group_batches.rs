//! NVRAM Group Commit's batches, checked on `sim` crash images: a commit is durable only when
//! its batch is; a transaction still running when its batch persists is rolled back by recovery
//! (its undo log went to NVRAM with the batch); committed batches survive; bad options are
//! errors. Would catch: tokens acknowledged before their batch, long transactions that survive
//! a crash half-applied, and a staging area that can outgrow its batch log.

use engines::{group::Group, EngineOptions};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use storage::{CommitToken, DbError, Engine, TableSpec};

fn options() -> EngineOptions {
    EngineOptions {
        workers: 2,
        node_capacity: 8,
        group: engines::group::Options {
            // Long: these tests close batches themselves.
            batch_period_ms: 60_000,
            staging_bytes: 4 << 20,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn open(image: Option<&[u8]>) -> (Region, Group) {
    let region = match image {
        Some(bytes) => Region::from_image(bytes, &RegionOptions::default()).unwrap(),
        None => Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).unwrap(),
    };
    let engine = Group::open(region.clone(), &options()).unwrap();
    (region, engine)
}

fn row(v: u8) -> Vec<u8> {
    vec![v; 32]
}

fn value(e: &Group, key: u64) -> Option<u8> {
    let t = e.table("t").unwrap();
    let mut txn = e.begin(0).unwrap();
    let mut out = Vec::new();
    let found = txn.read(t, key, &mut out).unwrap();
    txn.commit().unwrap();
    found.then(|| out[0])
}

fn crash(region: &Region) -> Vec<u8> {
    region.crash_image(CrashPolicy::Persisted, 7).unwrap()
}

#[test]
fn a_commit_is_durable_with_its_batch_and_not_before() {
    let (region, e) = open(None);
    let spec = TableSpec { name: "t".into(), row_bytes: 32, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    let mut txn = e.begin(0).unwrap();
    txn.insert(t, 1, &row(1)).unwrap();
    let token = txn.commit().unwrap();
    assert_ne!(token, CommitToken::DURABLE);
    assert!(!e.is_durable(token), "durable before its batch persisted");
    // A crash now loses the commit (it was never acknowledged).
    let (_, lost) = open(Some(&crash(&region)));
    assert_eq!(lost.table("t"), None, "the batch that created the table never persisted");

    e.flush_batch().unwrap();
    assert!(e.is_durable(token));
    e.wait_durable(token).unwrap();
    let (_, kept) = open(Some(&crash(&region)));
    assert_eq!(value(&kept, 1), Some(1));
}

#[test]
fn a_transaction_spanning_batches_is_rolled_back_after_a_crash() {
    let (region, e) = open(None);
    let spec = TableSpec { name: "t".into(), row_bytes: 32, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    let mut load = e.begin(0).unwrap();
    for k in 0..50 {
        load.insert(t, k, &row(1)).unwrap();
    }
    load.commit().unwrap();
    e.flush_batch().unwrap();

    // A long transaction: some updates, a batch persists under it, more updates, then commit
    // of another transaction and a second batch while the long one is still open.
    let mut long = e.begin(0).unwrap();
    for k in 0..20 {
        assert!(long.update(t, k, 0, &[9; 8]).unwrap());
    }
    long.insert(t, 1000, &row(9)).unwrap();
    e.flush_batch().unwrap();
    for k in 20..40 {
        assert!(long.update(t, k, 0, &[9; 8]).unwrap());
    }
    let mut other = e.begin(1).unwrap();
    assert!(other.update(t, 45, 0, &[5; 8]).unwrap());
    let token = other.commit().unwrap();
    e.flush_batch().unwrap();
    assert!(e.is_durable(token));

    let image = crash(&region);
    let (_, recovered) = open(Some(&image));
    let report = recovered.recovery_report();
    assert_eq!(report.txns_rolled_back, 1, "{report:?}");
    for k in 0..40 {
        assert_eq!(value(&recovered, k), Some(1), "key {k}: the long transaction rolled back");
    }
    assert_eq!(value(&recovered, 1000), None);
    assert_eq!(value(&recovered, 45), Some(5), "the other transaction's commit survived");
    recovered.check_integrity().unwrap();

    // The long transaction itself can still commit in the live engine, in the next batch.
    let token = long.commit().unwrap();
    e.flush_batch().unwrap();
    e.wait_durable(token).unwrap();
    let (_, after) = open(Some(&crash(&region)));
    assert_eq!(value(&after, 30), Some(9));
    assert_eq!(value(&after, 1000), Some(9));
}

#[test]
fn batch_txns_closes_batches_by_count() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).unwrap();
    let e = Group::open(
        region,
        &EngineOptions {
            group: engines::group::Options { batch_txns: 3, ..options().group },
            ..options()
        },
    )
    .unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 32, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    let mut tokens = Vec::new();
    for k in 0..6 {
        let mut txn = e.begin(0).unwrap();
        txn.insert(t, k, &row(1)).unwrap();
        tokens.push(txn.commit().unwrap());
    }
    assert!(tokens.iter().all(|t| e.is_durable(*t)), "every third commit closes the batch");
    assert_eq!(tokens[0], tokens[2]);
    assert_ne!(tokens[2], tokens[3]);
}

#[test]
fn impossible_options_are_clear_errors() {
    let bad = [
        EngineOptions {
            group: engines::group::Options { batch_period_ms: 0, ..options().group },
            ..options()
        },
        EngineOptions {
            group: engines::group::Options { persist_threads: 65, ..options().group },
            ..options()
        },
        EngineOptions {
            group: engines::group::Options { staging_bytes: 100, ..options().group },
            ..options()
        },
        EngineOptions {
            group: engines::group::Options { staging_bytes: 64 << 10, ..options().group },
            ..options()
        },
    ];
    for o in bad {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).unwrap();
        match Group::open(region, &o) {
            Err(DbError::Invalid(why)) => assert!(why.contains("engine group"), "{why}"),
            Err(e) => panic!("{o:?}: {e}"),
            Ok(_) => panic!("{o:?} accepted"),
        }
    }
    // A region too small for its batch log and a database.
    let region = Region::open(&RegionOptions::new(Medium::Dram, 4 << 20)).unwrap();
    assert!(matches!(Group::open(region, &options()), Err(DbError::RegionFull(_))));
}

#[test]
fn a_region_of_another_engine_is_refused() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).unwrap();
    drop(engines::inplace::InPlace::open(region.clone(), &options()).unwrap());
    let image = region.snapshot();
    let again = Region::from_image(&image, &RegionOptions::default()).unwrap();
    match Group::open(again, &options()) {
        Err(DbError::Format(why)) => assert!(why.contains("inplace"), "{why}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened an inplace region as group"),
    }
}

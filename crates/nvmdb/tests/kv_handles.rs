//! Transaction handles held across calls (issue 39): `Db::begin_write` / `begin_read`. These
//! tests would catch a handle whose drop or abort leaves its writes, a commit that skips the
//! closures' commit path (durability wait, conflict handling), a doomed handle that commits
//! part of its work, a thread that waits forever for a slot it holds itself, and a committed
//! handle that recovery loses after a crash.

use nvmdb::pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use nvmdb::{Db, DbError, DbOptions, EngineOptions, WriteTransaction};

fn options(engine: &str) -> DbOptions {
    let mut o = DbOptions { engine: engine.into(), ..Default::default() };
    o.region.medium = Medium::Dram;
    o.engine_options.group.batch_period_ms = 1;
    o
}

fn get(db: &Db, key: u64) -> Option<Vec<u8>> {
    db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(None), |t| t.get(key))).unwrap()
}

/// Application state that keeps a transaction open across its method calls.
struct Batch<'db> {
    tx: WriteTransaction<'db>,
    next: u64,
}

impl Batch<'_> {
    fn add(&mut self, value: &[u8]) -> nvmdb::storage::Result<()> {
        self.tx.open_table::<u64>("t")?.insert(self.next, value)?;
        self.next += 1;
        Ok(())
    }
}

#[test]
fn held_handles_commit_abort_and_drop_on_every_engine() {
    for engine in nvmdb::engines::ENGINES {
        let db = Db::open(&options(engine)).unwrap();
        let mut batch = Batch { tx: db.begin_write().unwrap(), next: 0 };
        batch.add(b"a").unwrap();
        batch.add(&vec![7u8; 100_000]).unwrap();
        batch.tx.commit().unwrap();
        assert_eq!(get(&db, 1).map(|v| v.len()), Some(100_000), "{engine}");

        let tx = db.begin_write().unwrap();
        tx.open_table::<u64>("t").unwrap().insert(10, b"aborted").unwrap();
        tx.abort().unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table::<u64>("t").unwrap().insert(11, b"dropped").unwrap();
        drop(tx);
        assert_eq!((get(&db, 10), get(&db, 11)), (None, None), "{engine}");

        let rx = db.begin_read().unwrap();
        let n = rx.open_table::<u64>("t").unwrap().map_or(Ok(0), |t| t.len()).unwrap();
        assert_eq!(n, 2, "{engine}");
        rx.close().unwrap();
        assert!(db.check().unwrap().ok(), "{engine}");
    }
}

#[test]
fn a_conflict_dooms_the_handle_and_its_commit_says_retry() {
    let db = Db::open(&options("inplace")).unwrap();
    db.write(|tx| {
        tx.open_table::<u64>("u")?;
        tx.open_table::<u64>("t")?.insert(1, b"0")
    })
    .unwrap();
    let first = db.begin_write().unwrap();
    first.open_table::<u64>("t").unwrap().insert(1, b"first").unwrap();
    let second = db.begin_write().unwrap();
    second.open_table::<u64>("u").unwrap().insert(2, b"second").unwrap();
    let e = second.open_table::<u64>("t").and_then(|t| t.insert(1, b"second")).unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let e = second.commit().unwrap_err();
    assert!(e.is_retryable(), "a doomed handle's commit: {e}");
    first.commit().unwrap();
    assert_eq!(get(&db, 1).as_deref(), Some(&b"first"[..]));
    let u = db.read(|tx| tx.open_table::<u64>("u")?.map_or(Ok(None), |t| t.get(2))).unwrap();
    assert_eq!(u, None, "the doomed handle committed part of its work");
}

#[test]
fn handles_from_threads_reach_the_right_total() {
    for engine in ["inplace", "group", "lsm"] {
        let db = Db::open(&options(engine)).unwrap();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..25 {
                        let mut attempts = 0;
                        loop {
                            attempts += 1;
                            assert!(attempts < 1000, "{engine}: never got through");
                            let tx = db.begin_write().unwrap();
                            let r = (|| {
                                let t = tx.open_table::<u64>("t")?;
                                let n: u64 = t.get_as(0)?.unwrap_or(0);
                                t.insert_as(0, &(n + 1))
                            })();
                            match r.and_then(|_| tx.commit()) {
                                Ok(()) => break,
                                Err(e) if e.is_retryable() => std::thread::yield_now(),
                                Err(e) => panic!("{engine}: {e}"),
                            }
                        }
                    }
                });
            }
        });
        let total = db.read(|tx| tx.open_table::<u64>("t")?.unwrap().get_as::<u64>(0)).unwrap();
        assert_eq!(total, Some(100), "{engine}");
    }
}

#[test]
fn begin_fails_instead_of_waiting_forever_for_a_slot_it_holds() {
    let mut o = options("inplace");
    o.engine_options.workers = 1;
    let db = Db::open(&o).unwrap();
    let held = db.begin_read().unwrap();
    let started = std::time::Instant::now();
    match db.begin_write() {
        Err(DbError::Invalid(m)) => assert!(m.contains("engine_options.workers"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a second transaction on one slot"),
    }
    assert!(started.elapsed() >= nvmdb::BEGIN_WAIT);
    held.close().unwrap();
    db.begin_write().unwrap().commit().unwrap();
}

/// Crash test: handles commit keys `0..`, each with a 300 KiB value; a dropped handle
/// writes key 1000 between commits. After a crash at any fence every acknowledged key must
/// be recovered whole, and key 1000 never.
fn crash_run(engine: &str, cut: u64) -> (u64, Option<Vec<u8>>, u64) {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 64 << 20)).unwrap();
    let eo = {
        let mut o = EngineOptions { workers: 2, ..Default::default() };
        o.wal.log_bytes = 24 << 20;
        o
    };
    let engine = nvmdb::engines::open(engine, region, &eo).unwrap();
    let db = Db::from_engine(engine, 2, Default::default());
    let sim = || db.region().and_then(|r| r.sim()).expect("sim medium");
    if cut > 0 {
        sim().arm(CrashPoint { event: CrashEvent::Fence, count: cut }, CrashPolicy::Torn, cut);
    }
    let mut acked = 0;
    for k in 0..8u64 {
        let dropped = db.begin_write().unwrap();
        dropped.open_table::<u64>("t").unwrap().insert(1000, b"never").unwrap();
        drop(dropped);
        let tx = db.begin_write().unwrap();
        tx.open_table::<u64>("t").unwrap().insert(k, vec![k as u8; 300 << 10]).unwrap();
        tx.commit().unwrap();
        if cut > 0 && sim().cut_taken() {
            break;
        }
        acked = k + 1;
    }
    let fences = sim().event_counts().1;
    (acked, sim().take_image(), fences)
}

#[test]
fn committed_handles_survive_a_crash_and_dropped_ones_never_appear() {
    for engine in ["inplace", "wal", "group"] {
        let (_, _, fences) = crash_run(engine, 0);
        for i in 1..=5 {
            let cut = (fences * i / 6).max(1);
            let (acked, image, _) = crash_run(engine, cut);
            let Some(image) = image else { continue };
            let region =
                Region::from_image(&image, &RegionOptions::new(Medium::Sim, 64 << 20)).unwrap();
            let eo = {
                let mut o = EngineOptions { workers: 2, ..Default::default() };
                o.wal.log_bytes = 24 << 20;
                o
            };
            let db = Db::from_engine(
                nvmdb::engines::open(engine, region, &eo).unwrap(),
                2,
                Default::default(),
            );
            for k in 0..acked {
                assert_eq!(get(&db, k), Some(vec![k as u8; 300 << 10]), "{engine} cut {cut}");
            }
            assert_eq!(get(&db, 1000), None, "{engine} cut {cut}: a dropped handle's write");
            assert!(db.check().unwrap().ok(), "{engine} cut {cut}");
        }
    }
}

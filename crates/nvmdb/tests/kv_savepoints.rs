//! Savepoints (issue 39): `WriteTx::savepoint` / `rollback_to` on every engine `Db` accepts.
//! The model test would catch a rollback that leaves a row, a length counter, a value row or
//! a table's creation or drop behind, or undoes too much; the crash test would catch undone
//! writes that recovery brings back, or a transaction that commits only its part after the
//! rollback.

use nvmdb::pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use nvmdb::{Db, DbError, DbOptions, EngineOptions, Savepoint};
use std::collections::BTreeMap;

type Model = BTreeMap<u64, Vec<u8>>;

/// A small deterministic generator (xorshift64*), so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) % n
    }
}

fn value(rng: &mut Rng, tag: u64) -> Vec<u8> {
    let len = [0usize, 9, 300, 5000, 20_000][rng.below(5) as usize];
    (0..len).map(|i| (i as u64 * 31 + tag) as u8).collect()
}

fn options(engine: &str) -> DbOptions {
    let mut o = DbOptions { engine: engine.into(), ..Default::default() };
    o.region.medium = Medium::Dram;
    o
}

fn read_all(db: &Db, table: &str) -> Option<Model> {
    db.read(|tx| match tx.open_table::<u64>(table)? {
        Some(t) => t.iter().collect::<Result<Model, _>>().map(Some),
        None => Ok(None),
    })
    .unwrap()
}

/// One transaction of random inserts, removes, savepoints, rollbacks and a table created
/// and dropped, checked against `model` as it runs; commits (returning the model) or not.
fn random_txn(db: &Db, rng: &mut Rng, a: &Model, b: &Option<Model>) -> (Model, Option<Model>) {
    let seed = rng.below(u64::MAX);
    let commit = rng.below(5) != 0;
    let r = db.write(|tx| {
        let mut rng = Rng(seed | 1);
        let (mut a, mut b) = (a.clone(), b.clone());
        let ta = tx.open_table::<u64>("a")?;
        let mut points: Vec<(Savepoint, Model, Option<Model>)> = Vec::new();
        for step in 0..25 {
            match rng.below(20) {
                0..=6 => {
                    let (k, v) = (rng.below(40), value(&mut rng, step));
                    ta.insert(k, &v)?;
                    a.insert(k, v);
                }
                7..=9 => {
                    let k = rng.below(40);
                    assert_eq!(ta.remove(k)?, a.remove(&k), "remove {k}");
                }
                10..=12 => points.push((tx.savepoint()?, a.clone(), b.clone())),
                13..=15 if !points.is_empty() => {
                    let j = rng.below(points.len() as u64) as usize;
                    tx.rollback_to(&points[j].0)?;
                    (a, b) = (points[j].1.clone(), points[j].2.clone());
                    points.truncate(j + 1);
                }
                16 | 17 => {
                    let (k, v) = (rng.below(40), value(&mut rng, step));
                    tx.open_table::<u64>("b")?.insert(k, &v)?;
                    b.get_or_insert_with(Model::new).insert(k, v);
                }
                18 => {
                    assert_eq!(tx.drop_table("b")?, b.is_some());
                    b = None;
                }
                _ => {
                    assert_eq!(ta.len()?, a.len() as u64);
                    let k = rng.below(40);
                    assert_eq!(ta.get(k)?, a.get(&k).cloned(), "get {k}");
                }
            }
        }
        let all: Model = ta.iter().collect::<Result<_, _>>()?;
        assert_eq!(all, a);
        assert_eq!(tx.table_names()?.contains(&"b".to_string()), b.is_some());
        if commit {
            Ok((a, b))
        } else {
            Err(DbError::Invalid("rolled back whole".into()))
        }
    });
    match r {
        Ok(state) => state,
        Err(DbError::Invalid(m)) if m == "rolled back whole" => (a.clone(), b.clone()),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn savepoints_match_a_model_on_every_engine() {
    for engine in nvmdb::engines::ENGINES {
        let db = Db::open(&options(engine)).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut a, mut b) = (Model::new(), None);
        for _ in 0..40 {
            (a, b) = random_txn(&db, &mut rng, &a, &b);
            assert_eq!(read_all(&db, "a").unwrap_or_default(), a, "{engine}");
            assert_eq!(read_all(&db, "b"), b, "{engine}");
        }
        let len = db.read(|tx| tx.open_table::<u64>("a")?.map_or(Ok(0), |t| t.len())).unwrap();
        assert_eq!(len, a.len() as u64, "{engine}");
        assert!(db.check().unwrap().ok(), "{engine}");
    }
}

#[test]
fn stale_savepoints_tables_and_ranges_are_errors() {
    let db = Db::open(&options("inplace")).unwrap();
    let foreign = db.write(|tx| tx.savepoint()).unwrap();
    db.write(|tx| {
        let t = tx.open_table::<u64>("t")?;
        // Another transaction's savepoint.
        assert!(matches!(tx.rollback_to(&foreign), Err(DbError::Invalid(_))));
        let first = tx.savepoint()?;
        t.insert(1, b"x")?;
        let second = tx.savepoint()?;
        let created = tx.open_table::<u64>("created")?;
        created.insert(1, b"y")?;
        tx.rollback_to(&second)?;
        // The table whose creation was undone.
        assert!(matches!(created.get(1), Err(DbError::Invalid(_))));
        assert_eq!(t.get(1)?.as_deref(), Some(&b"x"[..])); // made before: still usable
        tx.rollback_to(&second)?; // a savepoint stays after a rollback to it
        tx.rollback_to(&first)?;
        assert!(matches!(tx.rollback_to(&second), Err(DbError::Invalid(_)))); // ended
        assert_eq!(t.get(1)?, None);
        assert_eq!(tx.table_names()?, ["t"]);
        Ok(())
    })
    .unwrap();
    // A range made before a rollback yields an error rather than undone entries.
    db.write(|tx| {
        let t = tx.open_table::<u64>("t")?;
        t.insert(5, b"z")?;
        let sp = tx.savepoint()?;
        let mut range = t.iter();
        tx.rollback_to(&sp)?;
        assert!(matches!(range.next(), Some(Err(DbError::Invalid(_)))));
        Ok(())
    })
    .unwrap();
}

/// Crash test: transaction `i` inserts `kept` key `2i`, takes a savepoint, inserts key
/// `2i + 1` (512 KiB over many value rows), removes the previous transaction's key, creates a
/// table, rolls back, then inserts key `1000 + i` and commits. After a crash at any fence,
/// recovery must show whole transactions only (`2i` iff `1000 + i`), no undone key or table,
/// and every acknowledged transaction.
fn crash_run(engine: &str, cut: u64) -> (u64, Option<Vec<u8>>, u64) {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 64 << 20)).unwrap();
    let eo = {
        let mut o = EngineOptions { workers: 2, undo_pages: 160, ..Default::default() };
        o.wal.log_bytes = 24 << 20;
        o
    };
    let db =
        Db::from_engine(nvmdb::engines::open(engine, region, &eo).unwrap(), 2, Default::default());
    let sim = || db.region().and_then(|r| r.sim()).expect("sim medium");
    if cut > 0 {
        sim().arm(CrashPoint { event: CrashEvent::Fence, count: cut }, CrashPolicy::Torn, cut);
    }
    let mut acked = 0;
    for i in 0..6u64 {
        db.write(|tx| {
            let t = tx.open_table::<u64>("t")?;
            t.insert(2 * i, b"kept")?;
            let sp = tx.savepoint()?;
            t.insert(2 * i + 1, vec![0xab; 512 << 10])?;
            if i > 0 {
                t.remove(2 * i - 2)?;
            }
            tx.open_table::<u64>("undone")?.insert(i, b"x")?;
            tx.rollback_to(&sp)?;
            t.insert(1000 + i, b"after")
        })
        .unwrap();
        if cut > 0 && sim().cut_taken() {
            break;
        }
        acked = i + 1;
    }
    let fences = sim().event_counts().1;
    (acked, sim().take_image(), fences)
}

fn crash_check(engine: &str, image: &[u8], acked: u64) -> Vec<String> {
    let region = Region::from_image(image, &RegionOptions::new(Medium::Sim, 64 << 20)).unwrap();
    let eo = {
        let mut o = EngineOptions { workers: 2, undo_pages: 160, ..Default::default() };
        o.wal.log_bytes = 24 << 20;
        o
    };
    let db =
        Db::from_engine(nvmdb::engines::open(engine, region, &eo).unwrap(), 2, Default::default());
    let mut bad = Vec::new();
    let found = read_all(&db, "t").unwrap_or_default();
    for i in 0..6u64 {
        let (kept, after) = (found.contains_key(&(2 * i)), found.contains_key(&(1000 + i)));
        if kept != after {
            bad.push(format!("txn {i}: key {} {kept}, key {} {after}", 2 * i, 1000 + i));
        }
        if found.contains_key(&(2 * i + 1)) {
            bad.push(format!("txn {i}: undone key {} recovered", 2 * i + 1));
        }
        if i < acked && !after {
            bad.push(format!("txn {i}: acknowledged, not recovered"));
        }
    }
    if read_all(&db, "undone").is_some() {
        bad.push("the undone table was recovered".into());
    }
    if !db.check().unwrap().ok() {
        bad.push("integrity check failed".into());
    }
    bad
}

#[test]
fn rolled_back_savepoints_stay_undone_after_a_crash() {
    for engine in ["inplace", "wal", "group"] {
        let (acked, _, fences) = crash_run(engine, 0);
        assert_eq!(acked, 6);
        let mut cuts = 0;
        for i in 1..=6 {
            let cut = (fences * i / 7).max(1);
            let (acked, image, _) = crash_run(engine, cut);
            let Some(image) = image else { continue };
            cuts += 1;
            let bad = crash_check(engine, &image, acked);
            assert!(bad.is_empty(), "{engine} cut at fence {cut} of {fences}: {bad:?}");
        }
        assert!(cuts >= 3, "{engine}: only {cuts} crash images taken");
    }
}

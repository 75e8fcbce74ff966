//! The embedding API (`Db::write` / `Db::read` over named tables) against a `BTreeMap` model on
//! every region engine: typed keys in order, values of every size class up to 1 MiB, ranges,
//! reopen, drop table with reclamation, and conflicting writers retried to a correct total.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbError, DbOptions};
use std::collections::BTreeMap;

fn options(engine: &str, medium: Medium, path: Option<std::path::PathBuf>) -> DbOptions {
    let mut region = RegionOptions::new(medium, 96 << 20);
    region.path = path;
    let mut o = DbOptions { engine: engine.into(), region, ..Default::default() };
    o.engine_options.workers = 4;
    o
}

/// A value of `len` bytes derived from `seed`, so a torn or mixed value is detected.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8).collect()
}

fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn tables_match_a_model_on_every_engine() {
    for engine in ["inplace", "wal", "group"] {
        let db = Db::open(&options(engine, Medium::Dram, None)).unwrap();
        let mut model: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let sizes = [0usize, 5, 200, 201, 1000, 4096, 4097, 9000, 70_000];
        for round in 0..40 {
            let ops: Vec<(String, Option<Vec<u8>>)> = (0..25)
                .map(|_| {
                    let r = rng(&mut state);
                    let key = format!("key{:04}", r % 300);
                    let op = (r >> 20) % 4;
                    let value = (op != 0).then(|| {
                        let len = sizes[(r >> 30) as usize % sizes.len()];
                        pattern(r, len)
                    });
                    (key, value)
                })
                .collect();
            let commit = round % 5 != 4;
            let result: Result<(), DbError> = db.write(|tx| {
                let t = tx.open_table::<str>("model")?;
                for (k, v) in &ops {
                    match v {
                        Some(v) => {
                            t.insert(k, v)?;
                        }
                        None => {
                            t.remove(k)?;
                        }
                    }
                }
                if commit {
                    Ok(())
                } else {
                    Err(DbError::Invalid("roll back".into()))
                }
            });
            assert_eq!(result.is_ok(), commit, "{engine}: {result:?}");
            if commit {
                for (k, v) in ops {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
            }
        }
        let all: Vec<(String, Vec<u8>)> =
            db.read(|tx| tx.open_table::<str>("model")?.unwrap().iter().collect()).unwrap();
        let expected: Vec<(String, Vec<u8>)> = model.clone().into_iter().collect();
        assert_eq!(all.len(), expected.len(), "{engine}");
        assert!(all == expected, "{engine}: contents differ from the model");
        // The counted length followed inserts, replacements, removes and rollbacks.
        let len = db.read(|tx| tx.open_table::<str>("model")?.unwrap().len()).unwrap();
        assert_eq!(len, model.len() as u64, "{engine}: len()");
        let part: Vec<String> = db
            .read(|tx| {
                let t = tx.open_table::<str>("model")?.unwrap();
                t.range("key0100".."key0200")?.map(|e| e.map(|(k, _)| k)).collect()
            })
            .unwrap();
        let want: Vec<String> = model
            .range("key0100".to_string().."key0200".to_string())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(part, want, "{engine}");
        assert!(db.check().unwrap().ok(), "{engine}");
    }
}

#[test]
fn integer_keys_iterate_in_numeric_order() {
    let db = Db::open(&options("inplace", Medium::Dram, None)).unwrap();
    let keys: Vec<i64> = vec![i64::MIN, -1000, -1, 0, 1, 255, 256, 70_000, i64::MAX];
    db.write(|tx| {
        let t = tx.open_table::<i64>("i")?;
        let u = tx.open_table::<u64>("u")?;
        for k in keys.iter().rev() {
            t.insert(k, b"")?;
            u.insert(*k as u64, b"")?;
        }
        Ok(())
    })
    .unwrap();
    let (signed, unsigned) = db
        .read(|tx| {
            let t = tx.open_table::<i64>("i")?.unwrap();
            let u = tx.open_table::<u64>("u")?.unwrap();
            let s: Vec<i64> = t.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
            let v: Vec<u64> =
                u.range(1..=256)?.map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
            Ok((s, v))
        })
        .unwrap();
    assert_eq!(signed, keys);
    assert_eq!(unsigned, [1, 255, 256]);
}

#[test]
fn many_keys_split_nodes_and_survive_reopen() {
    let dir = std::env::temp_dir().join(format!("nvmdb-kv-reopen-{}", std::process::id()));
    let opts = options("inplace", Medium::File, Some(dir.clone()));
    {
        let db = Db::open(&opts).unwrap();
        for batch in 0..20u64 {
            db.write(|tx| {
                let t = tx.open_table::<[u8]>("bytes")?;
                for i in 0..200u64 {
                    let k = (batch * 200 + i).wrapping_mul(0x9E37_79B9) % 100_000;
                    t.insert(format!("k{k:08}").into_bytes(), k.to_le_bytes())?;
                }
                Ok(())
            })
            .unwrap();
        }
        let big = pattern(1, 1 << 20);
        db.write(|tx| tx.open_table::<str>("big")?.insert("one-mib", &big)).unwrap();
    }
    let db = Db::open(&opts).unwrap();
    let (n, sorted, big) = db
        .read(|tx| {
            let t = tx.open_table::<[u8]>("bytes")?.unwrap();
            let keys: Vec<Vec<u8>> =
                t.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
            let sorted = keys.windows(2).all(|w| w[0] < w[1]);
            let big = tx.open_table::<str>("big")?.unwrap().get("one-mib")?;
            Ok((t.len()?, sorted, big))
        })
        .unwrap();
    assert!(n > 3000, "{n} distinct keys");
    assert!(sorted);
    assert!(big == Some(pattern(1, 1 << 20)), "1 MiB value read back whole");
    drop(db);
    std::fs::remove_file(&dir).ok();
}

#[test]
fn drop_table_reclaims_its_rows() {
    let db = Db::open(&options("inplace", Medium::Dram, None)).unwrap();
    db.write(|tx| tx.open_table::<u64>("keep")?.insert(1, b"x").map(|_| ())).unwrap();
    // Rows of every engine table, the layer's own included (the check's table list hides them).
    let rows = |db: &Db| -> u64 { db.check().unwrap().integrity.unwrap().rows };
    let baseline = rows(&db);
    for k in 0..300u64 {
        db.write(|tx| tx.open_table::<u64>("gone")?.insert(k, pattern(k, 5000)).map(|_| ()))
            .unwrap();
    }
    assert!(rows(&db) > baseline + 600);
    assert!(db.write(|tx| tx.drop_table("gone")).unwrap());
    // Id counters may have gained rows; node, value and trash rows are all back.
    let after = rows(&db);
    assert!(after <= baseline + 4, "rows {after} vs {baseline} before the table");
    let names = db.read(|tx| tx.table_names()).unwrap();
    assert_eq!(names, ["keep"]);
    assert!(db.read(|tx| tx.open_table::<u64>("gone").map(|t| t.is_none())).unwrap());
}

#[test]
fn wrong_key_type_and_oversized_input_are_errors() {
    let db = Db::open(&options("inplace", Medium::Dram, None)).unwrap();
    db.write(|tx| tx.open_table::<u64>("t").map(|_| ())).unwrap();
    let e = db.write(|tx| tx.open_table::<str>("t").map(|_| ())).unwrap_err();
    assert!(e.to_string().contains("has u64 keys"), "{e}");
    let long = "x".repeat(nvmdb::MAX_KEY_BYTES + 1);
    let e = db.write(|tx| tx.open_table::<str>("s")?.insert(&long, b"")).unwrap_err();
    assert!(e.to_string().contains("key of"), "{e}");
    let e = db.write(|tx| tx.open_table::<str>("").map(|_| ())).err().map(|e| e.to_string());
    assert!(e.is_some_and(|e| e.contains("table name")));
}

#[test]
fn conflicting_writers_are_retried_to_the_right_total() {
    let db = Db::open(&options("inplace", Medium::Dram, None)).unwrap();
    db.write(|tx| tx.open_table::<str>("c")?.insert("n", 0u64.to_le_bytes())).unwrap();
    let threads = 4;
    let per_thread = 100u64;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..per_thread {
                    db.write(|tx| {
                        let t = tx.open_table::<str>("c")?;
                        let v = t.get("n")?.unwrap();
                        let n = u64::from_le_bytes(v.try_into().unwrap());
                        t.insert("n", (n + 1).to_le_bytes()).map(|_| ())
                    })
                    .unwrap();
                }
            });
        }
    });
    let v = db.read(|tx| tx.open_table::<str>("c")?.unwrap().get("n")).unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), threads * per_thread);
}

//! Reverse iteration, both ends of one range, `first`/`last`/`pop_first`/`pop_last` and `len`
//! against a `BTreeMap` on a tree several levels deep with emptied leaves (deletes do not merge
//! nodes). Would catch: a reverse step that loops or skips a leaf at a separator key, ends
//! that pass each other, a pop that returns one key and removes another.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbOptions};
use std::collections::BTreeMap;
use std::ops::Bound;

fn rng(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn reverse_ranges_and_ends_match_a_model() {
    let mut o = DbOptions {
        region: RegionOptions::new(Medium::Dram, 64 << 20),
        max_size_bytes: Some(0),
        ..Default::default()
    };
    o.engine_options.workers = 2;
    let db = Db::open(&o).unwrap();
    let mut model = BTreeMap::new();
    // Long keys: few per node, so the tree has internal levels.
    let key = |i: u64| format!("{i:06}{}", "k".repeat(150));
    for chunk in (0..3000u64).collect::<Vec<_>>().chunks(50) {
        db.write(|tx| {
            let t = tx.open_table::<str>("t")?;
            chunk.iter().try_for_each(|&i| t.insert(key(i), i.to_le_bytes()).map(|_| ()))
        })
        .unwrap();
        model.extend(chunk.iter().map(|&i| (key(i), i.to_le_bytes().to_vec())));
    }
    // Empty whole leaves in the middle, and some scattered keys.
    let gone: Vec<u64> = (1000..1600).chain((0..3000).step_by(7)).collect();
    for chunk in gone.chunks(50) {
        db.write(|tx| {
            let t = tx.open_table::<str>("t")?;
            chunk.iter().try_for_each(|&i| t.remove(key(i)).map(|_| ()))
        })
        .unwrap();
    }
    for i in &gone {
        model.remove(&key(*i));
    }
    let mut state = 0x1234_5678_9abc_def1u64;
    for _ in 0..40 {
        let (a, b) = (rng(&mut state) % 3100, rng(&mut state) % 3100);
        let (lo, hi) = (key(a.min(b)), key(a.max(b)));
        let bounds = match rng(&mut state) % 4 {
            0 => (Bound::Included(lo), Bound::Excluded(hi)),
            1 => (Bound::Excluded(lo), Bound::Included(hi)),
            2 => (Bound::Unbounded, Bound::Included(hi)),
            _ => (Bound::Included(lo), Bound::Unbounded),
        };
        let want: Vec<String> =
            model.range::<String, _>(bounds.clone()).rev().map(|(k, _)| k.clone()).collect();
        fn as_str(b: &Bound<String>) -> Bound<&str> {
            b.as_ref().map(|s| s.as_str())
        }
        let (got, mixed) = db
            .read(|tx| {
                let t = tx.open_table::<str>("t")?.expect("table");
                let r = (as_str(&bounds.0), as_str(&bounds.1));
                let got: Vec<String> = t
                    .range::<&str>(r)?
                    .rev()
                    .map(|e| e.map(|(k, _)| k))
                    .collect::<Result<_, _>>()?;
                // Alternate ends: every key once, in the right places.
                let mut it = t.range::<&str>(r)?;
                let (mut front, mut back) = (Vec::new(), Vec::new());
                while let Some((k, _)) = it.next().transpose()? {
                    front.push(k);
                    match it.next_back().transpose()? {
                        Some((k, _)) => back.push(k),
                        None => break,
                    }
                }
                back.reverse();
                front.extend(back);
                Ok((got, front))
            })
            .unwrap();
        assert_eq!(got, want, "reverse of {bounds:?}");
        let mut forward = want.clone();
        forward.reverse();
        assert_eq!(mixed, forward, "both ends of {bounds:?}");
    }
    // Ends and pops.
    let (first, last, len) = db
        .read(|tx| {
            let t = tx.open_table::<str>("t")?.expect("table");
            Ok((t.first()?, t.last()?, t.len()?))
        })
        .unwrap();
    let pair = |e: Option<(&String, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
    assert_eq!(first, pair(model.first_key_value()));
    assert_eq!(last, pair(model.last_key_value()));
    assert_eq!(len, model.len() as u64);
    for _ in 0..50 {
        let (a, b) = db
            .write(|tx| {
                let t = tx.open_table::<str>("t")?;
                Ok((t.pop_first()?, t.pop_last()?))
            })
            .unwrap();
        assert_eq!(a, model.pop_first());
        assert_eq!(b, model.pop_last());
    }
    let len = db.read(|tx| tx.open_table::<str>("t")?.expect("table").len()).unwrap();
    assert_eq!(len, model.len() as u64);
}

/// `len()` sums per-slot counters: writers on different slots insert, and remove what others
/// inserted (a slot's count goes negative); the total must still be exact.
#[test]
fn len_counts_across_concurrent_writers() {
    let db = Db::open(&DbOptions::default()).unwrap();
    db.write(|tx| tx.open_table::<u64>("t").map(|_| ())).unwrap();
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let db = &db;
            s.spawn(move || {
                for i in 0..100u64 {
                    let key = thread * 1000 + i;
                    db.write(|tx| tx.open_table::<u64>("t")?.insert(key, b"v")).unwrap();
                    // Remove a key another thread wrote, if it is there yet.
                    let other = (thread + 1) % 4 * 1000 + i / 2;
                    db.write(|tx| tx.open_table::<u64>("t")?.remove(other)).unwrap();
                }
            });
        }
    });
    let (len, entries) = db
        .read(|tx| {
            let t = tx.open_table::<u64>("t")?.expect("table");
            Ok((t.len()?, t.iter().count() as u64))
        })
        .unwrap();
    assert_eq!(len, entries);
    assert!(entries >= 200, "{entries}");
}

//! `inplace` searches the B+tree before a point read's optimistic read begins, and before a
//! point write's lock, and checks the slot it found against the slot once inside the read or
//! under the lock (`InPlaceTxn::read_guessing`, `search_before_lock`). Between the search and
//! the check another transaction may delete the key, insert it again elsewhere, and hand its
//! old slot to another key. Would catch: a read that returns the slot the search found after
//! the key moved (another key's row, or the key's deleted row), a read that finds a key absent
//! that a single transaction moved (it is never absent between commits), a damage report for
//! a slot that merely moved, or an update written to the old slot.

use engines::{inplace::InPlace, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use storage::{DbError, Engine, TableId, TableSpec};

const KEYS: u64 = 16;
const ROW: usize = 64;

/// Bytes 32..40: 0 when inserted, the key once updated (`update` writes the key there).
const TAG: usize = 32;

/// A row of `key` at `version`: both written twice, so that a row of another key or a mix of
/// two rows is seen.
fn row(key: u64, version: u64) -> Vec<u8> {
    let mut r = vec![0u8; ROW];
    for (i, v) in [key, version, key, version].into_iter().enumerate() {
        r[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    r
}

/// The key and version of a row, checked whole: its tag is 0 or its own key.
fn parse(r: &[u8]) -> (u64, u64) {
    let w = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap());
    assert_eq!((w(0), w(8)), (w(16), w(24)), "a row mixing two writes");
    assert!(w(TAG) == 0 || w(TAG) == w(0), "key {}'s row tagged by key {}", w(0), w(TAG));
    (w(0), w(8))
}

/// Runs a transaction until it commits (a conflict under wait-die is retried).
fn retry<R>(
    db: &InPlace,
    worker: usize,
    f: &mut dyn FnMut(&mut dyn storage::Txn) -> storage::Result<R>,
) -> R {
    loop {
        let mut txn = db.begin(worker).expect("begin");
        match f(txn.as_mut()).and_then(|r| txn.commit().map(|_| r)) {
            Ok(r) => return r,
            Err(DbError::Conflict { .. }) => std::thread::yield_now(),
            Err(e) => panic!("worker {worker}: {e}"),
        }
    }
}

#[test]
fn reads_and_updates_follow_keys_that_move_between_slots() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 32 << 20)).expect("region");
    let db = InPlace::open(region, &EngineOptions { workers: 4, ..Default::default() }).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: ROW as u32, expected_rows: 0 };
    let t: TableId = db.create_table(&spec).expect("table");
    retry(&db, 0, &mut |txn| (0..KEYS).try_for_each(|k| txn.insert(t, k, &row(k, 0))));
    let versions: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    let stop = AtomicBool::new(false);
    let (moves, reads, updates) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_millis(1500);
    std::thread::scope(|s| {
        // Worker 0 moves keys: delete and insert again in one transaction (a new slot), then a
        // filler key takes the freed slot and leaves, so old slots hold other keys or nothing.
        s.spawn(|| {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let k = n % KEYS;
                let v = versions[k as usize].load(Ordering::Relaxed) + 1;
                retry(&db, 0, &mut |txn| {
                    assert!(txn.delete(t, k)?, "key {k} missing");
                    txn.insert(t, k, &row(k, v))
                });
                versions[k as usize].store(v, Ordering::Relaxed);
                let filler = 1_000 + n % 4;
                retry(&db, 0, &mut |txn| txn.insert(t, filler, &row(filler, 0)));
                retry(&db, 0, &mut |txn| txn.delete(t, filler).map(|_| ()));
                moves.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
            stop.store(true, Ordering::Relaxed);
        });
        // Worker 1 updates keys in place through `update` (a write found by search first).
        s.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let k = (n * 7) % KEYS;
                retry(&db, 1, &mut |txn| {
                    assert!(txn.update(t, k, TAG as u32, &k.to_le_bytes())?, "key {k} missing");
                    Ok(())
                });
                updates.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
        // Workers 2 and 3 read: every key is always present, its own row, never older than a
        // version this reader saw before.
        for w in 2..4 {
            let (db, versions, stop, reads) = (&db, &versions, &stop, &reads);
            s.spawn(move || {
                let mut seen = vec![0u64; KEYS as usize];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = (n * 5 + w as u64) % KEYS;
                    let out = retry(db, w, &mut |txn| {
                        let mut out = Vec::new();
                        assert!(txn.read(t, k, &mut out)?, "key {k} read as absent");
                        Ok(out)
                    });
                    let (key, version) = parse(&out);
                    assert_eq!(key, k, "read of key {k} returned key {key}'s row");
                    let at = &mut seen[k as usize];
                    assert!(version >= *at, "key {k}: version {version} after {at}");
                    assert!(version <= versions[k as usize].load(Ordering::Relaxed) + 1);
                    *at = version;
                    reads.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
    });
    let (m, r, u) = (moves.into_inner(), reads.into_inner(), updates.into_inner());
    assert!(m > 10 && r > 10 && u > 10, "too little overlap: {m} moves, {r} reads, {u} updates");
    // Every update went to the key's row of the moment (the tags say whose row it wrote).
    for k in 0..KEYS {
        let mut txn = db.begin(0).unwrap();
        let mut out = Vec::new();
        assert!(txn.read(t, k, &mut out).unwrap());
        txn.commit().unwrap();
        assert_eq!(parse(&out).0, k);
    }
    db.check_integrity().expect("integrity");
}

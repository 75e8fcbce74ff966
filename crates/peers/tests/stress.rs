//! Two threads insert rows and update shared counters concurrently, retrying retryable errors;
//! afterwards no insert and no increment is missing. Would catch lost updates or lost inserts
//! under concurrency (a broken writer gate, snapshot check or lock mapping).

mod common;

use common::open;
use peers::{PeerDurability, PEERS};
use storage::{DbError, Engine, TableSpec};

const THREADS: usize = 2;
const TXNS_PER_THREAD: u64 = 300;
const COUNTERS: u64 = 4;
const MAX_RETRIES: u32 = 100_000;

fn counter(row: &[u8]) -> u64 {
    u64::from_le_bytes(row[..8].try_into().expect("8-byte counter"))
}

/// One transaction: insert a row of this worker's, bump two counters (read, then update).
fn work(engine: &dyn Engine, worker: usize, i: u64) -> Result<(), DbError> {
    let mut txn = engine.begin(worker)?;
    let key = 1_000 + (worker as u64) * 1_000_000 + i;
    txn.insert(1, key, &[worker as u8; 64])?;
    for c in [i % COUNTERS, (i + 1 + worker as u64) % COUNTERS] {
        let mut out = Vec::new();
        assert!(txn.read(0, c, &mut out)?, "counter {c} missing");
        let n = counter(&out) + 1;
        assert!(txn.update(0, c, 0, &n.to_le_bytes())?, "counter {c} vanished");
    }
    txn.commit().map(drop)
}

fn stress(peer: &str, durability: PeerDurability) {
    let dir = common::scratch();
    let engine = open(peer, dir.path(), durability, THREADS).expect("open");
    let counters = TableSpec { name: "counters".into(), row_bytes: 32, expected_rows: COUNTERS };
    let rows = TableSpec { name: "rows".into(), row_bytes: 64, expected_rows: 1000 };
    engine.create_table(&counters).expect("create_table");
    engine.create_table(&rows).expect("create_table");
    let mut txn = engine.begin(0).expect("begin");
    for c in 0..COUNTERS {
        txn.insert(0, c, &[0; 32]).expect("insert");
    }
    txn.commit().expect("commit");

    let engine = &*engine;
    let retries: u32 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|worker| {
                s.spawn(move || {
                    let mut retries = 0;
                    for i in 0..TXNS_PER_THREAD {
                        let mut attempt = 0;
                        loop {
                            match work(engine, worker, i) {
                                Ok(()) => break,
                                Err(e) if e.is_retryable() && attempt < MAX_RETRIES => {
                                    attempt += 1;
                                    retries += 1;
                                    std::thread::yield_now();
                                }
                                Err(e) => panic!("{peer} worker {worker} txn {i}: {e}"),
                            }
                        }
                    }
                    retries
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).sum()
    });

    let mut txn = engine.begin(0).expect("begin");
    let mut total = 0;
    txn.scan(0, 0, u64::MAX, usize::MAX, &mut |_, r| {
        total += counter(r);
        true
    })
    .expect("scan");
    let inserted = txn.scan(1, 0, u64::MAX, usize::MAX, &mut |_, _| true).expect("scan");
    txn.commit().expect("commit");
    let txns = THREADS as u64 * TXNS_PER_THREAD;
    assert_eq!(total, 2 * txns, "{peer}: lost increments ({retries} retries)");
    assert_eq!(inserted as u64, txns, "{peer}: lost inserts");
    let integrity = engine.check_integrity().expect("check_integrity");
    assert_eq!(integrity.rows, COUNTERS + txns, "{peer}: check_integrity row count");
    engine.shutdown().expect("shutdown");
}

#[test]
fn two_writers_lose_nothing_durable() {
    for peer in PEERS {
        stress(peer, PeerDurability::Durable);
    }
}

#[test]
fn two_writers_lose_nothing_relaxed() {
    for peer in PEERS {
        stress(peer, PeerDurability::Relaxed);
    }
}

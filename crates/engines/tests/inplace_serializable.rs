//! Serial equivalence under concurrency: two threads transfer money between 64 accounts while a
//! third audits the total in one transaction. Under strict 2PL every audit must see the
//! invariant total, and the final state must equal the serial replay of the committed transfers.
//! Would catch: lost updates, dirty reads, locks released early, unsafe abort under contention.

use engines::{inplace::InPlace, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::{DbError, Engine, TableSpec, Txn};

const ACCOUNTS: u64 = 64;
const INITIAL: i64 = 1000;
/// Audits that must complete while transfers run.
const MIN_AUDITS: u64 = 3;
/// Bound on the transfers a mover runs waiting for audits (a hang would be a bug).
const MAX_TRANSFERS: u64 = 10_000_000;

fn balance(row: &[u8]) -> i64 {
    i64::from_le_bytes(row[0..8].try_into().unwrap())
}

fn transfer(txn: &mut dyn Txn, from: u64, to: u64, amount: i64) -> Result<(), DbError> {
    let mut row = Vec::new();
    txn.read(0, from, &mut row)?;
    let a = balance(&row);
    txn.read(0, to, &mut row)?;
    let b = balance(&row);
    txn.update(0, from, 0, &(a - amount).to_le_bytes())?;
    txn.update(0, to, 0, &(b + amount).to_le_bytes())?;
    Ok(())
}

#[test]
fn transfers_and_audits_are_serializable() {
    let region = Region::open(&RegionOptions::new(Medium::Shm, 16 << 20)).unwrap();
    let db = InPlace::open(region, &EngineOptions { workers: 3, ..Default::default() }).unwrap();
    db.create_table(&TableSpec { name: "acct".into(), row_bytes: 16, expected_rows: 0 }).unwrap();
    let mut t = db.begin(0).unwrap();
    for a in 0..ACCOUNTS {
        let mut row = [0u8; 16];
        row[0..8].copy_from_slice(&INITIAL.to_le_bytes());
        t.insert(0, a, &row).unwrap();
    }
    t.commit().unwrap();
    let stop = AtomicBool::new(false);
    // Movers keep transferring until the auditor has completed MIN_AUDITS audits, so audits
    // always overlap transfers, whatever the scheduler does (the old fixed 3,000 transfers
    // could end before the auditor's first audit got through under no-wait locking).
    let audits_done = AtomicU64::new(0);
    let (committed, audits) = std::thread::scope(|s| {
        let db = &db;
        let stop = &stop;
        let audits_done = &audits_done;
        let movers: Vec<_> = (0..2usize)
            .map(|w| {
                s.spawn(move || {
                    let mut log = Vec::new();
                    let mut x = 7u64 + w as u64;
                    let mut i = 0u64;
                    while i < 3000 || audits_done.load(Ordering::Relaxed) < MIN_AUDITS {
                        assert!(i < MAX_TRANSFERS, "no audit got through in {i} transfers");
                        i += 1;
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                        let (from, to) = ((x >> 20) % ACCOUNTS, (x >> 40) % ACCOUNTS);
                        if from == to {
                            continue;
                        }
                        let amount = (x % 50) as i64;
                        let mut txn = db.begin(w).unwrap();
                        match transfer(&mut *txn, from, to, amount) {
                            Ok(()) => {
                                txn.commit().unwrap();
                                log.push((from, to, amount));
                            }
                            Err(e) if e.is_retryable() => txn.abort().unwrap(),
                            Err(e) => panic!("{e}"),
                        }
                    }
                    log
                })
            })
            .collect();
        let auditor = s.spawn(move || {
            let mut audits = 0;
            while !stop.load(Ordering::Relaxed) {
                let mut txn = db.begin(2).unwrap();
                let mut sum = 0i64;
                match txn.scan(0, 0, u64::MAX, usize::MAX, &mut |_, row| {
                    sum += balance(row);
                    true
                }) {
                    Ok(n) => {
                        assert_eq!(n as u64, ACCOUNTS);
                        assert_eq!(sum, INITIAL * ACCOUNTS as i64, "audit saw a non-serial state");
                        audits += 1;
                        txn.commit().unwrap();
                        audits_done.store(audits, Ordering::Relaxed);
                    }
                    Err(e) if e.is_retryable() => txn.abort().unwrap(),
                    Err(e) => panic!("{e}"),
                }
            }
            audits
        });
        let logs: Vec<_> = movers.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        (logs, auditor.join().unwrap())
    });
    assert!(audits >= MIN_AUDITS);
    // Transfers commute, so the final state equals any serial replay of the committed ones.
    let mut expect = vec![INITIAL; ACCOUNTS as usize];
    for (from, to, amount) in committed.iter().flatten() {
        expect[*from as usize] -= amount;
        expect[*to as usize] += amount;
    }
    let mut t = db.begin(0).unwrap();
    let mut row = Vec::new();
    for a in 0..ACCOUNTS {
        assert!(t.read(0, a, &mut row).unwrap());
        assert_eq!(balance(&row), expect[a as usize], "account {a}");
    }
    t.commit().unwrap();
    db.check_integrity().unwrap();
}

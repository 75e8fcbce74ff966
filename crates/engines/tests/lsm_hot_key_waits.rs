//! `lsm` writers wait for a short write-write conflict instead of aborting (issue 35: "waiting
//! instead of abort storms where a conflict is short"): two workers update one hot key while
//! each commit holds it across three modelled 5 µs barriers; most attempts commit.
//! Would catch: lsm point writes back on no-wait locks (then the second writer of the hot key
//! aborts whenever the first is committing, most of the time here), or waits that are not
//! counted (`lock_waits`).

use engines::{lsm::Lsm, EngineOptions};
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use storage::{Engine, TableSpec};

const TXNS_PER_WORKER: u64 = 2_000;

fn counter(db: &Lsm, name: &str) -> u64 {
    db.activity().into_iter().find(|a| a.0 == name).map_or(0, |a| a.1)
}

#[test]
fn two_lsm_writers_of_one_hot_key_wait_instead_of_aborting() {
    let timing = TimingOptions { persist_barrier_ns: 5_000, ..Default::default() };
    let region =
        Region::open(&RegionOptions { timing, ..RegionOptions::new(Medium::Dram, 32 << 20) })
            .expect("region");
    let opts = EngineOptions { workers: 2, ..Default::default() };
    let db = Lsm::open(region, &opts).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut txn = db.begin(0).expect("begin");
    txn.insert(t, 0, &[0; 16]).expect("insert");
    txn.commit().expect("load");
    let waits = counter(&db, "lock_waits");
    let aborts: u64 = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2usize)
            .map(|w| {
                let db = &db;
                s.spawn(move || {
                    let mut aborts = 0;
                    for i in 0..TXNS_PER_WORKER {
                        // Retried until it commits: each attempt that fails is an abort.
                        loop {
                            let mut txn = db.begin(w).expect("begin");
                            let bytes = (i + 1).to_le_bytes();
                            match txn.update(t, 0, 8 * w as u32, &bytes) {
                                Ok(found) => {
                                    assert!(found, "the hot row vanished");
                                    txn.commit().expect("a commit with its lock held");
                                    break;
                                }
                                Err(e) if e.is_retryable() => aborts += 1,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                    aborts
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().expect("worker")).sum()
    });
    let commits = 2 * TXNS_PER_WORKER;
    let ratio = aborts as f64 / commits as f64;
    let waited = counter(&db, "lock_waits") - waits;
    eprintln!("aborts {aborts} / commits {commits} = {ratio:.4}; lock waits {waited}");
    // No-wait (before): 12.7 aborts per commit here (50,637 for 4,000), every retry meeting the
    // other's commit; waiting: 0.16-0.24 on a loaded 2-core machine, where a waiter's bounded
    // wait runs out when the holder is descheduled. A bound with room for that load.
    assert!(ratio <= 1.0, "{aborts} aborts for {commits} commits: writers do not wait");
    assert!(waited > 0, "no write-lock wait counted");
    // Each worker's last write is there: no update lost, none applied twice.
    let mut row = Vec::new();
    let mut txn = db.begin(0).expect("begin");
    assert!(txn.read(t, 0, &mut row).expect("read"));
    assert_eq!(row[..8], TXNS_PER_WORKER.to_le_bytes());
    assert_eq!(row[8..], TXNS_PER_WORKER.to_le_bytes());
    txn.commit().expect("commit");
}

//! Durability chosen per transaction: on `group`, `Durability::Eventual` writes return without
//! waiting for their batch (each `Immediate` one waits up to a batch period), and `Db::flush`
//! makes them durable: they survive a reopen. Would catch: an eventual write that waits, or a
//! flush that returns before the batch holding the latest eventual commit persisted.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbOptions, Durability};
use std::time::{Duration, Instant};

#[test]
fn eventual_writes_do_not_wait_for_their_batch_and_flush_makes_them_durable() {
    let path = std::env::temp_dir().join(format!("nvmdb-durability-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut o = DbOptions { engine: "group".into(), ..Default::default() };
    o.region = RegionOptions::new(Medium::File, 32 << 20).with_path(&path);
    o.engine_options.workers = 2;
    o.engine_options.undo_pages = 40;
    o.engine_options.group.staging_bytes = 4 << 20;
    o.engine_options.group.batch_period_ms = 500;
    {
        let db = Db::open(&o).unwrap();
        // The first write sets up the table layer and the table, durably.
        db.write(|tx| tx.open_table::<u64>("t").map(|_| ())).unwrap();
        let started = Instant::now();
        for k in 0..20u64 {
            db.write(|tx| {
                tx.set_durability(Durability::Eventual);
                tx.open_table::<u64>("t")?.insert(k, k.to_le_bytes())
            })
            .unwrap();
        }
        let eventual = started.elapsed();
        // Each would wait for a 0.5 s batch; all 20 take less than one.
        assert!(eventual < Duration::from_millis(400), "20 eventual writes took {eventual:?}");
        db.flush().unwrap();
        assert!(started.elapsed() < Duration::from_secs(10));
        // Visible at once to other transactions.
        let n = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len())).unwrap();
        assert_eq!(n, 20);
    }
    let db = Db::open(&o).unwrap();
    let n = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len())).unwrap();
    assert_eq!(n, 20, "flushed eventual writes survive a reopen");
    drop(db);
    std::fs::remove_file(&path).unwrap();
}

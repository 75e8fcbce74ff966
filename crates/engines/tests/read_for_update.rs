//! `Txn::read_for_update` (issue 35: TPC-B's hot-row aborts) locks the key exclusively before
//! it reads, on `inplace` (and `wal`, `group`, which run its transactions) and `lsm`: a second
//! read-for-update of the key meets the lock (conflicts or waits, never reads beside it), a
//! plain read by the holder sees its own later write, and the lock ends with the transaction.
//! Would catch: a read-for-update that reads without the lock (two updaters both reading the
//! old balance), or one that leaves the lock behind.

use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

fn open(name: &str) -> Box<dyn Engine> {
    let options = EngineOptions { workers: 2, ..Default::default() };
    let bytes = engines::min_region_bytes(name, &options).unwrap() + (8 << 20);
    let region = Region::open(&RegionOptions::new(Medium::Dram, bytes)).expect("dram region");
    engines::open(name, region, &options).unwrap()
}

#[test]
fn a_read_for_update_holds_the_key_until_the_transaction_ends() {
    for name in ["inplace", "wal", "group", "lsm"] {
        let db = open(name);
        let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 0 };
        let t = db.create_table(&spec).unwrap();
        let mut txn = db.begin(0).unwrap();
        txn.insert(t, 1, &10u64.to_le_bytes()).unwrap();
        db.wait_durable(txn.commit().unwrap()).unwrap();

        let mut a = db.begin(0).unwrap();
        let mut row = Vec::new();
        assert!(a.read_for_update(t, 1, &mut row).unwrap(), "{name}");
        assert_eq!(row, 10u64.to_le_bytes(), "{name}");
        // A second updater of the key cannot read it beside the first.
        let mut b = db.begin(1).unwrap();
        let mut other = Vec::new();
        let r = b.read_for_update(t, 1, &mut other);
        assert!(r.as_ref().is_err_and(|e| e.is_retryable()), "{name}: {r:?}");
        b.abort().unwrap();
        assert!(a.update(t, 1, 0, &11u64.to_le_bytes()).unwrap(), "{name}");
        assert!(a.read(t, 1, &mut row).unwrap());
        assert_eq!(row, 11u64.to_le_bytes(), "{name}: the holder reads its own write");
        db.wait_durable(a.commit().unwrap()).unwrap();
        // The lock ended with the commit.
        let mut c = db.begin(1).unwrap();
        assert!(c.read_for_update(t, 1, &mut row).unwrap(), "{name}");
        assert_eq!(row, 11u64.to_le_bytes(), "{name}");
        c.abort().unwrap();
    }
}

//! Under `wal`'s central log a transaction's stores reach the log in few inserts (issue 35:
//! each insert is a round trip through the consolidation array and the reservation lock, which
//! every committer of the machine shares). A row update's undo record and row are one store
//! group, a B+tree insert into a leaf with room or a remove that merges nothing (its system
//! undo record, the leaf, the free mark) another, the commit a third; a delete's undo records
//! are one group too (its commit's frees of heap slots go to shared free lists, store by store).
//! Would catch: a store group lost (an update or an index insert logged store by store again),
//! or a transaction's inserts growing unnoticed.

use engines::wal::Wal;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

fn reservations(e: &Wal) -> u64 {
    let figures = e.activity();
    figures.iter().find(|(n, _)| *n == "log_reserve_locks").map(|(_, v)| *v).unwrap()
}

#[test]
fn an_insert_takes_three_log_inserts_an_update_two_and_a_delete_five() {
    let mut options = EngineOptions { workers: 1, ..Default::default() };
    options.wal.log_bytes = engines::wal::default_log_bytes(&options);
    let region =
        Region::open(&RegionOptions::new(Medium::Dram, options.wal.log_bytes + (32 << 20)));
    let e = Wal::open(region.unwrap(), &options).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 100, expected_rows: 1000 };
    let t = e.create_table(&spec).unwrap();
    let insert = |key: u64| {
        let mut txn = e.begin(0).unwrap();
        txn.insert(t, key, &[key as u8; 100]).unwrap();
        e.wait_durable(txn.commit().unwrap()).unwrap();
    };
    // The first rows grow the heap and the tree's first leaf (system transactions that
    // allocate pages, logged store by store).
    for key in 0..10 {
        insert(key);
    }
    let before = reservations(&e);
    for key in 10..60 {
        insert(key);
    }
    let inserts = reservations(&e) - before;
    let before = reservations(&e);
    for key in 10..60u64 {
        let mut txn = e.begin(0).unwrap();
        assert!(txn.update(t, key, 8, &[0xee; 40]).unwrap());
        e.wait_durable(txn.commit().unwrap()).unwrap();
    }
    let updates = reservations(&e) - before;
    let before = reservations(&e);
    for key in 10..60u64 {
        let mut txn = e.begin(0).unwrap();
        assert!(txn.delete(t, key).unwrap());
        e.wait_durable(txn.commit().unwrap()).unwrap();
    }
    let deletes = reservations(&e) - before;
    eprintln!("50 inserts: {inserts} log inserts; 50 updates: {updates}; 50 deletes: {deletes}");
    assert_eq!(inserts, 3 * 50, "the row, the index leaf, the commit");
    assert_eq!(updates, 2 * 50, "the update, the commit");
    // Ten before the groups of the delete's undo records and of the leaf's remove.
    assert!(deletes <= 5 * 50, "{deletes} log inserts for 50 deletes");
}

//! Regression (found by the damaged-region fuzzer): found while writing its B+tree targets (the
//! fuzzer's random pointers rarely reach it): a child or sibling pointer damaged to name a node
//! the operation already holds latched (the node itself, its parent) made a delete's merge (and
//! a descent, or a scan behind a queued writer) take that latch a second time: a deadlock, not
//! `DbError::Corrupt`. Would catch: any walk that latches a page read from the region before
//! checking it is not already latched by the same operation.

use engines::inplace::InPlace;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use std::sync::mpsc;
use std::time::Duration;
use storage::catalog::{entry_offset, E_ROOT};
use storage::format::{page_offset, CATALOG_PAGE};
use storage::{DbError, Engine, TableSpec};

const ROWS: u64 = 300;

fn populated() -> (InPlace, Region) {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 8 << 20)).unwrap();
    let options = EngineOptions { workers: 1, node_capacity: 4, ..EngineOptions::default() };
    let db = InPlace::open(region.clone(), &options).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: ROWS };
    let t = db.create_table(&spec).unwrap();
    for key in 0..ROWS {
        let mut txn = db.begin(0).unwrap();
        txn.insert(t, key, &[7u8; 16]).unwrap();
        txn.commit().unwrap();
    }
    (db, region)
}

fn root(region: &Region) -> u64 {
    region.read_u64(page_offset(CATALOG_PAGE) + (entry_offset(0) + E_ROOT) as u64)
}

fn leftmost(region: &Region, node: u64) -> u64 {
    region.read_u64(page_offset(node) + 16)
}

fn level(region: &Region, node: u64) -> u16 {
    u16::from_le_bytes(region.read(page_offset(node) + 4, 2).try_into().unwrap())
}

/// Runs `f` in a thread; a hang fails the test instead of blocking it forever.
fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10)).expect("the operation hung (latch taken twice)")
}

#[test]
fn a_child_pointer_to_its_own_parent_is_corrupt_not_a_deadlock() {
    let (db, region) = populated();
    let root = root(&region);
    assert!(level(&region, root) >= 1, "the tree has inner nodes");
    region.write_u64(page_offset(root) + 16, root);
    let results = within_10s(move || {
        let t = db.table("t").unwrap();
        let mut txn = db.begin(0).unwrap();
        let insert = txn.insert(t, ROWS + 1_000_000, &[1u8; 16]).err();
        drop(txn);
        let mut txn = db.begin(0).unwrap();
        let delete = txn.delete(t, 0).err();
        drop(txn);
        let mut txn = db.begin(0).unwrap();
        let scan = txn.scan(t, 0, u64::MAX, usize::MAX, &mut |_, _| true).err();
        drop(txn);
        [insert, delete, scan].map(|e| e.map(|e| e.to_string()))
    });
    // Insert of a large key does not pass the leftmost pointer; delete and scan of key 0 do.
    for e in &results[1..] {
        assert!(e.as_deref().is_some_and(|m| m.contains("damaged")), "{results:?}");
    }
}

#[test]
fn a_sibling_pointer_naming_the_node_itself_is_corrupt_not_a_deadlock() {
    let (db, region) = populated();
    // The parent of the leftmost leaf: its second child pointer now names its first child, so
    // a merge of the leftmost leaf pairs the leaf with itself.
    let mut parent = root(&region);
    while level(&region, parent) > 1 {
        parent = leftmost(&region, parent);
    }
    let first = leftmost(&region, parent);
    region.write_u64(page_offset(parent) + 32 + 8, first);
    let outcome = within_10s(move || {
        let t = db.table("t").unwrap();
        for key in 0..ROWS {
            let mut txn = db.begin(0).unwrap();
            match txn.delete(t, key) {
                Ok(_) => txn.commit().map(|_| ())?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    assert!(matches!(outcome, Err(DbError::Corrupt(_))), "{outcome:?}");
}

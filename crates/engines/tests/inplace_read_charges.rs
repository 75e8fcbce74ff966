//! The read-latency model charges every page access Pelley §5.1 charges (issue 16): a row update
//! accesses its heap page, a delete descends the B+tree, a scan reads its rows' heap pages.
//! Would catch: a `Txn` operation that reads or writes NVRAM pages without a latch event (before
//! issue 16 `update` charged no heap line, `delete` no index line, `scan` no heap line).

use engines::{inplace::InPlace, EngineOptions};
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use std::collections::BTreeMap;
use storage::{Engine, TableSpec};

fn activity(db: &InPlace) -> BTreeMap<&'static str, u64> {
    db.activity().into_iter().collect()
}

/// `after - before` of one counter.
fn delta(before: &BTreeMap<&str, u64>, after: &BTreeMap<&str, u64>, key: &str) -> u64 {
    after[key] - before.get(key).copied().unwrap_or(0)
}

#[test]
fn every_row_operation_is_a_charged_page_access() {
    let timing = TimingOptions { read_ns: 1, ..Default::default() };
    let region =
        Region::open(&RegionOptions { timing, ..RegionOptions::new(Medium::Dram, 8 << 20) })
            .expect("dram region");
    // A one-page cache: every access to another page than the last misses.
    let options = EngineOptions { workers: 2, cache_pages: Some(1), ..Default::default() };
    let db = InPlace::open(region.clone(), &options).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: 100, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut txn = db.begin(0).expect("begin");
    for key in 0..50u64 {
        txn.insert(t, key, &[key as u8; 100]).expect("insert");
    }
    txn.commit().expect("commit");

    let step = |f: &dyn Fn(&mut dyn storage::Txn)| {
        let before = activity(&db);
        let charged = region.stats().lines_read_charged;
        let mut txn = db.begin(0).expect("begin");
        f(txn.as_mut());
        txn.commit().expect("commit");
        (before, activity(&db), region.stats().lines_read_charged - charged)
    };
    // An update: the index descent, then the heap page (header, slot, the updated bytes).
    let (b, a, charged) = step(&|t2| assert!(t2.update(t, 7, 60, &[1; 8]).unwrap()));
    assert_eq!(delta(&b, &a, "heap_latches"), 1, "{a:?}");
    assert!(delta(&b, &a, "heap_lines") >= 3, "header, slot and row lines: {a:?}");
    assert!(charged >= delta(&b, &a, "heap_lines") + delta(&b, &a, "index_lines"));
    // A delete descends the tree to remove the key (it used to charge only the lookup).
    let (b, a, _) = step(&|t2| assert!(t2.delete(t, 9).unwrap()));
    assert!(delta(&b, &a, "index_latches") >= 2, "lookup and removal descents: {a:?}");
    // A scan reads every visited row's heap page.
    let (b, a, _) = step(&|t2| {
        let mut n = 0;
        t2.scan(t, 10, 19, 100, &mut |_, _| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 10);
    });
    assert_eq!(delta(&b, &a, "heap_latches"), 10, "{a:?}");
    assert!(delta(&b, &a, "heap_lines") >= 10 * 3, "{a:?}");
    // Every tree operation reads the root pointer in the catalog page.
    assert!(delta(&b, &a, "other_latches") >= 1, "{a:?}");
}

//! NVM-CoW's layout (Arulraj et al. SIGMOD 2015 §4.2): with `layout=pointers` the leaves hold
//! non-volatile pointers to separately allocated tuples, so an update writes its new tuple and
//! the path of pointer nodes, not leaves full of rows as CoW (§3.2, `layout=pages`) does; old
//! tuples are reused only once no version reaches them. Would catch: NVM-CoW writing what CoW
//! writes, a tuple slot reused while a snapshot reads it, slots leaked across a reopen.

use engines::cow::{Cow, TupleLayout};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

const ROW: u32 = 1000;

fn open(region: &Region, layout: TupleLayout) -> Cow {
    let mut o = EngineOptions { workers: 2, ..Default::default() };
    o.cow.layout = layout;
    Cow::open(region.clone(), &o).expect("open")
}

fn bytes_written(db: &Cow) -> u64 {
    db.activity().iter().find(|(k, _)| *k == "device_bytes_written").map_or(0, |(_, v)| *v)
}

/// Device bytes one single-row update commit writes, averaged over 100, on 500 rows.
fn bytes_per_update(layout: TupleLayout) -> u64 {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 32 << 20)).expect("region");
    let db = open(&region, layout);
    let spec = TableSpec { name: "t".into(), row_bytes: ROW, expected_rows: 500 };
    let t = db.create_table(&spec).expect("table");
    let mut tx = db.begin(0).expect("begin");
    for k in 0..500u64 {
        tx.insert(t, k, &[k as u8; ROW as usize]).expect("insert");
    }
    tx.commit().expect("commit");
    let before = bytes_written(&db);
    for i in 0..100u64 {
        let mut tx = db.begin(0).expect("begin");
        assert!(tx.update(t, (i * 37) % 500, 10, &[0xAB; 100]).expect("update"));
        tx.commit().expect("commit");
    }
    db.check_integrity().expect("integrity");
    (bytes_written(&db) - before) / 100
}

#[test]
fn an_update_writes_its_tuple_and_the_pointer_path_not_leaves_of_rows() {
    let pointers = bytes_per_update(TupleLayout::Pointers);
    let pages = bytes_per_update(TupleLayout::Pages);
    // Pointers: the tuple (1,024 B), a leaf and the root of <= 64 16-byte entries, the meta.
    assert!(pointers < 4_000, "NVM-CoW wrote {pointers} B per update");
    // Pages: a leaf of 4 to 8 rows of 1,012 B, the root, the meta page.
    assert!(pages > 4_000 && pages > 2 * pointers, "CoW wrote {pages} B, NVM-CoW {pointers}");
}

#[test]
fn old_tuples_outlive_the_snapshots_that_read_them_and_nothing_leaks_across_a_reopen() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).expect("region");
    let db = open(&region, TupleLayout::Pointers);
    let spec = TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut tx = db.begin(0).expect("begin");
    for k in 0..300u64 {
        tx.insert(t, k, &[1; 64]).expect("insert");
    }
    tx.commit().expect("commit");
    let mut reader = db.begin(1).expect("reader");
    let mut row = Vec::new();
    assert!(reader.read(t, 5, &mut row).expect("read"));
    for round in 2..40u8 {
        let mut tx = db.begin(0).expect("writer");
        for k in 0..300u64 {
            if k % 3 == 0 {
                assert!(tx.update(t, k, 0, &[round; 64]).expect("update"));
            }
        }
        if round % 5 == 0 {
            assert!(tx.delete(t, u64::from(round) * 3 + 1).expect("delete"));
            tx.insert(t, 1000 + u64::from(round), &[round; 64]).expect("insert");
        }
        tx.commit().expect("commit");
        db.check_integrity().expect("integrity while a snapshot holds old tuples");
    }
    let mut seen = 0;
    reader
        .scan(t, 0, 299, usize::MAX, &mut |_, r| {
            assert_eq!(r, &[1u8; 64][..], "the snapshot's tuple was reused");
            seen += 1;
            true
        })
        .expect("scan");
    assert_eq!(seen, 300);
    reader.commit().expect("commit");
    let report = db.check_integrity().expect("integrity");
    drop(db);
    let db = open(&region, TupleLayout::Auto);
    let again = db.check_integrity().expect("integrity after reopen");
    assert_eq!(again.rows, report.rows);
    assert!(
        again.pages_in_use <= report.pages_in_use,
        "reopen found more pages in use ({} > {})",
        again.pages_in_use,
        report.pages_in_use
    );
}

/// Regression (`cargo nextest run -p nvmdb -E 'test(full_region_frees_on_cow)'` with
/// `layout=pointers`): the tuple pages a table's deletes emptied must go back to the free pages,
/// where another table's tuples (and nodes) can take them.
#[test]
fn tuple_pages_a_table_emptied_are_reused_by_another_table() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 8 << 20)).expect("region");
    let db = open(&region, TupleLayout::Pointers);
    let fill = |name: &str, row: u32| -> u64 {
        let spec = TableSpec { name: name.into(), row_bytes: row, expected_rows: 0 };
        let t = db.table(name).unwrap_or_else(|| db.create_table(&spec).expect("table"));
        let mut n = 0u64;
        loop {
            let mut tx = db.begin(0).expect("begin");
            if tx.insert(t, n, &vec![7; row as usize]).is_err() {
                return n;
            }
            if tx.commit().is_err() {
                return n;
            }
            n += 1;
        }
    };
    let a = fill("a", 4000);
    assert!(a > 100, "{a}");
    let t = db.table("a").expect("a");
    for k in 0..a {
        let mut tx = db.begin(0).expect("begin");
        assert!(tx.delete(t, k).expect("delete"));
        tx.commit().expect("commit");
    }
    db.check_integrity().expect("integrity");
    let b = fill("b", 900);
    assert!(b * 4000 >= a * 900 * 9 / 10, "table a held {a} rows of 4000 B, b only {b} of 900 B");
    db.check_integrity().expect("integrity");
}

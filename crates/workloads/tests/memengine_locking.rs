//! MemEngine behaves as the `Engine` contract says: strict 2PL key locks with no-wait
//! conflicts, shared-to-exclusive upgrades, scans that read-lock, undo on abort and on drop,
//! duplicate and size errors; NoopEngine answers everything with zeroed rows.

use storage::{DbError, Engine, TableSpec};
use workloads::testing::{MemEngine, NoopEngine};

fn engine() -> (MemEngine, u32) {
    let e = MemEngine::new();
    let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 10 };
    let t = e.create_table(&spec).unwrap();
    assert!(e.create_table(&spec).is_err(), "duplicate table name accepted");
    let mut txn = e.begin(0).unwrap();
    for k in 0..10u64 {
        txn.insert(t, k, &k.to_le_bytes()).unwrap();
    }
    txn.commit().unwrap();
    (e, t)
}

fn conflict<T: std::fmt::Debug>(r: Result<T, DbError>) {
    assert!(matches!(r, Err(DbError::Conflict { .. })), "expected a conflict, got {r:?}");
}

#[test]
fn writers_exclude_readers_and_writers() {
    let (e, t) = engine();
    let mut buf = Vec::new();
    let mut a = e.begin(0).unwrap();
    let mut b = e.begin(1).unwrap();
    assert!(a.update(t, 1, 0, &[9]).unwrap());
    conflict(b.read(t, 1, &mut buf));
    conflict(b.update(t, 1, 0, &[8]));
    conflict(b.delete(t, 1));
    // Locks on absent keys too (inserts of the same key serialise).
    a.insert(t, 100, &[0; 8]).unwrap();
    conflict(b.insert(t, 100, &[0; 8]));
    assert!(b.read(t, 2, &mut buf).unwrap());
    a.commit().unwrap();
    b.abort().unwrap();
    assert_eq!(e.locks_held(), 0);
}

#[test]
fn shared_locks_and_upgrades() {
    let (e, t) = engine();
    let mut buf = Vec::new();
    let mut a = e.begin(0).unwrap();
    let mut b = e.begin(1).unwrap();
    assert!(a.read(t, 3, &mut buf).unwrap());
    assert!(b.read(t, 3, &mut buf).unwrap());
    conflict(a.update(t, 3, 0, &[1]));
    drop(b);
    assert!(a.update(t, 3, 0, &[1]).unwrap(), "sole reader may upgrade");
    a.commit().unwrap();
}

#[test]
fn scans_read_lock_and_see_own_writes() {
    let (e, t) = engine();
    let mut a = e.begin(0).unwrap();
    a.insert(t, 5_000, &[1; 8]).unwrap();
    let mut keys = Vec::new();
    let n = a
        .scan(t, 8, u64::MAX, 10, &mut |k, _| {
            keys.push(k);
            true
        })
        .unwrap();
    assert_eq!((n, keys), (3, vec![8, 9, 5_000]));
    let mut b = e.begin(1).unwrap();
    conflict(b.update(t, 9, 0, &[0]));
    let mut seen = 0;
    let n = b.scan(t, 0, 7, 3, &mut |_, _| {
        seen += 1;
        seen < 2
    });
    assert_eq!(n.unwrap(), 2, "visitor's false stops the scan");
    conflict(b.scan(t, 0, u64::MAX, 100, &mut |_, _| true));
    a.commit().unwrap();
}

#[test]
fn abort_and_drop_undo_everything() {
    let (e, t) = engine();
    let mut buf = Vec::new();
    for explicit in [true, false] {
        let mut a = e.begin(0).unwrap();
        assert!(a.update(t, 1, 0, &[0xff; 8]).unwrap());
        assert!(a.delete(t, 2).unwrap());
        a.insert(t, 50, &[7; 8]).unwrap();
        assert!(a.update(t, 50, 4, &[1, 2]).unwrap());
        if explicit {
            a.abort().unwrap();
        } else {
            drop(a);
        }
        let mut r = e.begin(0).unwrap();
        assert!(r.read(t, 1, &mut buf).unwrap());
        assert_eq!(buf, 1u64.to_le_bytes());
        assert!(r.read(t, 2, &mut buf).unwrap());
        assert!(!r.read(t, 50, &mut buf).unwrap());
        r.commit().unwrap();
    }
    assert_eq!(e.locks_held(), 0);
    assert_eq!(e.row_count(t), Some(10));
    assert_eq!(e.check_integrity().unwrap().rows, 10);
}

#[test]
fn contract_errors() {
    let (e, t) = engine();
    let mut a = e.begin(0).unwrap();
    assert!(matches!(a.insert(t, 1, &[0; 8]), Err(DbError::Duplicate { .. })));
    assert!(matches!(a.insert(t, 77, &[0; 3]), Err(DbError::RowSize { .. })));
    assert!(matches!(a.update(t, 1, 6, &[0; 3]), Err(DbError::UpdateRange { .. })));
    assert!(matches!(a.read(t + 1, 1, &mut Vec::new()), Err(DbError::NoSuchTable(_))));
    assert!(!a.update(t, 999, 0, &[1]).unwrap());
    assert!(!a.delete(t, 999).unwrap());
    a.commit().unwrap();
    assert_eq!(e.table("t"), Some(t));
    assert_eq!(e.table("nope"), None);
    assert_eq!(e.tables().len(), 1);
}

#[test]
fn noop_engine_returns_zeroed_rows() {
    let e = NoopEngine::new();
    let spec = TableSpec { name: "t".into(), row_bytes: 32, expected_rows: 1 };
    let t = e.create_table(&spec).unwrap();
    let mut txn = e.begin(0).unwrap();
    let mut buf = vec![1u8; 3];
    assert!(txn.read(t, 42, &mut buf).unwrap());
    assert_eq!(buf, vec![0u8; 32]);
    assert!(txn.update(t, 42, 0, &[1]).unwrap());
    let mut seen = Vec::new();
    txn.scan(t, 7, 9, 10, &mut |k, row| {
        seen.push((k, row.len()));
        true
    })
    .unwrap();
    assert_eq!(seen, vec![(7, 32)]);
    assert!(txn.read(t + 1, 0, &mut buf).is_err());
    txn.commit().unwrap();
}

//! Regression (issue 37, "undetected damage"): changed row bytes in a populated region opened,
//! read and passed integrity (734 of 20,000 fuzz cases; 32 KiB of random bytes over heap pages
//! left `check` at "integrity ok"), because rows carried no checksum. Every region engine's
//! rows now carry one, verified on read and by the integrity walk.
//! Would catch: a row read without verifying its checksum, an integrity walk that skips it, or
//! an update that writes new bytes without their new checksum (the clean reopen must verify).

use engines::EngineOptions;
use pmem::{Medium, RegionOptions};
use std::path::{Path, PathBuf};
use storage::{DbError, TableSpec};

const FILE_BYTES: u64 = 96 << 20;
const ROWS: u64 = 2000;
const ROW_BYTES: usize = 100;
/// The key whose row the tests damage.
const VICTIM: u64 = 1234;

fn scratch(engine: &str, what: &str) -> PathBuf {
    let name = format!("nvmdb-rowcrc-{}-{engine}-{what}.region", std::process::id());
    let p = std::env::temp_dir().join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// A row no other row (or structure) repeats: its key, then a pattern of it.
fn row(key: u64) -> Vec<u8> {
    let mut r = vec![0u8; ROW_BYTES];
    r[..8].copy_from_slice(&key.to_le_bytes());
    for (i, b) in r[8..].iter_mut().enumerate() {
        *b = (key.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8 ^ 0xA5;
    }
    r
}

fn region(path: &Path, create: bool) -> pmem::Region {
    let options = RegionOptions {
        medium: Medium::File,
        path: Some(path.to_path_buf()),
        size_bytes: if create { FILE_BYTES } else { 0 },
        max_size_bytes: if create { 1 << 30 } else { 0 },
        create,
        ..RegionOptions::default()
    };
    storage::format::open_region(&options).unwrap()
}

/// Loads `ROWS` rows, updates every 7th (bytes 50..66, so a row's checksum changes after
/// load), and shuts down cleanly.
fn populate(engine: &str, path: &Path, options: &EngineOptions) {
    let db = engines::open(engine, region(path, true), options).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: ROW_BYTES as u32, expected_rows: ROWS };
    let t = db.create_table(&spec).unwrap();
    for chunk in 0..ROWS / 100 {
        let mut txn = db.begin(0).unwrap();
        for key in chunk * 100..(chunk + 1) * 100 {
            txn.insert(t, key, &row(key)).unwrap();
        }
        txn.commit().unwrap();
    }
    for key in (0..ROWS).step_by(7) {
        let mut txn = db.begin(1).unwrap();
        assert!(txn.update(t, key, 50, &[key as u8 ^ 0x3C; 16]).unwrap());
        txn.commit().unwrap();
    }
    db.shutdown().unwrap();
}

/// The victim's row as the last update left it.
fn victim_row() -> Vec<u8> {
    let mut r = row(VICTIM);
    if VICTIM.is_multiple_of(7) {
        r[50..66].fill(VICTIM as u8 ^ 0x3C);
    }
    r
}

/// Flips one bit of byte 20 in every copy of the victim's row in the file; returns how many.
fn damage_victim(path: &Path) -> usize {
    let mut bytes = std::fs::read(path).unwrap();
    let needle = victim_row();
    let mut hits = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(ROW_BYTES).position(|w| w == needle) {
        bytes[at + i + 20] ^= 0x04;
        hits += 1;
        at += i + ROW_BYTES;
    }
    std::fs::write(path, bytes).unwrap();
    hits
}

/// Reopens the damaged file: what a read of the victim and the integrity walk say.
fn reopen_and_read(engine: &str, path: &Path) -> (Result<Vec<u8>, DbError>, Result<(), String>) {
    let db = engines::open(engine, region(path, false), &EngineOptions::default()).unwrap();
    let t = db.table("t").unwrap();
    let mut txn = db.begin(0).unwrap();
    let mut out = Vec::new();
    let read = txn.read(t, VICTIM, &mut out).map(|found| {
        assert!(found, "{engine}: the victim is there");
        out
    });
    drop(txn);
    let integrity = db.check_integrity().map(|_| ());
    (read, integrity)
}

fn changed_row_bytes_are_detected(engine: &str) {
    let path = scratch(engine, "on");
    populate(engine, &path, &EngineOptions::default());
    let (read, integrity) = reopen_and_read(engine, &path);
    assert_eq!(read.unwrap(), victim_row(), "{engine}: the clean region reads back");
    integrity.unwrap_or_else(|e| panic!("{engine}: the clean region checks ok: {e}"));
    assert!(damage_victim(&path) >= 1, "{engine}: the victim's row is in the file");
    let (read, integrity) = reopen_and_read(engine, &path);
    match read {
        Err(DbError::Corrupt(why)) => assert!(why.contains("checksum"), "{engine}: {why}"),
        other => panic!("{engine}: a damaged row read gave {other:?}"),
    }
    let why = integrity.expect_err("integrity names the damaged row");
    assert!(why.contains("checksum"), "{engine}: {why}");
    let _ = std::fs::remove_file(&path);
}

/// The control: with `checksums=off` the same damage reads back as data, so the test above
/// damages the bytes a read returns (and fails if detection is lost).
fn without_checksums_the_damage_is_returned(engine: &str) {
    let path = scratch(engine, "off");
    populate(engine, &path, &EngineOptions { checksums: false, ..Default::default() });
    assert!(damage_victim(&path) >= 1, "{engine}: the victim's row is in the file");
    let (read, _) = reopen_and_read(engine, &path);
    let got = read.unwrap_or_else(|e| panic!("{engine}: {e}"));
    assert_ne!(got, victim_row(), "{engine}: the changed bytes came back");
    let _ = std::fs::remove_file(&path);
}

/// An update of other bytes of a damaged row never re-stamps the damage as good: it is refused
/// (an engine that verifies the row first) or it commits a checksum the damaged bytes still
/// fail (`inplace`, `wal`, `group` derive it from the stored one and the bytes replaced), and
/// either way the next read and the integrity walk name the row.
fn an_update_never_launders_damage_elsewhere_in_the_row(engine: &str) {
    let path = scratch(engine, "upd");
    populate(engine, &path, &EngineOptions::default());
    assert!(damage_victim(&path) >= 1, "{engine}: the victim's row is in the file");
    let db = engines::open(engine, region(&path, false), &EngineOptions::default()).unwrap();
    let t = db.table("t").unwrap();
    let mut txn = db.begin(0).unwrap();
    // Bytes 50..66; the damage is in byte 20.
    match txn.update(t, VICTIM, 50, &[0x77; 16]) {
        Ok(found) => {
            assert!(found, "{engine}: the victim is there");
            match txn.commit() {
                Ok(_) | Err(DbError::Corrupt(_)) => {}
                Err(e) => panic!("{engine}: commit of the update: {e}"),
            }
        }
        Err(DbError::Corrupt(_)) => drop(txn),
        Err(e) => panic!("{engine}: update of a damaged row: {e}"),
    }
    let mut txn = db.begin(0).unwrap();
    let mut out = Vec::new();
    match txn.read(t, VICTIM, &mut out) {
        Err(DbError::Corrupt(why)) => assert!(why.contains("checksum"), "{engine}: {why}"),
        other => panic!("{engine}: the damaged row read after an update gave {other:?}"),
    }
    drop(txn);
    let why = db.check_integrity().map(|_| ()).expect_err("integrity names the damaged row");
    assert!(why.contains("checksum"), "{engine}: {why}");
    drop(db);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn changed_row_bytes_are_detected_on_read_and_by_check_inplace() {
    changed_row_bytes_are_detected("inplace");
    without_checksums_the_damage_is_returned("inplace");
}

#[test]
fn an_update_never_launders_damage_elsewhere_in_the_row_every_engine() {
    for engine in ["inplace", "wal", "group", "cow", "lsm"] {
        an_update_never_launders_damage_elsewhere_in_the_row(engine);
    }
}

#[test]
fn changed_row_bytes_are_detected_on_read_and_by_check_wal() {
    changed_row_bytes_are_detected("wal");
    without_checksums_the_damage_is_returned("wal");
}

#[test]
fn changed_row_bytes_are_detected_on_read_and_by_check_group() {
    changed_row_bytes_are_detected("group");
    without_checksums_the_damage_is_returned("group");
}

#[test]
fn changed_row_bytes_are_detected_on_read_and_by_check_cow() {
    changed_row_bytes_are_detected("cow");
    without_checksums_the_damage_is_returned("cow");
}

#[test]
fn changed_row_bytes_are_detected_on_read_and_by_check_lsm() {
    changed_row_bytes_are_detected("lsm");
    without_checksums_the_damage_is_returned("lsm");
}

//! Regressions (issue 37) for a kept `sqlite-nvwal` region file: (1) its layout was planned over
//! the growable mapping (`bench` maps half the free disk), so reopening it with another mapping
//! size said "geometry ... does not fit"; (2) a zeroed header over a populated region was taken
//! for a blank region and formatted over, silently dropping the database (so was a damaged
//! created flag); (3) a truncated file must be a clean error. Would catch: geometry read from
//! the mapping instead of the header, a silent reformat of damaged data, or a read past the
//! file's end.

use pmem::{Medium, Region, RegionOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use storage::{DbError, Engine, TableSpec};

const FILE_BYTES: u64 = 24 << 20;
const ROWS: u64 = 500;

fn scratch(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("nvmdb-nvwal-{}-{name}.region", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// The file region `bench --medium file --path P` opens: the file at `size_bytes` (0: as it
/// is), the mapping `max_size_bytes` long.
fn region(path: &Path, size_bytes: u64, max_size_bytes: u64) -> pmem::Result<Region> {
    Region::open(&RegionOptions {
        medium: Medium::File,
        path: Some(path.to_path_buf()),
        size_bytes,
        max_size_bytes,
        create: size_bytes > 0,
        ..RegionOptions::default()
    })
}

fn open(region: Region) -> storage::Result<sqlite_nvwal::engine::NvwalEngine> {
    sqlite_nvwal::engine::open_with(region, 1, &BTreeMap::new())
}

fn populate(path: &Path) {
    let db = open(region(path, FILE_BYTES, 1 << 30).unwrap()).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 64, expected_rows: ROWS };
    let t = db.create_table(&spec).unwrap();
    let mut txn = db.begin(0).unwrap();
    for key in 0..ROWS {
        txn.insert(t, key, &[key as u8; 64]).unwrap();
    }
    let token = txn.commit().unwrap();
    db.wait_durable(token).unwrap();
    db.shutdown().unwrap();
}

fn rows(db: &dyn Engine) -> usize {
    let t = db.table("t").expect("the table survives");
    let mut txn = db.begin(0).unwrap();
    txn.scan(t, 0, u64::MAX, usize::MAX, &mut |_, _| true).unwrap()
}

#[test]
fn kept_nvwal_region_reopens_with_any_mapping_size() {
    let path = scratch("remap");
    populate(&path);
    // A larger and a smaller growable mapping than the one it was formatted under, and the
    // file's own size (no --max-size at all).
    for max_size_bytes in [4 << 30, 64 << 20, 0] {
        let db = open(region(&path, 0, max_size_bytes).unwrap())
            .unwrap_or_else(|e| panic!("mapping {max_size_bytes}: {e}"));
        assert!(!db.recovery_report().formatted, "mapping {max_size_bytes}: reformatted");
        assert_eq!(rows(&db), ROWS as usize, "mapping {max_size_bytes}");
        db.shutdown().unwrap();
    }
    assert_eq!(std::fs::metadata(&path).unwrap().len(), FILE_BYTES, "the file never grows");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn zeroed_nvwal_header_over_data_is_corrupt_not_a_silent_reformat() {
    let path = scratch("zeroed");
    populate(&path);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..4096].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    match open(region(&path, 0, 1 << 30).unwrap()) {
        Err(DbError::Corrupt(m)) => assert!(m.contains("header is zero"), "{m}"),
        Err(e) => panic!("expected Corrupt, got {e}"),
        Ok(_) => panic!("a zeroed header over data was formatted over"),
    }
    assert!(std::fs::read(&path).unwrap() == bytes, "the refused region was written to");
    let _ = std::fs::remove_file(&path);
}

/// Regression (issue 37; `nvmdb fuzz --engine sqlite-nvwal --seed 11 --case 423`): a bit flipped
/// in the header's created flag (byte 78, in the word at 72) read as "creation never finished"
/// and the populated region was formatted over. Every value but 0 and 1 is damage.
#[test]
fn a_damaged_created_flag_is_corrupt_not_a_silent_reformat() {
    let path = scratch("flag");
    populate(&path);
    let clean = std::fs::read(&path).unwrap();
    for (byte, bit) in [(78, 0x04), (73, 0x01), (72, 0x02), (79, 0x80)] {
        let mut bytes = clean.clone();
        bytes[byte] ^= bit;
        std::fs::write(&path, &bytes).unwrap();
        match open(region(&path, 0, 1 << 30).unwrap()) {
            Err(DbError::Corrupt(m)) => assert!(m.contains("created flag"), "{m}"),
            Err(e) => panic!("byte {byte} bit {bit:#x}: expected Corrupt, got {e}"),
            Ok(_) => panic!("byte {byte} bit {bit:#x}: a damaged flag was formatted over"),
        }
        assert!(std::fs::read(&path).unwrap() == bytes, "the refused region was written to");
    }
    // The undamaged file still opens with every row.
    std::fs::write(&path, &clean).unwrap();
    let db = open(region(&path, 0, 1 << 30).unwrap()).unwrap();
    assert!(!db.recovery_report().formatted);
    assert_eq!(rows(&db), ROWS as usize);
    db.shutdown().unwrap();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn truncated_nvwal_region_is_a_clean_error() {
    let path = scratch("truncated");
    populate(&path);
    let page = 4096;
    for len in [FILE_BYTES - 1, FILE_BYTES - page, FILE_BYTES / 2, 1 << 20, 3 * page, page, 1] {
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len).unwrap();
        // Mapping the cut file may fail by itself (a clean error too); opening it is `Corrupt`.
        let Ok(cut) = region(&path, 0, 1 << 30) else { continue };
        match open(cut) {
            Err(DbError::Corrupt(_)) => {}
            Err(e) => panic!("cut to {len} bytes: {e} (not Corrupt)"),
            Ok(_) => panic!("cut to {len} bytes, the region opened"),
        }
    }
    let _ = std::fs::remove_file(&path);
}

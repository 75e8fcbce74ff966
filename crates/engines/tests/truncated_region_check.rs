//! Regression (issue 37): `nvmdb check` on a truncated `wal` region died of SIGBUS (its inspect
//! copied the log and image from past the file's end) and on a truncated `group` region panicked
//! in the region's bounds check. Every region engine's file, populated and then truncated at
//! lengths from the whole file down to one byte, must give `check`'s steps (open the file
//! privately, inspect, open the engine, check integrity) a clean error or a clean verdict.
//! Would catch: any read of a region file's missing tail, in inspect, recovery or integrity.

use engines::EngineOptions;
use pmem::{Medium, RegionOptions};
use std::path::{Path, PathBuf};
use storage::format::PAGE_SIZE_U64;
use storage::TableSpec;

const FILE_BYTES: u64 = 96 << 20;

fn scratch(engine: &str) -> PathBuf {
    let name = format!("nvmdb-truncated-{}-{engine}.region", std::process::id());
    let p = std::env::temp_dir().join(name);
    let _ = std::fs::remove_file(&p);
    p
}

/// A file-backed region as `bench --medium file --keep` leaves one: growable mapping, the file
/// at its initial size, 2,000 rows loaded and updated, shut down cleanly.
fn populate(engine: &str, path: &Path) {
    let options = RegionOptions {
        medium: Medium::File,
        path: Some(path.to_path_buf()),
        size_bytes: FILE_BYTES,
        max_size_bytes: 1 << 30,
        create: true,
        ..RegionOptions::default()
    };
    let region = storage::format::open_region(&options).unwrap();
    let db = engines::open(engine, region, &EngineOptions::default()).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 100, expected_rows: 2000 };
    let t = db.create_table(&spec).unwrap();
    for chunk in 0..20u64 {
        let mut txn = db.begin(0).unwrap();
        for key in chunk * 100..(chunk + 1) * 100 {
            txn.insert(t, key, &[key as u8; 100]).unwrap();
        }
        txn.commit().unwrap();
    }
    for key in (0..2000u64).step_by(7) {
        let mut txn = db.begin(1).unwrap();
        assert!(txn.update(t, key, 8, &[0xEE; 16]).unwrap());
        txn.commit().unwrap();
    }
    db.shutdown().unwrap();
}

/// What `nvmdb check` does with a region file, as a library: `Ok(verdict)` when the region
/// opens and passes integrity, `Err(why)` otherwise. A panic or a fault fails the test.
fn check(path: &Path) -> Result<String, String> {
    let options = RegionOptions {
        medium: Medium::File,
        path: Some(path.to_path_buf()),
        size_bytes: 0,
        create: false,
        private: true,
        ..RegionOptions::default()
    };
    let region = storage::format::open_region(&options).map_err(|e| format!("open: {e}"))?;
    let inspection = engines::inspect(&region).map_err(|e| format!("inspect: {e}"))?;
    let Some(engine) = inspection.engine.clone() else {
        return Ok(inspection.verdict);
    };
    let mut options = EngineOptions::default();
    if let Some(log) = &inspection.log {
        options.workers = inspection.workers.max(1);
        log.apply_to(&mut options);
    }
    let db = engines::open(&engine, region, &options).map_err(|e| format!("recovery: {e}"))?;
    db.check_integrity().map_err(|e| format!("integrity: {e}"))?;
    for spec in db.tables() {
        let t = db.table(&spec.name).ok_or("a listed table is missing")?;
        let mut txn = db.begin(0).map_err(|e| e.to_string())?;
        let rows = txn
            .scan(t, 0, u64::MAX, usize::MAX, &mut |_, _| true)
            .map_err(|e| format!("scan: {e}"))?;
        drop(txn);
        if spec.name == "t" && rows != 2000 {
            return Err(format!("{rows} rows of 2000"));
        }
    }
    Ok(inspection.verdict)
}

/// The truncation lengths tried, longest first (each truncates the file further).
fn lengths(len: u64, step: Option<u64>) -> Vec<u64> {
    let page = PAGE_SIZE_U64;
    let mut out = match step {
        Some(step) => (0..len).step_by(step as usize).collect(),
        None => vec![
            len - 1,
            len - page,
            len - 16 * page,
            len * 3 / 4,
            len / 2,
            len / 4,
            8 << 20,
            1 << 20,
            64 * page + 100,
            16 * page,
            4 * page + 1,
            4 * page,
            3 * page,
            page + 1,
            page,
            4096,
            1,
            0,
        ],
    };
    out.sort_unstable_by(|a, b| b.cmp(a));
    out.dedup();
    out
}

fn truncated_check_is_clean(engine: &str, step: Option<u64>) {
    let path = scratch(engine);
    populate(engine, &path);
    let whole = std::fs::metadata(&path).unwrap().len();
    assert!(check(&path).is_ok(), "{engine}: the whole file checks ok: {:?}", check(&path));
    // `group` and `wal` lay their log and image out over the whole file: any cut is damage.
    let fixed_layout = matches!(engine, "group" | "wal");
    for len in lengths(whole, step) {
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(len).unwrap();
        drop(file);
        let verdict = check(&path);
        if fixed_layout || len < 64 * PAGE_SIZE_U64 {
            assert!(verdict.is_err(), "{engine} cut to {len} of {whole} bytes: {verdict:?}");
        }
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn check_of_truncated_inplace_region_is_a_clean_error() {
    truncated_check_is_clean("inplace", None);
}

#[test]
fn check_of_truncated_wal_region_is_a_clean_error_not_sigbus() {
    truncated_check_is_clean("wal", None);
}

#[test]
fn check_of_truncated_group_region_is_a_clean_error_not_a_panic() {
    truncated_check_is_clean("group", None);
}

#[test]
fn check_of_truncated_cow_region_is_a_clean_error() {
    truncated_check_is_clean("cow", None);
}

#[test]
fn check_of_truncated_lsm_region_is_a_clean_error() {
    truncated_check_is_clean("lsm", None);
}

/// Every page boundary, for every engine (minutes: run with `--run-ignored all`).
#[test]
#[ignore]
fn check_of_region_truncated_at_every_page_is_clean_for_every_engine() {
    for engine in engines::ENGINES {
        truncated_check_is_clean(engine, Some(PAGE_SIZE_U64));
    }
}

//! Guards against a file-backed database that cannot grow by itself (issue 39): with default
//! options it grows past its initial size on the engines laid out over the whole mapping, stops
//! at `DbOptions::max_size_bytes` with an error that names that field (never a CLI flag), and
//! reopens with its data.

use nvmdb::pmem::{Medium, RegionOptions};
use nvmdb::{Db, DbError, DbOptions};

fn options(engine: &str, path: &std::path::Path) -> DbOptions {
    let mut o = DbOptions { engine: engine.into(), ..Default::default() };
    o.region = RegionOptions::new(Medium::File, 16 << 20).with_path(path);
    o.engine_options.workers = 2;
    o.engine_options.undo_pages = 40;
    o
}

fn temp(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("nvmdb-growth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

const VALUE_BYTES: usize = 50_000;

fn grows_by_default(engine: &str) {
    let path = temp(engine);
    let o = options(engine, &path);
    let value = vec![3u8; VALUE_BYTES];
    let n = 1000u64; // 50 MB into a 16 MiB file
    {
        let db = Db::open(&o).unwrap();
        for k in 0..n {
            db.write(|tx| tx.open_table::<u64>("t")?.insert(k, &value))
                .unwrap_or_else(|e| panic!("{engine}: insert {k}: {e}"));
        }
        assert!(db.check().unwrap().ok());
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 48 << 20, "{engine}: the file is {len} bytes");
    let db = Db::open(&o).unwrap();
    let back = db.read(|tx| {
        let t = tx.open_table::<u64>("t")?.expect("table");
        Ok((t.len()?, t.get(n - 1)?))
    });
    assert_eq!(back.unwrap(), (n, Some(value)), "{engine}");
    drop(db);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn file_database_grows_by_default_on_inplace() {
    grows_by_default("inplace");
}

#[test]
fn file_database_grows_by_default_on_cow() {
    grows_by_default("cow");
}

#[test]
fn file_database_grows_by_default_on_lsm() {
    grows_by_default("lsm");
}

#[test]
fn growth_stops_at_max_size_with_an_error_naming_the_option() {
    let path = temp("limit");
    let mut o = options("inplace", &path);
    o.max_size_bytes = Some(32 << 20);
    let db = Db::open(&o).unwrap();
    let value = vec![3u8; VALUE_BYTES];
    let mut k = 0u64;
    let err = loop {
        match db.write(|tx| tx.open_table::<u64>("t")?.insert(k, &value)) {
            Ok(_) => k += 1,
            Err(e) => break e,
        }
        assert!(k < 10_000, "never stopped growing");
    };
    let DbError::RegionFull(msg) = &err else { panic!("{err:?}") };
    assert!(msg.contains("DbOptions::max_size_bytes"), "{msg}");
    assert!(!msg.contains("--"), "a library error names a CLI flag: {msg}");
    // Values of 4 KiB rows take a page each (8 KiB): half the limit holds values.
    assert!(k as usize * VALUE_BYTES > 12 << 20, "stopped at {k} values");
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len <= 32 << 20, "the file grew past the limit: {len}");
    // Full at the limit, and still freed by a delete.
    assert!(db.write(|tx| tx.open_table::<u64>("t")?.remove(0)).unwrap().is_some());
    drop(db);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_fixed_size_engine_names_the_size_option_when_full() {
    let mut o = options("group", std::path::Path::new("/unused"));
    o.region = RegionOptions::new(Medium::Dram, 16 << 20);
    o.engine_options.group.staging_bytes = 4 << 20;
    let db = Db::open(&o).unwrap();
    let value = vec![3u8; VALUE_BYTES];
    let err = (0..10_000u64)
        .find_map(|k| db.write(|tx| tx.open_table::<u64>("t")?.insert(k, &value)).err())
        .expect("a 16 MiB region fills up");
    let msg = err.to_string();
    assert!(msg.contains("DbOptions::region.size_bytes"), "{msg}");
    assert!(!msg.contains("--"), "a library error names a CLI flag: {msg}");
}

/// Guards against "reopening with a larger size makes the file larger but the error stays
/// `all 8192 pages`" (issue 39): a database created at a fixed size and full, reopened with a
/// larger one, takes more data.
#[test]
fn reopening_larger_adds_pages() {
    let path = temp("reopen");
    let mut o = options("inplace", &path);
    o.max_size_bytes = Some(0); // fixed at 16 MiB
    let value = vec![3u8; VALUE_BYTES];
    let fill = |db: &Db, from: u64| -> u64 {
        let mut k = from;
        while db.write(|tx| tx.open_table::<u64>("t")?.insert(k, &value)).is_ok() {
            k += 1;
            assert!(k < 100_000);
        }
        k
    };
    let first = fill(&Db::open(&o).unwrap(), 0);
    o.region.size_bytes = 48 << 20;
    let db = Db::open(&o).unwrap();
    let second = fill(&db, first);
    assert!(second - first > 2 * first, "16 MiB held {first} values, 48 MiB {second}");
    assert!(db.check().unwrap().ok());
    drop(db);
    // And again, with the size left to grow (the layout reaches as far as its bitmap: 512 MiB).
    o.max_size_bytes = None;
    let db = Db::open(&o).unwrap();
    for k in second..second + 400 {
        db.write(|tx| tx.open_table::<u64>("t")?.insert(k, &value)).unwrap();
    }
    assert_eq!(db.read(|tx| tx.open_table::<u64>("t")?.unwrap().len()).unwrap(), second + 400);
    drop(db);
    std::fs::remove_file(&path).unwrap();
}

/// A region too small for the engine's logs says which `DbOptions` field to raise.
#[test]
fn a_region_too_small_to_open_names_the_size_option() {
    let o = DbOptions { region: RegionOptions::new(Medium::Dram, 1 << 20), ..Default::default() };
    let Err(err) = Db::open(&o) else { panic!("a 1 MiB region held 4 workers' undo logs") };
    let msg = err.to_string();
    assert!(msg.contains("DbOptions::region.size_bytes"), "{msg}");
    assert!(!msg.contains("--"), "a library error names a CLI flag: {msg}");
}

/// Device errors name `DbOptions` fields too (the device layer's messages name CLI flags).
#[test]
fn device_option_errors_name_db_options_fields() {
    let mut o = DbOptions::default();
    o.region.medium = Medium::Dram;
    o.region.sync = nvmdb::pmem::SyncMode::Msync;
    let Err(err) = Db::open(&o) else { panic!("msync on DRAM opened") };
    let msg = err.to_string();
    assert!(msg.contains("region.sync = SyncMode::Msync"), "{msg}");
    assert!(!msg.contains("--"), "a library error names a CLI flag: {msg}");
}

//! Guards `nvmdb check` on a database the library wrote (issue 39): it reports the user's named
//! tables and their entries, none of the layer's internal `nvmdb.` tables, and nothing about
//! an interrupted workload load.

use std::process::Command;

#[test]
fn check_reports_named_tables_of_a_library_database() {
    let path = std::env::temp_dir().join(format!("nvmdb-check-lib-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let region = nvmdb::pmem::RegionOptions::new(nvmdb::pmem::Medium::File, 16 << 20);
    let mut options = nvmdb::DbOptions { region: region.with_path(&path), ..Default::default() };
    options.engine_options.workers = 2;
    {
        let db = nvmdb::Db::open(&options).unwrap();
        db.write(|tx| {
            let users = tx.open_table::<str>("users")?;
            users.insert("ada", b"lovelace")?;
            users.insert("alan", vec![7u8; 10_000])?;
            tx.open_table::<u64>("counters")?.insert(1, 5u64.to_le_bytes())?;
            Ok(())
        })
        .unwrap();
    }
    let p = path.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_nvmdb")).args(["check", "--path", p]).output();
    let out = out.expect("the nvmdb binary runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("users (str keys): 2 entries"), "{text}");
    assert!(text.contains("counters (u64 keys): 1 entries"), "{text}");
    assert!(!text.contains("nvmdb."), "internal tables shown: {text}");
    assert!(!text.contains("load"), "a library database reported as a load: {text}");
    let json = Command::new(env!("CARGO_BIN_EXE_nvmdb"))
        .args(["check", "--path", p, "--json"])
        .output()
        .expect("the nvmdb binary runs");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["check"]["named_tables"][1]["name"], "users", "{v}");
    assert!(v["load"].is_null(), "{v}");
    std::fs::remove_file(&path).unwrap();
}

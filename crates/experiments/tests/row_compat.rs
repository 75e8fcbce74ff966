//! Rows written before and after issue 39's row changes (flush `none` on dram, defaults in
//! `engine_opts`, `max_pending` null where ignored, `write_latency_ns`) load side by side, so
//! old results directories stay readable.

use experiments::results::{read_rows, Status};

#[test]
fn old_and_new_bench_rows_load_together() {
    let dir = std::env::temp_dir().join(format!("nvmdb-row-compat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("results.jsonl");
    let old = serde_json::json!({
        "spec": "s", "point": "p", "rep": 0, "hash": "h", "status": "ok", "tps": 10.0,
        "config": {"medium": "dram", "flush": "clwb", "engine_opts": {}, "max_pending": 4096,
                   "persist_latency_ns": 0}
    });
    let new = serde_json::json!({
        "spec": "s", "point": "p", "rep": 1, "hash": "h", "status": "ok", "tps": 12.0,
        "config": {"medium": "dram", "flush": "none", "engine_opts": {"protocol": "lean"},
                   "max_pending": null, "persist_latency_ns": 1000, "write_latency_ns": 500}
    });
    std::fs::write(&path, format!("{old}\n{new}\n")).unwrap_or_else(|e| panic!("{e}"));
    let loaded = read_rows(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((loaded.rows.len(), loaded.skipped_lines), (2, 0));
    let (o, n) = (&loaded.rows[0], &loaded.rows[1]);
    assert!(o.status() == Status::Ok && n.status() == Status::Ok);
    assert_eq!(o.number("config.max_pending"), Some(4096.0));
    assert_eq!(n.number("config.max_pending"), None);
    assert_eq!(o.number("config.write_latency_ns"), None, "old rows have no write latency");
    assert_eq!(n.number("config.write_latency_ns"), Some(500.0));
    let _ = std::fs::remove_dir_all(&dir);
}

//! Every YCSB preset loads and runs a few thousand operations on MemEngine with 1 and 2
//! threads, after which the checker (row checksums and placement) passes and every
//! acknowledged write is still at or above its version.

mod common;

use workloads::ycsb::{RequestDistribution, Ycsb, YcsbConfig, PRESETS};
use workloads::Workload;

#[test]
fn every_preset_runs_and_checks() {
    for preset in PRESETS {
        let cfg = YcsbConfig { record_count: 2_000, ..YcsbConfig::preset(preset).unwrap() };
        let w = Ycsb::new(cfg).unwrap();
        let stats = common::load_run_check(&w, 1_500);
        let total: u64 = stats.kinds.values().sum();
        assert_eq!(total, 4_500, "{preset}: {:?}", stats.kinds);
    }
}

#[test]
fn inserts_grow_the_table_and_latest_reads_them() {
    let cfg = YcsbConfig { record_count: 1_000, ..YcsbConfig::preset("d").unwrap() };
    assert_eq!(cfg.request_distribution, RequestDistribution::Latest);
    let w = Ycsb::new(cfg).unwrap();
    let e = common::loaded(&w);
    let stats = common::run(&w, &e, 2, 2_000, 9);
    let inserts = stats.kinds["insert"];
    assert!(inserts > 100, "{:?}", stats.kinds);
    let t = common::table(&e, workloads::ycsb::TABLE);
    assert_eq!(e.row_count(t), Some(1_000 + inserts as usize));
    w.check(&e).unwrap();
    // Reattaching resumes the insert sequence after the highest key number.
    w.attach(&e).unwrap();
    let more = common::run(&w, &e, 1, 1_000, 10);
    assert_eq!(e.row_count(t), Some(1_000 + (inserts + more.kinds["insert"]) as usize));
    w.check(&e).unwrap();
}

#[test]
fn ordered_inserts_and_write_all_fields() {
    let cfg = YcsbConfig {
        record_count: 1_000,
        ordered_inserts: true,
        write_all_fields: true,
        ..YcsbConfig::preset("e").unwrap()
    };
    let w = Ycsb::new(cfg).unwrap();
    common::load_run_check(&w, 1_000);
}

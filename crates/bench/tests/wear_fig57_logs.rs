//! Thesis Fig. 5.7 needs every engine to say where its circular logs are, so the most-written
//! byte outside them is data or metadata (for `wal` it ties with its checkpoint redo point, the
//! thesis's "LSNs"). Would catch: an engine (`wal`, `group`) whose logs are unknown (no
//! Fig. 5.7 figure) or a Fig. 5.7 byte that lies inside a log.

use bench::wear::WearSummary;
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions, WearGranularity};
use storage::TableSpec;

fn hot_updates(name: &str, rounds: u64) -> (WearSummary, Vec<std::ops::Range<u64>>) {
    let mut ro = RegionOptions::new(Medium::Dram, 64 << 20);
    ro.wear = true;
    ro.wear_granularity = WearGranularity::Byte;
    let region = Region::open(&ro).expect("a dram region");
    let options = EngineOptions {
        workers: 1,
        wal: engines::wal::Options { log_bytes: 8 << 20, ..Default::default() },
        ..Default::default()
    };
    let engine = engines::open(name, region.clone(), &options).expect("the engine opens");
    let spec = TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 64 };
    let t = engine.create_table(&spec).expect("a table");
    for round in 0..rounds {
        let mut txn = engine.begin(0).expect("begin");
        let key = round % 16;
        if !txn.update(t, key, 0, &round.to_le_bytes()).expect("update") {
            txn.insert(t, key, &[0u8; 64]).expect("insert");
        }
        let token = txn.commit().expect("commit");
        engine.wait_durable(token).expect("durable");
    }
    engine.shutdown().expect("shutdown");
    let logs = engine.circular_logs().unwrap_or_default();
    let map = region.wear_map().expect("wear is on");
    (WearSummary::of(map, engine.as_ref()), logs)
}

#[test]
fn every_page_store_engine_names_its_logs_and_fig57_skips_them() {
    for name in ["inplace", "wal", "group"] {
        let (wear, logs) = hot_updates(name, 3000);
        assert!(!logs.is_empty(), "{name}: no circular logs named");
        for r in &logs {
            assert!(r.start < r.end, "{name}: empty log range {r:?}");
        }
        let hot = wear.fig57_most_written.as_ref().unwrap_or_else(|| panic!("{name}: no Fig. 5.7"));
        assert!(!logs.iter().any(|r| r.contains(&hot.offset)), "{name}: {hot:?} is in a log");
        let all = wear.most_written.as_ref().expect("something was written");
        assert!(all.writes >= hot.writes, "{name}: {all:?} vs {hot:?}");
    }
}

/// Guards issue 38: Fig. 5.7's hottest byte was a log control word (wal's redo point, group's
/// batch log state); they are reported apart and never as the Fig. 5.7 byte.
#[test]
fn log_control_words_are_reported_apart_from_fig57() {
    for name in ["wal", "group"] {
        // Fewer rounds: each of group's commits waits for its 20 ms batch.
        let (wear, _) = hot_updates(name, 300);
        let control = wear.log_control_most_written.as_ref();
        let control = control.unwrap_or_else(|| panic!("{name}: no control word written"));
        let hot = wear.fig57_most_written.as_ref().expect("a Fig. 5.7 byte");
        assert_ne!(hot.offset / 8192, 2, "{name}: {hot:?} lies in the control page");
        assert_eq!(control.offset / 8192, 2, "{name}: {control:?} is on the control page");
        assert_eq!(wear.log_control_max_writes, Some(control.writes));
    }
}

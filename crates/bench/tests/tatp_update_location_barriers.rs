//! TATP Update-Location writes one subscriber row, so under Pelley's In-Place Updates it is
//! one page update: `persist_wal` (2 barriers) + `persist_page` (4) + the commit's 1 = 7
//! (000 §3.2, Fig. 2; §6.1: "TATP ... only updates a single page per transaction"). Would
//! catch: the workload splitting the row write into two `update` calls (it did: the field and
//! then the version, 13 barriers), which doubles the In-Place barrier cost Fig. 5 and Table 6
//! measure.

use bench::{run, Hooks, Report, RunLength, RunOptions};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use workloads::tatp::{Tatp, TatpConfig, TatpTxn};

fn fences_per_update_location(protocol: engines::inplace::Protocol) -> f64 {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).expect("a dram region");
    let mut options = EngineOptions { workers: 1, ..Default::default() };
    options.inplace.protocol = protocol;
    let engine = engines::open("inplace", region, &options).expect("inplace opens");
    let cfg = TatpConfig {
        subscribers: 1_000,
        txn: Some(TatpTxn::UpdateLocation),
        ..TatpConfig::default()
    };
    let workload = Tatp::new(cfg).expect("a valid TATP");
    let length = RunLength::Transactions { per_thread: 400 };
    let result = run(
        &*engine,
        &workload,
        &RunOptions { threads: 1, length, ..Default::default() },
        &Hooks::default(),
    )
    .expect("the run completes");
    assert!(result.checker.passed(), "{}", result.checker);
    assert_eq!(result.committed, 400);
    let report = Report::new(&result, None, serde_json::json!({}));
    report.per_txn.fences.expect("the engine has a region")
}

#[test]
fn update_location_is_one_page_update_under_pelleys_protocol() {
    assert_eq!(fences_per_update_location(engines::inplace::Protocol::Pelley), 7.0);
}

#[test]
fn update_location_under_our_protocol_costs_fewer_barriers() {
    let lean = fences_per_update_location(engines::inplace::Protocol::Lean);
    assert!(lean < 7.0, "lean: {lean} fences per Update-Location");
    assert!(lean >= 1.0, "lean: {lean} fences per Update-Location (a commit must persist)");
}

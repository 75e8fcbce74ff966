//! An N-Store YCSB update rewrites the whole tuple (`write_all_fields`): its version, checksum
//! and fields are one contiguous range of the row, written with one `update` call, so under
//! `inplace` it costs what TATP Update-Location's single row write costs (one undo record and
//! its barrier, the commit's). Would catch: the workload writing the version and checksum and
//! then the fields as two `update` calls, as it did until 2026-11-29 (one more undo record and
//! barrier per update: 4 fences per update-only transaction instead of 3).

use bench::{run, Hooks, Report, RunLength, RunOptions};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use workloads::tatp::{Tatp, TatpConfig, TatpTxn};
use workloads::ycsb::{Skew, Ycsb, YcsbConfig};
use workloads::Workload;

fn fences_per_txn(workload: &dyn Workload, txns: u64) -> f64 {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 64 << 20)).expect("a dram region");
    let options = EngineOptions { workers: 1, ..Default::default() };
    let engine = engines::open("inplace", region, &options).expect("inplace opens");
    let length = RunLength::Transactions { per_thread: txns };
    let result = run(
        &*engine,
        workload,
        &RunOptions { threads: 1, length, ..Default::default() },
        &Hooks::default(),
    )
    .expect("the run completes");
    assert!(result.checker.passed(), "{}", result.checker);
    assert_eq!(result.committed, txns);
    let report = Report::new(&result, None, serde_json::json!({}));
    report.per_txn.fences.expect("the engine has a region")
}

fn update_only(write_all_fields: bool) -> Ycsb {
    let cfg = YcsbConfig {
        record_count: 1_000,
        read_proportion: 0.0,
        update_proportion: 1.0,
        write_all_fields,
        ..YcsbConfig::nstore("write-heavy", Skew::Low).expect("an N-Store mix")
    };
    Ycsb::new(cfg).expect("a valid YCSB")
}

#[test]
fn a_whole_tuple_update_costs_the_barriers_of_one_row_write() {
    let tatp = Tatp::new(TatpConfig {
        subscribers: 1_000,
        txn: Some(TatpTxn::UpdateLocation),
        ..TatpConfig::default()
    })
    .expect("a valid TATP");
    let one_row_write = fences_per_txn(&tatp, 400);
    let whole_tuple = fences_per_txn(&update_only(true), 400);
    assert_eq!(whole_tuple, one_row_write, "fences per whole-tuple YCSB update");
}

#[test]
fn a_one_field_update_writes_two_ranges() {
    // Fields other than the first are not next to the version and checksum: two writes, one
    // more undo record and barrier than the whole tuple's (field 0 alone is contiguous with
    // them, hence "more", not "one more" on average).
    let whole_tuple = fences_per_txn(&update_only(true), 400);
    let one_field = fences_per_txn(&update_only(false), 400);
    assert!(one_field > whole_tuple + 0.5, "one field {one_field}, whole tuple {whole_tuple}");
}

//! A timed power run on 1 and 2 threads commits, measures latency and passes the checker; a
//! counted run attributes device statistics to transactions exactly. Guards against a driver
//! that miscounts commits or reads the device statistics over the wrong interval.

mod common;

use bench::{run, Hooks, Report, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use std::time::Duration;

fn timed(threads: usize) -> RunOptions {
    RunOptions {
        threads,
        length: RunLength::Timed {
            warmup: Duration::from_millis(50),
            duration: Duration::from_millis(200),
        },
        ..RunOptions::default()
    }
}

#[test]
fn timed_runs_on_one_and_two_threads_pass_the_checker() {
    for threads in [1, 2] {
        let engine = TinyEngine::new(Durability::Sync);
        let bank = Bank::new(64);
        let result = run(&engine, &bank, &timed(threads), &Hooks::default()).unwrap();
        assert!(result.committed > 100, "{threads} threads: {}", result.committed);
        assert!(result.checker.passed(), "{}", result.checker);
        assert!(result.tps > 0.0);
        assert!(result.measured >= Duration::from_millis(200));
        assert!(result.completed_total >= result.committed);
        assert_eq!(result.per_worker.len(), threads);
        assert_eq!(result.per_worker.iter().sum::<u64>(), result.committed);
        assert_eq!(result.kinds.values().sum::<u64>(), result.committed);
        assert_eq!(result.latency_ns.len(), result.committed);
        assert!(result.latency_ns.value_at_quantile(0.5) > 0);
        assert_eq!(result.aborted, 0);
        assert!(result.device.is_none());
    }
}

#[test]
fn counted_runs_attribute_device_statistics_exactly() {
    let engine = TinyEngine::new(Durability::Sync).with_region();
    let bank = Bank::new(64);
    let options = RunOptions {
        threads: 2,
        length: RunLength::Transactions { per_thread: 500 },
        ..RunOptions::default()
    };
    let result = run(&engine, &bank, &options, &Hooks::default()).unwrap();
    assert_eq!(result.committed, 1000);
    let device = result.device.expect("the engine has a region");
    assert_eq!(device.fences, 1000);
    let report = Report::new(&result, None, serde_json::json!({}));
    assert_eq!(report.per_txn.fences, Some(1.0));
    assert_eq!(report.per_txn.lines_flushed, Some(1.0));
    assert_eq!(report.per_txn.bytes_written, Some(8.0));
}

#[test]
fn json_has_every_documented_key() {
    let engine = TinyEngine::new(Durability::Sync).with_region();
    let bank = Bank::new(16);
    let result = run(&engine, &bank, &timed(1), &Hooks::default()).unwrap();
    let report = Report::new(&result, Some(1.5), serde_json::json!({"medium": "dram"}));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    for key in [
        "engine",
        "workload",
        "threads",
        "committed",
        "aborted",
        "tps",
        "latency_us",
        "per_txn",
        "checker",
        "recovery_ms",
        "config",
    ] {
        assert!(json.get(key).is_some(), "missing {key}: {json}");
    }
    for key in ["p50", "p95", "p99", "max"] {
        assert!(json["latency_us"][key].is_number(), "latency_us.{key}: {json}");
    }
    for key in ["fences", "lines_flushed", "bytes_written", "delay_ns"] {
        assert!(json["per_txn"][key].is_number(), "per_txn.{key}: {json}");
    }
    assert_eq!(json["checker"], "pass");
    assert_eq!(json["engine"], "tiny");
    assert_eq!(json["recovery_ms"], 1.5);
    assert_eq!(json["config"]["medium"], "dram");
    let header = report.csv_header();
    let row = report.csv_row();
    assert_eq!(header.split(',').count(), row.split(',').count());
    assert!(header.ends_with("config.medium"));
    assert!(report.human().contains("checker"));
}

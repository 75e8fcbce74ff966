//! A run that cannot be measured says why: invalid options, a non-retryable engine error, a
//! livelock of conflicts, a panicking worker, a failing checker; conflicts are counted as aborts
//! and a stop request ends the run early. Guards against a driver that hangs or reports success.

mod common;

use bench::{run, BenchError, Checker, Hooks, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn counted(threads: usize, per_thread: u64) -> RunOptions {
    RunOptions { threads, length: RunLength::Transactions { per_thread }, ..RunOptions::default() }
}

#[test]
fn invalid_options_are_rejected_before_loading() {
    let engine = TinyEngine::new(Durability::Sync);
    let bank = Bank::new(4);
    for options in [
        counted(0, 10),
        counted(1, 0),
        RunOptions { max_pending: 0, ..counted(1, 10) },
        RunOptions {
            length: RunLength::Timed { warmup: Duration::ZERO, duration: Duration::ZERO },
            ..RunOptions::default()
        },
    ] {
        let err = run(&engine, &bank, &options, &Hooks::default()).unwrap_err();
        assert!(matches!(err, BenchError::Options(_)), "{err}");
    }
    assert!(engine.tables().is_empty(), "nothing was loaded");
}

use storage::Engine;

#[test]
fn a_non_retryable_error_ends_the_run() {
    let engine = TinyEngine::new(Durability::Sync);
    engine.broken.store(true, Ordering::Relaxed);
    let bank = Bank::new(4);
    let err = run(&engine, &bank, &counted(2, 10), &Hooks::default()).unwrap_err();
    assert!(matches!(err, BenchError::Txn { .. }), "{err}");
    assert!(err.to_string().contains("injected failure"), "{err}");
}

#[test]
fn a_timed_run_with_a_failing_worker_stops_early() {
    let engine = TinyEngine::new(Durability::Sync);
    engine.broken.store(true, Ordering::Relaxed);
    let bank = Bank::new(4);
    let options = RunOptions {
        threads: 2,
        length: RunLength::Timed {
            warmup: Duration::from_secs(30),
            duration: Duration::from_secs(30),
        },
        ..RunOptions::default()
    };
    let started = Instant::now();
    let err = run(&engine, &bank, &options, &Hooks::default()).unwrap_err();
    assert!(matches!(err, BenchError::Txn { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn conflicts_are_counted_as_aborts() {
    let engine = TinyEngine::new(Durability::Sync).with_conflicts(3);
    let bank = Bank::new(16);
    let result = run(&engine, &bank, &counted(1, 300), &Hooks::default()).unwrap();
    assert_eq!(result.committed, 300);
    assert!(result.aborted >= 100, "aborted {}", result.aborted);
    assert!(result.checker.passed(), "{}", result.checker);
}

#[test]
fn endless_conflicts_are_a_livelock() {
    let engine = TinyEngine::new(Durability::Sync).with_conflicts(1);
    let bank = Bank::new(16);
    let err = run(&engine, &bank, &counted(1, 1_000_000), &Hooks::default()).unwrap_err();
    assert!(matches!(err, BenchError::Livelock { .. }), "{err}");
}

#[test]
fn a_panicking_worker_is_reported() {
    let engine = TinyEngine::new(Durability::Sync);
    let bank = Bank { panic_in_worker_1: true, ..Bank::new(4) };
    let err = run(&engine, &bank, &counted(2, 1_000_000), &Hooks::default()).unwrap_err();
    match err {
        BenchError::Panic { worker, message } => {
            assert_eq!(worker, 1);
            assert!(message.contains("told to panic"), "{message}");
        }
        other => panic!("expected a panic report, got {other}"),
    }
}

#[test]
fn a_failing_checker_is_the_verdict() {
    let engine = TinyEngine::new(Durability::Sync);
    let bank = Bank { corrupt_check: true, ..Bank::new(4) };
    let result = run(&engine, &bank, &counted(1, 10), &Hooks::default()).unwrap();
    assert!(matches!(&result.checker, Checker::Fail(r) if r.contains("balances")));
    assert!(result.checker.to_string().starts_with("fail: "));
    let unchecked = RunOptions { check: false, ..counted(1, 10) };
    let engine = TinyEngine::new(Durability::Sync);
    let result = run(&engine, &bank, &unchecked, &Hooks::default()).unwrap();
    assert_eq!(result.checker, Checker::Skipped);
}

#[test]
fn a_stop_request_ends_a_long_run() {
    let engine = TinyEngine::new(Durability::Sync);
    let bank = Bank::new(4);
    let stop = AtomicBool::new(false);
    let options = RunOptions {
        threads: 1,
        length: RunLength::Timed {
            warmup: Duration::from_millis(10),
            duration: Duration::from_secs(60),
        },
        ..RunOptions::default()
    };
    let hooks = Hooks { stop: Some(&stop), ..Hooks::default() };
    let started = Instant::now();
    let result = std::thread::scope(|s| {
        s.spawn(|| {
            // Long enough for the load, the clock's calibration (~20 ms, before the workers
            // start) and the warm-up on a busy 2-core host, so the measured run has begun.
            std::thread::sleep(Duration::from_millis(300));
            stop.store(true, Ordering::Relaxed);
        });
        run(&engine, &bank, &options, &hooks).unwrap()
    });
    assert!(result.stopped_early);
    assert!(result.committed > 0);
    assert!(started.elapsed() < Duration::from_secs(10));
}

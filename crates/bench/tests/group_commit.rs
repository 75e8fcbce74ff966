//! Commits acknowledged late (group commit) are measured until durable without blocking the
//! worker, the pending queue stays within its bound, and every commit is counted exactly once.
//! Guards against a driver that blocks on every commit or loses commits still pending at the end.

mod common;

use bench::{run, AckLog, Hooks, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use std::time::Duration;

#[test]
fn pending_commits_are_polled_bounded_and_all_counted() {
    let engine = TinyEngine::new(Durability::Group { lag: 8 });
    let bank = Bank::new(64);
    let options = RunOptions {
        threads: 2,
        length: RunLength::Transactions { per_thread: 1000 },
        max_pending: 4,
        ..RunOptions::default()
    };
    let log = AckLog::new(usize::MAX);
    let hooks = Hooks { sink: Some(&log), ..Hooks::default() };
    let result = run(&engine, &bank, &options, &hooks).unwrap();
    assert_eq!(result.committed, 2000);
    assert_eq!(result.completed_total, 2000);
    assert!(result.pending_high_water <= 4 && result.pending_high_water > 0);
    assert!(result.pending_full_waits > 0, "a lag of 8 must fill a queue of 4");
    assert_eq!(log.take().len(), 2000);
    assert!(result.checker.passed(), "{}", result.checker);
}

#[test]
fn a_deep_queue_never_blocks_when_durability_catches_up() {
    let engine = TinyEngine::new(Durability::Group { lag: 8 });
    let bank = Bank::new(64);
    let options = RunOptions {
        threads: 1,
        length: RunLength::Timed {
            warmup: Duration::from_millis(20),
            duration: Duration::from_millis(100),
        },
        max_pending: 64,
        ..RunOptions::default()
    };
    let result = run(&engine, &bank, &options, &Hooks::default()).unwrap();
    assert!(result.committed > 0);
    assert_eq!(result.pending_full_waits, 0);
    assert!(result.pending_high_water >= 8);
    assert!(result.checker.passed(), "{}", result.checker);
}

//! A `--txns N` run is timed from the workers' start to the moment the last of its N
//! transactions became durable, not to the coordinator's next progress poll.

mod common;

use bench::{run, Hooks, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use std::time::{Duration, Instant};

/// Regression (issue 36): counted runs were timed to the driver's 50 ms poll, so every short
/// run read as N / 50 ms (each quick NVWAL Fig. 7 point at ~5,988 tps).
#[test]
fn txns_runs_are_timed_to_the_last_commit_not_the_poll() {
    for (threads, durability) in [(1, Durability::Sync), (2, Durability::Group { lag: 4 })] {
        let engine = TinyEngine::new(durability);
        let bank = Bank::new(64);
        let options = RunOptions {
            threads,
            length: RunLength::Transactions { per_thread: 300 },
            ..RunOptions::default()
        };
        let started = Instant::now();
        let r = run(&engine, &bank, &options, &Hooks::default())
            .unwrap_or_else(|e| panic!("{threads} threads: {e}"));
        let whole = started.elapsed();
        assert_eq!(r.committed, 300 * threads as u64);
        // Microsecond transactions: the window is a few milliseconds, far below one poll.
        assert!(
            r.measured > Duration::ZERO && r.measured < Duration::from_millis(25),
            "{threads} threads: measured {:?} (the poll is 50 ms)",
            r.measured
        );
        assert!(r.measured <= whole, "{:?} > {:?}", r.measured, whole);
        let tps = r.committed as f64 / r.measured.as_secs_f64();
        assert!((r.tps - tps).abs() <= tps * 1e-9, "tps {} vs {tps}", r.tps);
    }
}

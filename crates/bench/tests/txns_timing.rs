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
        // Microsecond transactions: the window is a few milliseconds, far below one poll. A
        // loaded machine can deschedule a worker for longer than that (CI beside two crash
        // campaigns on 2 cores measured 405 ms once), so the fastest of three runs is judged:
        // timed to the poll, every run would read 50 ms or more.
        let mut fastest = Duration::MAX;
        for _ in 0..3 {
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
            assert!(r.measured > Duration::ZERO && r.measured <= whole, "{r:?} vs {whole:?}");
            let tps = r.committed as f64 / r.measured.as_secs_f64();
            assert!((r.tps - tps).abs() <= tps * 1e-9, "tps {} vs {tps}", r.tps);
            fastest = fastest.min(r.measured);
            if fastest < Duration::from_millis(25) {
                break;
            }
        }
        assert!(
            fastest < Duration::from_millis(25),
            "{threads} threads: measured {fastest:?} at best of 3 (the poll is 50 ms)"
        );
    }
}

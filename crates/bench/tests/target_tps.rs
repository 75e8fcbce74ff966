//! `--target-tps` (issue 38): thesis Fig. 5.7 runs every method at In-Place Updates' throughput,
//! so the driver can cap the commit rate. Would catch: a limiter that does not limit, one that
//! limits per worker instead of in total, or one that never lets a run reach its target.

mod common;

use bench::{run, Hooks, RunLength, RunOptions};
use common::{Bank, Durability, TinyEngine};
use std::time::Duration;

fn paced(threads: usize, target_tps: Option<f64>) -> f64 {
    let options = RunOptions {
        threads,
        length: RunLength::Timed {
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(600),
        },
        target_tps,
        ..RunOptions::default()
    };
    let engine = TinyEngine::new(Durability::Sync);
    let result = run(&engine, &Bank::new(64), &options, &Hooks::default()).expect("the run");
    assert!(result.checker.passed(), "{}", result.checker);
    result.tps
}

#[test]
fn the_commit_rate_follows_the_target_on_one_and_two_threads() {
    let flat_out = paced(1, None);
    assert!(flat_out > 20_000.0, "the tiny engine runs far faster than the target: {flat_out}");
    for threads in [1, 2] {
        let tps = paced(threads, Some(5_000.0));
        // The target is the total: two workers pace at half the rate each. A loaded 2-core
        // machine may fall short a little; it must never run much over.
        assert!((3_500.0..=5_250.0).contains(&tps), "{threads} threads at 5,000: {tps:.0} tps");
    }
}

#[test]
fn a_target_below_one_tps_is_refused() {
    let options = RunOptions { target_tps: Some(0.0), ..RunOptions::default() };
    assert!(options.validate().is_err());
}

//! Regression test for issue 36's "strand persistency is 100–250× off Table 8.1": the rate we
//! reported was the whole critical path ÷ inserts, and under §8.1's coalescing rule strand's
//! queue heads all coalesce, so its path is a constant and its "rate" grew with trace length.
//! Would catch: any path-per-insert measure that depends on how many inserts were traced —
//! the same workload traced for N and 4N inserts must give the same steady-state path per
//! insert, under every model, on one thread and on two.

use persistency::analyse::{analyse, Config, Model};
use persistency::queue::Design;
use persistency::rate::{traced_run, Schedule};

/// Steady-state path per insert and the whole run's critical path.
fn measure(design: Design, threads: u64, inserts: u64, model: Model) -> (f64, u64) {
    let t = traced_run(design, threads, inserts, Schedule::RoundRobin).unwrap();
    let a = analyse(&t.events, t.config(Config::new(model))).unwrap();
    (t.path_per_insert(&a), a.critical_path)
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.05 * a.max(b) + 1e-9
}

#[test]
fn strand_rate_does_not_grow_with_trace_length() {
    let n = 300;
    for design in [Design::CopyWhileLocked, Design::TwoLockConcurrent, Design::QueueHoles] {
        for threads in [1, 2] {
            for model in Model::ALL {
                let (short, _) = measure(design, threads, n, model);
                let (long, _) = measure(design, threads, 4 * n, model);
                assert!(
                    same(short, long),
                    "{design:?}/{threads}/{model:?}: {short} per insert at {n}, {long} at {}",
                    4 * n
                );
            }
        }
    }
}

#[test]
fn strand_queue_heads_coalesce_so_the_whole_path_is_constant() {
    // The cause, pinned: one thread, CWL, §8.1's rule. The total path does not move with the
    // trace (2 = entry, then the head every later head coalesces into), so its steady-state
    // growth is 0 and the persist-bound rate is unbounded (compute-bound at any latency).
    let n = 300;
    let (short, short_total) = measure(Design::CopyWhileLocked, 1, n, Model::Strand);
    let (long, long_total) = measure(Design::CopyWhileLocked, 1, 4 * n, Model::Strand);
    assert_eq!((short_total, long_total), (2, 2));
    assert_eq!((short, long), (0.0, 0.0));
    // Epoch persistency on the same trace grows one step per insert: the measure is not 0
    // for every model.
    let (epoch, _) = measure(Design::CopyWhileLocked, 1, 4 * n, Model::Epoch);
    assert_eq!(epoch, 1.0);
}

/// The finite-trace reading (issue 36): the whole path of an N-insert trace ÷ N, the measure
/// on which Table 8.1's "strand: compute-bound (above 1)" is judged. Would catch it reading
/// the steady state (0 for strand) or a prefix of a longer trace with the longer trace's
/// count: on the real queues strand's whole path is a constant, so the reading is C / N.
#[test]
fn finite_trace_reading_is_the_constant_strand_path_over_the_trace() {
    for (design, strand_path) in
        [(Design::CopyWhileLocked, 2), (Design::TwoLockConcurrent, 2), (Design::QueueHoles, 4)]
    {
        for n in [100, 150] {
            let t = traced_run(design, 1, n, Schedule::RoundRobin).unwrap();
            let a = analyse(&t.events, Config::new(Model::Strand)).unwrap();
            assert_eq!(a.critical_path, strand_path, "{design:?} at {n}");
            assert_eq!(t.finite_path_per_insert(&a), strand_path as f64 / n as f64);
        }
    }
}

//! The analyser on real queue traces, one thread, where Fig. 7.1's dependences give the exact
//! steady-state critical path per insert (8-byte atomic persists and tracking): a 108-byte
//! length + entry is 14 word persists, serial under strict persistency.
//! * CWL: strict 14 + head = 15 per insert; epoch 1 (each entry's words in one epoch, entries
//!   chained by the barrier before each head); strand: a constant 2 for the whole run (entries
//!   independent, every head coalesces into the previous one).
//! * 2LC: as CWL (one thread never completes out of order).
//! * QH: strict 1 + 1 + 1 (length, end bit, head) + 13 + 1 = 17; epoch 2 (the end bit and the
//!   next length share an epoch, as do the head and the copy); strand a constant 4.
//!
//! Would catch: a barrier or strand annotation missing from a queue, or an analyser rule
//! drifting from §7.2 (each shows up as a different path).

use persistency::analyse::{analyse, Config, Model};
use persistency::queue::Design;
use persistency::rate::{traced_run, Schedule};

fn paths(design: Design, threads: u64, inserts: u64) -> [u64; 3] {
    let t = traced_run(design, threads, inserts, Schedule::RoundRobin).unwrap();
    Model::ALL.map(|m| analyse(&t.events, Config::new(m)).unwrap().critical_path)
}

#[test]
fn one_thread_paths_match_figure_7_1() {
    let n = 200;
    assert_eq!(paths(Design::CopyWhileLocked, 1, n), [15 * n, n + 1, 2]);
    assert_eq!(paths(Design::TwoLockConcurrent, 1, n), [15 * n, n + 1, 2]);
    assert_eq!(paths(Design::QueueHoles, 1, n), [17 * n, 2 * n + 1, 4]);
}

#[test]
fn threads_help_strict_persistency_only_where_the_design_copies_outside_the_lock() {
    let n = 200;
    // CWL copies under its lock: two threads are no better than one.
    assert_eq!(paths(Design::CopyWhileLocked, 2, n)[0], 15 * n);
    // 2LC and QH copy outside the lock: two alternating threads overlap their copies.
    for design in [Design::TwoLockConcurrent, Design::QueueHoles] {
        let one = paths(design, 1, n)[0];
        let two = paths(design, 2, n)[0];
        assert!(two * 10 < one * 6, "{design:?}: {two} vs {one}");
    }
}

#[test]
fn coarse_tracking_and_large_atomic_persists_move_epoch_and_strict_as_figs_8_2_8_3() {
    let t = traced_run(Design::CopyWhileLocked, 1, 100, Schedule::RoundRobin).unwrap();
    let run = |model, atomic, tracking| {
        let c =
            Config { atomic_persist_bytes: atomic, tracking_bytes: tracking, ..Config::new(model) };
        analyse(&t.events, c).unwrap().critical_path
    };
    // Fig. 8.2: larger atomic persists let strict coalesce its serial words.
    assert!(run(Model::Strict, 512, 8) * 4 < run(Model::Strict, 8, 8));
    // Fig. 8.3: coarse tracking makes an entry's words conflict, reintroducing order under
    // epoch persistency; strict is already serial.
    assert!(run(Model::Epoch, 8, 512) > 4 * run(Model::Epoch, 8, 8));
    assert_eq!(run(Model::Strict, 8, 512), run(Model::Strict, 8, 8));
}

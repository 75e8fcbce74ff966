//! Every queue design, on 1 and 2 threads, crashed at many stores and fences under every crash
//! policy, recovers exactly inserted entries in order, including every acknowledged insert.
//! Would catch: a head persisted before its entry, an end bit before its entry, a head that
//! moves backwards under 2LC's out-of-order completion, or an acknowledgement given too early.

use persistency::crash::{crash_many, CrashOptions};
use persistency::queue::Design;
use pmem::CrashPolicy;

fn check(design: Design, threads: u64, points: u64) {
    check_with(design, threads, points, None);
}

fn check_with(design: Design, threads: u64, points: u64, wrap_slots: Option<u64>) {
    let o = CrashOptions { design, threads, inserts_per_thread: 30, fault: None, wrap_slots };
    let r = crash_many(&o, points, &CrashPolicy::ALL, 7 + threads, 10).unwrap();
    assert!(
        r.cuts * 10 >= r.points * 9,
        "{design:?}/{threads}: only {} of {} points cut",
        r.cuts,
        r.points
    );
    assert!(r.acked > 0 && r.recovered >= r.acked, "{design:?}/{threads}: {r:?}");
    assert!(r.violations.is_empty(), "{design:?}/{threads}: {:#?}", r.violations);
    if wrap_slots.is_some() {
        assert!(r.acked_dequeues > r.points, "{design:?}/{threads}: few dequeues: {r:?}");
    }
}

#[test]
fn copy_while_locked_recovers() {
    check(Design::CopyWhileLocked, 1, 150);
    check(Design::CopyWhileLocked, 2, 150);
}

#[test]
fn two_lock_concurrent_recovers() {
    check(Design::TwoLockConcurrent, 1, 150);
    check(Design::TwoLockConcurrent, 2, 150);
}

#[test]
fn queue_holes_recovers() {
    check(Design::QueueHoles, 1, 150);
    check(Design::QueueHoles, 2, 150);
}

/// Inserts and dequeues on a 4-slot queue (30 inserts per thread: the buffer wraps about 7
/// times per thread): a crash at any store or fence recovers a prefix-consistent queue.
/// Would catch: a recycled slot overwritten before the tail that freed it is durable, a tail
/// persisted past a head that is not, an acknowledged dequeue undone, FIFO order broken.
#[test]
fn copy_while_locked_recovers_across_wraps() {
    check_with(Design::CopyWhileLocked, 1, 150, Some(4));
    check_with(Design::CopyWhileLocked, 2, 150, Some(4));
}

#[test]
fn two_lock_concurrent_recovers_across_wraps() {
    check_with(Design::TwoLockConcurrent, 1, 150, Some(4));
    check_with(Design::TwoLockConcurrent, 2, 150, Some(4));
}

#[test]
fn queue_holes_recovers_across_wraps() {
    check_with(Design::QueueHoles, 1, 150, Some(4));
    check_with(Design::QueueHoles, 2, 150, Some(4));
}

/// The long run: `cargo nextest run --release -p persistency --run-ignored only`.
#[test]
#[ignore]
fn every_design_recovers_long() {
    for design in Design::ALL {
        for threads in [1, 2, 4] {
            check(design, threads, 3000);
            check_with(design, threads, 3000, Some(threads + 3));
        }
    }
}

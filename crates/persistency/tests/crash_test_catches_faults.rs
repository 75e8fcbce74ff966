//! The crash test is shown to catch the bugs it exists for: each test-only fault drops one
//! persist barrier of one design, and crashing that queue at a few hundred points finds a
//! recovered entry that was never durably inserted (stale or torn) or a lost acknowledged one.

use persistency::crash::{crash_many, CrashOptions};
use persistency::queue::Fault;
use pmem::CrashPolicy;

fn caught(fault: Fault, threads: u64) -> usize {
    caught_with(fault, threads, None)
}

fn caught_with(fault: Fault, threads: u64, wrap_slots: Option<u64>) -> usize {
    let o = CrashOptions {
        design: fault.design(),
        threads,
        inserts_per_thread: 30,
        fault: Some(fault),
        wrap_slots,
    };
    let r = crash_many(&o, 300, &[CrashPolicy::Evict, CrashPolicy::Torn], 11, 50).unwrap();
    r.violations.len()
}

#[test]
fn cwl_without_its_data_barrier_is_caught() {
    assert!(caught(Fault::CwlSkipDataBarrier, 1) > 0);
}

#[test]
fn two_lock_without_its_data_barrier_is_caught() {
    assert!(caught(Fault::TwoLockSkipDataBarrier, 1) > 0);
}

#[test]
fn queue_holes_without_its_head_barrier_is_caught() {
    assert!(caught(Fault::HolesSkipHeadBarrier, 1) > 0);
}

#[test]
fn queue_holes_without_its_end_barrier_is_caught() {
    assert!(caught(Fault::HolesSkipEndBarrier, 1) > 0);
}

/// Without the wrap-around barrier an insert into a recycled slot can persist before the
/// dequeue that freed it: recovery finds the new entry at the old one's place.
#[test]
fn cwl_without_its_tail_barrier_is_caught_across_a_wrap() {
    assert!(caught_with(Fault::CwlSkipTailBarrier, 1, Some(4)) > 0);
}

/// 2LC reuses slots the same way and orders the same barrier before an insert's copy into a
/// recycled slot (QH needs no fault of its own: `queue::Fault::TwoLockSkipTailBarrier`'s doc).
#[test]
fn two_lock_without_its_tail_barrier_is_caught_across_a_wrap() {
    assert!(caught_with(Fault::TwoLockSkipTailBarrier, 1, Some(4)) > 0);
}

#[test]
fn the_persisted_policy_alone_misses_nothing_it_should_not() {
    // Only fenced lines survive under `persisted`: without a barrier, a fault may still be
    // invisible there (nothing unfenced persists), which is why the fault tests use evict and
    // torn. A correct queue must be clean under it too (queue_crash_recovers covers that).
    let o = CrashOptions {
        design: Fault::CwlSkipDataBarrier.design(),
        threads: 1,
        inserts_per_thread: 30,
        fault: None,
        wrap_slots: None,
    };
    let r = crash_many(&o, 100, &[CrashPolicy::Persisted], 3, 10).unwrap();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
}

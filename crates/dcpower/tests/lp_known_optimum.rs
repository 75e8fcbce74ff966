//! The scheduler's LPs on cases small enough to solve by hand (thesis app. B §B.4).
//! Would catch: a sign error in the fail-over term of (B.2), a lost phase-balance row (B.3), or a
//! capping LP that grants more than a failure could carry.

use dcpower::schedule::{self, FeedLoads, Wiring};

/// Feed index of (pdu, phase).
fn f(pdu: usize, phase: usize) -> usize {
    pdu * 3 + phase
}

#[test]
fn two_pdus_slack_is_capacity_minus_total() {
    // Both servers can fail over either way: each feed must carry everything. Slack = 10 − 2.
    let w = Wiring::from_feeds(2, vec![[f(0, 0), f(1, 0)]; 2]).unwrap();
    let frac = schedule::fractional(&w, &[1.0, 1.0], 10.0, true).unwrap().unwrap();
    assert!((frac.slack_kw - 8.0).abs() < 1e-6, "{}", frac.slack_kw);
}

#[test]
fn symmetric_triangle_splits_each_pair_evenly() {
    // Three PDUs, every pair 6 kW (three 2 kW servers) on phase 0. Symmetric optimum: each PDU
    // carries 6, takes 3 more from a failed neighbour: Slack = 10 − 9 = 1.
    let mut feeds = Vec::new();
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        feeds.extend(std::iter::repeat_n([f(a, 0), f(b, 0)], 3));
    }
    let w = Wiring::from_feeds(3, feeds).unwrap();
    let budgets = vec![2.0; 9];
    let frac = schedule::fractional(&w, &budgets, 10.0, false).unwrap().unwrap();
    assert!((frac.slack_kw - 1.0).abs() < 1e-6, "{}", frac.slack_kw);
    for x in &frac.to_first_kw {
        assert!((x - 3.0).abs() < 1e-6, "{x}");
    }
}

#[test]
fn phase_balance_row_binds_and_is_relaxed_when_impossible() {
    // All load on phase 0 of both PDUs: phases 1 and 2 carry 0, so (B.3) needs each side's
    // phase-0 load ≤ 0.2·cap. 12 kW cannot split into two halves ≤ 2 kW (cap 10).
    let w = Wiring::from_feeds(2, vec![[f(0, 0), f(1, 0)]; 4]).unwrap();
    let budgets = [3.0; 4];
    assert!(schedule::fractional(&w, &budgets, 10.0, true).unwrap().is_none());
    let s = schedule::schedule(&w, &budgets, &[0.0; 4], 10.0).unwrap();
    assert!(s.phase_balance_relaxed);
    // With a capacity of 30, (B.3) allows 6 kW per side: exactly the even split.
    let frac = schedule::fractional(&w, &budgets, 30.0, true).unwrap().unwrap();
    assert!((frac.to_first_kw[0] - 6.0).abs() < 1e-6);
}

#[test]
fn capping_lp_grants_exactly_what_survives_a_failure() {
    // Two 5 kW servers that can each fail over onto the other PDU: a 6 kW feed can hold 6 in
    // total. Optimal caps grant 6 and throttle 4.
    let w = Wiring::from_feeds(2, vec![[f(0, 0), f(1, 0)]; 2]).unwrap();
    let s = schedule::schedule(&w, &[5.0, 5.0], &[0.0, 0.0], 6.0).unwrap();
    assert!(s.capped);
    assert!((s.throttled_kw - 4.0).abs() < 1e-6, "{}", s.throttled_kw);
    assert!(FeedLoads::new(&w, &s.active, &s.caps_kw).max_need() <= 6.0 + 1e-6);
}

#[test]
fn rounding_takes_largest_first_towards_targets() {
    // One group, targets 5 / 5, servers 4, 3, 2, 1: 4 → first, 3 → second, 2 → second, 1 → first.
    let w = Wiring::from_feeds(2, vec![[f(0, 0), f(1, 0)]; 4]).unwrap();
    let budgets = [4.0, 3.0, 2.0, 1.0];
    let frac = schedule::Fractional { to_first_kw: vec![5.0], slack_kw: 0.0 };
    let active = schedule::round(&w, &budgets, &frac, 100.0);
    assert_eq!(active, vec![0, 1, 1, 0]);
}

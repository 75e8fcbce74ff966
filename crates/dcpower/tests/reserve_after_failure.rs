//! Power Routing keeps the single-PDU-failure reserve (thesis app. B §B.3.2, §B.4): after any PDU
//! fails and its servers switch to their other feed, no surviving feed exceeds its capacity.
//! Would catch: a schedule that counts only the normal-case load, or caps that ignore fail-over.

use dcpower::schedule::{self, loads_after_failure, FeedLoads, Mix};
use dcpower::sim::Setup;
use dcpower::topology::Kind;
use dcpower::trace::TraceSpec;

fn small_trace() -> dcpower::trace::Trace {
    TraceSpec { servers: 240, minutes: 180, idle_fraction: 0.6, seed: 7 }.generate().unwrap()
}

fn assert_survives_every_failure(setup: &Setup, t: usize, phase_cap: f64) -> f64 {
    let budgets = &setup.trace.demand_kw[t - 1];
    let s = schedule::schedule(&setup.wiring, budgets, &setup.trace.idle_kw, phase_cap).unwrap();
    for failed in 0..setup.topology.pdus {
        let load = loads_after_failure(&setup.wiring, &s.active, &s.caps_kw, failed);
        for (feed, kw) in load.iter().enumerate() {
            if feed / 3 == failed {
                assert!(*kw == 0.0, "a failed PDU carries nothing");
            } else {
                assert!(*kw <= phase_cap + 1e-6, "feed {feed}: {kw} > {phase_cap} after {failed}");
            }
        }
    }
    s.throttled_kw
}

#[test]
fn schedules_hold_the_reserve_at_and_below_the_needed_capacity() {
    let trace = small_trace();
    for (kind, mix) in [
        (Kind::Wrapped, Mix::Blocks),
        (Kind::XY, Mix::Blocks),
        (Kind::Serpentine, Mix::Blocks),
        (Kind::Serpentine, Mix::WithinRack),
        (Kind::FullyConnected, Mix::PerRack),
        (Kind::FullyConnected, Mix::WithinRack),
    ] {
        let setup = Setup::new(&trace, kind, 6, 20, mix).unwrap();
        let r = setup.evaluate().unwrap();
        assert!(r.with_routing_kw <= r.without_routing_kw + 1e-6, "{kind}: routing never costs");
        assert!(r.with_routing_kw >= r.bound_kw - 1e-6, "{kind}: nothing beats the bound");
        let phase_cap = r.with_routing_kw / 18.0;
        for t in [1, 60, 120, 179] {
            assert_eq!(assert_survives_every_failure(&setup, t, phase_cap), 0.0, "{kind} t={t}");
            // Under-provisioned by 15%: the capping LP throttles, and the reserve still holds.
            assert_survives_every_failure(&setup, t, 0.85 * phase_cap);
        }
        // The whole trace at the reported capacity throttles nothing.
        assert_eq!(setup.run(phase_cap, false).unwrap().throttled_kw_min, 0.0);
        // The static assignment needs the reported static capacity.
        let need = (1..180)
            .map(|t| FeedLoads::new(&setup.wiring, &setup.static_active, &trace.demand_kw[t - 1]))
            .map(|l| l.max_need())
            .fold(0.0, f64::max);
        assert!((need * 18.0 - r.without_routing_kw).abs() < 1e-6);
    }
}

#[test]
fn traces_are_seeded_and_bounded() {
    let a = small_trace();
    let b = small_trace();
    assert_eq!(a.demand_kw, b.demand_kw);
    for row in &a.demand_kw {
        for (s, kw) in row.iter().enumerate() {
            assert!(*kw >= a.idle_kw[s] - 1e-12 && *kw <= a.peak_kw[s] + 1e-12);
        }
    }
    let other = TraceSpec {
        seed: 8,
        ..TraceSpec { servers: 240, minutes: 180, idle_fraction: 0.6, seed: 7 }
    };
    assert_ne!(other.generate().unwrap().demand_kw, a.demand_kw);
    assert!(TraceSpec { servers: 0, ..TraceSpec::default() }.generate().is_err());
}

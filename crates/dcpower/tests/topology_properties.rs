//! Shuffled topologies (thesis app. B §B.3.1, §B.5.2): connectivity, wiring and limits.
//! Would catch: a server wired twice to one PDU, a PDU with no fail-over partner, or the wrong
//! fail-over connectivity (2, 3, 4, 5 for 6 PDUs in the paper).

use dcpower::schedule::{pdu_of, Mix, Wiring};
use dcpower::topology::{Kind, Topology};
use std::collections::BTreeSet;

#[test]
fn connectivity_for_six_pdus_matches_the_paper() {
    let c = |k| Topology::new(k, 6).unwrap().connectivity();
    assert_eq!(c(Kind::Wrapped), 2);
    assert_eq!(c(Kind::XY), 3);
    assert_eq!(c(Kind::Serpentine), 4);
    assert_eq!(c(Kind::FullyConnected), 5);
    assert!(
        (Topology::new(Kind::Wrapped, 6).unwrap().reserve_fraction() - 1.0 / 3.0).abs() < 1e-12
    );
}

#[test]
fn connectivity_across_pdu_counts() {
    for n in 4..=8 {
        assert_eq!(Topology::new(Kind::Wrapped, n).unwrap().connectivity(), 2);
        assert_eq!(Topology::new(Kind::FullyConnected, n).unwrap().connectivity(), n - 1);
        assert_eq!(Topology::new(Kind::XY, n).unwrap().connectivity(), n / 2);
        if n >= 5 {
            assert_eq!(Topology::new(Kind::Serpentine, n).unwrap().connectivity(), 4);
        }
    }
}

#[test]
fn every_server_is_on_two_distinct_pdus_and_every_topology_is_connected() {
    for (kind, mix) in Kind::ALL
        .into_iter()
        .flat_map(|k| [(k, Mix::Blocks), (k, Mix::PerRack), (k, Mix::WithinRack)])
    {
        for n in kind.min_pdus().max(4)..=8 {
            let t = Topology::new(kind, n).unwrap();
            assert!(t.is_connected(), "{kind} with {n} PDUs");
            let w = Wiring::layout(&t, 1000, 20, mix).unwrap();
            assert_eq!(w.feeds.len(), 1000);
            let mut used = BTreeSet::new();
            for f in &w.feeds {
                assert_ne!(pdu_of(f[0]), pdu_of(f[1]), "{kind}: a server on one PDU twice");
                used.insert((pdu_of(f[0]), pdu_of(f[1])));
            }
            let pairs: BTreeSet<_> = t.pairs.iter().copied().collect();
            assert_eq!(used, pairs, "{kind} {n}: the layout uses exactly the topology's pairs");
            // Each PDU's phases differ by at most one server in count.
            for pdu in 0..n {
                let count =
                    |ph: usize| w.feeds.iter().flatten().filter(|&&f| f == pdu * 3 + ph).count();
                let counts: Vec<usize> = (0..3).map(count).collect();
                let spread = counts.iter().max().unwrap() - counts.iter().min().unwrap();
                assert!(spread <= 1, "{kind} {n} PDU {pdu}: {counts:?}");
            }
        }
    }
}

#[test]
fn impossible_pdu_counts_are_errors() {
    assert!(Topology::new(Kind::Wrapped, 2).is_err());
    assert!(Topology::new(Kind::Serpentine, 4).is_err());
    assert!(Topology::new(Kind::XY, 3).is_err());
    assert!(Topology::new(Kind::FullyConnected, 1).is_err());
    assert!(Topology::new(Kind::FullyConnected, 33).is_err());
    assert!("ring".parse::<Kind>().is_err());
    assert_eq!("x-y".parse::<Kind>().unwrap(), Kind::XY);
}

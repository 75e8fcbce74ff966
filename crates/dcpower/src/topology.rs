//! Shuffled power-distribution topologies — thesis app. B §B.3.1. A topology is a list of zones
//! (a wrapped cluster, an X-Y checkerboard square, a serpentine row, the whole fully-connected
//! room), each with the PDU pairs whose busses reach its racks; a server is wired to one phase of
//! each PDU of one of its zone's pairs.
//! Invariant: every pair joins two distinct PDUs, no pair repeats, and every PDU is in some pair,
//! so a single PDU failure always leaves every server a live feed.

use crate::error::{invalid, Result};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// Most PDUs we build a topology for (a limit on the LP size; the paper studies 4–8).
pub const MAX_PDUS: usize = 32;
/// AC phases per PDU.
pub const PHASES: usize = 3;

/// The four topologies of §B.3.1 / Fig. B.4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Conventional high availability (Fig. B.2): PDU i shares racks with i ± 1 (a ring).
    Wrapped,
    /// Checkerboard of zones: ⌈N/2⌉ PDUs run north-south, ⌊N/2⌋ east-west; each zone's racks
    /// take the two busses crossing it, so every row PDU pairs with every column PDU.
    XY,
    /// The wrapped ring with one more turn of each bus: PDU i shares racks with i ± 1 and i ± 2.
    Serpentine,
    /// Every PDU feeds every rack: all N(N − 1)/2 pairs.
    FullyConnected,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Wrapped, Kind::XY, Kind::Serpentine, Kind::FullyConnected];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Wrapped => "wrapped",
            Kind::XY => "x-y",
            Kind::Serpentine => "serpentine",
            Kind::FullyConnected => "fully-connected",
        }
    }

    /// Fewest PDUs for which the topology has its defining connectivity.
    pub fn min_pdus(self) -> usize {
        match self {
            Kind::Wrapped => 3,
            Kind::XY => 4,
            Kind::Serpentine => 5,
            Kind::FullyConnected => 2,
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Kind {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "wrapped" => Ok(Kind::Wrapped),
            "x-y" | "xy" => Ok(Kind::XY),
            "serpentine" => Ok(Kind::Serpentine),
            "fully-connected" | "fully" | "full" => Ok(Kind::FullyConnected),
            _ => {
                Err(invalid("topology", s, "expected wrapped, x-y, serpentine or fully-connected"))
            }
        }
    }
}

/// A topology instance for `pdus` PDUs.
#[derive(Clone, Debug, Serialize)]
pub struct Topology {
    pub kind: Kind,
    pub pdus: usize,
    /// Per zone, the PDU pairs (a < b) its racks' outlets offer, in floor order.
    pub zones: Vec<Vec<(usize, usize)>>,
    /// Every pair of some zone, each once.
    pub pairs: Vec<(usize, usize)>,
}

impl Topology {
    pub fn new(kind: Kind, pdus: usize) -> Result<Self> {
        if pdus < kind.min_pdus() || pdus > MAX_PDUS {
            return Err(invalid(
                "pdus",
                pdus,
                "wrapped needs 3..=32, x-y 4..=32, serpentine 5..=32, fully-connected 2..=32",
            ));
        }
        let n = pdus;
        let ring = |i: usize, d: usize| (i + d) % n;
        let zones: Vec<Vec<(usize, usize)>> = match kind {
            Kind::Wrapped => (0..n).map(|i| vec![(i, ring(i, 1))]).collect(),
            // Row k lies between the busses of PDUs k − 1, k, k + 1 and k + 2 (two per aisle);
            // its outlets pair PDUs at most two apart on the ring.
            Kind::Serpentine => (0..n)
                .map(|k| {
                    let prev = ring(k, n - 1);
                    vec![
                        (prev, k),
                        (k, ring(k, 1)),
                        (ring(k, 1), ring(k, 2)),
                        (prev, ring(k, 1)),
                        (k, ring(k, 2)),
                    ]
                })
                .collect(),
            Kind::XY => {
                let rows = n.div_ceil(2);
                (0..rows).flat_map(|r| (rows..n).map(move |c| vec![(r, c)])).collect()
            }
            Kind::FullyConnected => {
                vec![(0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).collect()]
            }
        };
        let zones: Vec<Vec<(usize, usize)>> = zones
            .into_iter()
            .map(|z| {
                let mut seen = BTreeSet::new();
                z.into_iter()
                    .map(|(a, b)| (a.min(b), a.max(b)))
                    .filter(|p| seen.insert(*p))
                    .collect()
            })
            .collect();
        let mut seen = BTreeSet::new();
        let pairs: Vec<_> = zones.iter().flatten().copied().filter(|p| seen.insert(*p)).collect();
        let t = Self { kind, pdus, zones, pairs };
        debug_assert!(t.pairs.iter().all(|&(a, b)| a < b && b < pdus));
        debug_assert!((0..pdus).all(|p| t.neighbours(p).next().is_some()));
        Ok(t)
    }

    /// The PDUs that share at least one rack with `pdu`: where its load fails over to.
    pub fn neighbours(&self, pdu: usize) -> impl Iterator<Item = usize> + '_ {
        self.pairs.iter().filter_map(move |&(a, b)| match pdu {
            p if p == a => Some(b),
            p if p == b => Some(a),
            _ => None,
        })
    }

    /// Fail-over connectivity c (§B.5.2): the fewest distinct neighbours of any PDU.
    pub fn connectivity(&self) -> usize {
        (0..self.pdus).map(|p| self.neighbours(p).collect::<BTreeSet<_>>().len()).min().unwrap_or(0)
    }

    /// Share of its capacity each PDU must hold in reserve under perfect balance: 1/(c + 1).
    pub fn reserve_fraction(&self) -> f64 {
        1.0 / (self.connectivity() as f64 + 1.0)
    }

    /// Whether the PDU graph is connected (power can be shifted between any two PDUs).
    pub fn is_connected(&self) -> bool {
        let mut reached = vec![false; self.pdus];
        let mut stack = vec![0];
        reached[0] = true;
        while let Some(p) = stack.pop() {
            for q in self.neighbours(p) {
                if !reached[q] {
                    reached[q] = true;
                    stack.push(q);
                }
            }
        }
        reached.into_iter().all(|r| r)
    }
}

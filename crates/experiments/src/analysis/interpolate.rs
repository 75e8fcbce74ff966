//! Where two measured curves cross, and where one reaches a target: linear interpolation
//! between the two measured points that bracket it, never read off a plot (Pelley et al., VLDB
//! 2014, Table 6's break-even latencies; thesis Fig. 5.6's required bandwidths). Pure
//! functions of the points, apart from the claims that use them.

/// Where two curves meet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Crossing {
    /// At this x (linear interpolation between the bracketing points).
    At(f64),
    /// No crossing in `[lo, hi]`; `a_above` tells which curve stays on top.
    None { a_above: bool, lo: f64, hi: f64 },
}

/// The first x where `a - b` changes sign, interpolating linearly. `points` are `(x, a, b)`
/// sorted by x; `None` for fewer than one point.
pub fn crossing(points: &[(f64, f64, f64)]) -> Option<Crossing> {
    let first = points.first()?;
    let last = points.last()?;
    for (i, &(x, a, b)) in points.iter().enumerate() {
        let d = a - b;
        if d == 0.0 {
            return Some(Crossing::At(x));
        }
        if let Some(&(x1, a1, b1)) = points.get(i + 1) {
            let d1 = a1 - b1;
            if d.signum() != d1.signum() && d1 != 0.0 {
                return Some(Crossing::At(x + (x1 - x) * d / (d - d1)));
            }
        }
    }
    Some(Crossing::None { a_above: first.1 > first.2, lo: first.0, hi: last.0 })
}

/// Where a rising-towards-target curve first reaches `target`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reach {
    At(f64),
    /// Already at or above the target at the first x.
    AtOrBelow(f64),
    /// Below the target up to the last x.
    Never(f64),
}

/// The smallest x where `y >= target`, interpolating between the last point below and the first
/// at or above. `points` are `(x, y)` sorted by x.
pub fn reach(points: &[(f64, f64)], target: f64) -> Option<Reach> {
    let i = points.iter().position(|&(_, y)| y >= target);
    match i {
        None => points.last().map(|&(x, _)| Reach::Never(x)),
        Some(0) => Some(Reach::AtOrBelow(points[0].0)),
        Some(i) => {
            let (x0, y0) = points[i - 1];
            let (x1, y1) = points[i];
            Some(Reach::At(x0 + (x1 - x0) * (target - y0) / (y1 - y0)))
        }
    }
}

//! Break-evens on a latency axis, normalised by the time a transaction takes (issue 38).
//!
//! Pelley et al., VLDB 2014, §6.1 and Table 6 (thesis §5.3.1, Table 5.6) state break-evens as
//! absolute persist-barrier latencies ("TPCB and TPCC see the two mechanisms intersect near
//! 3.5 µs and 2.5 µs"; Table 6: 3.2, 2.4, 25 µs), measured on Shore-MT with 10-12 threads. A
//! barrier stalls the thread that issues it, so what decides where two methods cross is the
//! barrier's latency *relative to the time a transaction takes*: a machine whose transactions
//! are 10× shorter crosses at a 10× lower latency. Beside each such break-even we give
//!
//! `normalised = break-even latency ÷ per-transaction time`, where the per-transaction time is
//! `threads ÷ throughput` of the claim's `a` curve (the latency-sensitive method, In-Place
//! Updates) at latency 0: the wall time one worker spends per committed transaction when
//! barriers cost nothing.
//!
//! The papers print throughput only in figures (kTPS, values not in the text), so their own
//! normalised break-evens are not computed here; ours are what a faster or slower machine than
//! this one can compare with. A group without a crossing in the measured range gets the
//! normalised end of the range it lies beyond.

use crate::analysis::{self, Crossing, GroupValue};
use crate::data::Dataset;
use crate::spec::{ClaimKind, ClaimSpec, Conditions};
use crate::units::format_number;
use serde::Serialize;

/// The row fields whose quotient is one worker's wall time per committed transaction.
pub const TXN_TIME_METRIC: &str = "config.threads / tps";

/// One group's break-even beside the transaction time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Normalized {
    /// The group's label (`tpcb`), empty for a claim without `per`.
    pub group: String,
    /// Where the curves cross, or the end of the measured range they do not cross within,
    /// in nanoseconds.
    pub latency_ns: f64,
    /// `=`, `>` (no crossing up to `latency_ns`) or `<` (crossed before it).
    pub relation: &'static str,
    /// `threads ÷ tps` of the `a` curve at latency 0, in nanoseconds.
    pub txn_time_ns: f64,
    /// `latency_ns ÷ txn_time_ns`.
    pub ratio: f64,
}

/// Whether `claim` is a break-even along a latency axis (`persist_latency`, `read_latency`).
pub fn applies(claim: &ClaimSpec) -> bool {
    claim.kind == ClaimKind::Breakeven
        && claim.x.as_deref().is_some_and(|x| x.ends_with("latency"))
        && claim.x_scale > 0.0
}

/// Each group's break-even normalised by its `a` curve's transaction time at latency 0.
/// Groups without a latency-0 point or a throughput are left out: nothing to divide by.
pub fn normalized(claim: &ClaimSpec, data: &Dataset) -> Vec<Normalized> {
    if !applies(claim) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (label, group) in analysis::groups(claim, data) {
        let Ok(GroupValue::Crossing(c)) = analysis::group_value(claim, data, &group) else {
            continue;
        };
        // The crossing is in the claim's unit (x × x_scale); latencies are nanoseconds.
        let (x, relation) = match c {
            Crossing::At(x) => (x, "="),
            Crossing::None { a_above: true, hi, .. } => (hi, ">"),
            Crossing::None { a_above: false, lo, .. } => (lo, "<"),
        };
        let Some(txn_time_ns) = txn_time_ns(claim, data, &group) else { continue };
        let latency_ns = x / claim.x_scale;
        out.push(Normalized {
            group: label,
            latency_ns,
            relation,
            txn_time_ns,
            ratio: latency_ns / txn_time_ns,
        });
    }
    out
}

/// `threads ÷ tps` at the `a` curve's latency-0 point of `group`, in nanoseconds.
fn txn_time_ns(claim: &ClaimSpec, data: &Dataset, group: &Conditions) -> Option<f64> {
    let x = claim.x.as_deref()?;
    let a = claim.a.clone().unwrap_or_default();
    let cond = Conditions(group.0.iter().chain(&a.0).cloned().collect());
    let zero = data.select(&[&cond]).into_iter().find(|p| p.quantity(x) == Some(0.0))?;
    let seconds = zero.metric(TXN_TIME_METRIC)?.mean;
    (seconds > 0.0).then_some(seconds * 1e9)
}

/// The normalised break-evens in words, for the report's claim line:
/// `÷ time a transaction: 0.52 (2.6 µs ÷ 5 µs)`, one entry per group.
pub fn text(claim: &ClaimSpec, values: &[Normalized]) -> Option<String> {
    if values.is_empty() {
        return None;
    }
    let one = |n: &Normalized| {
        let rel = if n.relation == "=" { String::new() } else { format!("{} ", n.relation) };
        format!("{rel}{} ({} ÷ {})", format_number(n.ratio), us(n.latency_ns), us(n.txn_time_ns))
    };
    let parts: Vec<String> = values
        .iter()
        .map(|n| if n.group.is_empty() { one(n) } else { format!("{} {}", n.group, one(n)) })
        .collect();
    let a = claim.a.as_ref().map(Conditions::describe).unwrap_or_default();
    Some(format!("÷ time a transaction ({a}, threads ÷ tps at latency 0): {}", parts.join(", ")))
}

fn us(ns: f64) -> String {
    format!("{} µs", format_number(ns / 1000.0))
}

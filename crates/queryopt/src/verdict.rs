//! Verdicts on thesis ch. III (§3.3 scans, §3.4 joins) under issue 38's rules, which live in
//! [`experiments::verdict`]. The disk and the SSD are accounted models built from Table 2.1's
//! latencies and bandwidths: those parameters are *inputs*, listed apart and never counted as
//! reproduced, and only what the operators do with them (break-evens, speed-ups, winners) is an
//! *output* with a verdict. Ours is a range over configurations, or over two measures of the
//! same crossing. What is ours alone is what moves a claim across its bound between runs.

pub use experiments::verdict::*;

/// Merges the claims of repeated runs (the same grid): only CPU time is noisy (the I/O is
/// accounted), so a claim whose repetitions reach different verdicts is inconclusive, its
/// cause naming the split and the CPU time.
pub fn merge(reps: &[Vec<Claim>]) -> Vec<Claim> {
    experiments::verdict::merge(reps, "this machine's CPU time, added to the modelled I/O,")
}

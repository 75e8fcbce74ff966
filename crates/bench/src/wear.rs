//! Wear over a measured period (thesis §5.3.3, Fig. 5.7): how often each 64-byte line of the
//! region was written back, from the region's wear map. A device wears out at its most-written
//! line, so `max_line_writes / mean_line_writes` says how far a layout is from perfect wear
//! levelling.

use serde::Serialize;
use storage::Engine;

/// Most-written lines reported.
pub const WEAR_TOP: usize = 5;

/// Wear of one measured period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WearSummary {
    /// Write-backs of the most-written line.
    pub max_line_writes: u64,
    /// Mean write-backs over the lines written at least once in the period.
    pub mean_line_writes: f64,
    /// Lines written at least once.
    pub lines_written: u64,
    /// The most-written lines, with what lives there.
    pub top: Vec<WearLine>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WearLine {
    pub offset: u64,
    pub writes: u64,
    /// What the engine keeps at that offset (`None` if it cannot say).
    pub what: Option<String>,
}

impl WearSummary {
    /// The summary of `after - before` (two wear maps of one region).
    pub fn between(before: &[u32], after: &[u32], engine: &dyn Engine) -> WearSummary {
        let mut lines_written = 0u64;
        let mut total = 0u64;
        let mut top: Vec<(u64, u64)> = Vec::with_capacity(WEAR_TOP + 1);
        for (i, (a, b)) in after.iter().zip(before).enumerate() {
            let writes = u64::from(a.saturating_sub(*b));
            if writes == 0 {
                continue;
            }
            lines_written += 1;
            total += writes;
            if top.len() < WEAR_TOP || writes > top[top.len() - 1].1 {
                let at = top.partition_point(|t| t.1 >= writes);
                top.insert(at, (i as u64 * pmem::CACHE_LINE, writes));
                top.truncate(WEAR_TOP);
            }
        }
        WearSummary {
            max_line_writes: top.first().map_or(0, |t| t.1),
            mean_line_writes: if lines_written > 0 {
                total as f64 / lines_written as f64
            } else {
                0.0
            },
            lines_written,
            top: top
                .into_iter()
                .map(|(offset, writes)| WearLine {
                    offset,
                    writes,
                    what: engine.describe_offset(offset),
                })
                .collect(),
        }
    }

    /// `max / mean`: 1.0 is perfect levelling.
    pub fn ratio(&self) -> f64 {
        if self.mean_line_writes > 0.0 {
            self.max_line_writes as f64 / self.mean_line_writes
        } else {
            0.0
        }
    }
}

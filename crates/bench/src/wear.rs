//! Wear over a measured period (thesis §5.3.3, Fig. 5.7): how often each 64-byte line — and,
//! with `--wear-granularity byte`, each byte — of the region was written back, from the
//! region's wear map (reset when the period starts). A device without wear levelling wears out
//! at its most-written cell.
//!
//! **The Fig. 5.7 method, as the thesis states it**: "Persists are tracked at byte granularity"
//! (a flushed line counts one write for each byte stored since its last flush); "no wear
//! levelling — lifetime is limited by the most frequently written address"; "Logs are
//! implemented as circular buffers. Thus, logs do not contribute to the most written byte".
//! So `fig57_max_writes` is the most-written unit *outside* the engine's circular logs
//! ([`storage::Engine::circular_logs`]); `most_written` is the same over every address, logs
//! included, for comparison. The logs' control words (a redo point, a batch log's state word;
//! [`storage::Engine::log_control_words`]) are rewritten by every checkpoint or batch and were
//! Fig. 5.7's hottest byte (issue 38): they are left out of `fig57_most_written` too and
//! reported apart, as `log_control_most_written`. For Disk-Replacement the thesis finds the page LSNs hottest ("LSNs,
//! which constitute the most frequently persisted addresses"): byte granularity is what lets an
//! 8-byte LSN stand out from the row bytes of its line. Perfect wear levelling spreads
//! `total_bytes_written` over the whole device.

use serde::Serialize;
use storage::Engine;

/// Most-written lines reported.
pub const WEAR_TOP: usize = 5;

/// Wear of one measured period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WearSummary {
    /// Write-backs of the most-written line (logs included).
    pub max_line_writes: u64,
    /// Mean write-backs over the lines written at least once in the period.
    pub mean_line_writes: f64,
    /// Lines written at least once.
    pub lines_written: u64,
    /// The most-written lines, with what lives there.
    pub top: Vec<WearLine>,
    /// `line` or `byte`: the unit of `most_written`, `fig57_most_written` and `total_writes`.
    pub granularity: &'static str,
    /// The most-written unit over every address, circular logs included.
    pub most_written: Option<WearLine>,
    /// Thesis Fig. 5.7 (no wear levelling): the most-written unit outside the circular logs.
    /// `None` when the engine does not say where its logs are.
    pub fig57_most_written: Option<WearLine>,
    /// `fig57_most_written`'s writes (what an endurance claim reads).
    pub fig57_max_writes: Option<u64>,
    /// The most-written unit among the logs' control words, left out of Fig. 5.7's figure.
    /// `None` when the engine names none (or none was written).
    pub log_control_most_written: Option<WearLine>,
    pub log_control_max_writes: Option<u64>,
    /// Unit writes in the period (byte writes, or line write-backs).
    pub total_writes: u64,
    /// Bytes written back: byte writes, or 64 per line write-back (perfect wear levelling
    /// divides this by the device's size).
    pub total_bytes_written: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WearLine {
    pub offset: u64,
    pub writes: u64,
    /// What the engine keeps at that offset (`None` if it cannot say).
    pub what: Option<String>,
}

/// The most-written unit: overall, outside `logs` and `control`, and inside `control`.
struct Hottest {
    all: (u64, u64),
    outside: Option<(u64, u64)>,
    control: (u64, u64),
}

/// [`Hottest`] of `(offset, writes)` in offset order.
fn hottest(
    units: impl Iterator<Item = (u64, u64)>,
    logs: Option<&[std::ops::Range<u64>]>,
    control: &[std::ops::Range<u64>],
) -> Hottest {
    let mut h = Hottest { all: (0, 0), outside: logs.map(|_| (0, 0)), control: (0, 0) };
    for (offset, writes) in units {
        if writes > h.all.1 {
            h.all = (offset, writes);
        }
        if control.iter().any(|r| r.contains(&offset)) {
            if writes > h.control.1 {
                h.control = (offset, writes);
            }
            continue;
        }
        if let (Some(best), Some(logs)) = (h.outside.as_mut(), logs) {
            if writes > best.1 && !logs.iter().any(|r| r.contains(&offset)) {
                *best = (offset, writes);
            }
        }
    }
    h
}

impl WearSummary {
    /// The summary of the region's wear map since its last reset.
    pub fn of(map: &pmem::WearMap, engine: &dyn Engine) -> WearSummary {
        let counts = map.counts();
        let mut lines_written = 0u64;
        let mut total = 0u64;
        let mut top: Vec<(u64, u64)> = Vec::with_capacity(WEAR_TOP + 1);
        for (i, c) in counts.iter().enumerate() {
            let writes = u64::from(*c);
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
        let logs = engine.circular_logs();
        let control = engine.log_control_words().unwrap_or_default();
        let granularity = map.granularity();
        let (hot, total_writes, total_bytes) = match granularity {
            pmem::WearGranularity::Line => {
                let units = counts
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i as u64 * pmem::CACHE_LINE, u64::from(*c)));
                (hottest(units, logs.as_deref(), &control), total, total * pmem::CACHE_LINE)
            }
            pmem::WearGranularity::Byte => {
                // Streamed (issue 38): collecting every written byte took 16 B each and ran a
                // 240 s `wal` run of Fig. 5.7 out of memory (24 GB) after it had measured.
                let mut bytes = 0u64;
                let units = map.written_bytes().map(|(o, n)| {
                    bytes += u64::from(n);
                    (o, u64::from(n))
                });
                let hot = hottest(units, logs.as_deref(), &control);
                (hot, bytes, bytes)
            }
        };
        let describe = |(offset, writes): (u64, u64)| {
            (writes > 0).then(|| WearLine { offset, writes, what: engine.describe_offset(offset) })
        };
        let fig57 = hot.outside.and_then(describe);
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
            granularity: granularity.name(),
            most_written: describe(hot.all),
            fig57_max_writes: hot.outside.map(|o| o.1),
            fig57_most_written: fig57,
            log_control_most_written: describe(hot.control),
            log_control_max_writes: (hot.control.1 > 0).then_some(hot.control.1),
            total_writes,
            total_bytes_written: total_bytes,
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

#[cfg(test)]
mod tests {
    use super::hottest;

    #[test]
    fn fig57_skips_the_circular_logs() {
        let units = [(0u64, 9u64), (100, 50), (200, 7), (300, 12)];
        let logs = vec![100..200, 1000..1000];
        let h = hottest(units.into_iter(), Some(&logs), &[]);
        assert_eq!(h.all, (100, 50), "the log is the hottest address");
        assert_eq!(h.outside, Some((300, 12)), "logs do not contribute (thesis §5.3.3)");
        let h = hottest(units.into_iter(), None, &[]);
        assert_eq!(h.outside, None, "no log map: no Fig. 5.7 figure");
    }

    /// Guards issue 38: a log control word (a redo point) was Fig. 5.7's hottest byte.
    #[test]
    fn fig57_skips_log_control_words_and_reports_them_apart() {
        let units = [(0u64, 9u64), (100, 50), (200, 7), (300, 12), (400, 30)];
        let (logs, control) = (vec![100..200, 1000..1000], vec![400..408, 2000..2000]);
        let h = hottest(units.into_iter(), Some(&logs), &control);
        assert_eq!(h.outside, Some((300, 12)), "the control word is not data");
        assert_eq!(h.control, (400, 30), "reported apart");
        assert_eq!(h.all, (100, 50));
    }
}

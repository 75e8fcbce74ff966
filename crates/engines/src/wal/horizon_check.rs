//! The distributed log's recovery invariant, checked on crash images — Wang & Johnson, VLDB
//! 2014, §4.1 (passive group commit; [`super::dlog`]'s module doc): *every record with
//! `gsn <= H` ever inserted is durable before `H` is*. The crash tester calls
//! [`dlog_horizon_check`] on each cut image (issue 37, hole (b)): the commit-level checks only
//! see a broken ordering when a lost record happens to belong to an acknowledged commit a
//! later read looks at (about 1 cut in 1,500); this check sees it at every cut that falls
//! while `H` covers an unforced record.
//!
//! How, from two images: within one log GSNs grow with LSNs (a log's GSN is taken under its
//! reservation lock and every GSN it hands out exceeds the log's last), so the lowest GSN of a
//! log that a crash image lacks is that of the first record past the log's durable end. The cut
//! image gives each log's durable end (a scan from its redo point) and the persisted `H`; a
//! *later* image of the same region, after the run forced everything it had inserted, holds the
//! record that came next at that LSN (found only if its trailer names that LSN: a later lap
//! that overwrote it leaves the log unchecked, never misjudged). A record inserted after the
//! cut also must have `gsn > H`: the daemon raises the floor every new GSN exceeds before it
//! persists `H`. So the invariant is: for every log, that next record's GSN exceeds `H`.

use super::{dlog, log, log_area, read_control};
use pmem::Region;
use storage::format::{page_offset, Superblock, Verdict};
use storage::Result;

/// What [`dlog_horizon_check`] found on one cut image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HorizonCheck {
    /// `H` as persisted in the cut image.
    pub horizon: u64,
    pub logs: u64,
    /// Logs whose next record (past the cut's durable end) the later image holds.
    pub logs_checked: u64,
    /// The lowest GSN of any checked log's next record (`u64::MAX`: none).
    pub lowest_unforced_gsn: u64,
    /// Each log whose next record is covered by `H`: `(log, its LSN, its GSN)`.
    pub violations: Vec<(usize, u64, u64)>,
}

impl HorizonCheck {
    /// One line for a crash report.
    pub fn describe(&self) -> String {
        let list: Vec<String> = self
            .violations
            .iter()
            .map(|(i, lsn, gsn)| format!("log {i}'s record at LSN {lsn} (GSN {gsn})"))
            .collect();
        format!(
            "the persisted GSN horizon {} covers records the crash image lacks: {}",
            self.horizon,
            list.join(", ")
        )
    }
}

/// Checks the invariant on `cut` (a crash image of a `wal` region) against `later` (the same
/// region after the run forced every record it inserted). `None`: not a `wal` region with a
/// distributed log and a volatile cache (a central log has no horizon; with durable caches
/// every record is forced as it is inserted). Damage in `cut` is `Corrupt` (recovery would
/// refuse it too).
pub fn dlog_horizon_check(cut: &Region, later: &Region) -> Result<Option<HorizonCheck>> {
    let sb = match Superblock::verdict(cut, false)? {
        Verdict::Open { sb, .. } if sb.engine == super::ENGINE_NAME => sb,
        _ => return Ok(None),
    };
    let pages = crate::staging::require_backed(cut, sb.layout.page_count)?;
    let (capacity, base_page) = read_control(cut, pages)?;
    let control = super::control(0);
    let Some(c) = dlog::read_layout(cut, control, capacity)? else { return Ok(None) };
    if c.cache != dlog::Cache::Volatile {
        return Ok(None);
    }
    let horizon = dlog::read_horizon(cut, control)?;
    let n = c.layout.logs() as usize;
    let redo = dlog::read_redo(cut, control, n)?;
    let image_bytes = page_offset(pages - base_page);
    let mut check = HorizonCheck {
        horizon,
        logs: n as u64,
        logs_checked: 0,
        lowest_unforced_gsn: u64::MAX,
        violations: Vec::new(),
    };
    for (i, &from) in redo.points.iter().enumerate() {
        let area = log_area() + i as u64 * c.per_log_bytes;
        let (end, _) = log::scan(cut, area, c.per_log_bytes, from, image_bytes, |_| {})?;
        let mut next: Option<(u64, u64)> = None;
        // Only the first record past the end matters; damage further on is not this check's.
        let per = c.per_log_bytes;
        let _ = log::scan(later, area, per, end, image_bytes, |r| {
            if next.is_none() {
                // The LSN at or past `end` (pads skipped) whose position is the record's.
                let lap = end - end % per + (r.place - area);
                let lsn = if lap < end { lap + per } else { lap };
                next = r.gsn.map(|gsn| (lsn, gsn));
            }
        });
        let Some((lsn, gsn)) = next else { continue };
        check.logs_checked += 1;
        check.lowest_unforced_gsn = check.lowest_unforced_gsn.min(gsn);
        if gsn <= horizon {
            check.violations.push((i, lsn, gsn));
        }
    }
    Ok(Some(check))
}

//! The page flusher and the fuzzy checkpoint of the `wal` engine: dirty-page tracking,
//! `persist_page` write-back, and the redo point's advance (log truncation).

use super::*;

/// Runs of set bits of a line mask: (first line, count), ascending.
fn line_runs(mut mask: u128) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut base = 0u64;
    while mask != 0 {
        let skip = u64::from(mask.trailing_zeros());
        mask >>= skip;
        let n = u64::from(mask.trailing_ones());
        runs.push((base + skip, n));
        base += skip + n;
        mask = mask.checked_shr(n as u32).unwrap_or(0);
    }
    runs
}

/// Dirty pages of the buffer pool: image page ids, ascending, each with a mask of its dirty
/// lines (bit i: line i of the page's 128).
pub(super) fn dirty_pages(staging: &Region) -> Vec<(PageId, u128)> {
    const _: () = assert!(PAGE_SIZE_U64 / CACHE_LINE == 128);
    let lines_per_page = PAGE_SIZE_U64 / CACHE_LINE;
    let mut pages: Vec<(PageId, u128)> = Vec::new();
    if let Some(d) = staging.dirty() {
        for s in d.segments() {
            d.segment_lines(s, |l| {
                let (p, bit) = (l / lines_per_page, 1u128 << (l % lines_per_page));
                match pages.last_mut() {
                    Some((last, mask)) if *last == p => *mask |= bit,
                    _ => pages.push((p, bit)),
                }
            });
        }
    }
    pages
}

impl Shared {
    pub(super) fn fail(&self, e: &DbError) {
        self.failed.store(true, Ordering::Release);
        let _ = e;
    }

    pub(super) fn failed_error(&self) -> Option<DbError> {
        (self.failed.load(Ordering::Acquire) || self.log.failed()).then(|| {
            DbError::Invalid(
                "the write-ahead log failed (a checkpoint or a log force did not complete); \
                 reopen the database to recover"
                    .into(),
            )
        })
    }

    /// The page flusher, a fuzzy checkpoint: with operations quiesced only for a moment, takes
    /// the redo point (`cut`, the end of the log) and the set of dirty pages, clearing it; then,
    /// [`SNAPSHOT_PAGES`] at a time, copies pages (operations quiesced for the copy), forces the
    /// log past everything the copies may hold (the WAL rule) and writes them back while
    /// transactions run; finally moves the redo point to `cut` (truncating the log). A page
    /// changed after its set was taken is dirty again, so the next checkpoint writes it; a copy
    /// may hold changes after `cut` — redo from `cut` reapplies them in order (physical records).
    pub(super) fn checkpoint(&self) -> Result<()> {
        let mut tracker = self.checkpoint_lock.lock();
        if let Some(e) = self.failed_error() {
            return Err(e);
        }
        let started = Instant::now();
        let (cut, pages) = {
            let _quiesced = self.gate.write();
            let cut = self.log.ends();
            let pages = dirty_pages(&self.staging);
            if let Some(d) = self.staging.dirty() {
                d.clear();
            }
            (cut, pages)
        };
        let result = self.write_back(&cut, &pages);
        if let Err(e) = &result {
            self.fail(e);
        }
        result?;
        tracker.reset(cut[0]);
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.stats.pages_flushed.fetch_add(pages.len() as u64, Ordering::Relaxed);
        self.stats.flush_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn write_back(&self, cut: &[u64], pages: &[(PageId, u128)]) -> Result<()> {
        if self.fault == Some(WalFault::CheckpointBeforePages) {
            self.log.advance_redo(cut);
        }
        for chunk in pages.chunks(SNAPSHOT_PAGES) {
            self.flush_chunk(chunk, false)?;
        }
        self.log.advance_redo(cut);
        self.device.check()
    }

    /// Copies `chunk`'s pages with operations quiesced, forces the log past everything the
    /// copies may hold (the WAL rule) and writes them back while transactions run. `take`: the
    /// lines written are the page's dirty lines now, taken out of the dirty set (the Pelley
    /// flusher); otherwise the masks given (cleared when the checkpoint began).
    pub(super) fn flush_chunk(&self, chunk: &[(PageId, u128)], take: bool) -> Result<()> {
        let (end, snapshot) = {
            let _quiesced = self.gate.write();
            let snapshot: Vec<(PageId, u128, Vec<u8>)> = chunk
                .iter()
                .map(|&(p, m)| {
                    let mask = if take { self.take_dirty(p) } else { m };
                    (p, mask, self.staging.read(page_offset(p), PAGE_SIZE).to_vec())
                })
                .filter(|&(_, mask, _)| mask != 0)
                .collect();
            (self.log.ends(), snapshot)
        };
        if self.fault != Some(WalFault::PageBeforeLog) {
            self.log.force_for_pages(&end)?;
        }
        match self.page_flush {
            PageFlush::Paper => {
                for (page, _, bytes) in &snapshot {
                    self.persist_page(*page, bytes);
                }
            }
            PageFlush::Direct => {
                // Only the lines dirty when the page was taken; a line dirtied since is dirty
                // again and covered by redo from the redo point.
                for (page, mask, bytes) in &snapshot {
                    let at = self.base + page_offset(*page);
                    for (first, n) in line_runs(*mask) {
                        let (from, len) = (first * CACHE_LINE, n * CACHE_LINE);
                        let range = from as usize..(from + len) as usize;
                        self.device.write(at + from, &bytes[range]);
                        self.flush_counted(at + from, len);
                    }
                }
                self.fence_counted();
            }
        }
        if self.fault == Some(WalFault::PageBeforeLog) {
            self.log.force_for_pages(&end)?;
        }
        Ok(())
    }

    /// The dirty lines of `page`, taken out of the dirty set (operations quiesced).
    fn take_dirty(&self, page: PageId) -> u128 {
        let Some(d) = self.staging.dirty() else { return u128::MAX };
        let first = page * (PAGE_SIZE_U64 / CACHE_LINE);
        u128::from(d.take_word(first)) | u128::from(d.take_word(first + 64)) << 64
    }

    /// Pelley's `persist_page` (Fig. 2): copy to the page log, barrier; mark it valid, barrier;
    /// write in place, barrier; invalidate, barrier.
    fn persist_page(&self, page: PageId, bytes: &[u8]) {
        let log_at = page_offset(PAGE_LOG_PAGE);
        let d = &self.device;
        d.write(log_at, bytes);
        self.persist_counted(log_at, PAGE_SIZE_U64);
        d.write_u64(control(C_PAGE_LOG), page + 1);
        self.persist_counted(control(C_PAGE_LOG), 8);
        let at = self.base + page_offset(page);
        d.write(at, bytes);
        self.persist_counted(at, PAGE_SIZE_U64);
        d.write_u64(control(C_PAGE_LOG), 0);
        self.persist_counted(control(C_PAGE_LOG), 8);
    }

    /// A flush by the page flusher, counted apart from the log's (bench's `engine` figures).
    fn flush_counted(&self, at: u64, len: u64) {
        self.device.flush(at, len);
        let lines = (at + len).div_ceil(CACHE_LINE) - at / CACHE_LINE;
        self.stats.flush_lines.fetch_add(lines, Ordering::Relaxed);
    }

    fn fence_counted(&self) {
        self.device.fence();
        self.stats.flush_fences.fetch_add(1, Ordering::Relaxed);
    }

    fn persist_counted(&self, at: u64, len: u64) {
        self.flush_counted(at, len);
        self.fence_counted();
    }

    /// Background flusher: with `flusher=checkpoint`, checkpoints when the dirty pages exceed
    /// `max_dirty_pages` or the log passes half its capacity; with `flusher=pelley`, writes
    /// back the oldest dirty pages every round ([`oldest_first`]).
    pub(super) fn flusher(&self) {
        let round = match self.flusher {
            Flusher::Checkpoint => Duration::from_millis(5),
            Flusher::Pelley => oldest_first::ROUND,
        };
        // A Pelley round that wrote all it may write looks again at once.
        let mut more = false;
        loop {
            {
                let mut stop = self.stop.lock();
                if *stop {
                    return;
                }
                if !more {
                    self.wake.wait_for(&mut stop, round);
                }
                if *stop {
                    return;
                }
            }
            if self.flusher == Flusher::Pelley {
                match self.flush_oldest() {
                    Ok(written) => more = written as usize >= oldest_first::ROUND_PAGES,
                    Err(_) => return,
                }
                continue;
            }
            let (used, capacity) = self.log.most_used();
            let log_busy = used > capacity / 2;
            // Cheap test first: fewer dirty lines than pages allowed means few enough pages.
            // Then the pages are counted, not collected, and only up to the budget: collecting
            // them visits every dirty line, every round, idle or not (a YCSB read-only run
            // kept this thread 3-5% of a core busy doing it).
            let words_per_page = (PAGE_SIZE_U64 / CACHE_LINE / 64) as usize;
            let too_dirty = self.max_dirty_pages > 0
                && self.staging.dirty().is_some_and(|d| {
                    d.count() > self.max_dirty_pages
                        && d.groups_at_least(words_per_page, self.max_dirty_pages + 1)
                });
            if (log_busy || too_dirty) && self.checkpoint().is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_runs_are_the_runs_of_set_bits() {
        assert_eq!(super::line_runs(0), vec![]);
        assert_eq!(super::line_runs(1), vec![(0, 1)]);
        assert_eq!(super::line_runs(0b0111_0110), vec![(1, 2), (4, 3)]);
        assert_eq!(super::line_runs(u128::MAX), vec![(0, 128)]);
        assert_eq!(super::line_runs(1 << 127 | 1 << 126 | 1), vec![(0, 1), (126, 2)]);
    }
}

//! System transactions for In-Place Updates: B+tree structure modifications, heap growth and
//! catalog changes run as short transactions with their own physical undo log, committed as soon
//! as the modification is complete (ARIES nested top actions; Pelley et al., VLDB 2014, §3.2,
//! uses `persist_page` for the same purpose). A crash rolls an unfinished one back, so the tree
//! is always structurally consistent before user transactions are undone logically.
//!
//! Per write: one undo record with the before-images of all ranges, persisted (1 barrier), then
//! the in-place write (flushed at commit). Commit: persist the written ranges (1 barrier), then the
//! header's 8-byte free mark (1 barrier). Frees add a committed mark and a bitmap persist.

use crate::alloc::PageAllocator;
use crate::engine::{DbError, Result};
use crate::format::{get_u64, page_offset, Layout, PageId, PAGE_SIZE_U64};
use crate::pages::{PageClass, PageStore, PageWriter};
use crate::undo::{LogState, UndoLog};

pub const REC_PHYS: u8 = 1;
pub const REC_PAGE_ALLOC: u8 = 6;
pub const REC_PAGE_FREE: u8 = 7;

/// Encodes a physical undo record: `[u16 ranges]` then per range `[u64 offset][u32 len][bytes]`.
pub fn encode_phys(region: &pmem::Region, ranges: &[(u64, usize)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + ranges.iter().map(|r| 12 + r.1).sum::<usize>());
    out.extend_from_slice(&(ranges.len() as u16).to_le_bytes());
    for (off, len) in ranges {
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(*len as u32).to_le_bytes());
        out.extend_from_slice(region.read(*off, *len));
    }
    out
}

/// Restores the before-images of a physical undo record (in reverse range order) and returns
/// the ranges written, to be flushed. Every range must lie in the catalog or the data pages
/// (`Layout::is_undoable_range`): a damaged record never writes over a superblock or a log.
pub fn apply_phys(
    region: &pmem::Region,
    layout: &Layout,
    payload: &[u8],
) -> Result<Vec<(u64, u64)>> {
    let bad = || DbError::Corrupt("malformed physical undo record".into());
    if payload.len() < 2 {
        return Err(bad());
    }
    let n = u16::from_le_bytes([payload[0], payload[1]]) as usize;
    let mut at = 2;
    let mut ranges = Vec::with_capacity(n);
    for _ in 0..n {
        if at + 12 > payload.len() {
            return Err(bad());
        }
        let off = get_u64(payload, at);
        let len = u32::from_le_bytes(payload[at + 8..at + 12].try_into().expect("4")) as usize;
        at += 12;
        if at + len > payload.len()
            || off.checked_add(len as u64).is_none_or(|e| e > region.len())
            || !layout.is_undoable_range(off, len as u64)
        {
            return Err(bad());
        }
        ranges.push((off, at, len));
        at += len;
    }
    let mut written = Vec::with_capacity(n);
    for (off, start, len) in ranges.into_iter().rev() {
        region.write(off, &payload[start..start + len]);
        written.push((off, len as u64));
    }
    Ok(written)
}

/// A system transaction over one worker's system undo log.
pub struct SysTxn<'a> {
    store: &'a PageStore,
    alloc: &'a PageAllocator,
    log: &'a mut UndoLog,
    dirty: Vec<(u64, u64)>,
    fresh: Vec<PageId>,
    freed: Vec<PageId>,
    /// Test-only fault: clear a freed page's bit at once, before the transaction commits.
    free_early: bool,
    freed_early: Vec<PageId>,
    /// Whose allocator cache the pages come from and go back to.
    worker: usize,
}

impl<'a> SysTxn<'a> {
    pub fn begin(store: &'a PageStore, alloc: &'a PageAllocator, log: &'a mut UndoLog) -> Self {
        debug_assert_eq!(log.state(), LogState::Free);
        SysTxn {
            store,
            alloc,
            log,
            dirty: Vec::new(),
            fresh: Vec::new(),
            freed: Vec::new(),
            free_early: false,
            freed_early: Vec::new(),
            worker: usize::MAX,
        }
    }

    /// Runs on worker `worker`'s allocator cache (without it, the last worker's, the
    /// administrator's).
    pub fn on_worker(mut self, worker: usize) -> Self {
        self.worker = worker;
        self
    }

    /// **Test-only protocol violation**: frees take effect in the bitmap when requested, before
    /// the system transaction's commit is durable (a crash then rolls the structure back while
    /// its page is marked free). Exists so the crash tests can show they catch it.
    pub fn with_free_before_commit(mut self, on: bool) -> Self {
        self.free_early = on;
        self
    }

    /// Commits whatever is not yet completed (the B+tree completes its own modifications under
    /// its latches; this covers other writers such as heap growth and catalog changes).
    pub fn commit(mut self) -> Result<()> {
        self.end()
    }

    /// Rolls back everything not yet completed (used when a modification fails half-way, e.g.
    /// the region is full during a split).
    pub fn abort(mut self) -> Result<()> {
        self.undo()
    }

    /// Persists every write, then the log's free mark; then performs deferred frees. Leaves the
    /// transaction empty and reusable.
    fn end(&mut self) -> Result<()> {
        let region = self.store.region().clone();
        let dirty = std::mem::take(&mut self.dirty);
        self.fresh.clear();
        if !self.freed_early.is_empty() {
            self.log.finish(&dirty);
            self.alloc.release(self.worker, &std::mem::take(&mut self.freed_early));
            return Ok(());
        }
        if self.freed.is_empty() {
            self.log.finish(&dirty);
            return Ok(());
        }
        region.flush_ranges(&dirty);
        region.fence();
        self.log.mark_committed();
        let freed = std::mem::take(&mut self.freed);
        let log = &mut *self.log;
        self.alloc.free_committed(self.worker, &freed, |bits| log.finish(bits))
    }

    fn undo(&mut self) -> Result<()> {
        let records = self.log.read_records();
        let layout = *self.alloc.layout();
        let (pages, written) = rollback(self.store.region(), &layout, self.alloc, &records)?;
        self.log.finish(&written);
        self.alloc.release(self.worker, &pages);
        self.dirty.clear();
        self.fresh.clear();
        self.freed.clear();
        Ok(())
    }
}

/// Pages whose allocation was undone, and the byte ranges written (to persist).
pub type Undone = (Vec<PageId>, Vec<(u64, u64)>);

/// Rolls back system-transaction records (reverse order). Returns the pages whose allocation was
/// undone and the ranges written (to flush before the log is freed).
pub fn rollback(
    region: &pmem::Region,
    layout: &Layout,
    alloc: &PageAllocator,
    records: &[(u8, Vec<u8>)],
) -> Result<Undone> {
    let mut pages = Vec::new();
    let mut written = Vec::new();
    for (kind, payload) in records.iter().rev() {
        match *kind {
            REC_PHYS => written.extend(apply_phys(region, layout, payload)?),
            REC_PAGE_ALLOC => {
                let page = decode_page(payload)?;
                written.extend(alloc.clear_bit(page)?);
                pages.push(page);
            }
            REC_PAGE_FREE => {}
            other => {
                return Err(DbError::Corrupt(format!("unknown system undo record kind {other}")))
            }
        }
    }
    Ok((pages, written))
}

/// Redoes the deferred frees of a committed system transaction (idempotent).
pub fn redo_frees(alloc: &PageAllocator, records: &[(u8, Vec<u8>)]) -> Result<Vec<(u64, u64)>> {
    let mut written = Vec::new();
    for (kind, payload) in records {
        if *kind == REC_PAGE_FREE {
            written.extend(alloc.clear_bit(decode_page(payload)?)?);
        }
    }
    Ok(written)
}

fn decode_page(payload: &[u8]) -> Result<PageId> {
    if payload.len() != 8 {
        return Err(DbError::Corrupt("malformed page record".into()));
    }
    Ok(get_u64(payload, 0))
}

impl PageWriter for SysTxn<'_> {
    fn store(&self) -> &PageStore {
        self.store
    }

    fn write(&mut self, page: PageId, ranges: &[(usize, &[u8])]) -> Result<()> {
        let base = page_offset(page);
        let region = self.store.region();
        if !self.fresh.contains(&page) {
            let spans: Vec<(u64, usize)> =
                ranges.iter().map(|(o, b)| (base + *o as u64, b.len())).collect();
            let rec = encode_phys(region, &spans);
            // Earlier writes of this transaction ride on this record's barrier.
            self.log.append(&[(REC_PHYS, &rec)], &self.dirty)?;
            self.dirty.clear();
        }
        for (o, b) in ranges {
            region.write(base + *o as u64, b);
            self.dirty.push((base + *o as u64, b.len() as u64));
        }
        Ok(())
    }

    fn alloc_page(&mut self) -> Result<PageId> {
        let page = self.alloc.reserve(self.worker)?.ok_or_else(|| {
            let (pages, kept) = (self.alloc.layout().page_count, self.alloc.reserve_pages());
            DbError::RegionFull(if crate::alloc::FreeingScope::active() {
                format!("all {pages} pages are in use, the {kept} kept for deletes included")
            } else {
                format!("all {pages} pages are in use ({kept} are kept for deletes)")
            })
        })?;
        if let Err(e) = self.log.append(&[(REC_PAGE_ALLOC, &page.to_le_bytes())], &self.dirty) {
            self.alloc.unreserve(self.worker, page);
            return Err(e);
        }
        self.dirty.clear();
        let bits = self.alloc.set_bit(page)?;
        // The allocator bitmap and its mirror: "other" pages of the read model (Pelley Table 4).
        bits.iter().for_each(|b| self.store.touch(PageClass::Other, b.0 / PAGE_SIZE_U64, 1));
        self.dirty.extend(bits);
        self.fresh.push(page);
        Ok(page)
    }

    fn free_page(&mut self, page: PageId) -> Result<()> {
        self.store.counters().page_free();
        self.log.append(&[(REC_PAGE_FREE, &page.to_le_bytes())], &self.dirty)?;
        self.dirty.clear();
        if self.free_early {
            let bits = self.alloc.clear_bit(page)?;
            self.dirty.extend(bits);
            self.freed_early.push(page);
            return Ok(());
        }
        self.freed.push(page);
        Ok(())
    }

    fn complete(&mut self) -> Result<()> {
        self.end()
    }

    fn roll_back(&mut self) -> Result<()> {
        self.undo()
    }
}

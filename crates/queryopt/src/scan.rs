//! Read-only scan operators (thesis §2.2.1, §3.3): relation scan, unclustered index scan and
//! rowid-sort scan, each computing `count(*)` and `sum(unique2)` over `unique1 in [lo, hi)`
//! so nothing is materialised (§3.3: "a pipelined aggregation function").
//!
//! - Relation scan reads every page in extents (DB2's sequential prefetch) and tests every tuple.
//! - Index scan walks the index leaves in key order and fetches each matching tuple's page
//!   through a buffer pool of `buffer_pages` frames (clock replacement): the random reads.
//! - Rowid-sort scan reads the matching leaf entries, sorts the rowids, then fetches each page
//!   holding a match exactly once, in page order, merging runs of adjacent pages into one
//!   request (DB2's list prefetch; PostgreSQL's bitmap heap scan).
//!
//! Invariant: all three return the same aggregate for the same range.

use crate::device::{BlockDevice, IoStats, PageBuf, PAGE_SIZE};
use crate::error::{invalid, Result};
use crate::wisconsin::{field, int_field, Table, INDEX_ENTRIES_PER_PAGE};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// A scan operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScanOp {
    Relation,
    Index,
    RowidSort,
}

impl ScanOp {
    pub const ALL: [ScanOp; 3] = [ScanOp::Index, ScanOp::RowidSort, ScanOp::Relation];

    pub fn name(self) -> &'static str {
        match self {
            ScanOp::Relation => "relation",
            ScanOp::Index => "index",
            ScanOp::RowidSort => "rowid-sort",
        }
    }

    pub fn parse(s: &str) -> Result<ScanOp> {
        ScanOp::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| invalid("operator", s, "relation, index, rowid-sort or all"))
    }
}

/// `count(*)`, `sum(unique2)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Aggregate {
    pub count: u64,
    pub sum_unique2: u64,
}

impl Aggregate {
    fn add(&mut self, tuple: &[u8]) {
        self.count += 1;
        self.sum_unique2 += int_field(tuple, field::UNIQUE2) as u64;
    }
}

/// Knobs shared by the operators.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ScanParams {
    /// Pages per sequential request (prefetch size).
    pub extent_pages: usize,
    /// Buffer-pool frames of the index scan (the memory limit).
    pub buffer_pages: usize,
}

/// The key range `[lo, hi)` on `unique1` that selects `round(selectivity · rows)` tuples.
pub fn key_range(rows: u64, selectivity: f64) -> Result<(u32, u32)> {
    if !(0.0..=1.0).contains(&selectivity) || selectivity.is_nan() {
        return Err(invalid("selectivity", selectivity, "a fraction in [0, 1] (0.01 = 1%)"));
    }
    let k = (selectivity * rows as f64).round() as u64;
    let lo = (rows - k) / 2;
    Ok((lo as u32, (lo + k) as u32))
}

/// One operator's run.
#[derive(Clone, Debug, Serialize)]
pub struct ScanRun {
    pub operator: ScanOp,
    pub selectivity: f64,
    pub aggregate: Aggregate,
    /// Distinct table pages read (what Yao's formula predicts for rowid-sort).
    pub data_pages_read: u64,
    pub io: IoStats,
    /// Modelled device time (0 on a real device).
    pub io_s: f64,
    /// Wall time of the operator (CPU, plus the real I/O on a real device).
    pub wall_s: f64,
    /// What the comparison uses: modelled I/O + wall time on a model, wall time on a file.
    pub time_s: f64,
}

/// Runs `op` over `unique1 in [lo, hi)` on `table`.
pub fn run(
    dev: &mut dyn BlockDevice,
    table: &Table,
    op: ScanOp,
    selectivity: f64,
    params: ScanParams,
) -> Result<ScanRun> {
    if params.extent_pages == 0 || params.buffer_pages == 0 {
        return Err(invalid("extent/buffer pages", 0, "at least 1"));
    }
    let (lo, hi) = key_range(table.layout.rows, selectivity)?;
    dev.forget_position();
    let before = dev.stats();
    let t = Instant::now();
    let (aggregate, data_pages_read) = match op {
        ScanOp::Relation => relation_scan(dev, table, lo, hi, params.extent_pages)?,
        ScanOp::Index => index_scan(dev, table, lo, hi, params.buffer_pages)?,
        ScanOp::RowidSort => rowid_sort_scan(dev, table, lo, hi, params.extent_pages)?,
    };
    let wall_s = t.elapsed().as_secs_f64();
    let io = dev.stats().since(&before);
    let io_s = io.modelled_io_ns as f64 / 1e9;
    let time_s = if dev.is_modelled() { io_s + wall_s } else { wall_s };
    Ok(ScanRun { operator: op, selectivity, aggregate, data_pages_read, io, io_s, wall_s, time_s })
}

fn relation_scan(
    dev: &mut dyn BlockDevice,
    table: &Table,
    lo: u32,
    hi: u32,
    extent: usize,
) -> Result<(Aggregate, u64)> {
    let layout = table.layout;
    let mut buf = PageBuf::new(extent);
    let mut agg = Aggregate::default();
    let pages = table.pages();
    let mut page = 0u64;
    while page < pages {
        let count = (pages - page).min(extent as u64) as usize;
        dev.read_pages(table.first_page + page, count, &mut buf)?;
        for p in 0..count {
            let bytes = buf.page(p);
            let first_rowid = (page + p as u64) * layout.tuples_per_page as u64;
            let in_page = (layout.rows - first_rowid).min(layout.tuples_per_page as u64);
            for slot in 0..in_page as usize {
                let tuple = &bytes[slot * layout.tuple_bytes..(slot + 1) * layout.tuple_bytes];
                let key = int_field(tuple, field::UNIQUE1);
                if key >= lo && key < hi {
                    agg.add(tuple);
                }
            }
        }
        page += count as u64;
    }
    Ok((agg, pages))
}

/// Index leaf entries `[lo, hi)`, read leaf by leaf, handed to `f(rowid)`.
fn for_each_entry(
    dev: &mut dyn BlockDevice,
    table: &Table,
    lo: u32,
    hi: u32,
    leaves_per_read: usize,
    mut f: impl FnMut(&mut dyn BlockDevice, u32) -> Result<()>,
) -> Result<()> {
    let Some(index) = table.index else {
        return Err(invalid("table", "without index", "a table loaded with its unique1 index"));
    };
    if lo >= hi {
        return Ok(());
    }
    let per = INDEX_ENTRIES_PER_PAGE as u64;
    let first_leaf = lo as u64 / per;
    let last_leaf = (hi as u64 - 1) / per;
    let mut buf = PageBuf::new(leaves_per_read);
    let mut leaf = first_leaf;
    while leaf <= last_leaf {
        let count = (last_leaf + 1 - leaf).min(leaves_per_read as u64) as usize;
        dev.read_pages(index.first_page + leaf, count, &mut buf)?;
        let bytes = buf.bytes(count);
        let base = leaf * per;
        let start = (lo as u64).max(base) - base;
        let end = (hi as u64).min(base + count as u64 * per) - base;
        for i in start as usize..end as usize {
            let rowid = u32::from_le_bytes([
                bytes[8 * i + 4],
                bytes[8 * i + 5],
                bytes[8 * i + 6],
                bytes[8 * i + 7],
            ]);
            f(dev, rowid)?;
        }
        leaf += count as u64;
    }
    Ok(())
}

/// A buffer pool of `frames` pages with clock replacement.
struct BufferPool {
    data: Vec<u8>,
    page_of: Vec<u64>,
    referenced: Vec<bool>,
    frame_of: HashMap<u64, usize>,
    hand: usize,
    io: PageBuf,
    misses: u64,
}

impl BufferPool {
    fn new(frames: usize) -> BufferPool {
        BufferPool {
            // Frames are allocated as they fill, so a query that touches three pages does not
            // pay for zeroing the whole pool.
            data: Vec::with_capacity(frames * PAGE_SIZE),
            page_of: vec![u64::MAX; frames],
            referenced: vec![false; frames],
            frame_of: HashMap::with_capacity(frames),
            hand: 0,
            io: PageBuf::new(1),
            misses: 0,
        }
    }

    fn get(&mut self, dev: &mut dyn BlockDevice, page: u64) -> Result<&[u8]> {
        if let Some(&frame) = self.frame_of.get(&page) {
            self.referenced[frame] = true;
            return Ok(&self.data[frame * PAGE_SIZE..(frame + 1) * PAGE_SIZE]);
        }
        // Clock: pass over referenced frames, clearing their bit, until an unreferenced one.
        let frame = if self.data.len() < self.page_of.len() * PAGE_SIZE {
            let f = self.data.len() / PAGE_SIZE;
            self.data.resize(self.data.len() + PAGE_SIZE, 0);
            self.hand = (f + 1) % self.page_of.len();
            f
        } else {
            loop {
                let f = self.hand;
                self.hand = (self.hand + 1) % self.page_of.len();
                if !self.referenced[f] {
                    break f;
                }
                self.referenced[f] = false;
            }
        };
        if self.page_of[frame] != u64::MAX {
            self.frame_of.remove(&self.page_of[frame]);
        }
        dev.read_pages(page, 1, &mut self.io)?;
        self.misses += 1;
        let bytes = &mut self.data[frame * PAGE_SIZE..(frame + 1) * PAGE_SIZE];
        bytes.copy_from_slice(self.io.page(0));
        self.page_of[frame] = page;
        self.referenced[frame] = true;
        self.frame_of.insert(page, frame);
        Ok(&self.data[frame * PAGE_SIZE..(frame + 1) * PAGE_SIZE])
    }
}

fn index_scan(
    dev: &mut dyn BlockDevice,
    table: &Table,
    lo: u32,
    hi: u32,
    buffer_pages: usize,
) -> Result<(Aggregate, u64)> {
    let layout = table.layout;
    let mut pool = BufferPool::new(buffer_pages);
    let mut agg = Aggregate::default();
    for_each_entry(dev, table, lo, hi, 1, |dev, rowid| {
        let (page, at) = layout.locate(rowid as u64);
        let bytes = pool.get(dev, table.first_page + page)?;
        agg.add(&bytes[at..at + layout.tuple_bytes]);
        Ok(())
    })?;
    Ok((agg, pool.misses))
}

fn rowid_sort_scan(
    dev: &mut dyn BlockDevice,
    table: &Table,
    lo: u32,
    hi: u32,
    extent: usize,
) -> Result<(Aggregate, u64)> {
    let layout = table.layout;
    let mut rowids = Vec::with_capacity((hi - lo) as usize);
    for_each_entry(dev, table, lo, hi, extent, |_, rowid| {
        rowids.push(rowid);
        Ok(())
    })?;
    rowids.sort_unstable();
    let tpp = layout.tuples_per_page as u64;
    let mut buf = PageBuf::new(extent);
    let mut agg = Aggregate::default();
    let mut pages_read = 0u64;
    let mut i = 0;
    while i < rowids.len() {
        // One request: the page of rowids[i] and following pages that also hold matches,
        // as long as they are adjacent and fit the extent.
        let first = rowids[i] as u64 / tpp;
        let mut last = first;
        let mut j = i;
        while j < rowids.len() {
            let page = rowids[j] as u64 / tpp;
            if page == last || (page == last + 1 && page - first < extent as u64) {
                last = page;
                j += 1;
            } else {
                break;
            }
        }
        let count = (last - first + 1) as usize;
        dev.read_pages(table.first_page + first, count, &mut buf)?;
        pages_read += count as u64;
        for &rowid in &rowids[i..j] {
            let (page, at) = layout.locate(rowid as u64);
            let bytes = buf.page((page - first) as usize);
            agg.add(&bytes[at..at + layout.tuple_bytes]);
        }
        i = j;
    }
    Ok((agg, pages_read))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DeviceProfile, MemDevice, Modelled};
    use crate::wisconsin::{load, Layout};

    fn table(rows: u64, tpp: usize) -> (Modelled<MemDevice>, Table) {
        let mut dev = Modelled::new(MemDevice::new(), DeviceProfile::ssd());
        let layout = Layout::new(rows, tpp).unwrap();
        let t = load(&mut dev, layout, 0, true, 9).unwrap();
        (dev, t)
    }

    #[test]
    fn all_operators_agree_with_the_formula() {
        let (mut dev, t) = table(5000, 19);
        let params = ScanParams { extent_pages: 8, buffer_pages: 4 };
        for s in [0.0, 0.001, 0.02, 0.3, 1.0] {
            let (lo, hi) = key_range(5000, s).unwrap();
            let runs: Vec<ScanRun> =
                ScanOp::ALL.iter().map(|&op| run(&mut dev, &t, op, s, params).unwrap()).collect();
            let expected_count = (hi - lo) as u64;
            for r in &runs {
                assert_eq!(r.aggregate, runs[0].aggregate, "{s} {:?}", r.operator);
                assert_eq!(r.aggregate.count, expected_count);
            }
        }
        assert!(run(&mut dev, &t, ScanOp::Index, 1.5, params).is_err());
    }

    #[test]
    fn relation_scan_on_the_disk_model_costs_one_seek_and_a_transfer() {
        let (mut dev, t) = table(19 * 640, 19);
        let profile = DeviceProfile::ssd();
        let params = ScanParams { extent_pages: 32, buffer_pages: 4 };
        let r = run(&mut dev, &t, ScanOp::Relation, 0.5, params).unwrap();
        assert_eq!(r.io.pages_read, 640);
        assert_eq!(r.io.read_requests, 20);
        assert_eq!(r.io.random_requests, 1);
        let expected = profile.access_ns + profile.transfer_ns(640.0);
        assert!((r.io.modelled_io_ns as f64 - expected).abs() < 2.0);
    }

    #[test]
    fn rowid_sort_reads_each_page_once() {
        let (mut dev, t) = table(19 * 200, 19);
        let params = ScanParams { extent_pages: 16, buffer_pages: 1 };
        let r = run(&mut dev, &t, ScanOp::RowidSort, 0.2, params).unwrap();
        let ix = run(&mut dev, &t, ScanOp::Index, 0.2, params).unwrap();
        assert!(r.data_pages_read <= 200);
        assert!(ix.data_pages_read > r.data_pages_read, "one frame: index re-reads pages");
    }
}

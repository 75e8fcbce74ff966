//! Equi-joins under a memory limit (thesis §2.2.2, §3.4): sort-merge and hybrid hash on
//! `R.unique1 = S.unique1`, each projecting tuples to their first `projectivity · tuple_bytes`
//! bytes (the join key comes first) and aggregating `count(*)` and a checksum of the joined
//! projections, so nothing is materialised (§3.4: "an aggregation operator to avoid
//! materializing the output"). Runs and partitions spill through the same device as the
//! tables, so their I/O is charged as the thesis's DB2 temp space was.
//!
//! - Sort-merge: runs of the memory size (load, sort, write), merge passes while the runs
//!   outnumber the memory's pages, then one merge of R's and S's runs that joins as it merges.
//! - Hybrid hash (DeWitt et al. 1984): as many spill partitions as keep each under memory, the
//!   rest of memory holds partition 0's hash table; partitions are joined pairwise, recursively
//!   if one still does not fit. If partition 0 overflows (hash variance) part of its hash range
//!   is destaged to a further spill partition.
//! - Nested loop: the in-memory reference the tests check both against.
//!
//! Invariant: every buffer, sort area and hash table is taken from a [`Budget`] of
//! `memory_pages` pages first; the peak is reported and never exceeds the limit.

use crate::device::{BlockDevice, IoStats, PageBuf, PAGE_SIZE};
use crate::error::{invalid, Error, Result};
use crate::spill::{scan_records, Budget, Cursor, Source, SpillFile, SpillWriter, TempSpace};
use crate::wisconsin::Table;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

/// Accounted bytes per hash-table entry beyond the record: the chain link and the map slot.
const HASH_ENTRY_OVERHEAD: u64 = 16;
/// Accounted bytes per sort-area entry beyond the record: the (key, index) pair sorted.
const SORT_ENTRY_OVERHEAD: u64 = 8;
/// Most spill partitions per level and most recursion levels of the hybrid hash join.
const MAX_PARTITIONS: usize = 4096;
const MAX_DEPTH: u32 = 6;
/// Most times partition 0 may shrink (each by a fifth of its hash range).
const MAX_DESTAGES: u32 = 64;
/// Smallest memory a join accepts: input, output and two pages of work space.
pub const MIN_MEMORY_PAGES: usize = 4;

/// A join algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JoinAlgo {
    SortMerge,
    HybridHash,
    NestedLoop,
}

impl JoinAlgo {
    pub fn name(self) -> &'static str {
        match self {
            JoinAlgo::SortMerge => "sort-merge",
            JoinAlgo::HybridHash => "hybrid-hash",
            JoinAlgo::NestedLoop => "nested-loop",
        }
    }

    pub fn parse(s: &str) -> Result<JoinAlgo> {
        [JoinAlgo::SortMerge, JoinAlgo::HybridHash, JoinAlgo::NestedLoop]
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| invalid("algorithm", s, "sort-merge, hybrid-hash, nested-loop or all"))
    }
}

/// Knobs of a join.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct JoinParams {
    pub memory_pages: usize,
    /// Fraction of each tuple's bytes kept (0.05, 0.25 in the thesis).
    pub projectivity: f64,
    /// Pages per sequential request, capped at a quarter of memory.
    pub extent_pages: usize,
}

/// Bytes of a projected record for `projectivity` of `tuple_bytes`; at least the 4-byte key.
pub fn record_bytes(projectivity: f64, tuple_bytes: usize) -> Result<usize> {
    if !(projectivity > 0.0 && projectivity <= 1.0) {
        return Err(invalid("projectivity", projectivity, "a fraction in (0, 1] (0.05 = 5%)"));
    }
    Ok(((projectivity * tuple_bytes as f64).ceil() as usize).clamp(4, tuple_bytes))
}

/// `count(*)` and an order-independent checksum of the joined record pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JoinAggregate {
    pub matches: u64,
    pub checksum: u64,
}

impl JoinAggregate {
    fn add(&mut self, r: &[u8], s: &[u8]) {
        self.matches += 1;
        let pair = fnv(r).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ fnv(s).rotate_left(29);
        self.checksum = self.checksum.wrapping_add(pair);
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn key(record: &[u8]) -> u32 {
    u32::from_le_bytes([record[0], record[1], record[2], record[3]])
}

/// What an algorithm did.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct JoinDetail {
    pub runs_r: u64,
    pub runs_s: u64,
    pub merge_passes: u32,
    pub partitions: u64,
    pub max_depth: u32,
    pub destaged: u32,
    pub spill_pages_written: u64,
}

/// One join's run.
#[derive(Clone, Debug, Serialize)]
pub struct JoinRun {
    pub algorithm: JoinAlgo,
    pub projectivity: f64,
    pub record_bytes: usize,
    pub rows_r: u64,
    pub rows_s: u64,
    pub memory_pages: usize,
    pub peak_memory_pages: u64,
    pub aggregate: JoinAggregate,
    pub detail: JoinDetail,
    pub io: IoStats,
    pub io_s: f64,
    pub wall_s: f64,
    pub time_s: f64,
}

/// Joins `r` and `s` (loaded on `dev`) with `algo`; spill space starts at `temp_first_page`.
pub fn run(
    dev: &mut dyn BlockDevice,
    r: &Table,
    s: &Table,
    algo: JoinAlgo,
    params: JoinParams,
    temp_first_page: u64,
) -> Result<JoinRun> {
    if params.memory_pages < MIN_MEMORY_PAGES {
        let at_least = format!("at least {MIN_MEMORY_PAGES}");
        return Err(invalid("memory-pages", params.memory_pages, at_least));
    }
    if params.extent_pages == 0 {
        return Err(invalid("extent-pages", 0, "at least 1"));
    }
    let rb = record_bytes(params.projectivity, r.layout.tuple_bytes.min(s.layout.tuple_bytes))?;
    let mut ctx = Ctx {
        budget: Budget::new(params.memory_pages),
        temp: TempSpace { next_page: temp_first_page },
        extent: params.extent_pages.min(params.memory_pages / 4).max(1),
        record_bytes: rb,
        detail: JoinDetail::default(),
        agg: JoinAggregate::default(),
    };
    dev.forget_position();
    let before = dev.stats();
    let t = Instant::now();
    match algo {
        JoinAlgo::SortMerge => sort_merge(dev, r, s, &mut ctx)?,
        JoinAlgo::HybridHash => hybrid_hash(dev, Source::Table(r), Source::Table(s), 0, &mut ctx)?,
        JoinAlgo::NestedLoop => nested_loop(dev, r, s, &mut ctx)?,
    }
    let wall_s = t.elapsed().as_secs_f64();
    let io = dev.stats().since(&before);
    ctx.detail.spill_pages_written = io.pages_written;
    let io_s = io.modelled_io_ns as f64 / 1e9;
    let peak = ctx.budget.peak_bytes.div_ceil(PAGE_SIZE as u64);
    if algo != JoinAlgo::NestedLoop {
        assert!(peak <= params.memory_pages as u64, "the budget refuses what does not fit");
    }
    Ok(JoinRun {
        algorithm: algo,
        projectivity: params.projectivity,
        record_bytes: rb,
        rows_r: r.layout.rows,
        rows_s: s.layout.rows,
        memory_pages: params.memory_pages,
        peak_memory_pages: peak,
        aggregate: ctx.agg,
        detail: ctx.detail,
        io,
        io_s,
        wall_s,
        time_s: if dev.is_modelled() { io_s + wall_s } else { wall_s },
    })
}

struct Ctx {
    budget: Budget,
    temp: TempSpace,
    extent: usize,
    record_bytes: usize,
    detail: JoinDetail,
    agg: JoinAggregate,
}

/// The in-memory reference: every R record against every S record with the same key.
fn nested_loop(dev: &mut dyn BlockDevice, r: &Table, s: &Table, ctx: &mut Ctx) -> Result<()> {
    let rb = ctx.record_bytes;
    let mut buf = PageBuf::new(ctx.extent);
    let mut load = |dev: &mut dyn BlockDevice, t: &Table| -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        scan_records(dev, Source::Table(t), rb, &mut buf, |_, rec| {
            out.push(rec.to_vec());
            Ok(())
        })?;
        Ok(out)
    };
    let rs = load(dev, r)?;
    let ss = load(dev, s)?;
    for a in &rs {
        for b in &ss {
            if key(a) == key(b) {
                ctx.agg.add(a, b);
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Sort-merge

fn sort_merge(dev: &mut dyn BlockDevice, r: &Table, s: &Table, ctx: &mut Ctx) -> Result<()> {
    let mut runs_r = make_runs(dev, Source::Table(r), ctx)?;
    let mut runs_s = make_runs(dev, Source::Table(s), ctx)?;
    ctx.detail.runs_r = runs_r.len() as u64;
    ctx.detail.runs_s = runs_s.len() as u64;
    // The final merge gives each run at least one page and keeps one page for a key group;
    // merge the side with more runs until both fit.
    let memory = ctx.budget.limit_pages() as usize - 1;
    while runs_r.len() + runs_s.len() > memory {
        ctx.detail.merge_passes += 1;
        let side = if runs_r.len() >= runs_s.len() { &mut runs_r } else { &mut runs_s };
        let out_pages = ctx.extent.min(memory / 4).max(1);
        let fan_in = (memory - out_pages).max(2);
        let mut merged = Vec::new();
        for group in side.chunks(fan_in) {
            merged.push(merge_runs(dev, group, out_pages, ctx)?);
        }
        *side = merged;
    }
    let per_run = (memory / (runs_r.len() + runs_s.len()).max(1)).clamp(1, ctx.extent);
    let mut left = Merge::open(dev, &runs_r, per_run, ctx)?;
    let mut right = Merge::open(dev, &runs_s, per_run, ctx)?;
    let mut group: Vec<u8> = Vec::new();
    while let (Some(a), Some(b)) = (left.peek_key(), right.peek_key()) {
        if a < b {
            left.advance(dev)?;
        } else if b < a {
            right.advance(dev)?;
        } else {
            // Gather S's records with this key (bounded by the budget), then pair each of R's.
            group.clear();
            while right.peek_key() == Some(a) {
                ctx.budget.take("sort-merge key group", ctx.record_bytes as u64)?;
                group.extend_from_slice(right.current().unwrap_or_default());
                right.advance(dev)?;
            }
            while left.peek_key() == Some(a) {
                let rec = left.current().unwrap_or_default();
                for srec in group.chunks(ctx.record_bytes) {
                    ctx.agg.add(rec, srec);
                }
                left.advance(dev)?;
            }
            ctx.budget.give(group.len() as u64);
        }
    }
    left.close(ctx);
    right.close(ctx);
    Ok(())
}

/// Sorted runs of `source`, each as large as the memory left after an input and an output
/// buffer.
fn make_runs(
    dev: &mut dyn BlockDevice,
    source: Source<'_>,
    ctx: &mut Ctx,
) -> Result<Vec<SpillFile>> {
    let memory = ctx.budget.limit_pages() as usize;
    let io_pages = ctx.extent.min(memory / 4).max(1);
    let mut input = ctx.budget.buffer("sort-merge input", io_pages)?;
    let out = ctx.budget.buffer("sort-merge output", io_pages)?;
    let rb = ctx.record_bytes;
    let area = ctx.budget.limit_bytes - ctx.budget.used_bytes;
    let capacity = (area / (rb as u64 + SORT_ENTRY_OVERHEAD)) as usize;
    if capacity == 0 {
        return Err(Error::MemoryLimit {
            stage: "sort-merge run",
            limit_pages: memory as u64,
            needed_pages: memory as u64 + 1,
        });
    }
    let charge = capacity as u64 * (rb as u64 + SORT_ENTRY_OVERHEAD);
    ctx.budget.take("sort-merge sort area", charge)?;
    let mut arena: Vec<u8> = Vec::with_capacity(capacity * rb);
    let mut runs = Vec::new();
    let mut out = Some(out);
    let mut flush = |dev: &mut dyn BlockDevice, arena: &mut Vec<u8>, temp: &mut TempSpace| {
        let n = arena.len() / rb;
        let mut order: Vec<(u32, u32)> =
            (0..n).map(|i| (key(&arena[i * rb..]), i as u32)).collect();
        order.sort_unstable();
        let mut w = SpillWriter::new(out.take().unwrap_or_else(|| PageBuf::new(io_pages)), rb);
        for (_, i) in order {
            let i = i as usize;
            w.push(dev, temp, &arena[i * rb..(i + 1) * rb])?;
        }
        let (file, buf) = w.finish(dev, temp)?;
        out = Some(buf);
        runs.push(file);
        arena.clear();
        Ok::<(), Error>(())
    };
    scan_records(dev, source, rb, &mut input, |dev, rec| {
        arena.extend_from_slice(rec);
        if arena.len() == capacity * rb {
            flush(dev, &mut arena, &mut ctx.temp)?;
        }
        Ok(())
    })?;
    if !arena.is_empty() {
        flush(dev, &mut arena, &mut ctx.temp)?;
    }
    ctx.budget.give(charge);
    ctx.budget.give_buffer(input);
    ctx.budget.give((io_pages * PAGE_SIZE) as u64);
    Ok(runs)
}

/// A k-way merge over sorted runs.
struct Merge<'a> {
    cursors: Vec<Cursor<'a>>,
    heap: BinaryHeap<Reverse<(u32, usize)>>,
}

impl<'a> Merge<'a> {
    fn open(
        dev: &mut dyn BlockDevice,
        runs: &'a [SpillFile],
        per_run: usize,
        ctx: &mut Ctx,
    ) -> Result<Merge<'a>> {
        let mut cursors = Vec::with_capacity(runs.len());
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (i, run) in runs.iter().enumerate() {
            let buf = ctx.budget.buffer("merge input", per_run)?;
            let c = Cursor::open(dev, run, buf, ctx.record_bytes)?;
            if let Some(rec) = c.current() {
                heap.push(Reverse((key(rec), i)));
            }
            cursors.push(c);
        }
        Ok(Merge { cursors, heap })
    }

    fn peek_key(&self) -> Option<u32> {
        self.heap.peek().map(|Reverse((k, _))| *k)
    }

    fn current(&self) -> Option<&[u8]> {
        let Reverse((_, i)) = self.heap.peek()?;
        self.cursors[*i].current()
    }

    fn advance(&mut self, dev: &mut dyn BlockDevice) -> Result<()> {
        let Some(Reverse((_, i))) = self.heap.pop() else { return Ok(()) };
        self.cursors[i].advance(dev)?;
        if let Some(rec) = self.cursors[i].current() {
            self.heap.push(Reverse((key(rec), i)));
        }
        Ok(())
    }

    fn close(self, ctx: &mut Ctx) {
        for c in self.cursors {
            ctx.budget.give_buffer(c.into_buf());
        }
    }
}

/// Merges `group` into one run through one-page inputs and an `out_pages` output buffer.
fn merge_runs(
    dev: &mut dyn BlockDevice,
    group: &[SpillFile],
    out_pages: usize,
    ctx: &mut Ctx,
) -> Result<SpillFile> {
    let memory = ctx.budget.limit_pages() as usize;
    let per_run = ((memory - out_pages) / group.len()).clamp(1, ctx.extent);
    let out = ctx.budget.buffer("merge output", out_pages)?;
    let mut merge = Merge::open(dev, group, per_run, ctx)?;
    let mut w = SpillWriter::new(out, ctx.record_bytes);
    while let Some(rec) = merge.current() {
        w.push(dev, &mut ctx.temp, rec)?;
        merge.advance(dev)?;
    }
    merge.close(ctx);
    let (file, buf) = w.finish(dev, &mut ctx.temp)?;
    ctx.budget.give_buffer(buf);
    Ok(file)
}

// ---------------------------------------------------------------------------------------------
// Hybrid hash

/// An in-memory hash table of records, charged to the budget.
struct HashTable {
    arena: Vec<u8>,
    next: Vec<u32>,
    heads: HashMap<u32, u32>,
    record_bytes: usize,
    charged: u64,
}

impl HashTable {
    fn new(record_bytes: usize) -> HashTable {
        HashTable {
            arena: Vec::new(),
            next: Vec::new(),
            heads: HashMap::new(),
            record_bytes,
            charged: 0,
        }
    }

    fn entry_bytes(&self) -> u64 {
        self.record_bytes as u64 + HASH_ENTRY_OVERHEAD
    }

    fn insert(&mut self, rec: &[u8]) {
        let i = self.next.len() as u32;
        self.arena.extend_from_slice(rec);
        let prev = self.heads.insert(key(rec), i).unwrap_or(u32::MAX);
        self.next.push(prev);
        self.charged += self.entry_bytes();
    }

    fn probe(&self, s: &[u8], agg: &mut JoinAggregate) {
        let rb = self.record_bytes;
        let mut i = self.heads.get(&key(s)).copied().unwrap_or(u32::MAX);
        while i != u32::MAX {
            let r = &self.arena[i as usize * rb..(i as usize + 1) * rb];
            agg.add(r, s);
            i = self.next[i as usize];
        }
    }

    fn records(&self) -> impl Iterator<Item = &[u8]> {
        self.arena.chunks(self.record_bytes)
    }
}

/// A hash of the key in [0, 1), different at each recursion depth.
fn unit_hash(k: u32, depth: u32) -> f64 {
    let mut x = (k as u64) ^ ((depth as u64 + 1) << 40);
    x = (x ^ (x >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    x = (x ^ (x >> 33)).wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// How the hash range [0, 1) splits: [0, q0) in memory, then overflow ranges destaged from
/// partition 0, then `spilled` equal parts of [q0_initial, 1).
struct Partitioning {
    q0: f64,
    q0_initial: f64,
    spilled: usize,
    /// (lo, hi) hash ranges destaged from memory; partition numbers `spilled + i`.
    destaged: Vec<(f64, f64)>,
}

impl Partitioning {
    /// `None`: partition 0 (memory); `Some(i)`: spill partition `i`.
    fn of(&self, u: f64) -> Option<usize> {
        if u < self.q0 {
            return None;
        }
        if u < self.q0_initial {
            let i = self.destaged.iter().position(|&(lo, hi)| u >= lo && u < hi);
            return Some(self.spilled + i.unwrap_or(0));
        }
        let part = ((u - self.q0_initial) / (1.0 - self.q0_initial) * self.spilled as f64) as usize;
        Some(part.min(self.spilled - 1))
    }
}

/// Chooses the number of spill partitions and their write-buffer pages so that each spilled
/// partition's hash table fits in `avail` pages on the next pass (with 10% margin for hash
/// variance); what memory is left holds partition 0.
fn plan_partitions(need_pages: f64, avail: usize, extent: usize) -> (usize, usize, f64) {
    for b in 1..=MAX_PARTITIONS.min(avail.saturating_sub(1)).max(1) {
        let w = (avail / (2 * b)).clamp(1, extent);
        let Some(mem0) = avail.checked_sub(b * w) else { break };
        let rest = (need_pages - mem0 as f64).max(0.0);
        if rest * 1.1 / b as f64 <= avail as f64 {
            return (b, w, mem0 as f64);
        }
    }
    // More partitions than buffers allow: Grace hash with one-page buffers; oversized
    // partitions recurse.
    let b = avail.saturating_sub(1).clamp(1, MAX_PARTITIONS);
    (b, 1, avail.saturating_sub(b) as f64)
}

fn hybrid_hash(
    dev: &mut dyn BlockDevice,
    r: Source<'_>,
    s: Source<'_>,
    depth: u32,
    ctx: &mut Ctx,
) -> Result<()> {
    ctx.detail.max_depth = ctx.detail.max_depth.max(depth);
    let rb = ctx.record_bytes;
    let memory = ctx.budget.limit_pages() as usize;
    let in_pages = ctx.extent.min(memory / 4).max(1);
    let mut input = ctx.budget.buffer("hash input", in_pages)?;
    let avail = memory - in_pages;
    let entry = rb as u64 + HASH_ENTRY_OVERHEAD;
    let need_pages = (r.records() * entry) as f64 / PAGE_SIZE as f64;
    if need_pages <= avail as f64 {
        // Everything fits: build, then probe.
        let mut table = HashTable::new(rb);
        ctx.budget.take("hash table", r.records() * entry)?;
        scan_records(dev, r, rb, &mut input, |_, rec| {
            table.insert(rec);
            Ok(())
        })?;
        let agg = &mut ctx.agg;
        scan_records(dev, s, rb, &mut input, |_, rec| {
            table.probe(rec, agg);
            Ok(())
        })?;
        ctx.budget.give(r.records() * entry);
        ctx.budget.give_buffer(input);
        return Ok(());
    }
    if depth >= MAX_DEPTH {
        return Err(Error::MemoryLimit {
            stage: "hybrid hash recursion",
            limit_pages: memory as u64,
            needed_pages: need_pages.ceil() as u64,
        });
    }
    let (spilled, w, mem0) = plan_partitions(need_pages, avail, ctx.extent);
    ctx.detail.partitions += spilled as u64;
    let q0 = (0.98 * mem0 / need_pages).min(1.0);
    let mut parts = Partitioning { q0, q0_initial: q0, spilled, destaged: Vec::new() };
    let table_share = (mem0 * PAGE_SIZE as f64) as u64;
    let mut table_limit = table_share;
    let mut table = HashTable::new(rb);
    ctx.budget.take("hash table", table_share)?;
    let mut writers = Vec::with_capacity(spilled);
    for _ in 0..spilled {
        writers.push(SpillWriter::new(ctx.budget.buffer("partition buffer", w)?, rb));
    }
    // Build: partition R; partition 0 into the hash table.
    let mut destaged_here = 0u32;
    {
        let (temp, detail) = (&mut ctx.temp, &mut ctx.detail);
        scan_records(dev, r, rb, &mut input, |dev, rec| {
            let u = unit_hash(key(rec), depth);
            match parts.of(u) {
                Some(p) => writers[p].push(dev, temp, rec),
                None => {
                    while parts.q0 > 0.0 && table.charged + table.entry_bytes() > table_limit {
                        if destaged_here >= MAX_DESTAGES {
                            return Err(Error::MemoryLimit {
                                stage: "hybrid hash partition 0",
                                limit_pages: memory as u64,
                                needed_pages: memory as u64 + 1,
                            });
                        }
                        // The new partition's write buffer comes out of the table's share;
                        // with less than a page left, the rest of partition 0 joins the last
                        // destaged partition instead.
                        let pages = w.min((table_limit / PAGE_SIZE as u64) as usize);
                        table_limit -= (pages * PAGE_SIZE) as u64;
                        destage(dev, &mut table, &mut parts, &mut writers, temp, pages, depth)?;
                        detail.destaged += 1;
                        destaged_here += 1;
                    }
                    // The record's own range may have been destaged.
                    match parts.of(u) {
                        Some(p) => writers[p].push(dev, temp, rec)?,
                        None => table.insert(rec),
                    }
                    Ok(())
                }
            }
        })?;
    }
    let buffer_pages: Vec<usize> = writers.iter().map(|wr| wr.buffer_pages()).collect();
    let mut r_files = Vec::with_capacity(writers.len());
    for (i, wr) in writers.into_iter().enumerate() {
        let (file, buf) = wr.finish(dev, &mut ctx.temp)?;
        r_files.push(file);
        // Destaged partitions' buffers came out of the table's share, returned below.
        if i < spilled {
            ctx.budget.give_buffer(buf);
        }
    }
    // Probe: partition S; partition 0 probes the table. The table keeps what it holds; the
    // rest of its share pays for the destaged partitions' buffers.
    ctx.budget.give(table_share);
    ctx.budget.take("hash table", table.charged)?;
    let mut writers = Vec::with_capacity(r_files.len());
    for &pages in &buffer_pages {
        writers.push(SpillWriter::new(ctx.budget.buffer("partition buffer", pages)?, rb));
    }
    {
        let (temp, agg) = (&mut ctx.temp, &mut ctx.agg);
        scan_records(dev, s, rb, &mut input, |dev, rec| {
            match parts.of(unit_hash(key(rec), depth)) {
                Some(p) => writers[p].push(dev, temp, rec)?,
                None => table.probe(rec, agg),
            }
            Ok(())
        })?;
    }
    let mut s_files = Vec::with_capacity(writers.len());
    for wr in writers {
        let (file, buf) = wr.finish(dev, &mut ctx.temp)?;
        s_files.push(file);
        ctx.budget.give_buffer(buf);
    }
    ctx.budget.give(table.charged);
    drop(table);
    ctx.budget.give_buffer(input);
    for (rf, sf) in r_files.iter().zip(&s_files) {
        if rf.records > 0 && sf.records > 0 {
            hybrid_hash(dev, Source::Spill(rf), Source::Spill(sf), depth + 1, ctx)?;
        }
    }
    Ok(())
}

/// Moves the top fifth of partition 0's hash range out of memory into a new spill partition.
fn destage(
    dev: &mut dyn BlockDevice,
    table: &mut HashTable,
    parts: &mut Partitioning,
    writers: &mut Vec<SpillWriter>,
    temp: &mut TempSpace,
    w: usize,
    depth: u32,
) -> Result<()> {
    let fold = w == 0 && !parts.destaged.is_empty();
    let new_q0 = if fold || parts.q0 < 1e-9 { 0.0 } else { parts.q0 * 0.8 };
    if fold {
        if let Some(last) = parts.destaged.last_mut() {
            last.0 = 0.0;
        }
    } else {
        parts.destaged.push((new_q0, parts.q0));
        writers.push(SpillWriter::new(PageBuf::new(w.max(1)), table.record_bytes));
    }
    parts.q0 = new_q0;
    let mut kept = HashTable::new(table.record_bytes);
    let writer = writers.len() - 1;
    for rec in table.records() {
        if unit_hash(key(rec), depth) < new_q0 {
            kept.insert(rec);
        } else {
            writers[writer].push(dev, temp, rec)?;
        }
    }
    *table = kept;
    Ok(())
}

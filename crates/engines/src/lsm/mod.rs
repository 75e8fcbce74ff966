//! Log-structured updates — Arulraj, Pavlo, Dulloor, *Let's Talk About Storage & Recovery
//! Methods for Non-Volatile Memory Database Systems*, SIGMOD 2015: the Log engine (§3.3, LevelDB
//! lineage) with `io=fs`, and NVM-Log (§4.3) with `io=nvm` (the default).
//!
//! Writes go to a memtable; when it fills, it is flushed into one immutable sorted run per
//! table (a fixed-stride array of rows with a sparse index and a bloom filter, [`run`]), and
//! compaction merges runs ([`Lsm::compact`]). Deletes are tombstones, dropped when a merge
//! reaches a table's oldest run. The manifest ([`layout`]) lists tables and runs; it is
//! double-buffered and published by one checksummed write, so flushes and compactions are
//! atomic. Run space is allocated from a volatile free list rebuilt from the manifest at open:
//! space of a run being written is *pending* (owned by no manifest, so a crash frees it), a
//! listed run is *in use*, and a merged-away run is freed only after the manifest that drops it
//! is durable, so nothing leaks or is reused across a crash.
//!
//! * `io=fs` (Log): the memtable is in DRAM; each commit appends its rows to a write-ahead log
//!   in the region's file with `pwrite` and makes it durable with `fdatasync` (one barrier);
//!   runs and manifests go through `pwrite` + `fdatasync` too. Recovery replays the log into a
//!   new memtable: its time grows with the transactions since the last flush.
//! * `io=nvm` (NVM-Log): the memtable is a persistent skip list in the region ([`memtable`]);
//!   the log records only pointers to the nodes a commit adds. Commit: (1) write the nodes and
//!   the pointer record, persist; (2) link the nodes (8-byte stores), persist; (3) store the
//!   commit's sequence number in the control page, persist. Recovery undoes the pointer record of
//!   the one commit that may be in flight (unlinks its nodes) and never rebuilds the memtable.
//!
//! **Recovery invariant**: a row is visible after a crash iff its commit's sequence number is
//! durable (`fs`: its log record is valid and in sequence; `nvm`: `committed_seq` covers it) or
//! it is in a run the durable manifest lists.
//!
//! **Compaction policy** (Bentley–Saxe logarithmic method, per table): after a flush adds a run,
//! the newest runs are merged into one while the next older run holds at most
//! [`MERGE_RATIO`] times the entries of the runs being merged, or while the table would keep
//! more than [`MAX_RUNS_PER_TABLE`] runs. Runs then shrink geometrically from oldest to newest,
//! so a table has at most min(`MAX_RUNS_PER_TABLE`, 1 + log2(rows / rows per flush)) runs: a
//! point read probes the memtable and at most that many runs (each behind a bloom filter at
//! about 1% false positives), and each row is rewritten O(log(rows / rows per flush)) times.
//!
//! **Concurrency**: key-level strict 2PL (`storage::lock`, no-wait) as every nvmdb engine;
//! writes are buffered in the transaction and applied at commit, which runs under the engine's
//! write lock (one committer at a time); reads share the lock. Flushes and compactions run
//! inside the commit that fills the memtable (no background thread).
//!
//! Deliberate differences from N-Store: commit persists before it returns (N-Store's
//! NVM engines group commits and their allocator's `sync` is the only barrier); the skip list
//! replaces N-Store's STX B+tree memtable (same role: an ordered index with atomic updates).
//!
//! Not split yet (1,145 lines, over the ~900 guide): its jobs are the commit path (`commit_*`,
//! memtable), flush and compaction (`flush_memtable`, `compact`, `MergeIter`) and recovery
//! (`recover_fs`, `recover_nvm`, `read_manifest`); recovery would move to `lsm/recovery.rs`
//! with the log-record codecs it shares with commit. Deferred: row checksums (issue 34's
//! parallel branch `cksum`) edit the engines at the same time, and a move would turn that
//! merge into a conflict.

pub(crate) mod layout;
pub(crate) mod memtable;
pub mod options;
pub(crate) mod run;
mod txn;

use crate::device::{Device, Io};
use crate::{EngineOptions, Fault};
use layout::{Areas, Manifest, RunRef, C_COMMITTED, LOG_SLOT_BYTES, MANIFEST_BYTES, MAX_TABLES};
use memtable::{DramMem, Node, NvmMem, HEAD_BYTES};
use parking_lot::RwLock;
use pmem::Region;
use run::{Run, RunBuilder};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use storage::engine::{check_spec, RecoveryReport};
use storage::format::{crc, get_u32, get_u64, page_offset, Layout, Superblock, PAGE_SIZE_U64};
use storage::lock::LockManager;
use storage::{DbError, Engine, IntegrityReport, IntegrityResult, Result, TableId, TableSpec, Txn};

pub use options::Options;

pub const ENGINE_NAME: &str = "lsm";
/// Compaction merges while the next older run has at most this many times the entries.
pub const MERGE_RATIO: u64 = 2;
/// Most runs one table keeps (63 tables × (7 + 1 being flushed) fit the manifest's 512).
pub const MAX_RUNS_PER_TABLE: usize = 7;
const _: () = assert!(MAX_TABLES * (MAX_RUNS_PER_TABLE + 1) <= layout::MAX_RUNS);
/// Bytes of a pointer record's header (`io=nvm`).
const PTR_HEADER: u64 = 32;
/// Most rows one transaction may write (`io=nvm`: pointers in one log slot).
const MAX_TXN_WRITES: u64 = (LOG_SLOT_BYTES - PTR_HEADER) / 8;
/// Bytes of a log record's header (`io=fs`), and of each entry's.
const REC_HEADER: usize = 24;
const REC_ENTRY_HEADER: usize = 16;

/// Test-only protocol violations of `lsm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LsmFault {
    /// Commit persists its nodes and pointer record after linking them, not before (`io=fs`:
    /// no `fdatasync` of the log record, which process kills cannot see).
    SkipLogPersist,
    /// A run is named by the manifest before its contents are persisted (they are persisted
    /// right after the manifest).
    RunBeforePersist,
    /// Compaction drops the merged-away runs from the manifest before the new run is published.
    DropRunsBeforePublish,
}

/// The writes of one transaction: the new row, or `None` for a delete.
pub(crate) type WriteSet = BTreeMap<(TableId, u64), Option<Vec<u8>>>;
/// One table's rows in key order (`None`: a tombstone), as a flush writes them.
type TableRows = Vec<(u64, Option<Vec<u8>>)>;

enum Mem {
    Dram(DramMem),
    Nvm(NvmMem),
}

pub(crate) struct State {
    manifest: Manifest,
    /// Manifest slot holding `manifest` (the next goes to the other).
    slot: u64,
    /// Per table, oldest first.
    runs: Vec<Vec<Run>>,
    mem: Mem,
    committed_seq: u64,
    /// `io=fs`: bytes of the log in use.
    log_end: u64,
    /// Free extents of the run area: first page -> pages.
    free: BTreeMap<u64, u64>,
}

#[derive(Default)]
struct LsmStats {
    flushes: AtomicU64,
    compactions: AtomicU64,
    run_bytes_written: AtomicU64,
    log_bytes_written: AtomicU64,
    manifests: AtomicU64,
}

pub struct Lsm {
    region: Region,
    device: Device,
    areas: Areas,
    workers: u32,
    fault: Option<LsmFault>,
    locks: LockManager,
    state: RwLock<State>,
    next_txn: AtomicU64,
    stats: LsmStats,
    report: RecoveryReport,
}

fn lsm_fault(f: Option<Fault>) -> Option<LsmFault> {
    match f? {
        Fault::LsmSkipLogPersist => Some(LsmFault::SkipLogPersist),
        Fault::LsmRunBeforePersist => Some(LsmFault::RunBeforePersist),
        Fault::LsmDropRunsBeforePublish => Some(LsmFault::DropRunsBeforePublish),
        _ => None,
    }
}

/// Bytes of the `io=fs` log for a memtable of `memtable_bytes`: the memtable's rows twice over
/// (record headers, and a last transaction that overruns the threshold).
fn fs_log_bytes(memtable_bytes: u64) -> u64 {
    (2 * memtable_bytes + (1 << 16)).next_multiple_of(PAGE_SIZE_U64)
}

fn validate(o: &EngineOptions) -> Result<()> {
    if !(16 << 10..=1 << 30).contains(&o.lsm.memtable_bytes) {
        return Err(DbError::Invalid(format!(
            "engine lsm: memtable_bytes={} must be 16KiB..=1GiB",
            o.lsm.memtable_bytes
        )));
    }
    if o.workers == 0 || o.workers > storage::format::MAX_WORKERS {
        return Err(DbError::Invalid("engine lsm: workers must be 1..=256".into()));
    }
    Ok(())
}

/// The areas and the superblock layout of a region of `page_count` pages formatted with `o`.
/// The shared superblock's nominal layout (one worker) is sized so that its "undo log" pages are
/// exactly lsm's control page, manifests, log and arenas, and its first data page is the first
/// run page: format writes only below it, so a format cut short leaves a region the superblock
/// check still sees as blank (and formats again).
fn plan(o: &EngineOptions, page_count: u64) -> (Areas, Layout) {
    let memtable_bytes = o.lsm.memtable_bytes.next_multiple_of(PAGE_SIZE_U64);
    let io_fs = o.io == Io::Fs;
    let mut areas = Areas {
        control_page: 0,
        io_fs,
        memtable_bytes,
        log_bytes: if io_fs { fs_log_bytes(memtable_bytes) } else { 2 * LOG_SLOT_BYTES },
        page_count,
    };
    let fixed_pages = areas.first_run_page();
    let layout = Layout {
        page_count,
        workers: 1,
        undo_pages: (fixed_pages - 2) as u32,
        sys_undo_pages: 2,
        node_capacity: storage::btree::MAX_NODE_ENTRIES as u32,
        row_checksums: o.checksums,
    };
    areas.control_page = layout.undo_log_page(0);
    debug_assert_eq!(areas.first_run_page(), layout.first_data_page());
    (areas, layout)
}

/// The pages formatting a region of `pages` requires (see [`crate::min_region_bytes`]).
pub(crate) fn needed_pages(o: &EngineOptions, pages: u64) -> u64 {
    plan(o, pages).0.first_run_page() + 16
}

impl Lsm {
    /// Opens the engine: formats a blank region, otherwise recovers it.
    pub fn open(region: Region, options: &EngineOptions) -> Result<Lsm> {
        let started = Instant::now();
        validate(options)?;
        let mut report = RecoveryReport::default();
        let sb = match Superblock::read(&region, ENGINE_NAME, region.created())? {
            Some(sb) => sb,
            None => {
                report.formatted = true;
                Self::format(&region, options)?
            }
        };
        let areas = read_areas(&region, &sb)?;
        let io_fs = options.io == Io::Fs;
        if areas.io_fs != io_fs {
            let was = if areas.io_fs { "fs" } else { "nvm" };
            return Err(DbError::Invalid(format!(
                "engine lsm: the region was formatted with io={was}; open it with \
                 --engine-opt io={was}"
            )));
        }
        if page_offset(areas.first_run_page()) > region.backed_len() {
            return Err(DbError::Corrupt("region is shorter than its lsm areas".into()));
        }
        let device = Device::open(&region, options.io, ENGINE_NAME)?;
        let (manifest, slot) = read_manifest(&region, &areas)?;
        let mut runs: Vec<Vec<Run>> = vec![Vec::new(); manifest.tables.len()];
        for r in &manifest.runs {
            let row_bytes = manifest.tables[r.table as usize].row_bytes;
            runs[r.table as usize].push(Run::open(&region, *r, row_bytes)?);
        }
        let free = free_extents(&areas, &manifest.runs);
        let recover_started = Instant::now();
        let (mem, committed_seq, log_end) = if io_fs {
            recover_fs(&region, &areas, &manifest, &mut report)?
        } else {
            recover_nvm(&region, &areas, &manifest, sb.layout.row_checksums, &mut report)?
        };
        let recover_us = recover_started.elapsed().as_micros();
        report.notes.push(format!(
            "io={}: memtable recovered in {recover_us} µs; {} runs, manifest generation {}",
            if io_fs { "fs" } else { "nvm" },
            manifest.runs.len(),
            manifest.generation
        ));
        let state = State { manifest, slot, runs, mem, committed_seq, log_end, free };
        report.duration = started.elapsed();
        Ok(Lsm {
            region,
            device,
            areas,
            workers: options.workers,
            fault: lsm_fault(options.fault),
            locks: LockManager::default(),
            state: RwLock::new(state),
            next_txn: AtomicU64::new(1),
            stats: LsmStats::default(),
            report,
        })
    }

    /// Formats a blank region (crash-atomic: the superblock's valid magic is the last store).
    fn format(region: &Region, o: &EngineOptions) -> Result<Superblock> {
        let (areas, layout) = plan(o, region.len() / PAGE_SIZE_U64);
        layout.validate()?;
        let memtable_bytes = areas.memtable_bytes;
        let io_fs = areas.io_fs;
        let needed = needed_pages(o, areas.page_count);
        if needed > layout.page_count {
            return Err(DbError::RegionFull(format!(
                "engine lsm needs at least {} bytes for memtable_bytes={memtable_bytes}",
                page_offset(needed)
            )));
        }
        region.ensure_backed(page_offset(areas.first_run_page()))?;
        let sb = Superblock { engine: ENGINE_NAME.into(), layout };
        sb.begin_format(region);
        let control = page_offset(areas.control_page);
        region.write(control, &areas.encode());
        region.write_u64(control + C_COMMITTED, 0);
        region.flush(control, PAGE_SIZE_U64);
        let m = Manifest { generation: 1, ..Default::default() };
        let slot0 = areas.manifest_slot(0);
        region.write(slot0, &m.encode());
        region.flush(slot0, MANIFEST_BYTES as u64);
        if !io_fs {
            // Pointer-log slots hold no record; arena 0's head is empty.
            for s in 0..2 {
                region.write_u64(areas.log_base() + s * LOG_SLOT_BYTES, 0);
                region.flush(areas.log_base() + s * LOG_SLOT_BYTES, 8);
            }
            NvmMem::format(region, areas.arena_base(0));
        }
        region.fence();
        sb.publish(region);
        Ok(sb)
    }

    fn table_spec(&self, st: &State, table: TableId) -> Result<TableSpec> {
        st.manifest.tables.get(table as usize).cloned().ok_or(DbError::NoSuchTable(table))
    }

    /// The committed row of `(table, key)`, into `out`. Returns false if absent.
    fn get(&self, st: &State, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let tables = &st.manifest.tables;
        match &st.mem {
            Mem::Dram(d) => {
                if let Some(v) = d.map.get(&(table, key)) {
                    if let Some(v) = v {
                        out.extend_from_slice(v);
                    }
                    return Ok(v.is_some());
                }
            }
            Mem::Nvm(m) => {
                if let Some(n) = m.get(&self.region, tables, table, key)? {
                    if let Some(v) = m.value(&self.region, tables, &n)? {
                        out.extend_from_slice(v);
                    }
                    return Ok(!n.tombstone);
                }
            }
        }
        for run in st.runs[table as usize].iter().rev() {
            if let Some(v) = run.get(&self.region, key)? {
                if let Some(v) = v {
                    out.extend_from_slice(v);
                }
                return Ok(v.is_some());
            }
        }
        Ok(false)
    }

    /// Applies a transaction's writes durably (under the state lock).
    fn commit_writes(&self, st: &mut State, writes: &WriteSet) -> Result<()> {
        self.device.check()?;
        match st.mem {
            Mem::Dram(_) => self.commit_fs(st, writes),
            Mem::Nvm(_) => self.commit_nvm(st, writes),
        }?;
        self.device.check()
    }

    /// `io=fs`: one log record with the rows, `pwrite` + `fdatasync`, then the DRAM memtable.
    fn commit_fs(&self, st: &mut State, writes: &WriteSet) -> Result<()> {
        let seq = st.committed_seq + 1;
        let rec = encode_log_record(seq, writes);
        let rec_len = rec.len() as u64;
        if rec_len > self.areas.log_bytes / 2 {
            return Err(DbError::TxnTooLarge(format!(
                "its log record of {rec_len} bytes exceeds half the log; raise memtable_bytes"
            )));
        }
        let mem_bytes = match &st.mem {
            Mem::Dram(d) => d.bytes,
            Mem::Nvm(_) => unreachable!("fs commit on an nvm memtable"),
        };
        if st.log_end + rec_len > self.areas.log_bytes
            || mem_bytes + rec_len > self.areas.memtable_bytes
        {
            self.flush_memtable(st)?;
        }
        let at = self.areas.log_base() + st.log_end;
        self.device.write(at, &rec);
        if self.fault != Some(LsmFault::SkipLogPersist) {
            self.device.fence();
        }
        self.stats.log_bytes_written.fetch_add(rec_len, Ordering::Relaxed);
        let Mem::Dram(d) = &mut st.mem else { unreachable!("checked above") };
        for (&(table, key), v) in writes {
            d.put(table, key, v.as_deref());
        }
        st.log_end += rec_len;
        st.committed_seq = seq;
        Ok(())
    }

    /// `io=nvm`: nodes + pointer record persisted (barrier 1), links persisted (barrier 2),
    /// `committed_seq` persisted (barrier 3).
    fn commit_nvm(&self, st: &mut State, writes: &WriteSet) -> Result<()> {
        let n_writes = writes.len() as u64;
        let tables = st.manifest.tables.clone();
        let mut heights = Vec::with_capacity(writes.len());
        let mut need = 0;
        {
            let Mem::Nvm(m) = &mut st.mem else { unreachable!("nvm commit on a dram memtable") };
            for v in writes.values() {
                let h = m.random_height();
                need += memtable::node_bytes(h, v.as_ref().map_or(0, |v| v.len()));
                heights.push(h);
            }
            if n_writes > MAX_TXN_WRITES || need > m.capacity - HEAD_BYTES {
                return Err(DbError::TxnTooLarge(format!(
                    "{n_writes} rows of {need} bytes; at most {MAX_TXN_WRITES} rows and one \
                     memtable (raise memtable_bytes)"
                )));
            }
            if m.used + need > m.capacity {
                self.flush_memtable(st)?;
            }
        }
        let seq = st.committed_seq + 1;
        let Mem::Nvm(m) = &mut st.mem else { unreachable!("checked above") };
        let start = m.used;
        let mut nodes = Vec::with_capacity(writes.len());
        for ((&(table, key), v), &h) in writes.iter().zip(&heights) {
            let off = m.base + m.used;
            let checksums = m.checksums;
            NvmMem::write_node(&self.region, off, table, key, seq, h, v.as_deref(), checksums);
            m.used += memtable::node_bytes(h, v.as_ref().map_or(0, |v| v.len()));
            nodes.push(Node { off, table, key, seq, height: h, tombstone: v.is_none() });
        }
        let stores = match m.plan_links(&self.region, &tables, &nodes) {
            Ok(s) => s,
            Err(e) => {
                m.used = start;
                return Err(e);
            }
        };
        let slot = self.areas.log_base() + (seq % 2) * LOG_SLOT_BYTES;
        let rec = encode_ptr_record(seq, start, m.used, &nodes);
        self.region.write(slot, &rec);
        if self.fault != Some(LsmFault::SkipLogPersist) {
            self.region.flush(m.base + start, m.used - start);
            self.region.flush(slot, rec.len() as u64);
            self.region.fence();
        }
        self.stats.log_bytes_written.fetch_add(rec.len() as u64, Ordering::Relaxed);
        for &(field, value) in &stores {
            self.region.write_u64(field, value);
            self.region.flush(field, 8);
        }
        self.region.fence();
        if self.fault == Some(LsmFault::SkipLogPersist) {
            // The bug: barrier 1 moved after the links (reachable before durable).
            self.region.flush(m.base + start, m.used - start);
            self.region.flush(slot, rec.len() as u64);
            self.region.fence();
        }
        let committed = page_offset(self.areas.control_page) + C_COMMITTED;
        self.region.write_u64(committed, seq);
        self.region.persist(committed, 8);
        st.committed_seq = seq;
        Ok(())
    }

    /// Allocates `pages` of the run area (first fit), growing the region's file if needed.
    fn alloc(&self, st: &mut State, pages: u64) -> Result<u64> {
        let Some((&first, &len)) = st.free.iter().find(|(_, &len)| len >= pages) else {
            let free: u64 = st.free.values().sum();
            return Err(DbError::RegionFull(format!(
                "lsm: no free extent of {pages} pages for a run ({free} pages free in all)"
            )));
        };
        self.region.ensure_backed(page_offset(first + pages))?;
        st.free.remove(&first);
        if len > pages {
            st.free.insert(first + pages, len - pages);
        }
        Ok(first)
    }

    fn release(st: &mut State, first: u64, pages: u64) {
        let mut first = first;
        let mut pages = pages;
        if let Some((&p, &l)) = st.free.range(..first).next_back() {
            if p + l == first {
                st.free.remove(&p);
                first = p;
                pages += l;
            }
        }
        if let Some(&l) = st.free.get(&(first + pages)) {
            st.free.remove(&(first + pages));
            pages += l;
        }
        st.free.insert(first, pages);
    }

    /// Writes the manifest for `st`'s tables and runs to the other slot and persists it.
    fn publish(&self, st: &mut State, runs: &[Vec<Run>]) -> Result<()> {
        let mut m = st.manifest.clone();
        m.generation += 1;
        m.runs = runs.iter().flatten().map(|r| r.r).collect();
        if m.runs.len() > layout::MAX_RUNS {
            return Err(DbError::RegionFull(format!(
                "lsm: {} runs exceed the manifest's {}",
                m.runs.len(),
                layout::MAX_RUNS
            )));
        }
        let slot = 1 - st.slot;
        let at = self.areas.manifest_slot(slot);
        let b = m.encode();
        self.device.write(at, &b);
        self.device.flush(at, b.len() as u64);
        self.device.fence();
        self.device.check()?;
        st.manifest = m;
        st.slot = slot;
        self.stats.manifests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The newest entry of each key in the memtable, per table, in key order.
    fn memtable_entries(&self, st: &State) -> Result<Vec<TableRows>> {
        let tables = &st.manifest.tables;
        let mut out: Vec<TableRows> = vec![Vec::new(); tables.len()];
        match &st.mem {
            Mem::Dram(d) => {
                for (&(t, k), v) in &d.map {
                    out[t as usize].push((k, v.as_ref().map(|v| v.to_vec())));
                }
            }
            Mem::Nvm(m) => {
                let mut cur = m.first(&self.region, tables)?;
                while let Some(n) = cur {
                    let v = m.value(&self.region, tables, &n)?.map(|v| v.to_vec());
                    out[n.table as usize].push((n.key, v));
                    cur = m.next_key(&self.region, tables, &n)?;
                }
            }
        }
        Ok(out)
    }

    /// Writes one run of `entries` for `table`; returns it opened. Flushed, not fenced.
    fn write_run(
        &self,
        st: &mut State,
        table: u32,
        entries: &mut dyn Iterator<Item = Result<(u64, Option<Vec<u8>>)>>,
        capacity: u64,
    ) -> Result<Option<Run>> {
        let row_bytes = st.manifest.tables[table as usize].row_bytes;
        let pages = run::pages_for(capacity, row_bytes);
        let first = self.alloc(st, pages)?;
        let flush = self.fault != Some(LsmFault::RunBeforePersist);
        let mut b = RunBuilder::new(&self.device, first, table, row_bytes, capacity, flush);
        let mut failed = None;
        for e in entries {
            match e {
                Ok((k, v)) => b.push(k, v.as_deref()),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            Self::release(st, first, pages);
            return Err(e);
        }
        if b.entries() == 0 {
            Self::release(st, first, pages);
            return Ok(None);
        }
        let r = b.finish(first);
        if r.pages < pages {
            Self::release(st, first + r.pages, pages - r.pages);
        }
        self.stats.run_bytes_written.fetch_add(r.pages * PAGE_SIZE_U64, Ordering::Relaxed);
        Ok(Some(Run::open(&self.region, r, row_bytes)?))
    }

    /// Flushes the memtable into one run per table, publishes them with an empty memtable
    /// (`nvm`: the other arena; `fs`: the log truncated), then compacts.
    fn flush_memtable(&self, st: &mut State) -> Result<()> {
        let per_table = self.memtable_entries(st)?;
        let mut runs = st.runs.clone();
        let mut new: Vec<Run> = Vec::new();
        for (t, entries) in per_table.into_iter().enumerate() {
            if entries.is_empty() {
                continue;
            }
            let cap = entries.len() as u64;
            let mut it = entries.into_iter().map(Ok);
            match self.write_run(st, t as u32, &mut it, cap) {
                Ok(Some(r)) => {
                    runs[t].push(r.clone());
                    new.push(r);
                }
                Ok(None) => {}
                Err(e) => {
                    for r in new {
                        Self::release(st, r.r.first_page, r.r.pages);
                    }
                    return Err(e);
                }
            }
        }
        let other = 1 - st.manifest.active_arena;
        if let Mem::Nvm(_) = st.mem {
            NvmMem::format(&self.region, self.areas.arena_base(other));
        }
        if self.fault != Some(LsmFault::RunBeforePersist) {
            self.device.fence();
        }
        let saved = st.manifest.clone();
        st.manifest.flushed_seq = st.committed_seq;
        if let Mem::Nvm(_) = st.mem {
            st.manifest.active_arena = other;
        }
        if let Err(e) = self.publish(st, &runs) {
            st.manifest = saved;
            for r in new {
                Self::release(st, r.r.first_page, r.r.pages);
            }
            return Err(e);
        }
        st.runs = runs;
        self.persist_late(&new);
        st.mem = match st.mem {
            Mem::Dram(_) => Mem::Dram(DramMem::default()),
            Mem::Nvm(ref m) => Mem::Nvm(NvmMem::new(
                self.areas.arena_base(other),
                self.areas.memtable_bytes,
                HEAD_BYTES,
                m.checksums,
            )),
        };
        st.log_end = 0;
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        let tables: Vec<u32> = new.iter().map(|r| r.r.table).collect();
        for t in tables {
            // A compaction that cannot get space leaves the runs as they are: reads stay
            // correct, and the next flush tries again.
            if let Err(e) = self.compact(st, t) {
                if !matches!(e, DbError::RegionFull(_)) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Fault `lsm-run-before-persist`: the runs' contents are persisted only now, after the
    /// manifest that names them.
    fn persist_late(&self, runs: &[Run]) {
        if self.fault == Some(LsmFault::RunBeforePersist) {
            for r in runs {
                self.device.flush(page_offset(r.r.first_page), r.r.pages * PAGE_SIZE_U64);
            }
            self.device.fence();
        }
    }

    /// Which newest runs of a table the policy merges (index of the oldest one), if any.
    fn merge_from(entries: &[u64]) -> Option<usize> {
        let n = entries.len();
        if n < 2 {
            return None;
        }
        let mut k = n - 1;
        let mut acc = entries[k];
        while k > 0 && (entries[k - 1] <= MERGE_RATIO * acc || k + 1 > MAX_RUNS_PER_TABLE) {
            k -= 1;
            acc += entries[k];
        }
        (k < n - 1).then_some(k)
    }

    /// Merges the table's newest runs as the policy says, publishes the result, then frees the
    /// merged-away runs' space.
    fn compact(&self, st: &mut State, table: u32) -> Result<()> {
        let counts: Vec<u64> = st.runs[table as usize].iter().map(|r| r.r.entries).collect();
        let Some(k) = Self::merge_from(&counts) else { return Ok(()) };
        let inputs: Vec<Run> = st.runs[table as usize][k..].to_vec();
        let drop_tombstones = k == 0;
        let capacity: u64 = counts[k..].iter().sum();
        let mut runs = st.runs.clone();
        runs[table as usize].truncate(k);
        if self.fault == Some(LsmFault::DropRunsBeforePublish) {
            self.publish(st, &runs)?;
        }
        let region = self.region.clone();
        let mut merge = MergeIter::new(&region, &inputs, drop_tombstones);
        let merged = self.write_run(st, table, &mut merge, capacity)?;
        if self.fault != Some(LsmFault::RunBeforePersist) {
            self.device.fence();
        }
        if let Some(r) = merged.clone() {
            runs[table as usize].push(r);
        }
        if let Err(e) = self.publish(st, &runs) {
            if let Some(r) = merged {
                Self::release(st, r.r.first_page, r.r.pages);
            }
            return Err(e);
        }
        st.runs = runs;
        self.persist_late(merged.as_slice());
        for r in inputs {
            Self::release(st, r.r.first_page, r.r.pages);
        }
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Live rows of a table, and a check of its memtable entries and runs.
    fn check_table(&self, st: &State, table: u32) -> std::result::Result<u64, String> {
        for run in &st.runs[table as usize] {
            run.check(&self.region)?;
        }
        let mut rows = 0;
        let mut cursor =
            txn::ScanCursor::new(self, st, None, table, 0, u64::MAX).map_err(|e| e.to_string())?;
        let mut last = None;
        while let Some((k, v)) = cursor.next().map_err(|e| e.to_string())? {
            if last.is_some_and(|l| l >= k) {
                return Err(format!("table {table}: keys out of order at {k}"));
            }
            last = Some(k);
            rows += v.is_some() as u64;
        }
        Ok(rows)
    }

    fn run_pages(st: &State) -> u64 {
        st.runs.iter().flatten().map(|r| r.r.pages).sum()
    }
}

/// Merges runs (oldest first in `inputs`): each key once, from the newest run that has it.
struct MergeIter<'a> {
    region: &'a Region,
    runs: &'a [Run],
    pos: Vec<u64>,
    drop_tombstones: bool,
}

impl<'a> MergeIter<'a> {
    fn new(region: &'a Region, runs: &'a [Run], drop_tombstones: bool) -> Self {
        MergeIter { region, runs, pos: vec![0; runs.len()], drop_tombstones }
    }

    fn step(&mut self) -> Result<Option<(u64, Option<Vec<u8>>)>> {
        loop {
            let mut best: Option<(u64, usize)> = None;
            for (i, run) in self.runs.iter().enumerate() {
                if self.pos[i] < run.r.entries {
                    let (k, _) = run.entry(self.region, self.pos[i])?;
                    // Later runs are newer: on equal keys the later one wins.
                    if best.is_none_or(|(bk, _)| k <= bk) {
                        best = Some((k, i));
                    }
                }
            }
            let Some((key, winner)) = best else { return Ok(None) };
            let (_, v) = self.runs[winner].entry(self.region, self.pos[winner])?;
            let v = v.map(|v| v.to_vec());
            for (i, run) in self.runs.iter().enumerate() {
                if self.pos[i] < run.r.entries && run.entry(self.region, self.pos[i])?.0 == key {
                    self.pos[i] += 1;
                }
            }
            if v.is_none() && self.drop_tombstones {
                continue;
            }
            return Ok(Some((key, v)));
        }
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<(u64, Option<Vec<u8>>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

/// The control page's areas, checked against the superblock's nominal layout.
fn read_areas(region: &Region, sb: &Superblock) -> Result<Areas> {
    let control_page = sb.layout.undo_log_page(0);
    if page_offset(sb.layout.first_data_page()) > region.backed_len() {
        return Err(DbError::Corrupt("region is shorter than its lsm areas".into()));
    }
    let areas = Areas::decode(
        region.read(page_offset(control_page), 64),
        control_page,
        sb.layout.page_count,
    )?;
    if areas.first_run_page() != sb.layout.first_data_page() {
        return Err(DbError::Corrupt("lsm control page disagrees with the superblock".into()));
    }
    Ok(areas)
}

fn read_manifest(region: &Region, areas: &Areas) -> Result<(Manifest, u64)> {
    let mut best: Option<(Manifest, u64)> = None;
    for slot in 0..2 {
        let b = region.read(areas.manifest_slot(slot), MANIFEST_BYTES);
        if let Some(m) = Manifest::decode(b, areas)? {
            if best.as_ref().is_none_or(|(bm, _)| m.generation > bm.generation) {
                best = Some((m, slot));
            }
        }
    }
    best.ok_or_else(|| DbError::Corrupt("lsm: neither manifest slot is valid".into()))
}

fn free_extents(areas: &Areas, runs: &[RunRef]) -> BTreeMap<u64, u64> {
    let mut used: Vec<(u64, u64)> = runs.iter().map(|r| (r.first_page, r.pages)).collect();
    used.sort_unstable();
    let mut free = BTreeMap::new();
    let mut at = areas.first_run_page();
    for (p, n) in used {
        if p > at {
            free.insert(at, p - at);
        }
        at = p + n;
    }
    if areas.page_count > at {
        free.insert(at, areas.page_count - at);
    }
    free
}

/// `io=fs` log record: `[len u32][crc u32][seq u64][count u32][pad u32]`, then per row
/// `[table u32][flags u32][key u64][row]` (no row for a delete). The crc covers bytes 8..len.
fn encode_log_record(seq: u64, writes: &WriteSet) -> Vec<u8> {
    let mut b = vec![0u8; REC_HEADER];
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..20].copy_from_slice(&(writes.len() as u32).to_le_bytes());
    for (&(table, key), v) in writes {
        b.extend_from_slice(&table.to_le_bytes());
        b.extend_from_slice(&(v.is_none() as u32).to_le_bytes());
        b.extend_from_slice(&key.to_le_bytes());
        if let Some(v) = v {
            b.extend_from_slice(v);
        }
    }
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_le_bytes());
    let c = crc(&b[8..]);
    b[4..8].copy_from_slice(&c.to_le_bytes());
    b
}

/// Replays the `io=fs` log (records in sequence after the manifest's `flushed_seq`) into a new
/// DRAM memtable.
fn recover_fs(
    region: &Region,
    areas: &Areas,
    m: &Manifest,
    report: &mut RecoveryReport,
) -> Result<(Mem, u64, u64)> {
    let mut mem = DramMem::default();
    let mut pos = 0u64;
    let mut seq = m.flushed_seq;
    let base = areas.log_base();
    while pos + REC_HEADER as u64 <= areas.log_bytes {
        let h = region.read(base + pos, REC_HEADER);
        let len = get_u32(h, 0) as u64;
        if len < REC_HEADER as u64 || pos + len > areas.log_bytes || get_u64(h, 8) != seq + 1 {
            break;
        }
        let rec = region.read(base + pos, len as usize);
        if get_u32(rec, 4) != crc(&rec[8..]) {
            break;
        }
        // A record that passes its checksum but does not parse is damage, not a torn tail.
        let count = get_u32(rec, 16) as usize;
        let mut at = REC_HEADER;
        for _ in 0..count {
            let bad = || DbError::Corrupt(format!("lsm log record {} does not parse", seq + 1));
            if at + REC_ENTRY_HEADER > rec.len() {
                return Err(bad());
            }
            let table = get_u32(rec, at);
            let delete = get_u32(rec, at + 4);
            let key = get_u64(rec, at + 8);
            at += REC_ENTRY_HEADER;
            let spec = m.tables.get(table as usize).ok_or_else(bad)?;
            match delete {
                1 => mem.put(table, key, None),
                0 => {
                    let end = at + spec.row_bytes as usize;
                    if end > rec.len() {
                        return Err(bad());
                    }
                    mem.put(table, key, Some(&rec[at..end]));
                    at = end;
                }
                _ => return Err(bad()),
            }
        }
        report.records_applied += 1;
        seq += 1;
        pos += len;
    }
    report.notes.push(format!(
        "replayed {} log records ({pos} bytes) into a new memtable",
        report.records_applied
    ));
    Ok((Mem::Dram(mem), seq, pos))
}

/// `io=nvm` pointer record: `[seq u64][count u32][crc u32][arena_start u64][arena_end u64]`,
/// then `count` node offsets. The crc covers the record with its crc field zero.
fn encode_ptr_record(seq: u64, start: u64, end: u64, nodes: &[Node]) -> Vec<u8> {
    let mut b = vec![0u8; PTR_HEADER as usize + 8 * nodes.len()];
    b[0..8].copy_from_slice(&seq.to_le_bytes());
    b[8..12].copy_from_slice(&(nodes.len() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&start.to_le_bytes());
    b[24..32].copy_from_slice(&end.to_le_bytes());
    for (i, n) in nodes.iter().enumerate() {
        let at = PTR_HEADER as usize + 8 * i;
        b[at..at + 8].copy_from_slice(&n.off.to_le_bytes());
    }
    let c = crc(&b);
    b[12..16].copy_from_slice(&c.to_le_bytes());
    b
}

/// A decoded pointer record: (seq, arena_start, arena_end, node offsets), if valid.
fn decode_ptr_record(region: &Region, at: u64) -> Option<(u64, u64, u64, Vec<u64>)> {
    let h = region.read(at, PTR_HEADER as usize);
    let count = get_u32(h, 8) as u64;
    if count > MAX_TXN_WRITES {
        return None;
    }
    let mut b = region.read(at, (PTR_HEADER + 8 * count) as usize).to_vec();
    let c = get_u32(&b, 12);
    b[12..16].fill(0);
    if c != crc(&b) {
        return None;
    }
    let ptrs = (0..count as usize).map(|i| get_u64(&b, PTR_HEADER as usize + 8 * i)).collect();
    Some((get_u64(&b, 0), get_u64(&b, 16), get_u64(&b, 24), ptrs))
}

/// NVM-Log recovery: finds the memtable's end from the last committed pointer record and
/// undoes the one commit that may be in flight.
fn recover_nvm(
    region: &Region,
    areas: &Areas,
    m: &Manifest,
    checksums: bool,
    report: &mut RecoveryReport,
) -> Result<(Mem, u64, u64)> {
    let control = page_offset(areas.control_page);
    let committed = region.read_u64(control + C_COMMITTED);
    let slot_of = |seq: u64| areas.log_base() + (seq % 2) * LOG_SLOT_BYTES;
    let base = areas.arena_base(m.active_arena);
    let cap = areas.memtable_bytes;
    let check_end = |end: u64, what: &str| {
        if !(HEAD_BYTES..=cap).contains(&end) {
            return Err(DbError::Corrupt(format!("lsm: {what} arena end {end} outside the arena")));
        }
        Ok(end)
    };
    if committed < m.flushed_seq {
        return Err(DbError::Corrupt(format!(
            "lsm: committed sequence {committed} is before the flushed {}",
            m.flushed_seq
        )));
    }
    let used = if committed == m.flushed_seq {
        HEAD_BYTES
    } else {
        match decode_ptr_record(region, slot_of(committed)) {
            Some((seq, _, end, _)) if seq == committed => check_end(end, "committed")?,
            _ => {
                return Err(DbError::Corrupt(format!(
                    "lsm: the pointer record of committed transaction {committed} is missing"
                )))
            }
        }
    };
    let mut mem = NvmMem::new(base, cap, used, checksums);
    if let Some((seq, start, end, ptrs)) = decode_ptr_record(region, slot_of(committed + 1)) {
        if seq == committed + 1 && start == used {
            // Follow pointers up to the in-flight record's end while undoing it.
            mem.used = check_end(end, "in-flight")?;
            let tables = &m.tables;
            for &p in &ptrs {
                // A node whose header does not check out was never linked (links follow the
                // barrier that persists the nodes): nothing to undo.
                if let Ok(n) = mem.node(region, tables, p) {
                    if n.seq == seq && mem.unlink(region, tables, &n)? {
                        report.records_applied += 1;
                    }
                }
            }
            region.fence();
            region.write_u64(slot_of(seq), 0);
            region.persist(slot_of(seq), 8);
            mem.used = used;
            report.txns_rolled_back += 1;
            report.notes.push(format!(
                "undid in-flight transaction {seq}: {} of its {} nodes were linked",
                report.records_applied,
                ptrs.len()
            ));
        }
    }
    Ok((Mem::Nvm(mem), committed, 0))
}

/// What opening `region` (an `lsm` region) would do, read without writing.
pub fn inspect(region: &Region, mut outer: crate::Inspection) -> Result<crate::Inspection> {
    let sb = match Superblock::verdict(region, false)? {
        storage::format::Verdict::Open { sb, .. } => sb,
        storage::format::Verdict::Format => return Ok(outer),
    };
    let areas = read_areas(region, &sb)?;
    let control_page = areas.control_page;
    let (m, _) = read_manifest(region, &areas)?;
    if areas.io_fs {
        let mut report = RecoveryReport::default();
        recover_fs(region, &areas, &m, &mut report)?;
        outer.txns_to_complete = report.records_applied;
        outer.undo_records = report.records_applied;
    } else {
        let committed = region.read_u64(page_offset(control_page) + C_COMMITTED);
        let slot = areas.log_base() + ((committed + 1) % 2) * LOG_SLOT_BYTES;
        if let Some((seq, _, _, ptrs)) = decode_ptr_record(region, slot) {
            if seq == committed + 1 {
                outer.txns_to_roll_back = 1;
                outer.undo_records = ptrs.len() as u64;
            }
        }
    }
    Ok(outer)
}

impl Engine for Lsm {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let mut st = self.state.write();
        if st.manifest.tables.iter().any(|t| t.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} exists", spec.name)));
        }
        if st.manifest.tables.len() >= MAX_TABLES {
            return Err(DbError::Invalid(format!("at most {MAX_TABLES} tables")));
        }
        let saved = st.manifest.clone();
        st.manifest.tables.push(spec.clone());
        let mut runs = st.runs.clone();
        runs.push(Vec::new());
        if let Err(e) = self.publish(&mut st, &runs) {
            st.manifest = saved;
            return Err(e);
        }
        st.runs = runs;
        Ok(st.manifest.tables.len() as TableId - 1)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        let st = self.state.read();
        st.manifest.tables.iter().position(|t| t.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.state.read().manifest.tables.clone()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if worker >= self.workers as usize {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: the engine was opened for {} workers",
                self.workers
            )));
        }
        let id = self.next_txn.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(txn::LsmTxn::new(self, id)))
    }

    synchronous_engine_methods!();

    fn check_integrity(&self) -> IntegrityResult {
        let st = self.state.read();
        let mut rows = 0;
        for t in 0..st.manifest.tables.len() {
            rows += self.check_table(&st, t as u32)?;
        }
        let run_pages = Self::run_pages(&st);
        let free: u64 = st.free.values().sum();
        let area = self.areas.page_count - self.areas.first_run_page();
        if run_pages + free != area {
            return Err(format!(
                "lsm: runs ({run_pages} pages) and free space ({free}) do not add up to the run \
                 area ({area})"
            ));
        }
        Ok(IntegrityReport {
            tables: st.manifest.tables.len() as u64,
            rows,
            pages_in_use: self.areas.first_run_page() + run_pages,
            pages_free: free,
        })
    }

    fn shutdown(&self) -> Result<()> {
        // Every commit is durable when it returns; nothing runs in the background.
        self.device.check()
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        let a = &self.areas;
        let page = offset / PAGE_SIZE_U64;
        Some(if page < a.control_page {
            "superblock".into()
        } else if page == a.control_page {
            "lsm control page".into()
        } else if offset < a.log_base() {
            "lsm manifest".into()
        } else if offset < a.log_base() + a.log_bytes {
            "lsm log".into()
        } else if page < a.first_run_page() {
            "lsm memtable arena".into()
        } else {
            "lsm run".into()
        })
    }

    fn activity(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        vec![
            ("memtable_flushes", s.flushes.load(Ordering::Relaxed)),
            ("compactions", s.compactions.load(Ordering::Relaxed)),
            ("run_bytes_written", s.run_bytes_written.load(Ordering::Relaxed)),
            ("log_bytes_written", s.log_bytes_written.load(Ordering::Relaxed)),
            ("manifests_written", s.manifests.load(Ordering::Relaxed)),
        ]
    }

    fn footprint_bytes(&self) -> Option<u64> {
        let st = self.state.read();
        let a = &self.areas;
        let (log, mem) = match &st.mem {
            Mem::Dram(_) => (st.log_end, 0),
            Mem::Nvm(m) => (2 * LOG_SLOT_BYTES, m.used),
        };
        let fixed = page_offset(a.control_page + 1) + 2 * MANIFEST_BYTES as u64;
        Some(fixed + log + mem + Self::run_pages(&st) * PAGE_SIZE_U64)
    }
}

//! Log-structured updates — Arulraj, Pavlo, Dulloor, *Let's Talk About Storage & Recovery
//! Methods for Non-Volatile Memory Database Systems*, SIGMOD 2015: the Log engine (§3.3, LevelDB
//! lineage) with `io=fs`, and NVM-Log (§4.3) with `io=nvm` (the default).
//!
//! Writes go to a memtable; when it fills, it is flushed into one immutable sorted run per
//! table (a fixed-stride array of rows with a sparse index and a bloom filter, [`run`]), and
//! compaction merges runs ([`Lsm::compact`]). Deletes are tombstones, kept in runs of their own
//! (keys only) and dropped when a merge reaches a table's oldest run; a full region still takes
//! deletes (space kept for them, outputs in pieces: [`flush`]). The manifest ([`layout`])
//! lists tables and runs; it is double-buffered and published by one checksummed write, so
//! flushes and compactions are atomic. Run space is allocated from a volatile free list rebuilt
//! from the manifest at open: space of a run being written is *pending* (owned by no manifest,
//! so a crash frees it), a listed run is *in use*, and a merged-away run is freed only after the
//! manifest that drops it is durable, so nothing leaks or is reused across a crash.
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
//! **Concurrency**: key-level strict 2PL for writes (`storage::lock`; a point write waits for a
//! holder, bounded, wait-die as `inplace`'s; a scan's lock is no-wait) and optimistic,
//! version-validated point reads (Silo, Tu et al. SOSP 2013 §4.4), as `inplace`; writes are
//! buffered in the transaction and applied at commit. Readers never wait for a commit's persist
//! barriers (Silo §4.4: a commit's write phase locks only the records it writes): committers are
//! serialized by a commit latch (they order sequence numbers), and a committer holds only its
//! own worker's reader word of the engine state while it persists and links. `io=nvm` links its
//! nodes into the skip list with 8-byte stores beside concurrent readers ([`memtable`]'s
//! single-writer lock-free insertion); `io=fs` persists its log record beside them and then
//! publishes its rows to the DRAM memtable in a short exclusive section (no barrier inside).
//! Only a flush or merge (which replaces the memtable or runs) or a new table takes the state
//! exclusively. A reader sees none or all of a commit's rows: the keys stay locked by the
//! committer until after its last barrier, and an optimistic read of a locked key retries or
//! takes a shared lock (waiting for the commit). The state lock has one reader word per worker
//! (`engines::brlock`), so a read-only transaction writes no cache line another worker writes
//! (ids come from per-worker counters too). Flushes and compactions run inside the commit that
//! fills the memtable (no background thread). Waits are counted (`state_reader_waits`,
//! `state_exclusive`, `commit_latch_waits`, and the lock table's `lock_waits`).
//!
//! **Group commit** (`group_commit=on`, the default): a committer that finds the commit
//! latch held queues its write set and yields; whoever holds the latch applies the queued
//! commits oldest first, as many as one commit may hold (`io=nvm`: one pointer record's rows;
//! `io=fs`: a quarter of the log), as *one* commit — one sequence number, one log or pointer
//! record, one set of barriers — then sets each one's outcome. A committer that finds the latch
//! free and no one queued commits alone, as `group_commit=off` does. The recovery invariant is
//! unchanged (a group is durable whole or not at all, and no member returns before that;
//! `tests::a_group_commit_cut_at_any_store_*` cuts a group before each of its stores); the
//! keys of every member stay locked by their own transactions until their commits return. A
//! group that fails is applied again one member at a time, so a member fails only for its own
//! writes. `group_commit_delay_us` makes the leader wait that long for others to queue before it
//! takes a group (PostgreSQL's `commit_delay`; the crash tests use it so that groups form).
//! Counted: `commit_groups`, `grouped_commits`. It is N-Store's grouping (its NVM
//! engines group commits). It pays where commits overlap: on a lent 16-core machine (issue 35,
//! `docs/scaling.md`, two interleaved rounds) YCSB write-heavy went from 107-115k to 148-198k
//! TPS at 16 threads, read-heavy from 1.03-1.14M to 1.37-1.50M; at one thread no commit ever
//! queues. It was off by default for a while after a 2-thread crash campaign lost an
//! acknowledged write; the cause was a memtable read, not grouping (`memtable::NvmMem::seek`,
//! regression `regression_lsm_read_beside_commits`), and it lost updates with grouping off too.
//! `group_commit=off` is the one-commit-at-a-time latch.
//!
//! Deliberate differences from N-Store: commit persists before it returns (N-Store's NVM
//! engines' allocator `sync` is the only barrier); the skip list
//! replaces N-Store's STX B+tree memtable (same role: an ordered index with atomic updates).

mod flush;
mod inspect;
pub(crate) mod layout;
pub(crate) mod memtable;
pub mod options;
mod recovery;
pub(crate) mod run;
#[cfg(test)]
mod tests;
mod txn;

pub use inspect::inspect;
use recovery::{
    encode_log_record, encode_ptr_record, free_extents, read_areas, read_manifest, recover_fs,
    recover_nvm,
};

use crate::brlock::{BrLock, BrReadGuard, BrWriteGuard};
use crate::device::{Device, Io};
use crate::{EngineOptions, Fault};
use crossbeam_utils::CachePadded;
use layout::{Areas, Manifest, RunRef, C_COMMITTED, LOG_SLOT_BYTES, MANIFEST_BYTES, MAX_TABLES};
use memtable::{DramMem, Node, NvmMem, HEAD_BYTES};
use parking_lot::{Mutex, MutexGuard};
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
/// The writes one commit applies (one transaction's, or a commit group's: module doc, **Group
/// commit**), in key order; no key twice (each is under its writer's exclusive lock).
pub(crate) type Writes<'a> = [Write<'a>];
/// One row of [`Writes`].
pub(crate) type Write<'a> = (&'a (TableId, u64), &'a Option<Vec<u8>>);

/// How long a queued commit yields to the leader before it sleeps until its outcome is set.
const GROUP_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// A transaction's writes waiting in the commit queue for a leader to apply them (module doc,
/// **Group commit**).
struct CommitJob {
    writes: WriteSet,
    grows: bool,
    /// Set by the leader that applied (or failed to apply) the writes.
    outcome: Mutex<Option<Result<()>>>,
    done: parking_lot::Condvar,
}

impl CommitJob {
    fn answer(&self, outcome: Result<()>) {
        *self.outcome.lock() = Some(outcome);
        self.done.notify_one();
    }
}

/// Answers a group with an error if its leader unwinds before it answers them.
struct Unanswered<'a>(&'a [std::sync::Arc<CommitJob>]);

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        for job in self.0 {
            job.answer(Err(DbError::Invalid(
                "lsm: the commit that applied this one's group panicked".into(),
            )));
        }
    }
}

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
    /// Stored by the committer (under the commit latch) once its commit is durable.
    committed_seq: AtomicU64,
    /// `io=fs`: bytes of the log in use (the committer's, under the commit latch).
    log_end: AtomicU64,
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
    /// Writes to words every thread writes, per thread (see [`Shared`]).
    shared: pmem::ThreadCounters<SHARED_STATS>,
    /// Waits on the engine's latches, per thread (see [`Wait`]).
    waits: pmem::ThreadCounters<WAIT_STATS>,
    /// `io=fs` point reads of runs through the file, per thread: reads, bytes.
    file_reads: pmem::ThreadCounters<2>,
    /// Commit groups of more than one commit applied, and the commits in them, per thread.
    groups: pmem::ThreadCounters<2>,
}

/// Counters of writes to shared words on the transaction path, in [`LsmStats::shared`].
#[derive(Clone, Copy)]
#[repr(usize)]
enum Shared {
    /// Acquisitions (any mode) of an engine-wide lock word: the state lock.
    LockAcquires = 0,
    /// Read-modify-writes of an engine-wide counter (transaction ids).
    CounterRmws = 1,
}
const SHARED_STATS: usize = 2;

/// Counters of waits on engine-wide latches (a key lock's waits are the lock table's
/// `lock_waits`), in [`LsmStats::waits`].
#[derive(Clone, Copy)]
#[repr(usize)]
enum Wait {
    /// A transaction's access to the state found its reader word held by an exclusive section
    /// (a flush, a merge, a new table, an `io=fs` publication) and waited.
    ReaderWaits = 0,
    /// Exclusive sections taken (each makes every reader word wait while it lasts).
    StateExclusive = 1,
    /// A committer found the commit latch held by another committer and waited.
    CommitLatchWaits = 2,
}
const WAIT_STATS: usize = 3;

thread_local! {
    /// The DRAM buffer an `io=fs` point read `pread`s a run's entry into.
    static FILE_READ_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

pub struct Lsm {
    region: Region,
    device: Device,
    areas: Areas,
    workers: u32,
    fault: Option<LsmFault>,
    locks: LockManager,
    /// One reader word per worker: a transaction's reads write only its worker's word.
    state: BrLock<State>,
    /// One committer at a time (it orders sequence numbers and owns the memtable's tail); a
    /// committer holds its own reader word, not the others', across its persist barriers.
    /// Taken before the state's words by everyone who takes both.
    commit_latch: Mutex<()>,
    /// Commits waiting for the latch's holder to apply them (**Group commit**).
    commit_queue: Mutex<Vec<std::sync::Arc<CommitJob>>>,
    /// `group_commit=on`: queued commits are applied in groups.
    group_commit: bool,
    /// `group_commit_delay_us`: how long a leader waits for others to queue before a group.
    group_delay: std::time::Duration,
    /// Per worker, its transactions begun (ids need no shared counter).
    begun: Box<[CachePadded<AtomicU64>]>,
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
            runs[r.table as usize].push(Run::open_for(&region, *r, row_bytes, io_fs)?);
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
        let (committed_seq, log_end) = (AtomicU64::new(committed_seq), AtomicU64::new(log_end));
        let state = State { manifest, slot, runs, mem, committed_seq, log_end, free };
        report.duration = started.elapsed();
        Ok(Lsm {
            region,
            device,
            areas,
            workers: options.workers,
            fault: lsm_fault(options.fault),
            locks: LockManager::default(),
            state: BrLock::new(state, options.workers as usize),
            commit_latch: Mutex::new(()),
            commit_queue: Mutex::new(Vec::new()),
            group_commit: options.lsm.group_commit,
            group_delay: std::time::Duration::from_micros(options.lsm.group_commit_delay_us),
            begun: (0..options.workers.max(1))
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
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

    /// The state, for callers outside a transaction (counted as shared: they use worker 0's
    /// reader word).
    fn read_state(&self) -> BrReadGuard<'_, State> {
        self.stats.shared.add(Shared::LockAcquires as usize, 1);
        self.state.read(0)
    }

    /// The state, for a transaction of `worker`: only that worker's reader word is written.
    fn read_state_of(&self, worker: usize) -> BrReadGuard<'_, State> {
        let (st, waited) = self.state.read_or_wait(worker);
        if waited {
            self.stats.waits.add(Wait::ReaderWaits as usize, 1);
        }
        st
    }

    /// The state, exclusively (a flush or merge, a new table, an `io=fs` publication): every
    /// reader word. The caller holds the commit latch (lock order: latch, then words), so a
    /// committer holding only its own word sees the state change only by its own hand.
    fn write_state(&self) -> BrWriteGuard<'_, State> {
        debug_assert!(self.commit_latch.is_locked(), "the state taken without the latch");
        self.stats.shared.add(Shared::LockAcquires as usize, 1);
        self.stats.waits.add(Wait::StateExclusive as usize, 1);
        self.state.write()
    }

    /// The commit latch (one committer, or one creator of a table, at a time).
    fn commit_latch(&self) -> MutexGuard<'_, ()> {
        self.stats.shared.add(Shared::LockAcquires as usize, 1);
        self.commit_latch.try_lock().unwrap_or_else(|| {
            self.stats.waits.add(Wait::CommitLatchWaits as usize, 1);
            self.commit_latch.lock()
        })
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
            if run.reads_file() {
                let found = FILE_READ_BUF
                    .with(|buf| run.get_from_file(&self.device, key, out, &mut buf.borrow_mut()))?;
                if let Some(live) = found {
                    self.stats.file_reads.add2(0, 1, Some((1, run.stride())));
                    return Ok(live);
                }
                continue;
            }
            if let Some(v) = run.get(&self.region, key)? {
                if let Some(v) = v {
                    out.extend_from_slice(v);
                }
                return Ok(v.is_some());
            }
        }
        Ok(false)
    }

    /// Applies a transaction's writes durably, as committer `worker` (module doc,
    /// **Concurrency**, **Group commit**): under the commit latch, holding only `worker`'s reader
    /// word across the persist barriers, alone (`group_commit=off`) or in a group with the
    /// commits queued beside it. `grows`: it inserted or updated rows outside a
    /// `FreeingScope`, so it must leave room for deletes ([`Lsm::make_room`]).
    fn commit_writes(&self, worker: usize, writes: WriteSet, grows: bool) -> Result<()> {
        if !self.group_commit {
            let _latch = self.commit_latch();
            return self.apply(worker, &Self::sorted(&[&writes]), grows);
        }
        // A free latch and no one queued: commit alone, as `group_commit=off` does (no job, no
        // queue), then lead whoever queued meanwhile.
        if let Some(latch) = self.commit_latch.try_lock() {
            self.stats.shared.add(Shared::LockAcquires as usize, 1);
            if self.commit_queue.lock().is_empty() {
                let outcome = self.apply(worker, &Self::sorted(&[&writes]), grows);
                if self.commit_queue.lock().is_empty() {
                    drop(latch);
                } else {
                    self.lead(worker, latch);
                }
                return outcome;
            }
            // Others queued first: join them, and lead the group below.
            drop(latch);
        }
        let job = std::sync::Arc::new(CommitJob {
            writes,
            grows,
            outcome: Mutex::new(None),
            done: parking_lot::Condvar::new(),
        });
        self.commit_queue.lock().push(job.clone());
        let mut waited = None;
        loop {
            if let Some(outcome) = job.outcome.lock().take() {
                return outcome;
            }
            if let Some(latch) = self.commit_latch.try_lock() {
                self.stats.shared.add(Shared::LockAcquires as usize, 1);
                self.lead(worker, latch);
                continue;
            }
            let since = *waited.get_or_insert_with(|| {
                self.stats.waits.add(Wait::CommitLatchWaits as usize, 1);
                Instant::now()
            });
            if since.elapsed() < GROUP_SPIN {
                // A leader's commit takes microseconds: yield to it rather than sleep (a sleep
                // and its wake-up cost more than the wait on shm).
                std::thread::yield_now();
                continue;
            }
            // The leader sets the outcome and signals; the timeout covers a job queued just
            // after the leader's last look at the queue (it then takes the latch itself).
            let mut outcome = job.outcome.lock();
            if outcome.is_none() {
                job.done.wait_for(&mut outcome, std::time::Duration::from_micros(100));
            }
            if let Some(outcome) = outcome.take() {
                return outcome;
            }
        }
    }

    /// As the commit latch's holder, applies the queued commits in groups until the queue is
    /// empty, setting each one's outcome. A group that fails is applied again one commit at a
    /// time, so that each gets its own outcome (a failure leaves nothing applied: the checks
    /// come before the first write, and a failed device fails every later commit anyway).
    fn lead(&self, worker: usize, latch: MutexGuard<'_, ()>) {
        loop {
            if !self.group_delay.is_zero() {
                let until = Instant::now() + self.group_delay;
                while Instant::now() < until {
                    std::thread::yield_now();
                }
            }
            let group = self.next_group();
            if group.is_empty() {
                break;
            }
            // A leader that panics must not leave its group waiting forever.
            let unwinding = Unanswered(&group);
            let sets: Vec<&WriteSet> = group.iter().map(|j| &j.writes).collect();
            let grows = group.iter().any(|j| j.grows);
            let outcomes = match self.apply(worker, &Self::sorted(&sets), grows) {
                Ok(()) => {
                    if group.len() > 1 {
                        self.stats.groups.add2(0, 1, Some((1, group.len() as u64)));
                    }
                    group.iter().map(|_| Ok(())).collect()
                }
                Err(e) if group.len() == 1 => vec![Err(e)],
                Err(_) => group
                    .iter()
                    .map(|j| self.apply(worker, &Self::sorted(&[&j.writes]), j.grows))
                    .collect::<Vec<_>>(),
            };
            std::mem::forget(unwinding);
            for (job, outcome) in group.iter().zip(outcomes) {
                job.answer(outcome);
            }
        }
        drop(latch);
    }

    /// The queued commits the next group takes, oldest first: as many as one commit may hold
    /// (`io=nvm`: [`MAX_TXN_WRITES`] rows, a pointer record's; `io=fs`: a quarter of the
    /// log), and at least one.
    fn next_group(&self) -> Vec<std::sync::Arc<CommitJob>> {
        let mut queue = self.commit_queue.lock();
        let (mut rows, mut bytes, mut take) = (0u64, REC_HEADER as u64, 0);
        for job in queue.iter() {
            rows += job.writes.len() as u64;
            bytes += job
                .writes
                .values()
                .map(|v| (REC_ENTRY_HEADER + v.as_ref().map_or(0, |v| v.len())) as u64)
                .sum::<u64>();
            let fits = if self.areas.io_fs {
                bytes <= self.areas.log_bytes / 4
            } else {
                rows <= MAX_TXN_WRITES
            };
            if take > 0 && !fits {
                break;
            }
            take += 1;
        }
        queue.drain(..take).collect()
    }

    /// One commit's writes from one or more write sets, in key order.
    fn sorted<'a>(sets: &[&'a WriteSet]) -> Vec<Write<'a>> {
        let mut all: Vec<_> = sets.iter().flat_map(|w| w.iter()).collect();
        if sets.len() > 1 {
            all.sort_unstable_by_key(|&(k, _)| *k);
        }
        all
    }

    /// Applies `writes` durably as one commit (one sequence number), under the commit latch.
    fn apply(&self, worker: usize, writes: &Writes<'_>, grows: bool) -> Result<()> {
        debug_assert!(self.commit_latch.is_locked(), "a commit applied without the latch");
        self.device.check()?;
        if self.areas.io_fs {
            self.commit_fs(worker, writes, grows)
        } else {
            self.commit_nvm(worker, writes, grows)
        }?;
        self.device.check()
    }

    /// Makes room for `bytes` more in the memtable when `full` says it lacks them: the one
    /// part of a commit that excludes readers (a flush or merge replaces structures they
    /// read); it persists nothing of the commit's own. Returns `worker`'s reader word again.
    fn room_for<'a>(
        &'a self,
        st: BrReadGuard<'a, State>,
        worker: usize,
        (bytes, grows): (u64, bool),
        full: impl Fn(&State) -> bool,
    ) -> Result<BrReadGuard<'a, State>> {
        let lacking = grows && self.room_lacking(&st, bytes).is_some();
        if !lacking && !full(&st) {
            return Ok(st);
        }
        drop(st);
        {
            let mut st = self.write_state();
            if grows {
                self.make_room(&mut st, bytes)?;
            }
            if full(&st) {
                self.flush_memtable(&mut st)?;
            }
        }
        Ok(self.read_state_of(worker))
    }

    /// `io=fs`: one log record with the rows, `pwrite` + `fdatasync` (readers not excluded:
    /// they never read the log), then the DRAM memtable, in a short exclusive section.
    fn commit_fs(&self, worker: usize, writes: &Writes<'_>, grows: bool) -> Result<()> {
        let st = self.read_state_of(worker);
        let seq = st.committed_seq.load(Ordering::Relaxed) + 1;
        let rec = encode_log_record(seq, writes);
        let rec_len = rec.len() as u64;
        if rec_len > self.areas.log_bytes / 2 {
            return Err(DbError::TxnTooLarge(format!(
                "its log record of {rec_len} bytes exceeds half the log; raise memtable_bytes"
            )));
        }
        let full = |st: &State| {
            let mem_bytes = match &st.mem {
                Mem::Dram(d) => d.bytes,
                Mem::Nvm(_) => unreachable!("fs commit on an nvm memtable"),
            };
            st.log_end.load(Ordering::Relaxed) + rec_len > self.areas.log_bytes
                || mem_bytes + rec_len > self.areas.memtable_bytes
        };
        let st = self.room_for(st, worker, (rec_len, grows), full)?;
        let log_end = st.log_end.load(Ordering::Relaxed);
        self.device.write(self.areas.log_base() + log_end, &rec);
        if self.fault != Some(LsmFault::SkipLogPersist) {
            self.device.fence();
        }
        self.stats.log_bytes_written.fetch_add(rec_len, Ordering::Relaxed);
        drop(st);
        // The commit is durable; publishing it to readers is DRAM work only.
        let mut st = self.write_state();
        let Mem::Dram(d) = &mut st.mem else { unreachable!("checked above") };
        for &(&(table, key), v) in writes {
            d.put(table, key, v.as_deref());
        }
        *st.log_end.get_mut() = log_end + rec_len;
        *st.committed_seq.get_mut() = seq;
        Ok(())
    }

    /// `io=nvm`: nodes + pointer record persisted (barrier 1), links persisted (barrier 2),
    /// `committed_seq` persisted (barrier 3), all beside concurrent readers: the nodes lie past
    /// the list's reachable part until the links, each link is one 8-byte store (see
    /// [`memtable`]), and the keys stay locked by this transaction until after barrier 3, so an
    /// optimistic reader of one of them retries or waits.
    fn commit_nvm(&self, worker: usize, writes: &Writes<'_>, grows: bool) -> Result<()> {
        let n_writes = writes.len() as u64;
        let st = self.read_state_of(worker);
        let mut heights = Vec::with_capacity(writes.len());
        let mut need = 0;
        {
            let Mem::Nvm(m) = &st.mem else { unreachable!("nvm commit on a dram memtable") };
            for &(_, v) in writes {
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
        }
        let full = |st: &State| matches!(&st.mem, Mem::Nvm(m) if m.used() + need > m.capacity);
        let st = self.room_for(st, worker, (need, grows), full)?;
        let tables = &st.manifest.tables;
        let seq = st.committed_seq.load(Ordering::Relaxed) + 1;
        let Mem::Nvm(m) = &st.mem else { unreachable!("checked above") };
        let start = m.used();
        let mut end = start;
        let mut nodes = Vec::with_capacity(writes.len());
        for (&(&(table, key), v), &h) in writes.iter().zip(&heights) {
            let off = m.base + end;
            let checksums = m.checksums;
            NvmMem::write_node(&self.region, off, table, key, seq, h, v.as_deref(), checksums);
            end += memtable::node_bytes(h, v.as_ref().map_or(0, |v| v.len()));
            nodes.push(Node { off, table, key, seq, height: h, tombstone: v.is_none() });
        }
        // Before any link into the new nodes (planning follows its own links among them).
        m.set_used(end);
        let stores = match m.plan_links(&self.region, tables, &nodes) {
            Ok(s) => s,
            Err(e) => {
                m.set_used(start);
                return Err(e);
            }
        };
        let slot = self.areas.log_base() + (seq % 2) * LOG_SLOT_BYTES;
        let rec = encode_ptr_record(seq, start, end, &nodes);
        self.region.write(slot, &rec);
        if self.fault != Some(LsmFault::SkipLogPersist) {
            self.region.flush(m.base + start, end - start);
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
            self.region.flush(m.base + start, end - start);
            self.region.flush(slot, rec.len() as u64);
            self.region.fence();
        }
        let committed = page_offset(self.areas.control_page) + C_COMMITTED;
        self.region.write_u64(committed, seq);
        self.region.persist(committed, 8);
        st.committed_seq.store(seq, Ordering::Release);
        Ok(())
    }
}

impl Lsm {
    /// Live rows of a table, and a check of its memtable entries and runs.
    fn check_table(&self, st: &State, table: u32) -> std::result::Result<u64, String> {
        let runs = &st.runs[table as usize];
        for run in runs {
            run.check(&self.region)?;
        }
        // Reads take a key from the first run of an output that has it: the pieces of one
        // output must not share a key.
        let starts = Self::outputs(runs);
        let ends = starts.iter().skip(1).copied().chain([runs.len()]);
        for (&s, e) in starts.iter().zip(ends).filter(|&(&s, e)| e - s > 1) {
            let mut keys: Vec<u64> = runs[s..e]
                .iter()
                .flat_map(|r| (0..r.r.entries).map(|i| r.key_at(&self.region, i)))
                .collect();
            keys.sort_unstable();
            if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
                return Err(format!(
                    "table {table}: key {} is in two pieces of the run at page {}",
                    w[0], runs[s].r.first_page
                ));
            }
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

impl Engine for Lsm {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let _latch = self.commit_latch();
        let mut st = self.write_state();
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
        let st = self.read_state();
        st.manifest.tables.iter().position(|t| t.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.read_state().manifest.tables.clone()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if worker >= self.workers as usize {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: the engine was opened for {} workers",
                self.workers
            )));
        }
        // Unique and never 0 (the lock manager's rule): this worker's count, and the worker.
        let seq = self.begun[worker].fetch_add(1, Ordering::Relaxed);
        let id = seq * u64::from(self.workers.max(1)) + worker as u64 + 1;
        Ok(Box::new(txn::LsmTxn::new(self, id, worker)))
    }

    synchronous_engine_methods!();

    fn check_integrity(&self) -> IntegrityResult {
        let st = self.read_state();
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
            ("shared_lock_acquires", s.shared.get(Shared::LockAcquires as usize)),
            ("shared_counter_rmws", s.shared.get(Shared::CounterRmws as usize)),
            ("state_reader_waits", s.waits.get(Wait::ReaderWaits as usize)),
            ("state_exclusive", s.waits.get(Wait::StateExclusive as usize)),
            ("commit_latch_waits", s.waits.get(Wait::CommitLatchWaits as usize)),
            ("commit_groups", s.groups.get(0)),
            ("grouped_commits", s.groups.get(1)),
            ("file_reads", s.file_reads.get(0)),
            ("file_read_bytes", s.file_reads.get(1)),
        ]
        .into_iter()
        .chain(self.locks.activity())
        .collect()
    }

    fn footprint_bytes(&self) -> Option<u64> {
        let st = self.read_state();
        let a = &self.areas;
        let (log, mem) = match &st.mem {
            Mem::Dram(_) => (st.log_end.load(Ordering::Relaxed), 0),
            Mem::Nvm(m) => (2 * LOG_SLOT_BYTES, m.used()),
        };
        let fixed = page_offset(a.control_page + 1) + 2 * MANIFEST_BYTES as u64;
        Some(fixed + log + mem + Self::run_pages(&st) * PAGE_SIZE_U64)
    }
}

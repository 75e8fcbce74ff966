//! `engines`: one module per storage and recovery method, all behind [`storage::Engine`]
//! (`docs/design.md` §4). Variants are options, not copies.

/// The [`Engine`] methods of an engine whose commits are durable when they return and that runs
/// on the `region` field, with the `report` of its open: written once for `inplace` and `lsm`.
/// Use inside `impl Engine for ...`.
macro_rules! synchronous_engine_methods {
    () => {
        fn is_durable(&self, _token: storage::CommitToken) -> bool {
            true
        }

        fn wait_durable(&self, _token: storage::CommitToken) -> storage::Result<()> {
            Ok(())
        }

        fn recovery_report(&self) -> storage::engine::RecoveryReport {
            self.report.clone()
        }

        fn region(&self) -> Option<&pmem::Region> {
            Some(&self.region)
        }
    };
}

pub mod cow;
pub mod device;
mod gated;
pub mod group;
pub mod inplace;
pub mod lsm;
mod staging;
pub mod wal;

use pmem::Region;
use serde::{Deserialize, Serialize};
use storage::{DbError, Engine, Result};

/// Engines this crate provides.
pub const ENGINES: &[&str] = &["inplace", "wal", "group", "cow", "lsm"];

/// Options shared by the page-based engines. Defaults live here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineOptions {
    /// Maximum concurrent workers (each has its own undo logs); fixed at format time.
    pub workers: u32,
    /// Pages (8 KiB) of each worker's user-transaction undo log.
    pub undo_pages: u32,
    /// Pages of each worker's system-transaction undo log.
    pub sys_undo_pages: u32,
    /// Maximum entries per B+tree node (small values force splits and merges in tests).
    pub node_capacity: u32,
    /// Simulated page-cache capacity for the read-latency model (None = unlimited).
    pub cache_pages: Option<u64>,
    /// Replacement policy of that cache (fully associative LRU, as Pelley §5.1).
    #[serde(default)]
    pub cache_policy: storage::pages::CachePolicy,
    /// Deliberate bugs, to prove the crash tester catches them. Never set outside tests.
    #[doc(hidden)]
    pub fault: Option<Fault>,
    /// `group`: longest a batch stays open (Pelley's batch period).
    pub batch_period_ms: u64,
    /// `group`: threads that share a batch persist (thesis §4.3.2, Table 4.2); 0: one per
    /// worker (concurrent batch persist by the quiesced workers).
    pub persist_threads: u32,
    /// `group`: bytes of staged (dirty) lines one batch may hold: the batch log's capacity.
    pub staging_bytes: u64,
    /// `group`: close a batch after this many commits too (0: by time and size only).
    pub batch_txns: u64,
    /// `wal`: bytes of the log area in NVRAM (fixed at format time), shared by the `N` logs of
    /// `log=txn:N|page:N`. Default 64 MiB; the CLI's default (no `log_bytes=` given) is
    /// [`wal::default_log_bytes`]: 64 MiB, raised for `N` logs so each has room for every
    /// worker's largest operation.
    pub log_bytes: u64,
    /// `wal`: the page flusher checkpoints when more pages than this are dirty (0: only when
    /// the log passes half its capacity); with `flusher=pelley`, the dirty pages it keeps (0:
    /// none). Pelley's Fig. 1 knob.
    pub max_dirty_pages: u64,
    /// `wal`: a fuzzy checkpoint of every dirty page over the budget (ours), or Pelley's
    /// flusher, which writes back the oldest dirty pages continuously.
    #[serde(default)]
    pub flusher: wal::Flusher,
    /// `wal`: how pages are written back (Pelley's `persist_page`, or ours).
    pub page_flush: wal::PageFlush,
    /// `wal`: load/store on NVRAM, or `pwrite` + `fdatasync` through the file system.
    pub io: wal::Io,
    /// `wal`: how log records are inserted (Aether's consolidation array, decoupled fill alone,
    /// or under one global lock).
    pub log_insert: wal::LogInsert,
    /// `wal`'s central log: commits forced by a flush daemon (Aether's flush pipelining) or by
    /// the committing thread. The distributed logs have their own (passive group commit).
    #[serde(default = "default_log_force")]
    pub log_force: wal::LogForce,
    /// `wal`: one central log, or `N` logs partitioned by transaction or page (Wang & Johnson).
    #[serde(default = "default_log")]
    pub log: wal::LogLayout,
    /// `wal` with a distributed log: volatile caches (passive group commit) or durable (eADR).
    #[serde(default = "default_cache")]
    pub cache: wal::Cache,
    /// `inplace`: how page updates persist (ours, or Pelley's `persist_wal` + `persist_page`).
    pub protocol: inplace::Protocol,
    /// `cow`: commits within this interval share one barrier and master swap (N-Store's
    /// `gc_interval`); 0: every commit persists alone.
    pub group_commit_ms: u64,
    /// `lsm`: bytes of the memtable (an NVRAM arena with `io=nvm`, of which there are two; DRAM
    /// with `io=fs`, whose log is twice this); a full memtable is flushed into runs.
    pub memtable_bytes: u64,
    /// Row checksums (heap slots, `cow` leaves, the `lsm` memtable), verified on every read and
    /// by the integrity check; recorded at format time, so a region keeps what it was made
    /// with. Off only to measure their cost (`--engine-opt checksums=off`).
    #[serde(default = "default_checksums")]
    pub checksums: bool,
}

fn default_checksums() -> bool {
    true
}

fn default_log() -> wal::LogLayout {
    wal::LogLayout::Central
}

fn default_log_force() -> wal::LogForce {
    wal::LogForce::Pipelined
}

fn default_cache() -> wal::Cache {
    wal::Cache::Volatile
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            workers: 16,
            undo_pages: 32,
            sys_undo_pages: 16,
            node_capacity: storage::btree::MAX_NODE_ENTRIES as u32,
            cache_pages: None,
            cache_policy: storage::pages::CachePolicy::Lru,
            fault: None,
            batch_period_ms: 20,
            persist_threads: 0,
            staging_bytes: 32 << 20,
            batch_txns: 0,
            log_bytes: wal::DEFAULT_LOG_BYTES,
            max_dirty_pages: 16384,
            page_flush: wal::PageFlush::Paper,
            flusher: wal::Flusher::Checkpoint,
            io: wal::Io::Nvm,
            log_insert: wal::LogInsert::Consolidated,
            log_force: default_log_force(),
            log: default_log(),
            cache: default_cache(),
            protocol: inplace::Protocol::Lean,
            group_commit_ms: 0,
            memtable_bytes: 4 << 20,
            checksums: default_checksums(),
        }
    }
}

/// Test-only protocol violations (the crash tests' `--engine-opt fault=...`); hidden from the
/// docs because no user should set one.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Write a row update in place *before* its undo record is persisted.
    UpdateBeforeUndo,
    /// Persist the commit mark without first persisting the transaction's in-place writes.
    CommitBeforeData,
    /// Clear a freed page's allocator bit before the freeing system transaction commits.
    FreeBeforeCommit,
    /// Recovery frees a rolled-back transaction's undo log without persisting the restored
    /// bytes first.
    RecoveryRollbackNotPersisted,
    /// `group`: no barrier between writing the batch log and marking it valid.
    BatchSkipLogBarrier,
    /// `group`: copy the staged lines in place before the batch log is written.
    BatchCopyBeforeLog,
    /// `group`: acknowledge a batch before its last barrier (the log's invalidation).
    BatchAckEarly,
    /// `wal`: `persist_wal` without its second barrier (commit acknowledged before its LSNs).
    WalSkipLogBarrier,
    /// `wal`: write pages back before forcing the log past their changes (the WAL rule).
    WalPageBeforeLog,
    /// `wal`: move the checkpoint's redo point before the flushed pages are durable.
    WalCheckpointBeforePages,
    /// `wal flusher=pelley`: move the redo point to the log's end, past pages still dirty.
    WalFlusherRedoPastDirty,
    /// `wal log=txn|page`: acknowledge a commit once its own logs are forced, before the GSN
    /// horizon covers it.
    DlogAckOwnLogs,
    /// `wal log=page`: a commit forces only one of the logs it touched, then counts as clean.
    DlogSkipLaggingLog,
    /// `wal log=txn|page`: recovery redoes records above the GSN horizon.
    DlogRedoPastHorizon,
    /// `wal log=txn`: redo applies each log in its order instead of page buckets sorted by GSN.
    DlogRedoUnsorted,
    /// `inplace protocol=pelley`: `persist_page` marks the page log invalid without flushing
    /// the in-place write first.
    PelleyPageNotFlushed,
    /// `inplace protocol=pelley`: `persist_page` before `persist_wal` (the page update
    /// persists before its undo entry).
    PelleyPageBeforeWal,
    /// `cow`: swap the master record without the barrier that persists the new pages first
    /// (they are flushed, not fenced: the swap may reach the medium before them).
    CowSkipNodePersist,
    /// `cow`: persist the master record before the new pages (flushed after it).
    CowSwapBeforeNodes,
    /// `cow`: make a committed page reusable as soon as a writer copies it, before the version
    /// replacing it is durable (the next new page of the same commit may overwrite it).
    CowReuseEarly,
    /// `lsm`: commit links its memtable nodes without persisting them and its log record first.
    LsmSkipLogPersist,
    /// `lsm`: the manifest names a new run before the run's contents are persisted.
    LsmRunBeforePersist,
    /// `lsm`: compaction drops the merged runs from the manifest before publishing their merge.
    LsmDropRunsBeforePublish,
}

impl Fault {
    /// Every fault's name, for error messages.
    pub const NAMES: &'static str =
        "update-before-undo, commit-before-data, free-before-commit, recovery-rollback-not-persisted, \
         batch-skip-log-barrier, batch-copy-before-log, batch-ack-early, wal-skip-log-barrier, \
         wal-page-before-log, wal-checkpoint-before-pages, wal-flusher-redo-past-dirty, \
         dlog-ack-own-logs, \
         dlog-skip-lagging-log, dlog-redo-past-horizon, dlog-redo-unsorted, pelley-page-not-flushed, \
         pelley-page-before-wal, cow-skip-node-persist, cow-swap-before-nodes, \
         cow-reuse-early, lsm-skip-log-persist, lsm-run-before-persist, \
         lsm-drop-runs-before-publish";

    pub fn parse(s: &str) -> Option<Fault> {
        match s {
            "update-before-undo" => Some(Fault::UpdateBeforeUndo),
            "commit-before-data" => Some(Fault::CommitBeforeData),
            "free-before-commit" => Some(Fault::FreeBeforeCommit),
            "recovery-rollback-not-persisted" => Some(Fault::RecoveryRollbackNotPersisted),
            "batch-skip-log-barrier" => Some(Fault::BatchSkipLogBarrier),
            "batch-copy-before-log" => Some(Fault::BatchCopyBeforeLog),
            "batch-ack-early" => Some(Fault::BatchAckEarly),
            "wal-skip-log-barrier" => Some(Fault::WalSkipLogBarrier),
            "wal-page-before-log" => Some(Fault::WalPageBeforeLog),
            "wal-checkpoint-before-pages" => Some(Fault::WalCheckpointBeforePages),
            "wal-flusher-redo-past-dirty" => Some(Fault::WalFlusherRedoPastDirty),
            "dlog-ack-own-logs" => Some(Fault::DlogAckOwnLogs),
            "dlog-skip-lagging-log" => Some(Fault::DlogSkipLaggingLog),
            "dlog-redo-past-horizon" => Some(Fault::DlogRedoPastHorizon),
            "dlog-redo-unsorted" => Some(Fault::DlogRedoUnsorted),
            "pelley-page-not-flushed" => Some(Fault::PelleyPageNotFlushed),
            "pelley-page-before-wal" => Some(Fault::PelleyPageBeforeWal),
            "cow-skip-node-persist" => Some(Fault::CowSkipNodePersist),
            "cow-swap-before-nodes" => Some(Fault::CowSwapBeforeNodes),
            "cow-reuse-early" => Some(Fault::CowReuseEarly),
            "lsm-skip-log-persist" => Some(Fault::LsmSkipLogPersist),
            "lsm-run-before-persist" => Some(Fault::LsmRunBeforePersist),
            "lsm-drop-runs-before-publish" => Some(Fault::LsmDropRunsBeforePublish),
            _ => None,
        }
    }
}

/// What opening a region would do, found without writing to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Inspection {
    /// The superblock's state in words ("valid", "blank: ...", ...).
    pub verdict: String,
    /// The engine that formatted the region.
    pub engine: Option<String>,
    pub page_count: u64,
    /// Worker slots the region was formatted for.
    pub workers: u32,
    /// In-flight user transactions recovery would roll back.
    pub txns_to_roll_back: u64,
    /// Unfinished structure modifications recovery would roll back.
    pub system_txns_to_roll_back: u64,
    /// Committed transactions whose post-commit work recovery would finish.
    pub txns_to_complete: u64,
    /// Undo records recovery would read.
    pub undo_records: u64,
    /// A `wal` region's log: layout, capacity, horizon and redo points (None: other engines).
    pub log: Option<LogInspection>,
}

/// A `wal` region's log as the control page describes it, and what redo would read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LogInspection {
    /// `central`, `txn:N` or `page:N` (the `log=` engine option to open it with).
    pub layout: String,
    /// Number of logs.
    pub logs: u64,
    /// `volatile` (passive group commit) or `durable` (eADR); a central log is `volatile`.
    pub cache: String,
    /// The whole log area (the `log_bytes` it was formatted with).
    pub log_bytes: u64,
    /// Each log's capacity.
    pub per_log_bytes: u64,
    /// The persisted GSN horizon `H` (distributed logs).
    pub horizon: Option<u64>,
    /// Each log's redo point (an LSN in that log).
    pub redo_points: Vec<u64>,
    /// Each log's end, as recovery finds it.
    pub ends: Vec<u64>,
    /// Records recovery would redo.
    pub records_to_redo: u64,
    /// Records above `H` recovery would retire (volatile caches).
    pub records_above_horizon: u64,
}

impl LogInspection {
    /// The engine options a region with this log must be opened with.
    pub fn apply_to(&self, o: &mut EngineOptions) {
        if let Some(layout) = wal::LogLayout::parse(&self.layout) {
            o.log = layout;
        }
        if let Some(cache) = wal::Cache::parse(&self.cache) {
            o.cache = cache;
        }
        o.log_bytes = self.log_bytes;
    }
}

/// What opening `region` would do (superblock verdict, in-flight work), read without writing.
/// A damaged superblock is an error.
pub fn inspect(region: &Region) -> Result<Inspection> {
    let outer = inplace::inspect(region)?;
    match outer.engine.as_deref() {
        Some(group::ENGINE_NAME) => return group::inspect(region, outer),
        Some(wal::ENGINE_NAME) => return wal::inspect(region, outer),
        Some(cow::ENGINE_NAME) => return cow::inspect(region, outer),
        Some(lsm::ENGINE_NAME) => return lsm::inspect(region, outer),
        _ => {}
    }
    Ok(outer)
}

/// The smallest region, in bytes, that engine `name` formats with `options`: its own areas
/// (a `wal` log, a `group` batch log, `lsm`'s memtable log and arenas), the database's
/// metadata (superblock, bitmaps, undo logs) and the few data pages formatting asks for. The
/// rule is each engine's own format check, so a region of this size formats and one page less
/// does not. A workload needs more: see [`area_bytes`].
pub fn min_region_bytes(name: &str, options: &EngineOptions) -> Result<u64> {
    let needed: fn(&EngineOptions, u64) -> u64 = match name {
        "inplace" => inplace::needed_pages,
        "group" => group::needed_pages,
        "wal" => wal::needed_pages,
        "cow" => cow::needed_pages,
        "lsm" => lsm::needed_pages,
        other => {
            return Err(DbError::Invalid(format!(
                "unknown engine `{other}` (this crate has: {})",
                ENGINES.join(", ")
            )))
        }
    };
    // What a layout needs grows with the region only through its bitmap pages (one per 64 Ki
    // pages): a few rounds reach the fixed point.
    let mut pages = 1u64;
    for _ in 0..64 {
        let need = needed(options, pages);
        if need <= pages {
            return Ok(storage::format::page_offset(pages));
        }
        pages = need;
    }
    Err(DbError::Invalid(format!("engine {name}: no region size fits these options")))
}

/// The bytes engine `name` keeps apart from its database (logs, batch log, LSM areas): what it
/// needs beyond `inplace`'s minimum with the same options, so a default region size chosen for
/// a workload on `inplace` is that much larger for it (0 for `inplace` and `cow`).
pub fn area_bytes(name: &str, options: &EngineOptions) -> Result<u64> {
    let own = min_region_bytes(name, options)?;
    Ok(own.saturating_sub(min_region_bytes(inplace::ENGINE_NAME, options)?))
}

/// Opens (formatting a blank region, recovering otherwise) engine `name` on `region`.
pub fn open(name: &str, region: Region, options: &EngineOptions) -> Result<Box<dyn Engine>> {
    match name {
        "inplace" => Ok(Box::new(inplace::InPlace::open(region, options)?)),
        "group" => Ok(Box::new(group::Group::open(region, options)?)),
        "wal" => Ok(Box::new(wal::Wal::open(region, options)?)),
        "cow" => Ok(Box::new(cow::Cow::open(region, options)?)),
        "lsm" => Ok(Box::new(lsm::Lsm::open(region, options)?)),
        other => Err(DbError::Invalid(format!(
            "unknown engine `{other}` (this crate has: {})",
            ENGINES.join(", ")
        ))),
    }
}

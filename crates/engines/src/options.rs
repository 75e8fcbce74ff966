//! The options every page-based engine shares, and the table of test-only faults
//! (`docs/design.md` §4, "Options"). Each engine's own options live in its module
//! (`wal::Options`, ...) and sit here as one part each, serialized inline, so a bench row's
//! `engine_opts` and old rows keep one flat object.
//!
//! Invariant: every field is declared once, in one [`storage::engine_options!`] row, with its
//! default, parser and help; which keys an engine takes is its registry entry's business
//! ([`crate::registry`]).

use crate::{cow, group, inplace, lsm, wal};
use serde::{Deserialize, Serialize};
use storage::options::OptionValue;

storage::engine_options! {
    /// Options of the page-based engines: the shared ones, then one part per engine. Defaults
    /// live here and in each part's table.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct EngineOptions {
        flag workers: u32 = 16,
            "maximum concurrent workers (each has its own undo logs); fixed at format time";
        key undo_pages: u32 = 32, "pages (8 KiB) of each worker's user-transaction undo log";
        key sys_undo_pages: u32 = 16, "pages of each worker's system-transaction undo log";
        key node_capacity: u32 = storage::btree::MAX_NODE_ENTRIES as u32,
            "maximum entries per B+tree node (small values force splits and merges in tests)";
        flag cache_pages: Option<u64> = None,
            "simulated page-cache capacity for the read-latency model (None: unlimited)";
        flag cache_policy: storage::pages::CachePolicy = storage::pages::CachePolicy::Lru,
            "replacement policy of that cache (fully associative LRU, as Pelley §5.1)";
        /// Never set outside tests; the crash tests prove the tester catches each one.
        #[doc(hidden)]
        key fault: Option<Fault> = None, "a deliberate protocol violation (tests only)";
        key io: crate::device::Io = crate::device::Io::Nvm,
            "load/store on NVRAM (nvm), or pwrite + fdatasync through the file system (fs)";
        key retry_keeps_age: bool = false,
            "wait-die as the textbook has it (Rosenkrantz et al. 1978): a transaction that died \
             on a lock is retried with the age it died with, so it cannot die forever; off (the \
             default): a retry takes a new age (`inplace`, `wal`, `group`)";
        key checksums: bool = true,
            "row checksums (heap slots, cow leaves, the lsm memtable), verified on every read \
             and by check; fixed at format time; off only to measure their cost";
        #[serde(flatten)]
        part inplace: inplace::Options = Default::default(), "`inplace`'s own options";
        #[serde(flatten)]
        part wal: wal::Options = Default::default(), "`wal`'s own options";
        #[serde(flatten)]
        part group: group::Options = Default::default(), "`group`'s own options";
        #[serde(flatten)]
        part cow: cow::Options = Default::default(), "`cow`'s own options";
        #[serde(flatten)]
        part lsm: lsm::Options = Default::default(), "`lsm`'s own options";
    }
}

/// Declares [`Fault`] and [`FAULTS`] from one table: variant, name, engine, what it breaks.
macro_rules! faults {
    ($($(#[$m:meta])* $variant:ident = $name:literal, $engine:literal, $about:literal;)*) => {
        /// Test-only protocol violations (the crash tests' `--engine-opt fault=...`); hidden
        /// from the docs because no user should set one.
        #[doc(hidden)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Fault {
            $(#[doc = $about] $(#[$m])* $variant,)*
        }

        /// Every test-only fault: its name, the engine it breaks, what it breaks.
        #[doc(hidden)]
        pub const FAULTS: &[FaultInfo] = &[
            $(FaultInfo { fault: Fault::$variant, name: $name, engine: $engine, about: $about },)*
        ];
    };
}

/// One row of [`FAULTS`].
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultInfo {
    pub fault: Fault,
    /// As `--engine-opt fault=` spells it (the serde name too).
    pub name: &'static str,
    /// The engine whose protocol it breaks (`inplace`'s faults break `group` and `wal` too,
    /// which run `inplace`).
    pub engine: &'static str,
    pub about: &'static str,
}

faults! {
    UpdateBeforeUndo = "update-before-undo", "inplace",
        "Write a row update in place *before* its undo record is persisted.";
    CommitBeforeData = "commit-before-data", "inplace",
        "Persist the commit mark without first persisting the transaction's in-place writes.";
    FreeBeforeCommit = "free-before-commit", "inplace",
        "Clear a freed page's allocator bit before the freeing system transaction commits.";
    RecoveryRollbackNotPersisted = "recovery-rollback-not-persisted", "inplace",
        "Recovery frees a rolled-back transaction's undo log without persisting the restored \
         bytes first.";
    BatchSkipLogBarrier = "batch-skip-log-barrier", "group",
        "`group`: no barrier between writing the batch log and marking it valid.";
    BatchCopyBeforeLog = "batch-copy-before-log", "group",
        "`group`: copy the staged lines in place before the batch log is written.";
    BatchAckEarly = "batch-ack-early", "group",
        "`group`: acknowledge a batch before its last barrier (the log's invalidation).";
    WalSkipLogBarrier = "wal-skip-log-barrier", "wal",
        "`wal`: `persist_wal` without its second barrier (commit acknowledged before its LSNs).";
    WalPageBeforeLog = "wal-page-before-log", "wal",
        "`wal`: write pages back before forcing the log past their changes (the WAL rule).";
    WalCheckpointBeforePages = "wal-checkpoint-before-pages", "wal",
        "`wal`: move the checkpoint's redo point before the flushed pages are durable.";
    WalFlusherRedoPastDirty = "wal-flusher-redo-past-dirty", "wal",
        "`wal flusher=pelley`: move the redo point to the log's end, past pages still dirty.";
    WalGroupDropsLastStore = "wal-group-drops-last-store", "wal",
        "`wal`: a store group (an update's undo record and row, one log insert) is logged \
         without its last store, so a crash loses it from the redo.";
    DlogAckOwnLogs = "dlog-ack-own-logs", "wal",
        "`wal log=txn|page`: acknowledge a commit once its own logs are forced, before the GSN \
         horizon covers it.";
    DlogSkipLaggingLog = "dlog-skip-lagging-log", "wal",
        "`wal log=page`: a commit forces only one of the logs it touched, then counts as clean.";
    DlogRedoPastHorizon = "dlog-redo-past-horizon", "wal",
        "`wal log=txn|page`: recovery redoes records above the GSN horizon.";
    DlogRedoUnsorted = "dlog-redo-unsorted", "wal",
        "`wal log=txn`: redo applies each log in its order instead of page buckets sorted by GSN.";
    PelleyPageNotFlushed = "pelley-page-not-flushed", "inplace",
        "`inplace protocol=pelley`: `persist_page` marks the page log invalid without flushing \
         the in-place write first.";
    PelleyPageBeforeWal = "pelley-page-before-wal", "inplace",
        "`inplace protocol=pelley`: `persist_page` before `persist_wal` (the page update \
         persists before its undo entry).";
    CowSkipNodePersist = "cow-skip-node-persist", "cow",
        "`cow`: swap the master record without the barrier that persists the new pages first \
         (they are flushed, not fenced: the swap may reach the medium before them).";
    CowSwapBeforeNodes = "cow-swap-before-nodes", "cow",
        "`cow`: persist the master record before the new pages (flushed after it).";
    CowReuseEarly = "cow-reuse-early", "cow",
        "`cow`: make a committed page reusable as soon as a writer copies it, before the \
         version replacing it is durable (the next new page of the same commit may overwrite \
         it).";
    LsmSkipLogPersist = "lsm-skip-log-persist", "lsm",
        "`lsm`: commit links its memtable nodes without persisting them and its log record \
         first.";
    LsmRunBeforePersist = "lsm-run-before-persist", "lsm",
        "`lsm`: the manifest names a new run before the run's contents are persisted.";
    LsmDropRunsBeforePublish = "lsm-drop-runs-before-publish", "lsm",
        "`lsm`: compaction drops the merged runs from the manifest before publishing their \
         merge.";
}

impl Fault {
    /// The fault called `name`.
    pub fn parse(name: &str) -> Option<Fault> {
        FAULTS.iter().find(|f| f.name == name).map(|f| f.fault)
    }

    pub fn name(self) -> &'static str {
        FAULTS.iter().find(|f| f.fault == self).map_or("", |f| f.name)
    }

    /// Every fault's name, comma-separated, for messages.
    pub fn names() -> String {
        FAULTS.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
    }
}

impl OptionValue for Fault {
    const ACCEPTS: &'static str = "a test fault (`--engine-opt help` lists them)";
    fn parse_option(text: &str) -> Option<Self> {
        Fault::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(self.name().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_name_parses_back_and_is_unique() {
        for (i, f) in FAULTS.iter().enumerate() {
            assert_eq!(Fault::parse(f.name), Some(f.fault), "{}", f.name);
            assert_eq!(f.fault.name(), f.name);
            assert!(FAULTS[..i].iter().all(|g| g.name != f.name && g.fault != f.fault));
        }
    }
}

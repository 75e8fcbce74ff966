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

mod brlock;
pub mod cow;
pub mod device;
mod gated;
pub mod group;
pub mod inplace;
pub mod lsm;
mod options;
pub mod registry;
mod staging;
pub mod wal;

pub use options::{EngineOptions, Fault, FaultInfo, FAULTS};
use serde::Serialize;

pub use registry::{area_bytes, inspect, min_region_bytes, open, ENGINES};

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
            o.wal.log = layout;
        }
        if let Some(cache) = wal::Cache::parse(&self.cache) {
            o.wal.cache = cache;
        }
        o.wal.log_bytes = self.log_bytes;
    }
}

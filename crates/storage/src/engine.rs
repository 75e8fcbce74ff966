//! The `Engine` / `Txn` traits every storage and recovery method implements (docs/design.md §4),
//! and the types they share. Engines differ only in storage and recovery: the operations, their
//! locking (key-level two-phase locking, conflicts abort with a retryable error) and their results
//! are the same for all of them, so workloads and the crash tester are written once.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Index of a table in the catalog, dense from 0 in creation order.
pub type TableId = u32;

/// A table of fixed-size rows keyed by `u64`, with an ordered index.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableSpec {
    pub name: String,
    /// Every row of the table has exactly this many bytes (1 ..= MAX_ROW_BYTES).
    pub row_bytes: u32,
    /// Expected number of rows: a sizing hint, not a limit.
    pub expected_rows: u64,
}

/// Largest row an engine must accept.
pub const MAX_ROW_BYTES: u32 = 4096;
/// Longest table name.
pub const MAX_TABLE_NAME: usize = 48;

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// Lock conflict (no-wait 2PL): the transaction was aborted; run it again.
    #[error("lock conflict on table {table} key {key}; the transaction was aborted, retry it")]
    Conflict { table: TableId, key: u64 },
    #[error("key {key} already exists in table {table}")]
    Duplicate { table: TableId, key: u64 },
    #[error("no table with id {0}")]
    NoSuchTable(TableId),
    #[error("table {table}: row must be {expected} bytes, got {got}")]
    RowSize { table: TableId, expected: u32, got: usize },
    #[error("table {table}: update of bytes {offset}..{end} is outside the {row_bytes}-byte row")]
    UpdateRange { table: TableId, offset: u32, end: u64, row_bytes: u32 },
    #[error("region full: {0}")]
    RegionFull(String),
    #[error("transaction too large: {0}; commit in smaller batches")]
    TxnTooLarge(String),
    #[error("region is damaged: {0}")]
    Corrupt(String),
    #[error("region format: {0}")]
    Format(String),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error(transparent)]
    Pmem(#[from] pmem::PmemError),
    /// An error reported by a peer engine (SQLite, LMDB, ...), with its message; the `nvmdb`
    /// library reports conflicts in its users' terms this way (engine `"nvmdb"`).
    #[error("{engine}: {message}")]
    Peer { engine: &'static str, message: String, retryable: bool },
}

impl DbError {
    /// Whether running the same transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            DbError::Conflict { .. } => true,
            DbError::Peer { retryable, .. } => *retryable,
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, DbError>;

/// What `commit` returns: the transaction is committed (visible, and will not be rolled back by
/// this process) but becomes *durable* only when [`Engine::is_durable`] says so. Engines that
/// persist synchronously return [`CommitToken::DURABLE`]; group commit returns its batch number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CommitToken(pub u64);

impl CommitToken {
    pub const DURABLE: CommitToken = CommitToken(0);
}

/// What `open` did to bring the region to a consistent state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// Whether the region was freshly formatted (nothing to recover).
    pub formatted: bool,
    /// User transactions rolled back.
    pub txns_rolled_back: u64,
    /// Structure modifications (system transactions) rolled back.
    pub system_txns_rolled_back: u64,
    /// Undo/redo records applied.
    pub records_applied: u64,
    /// Committed transactions whose post-commit work was completed.
    pub txns_completed: u64,
    /// Wall time of recovery.
    pub duration: Duration,
    /// Free-form facts for humans ("scanned 3 undo logs", ...).
    pub notes: Vec<String>,
}

/// Result of an engine's self-check: indexes and heap agree, the allocator accounts for every
/// page. `Err` describes the first inconsistency.
pub type IntegrityResult = std::result::Result<IntegrityReport, String>;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrityReport {
    pub tables: u64,
    pub rows: u64,
    pub pages_in_use: u64,
    pub pages_free: u64,
}

/// A storage engine. Shared by all worker threads.
pub trait Engine: Send + Sync {
    /// Short name (`inplace`, `wal`, `sqlite`, ...).
    fn name(&self) -> &str;

    /// Creates a table (at load time, outside transactions). Fails with `Invalid` if a table of
    /// that name exists.
    fn create_table(&self, spec: &TableSpec) -> Result<TableId>;

    /// Looks a table up by name (after reopening a region).
    fn table(&self, name: &str) -> Option<TableId>;

    /// All tables, in id order.
    fn tables(&self) -> Vec<TableSpec>;

    /// Starts a transaction on behalf of worker `worker` (0 ..= max workers - 1; engines keep
    /// per-worker state such as undo logs). A worker runs one transaction at a time.
    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>>;

    /// Whether a commit has become durable.
    fn is_durable(&self, token: CommitToken) -> bool;

    /// Blocks until a commit is durable.
    fn wait_durable(&self, token: CommitToken) -> Result<()>;

    /// What opening the engine recovered.
    fn recovery_report(&self) -> RecoveryReport;

    /// The persistent region under the engine, for device statistics (peers have none).
    fn region(&self) -> Option<&pmem::Region>;

    /// Checks indexes, heap and allocator agree (run after benchmarks and crash recovery).
    fn check_integrity(&self) -> IntegrityResult;

    /// Makes everything committed durable and quiesces background work (clean shutdown).
    fn shutdown(&self) -> Result<()>;

    /// What lives at a region offset ("undo log of worker 3, header slot 5", "B+tree node of
    /// table accounts"), for wear reports. `None` if the engine cannot say.
    fn describe_offset(&self, _offset: u64) -> Option<String> {
        None
    }

    /// The region byte ranges holding circular logs (undo logs, a write-ahead log, a batch
    /// log), for wear reports: thesis Fig. 5.7 leaves them out of the most-written byte ("Logs
    /// are implemented as circular buffers. Thus, logs do not contribute to the most written
    /// byte"). `None` if the engine cannot say.
    fn circular_logs(&self) -> Option<Vec<std::ops::Range<u64>>> {
        None
    }

    /// The region byte ranges of the logs' control words (a redo point, a log's head or
    /// valid mark, a batch log's state): rewritten by every checkpoint, flush round or batch,
    /// they are not data, and thesis Fig. 5.7 does not count them (issue 38); wear reports
    /// them apart. `None` if the engine has none or cannot say.
    fn log_control_words(&self) -> Option<Vec<std::ops::Range<u64>>> {
        None
    }

    /// Counts of structural events since the engine opened (splits, merges, heap growth, page
    /// frees, deletes, commits), for crash-test coverage. `None` if the engine keeps none.
    fn counters(&self) -> Option<crate::counters::EngineCounters> {
        None
    }

    /// Engine-specific activity since open, as (name, count) pairs that only grow (log forces,
    /// pages flushed, batches, ...): `nvmdb bench` reports their change over the measured
    /// period, in total and per commit. Empty if the engine keeps none.
    fn activity(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Bytes of persistent storage the engine's state occupies now (pages in use of the region,
    /// log areas, or files), the storage footprint Arulraj et al. (SIGMOD 2015, §5.6) report.
    /// `None` if the engine cannot say.
    fn footprint_bytes(&self) -> Option<u64> {
        None
    }
}

/// A transaction. Reads and writes take key-level locks held until commit or abort (strict 2PL);
/// a conflict returns [`DbError::Conflict`], after which the transaction must be aborted.
/// Dropping a transaction without commit aborts it.
pub trait Txn {
    /// Reads a row into `out` (cleared first). Returns false if the key is absent.
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool>;

    /// Reads a row the transaction is about to update (SQL's `SELECT ... FOR UPDATE`): an engine
    /// with key locks takes the key's exclusive lock first, so two read-modify-writes of one
    /// key queue on the lock (wait-die) instead of both reading, both trying to upgrade and
    /// one or both aborting. The default is a plain [`Txn::read`].
    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.read(table, key, out)
    }

    /// Inserts a row; `Duplicate` if the key exists.
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()>;

    /// Overwrites `bytes.len()` bytes of a row starting at `offset`. Returns false if absent.
    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool>;

    /// Deletes a row. Returns false if absent.
    fn delete(&mut self, table: TableId, key: u64) -> Result<bool>;

    /// Visits rows with `low <= key <= high` in ascending key order, at most `limit` of them,
    /// until `visit` returns false. Returns the number visited. Each visited key is read-locked
    /// (no phantom protection).
    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize>;

    /// Commits. After `Ok`, the effects are visible and durable once the token is.
    fn commit(self: Box<Self>) -> Result<CommitToken>;

    /// Rolls back every effect of the transaction.
    fn abort(self: Box<Self>) -> Result<()>;
}

/// Checks a row write against the table spec (shared by engines so errors read the same).
pub fn check_row(table: TableId, spec: &TableSpec, row: &[u8]) -> Result<()> {
    if row.len() != spec.row_bytes as usize {
        return Err(DbError::RowSize { table, expected: spec.row_bytes, got: row.len() });
    }
    Ok(())
}

/// Checks a partial update against the table spec.
pub fn check_update(table: TableId, spec: &TableSpec, offset: u32, len: usize) -> Result<()> {
    let end = offset as u64 + len as u64;
    if end > spec.row_bytes as u64 {
        return Err(DbError::UpdateRange { table, offset, end, row_bytes: spec.row_bytes });
    }
    Ok(())
}

/// Validates a table spec (shared by engines).
pub fn check_spec(spec: &TableSpec) -> Result<()> {
    if spec.name.is_empty() || spec.name.len() > MAX_TABLE_NAME {
        return Err(DbError::Invalid(format!(
            "table name must be 1..={MAX_TABLE_NAME} bytes: {:?}",
            spec.name
        )));
    }
    if spec.row_bytes == 0 || spec.row_bytes > MAX_ROW_BYTES {
        return Err(DbError::Invalid(format!(
            "table {}: row size {} outside 1..={MAX_ROW_BYTES}",
            spec.name, spec.row_bytes
        )));
    }
    Ok(())
}

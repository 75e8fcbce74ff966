//! `nvmdb`: a transactional storage engine and testbed for persistent memory.
//!
//! Embedding: open a database with [`Db::open`], then run transactions as closures over named
//! tables with typed keys ([`Key`]: `u64`, `i64`, `str`, `[u8]`, kept in order) and values of
//! any length up to [`MAX_VALUE_BYTES`]:
//!
//! ```
//! use nvmdb::{Db, DbError, DbOptions};
//!
//! let db = Db::open(&DbOptions::default())?;
//! db.write(|tx| {
//!     let accounts = tx.open_table::<str>("accounts")?;
//!     accounts.insert("alice", 100u64.to_le_bytes())?;
//!     accounts.insert("bob", 50u64.to_le_bytes())?;
//!     Ok(())
//! })?;
//! let names = db.read(|tx| match tx.open_table::<str>("accounts")? {
//!     Some(t) => t.iter().map(|e| e.map(|(name, _)| name)).collect(),
//!     None => Ok(Vec::new()),
//! })?;
//! assert_eq!(names, ["alice", "bob"]);
//! # Ok::<(), DbError>(())
//! ```
//!
//! A write commits atomically and is durable when [`Db::write`] returns, on every engine
//! (large values included); lock conflicts are retried for the caller. Transactions can also
//! be held across calls ([`Db::begin_write`], [`Db::begin_read`]), rolled back in part
//! ([`WriteTx::savepoint`], [`WriteTx::rollback_to`]), and the whole database copied while it
//! stays open ([`Db::backup_to`]). Underneath, the
//! benchmark-level seam is the [`Engine`] / [`Txn`] pair of traits (fixed-size rows keyed by
//! `u64`, described by a [`TableSpec`]); `Db` dereferences to its [`Engine`].
//!
//! This crate depends on [`pmem`] (the device), [`storage`] (the [`Engine`] seam) and
//! [`engines`] (the recovery methods) and nothing heavier; the `nvmdb` command, the peers
//! (SQLite, LMDB, redb, PMDK, RocksDB), the workloads and the experiment reports are the
//! `nvmdb-cli` package.

#![warn(missing_docs)]

mod backup;
mod db;
mod handle;
mod kv;

pub use backup::{BackupReport, CompactReport};
pub use db::{
    check_engine, CheckReport, Db, DbOptions, LayerFault, NamedTableRows, TableRows,
    UNLIMITED_SIZE_BYTES,
};
pub use handle::{ReadTransaction, WriteTransaction, BEGIN_WAIT};
pub use kv::{
    Durability, Key, KeyArg, Range, ReadTable, ReadTx, RetryOptions, Savepoint, Table, Value,
    WriteTx, MAX_INLINE_BYTES, MAX_KEY_BYTES, MAX_SAVEPOINT_LOG_BYTES, MAX_TABLE_NAME_BYTES,
    MAX_VALUE_BYTES,
};

// The re-exports below are items of `storage` and `engines`; their doc comments here are shown
// above the items' own and are this crate's doc tests, so each has an example written for
// users of `nvmdb`.

/// An embedded database's engine parameters ([`DbOptions::engine_options`]): how many
/// transactions run at once, how large one may be, and each engine's knobs.
///
/// ```
/// let mut options = nvmdb::DbOptions::default();
/// options.engine = "group".into();
/// options.engine_options.group.batch_period_ms = 1; // commits wait at most ~1 ms for their batch
/// options.engine_options.workers = 8; // up to 8 transactions at once
/// let db = nvmdb::Db::open(&options)?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x"))?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use engines::EngineOptions;

/// The error of every operation: a [`Db::write`] closure returns it to roll back, and
/// [`DbError::is_retryable`] says whether running a transaction again may succeed
/// ([`Db::write`] already retries lock conflicts).
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let long_key = "k".repeat(nvmdb::MAX_KEY_BYTES + 1);
/// let e = db.write(|tx| tx.open_table::<str>("t")?.insert(&long_key, b"")).unwrap_err();
/// assert!(matches!(e, nvmdb::DbError::Invalid(_)));
/// assert!(!e.is_retryable());
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use storage::DbError;

/// The benchmark-level engine interface: tables of fixed-size rows keyed by `u64`, and
/// transactions on caller-chosen worker slots. [`Db`] dereferences to it.
///
/// ```
/// use nvmdb::{Engine, TableSpec};
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let engine: &dyn Engine = db.engine();
/// let spec = TableSpec { name: "counters".into(), row_bytes: 8, expected_rows: 10 };
/// let id = engine.create_table(&spec)?;
/// assert_eq!(engine.table("counters"), Some(id));
/// let mut txn = engine.begin(0)?; // worker slot 0
/// txn.insert(id, 7, &1u64.to_le_bytes())?;
/// let token = txn.commit()?;
/// engine.wait_durable(token)?;
/// assert!(engine.is_durable(token));
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use storage::Engine;

/// One engine table of the benchmark-level [`Engine`] interface: its name, the size of every
/// row, and a sizing hint.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let spec = nvmdb::TableSpec { name: "rows".into(), row_bytes: 16, expected_rows: 100 };
/// db.create_table(&spec)?;
/// assert!(db.tables().contains(&spec));
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use storage::TableSpec;

/// A transaction of the benchmark-level [`Engine`] interface (`engine.begin(worker)`): reads,
/// inserts, partial updates, deletes and scans of fixed-size rows; `commit` or `abort` ends
/// it, and dropping it aborts.
///
/// ```
/// use nvmdb::Txn;
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let t = db.create_table(&nvmdb::TableSpec {
///     name: "rows".into(), row_bytes: 4, expected_rows: 10,
/// })?;
/// let mut txn = db.begin(0)?;
/// for key in 0..5u64 {
///     txn.insert(t, key, b"abcd")?;
/// }
/// assert!(txn.update(t, 2, 1, b"XY")?); // bytes 1..3 of row 2
/// assert!(txn.delete(t, 4)?);
/// let mut row = Vec::new();
/// assert!(txn.read(t, 2, &mut row)?);
/// assert_eq!(row, b"aXYd");
/// let visited = txn.scan(t, 1, 3, usize::MAX, &mut |_key, _row| true)?;
/// assert_eq!(visited, 3);
/// db.wait_durable(txn.commit()?)?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use storage::Txn;

/// nvmdb's storage and recovery methods, for opening an engine directly (see
/// [`Db::from_engine`]); [`engines::ENGINES`] names them.
///
/// ```
/// assert!(nvmdb::engines::ENGINES.contains(&"inplace"));
/// ```
pub use engines;

/// The persistent-memory device: regions on DRAM, `/dev/shm`, files, DAX or a simulated
/// device, with real cache-line flushes and fences, a timing model and a crash simulator.
///
/// ```
/// let mut options = nvmdb::DbOptions::default();
/// options.region.medium = nvmdb::pmem::Medium::Dram; // volatile: nothing survives the process
/// let db = nvmdb::Db::open(&options)?;
/// assert!(db.region().is_some());
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use pmem;

/// What the engines share: the [`Engine`] and [`Txn`] traits, the superblock, undo logs,
/// allocator, B+tree and locks.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let report: nvmdb::storage::RecoveryReport = db.recovery_report();
/// assert!(report.formatted);
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub use storage;

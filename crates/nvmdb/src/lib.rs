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
//! (large values included); lock conflicts are retried for the caller. Underneath, the
//! benchmark-level seam is the [`Engine`] / [`Txn`] pair of traits (fixed-size rows keyed by
//! `u64`, described by a [`TableSpec`]); `Db` dereferences to its [`Engine`].
//!
//! This crate depends on [`pmem`] (the device), [`storage`] (the [`Engine`] seam) and
//! [`engines`] (the recovery methods) and nothing heavier; the `nvmdb` command, the peers
//! (SQLite, LMDB, redb, PMDK, RocksDB), the workloads and the experiment reports are the
//! `nvmdb-cli` package.

mod db;
mod kv;

pub use db::{check_engine, CheckReport, Db, DbOptions, LayerFault, TableRows};
pub use engines::EngineOptions;
pub use kv::{
    Key, KeyArg, Range, ReadTable, ReadTx, RetryOptions, Table, WriteTx, MAX_INLINE_BYTES,
    MAX_KEY_BYTES, MAX_TABLE_NAME_BYTES, MAX_VALUE_BYTES,
};
pub use storage::{DbError, Engine, TableSpec, Txn};

pub use engines;
pub use pmem;
pub use storage;

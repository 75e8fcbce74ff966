//! `storage`: what nvmdb engines share (`docs/design.md` §3).
//!
//! The [`engine`] traits every storage and recovery method implements; the superblock and
//! on-media [`format`](mod@format); the [`pages`] store, whose writes go through a
//! `PageWriter`; the [`btree`]; the [`heap`] of fixed-size rows; the [`catalog`]; the key-level
//! [`lock`] manager; engine [`options`] as `key=value` tables; the persistent page allocator
//! ([`alloc`]); undo logs ([`undo`]) and system transactions ([`systxn`], today the one
//! `PageWriter`); event [`counters`] (splits, merges,
//! frees, ...) that crash campaigns report their coverage with; and the [`conformance`] suite.
//!
//! `PageWriter` is not where the recovery methods differ: `wal` and `group` run `inplace` (and
//! so `SysTxn`) unchanged on a volatile copy and hook the region's store stream, `cow` and
//! `lsm` have structures of their own (`docs/design.md` §4, §8).
//!
//! Invariant: every persistent change goes through a `pmem::Region` and, for the structures
//! here, through a `PageWriter`, so the engine's recovery method sees every write.

pub mod alloc;
pub mod btree;
pub mod catalog;
pub mod conformance;
pub mod counters;
pub mod crc;
pub mod engine;
pub mod format;
pub mod heap;
pub mod lock;
pub mod options;
pub mod pages;
pub mod systxn;
pub mod undo;

pub use counters::EngineCounters;
pub use engine::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

//! `storage`: what nvmdb engines share (DESIGN §3).
//!
//! The [`engine`] traits every storage and recovery method implements; the superblock and
//! on-media [`format`]; the [`pages`] store whose writes go through a `PageWriter` routed to the
//! engine's recovery method (the seam that lets one B+tree serve In-Place Updates, WAL and Group
//! Commit, as one Shore-MT served all three of Pelley et al., VLDB 2014, §3.2); the [`btree`]; the
//! [`heap`] of fixed-size rows; the [`catalog`]; the key-level [`lock`] manager; the persistent
//! page allocator ([`alloc`]); undo logs ([`undo`]) and system transactions ([`systxn`]); event
//! [`counters`] (splits, merges, frees, ...) that crash campaigns report their coverage with.
//!
//! Invariant: every persistent change goes through a `pmem::Region` and, for structures shared
//! by engines, through a `PageWriter`, so the recovery method sees every write.

pub mod alloc;
pub mod btree;
pub mod catalog;
pub mod conformance;
pub mod counters;
pub mod engine;
pub mod format;
pub mod heap;
pub mod lock;
pub mod pages;
pub mod peer;
pub mod systxn;
pub mod undo;

pub use counters::EngineCounters;
pub use engine::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

//! `storage`: what nvmdb engines share (DESIGN §3).
//!
//! The [`engine`] traits every storage and recovery method implements; the superblock and
//! on-media format; the page store whose `PageMut` writes are routed to the engine's recovery
//! method (the seam that lets one B+tree serve In-Place Updates, WAL and Group Commit, as one
//! Shore-MT served all three of Pelley et al., VLDB 2014, §3.2); the B+tree; the heap of
//! fixed-size rows; the key-level lock manager; the persistent allocator.

pub mod engine;

pub use engine::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

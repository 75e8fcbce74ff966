//! `nvmdb`: a transactional storage engine and testbed for persistent memory.
//!
//! The library side re-exports what an embedding application needs: open a region with an
//! engine ([`Db`]) and use it through the [`storage::Engine`] trait; [`registry`] opens any
//! engine by name, peers included, for the benchmark tools.

mod db;
pub mod registry;

pub use db::{check_engine, CheckReport, Db, DbOptions, TableRows};
pub use engines::{EngineOptions, Fault};

pub use engines;
pub use pmem;
pub use storage;

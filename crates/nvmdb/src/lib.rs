//! `nvmdb`: a transactional storage engine and testbed for persistent memory.
//!
//! The library side re-exports what an embedding application needs: open a region with an
//! engine ([`registry`]) and use it through the [`storage::Engine`] trait.

pub mod registry;

pub use pmem;
pub use storage;

//! `workloads`: the OLTP workloads nvmdb is measured with (docs/design.md §5), each with its own
//! consistency checker, written once against the [`storage::Engine`] trait.
//!
//! - [`ycsb`]: YCSB core workloads A-F and N-Store's mixes (Cooper et al., SoCC 2010; Arulraj et
//!   al., SIGMOD 2015, §5.1), on the reference generators of [`generators`];
//! - [`tpcb`], [`tpcc`], [`tatp`]: the workloads of Pelley et al. (VLDB 2014, §4, Table 3) and
//!   Wang & Johnson (VLDB 2014, §5);
//! - [`mobibench`]: Mobibench-style SQLite transactions of N 100-byte inserts, updates or
//!   deletes (Kim et al., ASPLOS 2016, §5);
//! - [`by_name`] / [`WorkloadOptions`]: build any of them from flat options (the CLI's way in);
//! - [`testing`]: `MemEngine` and `NoopEngine`, to test workloads and the driver without a real
//!   engine.
//!
//! Invariants every workload keeps: its loader commits at most ~200 rows per transaction; a
//! worker's inputs depend only on `(seed, worker)` (retries re-run the same parameters; YCSB's
//! insert keys come from a counter the workers share, as in YCSB); its checker fails on any
//! database that violates the workload's consistency conditions; an [`Ack`] names something a
//! durable commit guarantees.

use storage::{CommitToken, DbError, Engine};

pub mod generators;
pub mod mobibench;
pub mod registry;
pub mod tatp;
pub mod testing;
pub mod tpcb;
pub mod tpcc;
mod util;
pub mod ycsb;

pub use registry::{by_name, WorkloadOptions, WORKLOAD_NAMES};

/// A row or fact that an acknowledged transaction guarantees, interpreted by the workload that
/// produced it: after a crash, every ack recorded before the cut must still hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ack {
    pub table: storage::TableId,
    pub key: u64,
    /// Workload-defined (a row version, a balance delta, ...).
    pub value: u64,
}

/// One finished transaction, as the worker reports it to the driver.
#[derive(Clone, Debug)]
pub struct TxnDone {
    /// Transaction type (`"update"`, `"new-order"`, ...).
    pub kind: &'static str,
    /// Durability token of the commit; `None` if the transaction rolled back by design
    /// (TPC-C New-Order's 1% invalid item) or was read-only and committed nothing.
    pub token: Option<CommitToken>,
    /// Lock conflicts retried before it committed.
    pub retries: u32,
    /// Facts that must survive a crash once `token` is durable.
    pub acks: Vec<Ack>,
}

/// A workload: schema, loader, per-thread transaction generators, and checkers.
pub trait Workload: Send + Sync {
    fn name(&self) -> &'static str;

    /// Every parameter of the workload as it runs, defaults filled in (for result rows).
    fn resolved_config(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    /// About how many bytes the loaded database takes in an engine's pages (rows and index),
    /// where a workload's size depends on its options enough that a default region could be too
    /// small for it; `None` where the default region always holds it. Sizes default regions of
    /// engines whose page area is fixed when they format.
    fn estimated_bytes(&self) -> Option<u64> {
        None
    }

    /// Creates the tables and loads the initial database. Loaders commit in batches small enough
    /// for any engine's per-transaction limits (at most a few hundred rows per transaction).
    /// `progress(done, total)` is called now and then.
    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError>;

    /// Reattaches to an already-loaded database (after reopening a region): looks tables up.
    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError>;

    /// A deterministic generator for worker `worker` (0-based) seeded with `seed`.
    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker>;

    /// The workload's consistency invariants over the whole database (TPC-B balances, TPC-C
    /// conditions 1-4, YCSB row checksums). `Err` names the first violation.
    fn check(&self, engine: &dyn Engine) -> Result<(), String>;

    /// Checks that every ack still holds after recovery. `Err` names the first lost one.
    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String>;
}

/// Runs transactions of one workload for one worker thread.
pub trait Worker: Send {
    /// Runs one transaction to completion, retrying lock conflicts itself (with the same
    /// parameters) up to a bound; a non-retryable error is returned.
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError>;
}

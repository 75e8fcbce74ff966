//! `workloads`: the OLTP workloads nvmdb is measured with (DESIGN §5), each with its own
//! consistency checker, written once against the [`storage::Engine`] trait.

use storage::{CommitToken, DbError, Engine};

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

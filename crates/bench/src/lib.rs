//! `bench`: the nvmdb benchmark driver (docs/design.md §5): "power runs" as Pelley et al., VLDB
//! 2014, §4 define them — every worker thread generates and executes transactions back to back,
//! without think time — for a warm-up and then a measured period, on any [`storage::Engine`] and
//! any [`workloads::Workload`].
//!
//! What is measured: commits, aborts (lock conflicts retried), throughput, latency percentiles
//! from HDR histograms, and the device statistics of the engine's region per committed
//! transaction (fences, lines flushed, bytes written, modelled delay), which is what the papers
//! plot. The workload's consistency checker runs after the run and its verdict is part of the
//! result.
//!
//! Invariant: a transaction counts (in throughput and in the latency histogram) only once its
//! commit's durability token is durable, and only if that was observed inside the measured
//! period; its latency runs from the start of the transaction to that observation. Group-commit
//! engines acknowledge late, so each worker keeps a bounded queue of commits that are not yet
//! durable and keeps running while they wait ([`worker`]).
//!
//! Layout: [`driver`] (phases, threads, the coordinator), [`worker`] (one thread's loop and its
//! pending-durability queue), [`acks`] (the durable-ack hook the crash tester uses),
//! [`report`] (the result as a JSON object, a CSV row and a human table), [`units`] (parsing
//! `1us`, `64MiB`, `2GB/s`), [`seed`] (per-thread seeds). `examples/overhead.rs` measures the
//! driver's own cost per transaction.

pub mod acks;
pub mod crash;
pub mod driver;
pub mod fuzz;
pub mod kill;
pub mod loaded;
pub mod report;
pub mod seed;
pub mod units;
pub mod wear;
pub mod worker;

pub use acks::{AckLog, DurableSink, DurableTxn};
pub use driver::{
    load, run, BenchError, Hooks, Progress, RunLength, RunOptions, RunResult, Setup, Stage, Status,
};
pub use report::{Checker, LatencySummary, PerTxn, Report};
pub use seed::worker_seed;
pub use wear::{WearLine, WearSummary};

//! Memory persistency, after Pelley's thesis ch. VI–VIII (Pelley, Chen & Wenisch, "Memory
//! Persistency", ISCA 2014). Three thread-safe persistent queues over a `pmem` region, circular
//! buffers with head and tail (§7.1), inserts with the persist-barrier and new-strand
//! annotations of Fig. 7.1, dequeue and wrap-around ([`queue`]): *Copy While Locked*, *Two-Lock
//! Concurrent* (with its volatile insert list) and *Queue Holes* (length + end bit); their
//! recovery and crash tests on the `sim` medium, across wraps ([`crash`]); their native insert
//! rate ([`rate`], the instruction-execution rate of §8.1); and the analyser ([`analyse`]) that
//! replays a `pmem` trace recorded in one total (SC) order and gives every persist its earliest
//! time under strict, epoch and strand persistency (§7.2), with persist coalescing at an
//! atomic-persist size and dependence tracking at a granularity (§8.1). [`report`] turns both
//! into Table 8.1 (steady-state path per insert, §8.2.1); [`spec`] runs the Table 8.1 and
//! Figs. 8.1–8.3 specs and judges their claims (§8.2), [`plot`] draws them; [`cli`] is
//! `nvmdb persistency`.
//!
//! Invariants: a queue recovers exactly a prefix-ordered run of inserted entries from its tail
//! to its head (holes only in *Queue Holes*), containing every insert acknowledged by
//! [`queue::Queue::sync`] unless a dequeue took it, and no entry whose dequeue
//! [`queue::Queue::sync_dequeue`] acknowledged; the analyser never gives a persist a time earlier
//! than any persist it depends on under the chosen model.

pub mod analyse;
pub mod cli;
pub mod crash;
pub mod engines;
pub mod error;
pub mod lock;
pub mod plot;
pub mod queue;
pub mod rate;
pub mod report;
pub mod spec;

pub use analyse::{analyse, Analysis, Config, Model};
pub use error::{Error, Result};
pub use queue::{Design, Fault, Queue, QueueOptions};

//! SSD-aware query optimisation — Pelley's thesis chapter III ("SSD-aware Query Optimization",
//! AMDS 2011) with the background of §2.1 (Table 2.1, the devices) and §2.2 (scans and joins).
//! The question: must a query optimiser know whether data lives on a disk or a Flash SSD?
//!
//! - [`device`]: the block interface — a real file with `O_DIRECT`, modelled devices that
//!   account Table 2.1's disk (10 ms random, 120 MB/s) and SSD (90 µs, 190 MB/s) as seek +
//!   rotation + transfer, and memory; every device counts pages and requests.
//! - [`wisconsin`]: the Wisconsin Benchmark relation (§3.2), 19 tuples to a 4 KiB page, with an
//!   unclustered index on `unique1`.
//! - [`scan`]: relation, index and rowid-sort scans (§2.2.1, §3.3, Fig. 3.1–3.2).
//! - [`pages`]: expected pages touched (Yue & Wong / Yao, §3.3, Fig. 3.3).
//! - [`join`], [`spill`]: sort-merge and hybrid-hash joins under a memory limit, spilling
//!   through the same device, with projectivity a parameter (§2.2.2, §3.4, Fig. 3.4, Table 3.1).
//! - [`optimizer`]: cheapest scan per selectivity and break-even selectivities.
//! - [`report`], [`cli`]: `nvmdb scan` and `nvmdb join`.
//!
//! Invariants: every operator computes an aggregate and materialises nothing; all scans return
//! the same aggregate for one predicate and all joins the same as a nested loop; a join never
//! holds more than its memory limit in accounted buffers and tables; modelled time is
//! accounted, never slept.

pub mod claims;
pub mod cli;
pub mod device;
pub mod error;
pub mod join;
pub mod optimizer;
pub mod pages;
pub mod report;
pub mod scan;
pub mod spill;
pub mod verdict;
pub mod wisconsin;

pub use error::{Error, Result};

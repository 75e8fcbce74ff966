//! `pmem`: the persistent-memory device under nvmdb (docs/design.md §2).
//!
//! A [`Region`] is a byte range addressed by `u64` offsets on one [`Medium`]: `dram`, `shm`,
//! `file` (optionally `msync`-durable), `dax` (real persistent memory via `MAP_SYNC`) or `sim`
//! (the crash simulator). Persist primitives follow Pelley et al., VLDB 2014, §3.2: a *persist
//! barrier* is a [`Region::fence`] after the [`Region::flush`]es it orders. The optional timing
//! model is Pelley §4 / thesis §5.1 ([`timing`]), its CPU-cache read model N-Store §2.2
//! ([`cpucache`]); [`calib`] holds the measurement kernels of
//! `nvmdb calibrate`. The contract in one page: `docs/persistence.md`.
//!
//! Invariants: every persistent store goes through the region API (so statistics, traces and
//! the crash simulator see all of them); 8 aligned bytes are the only unit of failure atomicity;
//! an access outside the region is an assertion failure, never undefined behaviour.

pub mod calib;
pub mod copy;
pub mod cpucache;
pub mod dirty;
pub mod error;
pub mod flush;
pub mod lock;
pub mod region;
pub mod sim;
pub mod stats;
pub mod timing;
pub mod trace;

pub use copy::copy_sparse;
pub use dirty::DirtyLines;
pub use error::{PmemError, Result};
pub use flush::{line_span, CpuFlushSupport, FlushKind, LineSpan, CACHE_LINE};
pub use lock::FileLock;
pub use region::{
    filesystem_name, free_bytes, is_dax, Events, Medium, Region, RegionOptions, StoreGroup,
    StoreObserver, SyncMode, MAX_OBSERVERS,
};
pub use sim::{CrashEvent, CrashPoint, CrashPolicy, MarkAim, Sim};
pub use stats::{thread_id, Stats, ThreadCounters, WearGranularity, WearMap};
pub use timing::{TimingOptions, Tsc};
pub use trace::{TraceEvent, TraceKind};

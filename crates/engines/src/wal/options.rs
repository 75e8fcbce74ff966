//! `wal`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key, with
//! its default, parser and help. Pelley et al. VLDB 2014 §3.2 (`page_flush`, `flusher`,
//! `max_dirty_pages`), Aether (Johnson et al. VLDB 2010, `log_insert`, `log_force`), Wang &
//! Johnson VLDB 2014 (`log`, `cache`).

use super::{Cache, Flusher, LogForce, LogInsert, LogLayout, PageFlush, PoolReads};
use crate::EngineOptions;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use storage::options::{Bytes, OptionValue};

/// The shared keys `wal` takes (`crate::EngineOptions`'s).
pub const SHARED_KEYS: &[&str] = &[
    "undo_pages",
    "sys_undo_pages",
    "node_capacity",
    "fault",
    "io",
    "retry_keeps_age",
    "checksums",
];

storage::engine_options! {
    /// `wal`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        /// Default 64 MiB; left unset on the command line it is [`super::default_log_bytes`]
        /// ([`finish`]): 64 MiB, raised for `N` logs so each has room for every worker's
        /// largest operation.
        key log_bytes: u64 = super::DEFAULT_LOG_BYTES => Bytes,
            "bytes of the log area in NVRAM, shared by the N logs (fixed at format time; \
             unset: 64 MiB, more for N logs)";
        key max_dirty_pages: u64 = 16384,
            "checkpoint past this many dirty pages (0: at half the log); with flusher=pelley, \
             the dirty pages kept (Pelley's Fig. 1 knob)";
        key flusher_lag: u64 = 8000,
            "flusher=pelley: operations wait while the flusher is more than this many pages \
             behind max_dirty_pages, so its write-back bandwidth bounds throughput (0: never \
             wait)";
        key page_flush: PageFlush = PageFlush::Paper,
            "page write-back: Pelley's persist_page (paper), or dirty lines in place (direct)";
        key flusher: Flusher = Flusher::Checkpoint,
            "fuzzy checkpoint of every dirty page over the budget (ours), or Pelley's \
             oldest-first flusher";
        key log_insert: LogInsert = LogInsert::Consolidated,
            "record insertion: Aether's consolidation array, decoupled fill alone, or one lock";
        key log_force: LogForce = LogForce::Pipelined,
            "central log: commits forced by a flush daemon (Aether's pipelining) or inline";
        key log: LogLayout = LogLayout::Central,
            "one central log, or N logs partitioned by transaction or page (Wang & Johnson)";
        key cache: Cache = Cache::Volatile,
            "distributed logs: volatile caches (passive group commit) or durable (eADR)";
        key pool_reads: PoolReads = PoolReads::Dram,
            "buffer-pool reads: free (dram, Pelley's), or charged as NVM reads through the \
             device's CPU-cache model (nvm, N-Store's all-NVM testbed)";
    }
}

/// Fills the defaults that depend on other options: `log_bytes`, when `given` lacks it, grows
/// with the number of logs and workers ([`super::default_log_bytes`]).
pub fn finish(o: &mut EngineOptions, given: &BTreeMap<String, String>) {
    if !given.contains_key("log_bytes") {
        o.wal.log_bytes = super::default_log_bytes(o);
    }
}

impl OptionValue for PageFlush {
    const ACCEPTS: &'static str = "paper or direct";
    fn parse_option(text: &str) -> Option<Self> {
        PageFlush::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            PageFlush::Paper => "paper".into(),
            PageFlush::Direct => "direct".into(),
        })
    }
}

impl OptionValue for PoolReads {
    const ACCEPTS: &'static str = "dram or nvm";
    fn parse_option(text: &str) -> Option<Self> {
        PoolReads::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            PoolReads::Dram => "dram".into(),
            PoolReads::Nvm => "nvm".into(),
        })
    }
}

impl OptionValue for Flusher {
    const ACCEPTS: &'static str = "checkpoint or pelley";
    fn parse_option(text: &str) -> Option<Self> {
        Flusher::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            Flusher::Checkpoint => "checkpoint".into(),
            Flusher::Pelley => "pelley".into(),
        })
    }
}

impl OptionValue for LogInsert {
    const ACCEPTS: &'static str = "consolidated, aether or locked";
    fn parse_option(text: &str) -> Option<Self> {
        LogInsert::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            LogInsert::Consolidated => "consolidated".into(),
            LogInsert::Aether => "aether".into(),
            LogInsert::Locked => "locked".into(),
        })
    }
}

impl OptionValue for LogForce {
    const ACCEPTS: &'static str = "pipelined or inline";
    fn parse_option(text: &str) -> Option<Self> {
        LogForce::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            LogForce::Pipelined => "pipelined".into(),
            LogForce::Inline => "inline".into(),
        })
    }
}

impl OptionValue for LogLayout {
    const ACCEPTS: &'static str = "central, txn:N or page:N (N from 1 to 64)";
    fn parse_option(text: &str) -> Option<Self> {
        LogLayout::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl OptionValue for Cache {
    const ACCEPTS: &'static str = "volatile or durable";
    fn parse_option(text: &str) -> Option<Self> {
        Cache::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(self.name().to_string())
    }
}

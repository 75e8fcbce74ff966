//! `group`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key,
//! with its default, parser and help. Pelley et al. VLDB 2014 §3.2 (batch period); thesis
//! §4.3.2, Table 4.2 (persist threads).

use serde::{Deserialize, Serialize};
use storage::options::Bytes;

/// The shared keys `group` takes (`crate::EngineOptions`'s).
pub const SHARED_KEYS: &[&str] =
    &["undo_pages", "sys_undo_pages", "node_capacity", "fault", "retry_keeps_age", "checksums"];

storage::engine_options! {
    /// `group`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        key batch_period_ms: u64 = 20, "longest a batch stays open (Pelley's batch period)";
        key persist_threads: u32 = 0,
            "threads that share a batch persist (thesis Table 4.2); 0: one per worker";
        key staging_bytes: u64 = 32 << 20 => Bytes,
            "bytes of staged (dirty) lines one batch may hold: the batch log's capacity";
        key batch_txns: u64 = 0, "close a batch after this many commits too (0: by time and size)";
    }
}

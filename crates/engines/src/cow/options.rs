//! `cow`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key, with
//! its default, parser and help. Arulraj et al. SIGMOD 2015 §4.2 (N-Store's `gc_interval`).

use serde::{Deserialize, Serialize};

/// The shared keys `cow` takes (`crate::EngineOptions`'s; no undo logs).
pub const SHARED_KEYS: &[&str] = &["node_capacity", "fault", "io", "checksums"];

storage::engine_options! {
    /// `cow`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        key group_commit_ms: u64 = 0,
            "commits within this interval share one barrier and master swap (N-Store's \
             gc_interval); 0: every commit persists alone";
    }
}

//! `inplace`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key,
//! with its default, parser and help (Pelley et al. VLDB 2014 §3.2 for `protocol`).

use super::Protocol;
use serde::{Deserialize, Serialize};
use storage::options::OptionValue;

/// The shared keys `inplace` takes (`crate::EngineOptions`'s).
pub const SHARED_KEYS: &[&str] =
    &["undo_pages", "sys_undo_pages", "node_capacity", "fault", "retry_keeps_age", "checksums"];

storage::engine_options! {
    /// `inplace`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        key protocol: Protocol = Protocol::Lean,
            "how page updates persist: ours (lean), or Pelley's persist_wal + persist_page";
        key index_hints: bool = false,
            "ours: point reads and writes try a per-worker DRAM hint of the key's slot (checked against the slot) before the B+tree; off (the default) searches the index on every access, as the papers' engines do";
    }
}

impl OptionValue for Protocol {
    const ACCEPTS: &'static str = "lean or pelley";
    fn parse_option(text: &str) -> Option<Self> {
        Protocol::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            Protocol::Lean => "lean".into(),
            Protocol::Pelley => "pelley".into(),
        })
    }
}

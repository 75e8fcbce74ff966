//! `cow`'s options (`docs/design.md` §4, "Options"): one table row per `--engine-opt` key, with
//! its default, parser and help. Arulraj et al. SIGMOD 2015 §4.2 (N-Store's `gc_interval`;
//! NVM-CoW's non-volatile tuple pointers, `layout`).

use serde::{Deserialize, Serialize};
use storage::options::OptionValue;

/// The shared keys `cow` takes (`crate::EngineOptions`'s; no undo logs).
pub const SHARED_KEYS: &[&str] = &["node_capacity", "fault", "io", "checksums"];

/// Where a table's tuples live (fixed at format time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TupleLayout {
    /// `pages` when formatting (until `pointers` has had the campaigns a default needs); a
    /// region keeps the layout it was formatted with.
    #[default]
    Auto,
    /// NVM-CoW (§4.2): tuples allocated apart from the tree, whose leaves hold non-volatile
    /// pointers to them; a transaction copies the tree nodes holding pointers.
    Pointers,
    /// CoW (§3.2): the tuples inside the leaf pages; a transaction copies whole leaves.
    Pages,
}

impl OptionValue for TupleLayout {
    const ACCEPTS: &'static str = "auto, pointers or pages";
    fn parse_option(text: &str) -> Option<Self> {
        match text {
            "auto" => Some(TupleLayout::Auto),
            "pointers" => Some(TupleLayout::Pointers),
            "pages" => Some(TupleLayout::Pages),
            _ => None,
        }
    }
    fn show_option(&self) -> Option<String> {
        Some(
            match self {
                TupleLayout::Auto => "auto",
                TupleLayout::Pointers => "pointers",
                TupleLayout::Pages => "pages",
            }
            .into(),
        )
    }
}

storage::engine_options! {
    /// `cow`'s own options.
    #[derive(Serialize, Deserialize)]
    #[serde(default)]
    pub struct Options {
        key group_commit_ms: u64 = 0,
            "commits within this interval share one barrier and master swap (N-Store's \
             gc_interval); 0: every commit persists alone";
        key pipeline: bool = true,
            "with group_commit_ms=0: a commit hands the writer slot on once its version is \
             written, then flushes it and swaps the master in version order outside the slot \
             (ours); off: the writer holds the slot until its commit is durable (LMDB's and \
             N-Store's CoW)";
        key layout: TupleLayout = TupleLayout::Auto,
            "tuples apart from the tree, its leaves holding non-volatile pointers (pointers: \
             NVM-CoW), or inside the leaf pages (pages: CoW); auto: pages, or the region's own \
             layout on reopen; fixed at format time";
        key fs_cache_pages: u64 = 512,
            "io=fs: node pages each worker keeps in a DRAM page cache in front of pread (N-Store's \
             CoW keeps 1,024 pages of 4 KiB: 512 of ours); 0: every node read preads";
    }
}

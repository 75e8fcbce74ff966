//! `experiments`: the papers' figures and tables as code (docs/design.md §1 "experiment specs
//! (TOML) -> results (JSONL) -> report (plots, HTML)", §6 `nvmdb sweep` / `nvmdb report`).
//!
//! - [`spec`]: a TOML spec per figure or table (Pelley et al., VLDB 2014, Fig. 1, 3, 5, 6,
//!   Table 6; Pelley's thesis Table 4.2, Fig. 5.6, 5.7): base bench flags, a grid, repetitions,
//!   plots, and the paper's claims with their source;
//! - [`grid`]: deterministic expansion into points, `--quick`, `--shard i/n`;
//! - [`runner`] and [`sweep`]: each point as a fresh `nvmdb bench --json` process, resumable;
//! - [`results`]: `results.jsonl` (one synced line per run) and `nvmdb merge`;
//! - [`data`], [`analysis`]: repetitions to statistics, claims to verdicts (break-even points
//!   by linear interpolation); [`latency_axis`]: break-evens on a latency axis ÷ the time a
//!   transaction takes;
//! - [`plot`], [`report`]: SVG/PNG figures, `index.html`, `report.md`, `verdicts.json`;
//! - [`verdict`]: issue 38's verdict rules, shared with `dcpower`, `queryopt` and `persistency`.
//!
//! Invariants: the same spec expands to the same points on every machine (so shards partition
//! the grid); a run counts as done only once its row is synced to `results.jsonl` (so a killed
//! sweep resumes where it stopped); a verdict never mixes runs of different settings.

pub mod analysis;
pub mod data;
pub mod grid;
pub mod latency_axis;
pub mod plot;
pub mod pngtext;
pub mod provenance;
pub mod report;
pub mod results;
pub mod runner;
pub mod spec;
pub mod sweep;
pub mod units;
pub mod verdict;

pub use grid::{ExpandOptions, Point, Shard};
pub use results::{Row, Status};
pub use runner::BenchCommand;
pub use spec::Spec;

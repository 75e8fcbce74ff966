//! `sqlite-nvwal`: NVWAL — SQLite's write-ahead log on NVRAM (Kim, Kim, Baek, Nam, Won, ASPLOS
//! 2016) — as a SQLite VFS on a `pmem` region, and the engine `sqlite-nvwal` that runs the
//! `sqlite` peer's SQL through it. The `sqlite` peer itself (stock SQLite, NVWAL's baseline,
//! [`sqlite`]) lives here too, beside the engine that wraps it; `peers` re-exports it.
//!
//! - §3.2 differential logging: a frame whose page already has a frame in the log is stored as
//!   the changed byte ranges against that frame ([`layout::diff_ranges`]: up to
//!   [`layout::MAX_RANGES`] with `diff=on`, the paper's single range with `diff=range`); reads
//!   of the WAL file give back full frames byte-exactly, so SQLite's recovery and checkpoints run
//!   unchanged.
//! - §3.3 user-level heap: log records live in 8 KiB blocks with free / pending / in-use states,
//!   linked from the region header (Algorithm 1 lines 4-14), reclaimed at WAL reset and after a
//!   crash (§4.3). `heap=per-frame` allocates a block per frame (the paper's non-UH variants).
//! - §4.1 lazy synchronisation (`nvwal=ls`): records are copied without flushes; at the commit
//!   frame's sync every line of the transaction's records is flushed, one barrier, then the
//!   commit mark is set and persisted. `nvwal=e` flushes and fences after every record.
//!   §4.2 asynchronous (checksum) commit (`nvwal=cs`): only the commit mark and a crc32c of the
//!   transaction's records are persisted; recovery drops a commit whose checksum does not match.
//!   `cs` commits are acknowledged asynchronously: a commit's token is durable once a later
//!   [`storage::Engine::wait_durable`] (or a checkpoint) has flushed its records.
//!
//! **Latency model** (§5.3, Fig. 7): the paper charges its NVRAM write latency per cache line
//! written back and a fixed 1 µs per persist barrier. The engine charges nothing itself: every
//! flush and fence goes through the region, whose timing model charges `--write-latency` per
//! line flushed (`pmem::TimingOptions::write_line_ns`) and `--persist-latency` per fence, so
//! differential logging's fewer lines cost less, as in the paper.
//!
//! **Crash images hold the whole database.** The crash tester cuts images of one region, so the
//! database file lives in the region too (through the same VFS, persisted at its `xSync`):
//! unlike a file on the real file system, it is rolled back to the crash point with the log.
//! Rollback journals (used once, while a new database switches to WAL mode) are volatile; a
//! region whose creation did not finish is formatted again on open.
//!
//! Recovery invariant: after open, the WAL SQLite reads is exactly the frames of every
//! transaction whose commit mark was persisted (and, in `cs` mode, whose checksum matches), and
//! every heap block is either in the log's list or free.

pub mod engine;
pub mod layout;
pub mod sqlite;
pub mod store;
pub mod vfs;

pub use engine::NvwalEngine;
use storage::{DbError, Result};

/// The engine's name in `nvmdb`.
pub const ENGINE_NAME: &str = "sqlite-nvwal";

/// How a transaction's records become durable (paper §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// `ls`: lazy synchronisation (Algorithm 1).
    Lazy,
    /// `e`: eager: flush + fence after every record.
    Eager,
    /// `cs`: checksum (asynchronous) commit.
    Checksum,
}

/// How log space is allocated (paper §3.3, §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeapMode {
    /// `user`: records packed into pre-allocated blocks (UH).
    User,
    /// `per-frame`: one block allocation (pending, link, in use) per record.
    PerFrame,
}

/// Differential logging (paper §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffMode {
    /// `off`: every frame is a whole page.
    Off,
    /// `range`: the paper's one range (clean bytes before and after the dirty portion cut).
    Range,
    /// `on`: several ranges, split at unchanged gaps longer than a range-table entry.
    On,
}

/// Test-only protocol violations, to show the crash tester catches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Set the commit mark without flushing it (acknowledged commits may vanish).
    SkipCommitPersist,
    /// Do not flush the transaction's records before the commit mark.
    SkipFrameFlush,
}

/// Options of the engine; defaults in [`Default`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvwalOptions {
    pub sync: SyncMode,
    pub diff: DiffMode,
    pub heap: HeapMode,
    /// Heap block size (fixed at format time).
    pub block_bytes: u64,
    /// Bytes of log blocks (fixed at format time; `None`: half the region, 4-64 MiB).
    pub log_bytes: Option<u64>,
    pub fault: Option<Fault>,
}

impl Default for NvwalOptions {
    fn default() -> Self {
        NvwalOptions {
            sync: SyncMode::Lazy,
            diff: DiffMode::On,
            heap: HeapMode::User,
            block_bytes: 8192,
            log_bytes: None,
            fault: None,
        }
    }
}

/// `--engine-opt` keys this engine takes (beyond the peers' `cache_bytes`, `writer_wait_ms`).
pub const OPTION_KEYS: &[&str] =
    &["nvwal", "diff", "heap", "block_bytes", "log_bytes", "fault", "cache_bytes"];

impl NvwalOptions {
    pub fn validate(&self) -> Result<()> {
        if !(4096..=1 << 20).contains(&self.block_bytes) || !self.block_bytes.is_multiple_of(64) {
            return Err(DbError::Invalid(format!(
                "sqlite-nvwal: block_bytes must be a multiple of 64 in 4096..=1048576, not {}",
                self.block_bytes
            )));
        }
        Ok(())
    }

    /// Applies one `key=value` engine option.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad =
            |what: &str| Err(DbError::Invalid(format!("sqlite-nvwal: {key}={value}: {what}")));
        match key {
            "nvwal" => {
                self.sync = match value {
                    "ls" => SyncMode::Lazy,
                    "e" => SyncMode::Eager,
                    "cs" => SyncMode::Checksum,
                    _ => return bad("must be ls, e or cs"),
                }
            }
            "diff" => {
                self.diff = match value {
                    "on" => DiffMode::On,
                    "range" => DiffMode::Range,
                    "off" => DiffMode::Off,
                    _ => return bad("must be on, range or off"),
                }
            }
            "heap" => {
                self.heap = match value {
                    "user" => HeapMode::User,
                    "per-frame" => HeapMode::PerFrame,
                    _ => return bad("must be user or per-frame"),
                }
            }
            "block_bytes" => match value.parse() {
                Ok(v) => self.block_bytes = v,
                Err(_) => return bad("not a number"),
            },
            "log_bytes" => match value.parse() {
                Ok(v) => self.log_bytes = Some(v),
                Err(_) => return bad("not a number of bytes"),
            },
            "fault" => {
                self.fault = match value {
                    "skip-commit-persist" => Some(Fault::SkipCommitPersist),
                    "skip-frame-flush" => Some(Fault::SkipFrameFlush),
                    _ => return bad("faults: skip-commit-persist, skip-frame-flush"),
                }
            }
            _ => return bad(&format!("unknown option (known: {})", OPTION_KEYS.join(", "))),
        }
        Ok(())
    }

    /// Every option as `--engine-opt` spells it, defaults included (`log_bytes` only when given:
    /// otherwise it follows the region's size; `fault` only when set).
    pub fn resolved(&self) -> Vec<(String, String)> {
        let sync = match self.sync {
            SyncMode::Lazy => "ls",
            SyncMode::Eager => "e",
            SyncMode::Checksum => "cs",
        };
        let diff = match self.diff {
            DiffMode::Off => "off",
            DiffMode::Range => "range",
            DiffMode::On => "on",
        };
        let heap = match self.heap {
            HeapMode::User => "user",
            HeapMode::PerFrame => "per-frame",
        };
        let mut out = vec![
            ("nvwal".to_string(), sync.to_string()),
            ("diff".to_string(), diff.to_string()),
            ("heap".to_string(), heap.to_string()),
            ("block_bytes".to_string(), self.block_bytes.to_string()),
        ];
        if let Some(bytes) = self.log_bytes {
            out.push(("log_bytes".to_string(), bytes.to_string()));
        }
        out
    }

    /// The paper's name of this variant (`UH+LS+Diff`, ...); `diff=on`, ours, is
    /// `Diff(ranges)`.
    pub fn variant(&self) -> String {
        let mut parts = Vec::new();
        if self.heap == HeapMode::User {
            parts.push("UH");
        }
        parts.push(match self.sync {
            SyncMode::Lazy => "LS",
            SyncMode::Eager => "E",
            SyncMode::Checksum => "CS",
        });
        match self.diff {
            DiffMode::Off => {}
            DiffMode::Range => parts.push("Diff"),
            DiffMode::On => parts.push("Diff(ranges)"),
        }
        parts.join("+")
    }
}

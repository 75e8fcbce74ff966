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
use storage::options::{OptionSet, OptionValue};
use storage::{DbError, Result};

/// The engine's name in `nvmdb`.
pub const ENGINE_NAME: &str = "sqlite-nvwal";

/// One line for `nvmdb bench --list` and `--help`.
pub const ABOUT: &str = "NVWAL (Kim et al. ASPLOS 2016): SQLite with its WAL as differential \
                         records in NVRAM (VFS on the region); --engine-opt nvwal=ls|e|cs \
                         diff=on|range|off heap=user|per-frame";

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

macro_rules! spelled {
    ($t:ty, $accepts:literal, $($variant:ident = $name:literal),*) => {
        impl OptionValue for $t {
            const ACCEPTS: &'static str = $accepts;
            fn parse_option(text: &str) -> Option<Self> {
                match text {
                    $($name => Some(<$t>::$variant),)*
                    _ => None,
                }
            }
            fn show_option(&self) -> Option<String> {
                Some(match self { $(<$t>::$variant => $name,)* }.to_string())
            }
        }
    };
}

spelled!(SyncMode, "ls, e or cs", Lazy = "ls", Eager = "e", Checksum = "cs");
spelled!(DiffMode, "on, range or off", On = "on", Range = "range", Off = "off");
spelled!(HeapMode, "user or per-frame", User = "user", PerFrame = "per-frame");
spelled!(
    Fault,
    "skip-commit-persist or skip-frame-flush",
    SkipCommitPersist = "skip-commit-persist",
    SkipFrameFlush = "skip-frame-flush"
);

storage::engine_options! {
    /// Options of the engine, one row per `--engine-opt` key (`docs/design.md` §4, "Options").
    #[derive(Eq)]
    pub struct NvwalOptions {
        key sync as nvwal: SyncMode = SyncMode::Lazy,
            "how records become durable: lazy sync (ls, §4.1), eager (e), checksum commit \
             (cs, §4.2)";
        key diff: DiffMode = DiffMode::On,
            "differential logging (§3.2): several ranges (on), the paper's one range, or off";
        key heap: HeapMode = HeapMode::User,
            "log space (§3.3): records packed into blocks (user), or a block per frame";
        key block_bytes: u64 = 8192,
            "heap block size, a multiple of 64 in 4096..=1048576 (fixed at format time)";
        key log_bytes: Option<u64> = None => storage::options::Bytes,
            "bytes of log blocks (fixed at format time; unset: half the region, 4-64 MiB)";
        key cache_bytes: Option<u64> = None,
            "SQLite's page cache per connection (unset: the sqlite peer's default)";
        key fault: Option<Fault> = None, "a deliberate protocol violation (tests only)";
    }
}

/// `--engine-opt` keys this engine takes.
pub fn option_keys() -> Vec<&'static str> {
    NvwalOptions::default().options().iter().map(|i| i.key).collect()
}

/// How densely the engine stores rows, against an `inplace` database of the same rows (for
/// default region sizes): SQLite's B-tree cells in 4 KiB pages held 1,000,000 rows of 1,016
/// bytes in more than 1.2 GiB, so a workload needs twice the room.
pub const ROOM_FACTOR: u64 = 2;

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
        match OptionSet::set(self, key, value) {
            Ok(true) => Ok(()),
            Ok(false) => Err(DbError::Invalid(format!(
                "sqlite-nvwal: {key}={value}: unknown option (known: {})",
                option_keys().join(", ")
            ))),
            Err(why) => Err(DbError::Invalid(format!("sqlite-nvwal: {why}"))),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 34): `log_bytes=8MiB` sized the default region (the CLI read it with
    /// units) but the engine refused it ("not a number of bytes"); both now read one parser.
    #[test]
    fn log_bytes_takes_the_units_region_sizing_takes() {
        let mut o = NvwalOptions::default();
        o.set("log_bytes", "8MiB").unwrap();
        assert_eq!(o.log_bytes, Some(8 << 20));
        o.set("nvwal", "cs").unwrap();
        assert_eq!(o.sync, SyncMode::Checksum);
        let listed: Vec<_> = o.resolved().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            listed,
            ["nvwal=cs", "diff=on", "heap=user", "block_bytes=8192", "log_bytes=8388608"]
        );
        let err = o.set("diff", "some").unwrap_err().to_string();
        assert!(err.contains("sqlite-nvwal: diff must be on, range or off, not `some`"), "{err}");
        let err = o.set("nope", "1").unwrap_err().to_string();
        assert!(err.contains("unknown option (known: nvwal, diff, heap,"), "{err}");
    }
}

//! `peers`: established storage engines behind nvmdb's [`Engine`] trait, for side-by-side
//! comparison (`docs/design.md` §4). A crate of its own so that building nvmdb's engines never
//! compiles these. `sqlite`, also the NVWAL baseline (Kim et al., ASPLOS 2016), lives with NVWAL
//! in `sqlite-nvwal` (re-exported here as [`sqlite`]), so that NVWAL links no other peer; what
//! the peers share is `peer-common`.
//!
//! | peer | library | tables | writers |
//! |---|---|---|---|
//! | `sqlite` | SQLite (bundled) via `rusqlite` | SQL table: `INTEGER PRIMARY KEY`, `BLOB` | one |
//! | `lmdb` | LMDB via `heed` | named database, big-endian `u64` keys | one |
//! | `redb` | redb | redb table `u64` → bytes | one |
//! | `pmemobj` | PMDK `libpmemobj` 1.12 (feature `pmemobj`) | our B+tree in the pool | one |
//! | `rocksdb` | RocksDB 7.x `TransactionDB` (feature `rocksdb`) | column family | key locks |
//!
//! `pmemobj` and `rocksdb` link the system libraries (Debian `libpmemobj-dev`,
//! `librocksdb-dev`) through hand-written declarations; both features are on by default.
//!
//! **Concurrency limits.** SQLite, LMDB, redb and pmemobj have one writer. Their transactions start
//! lazily at their first operation: reads see the last committed snapshot and never wait; the
//! first write waits (at most [`PeerOptions::writer_wait`]) for the engine's single writer slot.
//! If another writer committed after this transaction's first read, the write fails with a
//! retryable [`DbError::Peer`], which keeps the outcome serialisable (the trait's key-level 2PL
//! would instead have aborted one of the two). pmemobj has no snapshots: its readers read the
//! committed state in place (waiting only while a commit is being applied) and fail retryably
//! if a commit lands between two of their reads. RocksDB runs key-level pessimistic locking with no
//! wait: a lock conflict is a retryable error at once, as in nvmdb's own engines.
//!
//! **Durability.** [`PeerDurability::Durable`] makes every commit durable before `commit`
//! returns ([`CommitToken::DURABLE`]). [`PeerDurability::Relaxed`] acknowledges earlier; its
//! tokens count commits, and [`Engine::wait_durable`] forces a sync. What `Relaxed` gives up:
//!
//! | peer | `Durable` | `Relaxed` | a power loss in `Relaxed` mode loses |
//! |---|---|---|---|
//! | `sqlite` | `synchronous=FULL` | `synchronous=NORMAL` | commits since the last checkpoint |
//! | `lmdb` | fsync at every commit | `MDB_NOSYNC` | recent commits, maybe the database (1) |
//! | `redb` | `Durability::Immediate` | `Durability::None` | commits since the last durable (2) |
//! | `pmemobj` | PMDK commit | the same (PMDK has no asynchronous commit) | nothing |
//! | `rocksdb` | WAL with `sync=true` | WAL with `sync=false` | recent commits |
//!
//! In every `Relaxed` peer but redb a *process* crash loses nothing: the commit is in the OS page
//! cache. SQLite in WAL mode with `NORMAL` fsyncs the WAL at each checkpoint and stays consistent;
//! RocksDB's WAL recovery stays consistent. (1) LMDB without `MDB_WRITEMAP` stays consistent only
//! if the file system keeps the order of writes. (2) redb's `None` keeps the commit in process
//! memory until the next `Immediate` commit (which `wait_durable` and `shutdown` run), so a
//! process crash loses it too, and frees no pages until then; the file stays consistent.
//!
//! `region()` is `None` for every peer (they do not run on a pmem region); `recovery_report()`
//! says what the peer did on open and how long opening took; `check_integrity()` runs the peer's
//! own checker where it has one and checks every row's size.

use std::path::Path;
use storage::conformance::Writers;
use storage::{DbError, Engine};

pub mod lmdb;
#[cfg(feature = "pmemobj")]
pub mod pmemobj;
pub mod redb;
#[cfg(feature = "rocksdb")]
pub mod rocksdb;
pub use peer_common::{PeerDurability, PeerOptions};
/// The SQLite peer lives with SQLite's other engine, NVWAL, in `sqlite-nvwal`.
pub use sqlite_nvwal::sqlite;

/// Names accepted by [`open`].
pub const PEERS: &[&str] = &[
    "sqlite",
    "lmdb",
    "redb",
    #[cfg(feature = "pmemobj")]
    "pmemobj",
    #[cfg(feature = "rocksdb")]
    "rocksdb",
];

/// What a peer is, for reports: how it orders writers and a one-line summary to print beside
/// its numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    pub name: &'static str,
    pub writers: Writers,
    pub summary: &'static str,
}

/// Facts about peer `name` (any peer this crate knows, built or not).
pub fn info(name: &str) -> Option<PeerInfo> {
    let (name, writers, summary) = match name {
        "sqlite" => ("sqlite", Writers::One, "SQLite, WAL journal: one writer, readers never wait"),
        "lmdb" => {
            ("lmdb", Writers::One, "LMDB, copy-on-write B+tree: one writer, readers never wait")
        }
        "redb" => {
            ("redb", Writers::One, "redb, copy-on-write B-tree: one writer, readers never wait")
        }
        "pmemobj" => (
            "pmemobj",
            Writers::One,
            "PMDK libpmemobj, undo-log transactions on a B+tree: one writer, readers never wait",
        ),
        "rocksdb" => (
            "rocksdb",
            Writers::KeyLocks,
            "RocksDB TransactionDB, LSM + WAL: key locks, no wait (conflicts retry)",
        ),
        _ => return None,
    };
    Some(PeerInfo { name, writers, summary })
}

/// Opens (creating if needed) peer `name` in directory `dir` with default options.
pub fn open(
    name: &str,
    dir: &Path,
    durability: PeerDurability,
    workers: usize,
) -> Result<Box<dyn Engine>, DbError> {
    open_with(name, dir, &PeerOptions { durability, workers, ..PeerOptions::default() })
}

/// Opens (creating if needed) peer `name` in directory `dir`. The directory holds one peer's
/// files; opening it as another peer is a [`DbError::Format`] error. One engine at a time: while
/// an engine is open (until it is dropped) the directory's `nvmdb.lock` is locked, and another
/// open, in this process or another, fails with a [`DbError::Peer`] naming the holder.
pub fn open_with(
    name: &str,
    dir: &Path,
    options: &PeerOptions,
) -> Result<Box<dyn Engine>, DbError> {
    type OpenFn = fn(&Path, &PeerOptions) -> Result<Box<dyn Engine>, DbError>;
    let open_peer: OpenFn = match name {
        "sqlite" => |d, o| Ok(Box::new(sqlite::SqliteEngine::open(d, o)?)),
        "lmdb" => |d, o| Ok(Box::new(lmdb::LmdbEngine::open(d, o)?)),
        "redb" => |d, o| Ok(Box::new(redb::RedbEngine::open(d, o)?)),
        #[cfg(feature = "pmemobj")]
        "pmemobj" => |d, o| Ok(Box::new(pmemobj::PmemobjEngine::open(d, o)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => |d, o| Ok(Box::new(rocksdb::RocksEngine::open(d, o)?)),
        _ => {
            let hint = if name == "rocksdb" || name == "pmemobj" {
                format!("; rebuild with `--features peers/{name}`")
            } else {
                String::new()
            };
            return Err(DbError::Invalid(format!(
                "no peer engine `{name}` in this build (peers: {}){hint}",
                PEERS.join(", ")
            )));
        }
    };
    if options.workers == 0 {
        return Err(DbError::Invalid("peers need at least one worker".into()));
    }
    // Each peer's `open` claims (and locks) the directory itself.
    open_peer(dir, options)
}

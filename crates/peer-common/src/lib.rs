//! `peer-common`: what the peer engines share (the `peers` crate's and `sqlite-nvwal`'s: engines
//! that wrap an existing library rather than run on a `pmem` region; `docs/design.md` §1, §4):
//! their options ([`PeerOptions`]), the
//! in-memory catalog, the single-writer gate with its snapshot check,
//! the commit clock behind `Relaxed` durability tokens, worker slots, and the directory claim
//! (an exclusive lock held for the engine's lifetime).
//!
//! Invariant of the writer gate: a transaction that read before it wrote may write only if no
//! other writer committed since before its first read, so one-writer peers stay serialisable.

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use storage::engine::{check_row, check_update};
use storage::{CommitToken, DbError, IntegrityReport, Result, TableId, TableSpec};
/// What [`peer_engine_methods!`] names, whatever its users import.
#[doc(hidden)]
pub mod __reexport {
    pub use pmem::Region;
    pub use storage::{CommitToken, RecoveryReport, Result, TableId, TableSpec};
}
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The [`Engine`](storage::Engine) methods every peer answers alike, written once: table lookups
/// from its `catalog` ([`Catalog`]), the `report` of its open, no `pmem` region, and
/// durability from its `clock` ([`CommitClock`]; `durable_by: f` names the method that forces
/// a sync) or, with `always_durable`, a peer whose every commit is durable when it returns.
/// Use inside `impl Engine for ...`.
#[macro_export]
macro_rules! peer_engine_methods {
    (durable_by: $sync:ident) => {
        $crate::peer_engine_methods!(@common);
        fn is_durable(&self, token: $crate::__reexport::CommitToken) -> bool {
            self.clock.is_durable(token)
        }
        fn wait_durable(&self, token: $crate::__reexport::CommitToken) -> $crate::__reexport::Result<()> {
            self.clock.wait_durable(token, || self.$sync())
        }
    };
    (always_durable) => {
        $crate::peer_engine_methods!(@common);
        fn is_durable(&self, _token: $crate::__reexport::CommitToken) -> bool {
            true
        }
        fn wait_durable(&self, _token: $crate::__reexport::CommitToken) -> $crate::__reexport::Result<()> {
            Ok(())
        }
    };
    (@common) => {
        fn table(&self, name: &str) -> Option<$crate::__reexport::TableId> {
            self.catalog.id(name)
        }
        fn tables(&self) -> Vec<$crate::__reexport::TableSpec> {
            self.catalog.specs()
        }
        fn recovery_report(&self) -> $crate::__reexport::RecoveryReport {
            self.report.clone()
        }
        fn region(&self) -> Option<&$crate::__reexport::Region> {
            None
        }
    };
}

/// Whether a commit is durable when it returns (the `peers` crate docs say what `Relaxed`
/// gives up).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PeerDurability {
    #[default]
    Durable,
    Relaxed,
}

/// Everything a peer is opened with; defaults live in [`PeerOptions::default`].
#[derive(Clone, Debug)]
pub struct PeerOptions {
    pub durability: PeerDurability,
    /// Worker threads (`begin(worker)` takes `0..workers`).
    pub workers: usize,
    /// Longest a write waits for the single writer slot (SQLite, LMDB, redb) before failing with
    /// a retryable error; also SQLite's busy timeout.
    pub writer_wait: Duration,
    /// Page cache: SQLite's, split across its connections; redb's; RocksDB's block cache. LMDB
    /// uses the OS page cache.
    pub cache_bytes: u64,
    /// LMDB's map size: the largest the database may grow.
    pub lmdb_map_bytes: u64,
    /// SQLite VFS to open connections with (`None`: the default VFS). The seam for NVWAL.
    pub sqlite_vfs: Option<String>,
    /// Size of a new PMDK pool; fixed once made. PMDK writes the whole file when it makes the
    /// pool, so this much disk (or tmpfs memory) is used at once.
    pub pmemobj_pool_bytes: u64,
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions {
            durability: PeerDurability::Durable,
            workers: 1,
            writer_wait: Duration::from_secs(10),
            cache_bytes: 256 << 20,
            lmdb_map_bytes: 256 << 30,
            sqlite_vfs: None,
            pmemobj_pool_bytes: 1 << 30,
        }
    }
}

/// File in a peer's directory naming the peer that owns it.
const PEER_MARKER: &str = "PEER";
/// File in a peer's directory that an open engine holds an exclusive lock on.
const LOCK_FILE: &str = "nvmdb.lock";

/// An open engine's hold on its directory: the exclusive lock on `nvmdb.lock`. Keep it in the
/// engine, declared after the library's handles, so that it is released after they close.
pub struct DirClaim {
    _lock: pmem::FileLock,
}

/// Locks `dir` for this open and checks it belongs to peer `name`, so one peer never opens
/// another's files and two openers never share one directory. `dir` must exist (it is never
/// created here, nor its parents) and be empty or hold this peer's marker: a peer never
/// writes into a directory with someone else's files.
pub fn claim_dir(dir: &Path, name: &'static str) -> Result<DirClaim> {
    let io = |what: &str, e: std::io::Error| DbError::Peer {
        engine: name,
        message: format!("{what} {}: {e}", dir.display()),
        retryable: false,
    };
    let entries = std::fs::read_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => DbError::Peer {
            engine: name,
            message: format!(
                "directory {} does not exist; create an empty directory for the peer's files",
                dir.display()
            ),
            retryable: false,
        },
        _ => io("cannot list directory", e),
    })?;
    let mut foreign = None;
    let mut marked = false;
    for entry in entries {
        let entry = entry.map_err(|e| io("cannot list directory", e))?;
        let file = entry.file_name();
        if file == PEER_MARKER {
            marked = true;
        } else if file != LOCK_FILE {
            foreign.get_or_insert(file);
        }
    }
    if let (false, Some(file)) = (marked, foreign) {
        return Err(DbError::Peer {
            engine: name,
            message: format!(
                "directory {} is not empty ({} is in it) and was not made by a peer; give an \
                 empty directory",
                dir.display(),
                file.to_string_lossy()
            ),
            retryable: false,
        });
    }
    // Locked before the marker is read or written and before the library touches any file.
    let lock = pmem::FileLock::create(&dir.join(LOCK_FILE)).map_err(|e| match e {
        pmem::PmemError::Locked { holder, .. } => DbError::Peer {
            engine: name,
            message: format!(
                "directory {} {} or use another --path",
                dir.display(),
                pmem::lock::already_open(holder)
            ),
            retryable: false,
        },
        other => DbError::Pmem(other),
    })?;
    let marker = dir.join(PEER_MARKER);
    match std::fs::read_to_string(&marker) {
        Ok(owner) if owner.trim() == name => {}
        Ok(owner) => {
            return Err(DbError::Format(format!(
                "{} holds a `{}` peer database, not `{name}`; use another directory",
                dir.display(),
                owner.trim()
            )))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&marker, format!("{name}\n"))
                .map_err(|e| io("cannot write the peer marker in", e))?
        }
        Err(e) => return Err(io("cannot read the peer marker in", e)),
    }
    Ok(DirClaim { _lock: lock })
}

/// An error from a peer library, with whether retrying the transaction may succeed.
pub fn peer_error(engine: &'static str, e: impl std::fmt::Display, retryable: bool) -> DbError {
    DbError::Peer { engine, message: e.to_string(), retryable }
}

/// Tables in id order, each with the peer's handle for it (`H`), behind a lock that only
/// `create_table` takes for writing.
pub struct Catalog<H> {
    tables: RwLock<Vec<(TableSpec, H)>>,
}

impl<H> Catalog<H> {
    pub fn new(tables: Vec<(TableSpec, H)>) -> Self {
        Catalog { tables: RwLock::new(tables) }
    }

    pub fn id(&self, name: &str) -> Option<TableId> {
        self.tables.read().iter().position(|(s, _)| s.name == name).map(|i| i as TableId)
    }

    pub fn specs(&self) -> Vec<TableSpec> {
        self.tables.read().iter().map(|(s, _)| s.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.tables.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.read().is_empty()
    }

    /// The spec and handle of `table`, or `NoSuchTable`.
    pub fn get(&self, table: TableId) -> Result<TableRef<'_, H>> {
        // Recursive: a transaction may hold one while another waits in `create`; a fair lock
        // would then block this reader behind that writer while the writer waits for the reader.
        let guard = self.tables.read_recursive();
        if (table as usize) < guard.len() {
            Ok(TableRef { guard, index: table as usize })
        } else {
            Err(DbError::NoSuchTable(table))
        }
    }

    /// Adds a table: validates the spec and the name, then runs `create` (which makes it
    /// persistent and returns its handle) with the catalog locked, so ids stay dense.
    pub fn create(
        &self,
        spec: &TableSpec,
        create: impl FnOnce(TableId) -> Result<H>,
    ) -> Result<TableId> {
        storage::engine::check_spec(spec)?;
        let mut tables = self.tables.write();
        if tables.iter().any(|(s, _)| s.name == spec.name) {
            return Err(DbError::Invalid(format!("a table named {:?} exists", spec.name)));
        }
        let id = TableId::try_from(tables.len())
            .map_err(|_| DbError::Invalid("too many tables".into()))?;
        let handle = create(id)?;
        tables.push((spec.clone(), handle));
        Ok(id)
    }
}

/// One table of a [`Catalog`], read-locked while held.
pub struct TableRef<'a, H> {
    guard: RwLockReadGuard<'a, Vec<(TableSpec, H)>>,
    index: usize,
}

impl<H> TableRef<'_, H> {
    pub fn spec(&self) -> &TableSpec {
        &self.guard[self.index].0
    }

    pub fn handle(&self) -> &H {
        &self.guard[self.index].1
    }

    pub fn id(&self) -> TableId {
        self.index as TableId
    }

    pub fn check_row(&self, row: &[u8]) -> Result<()> {
        check_row(self.id(), self.spec(), row)
    }

    pub fn check_update(&self, offset: u32, len: usize) -> Result<()> {
        check_update(self.id(), self.spec(), offset, len)
    }
}

/// Serialises a table spec for a peer's persistent catalog.
pub fn encode_spec(spec: &TableSpec) -> Result<Vec<u8>> {
    serde_json::to_vec(spec).map_err(|e| DbError::Invalid(format!("table spec: {e}")))
}

pub fn decode_spec(bytes: &[u8]) -> Result<TableSpec> {
    serde_json::from_slice(bytes).map_err(|e| DbError::Corrupt(format!("catalog entry: {e}")))
}

/// The single writer slot of a one-writer peer, with a count of writer commits that lets a
/// transaction check, when it first writes, that its snapshot is still the latest.
///
/// Waiting here rather than in the library bounds the wait ([`Self::acquire`] gives up after
/// `wait`) and makes the snapshot check exact: the commit count moves only while the slot is held.
pub struct WriterGate {
    engine: &'static str,
    slot: Mutex<()>,
    commits: AtomicU64,
    wait: Duration,
}

impl WriterGate {
    pub fn new(engine: &'static str, wait: Duration) -> Self {
        WriterGate { engine, slot: Mutex::new(()), commits: AtomicU64::new(0), wait }
    }

    /// Call before starting a read snapshot; pass the result to [`Self::acquire`] at the first
    /// write. (Reading it before the snapshot starts errs on the safe side: a commit in between
    /// makes the check fail although the snapshot has it.)
    pub fn stamp(&self) -> u64 {
        self.commits.load(Ordering::Acquire)
    }

    /// Takes the writer slot; with `since`, also checks no writer committed after that stamp.
    pub fn acquire(&self, since: Option<u64>) -> Result<WriterGuard<'_>> {
        let Some(guard) = self.slot.try_lock_for(self.wait) else {
            return Err(peer_error(
                self.engine,
                format!("another writer held the single writer slot for {:?}", self.wait),
                true,
            ));
        };
        if let Some(stamp) = since {
            if self.commits.load(Ordering::Acquire) != stamp {
                return Err(peer_error(
                    self.engine,
                    "another writer committed after this transaction read (one writer, \
                     snapshot reads); run the transaction again",
                    true,
                ));
            }
        }
        Ok(WriterGuard { gate: self, _slot: guard })
    }
}

/// Holds the writer slot; [`WriterGuard::committed`] records a commit before releasing it.
pub struct WriterGuard<'a> {
    gate: &'a WriterGate,
    _slot: MutexGuard<'a, ()>,
}

impl WriterGuard<'_> {
    pub fn committed(self) {
        self.gate.commits.fetch_add(1, Ordering::AcqRel);
    }
}

/// Commit tokens. `Durable` peers hand out [`CommitToken::DURABLE`]; `Relaxed` ones number their
/// commits and remember up to which number a sync has made them durable.
pub struct CommitClock {
    relaxed: bool,
    committed: AtomicU64,
    durable: AtomicU64,
    sync: Mutex<()>,
}

impl CommitClock {
    pub fn new(relaxed: bool) -> Self {
        CommitClock {
            relaxed,
            committed: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            sync: Mutex::new(()),
        }
    }

    /// Call once a write transaction's commit has returned.
    pub fn token(&self) -> CommitToken {
        if self.relaxed {
            CommitToken(self.committed.fetch_add(1, Ordering::AcqRel) + 1)
        } else {
            CommitToken::DURABLE
        }
    }

    pub fn is_durable(&self, token: CommitToken) -> bool {
        token.0 <= self.durable.load(Ordering::Acquire)
    }

    /// Makes `token` durable, running `sync` (which must make every commit so far durable) unless
    /// a concurrent caller's sync already covered it.
    pub fn wait_durable(
        &self,
        token: CommitToken,
        sync: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if self.is_durable(token) {
            return Ok(());
        }
        let _one_sync_at_a_time = self.sync.lock();
        if self.is_durable(token) {
            return Ok(());
        }
        // Every commit numbered up to `target` has returned, so `sync` covers it.
        let target = self.committed.load(Ordering::Acquire);
        sync()?;
        self.durable.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    /// Records that everything committed so far is durable (after a shutdown's sync).
    pub fn all_durable(&self) {
        let target = self.committed.load(Ordering::Acquire);
        self.durable.fetch_max(target, Ordering::AcqRel);
    }
}

/// One flag per worker: `begin(worker)` claims it until the transaction ends, enforcing "a worker
/// runs one transaction at a time".
pub struct WorkerSlots {
    busy: Vec<AtomicBool>,
}

impl WorkerSlots {
    pub fn new(workers: usize) -> Self {
        WorkerSlots { busy: (0..workers).map(|_| AtomicBool::new(false)).collect() }
    }

    pub fn claim(&self, worker: usize) -> Result<WorkerSlot<'_>> {
        let Some(flag) = self.busy.get(worker) else {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: the engine was opened for {} workers",
                self.busy.len()
            )));
        };
        if flag.swap(true, Ordering::Acquire) {
            return Err(DbError::Invalid(format!(
                "worker {worker} already has an open transaction"
            )));
        }
        Ok(WorkerSlot { flag })
    }
}

pub struct WorkerSlot<'a> {
    flag: &'a AtomicBool,
}

impl Drop for WorkerSlot<'_> {
    fn drop(&mut self) {
        self.flag.store(false, Ordering::Release);
    }
}

/// Adds one table's row count to an integrity report, after checking every row's size.
pub fn count_rows(
    report: &mut IntegrityReport,
    spec: &TableSpec,
    rows: impl Iterator<Item = std::result::Result<(u64, usize), String>>,
) -> std::result::Result<(), String> {
    let mut previous: Option<u64> = None;
    for item in rows {
        let (key, len) = item?;
        if len != spec.row_bytes as usize {
            return Err(format!(
                "table {}: key {key} has {len} bytes, the table's rows have {}",
                spec.name, spec.row_bytes
            ));
        }
        if previous.is_some_and(|p| p >= key) {
            return Err(format!("table {}: keys out of order at {key}", spec.name));
        }
        previous = Some(key);
        report.rows += 1;
    }
    report.tables += 1;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durable_tokens_are_durable_at_once() {
        let clock = CommitClock::new(false);
        let token = clock.token();
        assert_eq!(token, CommitToken::DURABLE);
        assert!(clock.is_durable(token));
    }

    #[test]
    fn relaxed_tokens_wait_for_a_sync_that_covers_them() {
        let clock = CommitClock::new(true);
        let (a, b) = (clock.token(), clock.token());
        assert!(!clock.is_durable(a) && !clock.is_durable(b));
        let mut syncs = 0;
        clock
            .wait_durable(a, || {
                syncs += 1;
                Ok(())
            })
            .expect("sync");
        assert!(clock.is_durable(b), "a sync covers every commit before it");
        clock.wait_durable(b, || panic!("no second sync needed")).expect("covered");
        assert_eq!(syncs, 1);
        let c = clock.token();
        let failed = clock.wait_durable(c, || Err(DbError::Invalid("disk gone".into())));
        assert!(failed.is_err() && !clock.is_durable(c), "a failed sync makes nothing durable");
        clock.all_durable();
        assert!(clock.is_durable(c));
    }

    #[test]
    fn writer_gate_rejects_stale_snapshots_only() {
        let gate = WriterGate::new("test", Duration::from_millis(10));
        let stamp = gate.stamp();
        gate.acquire(Some(stamp)).expect("fresh snapshot").committed();
        let stale = gate.acquire(Some(stamp)).err().expect("a commit happened since the stamp");
        assert!(stale.is_retryable());
        let fresh = gate.stamp();
        let held = gate.acquire(Some(fresh)).expect("nothing committed since");
        let busy = gate.acquire(None).err().expect("the slot is held");
        assert!(busy.is_retryable());
        drop(held);
        assert_eq!(gate.stamp(), fresh, "an abort does not count as a commit");
    }

    #[test]
    fn worker_slots_are_exclusive_and_bounded() {
        let slots = WorkerSlots::new(2);
        let held = slots.claim(1).expect("free");
        assert!(slots.claim(1).is_err());
        assert!(slots.claim(2).is_err());
        drop(held);
        slots.claim(1).expect("released on drop");
    }
}

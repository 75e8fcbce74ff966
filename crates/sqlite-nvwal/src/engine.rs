//! The `sqlite-nvwal` engine: the `sqlite` peer's SQL (one writer, readers never wait) on a
//! database whose file and WAL live in one `pmem` region through the [`crate::vfs`] VFS
//! (Kim et al., ASPLOS 2016, §3-§4).
//!
//! Where a commit becomes durable: the WAL's `xSync` at SQLite's commit ([`Store::wal_sync`]);
//! in `cs` mode at the next [`Engine::wait_durable`] or checkpoint ([`Store::sync_all`]).
//!
//! Recovery invariant: opening the region recovers the log ([`Store::open`]), then SQLite's
//! own WAL recovery runs on the rebuilt WAL at the first read.

use crate::sqlite::SqliteEngine;
use crate::store::Store;
use crate::vfs::{self, Registration, Shared};
use crate::{NvwalOptions, SyncMode, ENGINE_NAME};
use peer_common::PeerOptions;
use pmem::Region;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use storage::{
    CommitToken, Engine, IntegrityResult, RecoveryReport, Result, TableId, TableSpec, Txn,
};

pub struct NvwalEngine {
    /// Dropped first: closing SQLite's connections checkpoints through the store.
    inner: Option<SqliteEngine>,
    _registration: Registration,
    shared: Arc<Shared>,
    report: RecoveryReport,
    checksum: bool,
}

impl NvwalEngine {
    /// Opens (formatting a blank region, recovering otherwise) on `region`.
    pub fn open(region: Region, options: &NvwalOptions, peer: &PeerOptions) -> Result<NvwalEngine> {
        let started = Instant::now();
        let store = Store::open(region, options)?;
        // SQLite's own view of the file (the store holds any bytes): checked before SQLite reads.
        store.verify_db_length()?;
        let formatted = store.formatted_now();
        let facts = store.facts().clone();
        let wal_bytes = store.wal_len();
        let shared = Arc::new(Shared::new(store));
        let (registration, path) = vfs::register(&shared)?;
        let peer = PeerOptions { sqlite_vfs: Some(vfs::VFS_NAME.to_string()), ..peer.clone() };
        let inner =
            SqliteEngine::open_on_vfs(Path::new(&path), ENGINE_NAME, formatted, wal_bytes, &peer)?;
        if formatted {
            // WAL mode and the schema are committed in the log: the database exists.
            shared.store.mark_formatted();
        }
        let mut report = inner.recovery_report();
        report.formatted = formatted;
        report.duration = started.elapsed();
        report.records_applied = facts.frames_recovered;
        report.txns_completed = facts.commits_recovered;
        report.notes.push(format!(
            "nvwal {}: {} frames in {} commits recovered; {} records after the last commit \
             dropped; {} torn commits caught by checksum; {} links cut, {} blocks reclaimed, {} \
             tail blocks freed",
            options.variant(),
            facts.frames_recovered,
            facts.commits_recovered,
            facts.records_dropped,
            facts.torn_commits_by_checksum,
            facts.links_cut,
            facts.blocks_reclaimed,
            facts.tail_blocks_freed
        ));
        Ok(NvwalEngine {
            inner: Some(inner),
            _registration: registration,
            shared,
            report,
            checksum: options.sync == SyncMode::Checksum,
        })
    }

    fn inner(&self) -> &SqliteEngine {
        self.inner.as_ref().expect("present until drop")
    }

    /// The store under the VFS (for tests and reports).
    pub fn store(&self) -> &Store {
        &self.shared.store
    }
}

impl Drop for NvwalEngine {
    fn drop(&mut self) {
        drop(self.inner.take());
    }
}

struct NvwalTxn<'a> {
    engine: &'a NvwalEngine,
    inner: Box<dyn Txn + 'a>,
}

impl Txn for NvwalTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.inner.read(table, key, out)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.inner.insert(table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        self.inner.update(table, key, offset, bytes)
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        self.inner.delete(table, key)
    }
    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.inner.scan(table, low, high, limit, visit)
    }
    fn commit(self: Box<Self>) -> Result<CommitToken> {
        let engine = self.engine;
        self.inner.commit()?;
        if !engine.checksum {
            return Ok(CommitToken::DURABLE);
        }
        // `cs`: durable once a later sync flushed the records (a conservative token: it may
        // name a later commit than this one).
        let (commits, durable) = engine.store().commit_counts();
        Ok(if commits > durable { CommitToken(commits) } else { CommitToken::DURABLE })
    }
    fn abort(self: Box<Self>) -> Result<()> {
        self.inner.abort()
    }
}

impl Engine for NvwalEngine {
    fn name(&self) -> &str {
        ENGINE_NAME
    }
    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.inner().create_table(spec)
    }
    fn table(&self, name: &str) -> Option<TableId> {
        self.inner().table(name)
    }
    fn tables(&self) -> Vec<TableSpec> {
        self.inner().tables()
    }
    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        Ok(Box::new(NvwalTxn { engine: self, inner: self.inner().begin(worker)? }))
    }
    fn is_durable(&self, token: CommitToken) -> bool {
        token == CommitToken::DURABLE || token.0 <= self.store().commit_counts().1
    }
    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        if !self.is_durable(token) {
            self.store().sync_all();
        }
        Ok(())
    }
    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }
    fn region(&self) -> Option<&Region> {
        Some(self.store().region())
    }
    /// What the fuzzer damages (`nvmdb fuzz`): the header, NVWAL's block table, its log blocks
    /// (the WAL frames as records) and the database file's area.
    fn describe_offset(&self, offset: u64) -> Option<String> {
        let l = self.store().layout();
        Some(if offset < crate::layout::HEADER_BYTES {
            "sqlite-nvwal header".into()
        } else if offset < l.blocks_off {
            "sqlite-nvwal block table".into()
        } else if offset < l.db_off.min(l.blocks_off + l.block_count * l.block_bytes) {
            "sqlite-nvwal log block".into()
        } else if offset >= l.db_off && offset < l.db_off + l.db_cap {
            "sqlite-nvwal database file".into()
        } else {
            return None;
        })
    }
    fn check_integrity(&self) -> IntegrityResult {
        self.store().heap_census().map_err(|e| e.to_string())?;
        self.store().verify_db_chunks().map_err(|e| e.to_string())?;
        self.store().verify_db_length().map_err(|e| e.to_string())?;
        self.inner().check_integrity()
    }
    fn shutdown(&self) -> Result<()> {
        self.inner().shutdown()?;
        self.store().sync_all();
        Ok(())
    }
}

impl std::fmt::Debug for NvwalEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvwalEngine").finish_non_exhaustive()
    }
}

/// Opens the engine with `key=value` options (`nvwal`, `diff`, `heap`, ..., and the peers'
/// `cache_bytes`), `workers` worker connections.
pub fn open_with(
    region: Region,
    workers: usize,
    extra: &std::collections::BTreeMap<String, String>,
) -> Result<NvwalEngine> {
    let mut options = NvwalOptions::default();
    for (k, v) in extra {
        options.set(k, v)?;
    }
    let mut peer = PeerOptions { workers: workers.max(1), ..PeerOptions::default() };
    if let Some(bytes) = options.cache_bytes {
        peer.cache_bytes = bytes;
    }
    NvwalEngine::open(region, &options, &peer)
}

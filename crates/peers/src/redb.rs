//! redb peer: a copy-on-write B-tree file with checksummed pages and a two-slot commit record,
//! another shadow-paging point of comparison for nvmdb's `cow` engine (Arulraj et al., SIGMOD
//! 2015, §3.2). Each nvmdb table is a redb table `u64 → [u8]`.
//!
//! **One writer.** redb allows one write transaction at a time; the engine's writer gate hands
//! out that slot with a bounded wait. A transaction begins lazily: reads run in a read
//! transaction (a snapshot); the first write takes the gate (failing retryably if another writer
//! committed since the snapshot) and switches to a write transaction.
//!
//! Recovery invariant (redb's): a commit becomes current when its commit slot is written and
//! synced; a crash leaves the previous slot current, and redb repairs its allocator state on open.

use ::redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};
use parking_lot::{RwLock, RwLockReadGuard};
use peer_common::{
    claim_dir, count_rows, decode_spec, encode_spec, peer_error, Catalog, CommitClock, DirClaim,
    TableRef, WorkerSlot, WorkerSlots, WriterGate, WriterGuard,
};
use peer_common::{PeerDurability, PeerOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

const ENGINE: &str = "redb";
const DB_FILE: &str = "redb.db";
const CATALOG: TableDefinition<u32, &[u8]> = TableDefinition::new("nvmdb_catalog");

type Def<'n> = TableDefinition<'n, u64, &'static [u8]>;

fn err(e: impl Into<::redb::Error>) -> DbError {
    match e.into() {
        ::redb::Error::Corrupted(m) => DbError::Corrupt(format!("redb: {m}")),
        ::redb::Error::UpgradeRequired(v) => {
            DbError::Format(format!("redb: file format {v} needs an upgrade"))
        }
        ::redb::Error::DatabaseAlreadyOpen => DbError::Invalid(
            "redb: the database is already open (in this or another process)".into(),
        ),
        e => peer_error(ENGINE, e, false),
    }
}

fn table_name(id: TableId) -> String {
    format!("t{id}")
}

pub struct RedbEngine {
    /// Read-locked by every transaction; write-locked by `check_integrity`, which needs the
    /// database to itself.
    db: RwLock<Database>,
    catalog: Catalog<String>,
    gate: WriterGate,
    clock: CommitClock,
    slots: WorkerSlots,
    durability: Durability,
    report: RecoveryReport,
    /// Held while the engine is open; after the fields above, so released after they close.
    _claim: DirClaim,
}

impl RedbEngine {
    /// Opens or creates the database in `dir`.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let started = Instant::now();
        let path = dir.join(DB_FILE);
        let formatted = !path.exists();
        let repaired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&repaired);
        let cache_bytes = usize::try_from(options.cache_bytes).unwrap_or(usize::MAX);
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .set_repair_callback(move |_| flag.store(true, Ordering::Relaxed))
            .create(&path)
            .map_err(err)?;

        let wtxn = db.begin_write().map_err(err)?;
        let mut tables = Vec::new();
        {
            let catalog = wtxn.open_table(CATALOG).map_err(err)?;
            for entry in catalog.iter().map_err(err)? {
                let (id, bytes) = entry.map_err(err)?;
                let id = id.value();
                if id as usize != tables.len() {
                    return Err(DbError::Corrupt(format!("redb: catalog ids not dense at {id}")));
                }
                tables.push((decode_spec(bytes.value())?, table_name(id)));
            }
        }
        wtxn.commit().map_err(err)?;

        let mut notes = vec![format!("{} tables", tables.len())];
        if repaired.load(Ordering::Relaxed) {
            notes.push("redb repaired the file after an unclean shutdown".into());
        }
        let report = RecoveryReport {
            formatted,
            duration: started.elapsed(),
            notes,
            ..RecoveryReport::default()
        };
        let relaxed = options.durability == PeerDurability::Relaxed;
        Ok(RedbEngine {
            db: RwLock::new(db),
            catalog: Catalog::new(tables),
            gate: WriterGate::new(ENGINE, options.writer_wait),
            clock: CommitClock::new(relaxed),
            slots: WorkerSlots::new(options.workers),
            durability: if relaxed { Durability::None } else { Durability::Immediate },
            report,
            _claim: claim,
        })
    }

    fn write_txn(&self, db: &Database) -> Result<WriteTransaction> {
        let mut txn = db.begin_write().map_err(err)?;
        txn.set_durability(self.durability).map_err(err)?;
        Ok(txn)
    }

    /// An empty `Immediate` commit: makes every earlier `None` commit durable with it.
    fn sync(&self) -> Result<()> {
        let writer = self.gate.acquire(None)?;
        let db = self.db.read_recursive();
        let mut txn = db.begin_write().map_err(err)?;
        txn.set_durability(Durability::Immediate).map_err(err)?;
        txn.commit().map_err(err)?;
        writer.committed();
        Ok(())
    }
}

impl Engine for RedbEngine {
    fn name(&self) -> &str {
        ENGINE
    }

    peer_common::peer_engine_methods!(durable_by: sync);

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            let name = table_name(id);
            let encoded = encode_spec(spec)?;
            let writer = self.gate.acquire(None)?;
            let db = self.db.read_recursive();
            let mut txn = db.begin_write().map_err(err)?;
            txn.set_durability(Durability::Immediate).map_err(err)?;
            txn.open_table(Def::new(&name)).map_err(err)?;
            txn.open_table(CATALOG).map_err(err)?.insert(id, encoded.as_slice()).map_err(err)?;
            txn.commit().map_err(err)?;
            writer.committed();
            Ok(name)
        })
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let slot = self.slots.claim(worker)?;
        Ok(Box::new(RedbTxn {
            engine: self,
            db: self.db.read_recursive(),
            state: State::Idle,
            _slot: slot,
        }))
    }

    /// Runs redb's `check_integrity` (page checksums, allocator state; it needs the database to
    /// itself, so it waits for open transactions), then counts rows and checks their sizes.
    /// `pages_free` is redb's fragmented space in pages.
    fn check_integrity(&self) -> IntegrityResult {
        let wait = std::time::Duration::from_secs(60);
        let Some(mut db) = self.db.try_write_for(wait) else {
            return Err(format!("redb: transactions stayed open for {wait:?}; end them first"));
        };
        match db.check_integrity() {
            Ok(true) => {}
            Ok(false) => return Err("redb: check_integrity repaired the file".into()),
            Err(e) => return Err(format!("redb: check_integrity: {e}")),
        }
        let rtxn = db.begin_read().map_err(|e| format!("redb: {e}"))?;
        let mut report = IntegrityReport::default();
        for (id, spec) in self.catalog.specs().iter().enumerate() {
            let name = table_name(id as TableId);
            let table = rtxn.open_table(Def::new(&name)).map_err(|e| format!("redb: {e}"))?;
            let rows = table.iter().map_err(|e| format!("redb: {e}"))?.map(|entry| {
                entry.map(|(k, v)| (k.value(), v.value().len())).map_err(|e| format!("redb: {e}"))
            });
            count_rows(&mut report, spec, rows)?;
        }
        drop(rtxn);
        let wtxn = db.begin_write().map_err(|e| format!("redb: {e}"))?;
        let stats = wtxn.stats().map_err(|e| format!("redb: {e}"))?;
        report.pages_in_use = stats.allocated_pages();
        report.pages_free = stats.fragmented_bytes() / stats.page_size().max(1) as u64;
        wtxn.abort().map_err(|e| format!("redb: {e}"))?;
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        self.sync()?;
        self.clock.all_durable();
        Ok(())
    }
}

enum State<'a> {
    Idle,
    /// A read transaction (snapshot); `stamp` is the writer gate's count from before it.
    Reading {
        stamp: u64,
        txn: ReadTransaction,
    },
    /// The write transaction (boxed: it is large); field order drops (aborts) it before the
    /// gate is released.
    Writing {
        txn: Box<WriteTransaction>,
        guard: WriterGuard<'a>,
    },
}

struct RedbTxn<'a> {
    engine: &'a RedbEngine,
    db: RwLockReadGuard<'a, Database>,
    state: State<'a>,
    _slot: WorkerSlot<'a>,
}

impl<'a> RedbTxn<'a> {
    fn table(&self, table: TableId) -> Result<TableRef<'a, String>> {
        self.engine.catalog.get(table)
    }

    fn start_reading(&mut self) -> Result<()> {
        if let State::Idle = self.state {
            let stamp = self.engine.gate.stamp();
            let txn = self.db.begin_read().map_err(err)?;
            self.state = State::Reading { stamp, txn };
        }
        Ok(())
    }

    /// The write transaction, taking the writer slot first if needed.
    fn writer(&mut self) -> Result<&mut WriteTransaction> {
        let since = match &self.state {
            State::Writing { .. } => None,
            State::Reading { stamp, .. } => Some(Some(*stamp)),
            State::Idle => Some(None),
        };
        if let Some(since) = since {
            let guard = self.engine.gate.acquire(since)?;
            self.state = State::Idle;
            let txn = Box::new(self.engine.write_txn(&self.db)?);
            self.state = State::Writing { txn, guard };
        }
        match &mut self.state {
            State::Writing { txn, .. } => Ok(txn),
            _ => Err(DbError::Invalid("redb: no write transaction".into())),
        }
    }
}

/// Copies the row of `key` into `out`; false if absent.
fn get_into(
    table: &impl ReadableTable<u64, &'static [u8]>,
    key: u64,
    out: &mut Vec<u8>,
) -> Result<bool> {
    match table.get(key).map_err(err)? {
        Some(row) => {
            out.extend_from_slice(row.value());
            Ok(true)
        }
        None => Ok(false),
    }
}

fn scan_in(
    table: &impl ReadableTable<u64, &'static [u8]>,
    low: u64,
    high: u64,
    limit: usize,
    visit: &mut dyn FnMut(u64, &[u8]) -> bool,
) -> Result<usize> {
    let mut visited = 0;
    for entry in table.range(low..=high).map_err(err)? {
        let (key, row) = entry.map_err(err)?;
        visited += 1;
        if !visit(key.value(), row.value()) || visited == limit {
            break;
        }
    }
    Ok(visited)
}

impl Txn for RedbTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let t = self.table(table)?;
        self.start_reading()?;
        let def = Def::new(t.handle());
        match &self.state {
            State::Reading { txn, .. } => get_into(&txn.open_table(def).map_err(err)?, key, out),
            State::Writing { txn, .. } => get_into(&txn.open_table(def).map_err(err)?, key, out),
            State::Idle => Err(DbError::Invalid("redb: no transaction".into())),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        t.check_row(row)?;
        let txn = self.writer()?;
        let mut tbl = txn.open_table(Def::new(t.handle())).map_err(err)?;
        if tbl.get(key).map_err(err)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        tbl.insert(key, row).map_err(err)?;
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        let txn = self.writer()?;
        let mut tbl = txn.open_table(Def::new(t.handle())).map_err(err)?;
        let mut row = Vec::with_capacity(t.spec().row_bytes as usize);
        if !get_into(&tbl, key, &mut row)? {
            return Ok(false);
        }
        let start = offset as usize;
        let Some(target) = row.get_mut(start..start + bytes.len()) else {
            return Err(DbError::Corrupt(format!(
                "redb: table {table} key {key}: stored row has {} bytes",
                row.len()
            )));
        };
        target.copy_from_slice(bytes);
        tbl.insert(key, row.as_slice()).map_err(err)?;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.table(table)?;
        let txn = self.writer()?;
        let mut tbl = txn.open_table(Def::new(t.handle())).map_err(err)?;
        let removed = tbl.remove(key).map_err(err)?.is_some();
        Ok(removed)
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.table(table)?;
        if low > high || limit == 0 {
            return Ok(0);
        }
        self.start_reading()?;
        let def = Def::new(t.handle());
        match &self.state {
            State::Reading { txn, .. } => {
                scan_in(&txn.open_table(def).map_err(err)?, low, high, limit, visit)
            }
            State::Writing { txn, .. } => {
                scan_in(&txn.open_table(def).map_err(err)?, low, high, limit, visit)
            }
            State::Idle => Err(DbError::Invalid("redb: no transaction".into())),
        }
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle | State::Reading { .. } => Ok(CommitToken::DURABLE),
            State::Writing { txn, guard } => {
                txn.commit().map_err(err)?;
                guard.committed();
                Ok(self.engine.clock.token())
            }
        }
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Writing { txn, guard } => {
                let result = txn.abort().map_err(err);
                drop(guard);
                result
            }
            State::Idle | State::Reading { .. } => Ok(()),
        }
    }
}

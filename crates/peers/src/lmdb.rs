//! LMDB peer (via `heed`): a copy-on-write B+tree in one memory-mapped file, the shadow-paging
//! design nvmdb's `cow` engine is compared with (Arulraj et al., SIGMOD 2015, §3.2, CoW). Each
//! nvmdb table is a named LMDB database with big-endian `u64` keys, so byte order is key order.
//!
//! **One writer.** LMDB allows one write transaction at a time; the engine's writer gate hands
//! out that slot with a bounded wait. A transaction begins lazily: reads run in a read-only
//! snapshot; the first write takes the gate (failing retryably if another writer committed since
//! the snapshot) and switches to a write transaction, which then sees the latest state.
//!
//! Recovery invariant (LMDB's): a commit is the switch of one of two meta pages, written after
//! the new tree's pages; opening picks the newer valid meta page, so there is nothing to replay.

use heed::byteorder::BigEndian;
use heed::types::{Bytes, U32, U64};
use heed::{Database, Env, EnvFlags, EnvOpenOptions, MdbError, PutFlags, RoTxn, RwTxn, WithoutTls};
use peer_common::{
    claim_dir, count_rows, decode_spec, encode_spec, peer_error, Catalog, CommitClock, DirClaim,
    TableRef, WorkerSlot, WorkerSlots, WriterGate, WriterGuard,
};
use peer_common::{PeerDurability, PeerOptions};
use std::path::Path;
use std::time::Instant;
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

const ENGINE: &str = "lmdb";
/// Named databases: the catalog plus the tables.
const MAX_DBS: u32 = 256;
const CATALOG: &str = "nvmdb_catalog";

type Table = Database<U64<BigEndian>, Bytes>;
type CatalogDb = Database<U32<BigEndian>, Bytes>;

fn err(e: heed::Error) -> DbError {
    match e {
        heed::Error::Mdb(MdbError::MapFull) => DbError::RegionFull(
            "lmdb: the map is full; open with a larger PeerOptions::lmdb_map_bytes".into(),
        ),
        heed::Error::Mdb(MdbError::TxnFull) => DbError::TxnTooLarge(format!("lmdb: {e}")),
        heed::Error::Mdb(MdbError::Corrupted | MdbError::PageNotFound | MdbError::Invalid) => {
            DbError::Corrupt(format!("lmdb: {e}"))
        }
        heed::Error::Mdb(MdbError::VersionMismatch) => DbError::Format(format!("lmdb: {e}")),
        e => peer_error(ENGINE, e, false),
    }
}

fn table_name(id: TableId) -> String {
    format!("t{id}")
}

pub struct LmdbEngine {
    env: Env<WithoutTls>,
    catalog_db: CatalogDb,
    catalog: Catalog<Table>,
    gate: WriterGate,
    clock: CommitClock,
    slots: WorkerSlots,
    report: RecoveryReport,
    /// Held while the engine is open; after the fields above, so released after they close.
    _claim: DirClaim,
}

impl LmdbEngine {
    /// Opens or creates the environment in `dir`.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let started = Instant::now();
        let formatted = !dir.join("data.mdb").exists();
        let map_bytes = usize::try_from(options.lmdb_map_bytes)
            .map_err(|_| DbError::Invalid("lmdb_map_bytes does not fit in usize".into()))?;
        let readers = u32::try_from(options.workers).unwrap_or(u32::MAX).saturating_add(16);
        let mut builder = EnvOpenOptions::new().read_txn_without_tls();
        builder.map_size(map_bytes).max_dbs(MAX_DBS).max_readers(readers.max(126));
        if options.durability == PeerDurability::Relaxed {
            // SAFETY: MDB_NOSYNC gives up durability (and, without write ordering, consistency)
            // on a system crash, as documented in the crate's durability table; it cannot cause
            // memory unsafety in this process.
            unsafe { builder.flags(EnvFlags::NO_SYNC) };
        }
        // SAFETY: the map is only modified through LMDB. `claim_dir` gives this peer the
        // directory and locks it against every other opener, in this process or another; the
        // files must not be truncated or rewritten behind LMDB's back (documented hazard).
        let env = unsafe { builder.open(dir) }.map_err(err)?;
        let stale_readers = env.clear_stale_readers().map_err(err)?;

        let mut wtxn = env.write_txn().map_err(err)?;
        let catalog_db: CatalogDb = env.create_database(&mut wtxn, Some(CATALOG)).map_err(err)?;
        let mut tables = Vec::new();
        for entry in catalog_db.iter(&wtxn).map_err(err)? {
            let (id, bytes) = entry.map_err(err)?;
            if id as usize != tables.len() {
                return Err(DbError::Corrupt(format!("lmdb: catalog ids not dense at {id}")));
            }
            let spec = decode_spec(bytes)?;
            let name = table_name(id);
            let Some(db) = env.open_database(&wtxn, Some(&name)).map_err(err)? else {
                return Err(DbError::Corrupt(format!("lmdb: table {} has no database", spec.name)));
            };
            tables.push((spec, db));
        }
        wtxn.commit().map_err(err)?;

        let info = env.info();
        let mut notes = vec![
            format!("{} tables", tables.len()),
            "no recovery: LMDB opens on the newer valid meta page".to_string(),
            format!("last committed LMDB txn {}", info.last_txn_id),
        ];
        if stale_readers > 0 {
            notes.push(format!("cleared {stale_readers} stale reader slots"));
        }
        let report = RecoveryReport {
            formatted,
            duration: started.elapsed(),
            notes,
            ..RecoveryReport::default()
        };
        Ok(LmdbEngine {
            env,
            catalog_db,
            catalog: Catalog::new(tables),
            gate: WriterGate::new(ENGINE, options.writer_wait),
            clock: CommitClock::new(options.durability == PeerDurability::Relaxed),
            slots: WorkerSlots::new(options.workers),
            report,
            _claim: claim,
        })
    }

    fn sync(&self) -> Result<()> {
        self.env.force_sync().map_err(err)
    }
}

impl Engine for LmdbEngine {
    fn name(&self) -> &str {
        ENGINE
    }

    peer_common::peer_engine_methods!(durable_by: sync);

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            if id + 1 >= MAX_DBS {
                return Err(DbError::Invalid(format!("lmdb: at most {} tables", MAX_DBS - 1)));
            }
            let encoded = encode_spec(spec)?;
            let writer = self.gate.acquire(None)?;
            let mut wtxn = self.env.write_txn().map_err(err)?;
            let db: Table =
                self.env.create_database(&mut wtxn, Some(&table_name(id))).map_err(err)?;
            self.catalog_db.put(&mut wtxn, &id, &encoded).map_err(err)?;
            wtxn.commit().map_err(err)?;
            writer.committed();
            Ok(db)
        })
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let slot = self.slots.claim(worker)?;
        Ok(Box::new(LmdbTxn { engine: self, state: State::Idle, _slot: slot }))
    }

    /// LMDB has no checker of its own: walks every table checking key order and row sizes.
    /// `pages_in_use` counts the tables' B-tree pages; `pages_free` the map's never-used pages.
    fn check_integrity(&self) -> IntegrityResult {
        let rtxn = self.env.read_txn().map_err(|e| format!("lmdb: {e}"))?;
        let mut report = IntegrityReport::default();
        let mut page_size = 4096;
        for id in 0..self.catalog.len() as TableId {
            let t = self.catalog.get(id).map_err(|e| e.to_string())?;
            let db = t.handle();
            let rows = db
                .iter(&rtxn)
                .map_err(|e| format!("lmdb: {e}"))?
                .map(|entry| entry.map(|(k, v)| (k, v.len())).map_err(|e| format!("lmdb: {e}")));
            count_rows(&mut report, t.spec(), rows)?;
            let stat = db.stat(&rtxn).map_err(|e| format!("lmdb: {e}"))?;
            page_size = u64::from(stat.page_size);
            report.pages_in_use +=
                (stat.branch_pages + stat.leaf_pages + stat.overflow_pages) as u64;
        }
        let info = self.env.info();
        let map_pages = info.map_size as u64 / page_size;
        report.pages_free = map_pages.saturating_sub(info.last_page_number as u64 + 1);
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        // Waiting for the writer slot lets a running writer finish first.
        let writer = self.gate.acquire(None)?;
        self.sync()?;
        drop(writer);
        self.clock.all_durable();
        Ok(())
    }
}

enum State<'a> {
    Idle,
    /// A read-only snapshot; `stamp` is the writer gate's count from before it started.
    Reading {
        stamp: u64,
        txn: RoTxn<'a, WithoutTls>,
    },
    /// The write transaction; field order drops (aborts) it before the gate is released.
    Writing {
        txn: RwTxn<'a>,
        guard: WriterGuard<'a>,
    },
}

struct LmdbTxn<'a> {
    engine: &'a LmdbEngine,
    state: State<'a>,
    _slot: WorkerSlot<'a>,
}

impl<'a> LmdbTxn<'a> {
    fn table(&self, table: TableId) -> Result<TableRef<'a, Table>> {
        self.engine.catalog.get(table)
    }

    /// The transaction to read in, starting a snapshot if none is open.
    fn reader(&mut self) -> Result<&RoTxn<'a>> {
        if let State::Idle = self.state {
            let stamp = self.engine.gate.stamp();
            let txn = self.engine.env.read_txn().map_err(err)?;
            self.state = State::Reading { stamp, txn };
        }
        match &self.state {
            State::Reading { txn, .. } => Ok(txn),
            State::Writing { txn, .. } => Ok(txn),
            State::Idle => Err(DbError::Invalid("lmdb: no transaction".into())),
        }
    }

    /// The write transaction, taking the writer slot first if needed.
    fn writer(&mut self) -> Result<&mut RwTxn<'a>> {
        let since = match &self.state {
            State::Writing { .. } => None,
            State::Reading { stamp, .. } => Some(Some(*stamp)),
            State::Idle => Some(None),
        };
        if let Some(since) = since {
            let guard = self.engine.gate.acquire(since)?;
            // Ends the snapshot (if any) before the write transaction starts.
            self.state = State::Idle;
            let txn = self.engine.env.write_txn().map_err(err)?;
            self.state = State::Writing { txn, guard };
        }
        match &mut self.state {
            State::Writing { txn, .. } => Ok(txn),
            _ => Err(DbError::Invalid("lmdb: no write transaction".into())),
        }
    }
}

impl Txn for LmdbTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let t = self.table(table)?;
        let txn = self.reader()?;
        match t.handle().get(txn, &key).map_err(err)? {
            Some(row) => {
                out.extend_from_slice(row);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        t.check_row(row)?;
        let txn = self.writer()?;
        match t.handle().put_with_flags(txn, PutFlags::NO_OVERWRITE, &key, row) {
            Ok(()) => Ok(()),
            Err(heed::Error::Mdb(MdbError::KeyExist)) => Err(DbError::Duplicate { table, key }),
            Err(e) => Err(err(e)),
        }
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        let txn = self.writer()?;
        let Some(old) = t.handle().get(txn, &key).map_err(err)? else {
            return Ok(false);
        };
        let mut row = old.to_vec();
        let start = offset as usize;
        let Some(target) = row.get_mut(start..start + bytes.len()) else {
            return Err(DbError::Corrupt(format!(
                "lmdb: table {table} key {key}: stored row has {} bytes",
                row.len()
            )));
        };
        target.copy_from_slice(bytes);
        t.handle().put(txn, &key, &row).map_err(err)?;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.table(table)?;
        let txn = self.writer()?;
        t.handle().delete(txn, &key).map_err(err)
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
        let txn = self.reader()?;
        let mut visited = 0;
        for entry in t.handle().range(txn, &(low..=high)).map_err(err)? {
            let (key, row) = entry.map_err(err)?;
            visited += 1;
            if !visit(key, row) || visited == limit {
                break;
            }
        }
        Ok(visited)
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
        // Dropping the LMDB transaction aborts it; the gate is released after.
        self.state = State::Idle;
        Ok(())
    }
}

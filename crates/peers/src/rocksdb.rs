//! RocksDB peer (cargo feature `rocksdb`): an LSM tree with a write-ahead log, the baseline of
//! nvmdb's `lsm` engine (Arulraj et al., SIGMOD 2015, §3.3, Log). Each nvmdb table is a column
//! family with big-endian `u64` keys; a catalog of table specs lives in the default family.
//!
//! **Key locks.** A pessimistic `TransactionDB` with lock timeout 0: reads take shared key
//! locks (`GetForUpdate(exclusive = false)`), writes exclusive ones, and a lock held by another
//! transaction is a retryable [`DbError::Conflict`] at once, the trait's no-wait 2PL. Scans lock
//! each key they visit (no phantom protection, as the trait specifies).
//!
//! Recovery invariant (RocksDB's): a commit is in the database once its WAL record is (synced
//! with `sync=true` in `Durable` mode); open replays the WAL into memtables.

use crate::common::{
    claim_dir, count_rows, decode_spec, encode_spec, peer_error, Catalog, CommitClock, DirClaim,
    TableRef, WorkerSlot, WorkerSlots,
};
use crate::{PeerDurability, PeerOptions};
use ::rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, ErrorKind, IteratorMode,
    MultiThreaded, Options, ReadOptions, Transaction, TransactionDB, TransactionDBOptions,
    TransactionOptions, WriteOptions, DB,
};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

const ENGINE: &str = "rocksdb";
const CATALOG_PREFIX: &[u8] = b"nvmdb_catalog/";

type Db = TransactionDB<MultiThreaded>;

fn err(e: ::rocksdb::Error) -> DbError {
    match e.kind() {
        ErrorKind::Corruption => DbError::Corrupt(format!("rocksdb: {e}")),
        ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain => peer_error(ENGINE, e, true),
        _ => peer_error(ENGINE, e, false),
    }
}

/// A lock conflict on `key` becomes the trait's `Conflict`; other errors map as [`err`].
fn lock_err(e: ::rocksdb::Error, table: TableId, key: u64) -> DbError {
    match e.kind() {
        ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain => {
            DbError::Conflict { table, key }
        }
        _ => err(e),
    }
}

fn table_name(id: TableId) -> String {
    format!("t{id}")
}

fn catalog_key(id: TableId) -> Vec<u8> {
    let mut key = CATALOG_PREFIX.to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

pub struct RocksEngine {
    db: Db,
    catalog: Catalog<String>,
    write_options: WriteOptions,
    clock: CommitClock,
    slots: WorkerSlots,
    report: RecoveryReport,
    /// Held while the engine is open; after the fields above, so released after they close.
    _claim: DirClaim,
}

impl RocksEngine {
    /// Opens or creates the database in `dir`.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let started = Instant::now();
        let formatted = !dir.join("CURRENT").exists();
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        let mut table_options = BlockBasedOptions::default();
        let cache_bytes = usize::try_from(options.cache_bytes).unwrap_or(usize::MAX);
        table_options.set_block_cache(&Cache::new_lru_cache(cache_bytes));
        opts.set_block_based_table_factory(&table_options);
        let families = if formatted { Vec::new() } else { DB::list_cf(&opts, dir).map_err(err)? };
        let descriptors = families
            .iter()
            .filter(|name| name.as_str() != ::rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .map(|name| ColumnFamilyDescriptor::new(name, opts.clone()));
        let db = Db::open_cf_descriptors(&opts, &TransactionDBOptions::default(), dir, descriptors)
            .map_err(err)?;
        let tables = load_catalog(&db)?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(options.durability == PeerDurability::Durable);
        let report = RecoveryReport {
            formatted,
            duration: started.elapsed(),
            notes: vec![
                format!("{} tables", tables.len()),
                "RocksDB replays its WAL into memtables on open".into(),
            ],
            ..RecoveryReport::default()
        };
        Ok(RocksEngine {
            db,
            catalog: Catalog::new(tables),
            write_options,
            clock: CommitClock::new(options.durability == PeerDurability::Relaxed),
            slots: WorkerSlots::new(options.workers),
            report,
            _claim: claim,
        })
    }

    fn family(&self, name: &str) -> Result<Arc<BoundColumnFamily<'_>>> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| DbError::Corrupt(format!("rocksdb: column family {name} missing")))
    }
}

fn load_catalog(db: &Db) -> Result<Vec<(TableSpec, String)>> {
    let mut tables = Vec::new();
    let mode = IteratorMode::From(CATALOG_PREFIX, ::rocksdb::Direction::Forward);
    for entry in db.iterator(mode) {
        let (key, value) = entry.map_err(err)?;
        let Some(id) = key.strip_prefix(CATALOG_PREFIX) else {
            break;
        };
        let id: [u8; 4] =
            id.try_into().map_err(|_| DbError::Corrupt("rocksdb: malformed catalog key".into()))?;
        let id = TableId::from_be_bytes(id);
        if id as usize != tables.len() {
            return Err(DbError::Corrupt(format!("rocksdb: catalog ids not dense at {id}")));
        }
        let name = table_name(id);
        if db.cf_handle(&name).is_none() {
            return Err(DbError::Corrupt(format!("rocksdb: column family {name} missing")));
        }
        tables.push((decode_spec(&value)?, name));
    }
    Ok(tables)
}

impl Engine for RocksEngine {
    fn name(&self) -> &str {
        ENGINE
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            let name = table_name(id);
            self.db.create_cf(&name, &Options::default()).map_err(err)?;
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            self.db.put_opt(catalog_key(id), encode_spec(spec)?, &sync).map_err(err)?;
            Ok(name)
        })
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.catalog.id(name)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.catalog.specs()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let slot = self.slots.claim(worker)?;
        let mut txn_options = TransactionOptions::default();
        // No wait: a held lock is a conflict at once (no-wait 2PL; no deadlocks to detect).
        txn_options.set_lock_timeout(0);
        txn_options.set_deadlock_detect(false);
        let txn = self.db.transaction_opt(&self.write_options, &txn_options);
        Ok(Box::new(RocksTxn { engine: self, txn: Some(txn), wrote: false, _slot: slot }))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        self.clock.is_durable(token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.clock.wait_durable(token, || self.db.flush_wal(true).map_err(err))
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }

    fn region(&self) -> Option<&pmem::Region> {
        None
    }

    /// RocksDB checks block checksums as it reads; this walks every table checking key order
    /// and row sizes. Page counts are not meaningful for an LSM tree and stay 0.
    fn check_integrity(&self) -> IntegrityResult {
        let mut report = IntegrityReport::default();
        for (id, spec) in self.catalog.specs().iter().enumerate() {
            let cf = self.family(&table_name(id as TableId)).map_err(|e| e.to_string())?;
            let rows = self.db.iterator_cf(&cf, IteratorMode::Start).map(|entry| {
                let (k, v) = entry.map_err(|e| format!("rocksdb: {e}"))?;
                let key: [u8; 8] = (*k)
                    .try_into()
                    .map_err(|_| format!("rocksdb: table {}: {}-byte key", spec.name, k.len()))?;
                Ok((u64::from_be_bytes(key), v.len()))
            });
            count_rows(&mut report, spec, rows)?;
        }
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        self.db.flush_wal(true).map_err(err)?;
        self.clock.all_durable();
        Ok(())
    }
}

struct RocksTxn<'a> {
    engine: &'a RocksEngine,
    /// `None` once committed or rolled back.
    txn: Option<Transaction<'a, Db>>,
    wrote: bool,
    _slot: WorkerSlot<'a>,
}

impl<'a> RocksTxn<'a> {
    fn table(&self, table: TableId) -> Result<TableRef<'a, String>> {
        self.engine.catalog.get(table)
    }

    fn txn(&self) -> Result<&Transaction<'a, Db>> {
        self.txn.as_ref().ok_or_else(|| DbError::Invalid("rocksdb: transaction ended".into()))
    }

    /// Locks `key` (shared or exclusive) and returns its current row.
    fn lock(
        &self,
        cf: &Arc<BoundColumnFamily<'_>>,
        table: TableId,
        key: u64,
        exclusive: bool,
    ) -> Result<Option<Vec<u8>>> {
        self.txn()?
            .get_for_update_cf(cf, key.to_be_bytes(), exclusive)
            .map_err(|e| lock_err(e, table, key))
    }
}

impl Txn for RocksTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let t = self.table(table)?;
        let cf = self.engine.family(t.handle())?;
        match self.lock(&cf, table, key, false)? {
            Some(row) => {
                out.extend_from_slice(&row);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        t.check_row(row)?;
        let cf = self.engine.family(t.handle())?;
        if self.lock(&cf, table, key, true)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        self.txn()?.put_cf(&cf, key.to_be_bytes(), row).map_err(|e| lock_err(e, table, key))?;
        self.wrote = true;
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        let cf = self.engine.family(t.handle())?;
        let Some(mut row) = self.lock(&cf, table, key, true)? else {
            return Ok(false);
        };
        let start = offset as usize;
        let Some(target) = row.get_mut(start..start + bytes.len()) else {
            return Err(DbError::Corrupt(format!(
                "rocksdb: table {table} key {key}: stored row has {} bytes",
                row.len()
            )));
        };
        target.copy_from_slice(bytes);
        self.txn()?.put_cf(&cf, key.to_be_bytes(), row).map_err(|e| lock_err(e, table, key))?;
        self.wrote = true;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.table(table)?;
        let cf = self.engine.family(t.handle())?;
        if self.lock(&cf, table, key, true)?.is_none() {
            return Ok(false);
        }
        self.txn()?.delete_cf(&cf, key.to_be_bytes()).map_err(|e| lock_err(e, table, key))?;
        self.wrote = true;
        Ok(true)
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
        let cf = self.engine.family(t.handle())?;
        let txn = self.txn()?;
        let mut it = txn.raw_iterator_cf_opt(&cf, ReadOptions::default());
        it.seek(low.to_be_bytes());
        let mut visited = 0;
        while let Some(k) = it.key() {
            let key: [u8; 8] = k
                .try_into()
                .map_err(|_| DbError::Corrupt(format!("rocksdb: {}-byte key", k.len())))?;
            let key = u64::from_be_bytes(key);
            if key > high {
                break;
            }
            // The locked value, not the iterator's: another transaction may have committed a
            // change (or a delete) between the two.
            if let Some(row) = self.lock(&cf, table, key, false)? {
                visited += 1;
                if !visit(key, &row) || visited == limit {
                    break;
                }
            }
            it.next();
        }
        it.status().map_err(err)?;
        Ok(visited)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let txn = self.txn.take().ok_or_else(|| DbError::Invalid("rocksdb: ended".into()))?;
        txn.commit().map_err(err)?;
        Ok(if self.wrote { self.engine.clock.token() } else { CommitToken::DURABLE })
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        match self.txn.take() {
            Some(txn) => txn.rollback().map_err(err),
            None => Ok(()),
        }
    }
}

//! RocksDB peer (cargo feature `rocksdb`, on by default; the system `librocksdb`, 7.x, through
//! its C API, see [`ffi`]): an LSM tree with a write-ahead log, the baseline of
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

mod ffi;

use ffi::{check, rocksdb_column_family_handle_t as RawCf, ErrorKind, Iter};
use parking_lot::Mutex;
use peer_common::{
    claim_dir, count_rows, decode_spec, encode_spec, peer_error, Catalog, CommitClock, DirClaim,
    TableRef, WorkerSlot, WorkerSlots,
};
use peer_common::{PeerDurability, PeerOptions};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::path::Path;
use std::time::Instant;
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

const ENGINE: &str = "rocksdb";
const CATALOG_PREFIX: &[u8] = b"nvmdb_catalog/";
const DEFAULT_FAMILY: &str = "default";

fn err(e: ffi::Error) -> DbError {
    match e.kind() {
        ErrorKind::Corruption => DbError::Corrupt(format!("rocksdb: {e}")),
        ErrorKind::Retry => peer_error(ENGINE, e, true),
        ErrorKind::Other => peer_error(ENGINE, e, false),
    }
}

/// A lock conflict on `key` becomes the trait's `Conflict`; other errors map as [`err`].
fn lock_err(e: ffi::Error, table: TableId, key: u64) -> DbError {
    match e.kind() {
        ErrorKind::Retry => DbError::Conflict { table, key },
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

fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| DbError::Invalid(format!("rocksdb: {s:?} has a NUL")))
}

/// A column family handle; valid until the engine closes.
#[derive(Clone, Copy)]
struct Cf(*mut RawCf);

// SAFETY: RocksDB column family handles are immutable and usable from any thread.
unsafe impl Send for Cf {}
// SAFETY: as above.
unsafe impl Sync for Cf {}

/// Everything created through the C API, destroyed in `Drop` after the database closes.
struct Raw {
    db: *mut ffi::rocksdb_transactiondb_t,
    options: *mut ffi::rocksdb_options_t,
    txn_db_options: *mut ffi::rocksdb_transactiondb_options_t,
    table_options: *mut ffi::rocksdb_block_based_table_options_t,
    cache: *mut ffi::rocksdb_cache_t,
    write: *mut ffi::rocksdb_writeoptions_t,
    sync_write: *mut ffi::rocksdb_writeoptions_t,
    read: *mut ffi::rocksdb_readoptions_t,
    txn: *mut ffi::rocksdb_transaction_options_t,
    /// Every column family handle by name (tables and `default`).
    families: Mutex<HashMap<String, Cf>>,
}

impl Drop for Raw {
    fn drop(&mut self) {
        // SAFETY: each object was created once and is destroyed once, handles before the
        // database closes, options after; no transaction outlives the engine.
        unsafe {
            for (_, cf) in self.families.get_mut().drain() {
                ffi::rocksdb_column_family_handle_destroy(cf.0);
            }
            if !self.db.is_null() {
                ffi::rocksdb_transactiondb_close(self.db);
            }
            ffi::rocksdb_transaction_options_destroy(self.txn);
            ffi::rocksdb_readoptions_destroy(self.read);
            ffi::rocksdb_writeoptions_destroy(self.sync_write);
            ffi::rocksdb_writeoptions_destroy(self.write);
            ffi::rocksdb_transactiondb_options_destroy(self.txn_db_options);
            ffi::rocksdb_options_destroy(self.options);
            ffi::rocksdb_block_based_options_destroy(self.table_options);
            ffi::rocksdb_cache_destroy(self.cache);
        }
    }
}

impl Raw {
    fn new(options: &PeerOptions) -> Raw {
        // SAFETY: plain constructors and setters on objects created here.
        unsafe {
            let o = ffi::rocksdb_options_create();
            ffi::rocksdb_options_set_create_if_missing(o, 1);
            ffi::rocksdb_options_set_create_missing_column_families(o, 1);
            let cache_bytes = usize::try_from(options.cache_bytes).unwrap_or(usize::MAX);
            let cache = ffi::rocksdb_cache_create_lru(cache_bytes);
            let table_options = ffi::rocksdb_block_based_options_create();
            ffi::rocksdb_block_based_options_set_block_cache(table_options, cache);
            ffi::rocksdb_options_set_block_based_table_factory(o, table_options);
            let write = ffi::rocksdb_writeoptions_create();
            ffi::rocksdb_writeoptions_set_sync(
                write,
                u8::from(options.durability == PeerDurability::Durable),
            );
            let sync_write = ffi::rocksdb_writeoptions_create();
            ffi::rocksdb_writeoptions_set_sync(sync_write, 1);
            let txn = ffi::rocksdb_transaction_options_create();
            // No wait: a held lock is a conflict at once (no-wait 2PL; no deadlocks to detect).
            ffi::rocksdb_transaction_options_set_lock_timeout(txn, 0);
            ffi::rocksdb_transaction_options_set_deadlock_detect(txn, 0);
            Raw {
                db: std::ptr::null_mut(),
                options: o,
                txn_db_options: ffi::rocksdb_transactiondb_options_create(),
                table_options,
                cache,
                write,
                sync_write,
                read: ffi::rocksdb_readoptions_create(),
                txn,
                families: Mutex::new(HashMap::new()),
            }
        }
    }

    /// Column families of the database in `dir` (`default` only for a new one).
    fn list_families(&self, dir: &CString) -> Result<Vec<String>> {
        let mut len = 0usize;
        // SAFETY: valid options and path; the list is ours to destroy.
        let list = check(|e| unsafe {
            ffi::rocksdb_list_column_families(self.options, dir.as_ptr(), &mut len, e)
        })
        .map_err(err)?;
        let mut names = Vec::with_capacity(len);
        for i in 0..len {
            // SAFETY: `list` holds `len` NUL-terminated names.
            let name = unsafe { std::ffi::CStr::from_ptr(*list.add(i)) };
            names.push(name.to_string_lossy().into_owned());
        }
        // SAFETY: destroyed once, with its length.
        unsafe { ffi::rocksdb_list_column_families_destroy(list, len) };
        Ok(names)
    }

    fn open(&mut self, dir: &CString, names: &[String]) -> Result<()> {
        let c_names = names.iter().map(|n| c_string(n)).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = c_names.iter().map(|n| n.as_ptr()).collect();
        let option_ptrs: Vec<*const ffi::rocksdb_options_t> =
            names.iter().map(|_| self.options as *const _).collect();
        let mut handles: Vec<*mut RawCf> = vec![std::ptr::null_mut(); names.len()];
        let count = i32::try_from(names.len())
            .map_err(|_| DbError::Corrupt("rocksdb: too many column families".into()))?;
        // SAFETY: arrays of `count` names, options and handle slots, all live for the call.
        let db = check(|e| unsafe {
            ffi::rocksdb_transactiondb_open_column_families(
                self.options,
                self.txn_db_options,
                dir.as_ptr(),
                count,
                name_ptrs.as_ptr(),
                option_ptrs.as_ptr(),
                handles.as_mut_ptr(),
                e,
            )
        })
        .map_err(err)?;
        self.db = db;
        let families = self.families.get_mut();
        for (name, handle) in names.iter().zip(handles) {
            families.insert(name.clone(), Cf(handle));
        }
        Ok(())
    }

    fn family(&self, name: &str) -> Option<Cf> {
        self.families.lock().get(name).copied()
    }
}

pub struct RocksEngine {
    raw: Raw,
    catalog: Catalog<Cf>,
    clock: CommitClock,
    slots: WorkerSlots,
    report: RecoveryReport,
    /// Held while the engine is open; after the fields above, so released after they close.
    _claim: DirClaim,
}

// SAFETY: a RocksDB TransactionDB and its option objects are thread-safe (options are only
// read after open); the family map is behind a mutex.
unsafe impl Send for RocksEngine {}
// SAFETY: as above.
unsafe impl Sync for RocksEngine {}

impl RocksEngine {
    /// Opens or creates the database in `dir`.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let started = Instant::now();
        let formatted = !dir.join("CURRENT").exists();
        let c_dir = CString::new(dir.as_os_str().as_encoded_bytes())
            .map_err(|_| DbError::Invalid(format!("rocksdb: {} has a NUL", dir.display())))?;
        let mut raw = Raw::new(options);
        let mut names =
            if formatted { vec![DEFAULT_FAMILY.to_string()] } else { raw.list_families(&c_dir)? };
        if !names.iter().any(|n| n == DEFAULT_FAMILY) {
            names.insert(0, DEFAULT_FAMILY.to_string());
        }
        raw.open(&c_dir, &names)?;
        let tables = load_catalog(&raw)?;
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
            raw,
            catalog: Catalog::new(tables),
            clock: CommitClock::new(options.durability == PeerDurability::Relaxed),
            slots: WorkerSlots::new(options.workers),
            report,
            _claim: claim,
        })
    }

    fn flush_wal(&self) -> Result<()> {
        // SAFETY: the database is open.
        check(|e| unsafe { ffi::rocksdb_transactiondb_flush_wal(self.raw.db, 1, e) }).map_err(err)
    }

    /// An iterator over family `cf` outside any transaction.
    fn iter(&self, cf: Option<Cf>) -> Iter {
        // SAFETY: the database and read options are live; the iterator is destroyed by `Iter`
        // before the engine closes (it borrows nothing past this engine's lifetime in use).
        Iter(unsafe {
            match cf {
                Some(cf) => {
                    ffi::rocksdb_transactiondb_create_iterator_cf(self.raw.db, self.raw.read, cf.0)
                }
                None => ffi::rocksdb_transactiondb_create_iterator(self.raw.db, self.raw.read),
            }
        })
    }
}

fn load_catalog(raw: &Raw) -> Result<Vec<(TableSpec, Cf)>> {
    let mut tables = Vec::new();
    // SAFETY: the database is open; the iterator is dropped at the end of this function.
    let mut it = Iter(unsafe { ffi::rocksdb_transactiondb_create_iterator(raw.db, raw.read) });
    it.seek(CATALOG_PREFIX);
    while let Some((key, value)) = it.entry() {
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
        let Some(cf) = raw.family(&name) else {
            return Err(DbError::Corrupt(format!("rocksdb: column family {name} missing")));
        };
        tables.push((decode_spec(value)?, cf));
        it.next();
    }
    it.status().map_err(err)?;
    Ok(tables)
}

impl Engine for RocksEngine {
    fn name(&self) -> &str {
        ENGINE
    }

    peer_common::peer_engine_methods!(durable_by: flush_wal);

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            let name = table_name(id);
            // A family left by a crash between its creation and the catalog entry is reused.
            let cf = match self.raw.family(&name) {
                Some(cf) => cf,
                None => {
                    let c_name = c_string(&name)?;
                    // SAFETY: the database and options are live.
                    let handle = check(|e| unsafe {
                        ffi::rocksdb_transactiondb_create_column_family(
                            self.raw.db,
                            self.raw.options,
                            c_name.as_ptr(),
                            e,
                        )
                    })
                    .map_err(err)?;
                    self.raw.families.lock().insert(name, Cf(handle));
                    Cf(handle)
                }
            };
            let key = catalog_key(id);
            let value = encode_spec(spec)?;
            // SAFETY: the database is open; key and value live for the call.
            check(|e| unsafe {
                ffi::rocksdb_transactiondb_put(
                    self.raw.db,
                    self.raw.sync_write,
                    key.as_ptr().cast(),
                    key.len(),
                    value.as_ptr().cast(),
                    value.len(),
                    e,
                )
            })
            .map_err(err)?;
            Ok(cf)
        })
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let slot = self.slots.claim(worker)?;
        // SAFETY: the database and options are live; the transaction is destroyed by RocksTxn.
        let txn = unsafe {
            ffi::rocksdb_transaction_begin(
                self.raw.db,
                self.raw.write,
                self.raw.txn,
                std::ptr::null_mut(),
            )
        };
        if txn.is_null() {
            return Err(peer_error(ENGINE, "could not begin a transaction", false));
        }
        Ok(Box::new(RocksTxn { engine: self, txn, wrote: false, _slot: slot }))
    }

    /// RocksDB checks block checksums as it reads; this walks every table checking key order
    /// and row sizes. Page counts are not meaningful for an LSM tree and stay 0.
    fn check_integrity(&self) -> IntegrityResult {
        let mut report = IntegrityReport::default();
        for id in 0..self.catalog.len() as TableId {
            let t = self.catalog.get(id).map_err(|e| e.to_string())?;
            let mut it = self.iter(Some(*t.handle()));
            it.seek_to_first();
            let mut rows = Vec::new();
            while let Some((k, v)) = it.entry() {
                let key: [u8; 8] = k.try_into().map_err(|_| {
                    format!("rocksdb: table {}: {}-byte key", t.spec().name, k.len())
                })?;
                rows.push(Ok((u64::from_be_bytes(key), v.len())));
                it.next();
            }
            it.status().map_err(|e| format!("rocksdb: {e}"))?;
            count_rows(&mut report, t.spec(), rows.into_iter())?;
        }
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        self.flush_wal()?;
        self.clock.all_durable();
        Ok(())
    }
}

struct RocksTxn<'a> {
    engine: &'a RocksEngine,
    /// Null once committed or rolled back.
    txn: *mut ffi::rocksdb_transaction_t,
    wrote: bool,
    _slot: WorkerSlot<'a>,
}

impl Drop for RocksTxn<'_> {
    fn drop(&mut self) {
        if !self.txn.is_null() {
            // SAFETY: a live transaction, destroyed once; RocksDB rolls back an uncommitted
            // transaction (releasing its locks) when it is destroyed.
            unsafe { ffi::rocksdb_transaction_destroy(self.txn) };
        }
    }
}

impl<'a> RocksTxn<'a> {
    fn table(&self, table: TableId) -> Result<TableRef<'a, Cf>> {
        self.engine.catalog.get(table)
    }

    fn txn(&self) -> Result<*mut ffi::rocksdb_transaction_t> {
        if self.txn.is_null() {
            return Err(DbError::Invalid("rocksdb: transaction ended".into()));
        }
        Ok(self.txn)
    }

    /// Locks `key` (shared or exclusive) and returns its current row.
    fn lock(&self, cf: Cf, table: TableId, key: u64, exclusive: bool) -> Result<Option<Vec<u8>>> {
        let txn = self.txn()?;
        let k = key.to_be_bytes();
        let mut len = 0usize;
        // SAFETY: a live transaction, family and read options; the value is ours to free.
        let value = check(|e| unsafe {
            ffi::rocksdb_transaction_get_for_update_cf(
                txn,
                self.engine.raw.read,
                cf.0,
                k.as_ptr().cast(),
                k.len(),
                &mut len,
                u8::from(exclusive),
                e,
            )
        })
        .map_err(|e| lock_err(e, table, key))?;
        // SAFETY: NULL (absent) or a malloc'd buffer of `len` bytes.
        Ok(unsafe { ffi::take_value(value, len) })
    }

    fn put(&mut self, cf: Cf, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let txn = self.txn()?;
        let k = key.to_be_bytes();
        // SAFETY: a live transaction and family; key and row live for the call.
        check(|e| unsafe {
            ffi::rocksdb_transaction_put_cf(
                txn,
                cf.0,
                k.as_ptr().cast(),
                k.len(),
                row.as_ptr().cast(),
                row.len(),
                e,
            )
        })
        .map_err(|e| lock_err(e, table, key))?;
        self.wrote = true;
        Ok(())
    }
}

impl Txn for RocksTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let cf = *self.table(table)?.handle();
        match self.lock(cf, table, key, false)? {
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
        let cf = *t.handle();
        if self.lock(cf, table, key, true)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        self.put(cf, table, key, row)
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        let cf = *t.handle();
        let Some(mut row) = self.lock(cf, table, key, true)? else {
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
        self.put(cf, table, key, &row)?;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let cf = *self.table(table)?.handle();
        if self.lock(cf, table, key, true)?.is_none() {
            return Ok(false);
        }
        let txn = self.txn()?;
        let k = key.to_be_bytes();
        // SAFETY: a live transaction and family; the key lives for the call.
        check(|e| unsafe {
            ffi::rocksdb_transaction_delete_cf(txn, cf.0, k.as_ptr().cast(), k.len(), e)
        })
        .map_err(|e| lock_err(e, table, key))?;
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
        let cf = *self.table(table)?.handle();
        if low > high || limit == 0 {
            return Ok(0);
        }
        let txn = self.txn()?;
        // SAFETY: a live transaction, read options and family; `Iter` destroys the iterator
        // before the transaction (it is dropped at the end of this call).
        let mut it = Iter(unsafe {
            ffi::rocksdb_transaction_create_iterator_cf(txn, self.engine.raw.read, cf.0)
        });
        it.seek(&low.to_be_bytes());
        let mut visited = 0;
        while let Some((k, _)) = it.entry() {
            let key: [u8; 8] = k
                .try_into()
                .map_err(|_| DbError::Corrupt(format!("rocksdb: {}-byte key", k.len())))?;
            let key = u64::from_be_bytes(key);
            if key > high {
                break;
            }
            // The locked value, not the iterator's: another transaction may have committed a
            // change (or a delete) between the two.
            if let Some(row) = self.lock(cf, table, key, false)? {
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
        let txn = self.txn()?;
        // SAFETY: a live transaction.
        let done = check(|e| unsafe { ffi::rocksdb_transaction_commit(txn, e) });
        // SAFETY: destroyed once; `txn` is cleared so Drop does not destroy it again.
        unsafe { ffi::rocksdb_transaction_destroy(txn) };
        self.txn = std::ptr::null_mut();
        done.map_err(err)?;
        Ok(if self.wrote { self.engine.clock.token() } else { CommitToken::DURABLE })
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        if self.txn.is_null() {
            return Ok(());
        }
        let txn = self.txn;
        // SAFETY: a live transaction, rolled back then destroyed once.
        let done = check(|e| unsafe { ffi::rocksdb_transaction_rollback(txn, e) });
        // SAFETY: as above.
        unsafe { ffi::rocksdb_transaction_destroy(txn) };
        self.txn = std::ptr::null_mut();
        done.map_err(err)
    }
}

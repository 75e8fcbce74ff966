//! PMDK `libpmemobj` peer (cargo feature `pmemobj`, on by default): the store a
//! persistent-memory user reaches for first. Its transactions keep an undo log and update data
//! in place, the method of nvmdb's `inplace` engine (In-Place Updates, Pelley et al., VLDB 2014,
//! §3.2), so the two compare the transaction machinery.
//!
//! **Layout.** One pool, `pool.obj` in the peer's directory (layout `nvmdb-peer-pmemobj`), made
//! at [`crate::PeerOptions::pmemobj_pool_bytes`] (fixed; a full pool is `RegionFull`). Its root object holds a magic number,
//! the format version and up to [`MAX_TABLES`] table slots (tree root, JSON table spec). Each
//! table is a B+tree of our own ([`tree`]): simple on purpose (no merging on delete, no
//! prefetching), see `docs/peers.md` for how much of the difference to `inplace` it explains.
//!
//! **Transactions.** A transaction buffers its writes in DRAM and applies them at commit in one
//! PMDK transaction (`pmemobj_tx_begin`, `pmemobj_tx_add_range_direct` before every store,
//! `pmemobj_tx_alloc`/`free`, `pmemobj_tx_commit`), so durability, atomicity and crash recovery
//! are PMDK's, and an abort never touches the pool. PMDK gives no isolation between concurrent
//! transactions (two undo logs over one node would undo each other), so the peer runs **one
//! writer** at a time: the first write takes the writer slot (bounded wait) and holds it until
//! the end; readers never wait for a writer, only for a commit being applied, which holds the
//! data latch exclusively. Each read checks that no commit happened since the transaction's
//! first read (else a retryable error), so every transaction sees one committed state.
//!
//! **Durability.** Every commit is durable when `commit` returns, in both
//! [`crate::PeerDurability`] modes (PMDK has no asynchronous commit): on a file that is not
//! persistent memory PMDK `msync`s what it flushes; with `PMEM_IS_PMEM_FORCE=1` it uses cache-line
//! flushes and fences, the semantics of nvmdb's `shm`/`file` media.
//!
//! Recovery invariant (PMDK's): `pmemobj_open` rolls back every transaction that had not
//! committed, from its undo log, before the pool is used.

mod ffi;
mod tree;

use ffi::{Oid, Tx};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard};
use peer_common::PeerOptions;
use peer_common::{
    claim_dir, count_rows, decode_spec, encode_spec, peer_error, Catalog, DirClaim, TableRef,
    WorkerSlot, WorkerSlots,
};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::mem::size_of;
use std::ops::Range;
use std::path::Path;
use std::time::{Duration, Instant};
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};
use tree::Pool;

pub(crate) const ENGINE: &str = "pmemobj";
const POOL_FILE: &str = "pool.obj";
const LAYOUT: &str = "nvmdb-peer-pmemobj";
const MAGIC: u64 = 0x6e76_6d64_6270_6d6f; // "nvmdbpmo"
const FORMAT_VERSION: u64 = 1;
/// Table slots in the root object.
pub const MAX_TABLES: usize = 128;
/// Longest table spec (JSON) the catalog accepts.
const MAX_SPEC_BYTES: u64 = 64 << 10;
const TYPE_SPEC: u64 = 1;
/// PMDK's smallest pool (`PMEMOBJ_MIN_POOL`).
const MIN_POOL_BYTES: u64 = 8 << 20;

#[repr(C)]
struct TableSlot {
    tree: Oid,
    spec: Oid,
    spec_len: u64,
    _reserved: u64,
}

#[repr(C)]
struct Root {
    magic: u64,
    version: u64,
    tables: u64,
    _reserved: u64,
    slots: [TableSlot; MAX_TABLES],
}

/// A table's slot number in the root object and its row size.
#[derive(Clone, Copy)]
struct Handle {
    slot: usize,
    row_bytes: usize,
}

pub struct PmemobjEngine {
    pool: Pool,
    root: *mut Root,
    /// Commits applied so far. Held shared by every read, exclusively while a commit applies.
    data: RwLock<u64>,
    /// The one writer slot.
    writer: Mutex<()>,
    writer_wait: Duration,
    catalog: Catalog<Handle>,
    slots: WorkerSlots,
    report: RecoveryReport,
    /// Held while the engine is open; after the fields above, so released after they close.
    _claim: DirClaim,
}

// SAFETY: the pool handle is PMDK's (thread-safe for use from any thread); every access to the
// mapping goes through `data` (shared for reads, exclusive for writes), and PMDK transactions
// begin and end inside one call on one thread.
unsafe impl Send for PmemobjEngine {}
// SAFETY: as above.
unsafe impl Sync for PmemobjEngine {}

impl Drop for PmemobjEngine {
    fn drop(&mut self) {
        // SAFETY: no transaction can outlive the engine (they borrow it); the pool is open.
        unsafe { ffi::pmemobj_close(self.pool.pop) };
    }
}

fn busy(what: String) -> DbError {
    peer_error(ENGINE, what, true)
}

fn stale() -> DbError {
    busy("another writer committed after this transaction read (one writer); run it again".into())
}

/// Opens `path`, or creates a sparse pool of `bytes` there; returns the handle and whether it
/// was created.
fn open_pool(path: &Path, bytes: u64) -> Result<(*mut std::ffi::c_void, bool)> {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| DbError::Invalid(format!("pmemobj: path {} has a NUL", path.display())))?;
    let layout = CString::new(LAYOUT).expect("no NUL in the layout name");
    if path.exists() {
        // SAFETY: valid C strings; PMDK runs its recovery here.
        let pop = unsafe { ffi::pmemobj_open(c_path.as_ptr(), layout.as_ptr()) };
        if pop.is_null() {
            let msg = ffi::last_error();
            return Err(if msg.contains("layout") {
                DbError::Format(format!("pmemobj: {}: {msg}", path.display()))
            } else {
                DbError::Corrupt(format!("pmemobj: cannot open {}: {msg}", path.display()))
            });
        }
        return Ok((pop, false));
    }
    if bytes < MIN_POOL_BYTES {
        return Err(DbError::Invalid(format!("pmemobj: pool_bytes must be ≥ {MIN_POOL_BYTES}")));
    }
    // Made here so that the file is new and of the asked size (PMDK then writes all of it).
    let io = |e: std::io::Error| DbError::Invalid(format!("pmemobj: {}: {e}", path.display()));
    std::fs::File::create_new(path).and_then(|f| f.set_len(bytes)).map_err(io)?;
    // SAFETY: valid C strings; size 0 takes the (zeroed) file's size.
    let pop = unsafe { ffi::pmemobj_create(c_path.as_ptr(), layout.as_ptr(), 0, 0o600) };
    if pop.is_null() {
        let msg = ffi::last_error();
        let _ = std::fs::remove_file(path);
        return Err(peer_error(ENGINE, format!("cannot create {}: {msg}", path.display()), false));
    }
    Ok((pop, true))
}

impl PmemobjEngine {
    /// Opens or creates the pool in `dir`; PMDK rolls back interrupted transactions.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let started = Instant::now();
        let path = dir.join(POOL_FILE);
        let (pop, formatted) = open_pool(&path, options.pmemobj_pool_bytes)?;
        // From here on `pop` must be closed on every error path: wrap it at once.
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        // SAFETY: `pop` is open; the root object is allocated zeroed on first use.
        let root_oid = unsafe { ffi::pmemobj_root(pop, size_of::<Root>()) };
        // SAFETY: `pop` is an open pool of `len` bytes mapped at `pop`.
        let pool = unsafe { Pool::new(pop, len, root_oid) };
        let mut engine = PmemobjEngine {
            pool,
            root: std::ptr::null_mut(),
            data: RwLock::new(0),
            writer: Mutex::new(()),
            writer_wait: options.writer_wait,
            catalog: Catalog::new(Vec::new()),
            slots: WorkerSlots::new(options.workers),
            report: RecoveryReport::default(),
            _claim: claim,
        };
        if root_oid.is_null() {
            return Err(ffi::tx_error("pmemobj_root", 12));
        }
        engine.root = engine.pool.at(root_oid, size_of::<Root>())? as *mut Root;
        engine.format_or_check()?;
        let tables = engine.load_catalog()?;
        let count = tables.len();
        engine.catalog = Catalog::new(tables);
        engine.report = RecoveryReport {
            formatted,
            duration: started.elapsed(),
            notes: vec![
                format!("{count} tables; pool {} MiB", len >> 20),
                "PMDK rolled back any interrupted transaction in pmemobj_open".into(),
            ],
            ..RecoveryReport::default()
        };
        Ok(engine)
    }

    fn root(&self) -> &Root {
        // SAFETY: `root` points at the root object (checked in `open`); callers hold `data`.
        unsafe { &*self.root }
    }

    fn format_or_check(&self) -> Result<()> {
        let root = self.root();
        if root.magic == 0 && root.version == 0 && root.tables == 0 {
            // SAFETY: PMDK transaction on this thread; the fields are in the root object.
            let mut tx = unsafe { Tx::begin(self.pool.pop)? };
            let r = self.root;
            // SAFETY: the header fields are in the pool; snapshotted before they are written.
            unsafe {
                tx.add(r.cast(), 3 * 8)?;
                (*r).magic = MAGIC;
                (*r).version = FORMAT_VERSION;
                (*r).tables = 0;
            }
            return tx.commit();
        }
        if root.magic != MAGIC {
            return Err(DbError::Format(format!(
                "pmemobj: root magic {:#x} is not an nvmdb pool",
                root.magic
            )));
        }
        if root.version != FORMAT_VERSION {
            return Err(DbError::Format(format!(
                "pmemobj: format version {} (this build reads {FORMAT_VERSION})",
                root.version
            )));
        }
        Ok(())
    }

    fn load_catalog(&self) -> Result<Vec<(TableSpec, Handle)>> {
        let root = self.root();
        if root.tables > MAX_TABLES as u64 {
            return Err(DbError::Corrupt(format!("pmemobj: {} tables", root.tables)));
        }
        let mut tables = Vec::new();
        for (i, slot) in root.slots[..root.tables as usize].iter().enumerate() {
            if slot.spec_len > MAX_SPEC_BYTES {
                return Err(DbError::Corrupt(format!("pmemobj: table {i}: spec too long")));
            }
            let at = self.pool.at(slot.spec, slot.spec_len as usize)?;
            // SAFETY: in the pool (checked by `at`); nothing writes it while the engine opens.
            let bytes = unsafe { std::slice::from_raw_parts(at, slot.spec_len as usize) };
            let spec = decode_spec(bytes)?;
            let handle = Handle { slot: i, row_bytes: spec.row_bytes as usize };
            tables.push((spec, handle));
        }
        Ok(tables)
    }

    fn tree_slot(&self, h: Handle) -> *mut Oid {
        // SAFETY: `h.slot < MAX_TABLES` (set by the catalog); a field address, no access.
        unsafe { std::ptr::addr_of_mut!((*self.root).slots[h.slot].tree) }
    }

    fn tree(&self, h: Handle) -> Oid {
        // SAFETY: see `tree_slot`; the caller holds `data`.
        unsafe { *self.tree_slot(h) }
    }

    fn acquire_writer(&self) -> Result<MutexGuard<'_, ()>> {
        self.writer.try_lock_for(self.writer_wait).ok_or_else(|| {
            busy(format!("another writer held the single writer slot for {:?}", self.writer_wait))
        })
    }

    /// The row bytes of `oid`, borrowed from the pool while `_latch` is held.
    fn row<'g>(
        &self,
        _latch: &'g RwLockReadGuard<'_, u64>,
        oid: Oid,
        len: usize,
    ) -> Result<&'g [u8]> {
        let at = self.pool.at(oid, len)?;
        // SAFETY: in the pool; the latch keeps writers out while the slice lives.
        Ok(unsafe { std::slice::from_raw_parts(at, len) })
    }

    /// Applies a committing transaction's writes in one PMDK transaction.
    fn apply(&self, writes: &BTreeMap<TableId, BTreeMap<u64, Pending>>) -> Result<()> {
        // SAFETY: no PMDK transaction is open on this thread (they live only inside calls).
        let mut tx = unsafe { Tx::begin(self.pool.pop)? };
        for (&table, rows) in writes {
            let t = self.catalog.get(table)?;
            let h = *t.handle();
            for (&key, pending) in rows {
                let existing = self.pool.get(self.tree(h), key)?;
                match (pending, existing) {
                    (Pending::Put { row, dirty }, Some(oid)) => {
                        let at = self.pool.at(oid, h.row_bytes)?;
                        // SAFETY: the row lies in the pool; the range is snapshotted first.
                        unsafe {
                            let target = at.add(dirty.start);
                            tx.add(target, dirty.len())?;
                            std::ptr::copy_nonoverlapping(
                                row[dirty.clone()].as_ptr(),
                                target,
                                dirty.len(),
                            );
                        }
                    }
                    (Pending::Put { row, .. }, None) => {
                        let oid = tx.alloc(h.row_bytes, tree::TYPE_ROW, false)?;
                        let at = self.pool.at(oid, h.row_bytes)?;
                        // SAFETY: a fresh object of this transaction, `row_bytes` long.
                        unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), at, h.row_bytes) };
                        self.pool.insert(&mut tx, self.tree_slot(h), key, oid)?;
                    }
                    (Pending::Delete, Some(_)) => {
                        if let Some(oid) = self.pool.remove(&mut tx, self.tree(h), key)? {
                            tx.free(oid)?;
                        }
                    }
                    (Pending::Delete, None) => {}
                }
            }
        }
        tx.commit()
    }
}

impl Engine for PmemobjEngine {
    fn name(&self) -> &str {
        ENGINE
    }

    peer_common::peer_engine_methods!(always_durable);

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            let slot = id as usize;
            if slot >= MAX_TABLES {
                return Err(DbError::Invalid(format!("pmemobj: at most {MAX_TABLES} tables")));
            }
            let encoded = encode_spec(spec)?;
            let _writer = self.acquire_writer()?;
            let _data = self.data.write();
            // SAFETY: no PMDK transaction is open on this thread.
            let mut tx = unsafe { Tx::begin(self.pool.pop)? };
            let spec_oid = tx.alloc(encoded.len(), TYPE_SPEC, false)?;
            let at = self.pool.at(spec_oid, encoded.len())?;
            let r = self.root;
            // SAFETY: the spec object is new; the slot and the table count are in the root
            // object and snapshotted before they are written; `data` is held exclusively.
            unsafe {
                std::ptr::copy_nonoverlapping(encoded.as_ptr(), at, encoded.len());
                let s = std::ptr::addr_of_mut!((*r).slots[slot]);
                tx.add(s.cast(), size_of::<TableSlot>())?;
                tx.add(std::ptr::addr_of!((*r).tables).cast(), 8)?;
                (*s).tree = Oid::NULL;
                (*s).spec = spec_oid;
                (*s).spec_len = encoded.len() as u64;
                (*r).tables = slot as u64 + 1;
            }
            tx.commit()?;
            Ok(Handle { slot, row_bytes: spec.row_bytes as usize })
        })
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let slot = self.slots.claim(worker)?;
        Ok(Box::new(PmemobjTxn {
            engine: self,
            stamp: None,
            writer: None,
            writes: BTreeMap::new(),
            _slot: slot,
        }))
    }

    /// Walks every tree (node kinds, counts, pointers in the pool, depth) and every row in key
    /// order; `pages_in_use` counts B+tree nodes.
    fn check_integrity(&self) -> IntegrityResult {
        let latch = self.data.read();
        let mut report = IntegrityReport::default();
        for id in 0..self.catalog.len() as TableId {
            let t = self.catalog.get(id).map_err(|e| e.to_string())?;
            let h = *t.handle();
            let root = self.tree(h);
            let mut rows = Vec::new();
            self.pool
                .scan(root, 0, u64::MAX, &mut |key, oid| {
                    self.row(&latch, oid, h.row_bytes)?;
                    rows.push(Ok((key, h.row_bytes)));
                    Ok(true)
                })
                .map_err(|e| e.to_string())?;
            count_rows(&mut report, t.spec(), rows.into_iter())?;
            report.pages_in_use += self.pool.count_nodes(root).map_err(|e| e.to_string())?;
        }
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        // Every commit is durable already; waiting for the writer slot lets a running writer
        // finish first.
        drop(self.acquire_writer()?);
        Ok(())
    }
}

/// A buffered write: the row's new bytes (and which of them changed), or a delete.
enum Pending {
    Put { row: Vec<u8>, dirty: Range<usize> },
    Delete,
}

struct PmemobjTxn<'a> {
    engine: &'a PmemobjEngine,
    /// Commit count when the transaction first read; every later read must see the same.
    stamp: Option<u64>,
    writer: Option<MutexGuard<'a, ()>>,
    writes: BTreeMap<TableId, BTreeMap<u64, Pending>>,
    _slot: WorkerSlot<'a>,
}

impl<'a> PmemobjTxn<'a> {
    fn table(&self, table: TableId) -> Result<TableRef<'a, Handle>> {
        self.engine.catalog.get(table)
    }

    /// Takes the data latch shared, checking the committed state is the one this transaction
    /// has been reading.
    fn latch(&mut self) -> Result<RwLockReadGuard<'a, u64>> {
        let latch = self.engine.data.read();
        match self.stamp {
            None => self.stamp = Some(*latch),
            Some(s) if s != *latch => return Err(stale()),
            Some(_) => {}
        }
        Ok(latch)
    }

    /// Takes the writer slot at the first write.
    fn write_access(&mut self) -> Result<()> {
        if self.writer.is_none() {
            let guard = self.engine.acquire_writer()?;
            let committed = *self.engine.data.read();
            if self.stamp.is_some_and(|s| s != committed) {
                return Err(stale());
            }
            self.stamp = Some(committed);
            self.writer = Some(guard);
        }
        Ok(())
    }

    /// The row of `key` as this transaction sees it.
    fn current(&mut self, table: TableId, h: Handle, key: u64) -> Result<Option<Vec<u8>>> {
        if let Some(p) = self.writes.get(&table).and_then(|m| m.get(&key)) {
            return Ok(match p {
                Pending::Put { row, .. } => Some(row.clone()),
                Pending::Delete => None,
            });
        }
        let latch = self.latch()?;
        let engine = self.engine;
        match engine.pool.get(engine.tree(h), key)? {
            Some(oid) => Ok(Some(engine.row(&latch, oid, h.row_bytes)?.to_vec())),
            None => Ok(None),
        }
    }

    fn exists(&mut self, table: TableId, h: Handle, key: u64) -> Result<bool> {
        if let Some(p) = self.writes.get(&table).and_then(|m| m.get(&key)) {
            return Ok(matches!(p, Pending::Put { .. }));
        }
        let _latch = self.latch()?;
        Ok(self.engine.pool.get(self.engine.tree(h), key)?.is_some())
    }
}

impl Txn for PmemobjTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let h = *self.table(table)?.handle();
        if let Some(p) = self.writes.get(&table).and_then(|m| m.get(&key)) {
            if let Pending::Put { row, .. } = p {
                out.extend_from_slice(row);
                return Ok(true);
            }
            return Ok(false);
        }
        let latch = self.latch()?;
        let engine = self.engine;
        match engine.pool.get(engine.tree(h), key)? {
            Some(oid) => {
                out.extend_from_slice(engine.row(&latch, oid, h.row_bytes)?);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        t.check_row(row)?;
        let h = *t.handle();
        self.write_access()?;
        if self.exists(table, h, key)? {
            return Err(DbError::Duplicate { table, key });
        }
        let pending = Pending::Put { row: row.to_vec(), dirty: 0..row.len() };
        self.writes.entry(table).or_default().insert(key, pending);
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        let h = *t.handle();
        self.write_access()?;
        let start = offset as usize;
        let end = start + bytes.len();
        let rows = self.writes.entry(table).or_default();
        if let Some(p) = rows.get_mut(&key) {
            return Ok(match p {
                Pending::Put { row, dirty } => {
                    row[start..end].copy_from_slice(bytes);
                    *dirty = dirty.start.min(start)..dirty.end.max(end);
                    true
                }
                Pending::Delete => false,
            });
        }
        let Some(mut row) = self.current(table, h, key)? else {
            return Ok(false);
        };
        row[start..end].copy_from_slice(bytes);
        let pending = Pending::Put { row, dirty: start..end };
        self.writes.entry(table).or_default().insert(key, pending);
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let h = *self.table(table)?.handle();
        self.write_access()?;
        if !self.exists(table, h, key)? {
            return Ok(false);
        }
        self.writes.entry(table).or_default().insert(key, Pending::Delete);
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
        let h = *self.table(table)?.handle();
        if low > high || limit == 0 {
            return Ok(0);
        }
        let latch = self.latch()?;
        let engine = self.engine;
        let mut pending =
            self.writes.get(&table).map(|m| m.range(low..=high)).into_iter().flatten().peekable();
        let visited = Cell::new(0);
        let stopped = Cell::new(false);
        // Visits one row; false once the caller or the limit says stop.
        let mut emit = |key: u64, row: &[u8]| {
            visited.set(visited.get() + 1);
            let go = visit(key, row) && visited.get() < limit;
            stopped.set(!go);
            go
        };
        engine.pool.scan(engine.tree(h), low, high, &mut |key, oid| {
            while let Some(&(&k, p)) = pending.peek() {
                if k > key {
                    break;
                }
                pending.next();
                match p {
                    Pending::Put { row, .. } => {
                        if !emit(k, row) {
                            return Ok(false);
                        }
                    }
                    Pending::Delete => {}
                }
                if k == key {
                    return Ok(true); // this transaction's version replaced the stored row
                }
            }
            Ok(emit(key, engine.row(&latch, oid, h.row_bytes)?))
        })?;
        if !stopped.get() {
            for (&k, p) in pending {
                if let Pending::Put { row, .. } = p {
                    if !emit(k, row) {
                        break;
                    }
                }
            }
        }
        Ok(visited.get())
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        if self.writes.is_empty() {
            return Ok(CommitToken::DURABLE);
        }
        if self.writer.is_none() {
            return Err(DbError::Invalid("pmemobj: writes without the writer slot".into()));
        }
        let writes = std::mem::take(&mut self.writes);
        let mut data = self.engine.data.write();
        self.engine.apply(&writes)?;
        *data += 1;
        drop(data);
        self.writer = None;
        Ok(CommitToken::DURABLE)
    }

    fn abort(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

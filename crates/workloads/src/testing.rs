//! Engines for testing workloads and the driver before (and beside) the real ones (docs/design.md
//! §5, §7): [`MemEngine`], a correct volatile engine with the locking every engine shares (strict
//! two-phase key locks, no-wait conflicts), and [`NoopEngine`], which does nothing, for
//! measuring the driver's own overhead.
//!
//! Invariant (MemEngine): a transaction's effects are visible to others only after commit, every
//! key it touched stays locked until commit or abort, and abort restores every before-image.

use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use storage::engine::{check_row, check_spec, check_update};
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

#[derive(Debug)]
enum Lock {
    Shared(Vec<u64>),
    Exclusive(u64),
}

#[derive(Default)]
struct TableState {
    rows: BTreeMap<u64, Box<[u8]>>,
    locks: HashMap<u64, Lock>,
}

struct MemTable {
    spec: TableSpec,
    state: Mutex<TableState>,
}

/// A correct, volatile, in-memory engine: one `BTreeMap` per table, key-level strict 2PL with
/// no-wait conflicts ([`DbError::Conflict`]), undo on abort, every commit durable at once.
#[derive(Default)]
pub struct MemEngine {
    tables: RwLock<Vec<Arc<MemTable>>>,
    next_txn: AtomicU64,
    commits: AtomicU64,
    aborts: AtomicU64,
}

impl MemEngine {
    pub fn new() -> Self {
        Self::default()
    }

    /// Locks currently held by any transaction (0 when the engine is quiet: a leak test).
    pub fn locks_held(&self) -> usize {
        self.tables.read().iter().map(|t| t.state.lock().locks.len()).sum()
    }

    /// Rows in a table.
    pub fn row_count(&self, table: TableId) -> Option<usize> {
        self.tables.read().get(table as usize).map(|t| t.state.lock().rows.len())
    }

    /// Transactions committed and aborted so far.
    pub fn txn_counts(&self) -> (u64, u64) {
        (self.commits.load(Ordering::Relaxed), self.aborts.load(Ordering::Relaxed))
    }

    fn table(&self, table: TableId) -> Result<Arc<MemTable>> {
        self.tables.read().get(table as usize).cloned().ok_or(DbError::NoSuchTable(table))
    }
}

impl Engine for MemEngine {
    fn name(&self) -> &str {
        "mem"
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let mut tables = self.tables.write();
        if tables.iter().any(|t| t.spec.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} already exists", spec.name)));
        }
        let id = TableId::try_from(tables.len())
            .map_err(|_| DbError::Invalid("too many tables".to_string()))?;
        tables.push(Arc::new(MemTable { spec: spec.clone(), state: Mutex::default() }));
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        let tables = self.tables.read();
        tables.iter().position(|t| t.spec.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.tables.read().iter().map(|t| t.spec.clone()).collect()
    }

    fn begin(&self, _worker: usize) -> Result<Box<dyn Txn + '_>> {
        let id = self.next_txn.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Box::new(MemTxn { engine: self, id, held: Vec::new(), undo: Vec::new(), done: false }))
    }

    fn is_durable(&self, _token: CommitToken) -> bool {
        true
    }

    fn wait_durable(&self, _token: CommitToken) -> Result<()> {
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport { formatted: true, ..RecoveryReport::default() }
    }

    fn region(&self) -> Option<&pmem::Region> {
        None
    }

    fn check_integrity(&self) -> IntegrityResult {
        let tables = self.tables.read();
        let mut rows = 0u64;
        for t in tables.iter() {
            let state = t.state.lock();
            for (key, row) in &state.rows {
                if row.len() != t.spec.row_bytes as usize {
                    return Err(format!(
                        "table {} key {key}: {} bytes, spec says {}",
                        t.spec.name,
                        row.len(),
                        t.spec.row_bytes
                    ));
                }
            }
            rows += state.rows.len() as u64;
        }
        Ok(IntegrityReport { tables: tables.len() as u64, rows, ..IntegrityReport::default() })
    }

    fn shutdown(&self) -> Result<()> {
        Ok(())
    }
}

struct Undo {
    table: TableId,
    key: u64,
    before: Option<Box<[u8]>>,
}

struct MemTxn<'a> {
    engine: &'a MemEngine,
    id: u64,
    /// Every key this transaction holds a lock on, once each.
    held: Vec<(TableId, u64)>,
    undo: Vec<Undo>,
    done: bool,
}

/// Rows a scan copies per table-latch acquisition.
const SCAN_BATCH: usize = 64;

impl MemTxn<'_> {
    /// Takes (or upgrades to) a lock on `key`, no-wait.
    fn lock(
        &mut self,
        table: TableId,
        state: &mut TableState,
        key: u64,
        exclusive: bool,
    ) -> Result<()> {
        let me = self.id;
        match state.locks.get_mut(&key) {
            None => {
                let lock = if exclusive { Lock::Exclusive(me) } else { Lock::Shared(vec![me]) };
                state.locks.insert(key, lock);
                self.held.push((table, key));
                Ok(())
            }
            Some(Lock::Exclusive(owner)) => {
                if *owner == me {
                    Ok(())
                } else {
                    Err(DbError::Conflict { table, key })
                }
            }
            Some(Lock::Shared(holders)) => {
                let mine = holders.contains(&me);
                if !exclusive {
                    if !mine {
                        holders.push(me);
                        self.held.push((table, key));
                    }
                    Ok(())
                } else if mine && holders.len() == 1 {
                    state.locks.insert(key, Lock::Exclusive(me));
                    Ok(())
                } else {
                    Err(DbError::Conflict { table, key })
                }
            }
        }
    }

    fn release_all(&mut self) {
        let tables = self.engine.tables.read();
        for (table, key) in self.held.drain(..) {
            let Some(t) = tables.get(table as usize) else { continue };
            let mut state = t.state.lock();
            let remove = match state.locks.get_mut(&key) {
                Some(Lock::Exclusive(owner)) => *owner == self.id,
                Some(Lock::Shared(holders)) => {
                    holders.retain(|h| *h != self.id);
                    holders.is_empty()
                }
                None => false,
            };
            if remove {
                state.locks.remove(&key);
            }
        }
    }

    fn rollback(&mut self) {
        let tables = self.engine.tables.read();
        while let Some(u) = self.undo.pop() {
            let Some(t) = tables.get(u.table as usize) else { continue };
            let mut state = t.state.lock();
            match u.before {
                Some(row) => state.rows.insert(u.key, row),
                None => state.rows.remove(&u.key),
            };
        }
    }

    fn finish(&mut self, commit: bool) {
        if self.done {
            return;
        }
        if !commit {
            self.rollback();
        }
        self.release_all();
        self.done = true;
        let counter = if commit { &self.engine.commits } else { &self.engine.aborts };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl Txn for MemTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let t = self.engine.table(table)?;
        let mut state = t.state.lock();
        self.lock(table, &mut state, key, false)?;
        match state.rows.get(&key) {
            Some(row) => {
                out.extend_from_slice(row);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.engine.table(table)?;
        check_row(table, &t.spec, row)?;
        let mut state = t.state.lock();
        self.lock(table, &mut state, key, true)?;
        if state.rows.contains_key(&key) {
            return Err(DbError::Duplicate { table, key });
        }
        state.rows.insert(key, row.into());
        self.undo.push(Undo { table, key, before: None });
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.engine.table(table)?;
        check_update(table, &t.spec, offset, bytes.len())?;
        let mut state = t.state.lock();
        self.lock(table, &mut state, key, true)?;
        let Some(row) = state.rows.get_mut(&key) else { return Ok(false) };
        let before = row.clone();
        row[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        self.undo.push(Undo { table, key, before: Some(before) });
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.engine.table(table)?;
        let mut state = t.state.lock();
        self.lock(table, &mut state, key, true)?;
        match state.rows.remove(&key) {
            Some(before) => {
                self.undo.push(Undo { table, key, before: Some(before) });
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.engine.table(table)?;
        let mut visited = 0usize;
        let mut cursor = low;
        let mut batch: Vec<(u64, Box<[u8]>)> = Vec::with_capacity(SCAN_BATCH);
        while visited < limit && cursor <= high {
            batch.clear();
            {
                let mut state = t.state.lock();
                let want = SCAN_BATCH.min(limit - visited);
                let keys: Vec<u64> =
                    state.rows.range(cursor..=high).take(want).map(|(k, _)| *k).collect();
                for key in keys {
                    self.lock(table, &mut state, key, false)?;
                    if let Some(row) = state.rows.get(&key) {
                        batch.push((key, row.clone()));
                    }
                }
            }
            if batch.is_empty() {
                break;
            }
            // The visitor runs without the table latch: it may be slow, and must not deadlock
            // with anything it calls.
            for (key, row) in &batch {
                visited += 1;
                if !visit(*key, row) {
                    return Ok(visited);
                }
            }
            match batch.last() {
                Some((last, _)) if *last < high => cursor = last + 1,
                _ => break,
            }
        }
        Ok(visited)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        self.finish(true);
        Ok(CommitToken::DURABLE)
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        self.finish(false);
        Ok(())
    }
}

impl Drop for MemTxn<'_> {
    fn drop(&mut self) {
        self.finish(false);
    }
}

/// An engine that does nothing: every operation succeeds at once, reads return a zeroed row of
/// the table's size, scans visit one zeroed row at `low` (when `limit > 0`) so that workloads
/// exercise their "found" paths, and commits are durable. Workloads must run on it without
/// panicking; their checkers will (rightly) fail.
pub struct NoopEngine {
    tables: RwLock<Vec<TableSpec>>,
    /// Row sizes by table id, read by transactions without a lock or a reference count: the
    /// driver's own overhead, which this engine measures, must not include a shared write per
    /// transaction (an `RwLock` read and an `Arc` clone here capped it at 4.6x on 16 threads).
    sizes: Box<[OnceLock<u32>]>,
}

/// Tables a noop engine holds.
const NOOP_MAX_TABLES: usize = 4096;

impl Default for NoopEngine {
    fn default() -> Self {
        NoopEngine {
            tables: RwLock::default(),
            sizes: (0..NOOP_MAX_TABLES).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl NoopEngine {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Engine for NoopEngine {
    fn name(&self) -> &str {
        "noop"
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let mut tables = self.tables.write();
        if tables.iter().any(|t| t.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} already exists", spec.name)));
        }
        let id = tables.len();
        if id >= NOOP_MAX_TABLES {
            return Err(DbError::Invalid(format!("noop: at most {NOOP_MAX_TABLES} tables")));
        }
        tables.push(spec.clone());
        let _ = self.sizes[id].set(spec.row_bytes);
        Ok(id as TableId)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.tables.read().iter().position(|t| t.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.tables.read().clone()
    }

    fn begin(&self, _worker: usize) -> Result<Box<dyn Txn + '_>> {
        Ok(Box::new(NoopTxn { sizes: &self.sizes, zeros: Vec::new() }))
    }

    fn is_durable(&self, _token: CommitToken) -> bool {
        true
    }

    fn wait_durable(&self, _token: CommitToken) -> Result<()> {
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport { formatted: true, ..RecoveryReport::default() }
    }

    fn region(&self) -> Option<&pmem::Region> {
        None
    }

    fn check_integrity(&self) -> IntegrityResult {
        Ok(IntegrityReport {
            tables: self.tables.read().len() as u64,
            ..IntegrityReport::default()
        })
    }

    fn shutdown(&self) -> Result<()> {
        Ok(())
    }
}

struct NoopTxn<'a> {
    sizes: &'a [OnceLock<u32>],
    zeros: Vec<u8>,
}

impl NoopTxn<'_> {
    fn size(&self, table: TableId) -> Result<usize> {
        let size = self.sizes.get(table as usize).and_then(|s| s.get());
        size.map(|s| *s as usize).ok_or(DbError::NoSuchTable(table))
    }
}

impl Txn for NoopTxn<'_> {
    fn read(&mut self, table: TableId, _key: u64, out: &mut Vec<u8>) -> Result<bool> {
        let n = self.size(table)?;
        out.clear();
        out.resize(n, 0);
        Ok(true)
    }

    fn insert(&mut self, table: TableId, _key: u64, _row: &[u8]) -> Result<()> {
        self.size(table).map(|_| ())
    }

    fn update(&mut self, table: TableId, _key: u64, _offset: u32, _bytes: &[u8]) -> Result<bool> {
        self.size(table).map(|_| true)
    }

    fn delete(&mut self, table: TableId, _key: u64) -> Result<bool> {
        self.size(table).map(|_| true)
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let n = self.size(table)?;
        if limit == 0 || low > high {
            return Ok(0);
        }
        self.zeros.resize(n, 0);
        visit(low, &self.zeros);
        Ok(1)
    }

    fn commit(self: Box<Self>) -> Result<CommitToken> {
        Ok(CommitToken::DURABLE)
    }

    fn abort(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

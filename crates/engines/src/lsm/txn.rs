//! `lsm` transactions: writes buffered in the transaction and applied at commit
//! ([`Lsm::commit_writes`]) under key-level strict 2PL (point writes wait-die with bounded
//! waits, `storage::lock`; scans no-wait); point reads optimistic (Silo,
//! Tu et al. SOSP 2013 §4.4, through `storage::lock`'s stripe words, as `inplace`): no lock-table
//! entry, nothing shared written (the engine state through this worker's reader word), validated
//! by every later read and again before the commit applies its writes, so serializable; reads
//! merged from the write set, the memtable and the runs, newest first. Scans keep shared locks.
//!
//! Invariant: nothing a transaction writes reaches the memtable or the log before its commit,
//! so abort (or drop) only releases locks, and the keys it locked keep their versions.

use super::memtable::{Node, NvmMem};
use super::run::Run;
use super::{Lsm, Mem, State, WriteSet};
use pmem::Region;
use std::collections::btree_map::Range;
use std::sync::atomic::Ordering;
use storage::alloc::FreeingScope;
use storage::engine::{check_row, check_update};
use storage::lock::{LockMode, LockSet};
use storage::{CommitToken, DbError, Result, TableId, TableSpec, Txn};

pub(crate) struct LsmTxn<'e> {
    engine: &'e Lsm,
    id: u64,
    /// Whose reader word of the engine state its reads take.
    worker: usize,
    locks: LockSet,
    writes: WriteSet,
    /// It inserted or updated a row outside a `FreeingScope`: its flush may not use the
    /// reserve kept for deletes.
    grows: bool,
}

impl<'e> LsmTxn<'e> {
    pub fn new(engine: &'e Lsm, id: u64, worker: usize) -> Self {
        // Aged by its begin time: its point writes wait (wait-die, bounded) for a holder
        // instead of aborting at once.
        let locks = LockSet::aged(pmem::timing::rdtsc());
        LsmTxn { engine, id, worker, locks, writes: WriteSet::new(), grows: false }
    }

    /// A point write's lock: waits for the holder, bounded (`storage::lock`'s wait-die). The
    /// caller holds no reader word of the engine state, so a wait blocks no flush.
    fn lock(&mut self, table: TableId, key: u64, mode: LockMode) -> Result<()> {
        self.locks.lock_or_wait(&self.engine.locks, self.id, table, key, mode)
    }

    fn spec(&self, table: TableId) -> Result<TableSpec> {
        let st = self.engine.read_state_of(self.worker);
        self.engine.table_spec(&st, table)
    }

    /// The row as this transaction sees it (its own writes first).
    fn visible(&self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        if let Some(v) = self.writes.get(&(table, key)) {
            out.clear();
            if let Some(v) = v {
                out.extend_from_slice(v);
            }
            return Ok(v.is_some());
        }
        let st = self.engine.read_state_of(self.worker);
        self.engine.get(&st, table, key, out)
    }

    /// `applied`: whether its writes may have reached the memtable (the keys it wrote get new
    /// versions); otherwise they keep the versions their optimistic readers saw.
    fn release(&mut self, applied: bool) {
        if applied {
            self.locks.release_all(&self.engine.locks, self.id);
        } else {
            self.locks.release_after_rollback(&self.engine.locks, self.id);
        }
    }
}

impl Drop for LsmTxn<'_> {
    fn drop(&mut self) {
        // Idempotent: a commit or abort has released everything already.
        self.release(false);
    }
}

impl Txn for LsmTxn<'_> {
    /// Optimistic (see the module doc); a key this transaction wrote is its own write, under
    /// its exclusive lock.
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        if let Some(v) = self.writes.get(&(table, key)) {
            out.clear();
            if let Some(v) = v {
                out.extend_from_slice(v);
            }
            return Ok(v.is_some());
        }
        let (engine, worker) = (self.engine, self.worker);
        // Waits for a committing writer of the key first: writers here hold locks only from
        // their write to their commit's end, and a shared lock would make the next one die.
        self.locks.read_optimistic_or_wait(&engine.locks, self.id, table, key, || {
            let st = engine.read_state_of(worker);
            engine.table_spec(&st, table)?;
            engine.get(&st, table, key, out)
        })
    }

    /// The key's exclusive lock first (waited for, wait-die), then the read under it.
    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.lock(table, key, LockMode::Exclusive)?;
        self.read(table, key, out)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let spec = self.spec(table)?;
        check_row(table, &spec, row)?;
        self.lock(table, key, LockMode::Exclusive)?;
        let mut cur = Vec::new();
        if self.visible(table, key, &mut cur)? {
            return Err(DbError::Duplicate { table, key });
        }
        self.writes.insert((table, key), Some(row.to_vec()));
        self.grows |= !FreeingScope::active();
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let spec = self.spec(table)?;
        check_update(table, &spec, offset, bytes.len())?;
        self.lock(table, key, LockMode::Exclusive)?;
        let mut row = Vec::new();
        if !self.visible(table, key, &mut row)? {
            return Ok(false);
        }
        row[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        self.writes.insert((table, key), Some(row));
        self.grows |= !FreeingScope::active();
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        self.spec(table)?;
        self.lock(table, key, LockMode::Exclusive)?;
        let mut row = Vec::new();
        if !self.visible(table, key, &mut row)? {
            return Ok(false);
        }
        self.writes.insert((table, key), None);
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
        self.spec(table)?;
        if low > high || limit == 0 {
            return Ok(0);
        }
        let engine = self.engine;
        let st = engine.read_state_of(self.worker);
        // `Acquire`: every commit this names is linked, so the cursor sees it.
        let seq_at_start = st.committed_seq.load(Ordering::Acquire);
        let mut cursor = ScanCursor::new(engine, &st, Some(&self.writes), table, low, high)?;
        let mut visited = 0;
        let mut fresh = Vec::new();
        while let Some((key, value)) = cursor.next()? {
            // Lock every key met, deleted or not, so that a scan conflicts with an uncommitted
            // delete or update of it (as a read would).
            self.locks.lock(&engine.locks, self.id, table, key, LockMode::Shared)?;
            // Commits link beside this scan (`io=nvm`): one that wrote the key may have ended
            // between the cursor's read and the lock. If any commit ended since the cursor
            // began, the row is read again under the lock (regression: the serializable audit
            // `lsm_transfers_and_audits_are_serializable` summed a half-moved transfer).
            let value = if !self.writes.contains_key(&(table, key))
                && st.committed_seq.load(Ordering::Acquire) != seq_at_start
            {
                engine.get(&st, table, key, &mut fresh)?.then_some(&fresh[..])
            } else {
                value
            };
            let Some(v) = value else { continue };
            visited += 1;
            if !visit(key, v) || visited >= limit {
                break;
            }
        }
        Ok(visited)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let engine = self.engine;
        // Every write's lock is held: reads still valid now are valid at the commit point,
        // where the writes become visible (Silo's validation phase). On failure the drop
        // releases the locks; nothing was applied.
        self.locks.validate(&engine.locks)?;
        if !self.writes.is_empty() {
            let writes = std::mem::take(&mut self.writes);
            if let Err(e) = engine.commit_writes(self.worker, writes, self.grows) {
                // Conservatively new versions: a failed commit may have applied some rows.
                self.release(true);
                return Err(e);
            }
        }
        self.release(true);
        Ok(CommitToken::DURABLE)
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        self.writes.clear();
        self.release(false);
        Ok(())
    }
}

/// One source of a merged scan.
enum Source<'a> {
    Txn(Range<'a, (TableId, u64), Option<Vec<u8>>>),
    Dram(Range<'a, (TableId, u64), Option<Box<[u8]>>>),
    Nvm { mem: &'a NvmMem, tables: &'a [TableSpec], cur: Option<Node> },
    Run { run: &'a Run, i: u64 },
}

type Item<'a> = (u64, Option<&'a [u8]>);

impl<'a> Source<'a> {
    fn advance(
        &mut self,
        region: &'a Region,
        table: TableId,
        high: u64,
    ) -> Result<Option<Item<'a>>> {
        match self {
            Source::Txn(r) => Ok(r.next().map(|(&(_, k), v)| (k, v.as_deref()))),
            Source::Dram(r) => Ok(r.next().map(|(&(_, k), v)| (k, v.as_deref()))),
            Source::Nvm { mem, tables, cur } => match *cur {
                Some(n) if n.table == table && n.key <= high => {
                    let v = mem.value(region, tables, &n)?;
                    *cur = mem.next_key(region, tables, &n)?;
                    Ok(Some((n.key, v)))
                }
                _ => Ok(None),
            },
            Source::Run { run, i } => {
                if *i >= run.r.entries {
                    return Ok(None);
                }
                let (k, v) = run.entry(region, *i)?;
                if k > high {
                    return Ok(None);
                }
                *i += 1;
                Ok(Some((k, v)))
            }
        }
    }
}

/// A merged, ordered view of one table's keys in `[low, high]`: each key once, from the
/// newest source that has it (the write set, then the memtable, then runs newest first);
/// tombstones come out as `None`.
pub(crate) struct ScanCursor<'a> {
    region: &'a Region,
    table: TableId,
    high: u64,
    sources: Vec<Source<'a>>,
    heads: Vec<Option<Item<'a>>>,
}

impl<'a> ScanCursor<'a> {
    pub fn new(
        engine: &'a Lsm,
        st: &'a State,
        writes: Option<&'a WriteSet>,
        table: TableId,
        low: u64,
        high: u64,
    ) -> Result<ScanCursor<'a>> {
        let region = &engine.region;
        let tables = &st.manifest.tables;
        let mut sources = Vec::new();
        if let Some(w) = writes {
            sources.push(Source::Txn(w.range((table, low)..=(table, high))));
        }
        match &st.mem {
            Mem::Dram(d) => sources.push(Source::Dram(d.map.range((table, low)..=(table, high)))),
            Mem::Nvm(m) => {
                let cur = m.seek(region, tables, table, low)?;
                sources.push(Source::Nvm { mem: m, tables, cur });
            }
        }
        for run in st.runs[table as usize].iter().rev() {
            sources.push(Source::Run { run, i: run.lower_bound(region, low) });
        }
        let mut heads = Vec::with_capacity(sources.len());
        for s in &mut sources {
            heads.push(s.advance(region, table, high)?);
        }
        Ok(ScanCursor { region, table, high, sources, heads })
    }

    pub fn next(&mut self) -> Result<Option<Item<'a>>> {
        let Some(key) = self.heads.iter().flatten().map(|&(k, _)| k).min() else {
            return Ok(None);
        };
        let mut winner = None;
        for i in 0..self.sources.len() {
            if let Some((k, v)) = self.heads[i] {
                if k == key {
                    winner.get_or_insert((k, v));
                    self.heads[i] = self.sources[i].advance(self.region, self.table, self.high)?;
                }
            }
        }
        Ok(winner)
    }
}

//! Savepoints inside a write transaction, on every engine: the layer keeps its own undo log of
//! the engine rows a transaction writes after its first savepoint (the before-image of each
//! update and delete, the key of each insert) and rolls back to a savepoint by writing those
//! images back, newest first, in the same engine transaction. The engines' own logs (undo in
//! place, ARIES WAL, group-commit staging — Pelley et al., VLDB 2014, §3) roll back whole
//! transactions only, and `storage::Txn` has no partial rollback; compensation in the layer
//! (ARIES's compensation records, Mohan et al., TODS 1992, §1.2 on savepoints) gives every
//! engine the same savepoints without touching their recovery.
//!
//! Invariant: the rows a transaction holds after `rollback_to(sp)` equal those it held when
//! `sp` was taken, so what commits (or a crash's recovery) sees is the transaction as it stood
//! at the savepoint plus what it did after the rollback; a rollback that fails part way dooms
//! the transaction (it can only be aborted), so a half-undone state never commits.

use super::core::TxCore;
use std::sync::atomic::{AtomicU64, Ordering};
use storage::alloc::FreeingScope;
use storage::{CommitToken, DbError, Result, TableId, Txn};

/// Bytes of before-images one transaction's undo log holds at most: a larger transaction
/// after a savepoint fails with [`DbError::TxnTooLarge`] (the engines' own limits are lower
/// by default; this bound keeps the log's memory finite whatever they are set to).
pub const MAX_SAVEPOINT_LOG_BYTES: usize = 256 << 20;

/// A point inside a write transaction to roll back to ([`crate::WriteTx::savepoint`],
/// [`crate::WriteTx::rollback_to`]). It belongs to the transaction that made it; rolling back
/// to it undoes everything done after it and keeps it (roll back to it again later); rolling
/// back to an earlier savepoint ends it.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let t = tx.open_table::<str>("t")?;
///     t.insert("kept", b"1")?;
///     let sp = tx.savepoint()?;
///     t.insert("undone", b"2")?;
///     tx.rollback_to(&sp)?;
///     assert_eq!(t.get("undone")?, None);
///     assert_eq!(t.len()?, 1);
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Savepoint {
    /// The transaction it belongs to (`Points::id`).
    txn: u64,
    /// Undo log length when it was taken.
    mark: usize,
    /// Rollbacks done before it was taken; a later one to an earlier mark ends it.
    epoch: usize,
}

/// One engine row write undone: the write's inverse.
pub(super) enum Undo {
    /// An insert: delete the row.
    Remove { table: TableId, key: u64 },
    /// A delete: insert the row as it was.
    Restore { table: TableId, key: u64, row: Vec<u8> },
    /// An update: write the bytes back.
    Patch { table: TableId, key: u64, offset: u32, bytes: Vec<u8> },
}

impl Undo {
    fn bytes(&self) -> usize {
        32 + match self {
            Undo::Remove { .. } => 0,
            Undo::Restore { row, .. } => row.len(),
            Undo::Patch { bytes, .. } => bytes.len(),
        }
    }

    fn apply(self, txn: &mut (dyn Txn + '_)) -> Result<()> {
        let done = match self {
            Undo::Remove { table, key } => txn.delete(table, key)?,
            Undo::Restore { table, key, row } => txn.insert(table, key, &row).map(|()| true)?,
            Undo::Patch { table, key, offset, bytes } => txn.update(table, key, offset, &bytes)?,
        };
        if !done {
            return Err(DbError::Corrupt("a row written after a savepoint is missing".into()));
        }
        Ok(())
    }
}

/// The undo log of a transaction with savepoints.
#[derive(Default)]
pub(super) struct Log {
    entries: Vec<Undo>,
    bytes: usize,
}

impl Log {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Err once the log holds its bound: checked before a write, so every write that
    /// happens has its undo recorded (a rollback after the error is still whole).
    fn check_room(&self) -> Result<()> {
        if self.bytes >= MAX_SAVEPOINT_LOG_BYTES {
            return Err(DbError::TxnTooLarge(format!(
                "after a savepoint this transaction wrote more than the \
                 {MAX_SAVEPOINT_LOG_BYTES}-byte savepoint log holds"
            )));
        }
        Ok(())
    }

    fn push(&mut self, undo: Undo) {
        self.bytes += undo.bytes();
        self.entries.push(undo);
    }
}

/// A transaction's savepoint state.
pub(super) struct Points {
    /// Tells this transaction's savepoints from others'.
    id: u64,
    /// `None` until the first savepoint: a transaction without one records nothing.
    pub log: Option<Log>,
    /// The mark of each rollback, in order.
    pub rollbacks: Vec<usize>,
    /// Why the transaction can only be aborted: a rollback failed part way.
    doomed: Option<String>,
}

/// Transaction ids for savepoints; 0 is never handed out.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Points {
    pub fn new() -> Points {
        Points {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            log: None,
            rollbacks: Vec::new(),
            doomed: None,
        }
    }

    fn doomed_error(why: &str) -> DbError {
        DbError::Invalid(format!(
            "rolling back to a savepoint failed ({why}); the transaction can only be aborted"
        ))
    }

    /// Err once a failed rollback doomed the transaction.
    pub fn check_usable(&self) -> Result<()> {
        match &self.doomed {
            Some(why) => Err(Self::doomed_error(why)),
            None => Ok(()),
        }
    }

    /// What keeps the transaction from committing, if anything.
    pub fn doom(&self) -> Option<DbError> {
        self.doomed.as_deref().map(Self::doomed_error)
    }
}

impl TxCore<'_> {
    /// A savepoint where the transaction stands now (recording starts with the first).
    pub(super) fn savepoint(&self) -> Result<Savepoint> {
        self.with_txn(|_| ())?;
        let mut p = self.points.borrow_mut();
        p.check_usable()?;
        let epoch = p.rollbacks.len();
        let mark = p.log.get_or_insert_with(Log::default).len();
        Ok(Savepoint { txn: p.id, mark, epoch })
    }

    /// Undoes every row write made since `sp`, newest first.
    pub(super) fn rollback_to(&self, sp: &Savepoint) -> Result<()> {
        if let Some(conflict) = self.conflict() {
            // The engine transaction must abort after a conflict: nothing can be undone in it.
            return Err(conflict);
        }
        let mut p = self.points.borrow_mut();
        p.check_usable()?;
        // A rollback to an earlier mark after `sp` was taken undid `sp` itself.
        let ended = p.rollbacks.get(sp.epoch..).is_none_or(|r| r.iter().any(|&m| m < sp.mark));
        let ours = sp.txn == p.id && !ended;
        let Some(log) = p.log.as_mut().filter(|l| ours && sp.mark <= l.len()) else {
            return Err(DbError::Invalid(
                "rollback_to: the savepoint is not one of this transaction's, or a rollback to \
                 an earlier savepoint ended it"
                    .into(),
            ));
        };
        let tail: Vec<Undo> = log.entries.drain(sp.mark..).collect();
        log.bytes = log.entries.iter().map(Undo::bytes).sum();
        // Writing a deleted row back may need a page the delete has not yet given back.
        let _freeing = FreeingScope::enter();
        let undone = self.with_txn(|txn| tail.into_iter().rev().try_for_each(|u| u.apply(txn)))?;
        if let Err(e) = undone {
            p.doomed = Some(e.to_string());
            return Err(Points::doomed_error(&e.to_string()));
        }
        p.rollbacks.push(sp.mark);
        Ok(())
    }
}

/// Records the inverse of each row write into `log` (when there is one) before passing it on.
pub(super) struct Recorder<'a, 'db> {
    inner: &'a mut (dyn Txn + 'db),
    log: Option<&'a mut Log>,
    row: Vec<u8>,
}

impl<'a, 'db> Recorder<'a, 'db> {
    pub fn new(inner: &'a mut (dyn Txn + 'db), log: Option<&'a mut Log>) -> Self {
        Recorder { inner, log, row: Vec::new() }
    }
}

impl Txn for Recorder<'_, '_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.inner.read(table, key, out)
    }

    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.inner.read_for_update(table, key, out)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let Some(log) = self.log.as_deref_mut() else { return self.inner.insert(table, key, row) };
        log.check_room()?;
        self.inner.insert(table, key, row)?;
        log.push(Undo::Remove { table, key });
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let Some(log) = self.log.as_deref_mut() else {
            return self.inner.update(table, key, offset, bytes);
        };
        log.check_room()?;
        if !self.inner.read(table, key, &mut self.row)? {
            return self.inner.update(table, key, offset, bytes);
        }
        let range = offset as usize..offset as usize + bytes.len();
        let before = self.row.get(range).map(<[u8]>::to_vec);
        let updated = self.inner.update(table, key, offset, bytes)?;
        // An update outside the row failed in the engine (its error came back above).
        if let (true, Some(before)) = (updated, before) {
            log.push(Undo::Patch { table, key, offset, bytes: before });
        }
        Ok(updated)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let Some(log) = self.log.as_deref_mut() else { return self.inner.delete(table, key) };
        log.check_room()?;
        if !self.inner.read(table, key, &mut self.row)? {
            return self.inner.delete(table, key);
        }
        let deleted = self.inner.delete(table, key)?;
        if deleted {
            log.push(Undo::Restore { table, key, row: std::mem::take(&mut self.row) });
        }
        Ok(deleted)
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
        Err(DbError::Invalid("the table layer ends transactions, not its recorder".into()))
    }

    fn abort(self: Box<Self>) -> Result<()> {
        Err(DbError::Invalid("the table layer ends transactions, not its recorder".into()))
    }
}

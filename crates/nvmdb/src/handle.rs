//! Transactions held across calls ([`Db::begin_write`], [`Db::begin_read`]), beside the
//! closures of [`Db::write`] and [`Db::read`]: both end through [`Db::end`], so a handle's
//! commit is the closures' commit (the same durability wait, reclamation and error wording),
//! and dropping a handle rolls it back as a closure's `Err` does.
//!
//! Invariant (as for closures, the engines' recovery — Pelley et al., VLDB 2014, §3): a
//! handle's writes become visible and durable together when `commit` returns `Ok`, and are
//! rolled back otherwise, whatever ends the handle (abort, drop, a conflict, a panic).

use crate::kv::{Durability, ReadTx, SlotGuard, TxCore, WriteTx};
use crate::Db;
use std::cell::Cell;
use std::ops::Deref;
use std::time::Duration;
use storage::{DbError, Result};

/// How long [`Db::begin_write`] / [`Db::begin_read`] wait for a free transaction slot (one
/// of `engine_options.workers`) before they give up: a thread that holds every slot and asks
/// for another would otherwise wait for itself forever.
pub const BEGIN_WAIT: Duration = Duration::from_secs(10);

/// How a transaction is ended when it commits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ending {
    /// Read-only: releases its locks.
    Read,
    /// Commits, then waits for durability as the transaction chose.
    Write(Durability),
}

/// The two kinds of transaction the retry loop and the handles run.
pub(crate) trait TxKind<'db>: Sized {
    fn wrap(core: TxCore<'db>) -> Self;
    fn core(&self) -> &TxCore<'db>;
    fn ending(&self) -> Ending;
}

impl<'db> TxKind<'db> for WriteTx<'db> {
    fn wrap(core: TxCore<'db>) -> Self {
        WriteTx { core, durability: Cell::new(Durability::Immediate) }
    }
    fn core(&self) -> &TxCore<'db> {
        &self.core
    }
    fn ending(&self) -> Ending {
        Ending::Write(self.durability.get())
    }
}

impl<'db> TxKind<'db> for ReadTx<'db> {
    fn wrap(core: TxCore<'db>) -> Self {
        ReadTx { core }
    }
    fn core(&self) -> &TxCore<'db> {
        &self.core
    }
    fn ending(&self) -> Ending {
        Ending::Read
    }
}

/// A write transaction held across calls ([`Db::begin_write`]): everything a [`WriteTx`]
/// does (it dereferences to one), ended by [`WriteTransaction::commit`] or
/// [`WriteTransaction::abort`]; dropping it aborts. Unlike [`Db::write`] nothing is retried:
/// an operation whose error [`is_retryable`](DbError::is_retryable) (a lock conflict) dooms
/// the transaction, whose `commit` then returns that error after rolling back; begin again.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let tx = db.begin_write()?;
/// {
///     let t = tx.open_table::<str>("users")?;
///     t.insert("ada", b"lovelace")?;
/// }
/// tx.commit()?; // durable now
///
/// let tx = db.begin_write()?;
/// tx.open_table::<str>("users")?.insert("bob", b"")?;
/// drop(tx); // rolled back
///
/// let rx = db.begin_read()?;
/// let users = rx.open_table::<str>("users")?.map_or(Ok(0), |t| t.len())?;
/// assert_eq!(users, 1);
/// rx.close()?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct WriteTransaction<'db> {
    db: &'db Db,
    // Declared before the slot: the engine transaction ends before its slot is handed on.
    tx: WriteTx<'db>,
    _slot: SlotGuard<'db>,
}

/// A read transaction held across calls ([`Db::begin_read`]): a [`ReadTx`] (it dereferences
/// to one) whose locks are held until [`ReadTransaction::close`] or drop, so its reads are
/// repeatable; writers of what it read wait for (or conflict with) it meanwhile.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"one"))?;
/// let rx = db.begin_read()?;
/// let v = match rx.open_table::<u64>("t")? {
///     Some(t) => t.get(1)?,
///     None => None,
/// };
/// assert_eq!(v.as_deref(), Some(&b"one"[..]));
/// rx.close()?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct ReadTransaction<'db> {
    db: &'db Db,
    tx: ReadTx<'db>,
    _slot: SlotGuard<'db>,
}

impl<'db> WriteTransaction<'db> {
    /// Commits; returns once the commit is durable (or, with
    /// [`Durability::Eventual`] set on it, visible). A conflict seen by any operation rolls
    /// back instead and returns that (retryable) error.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let tx = db.begin_write()?;
    /// tx.open_table::<u64>("t")?.insert(7, b"x")?;
    /// tx.commit()?;
    /// assert_eq!(db.read(|r| r.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len()))?, 1);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn commit(self) -> Result<()> {
        self.db.end(&self.tx.core, true, TxKind::ending(&self.tx))
    }

    /// Rolls back everything the transaction did (as dropping it does, but with the error,
    /// if rolling back fails).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let tx = db.begin_write()?;
    /// tx.open_table::<u64>("t")?.insert(7, b"x")?;
    /// tx.abort()?;
    /// assert!(db.table_names()?.is_empty());
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn abort(self) -> Result<()> {
        self.db.end(&self.tx.core, false, Ending::Read)
    }
}

impl<'db> ReadTransaction<'db> {
    /// Ends the transaction, releasing its locks.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let rx = db.begin_read()?;
    /// assert!(rx.table_names()?.is_empty());
    /// rx.close()?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn close(self) -> Result<()> {
        self.db.end(&self.tx.core, true, Ending::Read)
    }
}

impl<'db> Deref for WriteTransaction<'db> {
    type Target = WriteTx<'db>;
    fn deref(&self) -> &WriteTx<'db> {
        &self.tx
    }
}

impl<'db> Deref for ReadTransaction<'db> {
    type Target = ReadTx<'db>;
    fn deref(&self) -> &ReadTx<'db> {
        &self.tx
    }
}

impl Drop for WriteTransaction<'_> {
    fn drop(&mut self) {
        // Already ended by commit or abort, or ended now; an abort that fails leaves the
        // engine transaction to the engine's own drop, which aborts too.
        let _ = self.db.end(&self.tx.core, false, Ending::Read);
    }
}

impl Drop for ReadTransaction<'_> {
    fn drop(&mut self) {
        let _ = self.db.end(&self.tx.core, false, Ending::Read);
    }
}

impl Db {
    /// Begins a write transaction held across calls (see [`WriteTransaction`]); the closure
    /// form [`Db::write`] retries conflicts for you. Each open transaction holds one of the
    /// `engine_options.workers` slots; with none free for [`BEGIN_WAIT`] this fails.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let tx = db.begin_write()?;
    /// let t = tx.open_table::<u64>("counter")?;
    /// let n: u64 = t.get_as(0)?.unwrap_or(0);
    /// t.insert_as(0, &(n + 1))?;
    /// tx.commit()?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn begin_write(&self) -> Result<WriteTransaction<'_>> {
        let tables = self.layer()?;
        let slot = self.slot_for_handle()?;
        let tx = self.begin_on(tables, slot.slot)?;
        Ok(WriteTransaction { db: self, tx, _slot: slot })
    }

    /// Begins a read transaction held across calls (see [`ReadTransaction`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let rx = db.begin_read()?;
    /// assert!(rx.open_table::<u64>("absent")?.is_none());
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn begin_read(&self) -> Result<ReadTransaction<'_>> {
        let tables = self.layer()?;
        let slot = self.slot_for_handle()?;
        let tx = self.begin_on(tables, slot.slot)?;
        Ok(ReadTransaction { db: self, tx, _slot: slot })
    }

    fn slot_for_handle(&self) -> Result<SlotGuard<'_>> {
        self.slot_pool().take_within(BEGIN_WAIT).ok_or_else(|| {
            DbError::Invalid(format!(
                "no transaction slot came free in {} s: all DbOptions::engine_options.workers \
                 slots are held (by open transactions of this thread?); end one, or raise it",
                BEGIN_WAIT.as_secs()
            ))
        })
    }
}

//! A transaction of an engine that runs `inplace` on a volatile staging copy (`group`, `wal`):
//! the `inplace` transaction, each operation inside the engine's *gate* (held shared by
//! operations, exclusively by whatever must see the staging copy quiesced: a batch persist, a
//! checkpoint). What a commit means is the engine's ([`Gate::committed`]).

use storage::{CommitToken, Result, TableId, Txn};

/// The engine side of a gated transaction.
pub(crate) trait Gate: Sync {
    /// Enters the gate for one operation (may first do work that needs the gate exclusively).
    fn enter(&self) -> Result<parking_lot::RwLockReadGuard<'_, ()>>;
    /// The gate itself, for a rollback on drop.
    fn gate(&self) -> &parking_lot::RwLock<()>;
    /// Called under the gate right after the inner commit: the commit's token, and whether
    /// [`Gate::after_commit`] must run once the gate is left.
    fn committed(&self) -> (CommitToken, bool);
    /// Work a commit does outside the gate (closing a batch, forcing the log); returns the
    /// token to hand out.
    fn after_commit(&self, token: CommitToken) -> Result<CommitToken>;
}

pub(crate) struct GatedTxn<'a> {
    shared: &'a dyn Gate,
    /// `None` once committed or aborted.
    inner: Option<Box<dyn Txn + 'a>>,
}

impl<'a> GatedTxn<'a> {
    pub(crate) fn new(shared: &'a dyn Gate, inner: Box<dyn Txn + 'a>) -> GatedTxn<'a> {
        GatedTxn { shared, inner: Some(inner) }
    }

    /// Runs one operation of the inner transaction inside the gate.
    fn op<T>(&mut self, f: impl FnOnce(&mut dyn Txn) -> Result<T>) -> Result<T> {
        let _gate = self.shared.enter()?;
        let inner = self.inner.as_deref_mut().ok_or_else(finished)?;
        f(inner)
    }
}

fn finished() -> storage::DbError {
    storage::DbError::Invalid("the transaction has already finished".into())
}

impl Txn for GatedTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.op(|t| t.read(table, key, out))
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.op(|t| t.insert(table, key, row))
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        self.op(|t| t.update(table, key, offset, bytes))
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        self.op(|t| t.delete(table, key))
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.op(|t| t.scan(table, low, high, limit, visit))
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let (token, more) = {
            let _gate = self.shared.enter()?;
            let inner = self.inner.take().ok_or_else(finished)?;
            inner.commit()?;
            // Under the gate: no batch or checkpoint falls between the commit and its token.
            self.shared.committed()
        };
        if more {
            return self.shared.after_commit(token);
        }
        Ok(token)
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        let _gate = self.shared.enter()?;
        match self.inner.take() {
            Some(inner) => inner.abort(),
            None => Ok(()),
        }
    }
}

impl Drop for GatedTxn<'_> {
    fn drop(&mut self) {
        // Dropping the inner transaction rolls it back in the staging copy: inside the gate, so
        // a batch never persists half a rollback. Never nested in another gate hold: every
        // operation releases its hold before returning.
        if let Some(inner) = self.inner.take() {
            let _gate = self.shared.gate().read();
            drop(inner);
        }
    }
}

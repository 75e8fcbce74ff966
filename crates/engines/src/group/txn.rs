//! A transaction of NVRAM Group Commit: an `inplace` transaction on the staging copy, each
//! operation inside the batch gate. Where a commit becomes durable: not here — `commit` returns
//! the open batch's token, durable when [`super::batch::BatchLog::persist`] ends that batch.

use super::Shared;
use storage::{CommitToken, Result, TableId, Txn};

pub(crate) struct GroupTxn<'a> {
    shared: &'a Shared,
    /// `None` once committed or aborted.
    inner: Option<Box<dyn Txn + 'a>>,
}

impl<'a> GroupTxn<'a> {
    pub(crate) fn new(shared: &'a Shared, inner: Box<dyn Txn + 'a>) -> GroupTxn<'a> {
        GroupTxn { shared, inner: Some(inner) }
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

impl Txn for GroupTxn<'_> {
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
        let full = {
            let _gate = self.shared.enter()?;
            let inner = self.inner.take().ok_or_else(finished)?;
            inner.commit()?;
            // Under the gate: the batch cannot close between the commit and its token.
            let (token, full) = self.shared.committed();
            if !full {
                return Ok(token);
            }
            token
        };
        // `batch_txns` reached: this worker closes the batch itself (deterministic batches
        // for crash tests), outside the gate it just left.
        self.shared.close_batch()?;
        Ok(full)
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        let _gate = self.shared.enter()?;
        match self.inner.take() {
            Some(inner) => inner.abort(),
            None => Ok(()),
        }
    }
}

impl Drop for GroupTxn<'_> {
    fn drop(&mut self) {
        // Dropping the inner transaction rolls it back in the staging copy: inside the gate, so
        // a batch never persists half a rollback. Never nested in another gate hold: every
        // operation releases its hold before returning.
        if let Some(inner) = self.inner.take() {
            let _gate = self.shared.gate.read();
            drop(inner);
        }
    }
}

//! A transaction of an engine that runs `inplace` on a volatile staging copy (`group`, `wal`):
//! the `inplace` transaction, each operation inside the engine's *gate* (held shared by
//! operations, exclusively by whatever must see the staging copy quiesced: a batch persist, a
//! checkpoint). What a commit means is the engine's ([`Gate::committed`]).

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::{CommitToken, Result, TableId, Txn};

/// Reader slots of a [`GateLock`] (threads share a slot when there are more).
const GATE_SLOTS: usize = 64;

/// The gate: held shared by every operation, exclusively by what must see the staging copy
/// quiesced. A reader-writer lock whose readers write only their own slot (a distributed
/// "big-reader" lock): a shared `RwLock` here was one cache line that every operation of every
/// thread wrote. The writer raises its flag, then waits for the slots to drain; a reader that
/// finds the flag raised backs out and parks on the writer's mutex until the writer is done.
pub(crate) struct GateLock {
    slots: Box<[CachePadded<AtomicU64>]>,
    writing: CachePadded<AtomicBool>,
    /// Held by the writer for as long as it writes: serialises writers, parks waiting readers.
    writer: parking_lot::Mutex<()>,
}

impl Default for GateLock {
    fn default() -> Self {
        GateLock {
            slots: (0..GATE_SLOTS).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            writing: CachePadded::new(AtomicBool::new(false)),
            writer: parking_lot::Mutex::new(()),
        }
    }
}

/// A shared hold of a [`GateLock`].
pub(crate) struct GateRead<'a> {
    slot: &'a AtomicU64,
}

impl Drop for GateRead<'_> {
    fn drop(&mut self) {
        self.slot.fetch_sub(1, Ordering::Release);
    }
}

/// The exclusive hold of a [`GateLock`].
pub(crate) struct GateWrite<'a> {
    writing: &'a AtomicBool,
    _writer: parking_lot::MutexGuard<'a, ()>,
}

impl Drop for GateWrite<'_> {
    fn drop(&mut self) {
        // Before the mutex is released (the guard's field drops after this): a parked reader
        // that wakes sees the flag down.
        self.writing.store(false, Ordering::Release);
    }
}

impl GateLock {
    pub(crate) fn read(&self) -> GateRead<'_> {
        let slot = &*self.slots[pmem::thread_id() as usize % GATE_SLOTS];
        loop {
            // SeqCst on both sides (Dekker): either the writer sees this slot raised, or this
            // reader sees the writer's flag.
            slot.fetch_add(1, Ordering::SeqCst);
            if !self.writing.load(Ordering::SeqCst) {
                return GateRead { slot };
            }
            slot.fetch_sub(1, Ordering::Release);
            drop(self.writer.lock());
        }
    }

    pub(crate) fn write(&self) -> GateWrite<'_> {
        let writer = self.writer.lock();
        self.writing.store(true, Ordering::SeqCst);
        let mut spins = 0u32;
        while self.slots.iter().any(|s| s.load(Ordering::SeqCst) != 0) {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        GateWrite { writing: &self.writing, _writer: writer }
    }
}

/// The engine side of a gated transaction.
pub(crate) trait Gate: Sync {
    /// Enters the gate for one operation (may first do work that needs the gate exclusively).
    fn enter(&self) -> Result<GateRead<'_>>;
    /// The gate itself, for a rollback on drop.
    fn gate(&self) -> &GateLock;
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

    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.op(|t| t.read_for_update(table, key, out))
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

#[cfg(test)]
mod tests {
    use super::GateLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn the_gate_excludes_readers_while_written_and_readers_share_it() {
        let gate = GateLock::default();
        let (r1, r2) = (gate.read(), gate.read());
        drop((r1, r2));
        let value = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..2000 {
                        let _r = gate.read();
                        // A writer sets the value odd then even again while it holds the gate.
                        assert_eq!(value.load(Ordering::Relaxed) % 2, 0, "read inside a write");
                    }
                });
            }
            s.spawn(|| {
                for _ in 0..300 {
                    let _w = gate.write();
                    value.fetch_add(1, Ordering::Relaxed);
                    std::hint::spin_loop();
                    value.fetch_add(1, Ordering::Relaxed);
                }
            });
        });
        assert_eq!(value.load(Ordering::Relaxed), 600);
    }
}

//! Key-level two-phase locking, the same for every engine so that engines differ only in storage
//! and recovery (docs/design.md §3). Policy: **no-wait** — a request that conflicts fails at once
//! with a retryable error and the transaction aborts. No-wait cannot deadlock, needs no waits-for
//! graph or timeouts, and under the short OLTP transactions we run, retrying is cheaper than the
//! bookkeeping of wait-die; the driver counts the aborts so contention stays visible.

use crate::engine::{DbError, Result, TableId};
use parking_lot::Mutex;
use std::collections::HashMap;

const SHARDS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

#[derive(Default)]
struct Entry {
    exclusive: u64,
    shared: Vec<u64>,
}

/// Held locks are recorded by the transaction (see [`LockSet`]) and released all at once.
type Shard = Mutex<HashMap<(TableId, u64), Entry>>;

pub struct LockManager {
    shards: Box<[Shard]>,
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager { shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }
}

fn shard_of(table: TableId, key: u64) -> usize {
    let h = (key ^ (table as u64).rotate_left(48)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 58) as usize % SHARDS
}

impl LockManager {
    /// Acquires (or upgrades to) `mode` for transaction `txn` (non-zero). Returns whether the
    /// transaction did not already hold it at this strength (so it must be released later).
    pub fn lock(&self, txn: u64, table: TableId, key: u64, mode: LockMode) -> Result<bool> {
        debug_assert!(txn != 0);
        let mut shard = self.shards[shard_of(table, key)].lock();
        let e = shard.entry((table, key)).or_default();
        if e.exclusive == txn {
            return Ok(false);
        }
        match mode {
            LockMode::Shared => {
                if e.exclusive != 0 {
                    return Err(DbError::Conflict { table, key });
                }
                if e.shared.contains(&txn) {
                    return Ok(false);
                }
                e.shared.push(txn);
                Ok(true)
            }
            LockMode::Exclusive => {
                let others_share = e.shared.iter().any(|&t| t != txn);
                if e.exclusive != 0 || others_share {
                    return Err(DbError::Conflict { table, key });
                }
                let upgrade = !e.shared.is_empty();
                e.shared.clear();
                e.exclusive = txn;
                Ok(!upgrade)
            }
        }
    }

    /// Releases `txn`'s lock on one key.
    pub fn unlock(&self, txn: u64, table: TableId, key: u64) {
        let mut shard = self.shards[shard_of(table, key)].lock();
        if let Some(e) = shard.get_mut(&(table, key)) {
            if e.exclusive == txn {
                e.exclusive = 0;
            }
            e.shared.retain(|&t| t != txn);
            if e.exclusive == 0 && e.shared.is_empty() {
                shard.remove(&(table, key));
            }
        }
    }
}

/// The locks one transaction holds.
#[derive(Default)]
pub struct LockSet {
    held: Vec<(TableId, u64)>,
}

impl LockSet {
    pub fn lock(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> Result<()> {
        if mgr.lock(txn, table, key, mode)? {
            self.held.push((table, key));
        }
        Ok(())
    }

    pub fn release_all(&mut self, mgr: &LockManager, txn: u64) {
        for (t, k) in self.held.drain(..) {
            mgr.unlock(txn, t, k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_locks_share_and_exclusive_conflicts() {
        let m = LockManager::default();
        assert!(m.lock(1, 0, 7, LockMode::Shared).unwrap());
        assert!(m.lock(2, 0, 7, LockMode::Shared).unwrap());
        assert!(m.lock(3, 0, 7, LockMode::Exclusive).unwrap_err().is_retryable());
        // Upgrade fails while another shares, succeeds once alone.
        assert!(m.lock(1, 0, 7, LockMode::Exclusive).is_err());
        m.unlock(2, 0, 7);
        assert!(!m.lock(1, 0, 7, LockMode::Exclusive).unwrap());
        assert!(m.lock(2, 0, 7, LockMode::Shared).is_err());
        m.unlock(1, 0, 7);
        assert!(m.lock(2, 0, 7, LockMode::Exclusive).unwrap());
    }

    #[test]
    fn lock_set_releases_everything() {
        let m = LockManager::default();
        let mut s = LockSet::default();
        for k in 0..100 {
            s.lock(&m, 5, 1, k, LockMode::Exclusive).unwrap();
        }
        s.lock(&m, 5, 1, 3, LockMode::Shared).unwrap();
        assert!(m.lock(6, 1, 3, LockMode::Shared).is_err());
        s.release_all(&m, 5);
        for k in 0..100 {
            assert!(m.lock(6, 1, k, LockMode::Exclusive).unwrap());
        }
    }
}

//! How `db.write` / `db.read` retry conflicts, and the worker slots transactions run on.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// How `db.write` / `db.read` retry a transaction that hit a lock conflict: up to
/// `max_attempts` runs, sleeping between them for a random time up to a bound that starts at
/// `backoff_first` and doubles up to `backoff_max`.
///
/// ```
/// use std::time::Duration;
/// let mut options = nvmdb::DbOptions::default();
/// options.retry = nvmdb::RetryOptions {
///     max_attempts: 10,
///     backoff_first: Duration::from_micros(50),
///     backoff_max: Duration::from_millis(5),
/// };
/// let db = nvmdb::Db::open(&options)?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x"))?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RetryOptions {
    /// Runs of the closure at most, the first included; after the last conflict the
    /// transaction fails with a still [retryable](storage::DbError::is_retryable) error that
    /// names the user's table and this field.
    pub max_attempts: u32,
    /// Upper bound of the sleep before the first retry.
    pub backoff_first: Duration,
    /// The bound stops doubling here.
    pub backoff_max: Duration,
}

impl Default for RetryOptions {
    fn default() -> Self {
        RetryOptions {
            max_attempts: 200,
            backoff_first: Duration::from_micros(20),
            backoff_max: Duration::from_millis(20),
        }
    }
}

impl RetryOptions {
    /// Sleep before attempt `attempt` (1-based retries), jittered so rivals spread out.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let bound = self
            .backoff_first
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.backoff_max)
            .max(Duration::from_nanos(1));
        // Cheap jitter: the clock's low bits, mixed.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(0);
        let mixed = (now ^ (attempt as u64) << 32).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11;
        Duration::from_nanos(mixed % bound.as_nanos().max(1) as u64)
    }
}

/// Worker slots of the engine, handed to transactions so users never name one.
pub(crate) struct SlotPool {
    free: Mutex<Vec<usize>>,
    returned: Condvar,
}

impl SlotPool {
    pub fn new(slots: usize) -> SlotPool {
        SlotPool { free: Mutex::new((0..slots).rev().collect()), returned: Condvar::new() }
    }

    /// Takes a slot, waiting while all are in use.
    pub fn take(&self) -> SlotGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(slot) = free.pop() {
                return SlotGuard { pool: self, slot };
            }
            free = self.returned.wait(free).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl SlotPool {
    /// Takes a slot, waiting at most `limit` while all are in use.
    pub fn take_within(&self, limit: Duration) -> Option<SlotGuard<'_>> {
        let deadline = std::time::Instant::now() + limit;
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(slot) = free.pop() {
                return Some(SlotGuard { pool: self, slot });
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            free = self.returned.wait_timeout(free, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

pub(crate) struct SlotGuard<'p> {
    pool: &'p SlotPool,
    pub slot: usize,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        self.pool.free.lock().unwrap_or_else(|e| e.into_inner()).push(self.slot);
        self.pool.returned.notify_one();
    }
}

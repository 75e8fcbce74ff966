//! Key-level concurrency control, the same for every engine so that engines differ only in
//! storage and recovery (`docs/design.md` §3).
//!
//! **Writes and scans: two-phase locking.** A scan's request (made under a leaf latch) that
//! conflicts fails at once with a retryable error and the transaction aborts (no-wait: it cannot
//! wait under a latch). A point write of a transaction with an age ([`LockSet::aged`]) may wait
//! instead, *wait-die* (Rosenkrantz et al. 1978) with a grace period: an older transaction waits,
//! for at most [`WAIT_BOUND`], for a younger exclusive holder to end; a younger one waits for an
//! older holder only [`YOUNGER_WAIT_BOUND`] (a few transactions' length) and then dies. Every
//! wait is bounded, and every cycle of waits holds a younger-waits-for-older edge, so a deadlock
//! ends within the grace period; on a hot row (a TPC-B branch, locked last) the second writer
//! usually gets the row instead of aborting (plain wait-die aborted the younger at once: 0.40
//! aborts per commit on TPC-B, 2 threads). The driver counts aborts and the lock table counts
//! waits, so contention stays visible.
//!
//! **Point reads: optimistic** (Silo, Tu et al. SOSP 2013 §4.4, over this lock table). A read
//! writes nothing shared: it reads its key's *stripe word* (`version << 32 | exclusive
//! holders`, one word per hash stripe of keys), reads the row, and reads the word again; the
//! row is a committed state iff both reads agree and no exclusive holder was present. The
//! word is remembered, and the transaction's reads are validated again at each later read (so a
//! transaction never sees two rows from different moments: opacity) and before it commits. An
//! exclusive lock adds a holder to its stripe (before the holder writes anything) and its
//! release adds a version and removes the holder (after the commit or rollback), so any write
//! between a read and the validation fails the validation. Serializable: writes hold their locks
//! to the end, and every read is validated after the last lock was taken (the commit). A read
//! that meets an exclusive holder (another transaction's write in flight, or its own) falls back
//! to a shared lock, i.e. behaves as before.
//!
//! **Uncontended exclusive locks: one CAS, no shard mutex** (the lock word beside each stripe
//! word; the "lightweight" lock-manager path of Johnson et al., *Shore-MT*, EDBT 2009 §6.2.2,
//! and Silo's per-record lock bit, Tu et al. SOSP 2013 §4.5). A stripe's *lock word* counts the
//! lock-table entries of its keys (`TABLE_REF` each) and carries `FAST` while one exclusive
//! holder owns a key of the stripe without an entry; that holder's transaction, age and key
//! are in the stripe's owner record (valid once `READY` is set). An exclusive request CASes the
//! lock word from 0 to `FAST`: no entry on the stripe, so no one else holds or shares any of its
//! keys. Otherwise it goes to the table, as every shared request does: registering its entry
//! (`TABLE_REF`) first, so no `FAST` can appear on the stripe after that, and a `FAST` already
//! there is checked against the owner record (same key: a conflict with that holder, waited
//! for or not by wait-die as any other). Invariant: while a key has a lock-table entry, no
//! `FAST` holder of that key exists. With 2^16 stripes, 16 threads holding a few keys each put
//! two on one stripe rarely, so nearly every uncontended write takes no mutex at all.

use crate::engine::{DbError, Result, TableId};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

const SHARDS: usize = 64;
/// Stripe words: keys hash onto them; two keys on one stripe only cost a spurious validation
/// failure when one is written while the other was read.
const STRIPES: usize = 1 << 16;
const HOLDER: u64 = 1;
const VERSION: u64 = 1 << 32;
/// Optimistic attempts of one read before it takes a shared lock instead.
const READ_TRIES: usize = 8;
/// Lock word: one lock-table entry of a key of the stripe.
const TABLE_REF: u64 = 1;
/// Lock word: an exclusive holder without a lock-table entry (see the module doc).
const FAST: u64 = 1 << 63;
/// Lock word: the `FAST` holder's owner record is written.
const READY: u64 = 1 << 62;
/// Polls of a lock word for `READY` before a request gives up on this try (the fast holder was
/// descheduled between its CAS and its owner record: a few stores).
const READY_POLLS: u32 = 1 << 12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

#[derive(Default)]
struct Entry {
    exclusive: u64,
    /// The exclusive holder's age (0: none given; it never waits and is never waited for).
    exclusive_age: u64,
    shared: Vec<u64>,
}

/// How long an older transaction waits for a younger exclusive holder before it gives up (a
/// bound, not a timeout that decides anything: giving up is the no-wait outcome).
pub const WAIT_BOUND: std::time::Duration = std::time::Duration::from_millis(2);

/// How long a younger transaction waits for an older exclusive holder before it dies.
pub const YOUNGER_WAIT_BOUND: std::time::Duration = std::time::Duration::from_micros(50);

/// Why a request was not granted.
enum Refusal {
    /// The requester may wait for the holder this long.
    Wait(std::time::Duration),
    Die,
}

/// Held locks are recorded by the transaction (see [`LockSet`]) and released all at once.
type Shard = Mutex<HashMap<(TableId, u64), Entry>>;

/// What a granted request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// The transaction did not hold the key: it must release it later.
    New,
    /// A shared lock became exclusive.
    Upgraded,
    /// The transaction already held it at this strength (or exclusively).
    Held,
}

/// Counters of the lock table (per thread, summed when read), in [`LockManager::activity`].
#[derive(Clone, Copy)]
#[repr(usize)]
enum Stat {
    /// Requests that reached the lock table (shared or exclusive).
    Locked = 0,
    /// Requests refused (no-wait conflicts).
    Conflicts = 1,
    /// Reads done optimistically (no lock table access).
    OptimisticReads = 2,
    /// Reads that met another transaction's exclusive hold, or kept being overwritten, and
    /// took a shared lock (contention; [`Stat::ReadsOwnLock`] counts this one's own holds).
    ReadsLocked = 3,
    /// Validations that failed: a read's key was written since.
    ValidationFailures = 4,
    /// Requests that waited for a younger holder (wait-die) and were granted.
    Waits = 5,
    /// Exclusive locks taken with one CAS, without the lock table.
    Fast = 6,
    /// Reads that met an exclusive holder and waited for it to end before reading
    /// optimistically ([`LockSet::read_optimistic_or_wait`]).
    ReadWaits = 7,
    /// Reads of a key whose stripe this transaction holds exclusively itself (its own write,
    /// or another key of the stripe): locked, but no other transaction's doing.
    ReadsOwnLock = 8,
}
const STATS: usize = 9;

thread_local! {
    /// Requests this thread made to any lock table (tests: a read-only transaction makes none).
    static LOCK_TABLE_REQUESTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Shard mutex acquisitions by this thread (tests: an uncontended writer makes none).
    static SHARD_LOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Lock-table requests the calling thread has made so far.
pub fn lock_table_requests() -> u64 {
    LOCK_TABLE_REQUESTS.with(|c| c.get())
}

/// Lock-table shard mutexes the calling thread has taken so far.
pub fn shard_locks_taken() -> u64 {
    SHARD_LOCKS.with(|c| c.get())
}

/// Who holds a stripe's `FAST` lock (written by that holder, read by table requests).
#[derive(Default)]
struct Owner {
    txn: AtomicU64,
    age: AtomicU64,
    table: AtomicU64,
    key: AtomicU64,
}

/// One stripe's words, in one cache line: a write lock touches one line, not three (with the
/// stripe words, lock words and owner records in three arrays, a one-thread YCSB write-heavy
/// run spent 7.6% of its cycles in `LockSet::release`, mostly misses on the three).
#[derive(Default)]
#[repr(align(64))]
struct StripeLine {
    /// The stripe word (`version << 32 | exclusive holders`) that optimistic reads compare.
    word: AtomicU64,
    /// `TABLE_REF`s and `FAST | READY` (apart from the stripe word, which readers compare whole).
    lock: AtomicU64,
    owner: Owner,
}

pub struct LockManager {
    shards: Box<[Shard]>,
    lines: Box<[StripeLine]>,
    stats: pmem::ThreadCounters<STATS>,
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            lines: (0..STRIPES).map(|_| StripeLine::default()).collect(),
            stats: Default::default(),
        }
    }
}

impl Entry {
    fn is_empty(&self) -> bool {
        self.exclusive == 0 && self.shared.is_empty()
    }
}

/// Wait-die with a grace period (ages, then ids, order everyone): long for a younger holder,
/// short for an older one; a holder without an age is never waited for.
fn refusal(txn: u64, age: u64, holder: u64, holder_age: u64) -> Refusal {
    if holder == 0 || holder_age == 0 {
        Refusal::Die
    } else if (age, txn) < (holder_age, holder) {
        Refusal::Wait(WAIT_BOUND)
    } else {
        Refusal::Wait(YOUNGER_WAIT_BOUND)
    }
}

fn hash(table: TableId, key: u64) -> u64 {
    (key ^ (table as u64).rotate_left(48)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn shard_of(table: TableId, key: u64) -> usize {
    (hash(table, key) >> 58) as usize % SHARDS
}

fn stripe_of(table: TableId, key: u64) -> usize {
    (hash(table, key) >> 32) as usize % STRIPES
}

impl LockManager {
    /// Acquires (or upgrades to) `mode` for transaction `txn` (non-zero), no-wait.
    pub fn lock(&self, txn: u64, table: TableId, key: u64, mode: LockMode) -> Result<Grant> {
        self.lock_aged(txn, 0, table, key, mode)
    }

    /// [`LockManager::lock`] for a transaction of age `age` (its begin time; 0: none, no-wait).
    /// Waits for an exclusive holder: at most [`WAIT_BOUND`] for a younger one,
    /// [`YOUNGER_WAIT_BOUND`] for an older one.
    pub fn lock_aged(
        &self,
        txn: u64,
        age: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> Result<Grant> {
        debug_assert!(txn != 0);
        LOCK_TABLE_REQUESTS.with(|c| c.set(c.get() + 1));
        self.stats.add(Stat::Locked as usize, 1);
        let mut waited_since: Option<std::time::Instant> = None;
        for spins in 0u32.. {
            match self.lock_in_table(txn, age, table, key, mode) {
                Ok(grant) => {
                    if waited_since.is_some() {
                        self.stats.add(Stat::Waits as usize, 1);
                    }
                    return Ok(grant);
                }
                Err(Refusal::Wait(bound)) if age != 0 => {
                    let since = *waited_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= bound {
                        break;
                    }
                    // Watch the key's stripe word (it changes when the holder ends) instead of
                    // taking the shard mutex again and again, which slows the holder's release.
                    let stripe = self.stripe(stripe_of(table, key));
                    let word = stripe.load(Ordering::Relaxed);
                    for _ in 0..256 {
                        if stripe.load(Ordering::Relaxed) != word {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    if spins >= 16 {
                        std::thread::yield_now();
                    }
                }
                Err(_) => break,
            }
        }
        self.stats.add(Stat::Conflicts as usize, 1);
        Err(DbError::Conflict { table, key })
    }

    /// Takes an exclusive lock on `key` with one CAS if no key of its stripe is locked
    /// (nothing in the table, no other `FAST` holder). The caller records it as fast-held and
    /// releases it with [`LockManager::release_fast`].
    pub fn try_lock_fast(&self, txn: u64, age: u64, table: TableId, key: u64) -> bool {
        debug_assert!(txn != 0);
        let s = stripe_of(table, key);
        let word = &self.lines[s].lock;
        if word.compare_exchange(0, FAST, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        let o = &self.lines[s].owner;
        o.txn.store(txn, Ordering::Relaxed);
        o.age.store(age, Ordering::Relaxed);
        o.table.store(u64::from(table), Ordering::Relaxed);
        o.key.store(key, Ordering::Relaxed);
        word.fetch_or(READY, Ordering::Release);
        self.stats.add(Stat::Fast as usize, 1);
        true
    }

    /// Whether `txn` holds `key` by [`LockManager::try_lock_fast`] (loads only). Only the
    /// holder writes the owner record while `READY` is set, so a record naming `txn` is
    /// `txn`'s own, whatever other holders come and go while it is read.
    fn fast_held_by(&self, txn: u64, table: TableId, key: u64) -> bool {
        let s = stripe_of(table, key);
        let ready = FAST | READY;
        if self.lines[s].lock.load(Ordering::Acquire) & ready != ready {
            return false;
        }
        let o = &self.lines[s].owner;
        o.txn.load(Ordering::Relaxed) == txn
            && o.table.load(Ordering::Relaxed) == u64::from(table)
            && o.key.load(Ordering::Relaxed) == key
    }

    /// Ends a lock taken by [`LockManager::try_lock_fast`] (before its stripe word's release).
    fn release_fast(&self, table: TableId, key: u64) {
        let prev =
            self.lines[stripe_of(table, key)].lock.fetch_and(!(FAST | READY), Ordering::Release);
        debug_assert!(prev & FAST != 0, "released a fast lock nobody held");
    }

    /// The `FAST` holder of `key`'s stripe, if it holds `key` itself: `(txn, age)`. The caller
    /// has an entry (a `TABLE_REF`) on the stripe, so no new `FAST` holder can appear and the
    /// owner record, once `READY`, stays put. `Err`: the holder has not written its record yet.
    fn fast_holder_of(
        &self,
        table: TableId,
        key: u64,
    ) -> std::result::Result<Option<(u64, u64)>, ()> {
        let s = stripe_of(table, key);
        for _ in 0..READY_POLLS {
            let word = self.lines[s].lock.load(Ordering::Acquire);
            if word & FAST == 0 {
                return Ok(None);
            }
            if word & READY != 0 {
                let o = &self.lines[s].owner;
                let mine = o.table.load(Ordering::Relaxed) == u64::from(table)
                    && o.key.load(Ordering::Relaxed) == key;
                let holder = (o.txn.load(Ordering::Relaxed), o.age.load(Ordering::Relaxed));
                return Ok(mine.then_some(holder));
            }
            std::hint::spin_loop();
        }
        Err(())
    }

    fn lock_in_table(
        &self,
        txn: u64,
        age: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> std::result::Result<Grant, Refusal> {
        SHARD_LOCKS.with(|c| c.set(c.get() + 1));
        let mut shard = self.shards[shard_of(table, key)].lock();
        let created = !shard.contains_key(&(table, key));
        if created {
            // Registered before looking for a fast holder: none can appear from here on.
            self.lines[stripe_of(table, key)].lock.fetch_add(TABLE_REF, Ordering::AcqRel);
            let fast = match self.fast_holder_of(table, key) {
                Ok(None) => None,
                Ok(Some(holder)) => Some(holder),
                // A holder between its CAS and its record: retried as a short wait.
                Err(()) => Some((0, 1)),
            };
            if let Some((holder, holder_age)) = fast {
                self.lines[stripe_of(table, key)].lock.fetch_sub(TABLE_REF, Ordering::AcqRel);
                if holder == txn {
                    return Ok(Grant::Held);
                }
                return Err(if holder == 0 {
                    Refusal::Wait(YOUNGER_WAIT_BOUND)
                } else {
                    refusal(txn, age, holder, holder_age)
                });
            }
        }
        let result = Self::request(shard.entry((table, key)).or_default(), txn, age, mode);
        if result.is_err() && shard.get(&(table, key)).is_some_and(Entry::is_empty) {
            shard.remove(&(table, key));
            self.lines[stripe_of(table, key)].lock.fetch_sub(TABLE_REF, Ordering::AcqRel);
        }
        result
    }

    /// Grants or refuses `txn`'s request against a key's entry.
    fn request(
        e: &mut Entry,
        txn: u64,
        age: u64,
        mode: LockMode,
    ) -> std::result::Result<Grant, Refusal> {
        if e.exclusive == txn {
            return Ok(Grant::Held);
        }
        let refuse = refusal(txn, age, e.exclusive, e.exclusive_age);
        match mode {
            LockMode::Shared => {
                if e.exclusive != 0 {
                    return Err(refuse);
                }
                if e.shared.contains(&txn) {
                    return Ok(Grant::Held);
                }
                e.shared.push(txn);
                Ok(Grant::New)
            }
            LockMode::Exclusive => {
                // Shared holders are scans' (never waited for: they may be in a latch).
                if e.shared.iter().any(|&t| t != txn) {
                    return Err(Refusal::Die);
                }
                if e.exclusive != 0 {
                    return Err(refuse);
                }
                let upgrade = !e.shared.is_empty();
                e.shared.clear();
                e.exclusive = txn;
                e.exclusive_age = age;
                Ok(if upgrade { Grant::Upgraded } else { Grant::New })
            }
        }
    }

    /// Releases `txn`'s lock (taken through the table) on one key.
    pub fn unlock(&self, txn: u64, table: TableId, key: u64) {
        SHARD_LOCKS.with(|c| c.set(c.get() + 1));
        let mut shard = self.shards[shard_of(table, key)].lock();
        if let Some(e) = shard.get_mut(&(table, key)) {
            if e.exclusive == txn {
                e.exclusive = 0;
                e.exclusive_age = 0;
            }
            e.shared.retain(|&t| t != txn);
            if e.is_empty() {
                shard.remove(&(table, key));
                self.lines[stripe_of(table, key)].lock.fetch_sub(TABLE_REF, Ordering::AcqRel);
            }
        }
    }

    fn stripe(&self, s: usize) -> &AtomicU64 {
        &self.lines[s].word
    }

    /// Asks the CPU to fetch `key`'s stripe line for writing, without waiting for it: a caller
    /// that will lock the key after other work (a B+tree search) overlaps the line's miss with
    /// that work instead of stalling its lock's compare-and-swap on it. Changes nothing.
    #[inline]
    pub fn prefetch_for_lock(&self, table: TableId, key: u64) {
        #[cfg(target_arch = "x86_64")]
        self.prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(table, key);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (table, key);
    }

    /// Asks the CPU to fetch `key`'s stripe line for reading, without waiting for it: an
    /// optimistic read that first searches the B+tree overlaps the stripe word's miss with the
    /// search's instead of taking it after. Changes nothing.
    #[inline]
    pub fn prefetch_for_read(&self, table: TableId, key: u64) {
        #[cfg(target_arch = "x86_64")]
        self.prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(table, key);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (table, key);
    }

    #[cfg(target_arch = "x86_64")]
    #[inline]
    fn prefetch<const HINT: i32>(&self, table: TableId, key: u64) {
        let line: *const StripeLine = &self.lines[stripe_of(table, key)];
        // SAFETY: the address is inside `lines`; a prefetch never faults nor writes.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(line.cast()) }
    }

    /// The lock table's counters: requests, conflicts, optimistic reads, reads that fell back to
    /// a shared lock, failed validations.
    pub fn activity(&self) -> Vec<(&'static str, u64)> {
        let get = |s: Stat| self.stats.get(s as usize);
        vec![
            ("lock_requests", get(Stat::Locked)),
            ("lock_conflicts", get(Stat::Conflicts)),
            ("optimistic_reads", get(Stat::OptimisticReads)),
            ("reads_locked", get(Stat::ReadsLocked)),
            ("validation_failures", get(Stat::ValidationFailures)),
            ("lock_waits", get(Stat::Waits)),
            ("lock_fast", get(Stat::Fast)),
            ("read_waits", get(Stat::ReadWaits)),
            ("reads_own_lock", get(Stat::ReadsOwnLock)),
        ]
    }
}

/// A read done optimistically: its stripe and the word it must still hold.
struct Read {
    stripe: usize,
    expect: u64,
    table: TableId,
    key: u64,
}

/// How a transaction holds a key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    Shared,
    Exclusive,
    /// Exclusive, by [`LockManager::try_lock_fast`]: no lock-table entry.
    Fast,
}

/// The locks one transaction holds and the reads it must validate.
#[derive(Default)]
pub struct LockSet {
    held: Vec<(TableId, u64, Hold)>,
    reads: Vec<Read>,
    /// The transaction's age for wait-die (0: never waits).
    age: u64,
    /// A request was refused or a read failed validation: the transaction will abort on a
    /// conflict, and its retry may keep its age ([`LockSet::refused`]).
    refused: bool,
}

impl LockSet {
    /// A lock set whose point requests ([`LockSet::lock_or_wait`]) may wait for younger
    /// holders: `age` orders transactions (its begin time; not 0).
    pub fn aged(age: u64) -> LockSet {
        LockSet { age: age.max(1), ..LockSet::default() }
    }

    /// The age this set was made with (wait-die's order; 0: never waits).
    pub fn age(&self) -> u64 {
        self.age
    }

    /// Whether a lock request was refused or an optimistic read failed validation (a conflict:
    /// wait-die made this transaction die). Wait-die restarts a transaction that died with its
    /// original age (Rosenkrantz, Stearns & Lewis, TODS 1978), so that it grows older with every
    /// retry until it waits where it died; an engine hands this set's [`LockSet::age`] to the
    /// worker's next transaction when it is true.
    pub fn refused(&self) -> bool {
        self.refused
    }

    /// A request that never waits (scans: they hold a leaf latch).
    pub fn lock(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> Result<()> {
        self.lock_with(mgr, txn, 0, table, key, mode)
    }

    /// A request that may wait (wait-die) for a younger holder; the caller holds no latch.
    pub fn lock_or_wait(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> Result<()> {
        self.lock_with(mgr, txn, self.age, table, key, mode)
    }

    fn lock_with(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        age: u64,
        table: TableId,
        key: u64,
        mode: LockMode,
    ) -> Result<()> {
        // A key this transaction holds fast is found by loads alone (YCSB's update writes its
        // row twice); another holder of the stripe makes the CAS fail, and the table decides.
        if mgr.fast_held_by(txn, table, key) {
            return Ok(());
        }
        if mode == LockMode::Exclusive && mgr.try_lock_fast(txn, age, table, key) {
            self.held.push((table, key, Hold::Fast));
            return self.became_exclusive(mgr, table, key);
        }
        let grant =
            mgr.lock_aged(txn, age, table, key, mode).inspect_err(|_| self.refused = true)?;
        match (grant, mode) {
            (Grant::Held, _) => {}
            (Grant::New, LockMode::Shared) => self.held.push((table, key, Hold::Shared)),
            (Grant::New, LockMode::Exclusive) => {
                self.held.push((table, key, Hold::Exclusive));
                self.became_exclusive(mgr, table, key)?;
            }
            (Grant::Upgraded, _) => {
                if let Some(h) = self.held.iter_mut().find(|h| (h.0, h.1) == (table, key)) {
                    h.2 = Hold::Exclusive;
                }
                self.became_exclusive(mgr, table, key)?;
            }
        }
        Ok(())
    }

    /// Adds this transaction as a holder of the key's stripe (before it writes the key). A read
    /// of the key done optimistically must still hold: the write builds on what was read.
    fn became_exclusive(&mut self, mgr: &LockManager, table: TableId, key: u64) -> Result<()> {
        let s = stripe_of(table, key);
        if let Some(i) = self.reads.iter().position(|r| (r.table, r.key) == (table, key)) {
            let r = self.reads.swap_remove(i);
            if mgr.stripe(s).load(Ordering::Acquire) != r.expect {
                // Count the holder anyway: the release undoes it with the others.
                mgr.stripe(s).fetch_add(HOLDER, Ordering::AcqRel);
                mgr.stats.add(Stat::ValidationFailures as usize, 1);
                self.refused = true;
                return Err(DbError::Conflict { table, key });
            }
        }
        mgr.stripe(s).fetch_add(HOLDER, Ordering::AcqRel);
        // Our own holder is not a change to what our other reads on this stripe saw.
        for r in self.reads.iter_mut().filter(|r| r.stripe == s) {
            r.expect = r.expect.wrapping_add(HOLDER);
        }
        Ok(())
    }

    /// Reads `key` without writing anything shared: `read` runs between two loads of the key's
    /// stripe word, and is repeated if a writer came between them. It may see torn bytes while
    /// a writer is in flight: its error then only counts if the word did not change. Falls back
    /// to a shared lock (and one plain `read`) when the key has an exclusive holder (another
    /// transaction's write, or this one's) or keeps being overwritten.
    pub fn read_optimistic<R>(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        table: TableId,
        key: u64,
        mut read: impl FnMut() -> Result<R>,
    ) -> Result<R> {
        let s = stripe_of(table, key);
        for _ in 0..READ_TRIES {
            let before = mgr.stripe(s).load(Ordering::Acquire);
            if !before.is_multiple_of(VERSION) {
                break; // an exclusive holder: the lock table decides
            }
            let result = read();
            std::sync::atomic::fence(Ordering::Acquire);
            if mgr.stripe(s).load(Ordering::Relaxed) != before {
                std::hint::spin_loop();
                continue;
            }
            let value = result?;
            // Opacity: what this read saw and every earlier read are one moment's state.
            self.validate(mgr)?;
            mgr.stats.add(Stat::OptimisticReads as usize, 1);
            if !self.reads.iter().any(|r| (r.table, r.key) == (table, key)) {
                self.reads.push(Read { stripe: s, expect: before, table, key });
            }
            return Ok(value);
        }
        let own = self.held.iter().any(|h| h.2 != Hold::Shared && stripe_of(h.0, h.1) == s);
        let stat = if own { Stat::ReadsOwnLock } else { Stat::ReadsLocked };
        mgr.stats.add(stat as usize, 1);
        self.lock_or_wait(mgr, txn, table, key, LockMode::Shared)?;
        read()
    }

    /// [`LockSet::read_optimistic`] that first waits, at most [`YOUNGER_WAIT_BOUND`], for an
    /// exclusive holder of the key's stripe to end (Silo, Tu et al. SOSP 2013 §4.4: a reader
    /// spins on a locked record), for engines whose writers hold their locks from their write
    /// to their commit's end only (`lsm`, whose writes are buffered until the commit). Taking
    /// a shared lock at once instead would make the next writer of the key die on it (writers
    /// never wait for shared holders). A transaction of age 0 does not wait, nor
    /// one that holds an exclusive lock on the stripe itself (it would wait for itself).
    pub fn read_optimistic_or_wait<R>(
        &mut self,
        mgr: &LockManager,
        txn: u64,
        table: TableId,
        key: u64,
        read: impl FnMut() -> Result<R>,
    ) -> Result<R> {
        let s = stripe_of(table, key);
        let held_here =
            || self.held.iter().any(|h| h.2 != Hold::Shared && stripe_of(h.0, h.1) == s);
        let busy = || !mgr.stripe(s).load(Ordering::Acquire).is_multiple_of(VERSION);
        if self.age != 0 && busy() && !held_here() {
            let since = std::time::Instant::now();
            while busy() && since.elapsed() < YOUNGER_WAIT_BOUND {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
            mgr.stats.add(Stat::ReadWaits as usize, 1);
        }
        self.read_optimistic(mgr, txn, table, key, read)
    }

    /// Whether every optimistic read still holds (nothing written to its key since). A
    /// transaction validates before its commit point.
    pub fn validate(&mut self, mgr: &LockManager) -> Result<()> {
        for r in &self.reads {
            if mgr.stripe(r.stripe).load(Ordering::Acquire) != r.expect {
                mgr.stats.add(Stat::ValidationFailures as usize, 1);
                self.refused = true;
                return Err(DbError::Conflict { table: r.table, key: r.key });
            }
        }
        Ok(())
    }

    /// Releases every lock after a commit: each written key gets a new version.
    pub fn release_all(&mut self, mgr: &LockManager, txn: u64) {
        self.release(mgr, txn, VERSION - HOLDER);
    }

    /// Releases every lock after a rollback, keeping the keys' versions (a reader that read them
    /// before the first write read what is there again). Only for an engine whose writes were
    /// never visible in place (`lsm` buffers them to its commit): were they written and
    /// restored, a read overlapping both would load the same stripe word before and after and
    /// take the torn row as committed (the `inplace` bug of
    /// `regression_inplace_rollback_torn_read`); such an engine uses [`LockSet::release_all`].
    pub fn release_after_rollback(&mut self, mgr: &LockManager, txn: u64) {
        self.release(mgr, txn, HOLDER.wrapping_neg());
    }

    fn release(&mut self, mgr: &LockManager, txn: u64, exclusive_delta: u64) {
        self.reads.clear();
        for (t, k, hold) in self.held.drain(..) {
            if hold == Hold::Fast {
                // The lock word first: a waiter woken by the stripe word finds the key free.
                mgr.release_fast(t, k);
            }
            if hold != Hold::Shared {
                // Release: a reader that sees the new word sees the committed (or restored) row.
                mgr.stripe(stripe_of(t, k)).fetch_add(exclusive_delta, Ordering::Release);
            }
            if hold != Hold::Fast {
                mgr.unlock(txn, t, k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_locks_share_and_exclusive_conflicts() {
        let m = LockManager::default();
        assert_eq!(m.lock(1, 0, 7, LockMode::Shared).unwrap(), Grant::New);
        assert_eq!(m.lock(2, 0, 7, LockMode::Shared).unwrap(), Grant::New);
        assert!(m.lock(3, 0, 7, LockMode::Exclusive).unwrap_err().is_retryable());
        // Upgrade fails while another shares, succeeds once alone.
        assert!(m.lock(1, 0, 7, LockMode::Exclusive).is_err());
        m.unlock(2, 0, 7);
        assert_eq!(m.lock(1, 0, 7, LockMode::Exclusive).unwrap(), Grant::Upgraded);
        assert!(m.lock(2, 0, 7, LockMode::Shared).is_err());
        m.unlock(1, 0, 7);
        assert_eq!(m.lock(2, 0, 7, LockMode::Exclusive).unwrap(), Grant::New);
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
            assert_eq!(m.lock(6, 1, k, LockMode::Exclusive).unwrap(), Grant::New);
        }
    }

    #[test]
    fn an_optimistic_read_takes_no_lock_and_fails_validation_once_the_key_is_written() {
        let m = LockManager::default();
        let (mut reader, mut writer) = (LockSet::default(), LockSet::default());
        let before = lock_table_requests();
        assert_eq!(reader.read_optimistic(&m, 1, 0, 7, || Ok(70)).unwrap(), 70);
        assert_eq!(lock_table_requests(), before, "an optimistic read used the lock table");
        reader.validate(&m).unwrap();
        // A writer of another key on another stripe changes nothing the reader saw.
        let other = (0..1000).find(|&k| stripe_of(0, k) != stripe_of(0, 7)).unwrap();
        writer.lock(&m, 2, 0, other, LockMode::Exclusive).unwrap();
        writer.release_all(&m, 2);
        reader.validate(&m).unwrap();
        // A writer of the key (readers never block it) makes the reader fail validation.
        writer.lock(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
        assert!(reader.validate(&m).unwrap_err().is_retryable());
        writer.release_all(&m, 2);
        assert!(reader.validate(&m).is_err(), "the version moved on: still invalid");
        reader.release_all(&m, 1);
        // A writer that rolls back restores what a reader read: the read stays valid.
        reader.read_optimistic(&m, 1, 0, 7, || Ok(70)).unwrap();
        writer.lock(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
        assert!(reader.validate(&m).is_err(), "a writer in flight");
        writer.release_after_rollback(&m, 2);
        reader.validate(&m).unwrap();
    }

    #[test]
    fn a_read_meeting_a_writer_takes_a_shared_lock_and_conflicts() {
        let m = LockManager::default();
        let (mut reader, mut writer) = (LockSet::default(), LockSet::default());
        writer.lock(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
        let r = reader.read_optimistic(&m, 1, 0, 7, || Ok(()));
        assert!(r.unwrap_err().is_retryable(), "no-wait conflict with the writer");
        // The writer reads its own write through its lock.
        assert_eq!(writer.read_optimistic(&m, 2, 0, 7, || Ok(1)).unwrap(), 1);
        writer.release_all(&m, 2);
        assert_eq!(reader.read_optimistic(&m, 1, 0, 7, || Ok(2)).unwrap(), 2);
    }

    #[test]
    fn read_then_write_of_the_same_key_validates_the_read_and_keeps_other_reads_valid() {
        let m = LockManager::default();
        let mut t = LockSet::default();
        // Two keys on one stripe: writing one must not invalidate this transaction's read of
        // the other (its own holder is expected).
        let k2 = (8..1_000_000).find(|&k| stripe_of(0, k) == stripe_of(0, 7)).unwrap();
        t.read_optimistic(&m, 1, 0, 7, || Ok(())).unwrap();
        t.read_optimistic(&m, 1, 0, k2, || Ok(())).unwrap();
        t.lock(&m, 1, 0, 7, LockMode::Exclusive).unwrap();
        t.validate(&m).unwrap();
        t.release_all(&m, 1);
        // A read overtaken by another writer's commit cannot be written on.
        let mut other = LockSet::default();
        t.read_optimistic(&m, 1, 0, 7, || Ok(())).unwrap();
        other.lock(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
        other.release_all(&m, 2);
        assert!(t.lock(&m, 1, 0, 7, LockMode::Exclusive).is_err(), "lost update allowed");
        t.release_all(&m, 1);
        let word = m.stripe(stripe_of(0, 7)).load(Ordering::Relaxed);
        assert_eq!(word % VERSION, 0, "every holder released: {word:#x}");
    }

    #[test]
    fn a_read_overtaken_mid_way_is_repeated() {
        let m = LockManager::default();
        let mut t = LockSet::default();
        let mut w = LockSet::default();
        let mut calls = 0;
        let v = t
            .read_optimistic(&m, 1, 0, 7, || {
                calls += 1;
                if calls == 1 {
                    // A writer commits while the first attempt reads: torn bytes, say.
                    w.lock(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
                    w.release_all(&m, 2);
                    return Err(DbError::Corrupt("torn".into()));
                }
                Ok(calls)
            })
            .unwrap();
        assert_eq!(v, 2, "the torn attempt was not repeated");
    }

    /// Keys of table 0 on `n` distinct stripes.
    fn keys_on_distinct_stripes(n: usize) -> Vec<u64> {
        let mut seen = std::collections::HashSet::new();
        (0..).filter(|&k| seen.insert(stripe_of(0, k))).take(n).collect()
    }

    #[test]
    fn an_uncontended_exclusive_lock_takes_no_shard_mutex_and_still_excludes() {
        let m = LockManager::default();
        let keys = keys_on_distinct_stripes(50);
        let mut a = LockSet::aged(10);
        let before = shard_locks_taken();
        for &k in &keys {
            a.lock_or_wait(&m, 1, 0, k, LockMode::Exclusive).unwrap();
        }
        assert_eq!(shard_locks_taken(), before, "uncontended exclusive locks took shard mutexes");
        let fast = m.activity().iter().find(|a| a.0 == "lock_fast").unwrap().1;
        assert_eq!(fast, 50);
        // Held without a table entry, yet every other request for those keys conflicts.
        for &k in &keys {
            assert!(m.lock(2, 0, k, LockMode::Shared).unwrap_err().is_retryable(), "key {k}");
            assert!(m.lock(2, 0, k, LockMode::Exclusive).is_err(), "key {k}");
        }
        // The holder's own requests find it without the table; another key of a held stripe
        // goes to the table.
        let before = shard_locks_taken();
        a.lock(&m, 1, 0, keys[0], LockMode::Shared).unwrap();
        a.lock(&m, 1, 0, keys[0], LockMode::Exclusive).unwrap();
        assert!(a.read_optimistic(&m, 1, 0, keys[0], || Ok(())).is_ok());
        assert_eq!(shard_locks_taken(), before, "a holder's own request went to the table");
        let k2 = (keys[0] + 1..).find(|&k| stripe_of(0, k) == stripe_of(0, keys[0])).unwrap();
        assert_eq!(m.lock(2, 0, k2, LockMode::Exclusive).unwrap(), Grant::New);
        // A table entry on the stripe keeps later exclusive requests off the fast path.
        a.release_all(&m, 1);
        let mut b = LockSet::default();
        let before = shard_locks_taken();
        b.lock(&m, 3, 0, keys[0], LockMode::Exclusive).unwrap();
        assert!(shard_locks_taken() > before, "a fast lock beside a table entry");
        assert!(m.lock(2, 0, keys[0], LockMode::Shared).is_err());
        b.release_all(&m, 3);
        m.unlock(2, 0, k2);
        // Everything released: each lock word is back to 0, each stripe word has no holder.
        for &k in &keys {
            assert_eq!(m.lines[stripe_of(0, k)].lock.load(Ordering::Relaxed), 0, "key {k}");
            assert_eq!(m.stripe(stripe_of(0, k)).load(Ordering::Relaxed) % VERSION, 0);
        }
    }

    /// Threads increment counters under exclusive locks of a few keys (two of them on one
    /// stripe, so fast and table holders meet), with shared locks mixed in: a lost increment
    /// is two holders at once.
    #[test]
    fn fast_and_table_exclusive_locks_exclude_each_other_under_contention() {
        let m = LockManager::default();
        let k0 = 5u64;
        let k1 = (k0 + 1..).find(|&k| stripe_of(0, k) == stripe_of(0, k0)).unwrap();
        let keys = [k0, k1, 7, 9];
        let counters: Vec<AtomicU64> = keys.iter().map(|_| AtomicU64::new(0)).collect();
        let granted: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u64)
                .map(|t| {
                    let (m, counters) = (&m, &counters);
                    s.spawn(move || {
                        let mut n = 0u64;
                        for i in 0..3000u64 {
                            let txn = (i << 16) | (t + 1);
                            let mut set = LockSet::aged(i * 4 + t + 1);
                            let which = ((i * 7 + t * 3) % 4) as usize;
                            if i % 2 == 0 {
                                let other = keys[(which + 1) % 4];
                                let _ = set.lock(m, txn, 0, other, LockMode::Shared);
                            }
                            let res = set.lock_or_wait(m, txn, 0, keys[which], LockMode::Exclusive);
                            if res.is_ok() {
                                let c = &counters[which];
                                let v = c.load(Ordering::Relaxed);
                                for _ in 0..200 {
                                    std::hint::spin_loop();
                                }
                                c.store(v + 1, Ordering::Relaxed);
                                n += 1;
                            }
                            set.release_all(m, txn);
                        }
                        n
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        let total: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, granted, "two holders of one key at once");
        assert!(granted > 0);
        for &k in &keys {
            assert_eq!(m.lines[stripe_of(0, k)].lock.load(Ordering::Relaxed), 0, "key {k}");
        }
    }

    /// The fastest of `tries` timings of `f`: a loaded machine can pause any one of them past
    /// a bound of microseconds, but not every one.
    fn fastest(tries: u32, mut f: impl FnMut()) -> std::time::Duration {
        (0..tries)
            .map(|_| {
                let t0 = std::time::Instant::now();
                f();
                t0.elapsed()
            })
            .min()
            .unwrap_or_default()
    }

    #[test]
    fn wait_die_an_older_writer_waits_for_a_younger_one_and_a_younger_dies_after_its_grace() {
        let m = LockManager::default();
        let (mut old, mut young) = (LockSet::aged(10), LockSet::aged(20));
        // The older holds: the younger dies after its short grace period (every time), and not
        // after the older's bound (the fastest of a few tries, so a preempted one does not count).
        old.lock_or_wait(&m, 1, 0, 7, LockMode::Exclusive).unwrap();
        let died = fastest(5, || {
            let t0 = std::time::Instant::now();
            assert!(young.lock_or_wait(&m, 2, 0, 7, LockMode::Exclusive).is_err());
            assert!(t0.elapsed() >= YOUNGER_WAIT_BOUND);
        });
        assert!(died < WAIT_BOUND, "the younger waited {died:?}, past the older's bound");
        // Within its grace period the younger gets a row the older releases.
        std::thread::scope(|s| {
            let m = &m;
            let waiter = s.spawn(move || {
                let mut young = LockSet::aged(20);
                young.lock_or_wait(m, 2, 0, 7, LockMode::Exclusive).map(|_| young)
            });
            old.release_all(m, 1);
            if let Ok(mut young) = waiter.join().unwrap() {
                young.release_all(m, 2);
            }
        });
        // The younger holds: the older waits, and gets the lock once the younger ends. A try
        // counts when the waiter was waiting before the release (a loaded machine may start it
        // late, or pause this thread past the older's bound, so it gives up): at least one of
        // them must have waited, been granted and been counted, and none counted twice.
        let lock_waits =
            |m: &LockManager| m.activity().iter().find(|a| a.0 == "lock_waits").unwrap().1;
        let mut counted = 0;
        for _ in 0..50 {
            let waits_before = lock_waits(&m);
            young.lock_or_wait(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
            let granted = std::thread::scope(|s| {
                let m = &m;
                let waiter = s.spawn(move || {
                    let mut old = LockSet::aged(10);
                    old.lock_or_wait(m, 1, 0, 7, LockMode::Exclusive).map(|_| old)
                });
                std::thread::sleep(std::time::Duration::from_micros(300));
                young.release_all(m, 2);
                match waiter.join().unwrap() {
                    Ok(mut old) => {
                        old.release_all(m, 1);
                        true
                    }
                    Err(_) => false,
                }
            });
            let waits = lock_waits(&m) - waits_before;
            assert!(waits <= 1, "one wait counted {waits} times");
            if granted && waits == 1 {
                counted += 1;
                break;
            }
        }
        assert_eq!(counted, 1, "no try saw the older wait, get the lock and be counted");
        // Bounded: a holder that never ends makes the older give up after WAIT_BOUND.
        let mut young = LockSet::aged(20);
        young.lock_or_wait(&m, 2, 0, 7, LockMode::Exclusive).unwrap();
        let t0 = std::time::Instant::now();
        assert!(LockSet::aged(10).lock_or_wait(&m, 1, 0, 7, LockMode::Exclusive).is_err());
        assert!(t0.elapsed() >= WAIT_BOUND);
        // No-wait requests (scans) never wait.
        let refused = fastest(5, || {
            assert!(LockSet::aged(10).lock(&m, 1, 0, 7, LockMode::Shared).is_err());
        });
        assert!(refused < WAIT_BOUND, "a no-wait request took {refused:?}");
    }
}

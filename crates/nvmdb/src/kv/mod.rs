//! Named tables with typed keys and values of any length, over any [`storage::Engine`]:
//! the embedding API of [`crate::Db`] (`db.write(|tx| …)`, `db.read(|tx| …)`).
//!
//! Each user table is a B+tree whose nodes are rows of one engine table (`tree.rs`); values
//! longer than a node entry are split across fixed-size rows of size-class tables
//! (`store.rs`). Every row the layer touches for one user transaction is written by one engine
//! transaction, so the engine's crash recovery (In-Place undo logging, ARIES WAL, Group Commit —
//! Pelley et al., VLDB 2014, §3) makes a user transaction, large values included, all or
//! nothing. Invariant: a committed `db.write` is durable when it returns, and a value is read
//! back whole or not at all.

mod key;
mod node;
mod store;
mod tree;
mod value;

pub use key::{Key, KeyArg};
pub use node::{MAX_INLINE_BYTES, MAX_KEY_BYTES};
pub use store::MAX_VALUE_BYTES;
pub use value::Value;

use node::{Node, Value as NodeValue};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::sync::{Condvar, Mutex};
use std::time::Duration;
use storage::alloc::FreeingScope;
use storage::{DbError, Result, Txn};
pub(crate) use store::{is_internal, Tables};
use store::{Store, CATALOG_ROOT};

/// Longest table name, in bytes; a longer (or empty) name is [`DbError::Invalid`].
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let name = "n".repeat(nvmdb::MAX_TABLE_NAME_BYTES);
/// db.write(|tx| tx.open_table::<u64>(&name).map(|_| ()))?;
/// let too_long = name + "n";
/// assert!(db.write(|tx| tx.open_table::<u64>(&too_long).map(|_| ())).is_err());
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub const MAX_TABLE_NAME_BYTES: usize = 255;

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
    /// transaction fails with [`DbError::Invalid`] saying so.
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

/// The engine transaction behind a [`WriteTx`] or [`ReadTx`], and what the layer learned
/// while running it.
pub(crate) struct TxCore<'db> {
    txn: RefCell<Option<Box<dyn Txn + 'db>>>,
    tables: Tables,
    slot: usize,
    /// A retryable engine error was seen: the transaction must abort and run again.
    pub conflicted: Cell<bool>,
    /// Something went to the trash: reclaim after commit.
    pub trashed: Cell<bool>,
    /// What a `RegionFull` error adds: how this database can be given room.
    full_hint: &'db str,
}

/// Object-safe access to a [`TxCore`], so table handles need not name the engine lifetime.
trait Core {
    fn run(&self, f: &mut dyn FnMut(&mut Store<'_, '_>) -> Result<()>) -> Result<()>;
}

impl Core for TxCore<'_> {
    fn run(&self, f: &mut dyn FnMut(&mut Store<'_, '_>) -> Result<()>) -> Result<()> {
        let mut guard = self.txn.borrow_mut();
        let txn = guard
            .as_deref_mut()
            .ok_or_else(|| DbError::Invalid("the transaction has ended".into()))?;
        let mut store = Store { txn, tables: self.tables, slot: self.slot, trashed: false };
        let result = f(&mut store);
        if store.trashed {
            self.trashed.set(true);
        }
        match result {
            Err(e) if e.is_retryable() => {
                self.conflicted.set(true);
                Err(e)
            }
            Err(DbError::RegionFull(what)) => {
                let what = format!("{what}; {}", self.full_hint);
                Err(in_library_terms(DbError::RegionFull(what)))
            }
            Err(e @ DbError::TxnTooLarge(_)) => Err(in_library_terms(e)),
            other => other,
        }
    }
}

fn with<R>(core: &dyn Core, f: impl FnOnce(&mut Store<'_, '_>) -> Result<R>) -> Result<R> {
    let mut f = Some(f);
    let mut out = None;
    core.run(&mut |s| {
        let f = f.take().ok_or_else(|| DbError::Invalid("re-entered transaction".into()))?;
        out = Some(f(s)?);
        Ok(())
    })?;
    out.ok_or_else(|| DbError::Invalid("operation produced no result".into()))
}

impl<'db> TxCore<'db> {
    pub fn new(txn: Box<dyn Txn + 'db>, tables: Tables, slot: usize, full_hint: &'db str) -> Self {
        TxCore {
            txn: RefCell::new(Some(txn)),
            tables,
            slot,
            conflicted: Cell::new(false),
            trashed: Cell::new(false),
            full_hint,
        }
    }

    pub fn take_txn(&self) -> Option<Box<dyn Txn + 'db>> {
        self.txn.borrow_mut().take()
    }

    /// A table's catalog entry: root node id, key kind, and whether its length is counted
    /// (entries written before counting existed have 9 bytes, without the flag byte).
    fn catalog_entry(&self, name: &str) -> Result<Option<(u64, u8, bool)>> {
        check_table_name(name)?;
        with(self, |s| match tree::get(s, CATALOG_ROOT, name.as_bytes())? {
            None => Ok(None),
            Some(NodeValue::Inline(v)) if v.len() == 9 || v.len() == 10 => {
                let root = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
                let counted = v.get(9).is_some_and(|f| f & CATALOG_COUNTED != 0);
                Ok(Some((root, v[8], counted)))
            }
            Some(_) => Err(DbError::Corrupt(format!("catalog entry of table `{name}`"))),
        })
    }

    fn open<K: Key + ?Sized>(&self, name: &str, create: bool) -> Result<Option<(u64, bool)>> {
        match self.catalog_entry(name)? {
            Some((root, kind, counted)) if kind == K::KIND => Ok(Some((root, counted))),
            Some((_, kind, _)) => Err(DbError::Invalid(format!(
                "table `{name}` has {} keys; open it as Table<{}>, not {}",
                kind_name(kind),
                kind_name(kind),
                K::NAME
            ))),
            None if !create => Ok(None),
            None => with(self, |s| {
                let root = s.alloc_id()?;
                s.insert_node(root, &Node::empty_leaf())?;
                let mut entry = root.to_le_bytes().to_vec();
                entry.extend([K::KIND, CATALOG_COUNTED]);
                tree::put(s, CATALOG_ROOT, name.as_bytes(), NodeValue::Inline(entry))?;
                Ok(Some((root, true)))
            }),
        }
    }

    fn table_names(&self) -> Result<Vec<String>> {
        let range = Range::<str>::new(self, CATALOG_ROOT, Bound::Unbounded, Bound::Unbounded);
        range.map(|r| r.map(|(k, _)| k)).collect()
    }
}

/// The command-line flags that messages of the device and engine layers name (they are shared
/// with the `nvmdb` command), and the `DbOptions` field a library user sets instead.
const FLAG_TO_FIELD: [(&str, &str); 9] = [
    ("--max-size", "DbOptions::max_size_bytes"),
    ("--size", "DbOptions::region.size_bytes"),
    ("--sync msync", "region.sync = SyncMode::Msync"),
    ("--medium file or shm", "region.medium = Medium::File or Shm"),
    ("--medium", "DbOptions::region.medium"),
    ("--path", "DbOptions::region.path"),
    ("--eadr", "region.eadr"),
    ("--engine-opt", "DbOptions::engine_options"),
    ("--engine", "DbOptions::engine"),
];

/// `e` as a library user should read it: the flags its message names become `DbOptions`
/// fields (a device error that names one becomes [`DbError::Invalid`] with the new text).
pub(crate) fn in_library_terms(e: DbError) -> DbError {
    let rewrite = |mut msg: String| {
        for (flag, field) in FLAG_TO_FIELD {
            msg = msg.replace(flag, field);
        }
        msg
    };
    match e {
        DbError::RegionFull(m) => DbError::RegionFull(rewrite(m)),
        DbError::TxnTooLarge(m) => DbError::TxnTooLarge(rewrite(m)),
        DbError::Invalid(m) => DbError::Invalid(rewrite(m)),
        DbError::Format(m) => DbError::Format(rewrite(m)),
        DbError::Pmem(p) if p.to_string().contains("--") => {
            DbError::Invalid(rewrite(p.to_string()))
        }
        e => e,
    }
}

/// Catalog flag: the table keeps its entry count in per-slot rows (`Store::bump_len`).
const CATALOG_COUNTED: u8 = 1;

fn kind_name(kind: u8) -> &'static str {
    match kind {
        1 => "u64",
        2 => "i64",
        3 => "str",
        4 => "[u8]",
        _ => "unknown",
    }
}

fn check_table_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_TABLE_NAME_BYTES {
        return Err(DbError::Invalid(format!(
            "table name must be 1..={MAX_TABLE_NAME_BYTES} bytes: {name:?}"
        )));
    }
    Ok(())
}

fn encode_key<K: Key + ?Sized>(key: impl KeyArg<K>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    key.encode_key(&mut out);
    if out.len() > MAX_KEY_BYTES {
        return Err(DbError::Invalid(format!(
            "key of {} bytes is longer than the {MAX_KEY_BYTES}-byte limit",
            out.len()
        )));
    }
    Ok(out)
}

/// A read-write transaction, handed to the closure of [`crate::Db::write`]. Everything it
/// does commits together when the closure returns `Ok`, and is rolled back when it returns
/// `Err` (or panics).
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let t = tx.open_table::<str>("colours")?;
///     t.insert("red", b"ff0000")?;
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct WriteTx<'db> {
    pub(crate) core: TxCore<'db>,
    pub(crate) durability: Cell<Durability>,
}

/// When [`crate::Db::write`] returns after its commit (set per transaction with
/// [`WriteTx::set_durability`]).
///
/// On the `group` engine (NVRAM Group Commit — Pelley et al., VLDB 2014, §3.3) a commit
/// becomes durable with its batch, up to `engine_options.batch_period_ms` later: `Immediate`
/// waits for it, `Eventual` does not, and a crash before the batch persists loses the
/// transaction whole (never part of it). Every other engine makes each commit durable before
/// it returns, so there both mean `Immediate`.
///
/// ```
/// use nvmdb::Durability;
/// assert_eq!(Durability::default(), Durability::Immediate);
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     tx.set_durability(Durability::Eventual);
///     tx.open_table::<u64>("t")?.insert(1, b"x")
/// })?;
/// db.flush()?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Durability {
    /// `Db::write` returns once the commit is durable.
    #[default]
    Immediate,
    /// `Db::write` returns once the commit is visible to other transactions; it becomes
    /// durable with its group-commit batch, or at [`crate::Db::flush`].
    Eventual,
}

/// A read-only transaction, handed to the closure of [`crate::Db::read`]. It sees committed
/// data and locks what it reads until it ends, so its reads are repeatable.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let n = db.read(|tx| Ok(tx.table_names()?.len()))?;
/// assert_eq!(n, 0);
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct ReadTx<'db> {
    pub(crate) core: TxCore<'db>,
}

impl WriteTx<'_> {
    /// Opens the table `name`, creating it (empty) if it does not exist. A table keeps the key
    /// type it was created with; opening it with another is an error.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<u64>("numbers")?;
    ///     t.insert(1, b"one")?;
    ///     assert!(tx.open_table::<str>("numbers").is_err());
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn open_table<K: Key + ?Sized>(&self, name: &str) -> Result<Table<'_, K>> {
        let (root, counted) = self
            .core
            .open::<K>(name, true)?
            .ok_or_else(|| DbError::Invalid(format!("table `{name}` could not be created")))?;
        Ok(Table { core: &self.core, root, counted, _key: PhantomData })
    }

    /// Removes the table `name` and everything in it; returns whether it existed. The table
    /// disappears when the transaction commits; its rows are reclaimed after that.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("scratch")?.insert(1, b"x"))?;
    /// assert!(db.write(|tx| tx.drop_table("scratch"))?);
    /// assert!(!db.write(|tx| tx.drop_table("scratch"))?);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn drop_table(&self, name: &str) -> Result<bool> {
        let Some((root, _, counted)) = self.core.catalog_entry(name)? else { return Ok(false) };
        // A full region must still drop a table (its trash entry may need a page).
        let _freeing = FreeingScope::enter();
        with(&self.core, |s| {
            tree::remove(s, CATALOG_ROOT, name.as_bytes())?;
            if counted {
                s.drop_len(root)?;
            }
            s.discard_tree(root)?;
            Ok(true)
        })
    }

    /// Names of all tables, in byte order.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let names = db.write(|tx| {
    ///     tx.open_table::<u64>("b")?;
    ///     tx.open_table::<u64>("a")?;
    ///     tx.table_names()
    /// })?;
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn table_names(&self) -> Result<Vec<String>> {
        self.core.table_names()
    }

    /// Chooses when [`crate::Db::write`] returns after this transaction commits (see
    /// [`Durability`]); the last call wins.
    ///
    /// ```
    /// let mut options = nvmdb::DbOptions::default();
    /// options.engine = "group".into();
    /// let db = nvmdb::Db::open(&options)?;
    /// db.write(|tx| {
    ///     tx.set_durability(nvmdb::Durability::Eventual);
    ///     tx.open_table::<str>("events")?.insert("boot", b"ok")
    /// })?;
    /// db.flush()?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn set_durability(&self, durability: Durability) {
        self.durability.set(durability);
    }
}

impl ReadTx<'_> {
    /// Opens the table `name` for reading; `None` if it does not exist.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<i64>("temps")?.insert(-5, b"cold"))?;
    /// let v = db.read(|tx| match tx.open_table::<i64>("temps")? {
    ///     Some(t) => t.get(-5),
    ///     None => Ok(None),
    /// })?;
    /// assert_eq!(v.as_deref(), Some(&b"cold"[..]));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn open_table<K: Key + ?Sized>(&self, name: &str) -> Result<Option<ReadTable<'_, K>>> {
        let root = self.core.open::<K>(name, false)?;
        Ok(root.map(|(root, counted)| ReadTable {
            inner: Table { core: &self.core, root, counted, _key: PhantomData },
        }))
    }

    /// Names of all tables, in byte order.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<str>("t").map(|_| ()))?;
    /// assert_eq!(db.read(|tx| tx.table_names())?, ["t"]);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn table_names(&self) -> Result<Vec<String>> {
        self.core.table_names()
    }
}

/// A table opened in a [`WriteTx`]: keys of type `K` (`u64`, `i64`, `str` or `[u8]`) in
/// order, values of any length up to [`MAX_VALUE_BYTES`].
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let t = tx.open_table::<str>("users")?;
///     t.insert("ada", b"lovelace")?;
///     assert_eq!(t.get("ada")?.as_deref(), Some(&b"lovelace"[..]));
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct Table<'tx, K: Key + ?Sized> {
    core: &'tx dyn Core,
    root: u64,
    /// The table keeps its length (tables made before counting existed do not).
    counted: bool,
    _key: PhantomData<fn(&K)>,
}

/// A table opened in a [`ReadTx`]: the reading half of [`Table`].
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(3, b"c"))?;
/// let len = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len()))?;
/// assert_eq!(len, 1);
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct ReadTable<'tx, K: Key + ?Sized> {
    inner: Table<'tx, K>,
}

impl<'tx, K: Key + ?Sized> Table<'tx, K> {
    /// Stores `value` under `key`, replacing any value there; returns whether one was.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let big = vec![7u8; 1 << 20];
    /// db.write(|tx| {
    ///     let t = tx.open_table::<[u8]>("blobs")?;
    ///     assert!(!t.insert(b"k", &big)?);
    ///     assert!(t.insert(b"k", b"small")?);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn insert(&self, key: impl KeyArg<K>, value: impl AsRef<[u8]>) -> Result<bool> {
        let key = encode_key(key)?;
        let root = self.root;
        let counted = self.counted;
        with(self.core, |s| {
            let stored = s.put_value(value.as_ref())?;
            let old = tree::put(s, root, &key, stored)?;
            match &old {
                Some(old) => s.discard_value(old)?,
                None if counted => s.bump_len(root, 1)?,
                None => {}
            }
            Ok(old.is_some())
        })
    }

    /// Removes `key`; returns its value.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     t.insert(1, b"a")?;
    ///     assert_eq!(t.remove(1)?.as_deref(), Some(&b"a"[..]));
    ///     assert_eq!(t.remove(1)?, None);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn remove(&self, key: impl KeyArg<K>) -> Result<Option<Vec<u8>>> {
        self.remove_encoded(&encode_key(key)?)
    }

    fn remove_encoded(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let root = self.root;
        // A full region must still accept deletes (the trash entry may need a page).
        let _freeing = FreeingScope::enter();
        let counted = self.counted;
        with(self.core, |s| match tree::remove(s, root, key)? {
            None => Ok(None),
            Some(old) => {
                let bytes = s.get_value(&old)?;
                s.discard_value(&old)?;
                if counted {
                    s.bump_len(root, -1)?;
                }
                Ok(Some(bytes))
            }
        })
    }

    /// The value under `key`.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     assert_eq!(t.get(9)?, None);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn get(&self, key: impl KeyArg<K>) -> Result<Option<Vec<u8>>> {
        self.get_encoded(&encode_key(key)?)
    }

    /// Stores a typed value (see [`Value`]); returns whether one was replaced.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let balances = tx.open_table::<str>("balances")?;
    ///     balances.insert_as("alice", &100u64)?;
    ///     let b: u64 = balances.get_as("alice")?.unwrap_or(0);
    ///     balances.insert_as("alice", &(b - 30))
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn insert_as<V: Value>(&self, key: impl KeyArg<K>, value: &V) -> Result<bool> {
        self.insert(key, value.to_bytes())
    }

    /// The typed value under `key` (see [`Value`]); a stored value that is not a `V` is
    /// [`DbError::Invalid`].
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let name = db.write(|tx| {
    ///     let t = tx.open_table::<u64>("names")?;
    ///     t.insert_as(7, &"ada".to_string())?;
    ///     assert!(t.get_as::<u64>(7).is_err()); // 3 bytes are not a u64
    ///     t.get_as::<String>(7)
    /// })?;
    /// assert_eq!(name.as_deref(), Some("ada"));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn get_as<V: Value>(&self, key: impl KeyArg<K>) -> Result<Option<V>> {
        self.get(key)?.map(|b| V::from_bytes(&b)).transpose()
    }

    fn get_encoded(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let root = self.root;
        with(self.core, |s| match tree::get(s, root, key)? {
            None => Ok(None),
            Some(v) => s.get_value(&v).map(Some),
        })
    }

    /// Entries with keys in `range`, in key order, as `(key, value)`.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let keys = db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     for k in 0..10u64 {
    ///         t.insert(k, k.to_string())?;
    ///     }
    ///     t.range(3..6)?.map(|e| e.map(|(k, _)| k)).collect::<Result<Vec<_>, _>>()
    /// })?;
    /// assert_eq!(keys, [3, 4, 5]);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn range<Q: KeyArg<K>>(&self, range: impl RangeBounds<Q>) -> Result<Range<'tx, K>> {
        let bound = |b: Bound<&Q>| -> Result<Bound<Vec<u8>>> {
            Ok(match b {
                Bound::Included(k) => Bound::Included(encode_ref(k)?),
                Bound::Excluded(k) => Bound::Excluded(encode_ref(k)?),
                Bound::Unbounded => Bound::Unbounded,
            })
        };
        let start = bound(range.start_bound())?;
        let end = bound(range.end_bound())?;
        Ok(Range::new(self.core, self.root, start, end))
    }

    /// Every entry, in key order.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let all = db.write(|tx| {
    ///     let t = tx.open_table::<str>("t")?;
    ///     t.insert("b", b"2")?;
    ///     t.insert("a", b"1")?;
    ///     t.iter().collect::<Result<Vec<_>, _>>()
    /// })?;
    /// assert_eq!(all, [("a".to_string(), b"1".to_vec()), ("b".to_string(), b"2".to_vec())]);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn iter(&self) -> Range<'tx, K> {
        Range::new(self.core, self.root, Bound::Unbounded, Bound::Unbounded)
    }

    /// Number of entries: O(1) (it reads the table's per-slot counters, which every write
    /// transaction keeps in step with its inserts and removes, so they commit and recover
    /// together). Until the transaction ends, writers of the table in other transactions wait
    /// for (or retry against) the counters it read. A table created by a release before
    /// counting existed is read whole instead (O(entries)).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let n = db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     t.insert(1, b"")?;
    ///     t.len()
    /// })?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        let root = self.root;
        if self.counted {
            return with(self.core, |s| s.counted_len(root));
        }
        with(self.core, |s| tree::count(s, root))
    }

    /// Whether the table has no entries.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// assert!(db.write(|tx| tx.open_table::<u64>("t")?.is_empty())?);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.iter().next().transpose()?.is_none())
    }

    /// The entry with the lowest key.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let first = db.write(|tx| {
    ///     let t = tx.open_table::<str>("t")?;
    ///     t.insert("b", b"2")?;
    ///     t.insert("a", b"1")?;
    ///     t.first()
    /// })?;
    /// assert_eq!(first, Some(("a".to_string(), b"1".to_vec())));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn first(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        self.iter().next().transpose()
    }

    /// The entry with the highest key.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let last = db.write(|tx| {
    ///     let t = tx.open_table::<u64>("t")?;
    ///     for k in 0..1000u64 {
    ///         t.insert(k, k.to_le_bytes())?;
    ///     }
    ///     t.last()
    /// })?;
    /// assert_eq!(last, Some((999, 999u64.to_le_bytes().to_vec())));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn last(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        self.iter().next_back().transpose()
    }

    /// Removes the entry with the lowest key and returns it: a queue's pop.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let q = tx.open_table::<u64>("queue")?;
    ///     q.insert(2, b"second")?;
    ///     q.insert(1, b"first")?;
    ///     assert_eq!(q.pop_first()?, Some((1, b"first".to_vec())));
    ///     assert_eq!(q.pop_first()?, Some((2, b"second".to_vec())));
    ///     assert_eq!(q.pop_first()?, None);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn pop_first(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        let entry = self.iter().next_raw()?;
        self.pop(entry)
    }

    /// Removes the entry with the highest key and returns it: a stack's pop.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let s = tx.open_table::<str>("stack")?;
    ///     s.insert("a", b"1")?;
    ///     s.insert("b", b"2")?;
    ///     assert_eq!(s.pop_last()?, Some(("b".to_string(), b"2".to_vec())));
    ///     assert_eq!(s.len()?, 1);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn pop_last(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        let entry = self.iter().next_back_raw()?;
        self.pop(entry)
    }

    fn pop(&self, entry: Option<(Vec<u8>, NodeValue)>) -> Result<Option<(K::Owned, Vec<u8>)>> {
        let Some((key, _)) = entry else { return Ok(None) };
        let decoded = K::decode(&key)
            .ok_or_else(|| DbError::Corrupt(format!("key {key:02x?} is not a {}", K::NAME)))?;
        let value = self
            .remove_encoded(&key)?
            .ok_or_else(|| DbError::Corrupt(format!("key {key:02x?} vanished while popped")))?;
        Ok(Some((decoded, value)))
    }
}

fn encode_ref<K: Key + ?Sized, Q: KeyArg<K>>(k: &Q) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    k.encode_key(&mut out);
    if out.len() > MAX_KEY_BYTES {
        return Err(DbError::Invalid(format!("range bound longer than {MAX_KEY_BYTES} bytes")));
    }
    Ok(out)
}

impl<'tx, K: Key + ?Sized> ReadTable<'tx, K> {
    /// The value under `key` (see [`Table::get`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"a"))?;
    /// let v = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(None), |t| t.get(1)))?;
    /// assert_eq!(v.as_deref(), Some(&b"a"[..]));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn get(&self, key: impl KeyArg<K>) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }

    /// The typed value under `key` (see [`Table::get_as`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<str>("flags")?.insert_as("dark-mode", &true))?;
    /// let on = db.read(|tx| match tx.open_table::<str>("flags")? {
    ///     Some(t) => t.get_as::<bool>("dark-mode"),
    ///     None => Ok(None),
    /// })?;
    /// assert_eq!(on, Some(true));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn get_as<V: Value>(&self, key: impl KeyArg<K>) -> Result<Option<V>> {
        self.inner.get_as(key)
    }

    /// Entries with keys in `range` (see [`Table::range`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<str>("t")?;
    ///     for k in ["a", "b", "c"] {
    ///         t.insert(k, k)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let n = db.read(|tx| match tx.open_table::<str>("t")? {
    ///     Some(t) => Ok(t.range("b"..)?.count()),
    ///     None => Ok(0),
    /// })?;
    /// assert_eq!(n, 2);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn range<Q: KeyArg<K>>(&self, range: impl RangeBounds<Q>) -> Result<Range<'tx, K>> {
        self.inner.range(range)
    }

    /// Every entry, in key order (see [`Table::iter`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"a"))?;
    /// let n = db.read(|tx| Ok(
    ///     tx.open_table::<u64>("t")?.map_or(0, |t| t.iter().count())))?;
    /// assert_eq!(n, 1);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn iter(&self) -> Range<'tx, K> {
        self.inner.iter()
    }

    /// Number of entries (see [`Table::len`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t").map(|_| ()))?;
    /// let n = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len()))?;
    /// assert_eq!(n, 0);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    /// Whether the table has no entries.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t").map(|_| ()))?;
    /// assert!(db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(true), |t| t.is_empty()))?);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn is_empty(&self) -> Result<bool> {
        self.inner.is_empty()
    }

    /// The entry with the lowest key (see [`Table::first`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(5, b"x"))?;
    /// let first = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(None), |t| t.first()))?;
    /// assert_eq!(first, Some((5, b"x".to_vec())));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn first(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        self.inner.first()
    }

    /// The entry with the highest key (see [`Table::last`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<str>("t")?;
    ///     t.insert("a", b"1")?;
    ///     t.insert("z", b"26")
    /// })?;
    /// let last = db.read(|tx| tx.open_table::<str>("t")?.map_or(Ok(None), |t| t.last()))?;
    /// assert_eq!(last, Some(("z".to_string(), b"26".to_vec())));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn last(&self) -> Result<Option<(K::Owned, Vec<u8>)>> {
        self.inner.last()
    }
}

/// Iterator over a key range of a table, in key order, or in reverse with `.rev()` (both
/// ends may be used; they stop where they meet); yields `Result<(key, value)>`. It reads one
/// node at a time; entries the same transaction writes while it runs may or may not be
/// visited.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| {
///     let t = tx.open_table::<i64>("t")?;
///     for k in -3..3i64 {
///         t.insert(k, b"")?;
///     }
///     let keys: Vec<i64> = t.range(-1..)?.map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
///     assert_eq!(keys, [-1, 0, 1, 2]);
///     let back: Vec<i64> =
///         t.range(..=0)?.rev().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
///     assert_eq!(back, [0, -1, -2, -3]);
///     Ok(())
/// })?;
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct Range<'tx, K: Key + ?Sized> {
    core: &'tx dyn Core,
    root: u64,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Where the next forward node read starts; `None` once that end is exhausted.
    next_from: Option<Bound<Vec<u8>>>,
    /// Where the next reverse node read ends; `None` once that end is exhausted.
    next_to: Option<Bound<Vec<u8>>>,
    front: VecDeque<(Vec<u8>, NodeValue)>,
    back: VecDeque<(Vec<u8>, NodeValue)>,
    /// The last keys handed out at each end: neither end passes the other.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    _key: PhantomData<fn(&K)>,
}

impl<'tx, K: Key + ?Sized> Range<'tx, K> {
    fn new(core: &'tx dyn Core, root: u64, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Self {
        Range {
            core,
            root,
            next_from: Some(start.clone()),
            next_to: Some(end.clone()),
            start,
            end,
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_last: None,
            back_last: None,
            _key: PhantomData,
        }
    }

    fn past_end(&self, key: &[u8]) -> bool {
        let beyond = match &self.end {
            Bound::Unbounded => false,
            Bound::Included(e) => key > e.as_slice(),
            Bound::Excluded(e) => key >= e.as_slice(),
        };
        beyond || self.back_last.as_deref().is_some_and(|b| key >= b)
    }

    fn before_start(&self, key: &[u8]) -> bool {
        let before = match &self.start {
            Bound::Unbounded => false,
            Bound::Included(s) => key < s.as_slice(),
            Bound::Excluded(s) => key <= s.as_slice(),
        };
        before || self.front_last.as_deref().is_some_and(|f| key <= f)
    }

    fn exhaust(&mut self) {
        self.next_from = None;
        self.next_to = None;
        self.front.clear();
        self.back.clear();
    }

    /// The next entry from the front, its key still encoded and its value not read.
    fn next_raw(&mut self) -> Result<Option<(Vec<u8>, NodeValue)>> {
        while self.front.is_empty() {
            let Some(from) = self.next_from.take() else { return Ok(None) };
            let root = self.root;
            let (entries, upper) =
                with(self.core, |s| tree::seek(s, root, from.as_ref().map(|k| k.as_slice())))?;
            self.front = entries.into();
            self.next_from = upper.map(Bound::Included);
        }
        let Some((key, value)) = self.front.pop_front() else { return Ok(None) };
        if self.past_end(&key) {
            self.exhaust();
            return Ok(None);
        }
        self.front_last = Some(key.clone());
        Ok(Some((key, value)))
    }

    /// The next entry from the back, as [`Range::next_raw`].
    fn next_back_raw(&mut self) -> Result<Option<(Vec<u8>, NodeValue)>> {
        while self.back.is_empty() {
            let Some(to) = self.next_to.take() else { return Ok(None) };
            let root = self.root;
            let (entries, lower) =
                with(self.core, |s| tree::seek_back(s, root, to.as_ref().map(|k| k.as_slice())))?;
            self.back = entries.into();
            self.next_to = lower.map(Bound::Excluded);
        }
        let Some((key, value)) = self.back.pop_back() else { return Ok(None) };
        if self.before_start(&key) {
            self.exhaust();
            return Ok(None);
        }
        self.back_last = Some(key.clone());
        Ok(Some((key, value)))
    }

    fn decode(&self, entry: Option<(Vec<u8>, NodeValue)>) -> Result<Option<(K::Owned, Vec<u8>)>> {
        let Some((key, value)) = entry else { return Ok(None) };
        let decoded = K::decode(&key)
            .ok_or_else(|| DbError::Corrupt(format!("key {key:02x?} is not a {}", K::NAME)))?;
        let bytes = with(self.core, |s| s.get_value(&value))?;
        Ok(Some((decoded, bytes)))
    }

    fn finish(
        &mut self,
        r: Result<Option<(K::Owned, Vec<u8>)>>,
    ) -> Option<<Self as Iterator>::Item> {
        match r {
            Ok(e) => e.map(Ok),
            Err(e) => {
                self.exhaust();
                Some(Err(e))
            }
        }
    }
}

impl<K: Key + ?Sized> Iterator for Range<'_, K> {
    type Item = Result<(K::Owned, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.next_raw().and_then(|e| self.decode(e));
        self.finish(r)
    }
}

impl<K: Key + ?Sized> DoubleEndedIterator for Range<'_, K> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let r = self.next_back_raw().and_then(|e| self.decode(e));
        self.finish(r)
    }
}

/// A named table: name, key type, entries.
pub(crate) type NamedTable = (String, &'static str, u64);

/// The named tables of a database the layer wrote, each with its key type and entry count
/// (a full read of each); `None` if the engine holds no table layer (a benchmark region).
pub(crate) fn named_tables(engine: &dyn storage::Engine) -> Result<Option<Vec<NamedTable>>> {
    let Some(tables) = Tables::find(engine) else { return Ok(None) };
    let txn = engine.begin(0)?;
    let core = TxCore::new(txn, tables, 0, "");
    let mut out = Vec::new();
    let mut row = Vec::new();
    let has_catalog = with(&core, |s| s.txn.read(tables.nodes, CATALOG_ROOT, &mut row))?;
    if has_catalog {
        for name in core.table_names()? {
            let (root, kind, _) = core
                .catalog_entry(&name)?
                .ok_or_else(|| DbError::Corrupt(format!("table `{name}` left the catalog")))?;
            let entries = with(&core, |s| tree::count(s, root))?;
            out.push((name, kind_name(kind), entries));
        }
    }
    if let Some(txn) = core.take_txn() {
        txn.commit()?;
    }
    Ok(Some(out))
}

/// Creates the catalog tree's root if the region has none (first use of the layer).
pub(crate) fn init_catalog(txn: &mut (dyn Txn + '_), tables: Tables, slot: usize) -> Result<()> {
    let mut s = Store { txn, tables, slot, trashed: false };
    let mut row = Vec::new();
    if !s.txn.read(tables.nodes, CATALOG_ROOT, &mut row)? {
        s.insert_node(CATALOG_ROOT, &Node::empty_leaf())?;
    }
    Ok(())
}

/// One bounded step of trash reclamation (see `Store::reclaim_step`); false when empty.
pub(crate) fn reclaim_step(txn: &mut (dyn Txn + '_), tables: Tables, slot: usize) -> Result<bool> {
    let mut s = Store { txn, tables, slot, trashed: false };
    let _freeing = FreeingScope::enter();
    s.reclaim_step(RECLAIM_ROWS_PER_STEP)
}

/// Value rows freed per reclamation transaction: 16 rows of 4 KiB keep its undo at 64 KiB.
const RECLAIM_ROWS_PER_STEP: u64 = 16;

//! Table handles: typed keys over a B+tree (`tree.rs`), values inline or in value rows
//! (`store.rs`), O(1) lengths from per-slot counters.

use super::core::{with_table, Core};
use super::node::Value as NodeValue;
use super::range::Range;
use super::store::Store;
use super::value::Value;
use super::{encode_key, encode_ref, tree, Key, KeyArg};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use storage::alloc::FreeingScope;
use storage::{DbError, Result};

/// A table opened in a [`WriteTx`](crate::WriteTx): keys of type `K` (`u64`, `i64`, `str` or
/// `[u8]`) in order, values of any length up to [`MAX_VALUE_BYTES`](crate::MAX_VALUE_BYTES).
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
    pub(super) core: &'tx dyn Core,
    pub(super) root: u64,
    /// The table keeps its length (tables made before counting existed do not).
    pub(super) counted: bool,
    /// The table's name, to find it again after a rollback to a savepoint.
    pub(super) name: String,
    /// Rollbacks to savepoints the handle has seen (see [`Table::with`]).
    pub(super) epoch: Cell<usize>,
    pub(super) _key: PhantomData<fn(&K)>,
}

/// A table opened in a [`ReadTx`](crate::ReadTx): the reading half of [`Table`].
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(3, b"c"))?;
/// let len = db.read(|tx| tx.open_table::<u64>("t")?.map_or(Ok(0), |t| t.len()))?;
/// assert_eq!(len, 1);
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct ReadTable<'tx, K: Key + ?Sized> {
    pub(super) inner: Table<'tx, K>,
}

impl<'tx, K: Key + ?Sized> Table<'tx, K> {
    pub(super) fn new(core: &'tx dyn Core, name: &str, root: u64, counted: bool) -> Self {
        Table {
            core,
            root,
            counted,
            name: name.to_owned(),
            epoch: Cell::new(core.rollbacks()),
            _key: PhantomData,
        }
    }

    /// Runs `f` in the transaction, unless a rollback to a savepoint since the handle was
    /// made undid the table's creation (its root is gone: the error says to open it again).
    fn with<R>(&self, f: impl FnOnce(&mut Store<'_, '_>) -> Result<R>) -> Result<R> {
        let rollbacks = self.core.rollbacks();
        if rollbacks != self.epoch.get() {
            if self.core.root_of(&self.name)? != Some(self.root) {
                return Err(DbError::Invalid(format!(
                    "table `{}` was created after the savepoint the transaction rolled back \
                     to; open it again",
                    self.name
                )));
            }
            self.epoch.set(rollbacks);
        }
        with_table(self.core, Some(&self.name), f)
    }

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
        let (root, counted) = (self.root, self.counted);
        self.with(|s| insert_encoded(s, root, counted, &key, value.as_ref()))
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
        self.with(|s| match tree::remove(s, root, key)? {
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
        self.with(|s| match tree::get(s, root, key)? {
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
            return self.with(|s| s.counted_len(root));
        }
        self.with(|s| tree::count(s, root))
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

/// Stores `value` under the encoded `key` of the table rooted at `root` (see
/// [`Table::insert`]); returns whether a value was replaced.
pub(super) fn insert_encoded(
    s: &mut Store<'_, '_>,
    root: u64,
    counted: bool,
    key: &[u8],
    value: &[u8],
) -> Result<bool> {
    let stored = s.put_value(value)?;
    let old = tree::put(s, root, key, stored)?;
    match &old {
        Some(old) => s.discard_value(old)?,
        None if counted => s.bump_len(root, 1)?,
        None => {}
    }
    Ok(old.is_some())
}

//! The transactions handed to `db.write` / `db.read` closures (and held by
//! `db.begin_write()` / `db.begin_read()`), and when a write becomes durable.

use super::core::{with, TxCore};
use super::savepoint::Savepoint;
use super::store::CATALOG_ROOT;
use super::table::{ReadTable, Table};
use super::{tree, Key};
use std::cell::Cell;
use storage::alloc::FreeingScope;
use storage::{DbError, Result};

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
/// becomes durable with its batch, up to `engine_options.group.batch_period_ms` later: `Immediate`
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
        Ok(Table::new(&self.core, name, root, counted))
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

    /// A savepoint where the transaction stands now: [`WriteTx::rollback_to`] it to undo
    /// what the transaction does after it (see [`Savepoint`]). Works on every engine: the
    /// table layer keeps the before-images of rows written after a transaction's first
    /// savepoint (up to [`MAX_SAVEPOINT_LOG_BYTES`](crate::MAX_SAVEPOINT_LOG_BYTES)).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let kept = db.write(|tx| {
    ///     let orders = tx.open_table::<u64>("orders")?;
    ///     let mut kept = 0;
    ///     for id in 0..10u64 {
    ///         let sp = tx.savepoint()?;
    ///         orders.insert(id, b"placed")?;
    ///         if id % 3 == 0 {
    ///             tx.rollback_to(&sp)?; // this order is refused; the others stay
    ///         } else {
    ///             kept += 1;
    ///         }
    ///     }
    ///     Ok(kept)
    /// })?;
    /// let n = db.read(|tx| tx.open_table::<u64>("orders")?.map_or(Ok(0), |t| t.len()))?;
    /// assert_eq!(n, kept);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn savepoint(&self) -> Result<Savepoint> {
        self.core.savepoint()
    }

    /// Undoes everything the transaction did after `savepoint` (inserts, removes, tables
    /// created or dropped); the savepoint stays, and later ones end. Table handles stay
    /// usable, except those of a table whose creation was undone; a [`crate::Range`] made
    /// before the rollback ends with an error. After a lock conflict the transaction can only
    /// be aborted, so this returns the conflict; a rollback that fails part way (a damaged
    /// region) leaves the transaction able only to abort.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| {
    ///     let t = tx.open_table::<str>("t")?;
    ///     t.insert("a", b"1")?;
    ///     let sp = tx.savepoint()?;
    ///     t.remove("a")?;
    ///     tx.open_table::<str>("scratch")?.insert("x", vec![0u8; 100_000])?;
    ///     tx.rollback_to(&sp)?;
    ///     assert_eq!(t.get("a")?.as_deref(), Some(&b"1"[..]));
    ///     assert_eq!(tx.table_names()?, ["t"]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn rollback_to(&self, savepoint: &Savepoint) -> Result<()> {
        self.core.rollback_to(savepoint)
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
            inner: Table::new(&self.core, name, root, counted),
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

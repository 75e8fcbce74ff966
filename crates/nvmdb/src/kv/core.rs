//! The engine transaction behind a user transaction: every table operation runs through
//! [`Core::run`], which turns the engine's errors into the library's terms and records what
//! the layer must do when the transaction ends (abort after a conflict, reclaim the trash).

use super::node::{Node, Value as NodeValue};
use super::range::Range;
use super::savepoint::{Points, Recorder};
use super::store::{Store, Tables, CATALOG_ROOT};
use super::{check_table_name, kind_name, tree, Key, CATALOG_COUNTED};
use std::cell::{Cell, RefCell};
use std::ops::Bound;
use storage::{DbError, Result, Txn};

/// The engine transaction behind a [`WriteTx`](super::WriteTx) or
/// [`ReadTx`](super::ReadTx), and what the layer learned while running it.
pub(crate) struct TxCore<'db> {
    txn: RefCell<Option<Box<dyn Txn + 'db>>>,
    pub tables: Tables,
    pub slot: usize,
    /// The first retryable engine error seen: the engine transaction must abort (the storage
    /// contract), so the user transaction cannot commit and runs again.
    conflict: RefCell<Option<DbError>>,
    /// The user table whose operation met that conflict, if one did.
    conflict_table: RefCell<Option<String>>,
    /// Something went to the trash: reclaim after commit.
    pub trashed: Cell<bool>,
    /// What a `RegionFull` error adds: how this database can be given room.
    full_hint: &'db str,
    /// Savepoints and the undo log that rolls back to them (`savepoint.rs`).
    pub(super) points: RefCell<Points>,
}

/// Object-safe access to a [`TxCore`], so table handles need not name the engine lifetime.
pub(super) trait Core {
    /// Runs `f` in the transaction; `table` is the user table it works on, named by a
    /// conflict's error.
    fn run(
        &self,
        table: Option<&str>,
        f: &mut dyn FnMut(&mut Store<'_, '_>) -> Result<()>,
    ) -> Result<()>;
    /// Rollbacks to savepoints so far: a range made before one may hold undone entries.
    fn rollbacks(&self) -> usize;
    /// The root node of the table `name` now, if it exists.
    fn root_of(&self, name: &str) -> Result<Option<u64>>;
}

impl Core for TxCore<'_> {
    fn run(
        &self,
        table: Option<&str>,
        f: &mut dyn FnMut(&mut Store<'_, '_>) -> Result<()>,
    ) -> Result<()> {
        let mut guard = self.txn.borrow_mut();
        let txn = guard
            .as_deref_mut()
            .ok_or_else(|| DbError::Invalid("the transaction has ended".into()))?;
        let mut points = self.points.borrow_mut();
        points.check_usable()?;
        let mut recorder = Recorder::new(txn, points.log.as_mut());
        let mut store =
            Store { txn: &mut recorder, tables: self.tables, slot: self.slot, trashed: false };
        let result = f(&mut store);
        if store.trashed {
            self.trashed.set(true);
        }
        match result {
            Err(e) if e.is_retryable() => {
                let e = conflict_in_library_terms(e, table);
                let mut first = self.conflict.borrow_mut();
                if first.is_none() {
                    *first = Some(copy_retryable(&e));
                    *self.conflict_table.borrow_mut() = table.map(str::to_owned);
                }
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

    fn rollbacks(&self) -> usize {
        self.points.borrow().rollbacks.len()
    }

    fn root_of(&self, name: &str) -> Result<Option<u64>> {
        Ok(self.catalog_entry(name)?.map(|(root, _, _)| root))
    }
}

/// A retryable error again (`DbError` is not `Clone`): the engine's conflict, or a peer's.
fn copy_retryable(e: &DbError) -> DbError {
    match e {
        DbError::Conflict { table, key } => DbError::Conflict { table: *table, key: *key },
        DbError::Peer { engine, message, retryable } => {
            DbError::Peer { engine, message: message.clone(), retryable: *retryable }
        }
        other => DbError::Invalid(other.to_string()),
    }
}

pub(super) fn with<R>(
    core: &dyn Core,
    f: impl FnOnce(&mut Store<'_, '_>) -> Result<R>,
) -> Result<R> {
    with_table(core, None, f)
}

/// [`with`] for an operation on the user table `table`, which a conflict's error names.
pub(super) fn with_table<R>(
    core: &dyn Core,
    table: Option<&str>,
    f: impl FnOnce(&mut Store<'_, '_>) -> Result<R>,
) -> Result<R> {
    let mut f = Some(f);
    let mut out = None;
    core.run(table, &mut |s| {
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
            conflict: RefCell::new(None),
            conflict_table: RefCell::new(None),
            trashed: Cell::new(false),
            full_hint,
            points: RefCell::new(Points::new()),
        }
    }

    /// Takes the engine transaction to end it, with what dooms it if anything did (a lock
    /// conflict: retryable; a rollback to a savepoint that failed: not); `None` once ended.
    pub fn take(&self) -> Option<(Box<dyn Txn + 'db>, Option<DbError>)> {
        let txn = self.txn.borrow_mut().take()?;
        let doom = self.conflict.borrow_mut().take().or_else(|| self.points.borrow().doom());
        Some((txn, doom))
    }

    /// Runs `f` on the engine transaction itself, outside the undo log (rolling back).
    pub(super) fn with_txn<R>(&self, f: impl FnOnce(&mut (dyn Txn + 'db)) -> R) -> Result<R> {
        let mut guard = self.txn.borrow_mut();
        let txn = guard
            .as_deref_mut()
            .ok_or_else(|| DbError::Invalid("the transaction has ended".into()))?;
        Ok(f(txn))
    }

    /// The conflict that doomed this transaction, if one did (a copy).
    /// The user table whose operation met the transaction's first conflict, if one did.
    pub(crate) fn conflict_table(&self) -> Option<String> {
        self.conflict_table.borrow().clone()
    }

    pub(super) fn conflict(&self) -> Option<DbError> {
        self.conflict.borrow().as_ref().map(copy_retryable)
    }

    /// A table's catalog entry: root node id, key kind, and whether its length is counted
    /// (entries written before counting existed have 9 bytes, without the flag byte).
    pub(crate) fn catalog_entry(&self, name: &str) -> Result<Option<(u64, u8, bool)>> {
        check_table_name(name)?;
        with_table(self, Some(name), |s| match tree::get(s, CATALOG_ROOT, name.as_bytes())? {
            None => Ok(None),
            Some(NodeValue::Inline(v)) if v.len() == 9 || v.len() == 10 => {
                let root = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
                let counted = v.get(9).is_some_and(|f| f & CATALOG_COUNTED != 0);
                Ok(Some((root, v[8], counted)))
            }
            Some(_) => Err(DbError::Corrupt(format!("catalog entry of table `{name}`"))),
        })
    }

    pub(super) fn open<K: Key + ?Sized>(
        &self,
        name: &str,
        create: bool,
    ) -> Result<Option<(u64, bool)>> {
        self.open_kind(name, K::KIND, K::NAME, create)
    }

    /// [`TxCore::open`] by key kind (`Key::KIND`; `key_name` for the error).
    pub(crate) fn open_kind(
        &self,
        name: &str,
        key_kind: u8,
        key_name: &str,
        create: bool,
    ) -> Result<Option<(u64, bool)>> {
        match self.catalog_entry(name)? {
            Some((root, kind, counted)) if kind == key_kind => Ok(Some((root, counted))),
            Some((_, kind, _)) => Err(DbError::Invalid(format!(
                "table `{name}` has {} keys; open it as Table<{}>, not {key_name}",
                kind_name(kind),
                kind_name(kind),
            ))),
            None if !create => Ok(None),
            None => with_table(self, Some(name), |s| {
                let root = s.alloc_id()?;
                s.insert_node(root, &Node::empty_leaf())?;
                let mut entry = root.to_le_bytes().to_vec();
                entry.extend([key_kind, CATALOG_COUNTED]);
                tree::put(s, CATALOG_ROOT, name.as_bytes(), NodeValue::Inline(entry))?;
                Ok(Some((root, true)))
            }),
        }
    }

    pub(crate) fn table_names(&self) -> Result<Vec<String>> {
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

/// The name [`DbError::Peer`] carries for conflicts told in the library's terms.
pub(crate) const LIBRARY: &str = "nvmdb";

/// A retryable engine error (whose text names engine table ids and node keys) told in the
/// library's terms: the user's `table` and what to do; still retryable.
pub(crate) fn conflict_in_library_terms(e: DbError, table: Option<&str>) -> DbError {
    match e {
        DbError::Peer { engine: LIBRARY, .. } => e,
        e if e.is_retryable() => {
            let on = table.map(|t| format!("table `{t}`: ")).unwrap_or_default();
            DbError::Peer {
                engine: LIBRARY,
                message: format!(
                    "{on}another transaction holds a lock this one needs, so this one was \
                     rolled back; run it again (Db::write and Db::read do, up to \
                     DbOptions::retry.max_attempts times)"
                ),
                retryable: true,
            }
        }
        other => other,
    }
}

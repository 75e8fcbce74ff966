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

mod core;
mod key;
mod node;
mod range;
mod retry;
mod savepoint;
mod store;
mod table;
mod tree;
mod tx;
mod value;

pub(crate) use self::core::{conflict_in_library_terms, in_library_terms, TxCore, LIBRARY};
pub use key::{Key, KeyArg};
pub use node::{MAX_INLINE_BYTES, MAX_KEY_BYTES};
pub use range::Range;
pub use retry::RetryOptions;
pub(crate) use retry::{SlotGuard, SlotPool};
pub use savepoint::{Savepoint, MAX_SAVEPOINT_LOG_BYTES};
pub use store::MAX_VALUE_BYTES;
pub(crate) use store::{is_internal, Tables};
pub use table::{ReadTable, Table};
pub use tx::{Durability, ReadTx, WriteTx};
pub use value::Value;

use self::core::with;
use node::Node;
use storage::alloc::FreeingScope;
use storage::{DbError, Result, Txn};
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

fn encode_ref<K: Key + ?Sized, Q: KeyArg<K>>(k: &Q) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    k.encode_key(&mut out);
    if out.len() > MAX_KEY_BYTES {
        return Err(DbError::Invalid(format!("range bound longer than {MAX_KEY_BYTES} bytes")));
    }
    Ok(out)
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
    if let Some((txn, _)) = core.take() {
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

/// The tables of a transaction's database with their key kinds, for copying them
/// (`Db::backup_to`).
pub(crate) fn table_kinds(core: &TxCore<'_>) -> Result<Vec<(String, u8)>> {
    let mut out = Vec::new();
    for name in core.table_names()? {
        let (_, kind, _) = core
            .catalog_entry(&name)?
            .ok_or_else(|| DbError::Corrupt(format!("table `{name}` left the catalog")))?;
        out.push((name, kind));
    }
    Ok(out)
}

/// The entries of table `name` in key order, keys encoded (`None`: no such table).
pub(crate) fn encoded_entries<'c>(
    core: &'c TxCore<'_>,
    name: &str,
) -> Result<Option<Range<'c, [u8]>>> {
    let Some((root, _, _)) = core.catalog_entry(name)? else { return Ok(None) };
    Ok(Some(Range::new(core, root, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)))
}

/// Opens table `name` of key kind `kind` by kind, creating it if needed
/// (`Db::backup_to`); returns its root and whether it is counted.
pub(crate) fn open_encoded(core: &TxCore<'_>, name: &str, kind: u8) -> Result<(u64, bool)> {
    core.open_kind(name, kind, kind_name(kind), true)?
        .ok_or_else(|| DbError::Invalid(format!("table `{name}` could not be created")))
}

/// Stores an entry with an encoded key into the table [`open_encoded`] returned.
pub(crate) fn put_encoded(
    core: &TxCore<'_>,
    (root, counted): (u64, bool),
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    with(core, |s| table::insert_encoded(s, root, counted, key, value).map(drop))
}

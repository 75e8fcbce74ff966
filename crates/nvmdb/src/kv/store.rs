//! The layer's storage inside one engine transaction: B+tree nodes, value rows in size-class
//! tables, per-slot id counters and the trash of values and trees awaiting reclamation.
//!
//! Invariant: every change the layer makes for one user transaction — nodes, value rows,
//! counters, trash — is a write of the same engine transaction, so the engine's recovery
//! makes all of it durable or none of it (a large value is never seen torn after a crash).

use super::node::{Node, Value, MAX_INLINE_BYTES, NODE_BYTES};
use storage::{DbError, Engine, Result, TableId, TableSpec, Txn};

/// Row sizes of the value tables: a value is stored as whole rows of the largest class plus
/// one tail row of the smallest class that holds the rest.
pub const VALUE_CLASSES: [u32; 4] = [64, 256, 1024, NODE_BYTES as u32];
const CHUNK_BYTES: u64 = NODE_BYTES as u64;
/// Largest value: 65 536 rows of the largest class minus one (the row index has 16 bits).
/// How much one transaction may write is the engine's limit, lower by default (see
/// [`DbOptions`](crate::DbOptions)).
///
/// ```
/// assert!(nvmdb::MAX_VALUE_BYTES >= 255 << 20); // about 256 MiB
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let too_big = vec![0u8; nvmdb::MAX_VALUE_BYTES as usize + 1];
/// assert!(db.write(|tx| tx.open_table::<u64>("t")?.insert(1, &too_big)).is_err());
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub const MAX_VALUE_BYTES: u64 = ((1 << 16) - 1) * CHUNK_BYTES;
/// Id counters are per worker slot: id = slot << 40 | counter, so slots never contend.
const COUNTER_BITS: u32 = 40;
/// Node id of the catalog tree (ids from counters start at 1, so 0 is never handed out).
pub const CATALOG_ROOT: u64 = 0;

const TRASH_VALUE: u64 = 1;
const TRASH_TREE: u64 = 2;

/// Engine table ids of the layer's tables.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub nodes: TableId,
    pub counters: TableId,
    pub trash: TableId,
    pub values: [TableId; 4],
    /// Per-slot entry counts of counted tables, keyed `root << 8 | slot` (`None` only when a
    /// database written before they existed is checked without being opened for writing).
    pub lens: Option<TableId>,
}

const NAMES: [&str; 4] = ["nvmdb.nodes", "nvmdb.counters", "nvmdb.trash", "nvmdb.lens"];

/// Whether an engine table is one of the layer's own (`nvmdb.` names), which users never see.
pub fn is_internal(name: &str) -> bool {
    name.starts_with("nvmdb.")
}

impl Tables {
    /// The layer's tables if the engine has all of them (a database the layer wrote), without
    /// creating any.
    pub fn find(engine: &dyn Engine) -> Option<Tables> {
        let nodes = engine.table(NAMES[0])?;
        let counters = engine.table(NAMES[1])?;
        let trash = engine.table(NAMES[2])?;
        let mut values = [0; 4];
        for (i, class) in VALUE_CLASSES.iter().enumerate() {
            values[i] = engine.table(&format!("nvmdb.v{class}"))?;
        }
        Some(Tables { nodes, counters, trash, values, lens: engine.table(NAMES[3]) })
    }

    /// Finds the layer's tables, creating the missing ones (outside any transaction).
    pub fn open_or_create(engine: &dyn Engine, slots: usize) -> Result<Tables> {
        let get = |name: &str, row_bytes: u32, rows: u64| -> Result<TableId> {
            match engine.table(name) {
                Some(t) => {
                    let spec = engine.tables().into_iter().nth(t as usize);
                    match spec {
                        Some(s) if s.row_bytes == row_bytes => Ok(t),
                        _ => Err(DbError::Format(format!(
                            "table {name} exists with another row size; not an nvmdb table layer"
                        ))),
                    }
                }
                None => engine.create_table(&TableSpec {
                    name: name.into(),
                    row_bytes,
                    expected_rows: rows,
                }),
            }
        };
        let nodes = get(NAMES[0], NODE_BYTES as u32, 1024)?;
        let counters = get(NAMES[1], 8, slots as u64)?;
        let trash = get(NAMES[2], 24, 64)?;
        let lens = Some(get(NAMES[3], 8, 64)?);
        let mut values = [0; 4];
        for (i, class) in VALUE_CLASSES.iter().enumerate() {
            values[i] = get(&format!("nvmdb.v{class}"), *class, 1024)?;
        }
        Ok(Tables { nodes, counters, trash, values, lens })
    }
}

/// One engine transaction seen through the layer.
pub struct Store<'t, 'db> {
    pub txn: &'t mut (dyn Txn + 'db),
    pub tables: Tables,
    pub slot: usize,
    /// Set when this transaction put something in the trash (reclaimed after commit).
    pub trashed: bool,
}

fn class_of(tail_bytes: u64) -> usize {
    VALUE_CLASSES.iter().position(|&c| tail_bytes <= c as u64).unwrap_or(VALUE_CLASSES.len() - 1)
}

/// The value rows of a value of `len` bytes: (class index, row index, bytes in the row).
fn layout(len_bytes: u64) -> impl Iterator<Item = (usize, u64, u64)> {
    let full = len_bytes / CHUNK_BYTES;
    let tail = len_bytes % CHUNK_BYTES;
    let last = VALUE_CLASSES.len() - 1;
    (0..full)
        .map(move |i| (last, i, CHUNK_BYTES))
        .chain((tail > 0).then(|| (class_of(tail), full, tail)))
}

impl Store<'_, '_> {
    fn corrupt(what: String) -> DbError {
        DbError::Corrupt(what)
    }

    /// A fresh id from this slot's counter.
    pub fn alloc_id(&mut self) -> Result<u64> {
        let mut row = Vec::new();
        let key = self.slot as u64;
        let next = if self.txn.read(self.tables.counters, key, &mut row)? {
            let v = u64::from_le_bytes(
                row.as_slice().try_into().map_err(|_| Self::corrupt("id counter row".into()))?,
            );
            self.txn.update(self.tables.counters, key, 0, &(v + 1).to_le_bytes())?;
            v
        } else {
            self.txn.insert(self.tables.counters, key, &2u64.to_le_bytes())?;
            1
        };
        if next >= 1 << COUNTER_BITS {
            return Err(DbError::RegionFull(format!("id counter of slot {} exhausted", self.slot)));
        }
        Ok((self.slot as u64) << COUNTER_BITS | next)
    }

    pub fn read_node(&mut self, id: u64) -> Result<Node> {
        let mut row = Vec::new();
        if !self.txn.read(self.tables.nodes, id, &mut row)? {
            return Err(Self::corrupt(format!("table node {id} is missing")));
        }
        Node::decode(&row, id)
    }

    pub fn write_node(&mut self, id: u64, node: &Node) -> Result<()> {
        if !self.txn.update(self.tables.nodes, id, 0, &node.encode())? {
            return Err(Self::corrupt(format!("table node {id} is missing")));
        }
        Ok(())
    }

    pub fn insert_node(&mut self, id: u64, node: &Node) -> Result<()> {
        self.txn.insert(self.tables.nodes, id, &node.encode())
    }

    /// Stores `bytes` as a value: inline if short, else in new value rows.
    pub fn put_value(&mut self, bytes: &[u8]) -> Result<Value> {
        if bytes.len() <= MAX_INLINE_BYTES {
            return Ok(Value::Inline(bytes.to_vec()));
        }
        let len_bytes = bytes.len() as u64;
        if len_bytes > MAX_VALUE_BYTES {
            return Err(DbError::Invalid(format!(
                "value of {len_bytes} bytes is longer than the {MAX_VALUE_BYTES}-byte limit"
            )));
        }
        let id = self.alloc_id()?;
        let mut row = Vec::with_capacity(NODE_BYTES);
        for (class, index, n) in layout(len_bytes) {
            let start = (index * CHUNK_BYTES) as usize;
            row.clear();
            row.extend_from_slice(&bytes[start..start + n as usize]);
            row.resize(VALUE_CLASSES[class] as usize, 0);
            self.txn.insert(self.tables.values[class], id << 16 | index, &row)?;
        }
        Ok(Value::Stored { len_bytes, id })
    }

    /// Reads a value back whole.
    pub fn get_value(&mut self, value: &Value) -> Result<Vec<u8>> {
        let (len_bytes, id) = match value {
            Value::Inline(v) => return Ok(v.clone()),
            Value::Stored { len_bytes, id } => (*len_bytes, *id),
        };
        if len_bytes > MAX_VALUE_BYTES || len_bytes <= MAX_INLINE_BYTES as u64 {
            return Err(Self::corrupt(format!("value {id}: impossible length {len_bytes}")));
        }
        let mut out = Vec::with_capacity(len_bytes as usize);
        let mut row = Vec::new();
        for (class, index, n) in layout(len_bytes) {
            if !self.txn.read(self.tables.values[class], id << 16 | index, &mut row)? {
                return Err(Self::corrupt(format!("value {id}: row {index} is missing")));
            }
            if row.len() < n as usize {
                return Err(Self::corrupt(format!("value {id}: row {index} is short")));
            }
            out.extend_from_slice(&row[..n as usize]);
        }
        Ok(out)
    }

    /// Queues a value's rows for reclamation after commit (a delete of 1 MiB of rows would
    /// need 1 MiB of undo in this transaction; the trash record needs 24 bytes).
    pub fn discard_value(&mut self, value: &Value) -> Result<()> {
        if let Value::Stored { len_bytes, id } = value {
            self.push_trash(TRASH_VALUE, *id, *len_bytes)?;
        }
        Ok(())
    }

    fn lens(&self) -> Result<TableId> {
        self.tables.lens.ok_or_else(|| {
            DbError::Corrupt("a counted table, but no nvmdb.lens table to count it in".into())
        })
    }

    /// Adds `delta` to this slot's count of the table rooted at `root` (slots never share a
    /// count row, so concurrent writers of one table do not conflict on it).
    pub fn bump_len(&mut self, root: u64, delta: i64) -> Result<()> {
        let (lens, key) = (self.lens()?, root << 8 | self.slot as u64);
        let mut row = Vec::new();
        if self.txn.read(lens, key, &mut row)? {
            let v = u64::from_le_bytes(
                row.as_slice().try_into().map_err(|_| Self::corrupt("length row".into()))?,
            );
            self.txn.update(lens, key, 0, &v.wrapping_add(delta as u64).to_le_bytes())?;
        } else {
            self.txn.insert(lens, key, &(delta as u64).to_le_bytes())?;
        }
        Ok(())
    }

    /// The entries of the counted table rooted at `root`: the sum of its slots' counts.
    pub fn counted_len(&mut self, root: u64) -> Result<u64> {
        let lens = self.lens()?;
        let mut sum = 0u64;
        let mut bad = false;
        self.txn.scan(lens, root << 8, root << 8 | 0xff, usize::MAX, &mut |_, row| {
            match <[u8; 8]>::try_from(row) {
                Ok(b) => sum = sum.wrapping_add(u64::from_le_bytes(b)),
                Err(_) => bad = true,
            }
            true
        })?;
        // Each slot's count may be negative (it removed what another inserted); the sum never.
        if bad || sum > i64::MAX as u64 {
            return Err(Self::corrupt(format!("length rows of table node {root}")));
        }
        Ok(sum)
    }

    /// Deletes the count rows of a dropped table.
    pub fn drop_len(&mut self, root: u64) -> Result<()> {
        let lens = self.lens()?;
        let mut keys = Vec::new();
        self.txn.scan(lens, root << 8, root << 8 | 0xff, usize::MAX, &mut |k, _| {
            keys.push(k);
            true
        })?;
        for k in keys {
            self.txn.delete(lens, k)?;
        }
        Ok(())
    }

    /// Queues a whole tree (a dropped table) for reclamation after commit.
    pub fn discard_tree(&mut self, root: u64) -> Result<()> {
        self.push_trash(TRASH_TREE, root, 0)
    }

    fn push_trash(&mut self, kind: u64, id: u64, len_bytes: u64) -> Result<()> {
        let key = self.alloc_id()?;
        let mut row = [0u8; 24];
        row[..8].copy_from_slice(&kind.to_le_bytes());
        row[8..16].copy_from_slice(&id.to_le_bytes());
        row[16..].copy_from_slice(&len_bytes.to_le_bytes());
        self.txn.insert(self.tables.trash, key, &row)?;
        self.trashed = true;
        Ok(())
    }

    /// Reclaims one bounded step of the trash: up to `max_rows` value rows of one entry, or
    /// one tree node (its children and values become trash entries). Returns false when the
    /// trash is empty.
    pub fn reclaim_step(&mut self, max_rows: u64) -> Result<bool> {
        let mut first: Option<(u64, [u8; 24])> = None;
        self.txn.scan(self.tables.trash, 0, u64::MAX, 1, &mut |k, row| {
            if let Ok(r) = <[u8; 24]>::try_from(row) {
                first = Some((k, r));
            }
            false
        })?;
        let Some((key, row)) = first else { return Ok(false) };
        let word =
            |i: usize| u64::from_le_bytes(row[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        let (kind, id, len_bytes) = (word(0), word(1), word(2));
        match kind {
            TRASH_VALUE => {
                let rows: Vec<_> = layout(len_bytes).collect();
                let keep = rows.len().saturating_sub(max_rows as usize);
                for &(class, index, _) in rows[keep..].iter().rev() {
                    self.txn.delete(self.tables.values[class], id << 16 | index)?;
                }
                if keep == 0 {
                    self.txn.delete(self.tables.trash, key)?;
                } else {
                    // Rows are freed from the end: what is left is `keep` whole rows.
                    let left = keep as u64 * CHUNK_BYTES;
                    self.txn.update(self.tables.trash, key, 16, &left.to_le_bytes())?;
                }
            }
            TRASH_TREE => {
                match self.read_node(id)? {
                    Node::Leaf(entries) => {
                        for (_, v) in &entries {
                            self.discard_value(v)?;
                        }
                    }
                    Node::Internal { children, .. } => {
                        for c in children {
                            self.discard_tree(c)?;
                        }
                    }
                }
                self.txn.delete(self.tables.nodes, id)?;
                self.txn.delete(self.tables.trash, key)?;
            }
            _ => return Err(Self::corrupt(format!("trash entry {key}: unknown kind {kind}"))),
        }
        Ok(true)
    }
}

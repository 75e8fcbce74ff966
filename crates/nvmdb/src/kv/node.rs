//! Node rows of the layer's B+tree: one engine row of [`NODE_BYTES`] per node, decoded whole,
//! changed in memory and written back whole inside the caller's engine transaction, so a
//! node changes exactly when the transaction commits (the engine's recovery covers it).
//!
//! Layout (little-endian): byte 0 kind (1 leaf, 2 internal), bytes 1..3 entry count, bytes
//! 3..7 encoded length; then the entries. Leaf entry: key length (u16), key, value tag (0
//! inline: length u16 + bytes; 1 stored: length u64 + value id u64). Internal node: first
//! child (u64), then per separator: key length (u16), key, child (u64). Every length read
//! back is checked against the row, so a damaged node is `DbError::Corrupt`, never a panic.

use storage::{DbError, Result};

/// Bytes of one node row: the largest row every engine must accept.
pub const NODE_BYTES: usize = storage::engine::MAX_ROW_BYTES as usize;
const HEADER_BYTES: usize = 7;
/// Longest key a table accepts, in encoded bytes (8 for `u64` and `i64`; the length of a
/// `str` or `[u8]` key); a longer one is `DbError::Invalid`.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let key = vec![0xab; nvmdb::MAX_KEY_BYTES];
/// db.write(|tx| tx.open_table::<[u8]>("t")?.insert(&key, b"fits"))?;
/// let longer = vec![0xab; nvmdb::MAX_KEY_BYTES + 1];
/// assert!(db.write(|tx| tx.open_table::<[u8]>("t")?.insert(&longer, b"")).is_err());
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub const MAX_KEY_BYTES: usize = 512;
/// Values up to this many bytes live in the tree's leaf next to their key; longer ones in
/// value rows of their own. Either way a value reads back whole.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let inline = vec![1u8; nvmdb::MAX_INLINE_BYTES];
/// let stored = vec![2u8; nvmdb::MAX_INLINE_BYTES + 1];
/// let back = db.write(|tx| {
///     let t = tx.open_table::<u64>("t")?;
///     t.insert(1, &inline)?;
///     t.insert(2, &stored)?;
///     Ok((t.get(1)?, t.get(2)?))
/// })?;
/// assert_eq!(back, (Some(inline), Some(stored)));
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub const MAX_INLINE_BYTES: usize = 200;

// A split halves a node by bytes; each half must fit, so no entry may exceed half a node.
const _: () = assert!(2 + MAX_KEY_BYTES + 1 + 2 + MAX_INLINE_BYTES <= (NODE_BYTES - 7) / 2);
const _: () = assert!(2 + MAX_KEY_BYTES + 17 <= (NODE_BYTES - 7) / 2);

const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;

/// Where a value lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Inline(Vec<u8>),
    /// In value rows (see `values.rs`): total length and value id.
    Stored {
        len_bytes: u64,
        id: u64,
    },
}

impl Value {
    fn encoded_bytes(&self) -> usize {
        match self {
            Value::Inline(v) => 1 + 2 + v.len(),
            Value::Stored { .. } => 1 + 16,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Leaf(Vec<(Vec<u8>, Value)>),
    /// `children.len() == keys.len() + 1`; child `i` holds keys in `[keys[i-1], keys[i])`.
    Internal {
        keys: Vec<Vec<u8>>,
        children: Vec<u64>,
    },
}

impl Node {
    pub fn empty_leaf() -> Node {
        Node::Leaf(Vec::new())
    }

    pub fn encoded_bytes(&self) -> usize {
        HEADER_BYTES
            + match self {
                Node::Leaf(entries) => {
                    entries.iter().map(|(k, v)| 2 + k.len() + v.encoded_bytes()).sum::<usize>()
                }
                Node::Internal { keys, .. } => {
                    8 + keys.iter().map(|k| 2 + k.len() + 8).sum::<usize>()
                }
            }
    }

    pub fn fits(&self) -> bool {
        self.encoded_bytes() <= NODE_BYTES
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(NODE_BYTES);
        let (kind, count) = match self {
            Node::Leaf(e) => (KIND_LEAF, e.len()),
            Node::Internal { keys, .. } => (KIND_INTERNAL, keys.len()),
        };
        b.push(kind);
        b.extend_from_slice(&(count as u16).to_le_bytes());
        b.extend_from_slice(&(self.encoded_bytes() as u32).to_le_bytes());
        match self {
            Node::Leaf(entries) => {
                for (k, v) in entries {
                    put_key(&mut b, k);
                    match v {
                        Value::Inline(bytes) => {
                            b.push(0);
                            b.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
                            b.extend_from_slice(bytes);
                        }
                        Value::Stored { len_bytes, id } => {
                            b.push(1);
                            b.extend_from_slice(&len_bytes.to_le_bytes());
                            b.extend_from_slice(&id.to_le_bytes());
                        }
                    }
                }
            }
            Node::Internal { keys, children } => {
                b.extend_from_slice(&children[0].to_le_bytes());
                for (k, c) in keys.iter().zip(&children[1..]) {
                    put_key(&mut b, k);
                    b.extend_from_slice(&c.to_le_bytes());
                }
            }
        }
        debug_assert_eq!(b.len(), self.encoded_bytes());
        b.resize(NODE_BYTES, 0);
        b
    }

    /// Decodes a node row; `node` names it in errors.
    pub fn decode(row: &[u8], node: u64) -> Result<Node> {
        let corrupt = |what: &str| DbError::Corrupt(format!("table node {node}: {what}"));
        if row.len() != NODE_BYTES {
            return Err(corrupt("row has the wrong size"));
        }
        let mut r = Reader { b: row, at: HEADER_BYTES };
        let count = u16::from_le_bytes([row[1], row[2]]) as usize;
        let used = u32::from_le_bytes([row[3], row[4], row[5], row[6]]) as usize;
        if used > NODE_BYTES {
            return Err(corrupt("length beyond the row"));
        }
        let node_value = match row[0] {
            KIND_LEAF => {
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    let key = r.key().ok_or_else(|| corrupt("leaf key"))?;
                    let value = match r.bytes(1).ok_or_else(|| corrupt("value tag"))?[0] {
                        0 => {
                            let len = r.u16().ok_or_else(|| corrupt("value length"))? as usize;
                            if len > MAX_INLINE_BYTES {
                                return Err(corrupt("inline value too long"));
                            }
                            Value::Inline(r.bytes(len).ok_or_else(|| corrupt("value"))?.to_vec())
                        }
                        1 => {
                            let len_bytes = r.u64().ok_or_else(|| corrupt("value length"))?;
                            let id = r.u64().ok_or_else(|| corrupt("value id"))?;
                            Value::Stored { len_bytes, id }
                        }
                        _ => return Err(corrupt("unknown value tag")),
                    };
                    entries.push((key, value));
                }
                Node::Leaf(entries)
            }
            KIND_INTERNAL => {
                let mut keys = Vec::with_capacity(count);
                let mut children = Vec::with_capacity(count + 1);
                children.push(r.u64().ok_or_else(|| corrupt("child"))?);
                for _ in 0..count {
                    keys.push(r.key().ok_or_else(|| corrupt("separator"))?);
                    children.push(r.u64().ok_or_else(|| corrupt("child"))?);
                }
                Node::Internal { keys, children }
            }
            _ => return Err(corrupt("unknown node kind")),
        };
        if r.at != used {
            return Err(corrupt("encoded length does not match the entries"));
        }
        let sorted = match &node_value {
            Node::Leaf(e) => e.windows(2).all(|w| w[0].0 < w[1].0),
            Node::Internal { keys, .. } => keys.windows(2).all(|w| w[0] < w[1]),
        };
        if !sorted {
            return Err(corrupt("keys out of order"));
        }
        Ok(node_value)
    }
}

fn put_key(b: &mut Vec<u8>, k: &[u8]) {
    b.extend_from_slice(&(k.len() as u16).to_le_bytes());
    b.extend_from_slice(k);
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.bytes(2)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.bytes(8)?.try_into().ok()?))
    }
    fn key(&mut self) -> Option<Vec<u8>> {
        let len = self.u16()? as usize;
        if len > MAX_KEY_BYTES {
            return None;
        }
        Some(self.bytes(len)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip_and_damage_is_corrupt() {
        let leaf = Node::Leaf(vec![
            (b"a".to_vec(), Value::Inline(b"x".to_vec())),
            (b"b".to_vec(), Value::Stored { len_bytes: 5000, id: 9 }),
        ]);
        let inner = Node::Internal { keys: vec![b"m".to_vec()], children: vec![3, 4] };
        for n in [leaf, inner] {
            let row = n.encode();
            assert_eq!(Node::decode(&row, 1).unwrap(), n);
            for i in 0..32 {
                let mut bad = row.clone();
                bad[i] ^= 0xff;
                // Any outcome but a panic; most flips are caught.
                let _ = Node::decode(&bad, 1);
            }
            let mut bad = row.clone();
            bad[0] = 7;
            assert!(matches!(Node::decode(&bad, 1), Err(DbError::Corrupt(_))));
        }
    }
}

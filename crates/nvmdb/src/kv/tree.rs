//! A B+tree of byte-string keys whose nodes are engine rows (`node.rs`), so ordered,
//! variable-length keys work on every engine, whose own index is keyed by `u64`.
//!
//! The root keeps its node id for the life of the tree (a root split moves the root's
//! entries into two new children), so the catalog never changes when a table grows. Deletes
//! do not merge nodes; a dropped table's nodes are reclaimed through the trash.
//! Invariant: all node writes of an operation belong to the caller's engine transaction.

use super::node::{Node, Value};
use super::store::Store;
use std::ops::Bound;
use storage::Result;

/// A leaf entry: encoded key and where its value lives.
pub type Entry = (Vec<u8>, Value);

/// Looks `key` up.
pub fn get(s: &mut Store, root: u64, key: &[u8]) -> Result<Option<Value>> {
    let mut id = root;
    loop {
        match s.read_node(id)? {
            Node::Internal { keys, children } => id = children[child_index(&keys, key)],
            Node::Leaf(entries) => {
                return Ok(entries
                    .binary_search_by(|(k, _)| k.as_slice().cmp(key))
                    .ok()
                    .map(|i| entries[i].1.clone()));
            }
        }
    }
}

/// Index of the child of an internal node that covers `key`.
fn child_index(keys: &[Vec<u8>], key: &[u8]) -> usize {
    keys.partition_point(|k| k.as_slice() <= key)
}

/// Inserts or replaces; returns the value replaced.
pub fn put(s: &mut Store, root: u64, key: &[u8], value: Value) -> Result<Option<Value>> {
    // Path of (node id, node, child index taken) from the root down to the leaf's parent.
    let mut path: Vec<(u64, Node, usize)> = Vec::new();
    let mut id = root;
    let old;
    let mut node = loop {
        match s.read_node(id)? {
            Node::Internal { keys, children } => {
                let i = child_index(&keys, key);
                let child = children[i];
                path.push((id, Node::Internal { keys, children }, i));
                id = child;
            }
            Node::Leaf(mut entries) => {
                match entries.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
                    Ok(i) => old = Some(std::mem::replace(&mut entries[i].1, value)),
                    Err(i) => {
                        old = None;
                        entries.insert(i, (key.to_vec(), value));
                    }
                }
                break Node::Leaf(entries);
            }
        }
    };
    // Write the changed node; split upwards while a node overflows.
    loop {
        if node.fits() {
            s.write_node(id, &node)?;
            return Ok(old);
        }
        let (left, separator, right) = split(node);
        if id == root {
            let left_id = s.alloc_id()?;
            let right_id = s.alloc_id()?;
            s.insert_node(left_id, &left)?;
            s.insert_node(right_id, &right)?;
            let new_root =
                Node::Internal { keys: vec![separator], children: vec![left_id, right_id] };
            s.write_node(root, &new_root)?;
            return Ok(old);
        }
        let right_id = s.alloc_id()?;
        s.insert_node(right_id, &right)?;
        s.write_node(id, &left)?;
        let (parent_id, parent, i) = path.pop().expect("a non-root node has a parent on the path");
        let Node::Internal { mut keys, mut children } = parent else {
            unreachable!("path holds internal nodes only")
        };
        keys.insert(i, separator);
        children.insert(i + 1, right_id);
        node = Node::Internal { keys, children };
        id = parent_id;
    }
}

/// Splits an overflowing node near its byte midpoint: (left, separator, right).
fn split(node: Node) -> (Node, Vec<u8>, Node) {
    let half = node.encoded_bytes() / 2;
    match node {
        Node::Leaf(mut entries) => {
            let mut at = 0;
            let mut bytes = 0;
            while at < entries.len() - 1 && bytes < half {
                bytes += Node::Leaf(vec![entries[at].clone()]).encoded_bytes();
                at += 1;
            }
            let at = at.max(1);
            let right = entries.split_off(at);
            let separator = right[0].0.clone();
            (Node::Leaf(entries), separator, Node::Leaf(right))
        }
        Node::Internal { mut keys, mut children } => {
            let mut at = 0;
            let mut bytes = 0;
            while at < keys.len() - 1 && bytes < half {
                bytes += keys[at].len() + 10;
                at += 1;
            }
            let at = at.clamp(1, keys.len() - 2);
            let right_keys = keys.split_off(at + 1);
            let separator = keys.pop().expect("at >= 1");
            let right_children = children.split_off(at + 1);
            (
                Node::Internal { keys, children },
                separator,
                Node::Internal { keys: right_keys, children: right_children },
            )
        }
    }
}

/// Removes `key`; returns its value.
pub fn remove(s: &mut Store, root: u64, key: &[u8]) -> Result<Option<Value>> {
    let mut id = root;
    loop {
        match s.read_node(id)? {
            Node::Internal { keys, children } => id = children[child_index(&keys, key)],
            Node::Leaf(mut entries) => {
                let Ok(i) = entries.binary_search_by(|(k, _)| k.as_slice().cmp(key)) else {
                    return Ok(None);
                };
                let (_, old) = entries.remove(i);
                s.write_node(id, &Node::Leaf(entries))?;
                return Ok(Some(old));
            }
        }
    }
}

/// The entries of the leaf covering `from`, those after `from`, and the lowest key of the
/// next leaf (`None` at the end of the tree): one step of a range scan.
pub fn seek(s: &mut Store, root: u64, from: Bound<&[u8]>) -> Result<(Vec<Entry>, Option<Vec<u8>>)> {
    let mut id = root;
    let mut upper: Option<Vec<u8>> = None;
    loop {
        match s.read_node(id)? {
            Node::Internal { keys, children } => {
                let i = match from {
                    Bound::Unbounded => 0,
                    Bound::Included(k) | Bound::Excluded(k) => child_index(&keys, k),
                };
                if let Some(k) = keys.get(i) {
                    upper = Some(k.clone());
                }
                id = children[i];
            }
            Node::Leaf(entries) => {
                let keep = |k: &[u8]| match from {
                    Bound::Unbounded => true,
                    Bound::Included(f) => k >= f,
                    Bound::Excluded(f) => k > f,
                };
                let entries = entries.into_iter().filter(|(k, _)| keep(k)).collect();
                return Ok((entries, upper));
            }
        }
    }
}

/// The entries of the leaf covering `to` that lie at or below it (in key order), and the
/// lowest key that leaf may hold (`None` at the start of the tree): one step of a scan in
/// reverse, whose next step ends before that key.
pub fn seek_back(
    s: &mut Store,
    root: u64,
    to: Bound<&[u8]>,
) -> Result<(Vec<Entry>, Option<Vec<u8>>)> {
    let mut id = root;
    let mut lower: Option<Vec<u8>> = None;
    loop {
        match s.read_node(id)? {
            Node::Internal { keys, children } => {
                // The last child whose range starts below (or at, if included) the bound.
                let i = match to {
                    Bound::Unbounded => keys.len(),
                    Bound::Included(k) => keys.partition_point(|sep| sep.as_slice() <= k),
                    Bound::Excluded(k) => keys.partition_point(|sep| sep.as_slice() < k),
                };
                if let Some(k) = i.checked_sub(1).and_then(|j| keys.get(j)) {
                    lower = Some(k.clone());
                }
                id = children[i];
            }
            Node::Leaf(entries) => {
                let keep = |k: &[u8]| match to {
                    Bound::Unbounded => true,
                    Bound::Included(t) => k <= t,
                    Bound::Excluded(t) => k < t,
                };
                let entries = entries.into_iter().filter(|(k, _)| keep(k)).collect();
                return Ok((entries, lower));
            }
        }
    }
}

/// Number of entries in a tree (reads every node).
pub fn count(s: &mut Store, root: u64) -> Result<u64> {
    match s.read_node(root)? {
        Node::Leaf(e) => Ok(e.len() as u64),
        Node::Internal { children, .. } => {
            let mut n = 0;
            for c in children {
                n += count(s, c)?;
            }
            Ok(n)
        }
    }
}

//! A plain B+tree of `u64` keys in a PMDK pool, written for this peer: nodes of [`ORDER`] keys,
//! leaves linked left to right for scans, rows as separate PMDK objects. Inserts split full
//! nodes on the way down; deletes only remove the entry (no merging: a leaf may stay empty, and
//! scans step over it). Every change runs inside the caller's [`Tx`], with each byte range added
//! to PMDK's undo log before it is written, so a crash or abort leaves the tree as before.
//!
//! Damage is an error, never a wild pointer: every persistent pointer is checked to lie in the
//! pool, every node's kind and count are checked, and walks are bounded in depth.

use super::ffi::{Oid, Tx};
use std::mem::{offset_of, size_of};
use storage::{DbError, Result};

/// Keys per node. A node is 16 + 16 + 63·8 + 64·16 = 1560 bytes.
pub(crate) const ORDER: usize = 63;
const LEAF: u64 = 0x4c45_4146; // "LEAF"
const INNER: u64 = 0x494e_4e52; // "INNR"
/// Deeper than any tree of 2^64 keys at fan-out ≥ 2 could be: a deeper walk means a cycle.
const MAX_DEPTH: usize = 64;
/// PMDK type numbers of our objects (for `pmemcheck`-style tools; PMDK only stores them).
pub(crate) const TYPE_NODE: u64 = 2;
pub(crate) const TYPE_ROW: u64 = 3;

#[repr(C)]
pub(crate) struct Node {
    kind: u64,
    count: u64,
    /// Leaves: the next leaf to the right (null at the end).
    next: Oid,
    keys: [u64; ORDER],
    /// Leaves: `kids[i]` is the row of `keys[i]`. Inner nodes: `kids[i]` holds the keys in
    /// `keys[i-1]..keys[i]`.
    kids: [Oid; ORDER + 1],
}

const _: () = assert!(size_of::<Node>() == 32 + ORDER * 8 + (ORDER + 1) * 16);
const _: () = assert!(ORDER >= 3 && ORDER % 2 == 1);

/// The mapped pool: base address and length, for bounds-checked access to its objects.
pub(crate) struct Pool {
    pub(crate) pop: *mut std::ffi::c_void,
    base: *mut u8,
    len: u64,
    uuid: u64,
}

impl Pool {
    /// # Safety
    /// `pop` is an open pool of `len` bytes whose mapping starts at `pop` (PMDK's layout:
    /// `pmemobj_direct(oid) == pop + oid.off`), and `root` is its root object.
    pub(crate) unsafe fn new(pop: *mut std::ffi::c_void, len: u64, root: Oid) -> Pool {
        Pool { pop, base: pop.cast(), len, uuid: root.pool_uuid_lo }
    }

    /// Address of `len` bytes at `oid`, or `Corrupt` if they do not lie in this pool.
    pub(crate) fn at(&self, oid: Oid, len: usize) -> Result<*mut u8> {
        let end = oid.off.checked_add(len as u64);
        if oid.is_null() || oid.pool_uuid_lo != self.uuid || end.is_none_or(|e| e > self.len) {
            return Err(DbError::Corrupt(format!(
                "pmemobj: pointer {:#x}:{:#x} (+{len}) outside the pool",
                oid.pool_uuid_lo, oid.off
            )));
        }
        // SAFETY: off + len <= pool length, checked above.
        Ok(unsafe { self.base.add(oid.off as usize) })
    }

    /// The node at `oid`, checked for kind and count. The caller holds the data latch, so no
    /// one writes the node while the reference lives (writers hold the latch exclusively).
    pub(crate) fn node(&self, oid: Oid) -> Result<&Node> {
        let ptr = self.at(oid, size_of::<Node>())?;
        if !(ptr as usize).is_multiple_of(8) {
            return Err(DbError::Corrupt("pmemobj: misaligned node".into()));
        }
        // SAFETY: in bounds and aligned (above); every bit pattern is a valid `Node`.
        let node = unsafe { &*(ptr as *const Node) };
        if (node.kind != LEAF && node.kind != INNER) || node.count as usize > ORDER {
            return Err(DbError::Corrupt(format!(
                "pmemobj: node at {:#x} has kind {:#x}, {} keys",
                oid.off, node.kind, node.count
            )));
        }
        Ok(node)
    }

    fn node_mut(&self, oid: Oid) -> Result<*mut Node> {
        self.node(oid).map(|n| n as *const Node as *mut Node)
    }

    /// The row of `key` under tree `root`, if any.
    pub(crate) fn get(&self, root: Oid, key: u64) -> Result<Option<Oid>> {
        if root.is_null() {
            return Ok(None);
        }
        let (leaf, _) = self.leaf_for(root, key)?;
        let n = self.node(leaf)?;
        let keys = &n.keys[..n.count as usize];
        Ok(keys.binary_search(&key).ok().map(|i| n.kids[i]))
    }

    /// The leaf that holds (or would hold) `key`, and its depth.
    fn leaf_for(&self, root: Oid, key: u64) -> Result<(Oid, usize)> {
        let mut at = root;
        for depth in 0..MAX_DEPTH {
            let n = self.node(at)?;
            if n.kind == LEAF {
                return Ok((at, depth));
            }
            let i = n.keys[..n.count as usize].partition_point(|&s| s <= key);
            at = n.kids[i];
        }
        Err(DbError::Corrupt("pmemobj: tree deeper than any valid tree".into()))
    }

    /// Visits rows with keys in `low..=high` in order until `visit` returns false.
    pub(crate) fn scan(
        &self,
        root: Oid,
        low: u64,
        high: u64,
        visit: &mut dyn FnMut(u64, Oid) -> Result<bool>,
    ) -> Result<()> {
        if root.is_null() || low > high {
            return Ok(());
        }
        let (mut leaf, _) = self.leaf_for(root, low)?;
        let mut last: Option<u64> = None;
        loop {
            let n = self.node(leaf)?;
            if n.kind != LEAF {
                return Err(DbError::Corrupt("pmemobj: leaf chain reaches an inner node".into()));
            }
            for i in 0..n.count as usize {
                let key = n.keys[i];
                if last.is_some_and(|l| l >= key) {
                    return Err(DbError::Corrupt(format!("pmemobj: keys out of order at {key}")));
                }
                last = Some(key);
                if key < low {
                    continue;
                }
                if key > high || !visit(key, n.kids[i])? {
                    return Ok(());
                }
            }
            if n.next.is_null() {
                return Ok(());
            }
            leaf = n.next;
        }
    }

    /// Inserts `key` → `row` (a new object) into the tree whose root pointer is at `slot`.
    /// The key must be absent.
    pub(crate) fn insert(&self, tx: &mut Tx, slot: *mut Oid, key: u64, row: Oid) -> Result<()> {
        // SAFETY: `slot` points into the pool's root object (the caller's table slot).
        let root = unsafe { *slot };
        let root = if root.is_null() {
            let (leaf, _) = self.new_node(tx, LEAF)?;
            self.set_root(tx, slot, leaf)?;
            leaf
        } else if self.node(root)?.count as usize == ORDER {
            let top = self.new_node(tx, INNER)?;
            // SAFETY: `top` is a fresh node of this transaction (no snapshot needed).
            unsafe { (*top.1).kids[0] = root };
            self.split_child(tx, top.0, 0)?;
            self.set_root(tx, slot, top.0)?;
            top.0
        } else {
            root
        };
        let mut at = root;
        for _ in 0..MAX_DEPTH {
            let n = self.node(at)?;
            if n.kind == LEAF {
                return self.leaf_insert(tx, at, key, row);
            }
            let mut i = n.keys[..n.count as usize].partition_point(|&s| s <= key);
            if self.node(n.kids[i])?.count as usize == ORDER {
                self.split_child(tx, at, i)?;
                let n = self.node(at)?;
                if key >= n.keys[i] {
                    i += 1;
                }
            }
            at = self.node(at)?.kids[i];
        }
        Err(DbError::Corrupt("pmemobj: tree deeper than any valid tree".into()))
    }

    fn set_root(&self, tx: &mut Tx, slot: *mut Oid, root: Oid) -> Result<()> {
        // SAFETY: `slot` is in the pool's root object; snapshotted before the write.
        unsafe {
            tx.add(slot.cast(), size_of::<Oid>())?;
            *slot = root;
        }
        Ok(())
    }

    fn new_node(&self, tx: &mut Tx, kind: u64) -> Result<(Oid, *mut Node)> {
        let oid = tx.alloc(size_of::<Node>(), TYPE_NODE, true)?;
        let ptr = self.at(oid, size_of::<Node>())? as *mut Node;
        // SAFETY: a fresh zeroed allocation of this transaction: nothing to snapshot.
        unsafe { (*ptr).kind = kind };
        Ok((oid, ptr))
    }

    /// Snapshots the whole node (splits are rare; one range keeps them simple).
    fn add_node(&self, tx: &mut Tx, n: *mut Node) -> Result<()> {
        // SAFETY: `n` came from `node_mut`, so it lies in the pool.
        unsafe { tx.add(n.cast(), size_of::<Node>()) }
    }

    /// Splits the full child `i` of inner node `parent` (which has room) into two.
    fn split_child(&self, tx: &mut Tx, parent: Oid, i: usize) -> Result<()> {
        let p = self.node_mut(parent)?;
        // SAFETY (whole function): nodes come from `node_mut` / `new_node` (in the pool), are
        // snapshotted before they are changed, and the caller holds the data latch exclusively.
        unsafe {
            let child_oid = (*p).kids[i];
            let c = self.node_mut(child_oid)?;
            let (right_oid, r) = self.new_node(tx, (*c).kind)?;
            self.add_node(tx, c)?;
            self.add_node(tx, p)?;
            let (p, c, r) = (&mut *p, &mut *c, &mut *r);
            let mid = ORDER / 2;
            let sep;
            if c.kind == LEAF {
                let moved = ORDER - mid;
                r.keys[..moved].copy_from_slice(&c.keys[mid..ORDER]);
                r.kids[..moved].copy_from_slice(&c.kids[mid..ORDER]);
                r.count = moved as u64;
                r.next = c.next;
                c.next = right_oid;
                sep = r.keys[0];
            } else {
                sep = c.keys[mid];
                let moved = ORDER - mid - 1;
                r.keys[..moved].copy_from_slice(&c.keys[mid + 1..ORDER]);
                r.kids[..=moved].copy_from_slice(&c.kids[mid + 1..=ORDER]);
                r.count = moved as u64;
            }
            c.count = mid as u64;
            let count = p.count as usize;
            p.keys.copy_within(i..count, i + 1);
            p.kids.copy_within(i + 1..count + 1, i + 2);
            p.keys[i] = sep;
            p.kids[i + 1] = right_oid;
            p.count += 1;
        }
        Ok(())
    }

    fn leaf_insert(&self, tx: &mut Tx, leaf: Oid, key: u64, row: Oid) -> Result<()> {
        let n = self.node_mut(leaf)?;
        // SAFETY: `n` is a leaf in the pool with room (split on the way down); the ranges it
        // changes (count, keys[pos..=count], kids[pos..=count]) are snapshotted first.
        unsafe {
            let count = (*n).count as usize;
            if count == ORDER {
                return Err(DbError::Corrupt("pmemobj: full leaf after split".into()));
            }
            let pos = (&(*n).keys)[..count].partition_point(|&k| k < key);
            if pos < count && (*n).keys[pos] == key {
                return Err(DbError::Corrupt(format!("pmemobj: key {key} inserted twice")));
            }
            self.add_tail(tx, n, pos, count + 1)?;
            let n = &mut *n;
            n.keys.copy_within(pos..count, pos + 1);
            n.kids.copy_within(pos..count, pos + 1);
            n.keys[pos] = key;
            n.kids[pos] = row;
            n.count += 1;
        }
        Ok(())
    }

    /// Snapshots a leaf's count and its entries `from..to`.
    ///
    /// # Safety
    /// `n` is a node in the pool and `from <= to <= ORDER`.
    unsafe fn add_tail(&self, tx: &mut Tx, n: *mut Node, from: usize, to: usize) -> Result<()> {
        let base = n as *const u8;
        let keys = offset_of!(Node, keys) + from * 8;
        let kids = offset_of!(Node, kids) + from * size_of::<Oid>();
        // SAFETY: every range lies inside the node, which lies in the pool.
        unsafe {
            tx.add(base.add(offset_of!(Node, count)), 8)?;
            if to > from {
                tx.add(base.add(keys), (to - from) * 8)?;
                tx.add(base.add(kids), (to - from) * size_of::<Oid>())?;
            }
        }
        Ok(())
    }

    /// Removes `key` from the tree at `root`; returns its row object (for the caller to free).
    pub(crate) fn remove(&self, tx: &mut Tx, root: Oid, key: u64) -> Result<Option<Oid>> {
        if root.is_null() {
            return Ok(None);
        }
        let (leaf, _) = self.leaf_for(root, key)?;
        let n = self.node_mut(leaf)?;
        // SAFETY: `n` is a checked leaf in the pool; the changed range is snapshotted first.
        unsafe {
            let count = (*n).count as usize;
            let Ok(pos) = (&(*n).keys)[..count].binary_search(&key) else {
                return Ok(None);
            };
            let row = (*n).kids[pos];
            self.add_tail(tx, n, pos, count)?;
            let n = &mut *n;
            n.keys.copy_within(pos + 1..count, pos);
            n.kids.copy_within(pos + 1..count, pos);
            n.count -= 1;
            Ok(Some(row))
        }
    }

    /// Number of nodes in the tree at `root` (for integrity reports).
    pub(crate) fn count_nodes(&self, root: Oid) -> Result<u64> {
        fn walk(pool: &Pool, at: Oid, depth: usize) -> Result<u64> {
            if depth >= MAX_DEPTH {
                return Err(DbError::Corrupt("pmemobj: tree deeper than any valid tree".into()));
            }
            let n = pool.node(at)?;
            if n.kind == LEAF {
                return Ok(1);
            }
            let mut total = 1;
            for &kid in &n.kids[..=n.count as usize] {
                total += walk(pool, kid, depth + 1)?;
            }
            Ok(total)
        }
        if root.is_null() {
            return Ok(0);
        }
        walk(self, root, 0)
    }
}

//! `cow` transactions: snapshot reads, and the single writer's copy-on-write B+tree changes
//! (the dirty directory: a writer's new pages, held in DRAM until commit writes them).
//!
//! Invariant: a writer changes only pages it allocated itself (keys of `dirty`); a committed page
//! it needs to change is copied first, and the original goes to `freed`, reclaimed only after
//! the commit that replaces it is durable and no snapshot can reach it.

use super::layout::{Node, NodeBuf, Shape, TableRoot, MAX_HEIGHT};
use super::{check_written_before, tuples, Cow, PageBytes, Version, WriterSlot};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use storage::engine::{check_row, check_update};
use storage::format::PageId;
use storage::{CommitToken, DbError, IntegrityReport, Result, TableId, Txn};

/// A scan in progress: rows it may still return, the last key returned, the caller's visitor.
struct ScanState<'v> {
    budget: usize,
    last: Option<u64>,
    visit: &'v mut dyn FnMut(u64, &[u8]) -> bool,
}

/// The writer's state: its copy of the directory and its new pages.
struct Writer<'a> {
    /// The writer slot (taken by the commit, which may hand it on before it is durable).
    slot: Option<WriterSlot<'a>>,
    tables: Vec<TableRoot>,
    dirty: HashMap<PageId, NodeBuf>,
    /// Committed pages this transaction replaced (freed with its commit).
    freed: Vec<PageId>,
    /// Layout `pointers`: the writer's new tuples (slot pointer -> slot bytes), written by its
    /// commit, and the committed tuples it replaced or deleted (freed with its commit).
    tuples: HashMap<u64, Vec<u8>>,
    freed_tuples: Vec<u64>,
}

/// Most point reads a snapshot reader keeps for validation; past it, a newer commit makes its
/// first write fail (as a scan does).
const MAX_CHECKED_READS: usize = 1024;

pub(crate) struct CowTxn<'a> {
    db: &'a Cow,
    worker: usize,
    snap: Arc<Version>,
    /// Where `snap` is pinned: its worker's slot, or (`None`) the engine's registry.
    pinned_on: Option<usize>,
    /// A snapshot reader's point reads: (table, key, the leaf page its search ended in, 0 for
    /// an empty table), validated by its first write if the snapshot is no longer current.
    reads: Vec<(TableId, u64, PageId)>,
    /// Reads were made that `reads` does not hold (a scan, or more than
    /// [`MAX_CHECKED_READS`]): the first write fails if the snapshot is no longer current.
    reads_unchecked: bool,
    w: Option<Writer<'a>>,
    done: bool,
}

impl<'a> CowTxn<'a> {
    pub fn new(db: &'a Cow, worker: usize) -> CowTxn<'a> {
        let snap = db.snapshot_of(worker);
        CowTxn {
            db,
            worker,
            snap,
            pinned_on: Some(worker),
            reads: Vec::new(),
            reads_unchecked: false,
            w: None,
            done: false,
        }
    }

    fn tables(&self) -> &[TableRoot] {
        match &self.w {
            Some(w) => &w.tables,
            None => &self.snap.tables,
        }
    }

    fn table(&self, table: TableId) -> Result<(&TableRoot, Shape)> {
        let t = self.tables().get(table as usize).ok_or(DbError::NoSuchTable(table))?;
        Ok((t, self.db.shape(table, &t.spec)))
    }

    /// A node of the transaction's view: its own new page, or a committed one (validated),
    /// whose bytes (`io=fs`: read through the file) `read` keeps for as long as the node is
    /// used, so a transaction holds no page it has finished with.
    fn node<'b>(
        &'b self,
        read: &'b mut Option<PageBytes<'b>>,
        shape: &Shape,
        page: PageId,
        level: u16,
        number: u64,
    ) -> Result<Node<'b>> {
        if let Some(n) = self.w.as_ref().and_then(|w| w.dirty.get(&page)) {
            return Ok(n.view());
        }
        let bytes = read.insert(self.db.node_page(self.pinned_on, page)?);
        self.committed_node(bytes.bytes(), shape, page, level, number)
    }

    /// A committed node parsed from `bytes` (page `page`), validated against version `number`
    /// (the snapshot's, or a newer one being compared with it).
    fn committed_node<'b>(
        &self,
        bytes: &'b [u8],
        shape: &Shape,
        page: PageId,
        level: u16,
        number: u64,
    ) -> Result<Node<'b>> {
        let node = Node::parse(bytes, page, shape, level)?;
        // The header and a binary search's lines; which lines the search reads is not tracked,
        // so the page's first ones stand for them (as the page store's latch events do).
        let search_lines = (usize::BITS - node.count.leading_zeros()) as usize + 1;
        self.db.load(page, 0, (1 + search_lines) * pmem::CACHE_LINE as usize);
        check_written_before(&node, page, number)?;
        Ok(node)
    }

    /// Row `i` of leaf `node` (at `page`), its checksum verified: a damaged row is an error
    /// naming it, never data returned.
    fn checked_row<'s>(
        &'s self,
        shape: &Shape,
        node: &Node<'s>,
        page: PageId,
        i: usize,
    ) -> Result<&'s [u8]> {
        if shape.pointers {
            return self.tuple_row(shape, node.key(i), node.tuple(i));
        }
        self.db.load(page, node.value_at(i), node.entry_bytes - 8);
        if self.db.row_checksums() && !node.row_ok(i) {
            return Err(DbError::Corrupt(format!(
                "cow: table {}: leaf at page {page} entry {i} (key {}): row fails its checksum",
                shape.owner - 1,
                node.key(i)
            )));
        }
        Ok(node.row(i))
    }

    /// The row of `key`'s tuple at `ptr`: one of the writer's own, or a committed one
    /// (validated: its page, key, version and crc).
    fn tuple_row(&self, shape: &Shape, key: u64, ptr: u64) -> Result<&[u8]> {
        if let Some(t) = self.w.as_ref().and_then(|w| w.tuples.get(&ptr)) {
            return Ok(&t[tuples::SLOT_HEAD..]);
        }
        self.db.tuple(shape, ptr, key, self.snap.number)
    }

    /// A new tuple for `key` (layout `pointers`), owned by the writer until its commit.
    fn new_tuple(&mut self, shape: &Shape, key: u64, row: &[u8]) -> Result<u64> {
        let ptr = self.db.alloc_tuple(shape)?;
        let tuple = tuples::encode(key, row, self.db.row_checksums());
        self.writer().tuples.insert(ptr, tuple);
        Ok(ptr)
    }

    /// The leaf holding `key` and the entry's index, if present.
    fn find(&self, table: TableId, key: u64) -> Result<Option<(PageId, usize)>> {
        let (t, shape) = self.table(table)?;
        let found = self.leaf_for(t, &shape, self.snap.number, key)?;
        Ok(found.and_then(|(page, at)| at.ok().map(|i| (page, i))))
    }

    /// The leaf of `t` (a table of version `number`, or the writer's) whose range holds `key`,
    /// and where the key is in it (`Err`: where it would go); `None`: the table is empty.
    fn leaf_for(
        &self,
        t: &TableRoot,
        shape: &Shape,
        number: u64,
        key: u64,
    ) -> Result<Option<(PageId, std::result::Result<usize, usize>)>> {
        if t.root == 0 {
            return Ok(None);
        }
        let (mut page, mut level) = (t.root, t.height as u16 - 1);
        loop {
            let mut read = None;
            let node = self.node(&mut read, shape, page, level, number)?;
            if level == 0 {
                return Ok(Some((page, node.search(key))));
            }
            page = node.child(node.child_index(key));
            level -= 1;
        }
    }

    /// Notes a point read of `key` in `table` that ended in `leaf` (0: the table was empty),
    /// while the transaction is a snapshot reader, so that its first write can validate it
    /// against a newer version instead of failing (see [`Self::become_writer`]).
    fn note_read(&mut self, table: TableId, key: u64, leaf: PageId) {
        if self.w.is_some() || self.reads_unchecked {
            return;
        }
        if self.reads.len() >= MAX_CHECKED_READS {
            self.reads_unchecked = true;
            self.reads = Vec::new();
            return;
        }
        self.reads.push((table, key, leaf));
    }

    /// Whether every point read the transaction made from its snapshot ends in the same leaf
    /// page of `fresh` (a newer version). A committed page is never changed while a version
    /// that reaches it is pinned (ours is), so the same page means the same rows: each read
    /// would return what it returned, or find the key absent as it did.
    fn reads_still_hold(&self, fresh: &Version) -> Result<bool> {
        if self.reads_unchecked {
            return Ok(false);
        }
        for &(table, key, leaf) in &self.reads {
            let Some(t) = fresh.tables.get(table as usize) else { return Ok(false) };
            let old = &self.snap.tables[table as usize];
            if t.spec != old.spec {
                return Ok(false);
            }
            let shape = self.db.shape(table, &t.spec);
            let now = self.leaf_for(t, &shape, fresh.number, key)?.map_or(0, |(page, _)| page);
            if now != leaf {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Becomes the writer (once): takes the writer slot; fails retryably if another writer
    /// committed after this transaction read its snapshot.
    fn become_writer(&mut self, table: TableId, key: u64) -> Result<()> {
        if self.w.is_some() {
            return Ok(());
        }
        let conflict = DbError::Conflict { table, key };
        let slot = self.db.writer_slot().ok_or(conflict)?;
        let fresh = self.db.snapshot();
        if fresh.number != self.snap.number {
            // Another writer committed since the snapshot: the reads so far must still hold in
            // the version this writer will change (it is the current one: the slot is held).
            // Both versions stay pinned while they are compared.
            // (A transaction that has read nothing holds trivially.)
            let stale = self.reads_still_hold(&fresh).map(|held| !held);
            if !matches!(stale, Ok(false)) {
                self.db.release(fresh.number);
                stale?;
                self.db.note_snapshot_conflict();
                return Err(DbError::Conflict { table, key });
            }
            if !self.reads.is_empty() {
                self.db.note_reads_revalidated();
            }
            self.db.unpin(self.pinned_on, self.snap.number);
            self.snap = fresh;
            self.pinned_on = None;
        } else {
            self.db.release(fresh.number);
        }
        self.reads = Vec::new();
        let tables = self.snap.tables.clone();
        self.w = Some(Writer {
            slot: Some(slot),
            tables,
            dirty: HashMap::new(),
            freed: Vec::new(),
            tuples: HashMap::new(),
            freed_tuples: Vec::new(),
        });
        Ok(())
    }

    /// Layout `pointers`: writes the update into the writer's own tuple of `key`, or into a
    /// new tuple (a copy of the committed one, verified) that leaf entry `i` then points to.
    #[allow(clippy::too_many_arguments)]
    fn update_tuple(
        &mut self,
        shape: &Shape,
        leaf: PageId,
        i: usize,
        key: u64,
        ptr: u64,
        offset: usize,
        bytes: &[u8],
    ) -> Result<()> {
        let checksums = self.db.row_checksums();
        let at = tuples::SLOT_HEAD + offset;
        if let Some(t) = self.writer().tuples.get_mut(&ptr) {
            t[at..at + bytes.len()].copy_from_slice(bytes);
            tuples::reseal(t, checksums);
            return Ok(());
        }
        let mut row = self.db.tuple(shape, ptr, key, self.snap.number)?.to_vec();
        row[offset..offset + bytes.len()].copy_from_slice(bytes);
        let new = self.new_tuple(shape, key, &row)?;
        self.dirty(leaf)?.set_child(i, new);
        self.writer().freed_tuples.push(ptr);
        Ok(())
    }

    fn writer(&mut self) -> &mut Writer<'a> {
        self.w.as_mut().expect("become_writer ran")
    }

    /// Makes `page` (at `level` of `shape`'s tree) one of the writer's own pages, copying a
    /// committed one (checksum verified) to a new page. Returns the page to change.
    fn own(&mut self, shape: &Shape, page: PageId, level: u16) -> Result<PageId> {
        let db = self.db;
        if self.writer().dirty.contains_key(&page) {
            return Ok(page);
        }
        let bytes = db.node_page(self.pinned_on, page)?;
        let node = Node::parse(bytes.bytes(), page, shape, level)?;
        // The copy reads every byte in use. Its checksum is derived through the changes, not
        // verified here (`NodeBuf`): damage is not laundered into the new version.
        db.load(page, 0, node.used_bytes());
        check_written_before(&node, page, self.snap.number)?;
        let copy = NodeBuf::copy_of(db.take_buffer(self.worker), &node, page);
        let new = db.alloc()?;
        db.note_copy();
        let w = self.writer();
        w.dirty.insert(new, copy);
        if db.fault_reuse_early() {
            // The fault: the committed page is reusable before the version replacing it is.
            db.give_back([page]);
        } else {
            w.freed.push(page);
        }
        Ok(new)
    }

    fn new_node(&mut self, shape: &Shape, level: u16) -> Result<PageId> {
        let page = self.db.alloc()?;
        let node = NodeBuf::new_in(self.db.take_buffer(self.worker), shape, level);
        self.writer().dirty.insert(page, node);
        Ok(page)
    }

    /// Drops one of the writer's own pages (never visible to anyone: reusable at once).
    fn drop_own(&mut self, page: PageId) {
        self.writer().dirty.remove(&page);
        self.db.give_back([page]);
        self.db.counters_ref().page_free();
    }

    fn dirty(&mut self, page: PageId) -> Result<&mut NodeBuf> {
        self.writer()
            .dirty
            .get_mut(&page)
            .ok_or_else(|| DbError::Invalid(format!("cow: internal: page {page} is not dirty")))
    }

    /// Copies the path from the root to the leaf for `key` (creating a root leaf for an empty
    /// table). Returns (page, child index taken) from the root down; the leaf is last.
    fn cow_path(&mut self, table: TableId, key: u64) -> Result<Vec<(PageId, usize)>> {
        let (t, shape) = self.table(table)?;
        let (root, height) = (t.root, t.height);
        let tid = table as usize;
        if root == 0 {
            let leaf = self.new_node(&shape, 0)?;
            let t = &mut self.writer().tables[tid];
            (t.root, t.height) = (leaf, 1);
            return Ok(vec![(leaf, 0)]);
        }
        let mut level = height as u16 - 1;
        let mut page = self.own(&shape, root, level)?;
        self.writer().tables[tid].root = page;
        let mut path = Vec::with_capacity(height as usize);
        while level > 0 {
            let (i, child) = {
                let n = self.dirty(page)?.view();
                let i = n.child_index(key);
                (i, n.child(i))
            };
            let own = self.own(&shape, child, level - 1)?;
            if own != child {
                self.dirty(page)?.set_child(i, own);
            }
            path.push((page, i));
            page = own;
            level -= 1;
        }
        path.push((page, 0));
        Ok(path)
    }

    /// Inserts (sep, right) above `path[j]` after it split, splitting upwards as needed.
    fn propagate(
        &mut self,
        table: TableId,
        shape: &Shape,
        path: &[(PageId, usize)],
        mut j: usize,
        mut sep: u64,
        mut right: PageId,
    ) -> Result<()> {
        let tid = table as usize;
        loop {
            self.db.counters_ref().split();
            if j == 0 {
                let old_root = path[0].0;
                let level = self.dirty(old_root)?.level() + 1;
                if u32::from(level) >= MAX_HEIGHT {
                    return Err(DbError::TxnTooLarge(format!(
                        "cow: tree taller than {MAX_HEIGHT}"
                    )));
                }
                let root = self.new_node(shape, level)?;
                let n = self.dirty(root)?;
                n.insert(0, 0, &old_root.to_le_bytes())?;
                n.insert(1, sep, &right.to_le_bytes())?;
                let t = &mut self.writer().tables[tid];
                t.root = root;
                t.height += 1;
                return Ok(());
            }
            let (parent, i) = path[j - 1];
            let level = self.dirty(parent)?.level();
            if self.dirty(parent)?.count() < shape.capacity(level) {
                self.dirty(parent)?.insert(i + 1, sep, &right.to_le_bytes())?;
                return Ok(());
            }
            let r2 = self.new_node(shape, level)?;
            let mut r2buf = self.writer().dirty.remove(&r2).expect("just added");
            let split =
                self.dirty(parent)?.insert_split(i + 1, sep, &right.to_le_bytes(), &mut r2buf);
            self.writer().dirty.insert(r2, r2buf);
            sep = split?;
            right = r2;
            j -= 1;
        }
    }

    /// Removes nodes a delete emptied, bottom-up, and shortens a root with one child.
    fn prune(&mut self, table: TableId, path: &[(PageId, usize)]) -> Result<()> {
        let tid = table as usize;
        let mut j = path.len() - 1;
        while j > 0 && self.dirty(path[j].0)?.count() == 0 {
            self.drop_own(path[j].0);
            let (parent, i) = path[j - 1];
            self.dirty(parent)?.remove(i)?;
            j -= 1;
        }
        let root = path[0].0;
        if self.dirty(root)?.count() == 0 {
            self.drop_own(root);
            let t = &mut self.writer().tables[tid];
            (t.root, t.height) = (0, 0);
            return Ok(());
        }
        // A root with a single child: the child becomes the root (it may be a committed page,
        // which is fine: it is not changed, only named by the new directory).
        loop {
            let (root, height) = {
                let t = &self.writer().tables[tid];
                (t.root, t.height)
            };
            if height <= 1 || !self.writer().dirty.contains_key(&root) {
                return Ok(());
            }
            let n = self.dirty(root)?.view();
            if n.count != 1 {
                return Ok(());
            }
            let child = n.child(0);
            self.drop_own(root);
            self.db.counters_ref().merge();
            let t = &mut self.writer().tables[tid];
            (t.root, t.height) = (child, height - 1);
        }
    }

    fn scan_node(
        &self,
        shape: &Shape,
        page: PageId,
        level: u16,
        range: (u64, u64),
        scan: &mut ScanState<'_>,
    ) -> Result<bool> {
        // A page read through the file is kept only while the scan is in it (rows go to the
        // visitor at once), so a long scan does not hold every page it passed.
        let mut read = None;
        let node = self.node(&mut read, shape, page, level, self.snap.number)?;
        let (low, high) = range;
        if level == 0 {
            let start = node.search(low).unwrap_or_else(|i| i);
            for i in start..node.count {
                let k = node.key(i);
                if k > high || scan.budget == 0 {
                    return Ok(false);
                }
                // Regression (`nvmdb fuzz --engine cow --seed 12 --case 89`): a valid leaf
                // copied over another one returned its keys twice; keys must rise.
                if scan.last.is_some_and(|l| l >= k) {
                    return Err(DbError::Corrupt(format!(
                        "cow: table {}: leaf at page {page} holds key {k} out of order (after \
                         {})",
                        shape.owner - 1,
                        scan.last.unwrap_or(0)
                    )));
                }
                scan.last = Some(k);
                scan.budget -= 1;
                if !(scan.visit)(k, self.checked_row(shape, &node, page, i)?) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        let start = node.child_index(low);
        for i in start..node.count {
            if i > start && node.key(i) > high {
                return Ok(false);
            }
            if !self.scan_node(shape, node.child(i), level - 1, range, scan)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Ends the transaction's claims: gives back its own pages (abort) and its snapshot.
    fn end(&mut self, aborted: bool) {
        if self.done {
            return;
        }
        self.done = true;
        if let Some(w) = self.w.take() {
            if aborted {
                self.db.give_back(w.dirty.keys().copied());
                self.db.give_back_tuples(w.tuples.keys().copied());
            }
            self.db.keep_buffers(self.worker, w.dirty.into_values().map(NodeBuf::into_bytes));
        }
        self.db.unpin(self.pinned_on, self.snap.number);
    }
}

impl Drop for CowTxn<'_> {
    fn drop(&mut self) {
        self.end(true);
    }
}

impl Txn for CowTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let (t, shape) = self.table(table)?;
        let found = self.leaf_for(t, &shape, self.snap.number, key)?;
        self.note_read(table, key, found.map_or(0, |(leaf, _)| leaf));
        let Some((leaf, Ok(i))) = found else { return Ok(false) };
        let mut read = None;
        let node = self.node(&mut read, &shape, leaf, 0, self.snap.number)?;
        out.extend_from_slice(self.checked_row(&shape, &node, leaf, i)?);
        Ok(true)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let (t, shape) = self.table(table)?;
        check_row(table, &t.spec, row)?;
        self.become_writer(table, key)?;
        if self.find(table, key)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        let value = if shape.pointers {
            self.new_tuple(&shape, key, row)?.to_le_bytes().to_vec()
        } else {
            super::layout::leaf_value(key, row, self.db.row_checksums())
        };
        let path = self.cow_path(table, key)?;
        let (leaf, _) = path[path.len() - 1];
        let n = self.dirty(leaf)?;
        let pos = n.view().search(key).unwrap_or_else(|i| i);
        if n.count() < shape.leaf_capacity {
            n.insert(pos, key, &value)?;
        } else {
            let right = self.new_node(&shape, 0)?;
            let mut rbuf = self.writer().dirty.remove(&right).expect("just added");
            let sep = self.dirty(leaf)?.insert_split(pos, key, &value, &mut rbuf);
            self.writer().dirty.insert(right, rbuf);
            let sep = sep?;
            self.propagate(table, &shape, &path, path.len() - 1, sep, right)?;
        }
        self.writer().tables[table as usize].rows += 1;
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let (t, shape) = self.table(table)?;
        check_update(table, &t.spec, offset, bytes.len())?;
        self.become_writer(table, key)?;
        if self.find(table, key)?.is_none() {
            return Ok(false);
        }
        let path = self.cow_path(table, key)?;
        let (leaf, _) = path[path.len() - 1];
        let checksums = self.db.row_checksums();
        let n = self.dirty(leaf)?;
        let i = n.view().search(key).map_err(|_| {
            DbError::Corrupt(format!("cow: key {key} vanished from its leaf in table {table}"))
        })?;
        if shape.pointers {
            let ptr = n.view().tuple(i);
            self.update_tuple(&shape, leaf, i, key, ptr, offset as usize, bytes)?;
            return Ok(true);
        }
        // The row's new checksum is derived from its stored one (`NodeBuf::update_row`), so
        // damage elsewhere in the row still fails it: nothing is laundered, and the row is not
        // checksummed in full here (a read of it verifies it).
        n.update_row(i, offset as usize, bytes, checksums);
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let (_, shape) = self.table(table)?;
        self.become_writer(table, key)?;
        if self.find(table, key)?.is_none() {
            return Ok(false);
        }
        let path = self.cow_path(table, key)?;
        let n = self.dirty(path[path.len() - 1].0)?;
        let i = n.view().search(key).map_err(|_| {
            DbError::Corrupt(format!("cow: key {key} vanished from its leaf in table {table}"))
        })?;
        let ptr = n.view().tuple(i);
        n.remove(i)?;
        if shape.pointers {
            if self.writer().tuples.remove(&ptr).is_some() {
                self.db.give_back_tuples([ptr]);
            } else {
                self.writer().freed_tuples.push(ptr);
            }
        }
        self.db.counters_ref().delete();
        let t = &mut self.writer().tables[table as usize];
        t.rows = t.rows.saturating_sub(1);
        self.prune(table, &path)?;
        Ok(true)
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        // A scan's reads are not kept for validation (`become_writer`).
        if self.w.is_none() {
            self.reads_unchecked = true;
            self.reads = Vec::new();
        }
        let (t, shape) = self.table(table)?;
        if t.root == 0 || low > high || limit == 0 {
            return Ok(0);
        }
        let (root, level) = (t.root, t.height as u16 - 1);
        let mut state = ScanState { budget: limit, last: None, visit };
        self.scan_node(&shape, root, level, (low, high), &mut state)?;
        Ok(limit - state.budget)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let Some(mut w) = self.w.take() else {
            let token = self.db.read_token(&self.snap);
            self.end(false);
            return Ok(token);
        };
        if w.dirty.is_empty() && w.tables == self.snap.tables {
            self.end(false);
            return Ok(self.db.read_token(&self.snap));
        }
        let tables = std::mem::take(&mut w.tables);
        let freed = (std::mem::take(&mut w.freed), std::mem::take(&mut w.freed_tuples));
        let Some(slot) = w.slot.take() else {
            return Err(DbError::Invalid("cow: internal: a writer without the writer slot".into()));
        };
        let result =
            self.db.commit_version(slot, &mut w.dirty, &mut w.tuples, tables, freed, false);
        // Written into the region (or given back): the page buffers go to the next writers.
        self.db.keep_buffers(self.worker, w.dirty.drain().map(|(_, node)| node.into_bytes()));
        drop(w);
        self.end(false);
        result
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        self.end(true);
        Ok(())
    }
}

/// Walks the current version: every node valid with its checksum, keys strictly increasing
/// across each tree, row counts as the directory says, no page reachable twice or free or
/// pending; with no writer active, reachable + free + pending = every page below the high mark.
pub(crate) fn check_integrity(db: &Cow) -> Result<IntegrityReport> {
    let quiet = db.writer.try_lock();
    let snap = db.snapshot();
    let result = walk(db, &snap);
    db.release(snap.number);
    let (reachable, rows, slots) = result?;
    let s = db.lock_state();
    let pending: usize = s.pending.iter().map(|(_, p, _)| p.len()).sum();
    for p in &reachable {
        if s.free.contains(p)
            || s.pending.iter().any(|(_, ps, _)| ps.contains(p))
            || s.tuples.pages.contains_key(p)
        {
            return Err(DbError::Corrupt(format!("cow: page {p} is reachable and also free")));
        }
    }
    let pending_slots: HashSet<u64> =
        s.pending.iter().flat_map(|(_, _, slots)| slots.iter().copied()).collect();
    // Slots allocated per tuple page: reachable or pending (a writer's own only when not quiet).
    let mut allocated: HashMap<PageId, usize> = HashMap::new();
    for &ptr in slots.iter().chain(pending_slots.iter()) {
        let page = ptr / storage::format::PAGE_SIZE_U64;
        let Some(p) = s.tuples.pages.get(&page) else {
            return Err(DbError::Corrupt(format!("cow: tuple {ptr} is in no tuple page")));
        };
        let free = s.tuples.free.get(&p.owner).is_some_and(|f| f.contains(&ptr));
        if free || s.free.contains(&page) {
            return Err(DbError::Corrupt(format!("cow: tuple {ptr} is reachable and also free")));
        }
        *allocated.entry(page).or_default() += 1;
    }
    if slots.iter().any(|p| pending_slots.contains(p)) {
        return Err(DbError::Corrupt("cow: a reachable tuple is also pending".into()));
    }
    let below = s.high - db.layout.first_data_page();
    let tuple_pages = s.tuples.pages.len();
    let accounted = (reachable.len() + s.free.len() + pending + tuple_pages) as u64;
    if quiet.is_some() && accounted != below {
        return Err(DbError::Corrupt(format!(
            "cow: {} reachable + {} free + {pending} pending + {tuple_pages} tuple pages != \
             {below} pages in use",
            reachable.len(),
            s.free.len()
        )));
    }
    if quiet.is_some() {
        for (page, p) in &s.tuples.pages {
            let counted = allocated.get(page).copied().unwrap_or(0);
            if p.used != counted {
                return Err(DbError::Corrupt(format!(
                    "cow: tuple page {page} counts {} slots allocated, {counted} are reachable \
                     or pending",
                    p.used
                )));
            }
        }
    }
    Ok(IntegrityReport {
        tables: snap.tables.len() as u64,
        rows,
        pages_in_use: (reachable.len() + pending + tuple_pages) as u64,
        pages_free: s.free.len() as u64 + (db.layout.page_count - s.high),
    })
}

/// Reachable pages, rows and (layout `pointers`) tuple slots of `snap`, every node and tuple
/// validated.
fn walk(db: &Cow, snap: &Version) -> Result<(HashSet<PageId>, u64, HashSet<u64>)> {
    let mut reachable = HashSet::new();
    let mut slots = HashSet::new();
    if snap.meta_page != 0 {
        reachable.insert(snap.meta_page);
    }
    let mut total_rows = 0u64;
    for (id, t) in snap.tables.iter().enumerate() {
        if t.root == 0 {
            if t.rows != 0 {
                return Err(DbError::Corrupt(format!("cow: empty table {} has rows", t.spec.name)));
            }
            continue;
        }
        let shape = db.shape(id as TableId, &t.spec);
        let mut rows = 0u64;
        let mut last: Option<u64> = None;
        // (page, level, lower bound of its keys): depth first, left to right.
        let mut stack = vec![(t.root, t.height as u16 - 1)];
        while let Some((page, level)) = stack.pop() {
            if !reachable.insert(page) {
                return Err(DbError::Corrupt(format!("cow: page {page} is reachable twice")));
            }
            let node = Node::parse(db.page(page)?, page, &shape, level)?;
            check_written_before(&node, page, snap.number)?;
            // A leaf's damaged rows are named first (the node's crc then only says "page").
            let bad_row = (level == 0 && db.row_checksums() && !shape.pointers)
                .then(|| (0..node.count).find(|&i| !node.row_ok(i)))
                .flatten();
            if bad_row.is_none() && !node.crc_ok() {
                return Err(DbError::Corrupt(format!(
                    "cow: table {}: node at page {page} (level {level}, {} entries) fails its \
                     checksum",
                    t.spec.name, node.count
                )));
            }
            if level == 0 {
                for i in 0..node.count {
                    let k = node.key(i);
                    if bad_row == Some(i) {
                        return Err(DbError::Corrupt(format!(
                            "cow: table {}: leaf at page {page} entry {i} (key {k}): row fails \
                             its checksum",
                            t.spec.name
                        )));
                    }
                    if last.is_some_and(|l| l >= k) {
                        return Err(DbError::Corrupt(format!(
                            "cow: table {}: key {k} out of order",
                            t.spec.name
                        )));
                    }
                    last = Some(k);
                    if shape.pointers {
                        let ptr = node.tuple(i);
                        db.tuple(&shape, ptr, k, snap.number)?;
                        if !slots.insert(ptr) {
                            return Err(DbError::Corrupt(format!(
                                "cow: table {}: tuple {ptr} is reachable twice",
                                t.spec.name
                            )));
                        }
                    }
                }
                rows += node.count as u64;
            } else {
                for i in (0..node.count).rev() {
                    stack.push((node.child(i), level - 1));
                }
            }
        }
        if rows != t.rows {
            return Err(DbError::Corrupt(format!(
                "cow: table {} holds {rows} rows, its directory says {}",
                t.spec.name, t.rows
            )));
        }
        total_rows += rows;
    }
    Ok((reachable, total_rows, slots))
}

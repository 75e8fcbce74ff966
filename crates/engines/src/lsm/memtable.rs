//! The memtable: in DRAM for the traditional Log engine (a `BTreeMap`, rebuilt from the log at
//! recovery), or, for NVM-Log (Arulraj et al. §4.3), a persistent skip list in a region arena
//! whose links are 8-byte atomic stores, so recovery never rebuilds it.
//!
//! The skip list is append-only between flushes: every write adds a node `(table, key, seq)`
//! with the row (or a tombstone), ordered by table and key ascending and sequence number
//! descending, so the first node of a key is its newest version. A commit links its nodes in
//! two steps (see `Lsm::commit_nvm`): the nodes' contents and their own next pointers are
//! written and persisted before any existing node points to them.
//!
//! Readers walk the list while one committer links (no lock between them: Herlihy & Shavit's
//! lazy/lock-free skip list, *The Art of Multiprocessor Programming* §14.3–14.4, with a single
//! writer): a node is only ever inserted, by one 8-byte `Release` store to a predecessor's
//! pointer after the node's own pointers are set, so every pointer a reader loads (`Acquire`)
//! leads to a node that sorts after the one holding it and to the complete list beyond it, and
//! no node a reader looks for is ever skipped, whichever of a commit's links it already sees. A
//! lookup answers with the node its walk compared, never with a pointer it loads again: a node
//! linked between the two loads may sort before the key looked for (the lost updates fixed in
//! beabf9c, `tests/regression_lsm_read_beside_commits.rs`).
//!
//! Invariant: every node reachable from the head was fully persisted (contents and next
//! pointers) before the store that made it reachable; every pointer read from the arena is
//! checked to lie inside the arena's used part before it is followed (`used` grows before the
//! links that point into the new part). A node's checksum is
//! written with its contents (so it is persisted before the node is reachable) and verified
//! whenever its row is read (issue 37: changed row bytes are an error, never data).

use pmem::Region;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use storage::format::{get_u32, get_u64};
use storage::{DbError, Result, TableSpec};

pub(crate) const MAX_HEIGHT: usize = 12;
/// `[u16 table][u8 height][u8 flags][u32 crc][u64 key][u64 seq]`, then the next pointers and
/// the row. (Tables are at most 63, so the table id gave up two bytes to the checksum and nodes
/// kept their size: the memtable holds as many rows as before.)
const NODE_HEADER: u64 = 24;
/// Where a node's checksum lies: CRC-32C of header bytes `0..4` and `8..24` and the row (not
/// the next pointers, which linking changes after the node is persisted). 0 with
/// `checksums=off`.
const NODE_CRC: usize = 4;
/// The head node: a header and `MAX_HEIGHT` next pointers.
pub(crate) const HEAD_BYTES: u64 = 128;
const _: () = assert!(NODE_HEADER + 8 * MAX_HEIGHT as u64 <= HEAD_BYTES);
pub(crate) const FLAG_TOMBSTONE: u8 = 1;

pub(crate) fn node_bytes(height: usize, value_bytes: usize) -> u64 {
    (NODE_HEADER + 8 * height as u64 + value_bytes as u64).next_multiple_of(8)
}

/// A checked node header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub off: u64,
    pub table: u32,
    pub key: u64,
    pub seq: u64,
    pub height: usize,
    pub tombstone: bool,
}

impl Node {
    fn order(&self) -> (u32, u64, std::cmp::Reverse<u64>) {
        (self.table, self.key, std::cmp::Reverse(self.seq))
    }
    pub fn next_field(&self, level: usize) -> u64 {
        self.off + NODE_HEADER + 8 * level as u64
    }
    fn value_at(&self) -> u64 {
        self.off + NODE_HEADER + 8 * self.height as u64
    }
}

/// The persistent skip list of one arena.
pub(crate) struct NvmMem {
    pub base: u64,
    pub capacity: u64,
    /// Bytes of the arena in use (head included); nodes lie below `base + used`. Written only
    /// by the committer (under the commit latch) or a flush; read by concurrent readers' bounds
    /// checks.
    used: AtomicU64,
    /// The committer's height generator (atomic only so that readers may share `&self`).
    rng: AtomicU64,
    /// Nodes carry checksums (fixed at format, `Layout::row_checksums`).
    pub checksums: bool,
}

/// Where a search is: the head, or a node.
#[derive(Clone, Copy)]
enum At {
    Head,
    Node(Node),
}

impl NvmMem {
    pub fn new(base: u64, capacity: u64, used: u64, checksums: bool) -> NvmMem {
        let rng = AtomicU64::new(0x9E37_79B9_7F4A_7C15 ^ base);
        NvmMem { base, capacity, used: AtomicU64::new(used), rng, checksums }
    }

    /// Bytes of the arena in use.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Sets the bytes in use: before any link into the new part is stored (`Release`, so a
    /// reader that loads such a link sees the new bound), or back after a failed plan.
    pub fn set_used(&self, used: u64) {
        self.used.store(used, Ordering::Release);
    }

    /// Writes an empty head (flushed; the caller fences).
    pub fn format(region: &Region, base: u64) {
        region.write(base, &[0u8; HEAD_BYTES as usize]);
        region.flush(base, HEAD_BYTES);
    }

    /// A node height (geometric, p = 1/4). Only the committer draws (under the commit latch).
    pub fn random_height(&self) -> usize {
        let mut h = 1;
        let mut rng = self.rng.load(Ordering::Relaxed);
        loop {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if h >= MAX_HEIGHT || rng & 3 != 0 {
                self.rng.store(rng, Ordering::Relaxed);
                return h;
            }
            h += 1;
        }
    }

    fn field(&self, at: At, level: usize) -> u64 {
        match at {
            At::Head => self.base + NODE_HEADER + 8 * level as u64,
            At::Node(n) => n.next_field(level),
        }
    }

    /// Reads and checks the node at `off`.
    pub fn node(&self, region: &Region, tables: &[TableSpec], off: u64) -> Result<Node> {
        let bad =
            |why: &str| Err(DbError::Corrupt(format!("lsm memtable: node at offset {off}: {why}")));
        let end = self.base + self.used();
        if off < self.base + HEAD_BYTES || !off.is_multiple_of(8) || off + NODE_HEADER > end {
            return bad("pointer outside the arena");
        }
        let h = region.read(off, NODE_HEADER as usize);
        let table = u32::from(u16::from_le_bytes([h[0], h[1]]));
        let height = h[2] as usize;
        let flags = h[3];
        let Some(spec) = tables.get(table as usize) else { return bad("no such table") };
        if height == 0 || height > MAX_HEIGHT || flags > FLAG_TOMBSTONE {
            return bad("bad height or flags");
        }
        let value = if flags == FLAG_TOMBSTONE { 0 } else { spec.row_bytes as usize };
        if off + node_bytes(height, value) > end {
            return bad("node overruns the arena");
        }
        Ok(Node {
            off,
            table,
            key: get_u64(h, 8),
            seq: get_u64(h, 16),
            height,
            tombstone: flags == FLAG_TOMBSTONE,
        })
    }

    /// The node at `next`, which follows `cur` in a list: it must sort strictly after it. A
    /// damaged pointer back to an earlier node would otherwise make a walk cycle forever
    /// (found by `nvmdb fuzz --engine lsm`, issue 37).
    fn after(&self, region: &Region, tables: &[TableSpec], cur: At, next: u64) -> Result<Node> {
        let n = self.node(region, tables, next)?;
        match cur {
            At::Node(c) if n.order() <= c.order() => Err(DbError::Corrupt(format!(
                "lsm memtable: node at offset {next} follows node {} but does not sort after it",
                c.off
            ))),
            _ => Ok(n),
        }
    }

    /// The row of node `n` (`None`: a tombstone), its checksum verified.
    pub fn value<'r>(
        &self,
        region: &'r Region,
        tables: &[TableSpec],
        n: &Node,
    ) -> Result<Option<&'r [u8]>> {
        let value = (!n.tombstone)
            .then(|| region.read(n.value_at(), tables[n.table as usize].row_bytes as usize));
        if self.checksums {
            let h = region.read(n.off, NODE_HEADER as usize);
            if get_u32(h, NODE_CRC) != node_crc(h, value.unwrap_or(&[])) {
                return Err(DbError::Corrupt(format!(
                    "lsm memtable: table {} key {} (node at offset {}): row fails its checksum",
                    n.table, n.key, n.off
                )));
            }
        }
        Ok(value)
    }

    /// Writes a node's header and value (not its next pointers) at `off`.
    #[allow(clippy::too_many_arguments)]
    pub fn write_node(
        region: &Region,
        off: u64,
        table: u32,
        key: u64,
        seq: u64,
        height: usize,
        value: Option<&[u8]>,
        checksums: bool,
    ) {
        let mut h = [0u8; NODE_HEADER as usize];
        debug_assert!(table <= u32::from(u16::MAX), "the manifest holds at most 63 tables");
        h[0..2].copy_from_slice(&(table as u16).to_le_bytes());
        h[2] = height as u8;
        h[3] = if value.is_none() { FLAG_TOMBSTONE } else { 0 };
        h[8..16].copy_from_slice(&key.to_le_bytes());
        h[16..24].copy_from_slice(&seq.to_le_bytes());
        if checksums {
            let c = node_crc(&h, value.unwrap_or(&[]));
            h[NODE_CRC..NODE_CRC + 4].copy_from_slice(&c.to_le_bytes());
        }
        region.write(off, &h);
        region.write(off + NODE_HEADER, &vec![0u8; 8 * height]);
        if let Some(v) = value {
            region.write(off + NODE_HEADER + 8 * height as u64, v);
        }
    }

    fn next_of(&self, region: &Region, at: At, level: usize, overlay: &HashMap<u64, u64>) -> u64 {
        let f = self.field(at, level);
        overlay.get(&f).copied().unwrap_or_else(|| region.read_u64(f))
    }

    /// The last position before `target` at each level (following `overlay` for fields of
    /// reachable nodes that a commit is about to change), and the node the walk met right after
    /// it on level 0 (the first node at or after `target`), from the same load: beside a
    /// committer linking nodes, loading the level-0 pointer again may meet a node linked since,
    /// which sorts between the position and `target`.
    fn walk(
        &self,
        region: &Region,
        tables: &[TableSpec],
        target: (u32, u64, std::cmp::Reverse<u64>),
        overlay: &HashMap<u64, u64>,
    ) -> Result<([At; MAX_HEIGHT], Option<Node>)> {
        let mut preds = [At::Head; MAX_HEIGHT];
        let mut cur = At::Head;
        let mut after = None;
        for level in (0..MAX_HEIGHT).rev() {
            after = None;
            loop {
                let next = self.next_of(region, cur, level, overlay);
                if next == 0 {
                    break;
                }
                let n = self.after(region, tables, cur, next)?;
                if n.order() >= target {
                    after = Some(n);
                    break;
                }
                cur = At::Node(n);
            }
            preds[level] = cur;
        }
        Ok((preds, after))
    }

    /// Plans the links of `nodes` (written, sorted ascending, not yet reachable): writes each
    /// new node's own next pointers, and the new nodes' pointers to each other, directly (they
    /// are unreachable), and returns the stores to reachable fields (the head's, existing
    /// nodes'), which the caller makes after the nodes are persisted.
    pub fn plan_links(
        &self,
        region: &Region,
        tables: &[TableSpec],
        nodes: &[Node],
    ) -> Result<Vec<(u64, u64)>> {
        let first_new = nodes.first().map_or(u64::MAX, |n| n.off);
        let mut overlay: HashMap<u64, u64> = HashMap::new();
        for n in nodes {
            let (preds, _) = self.walk(region, tables, n.order(), &overlay)?;
            for (level, &pred) in preds.iter().enumerate().take(n.height) {
                let next = self.next_of(region, pred, level, &overlay);
                region.write_u64(n.next_field(level), next);
                let f = self.field(pred, level);
                match pred {
                    At::Node(p) if p.off >= first_new => region.write_u64(f, n.off),
                    _ => {
                        overlay.insert(f, n.off);
                    }
                }
            }
        }
        let mut stores: Vec<_> = overlay.into_iter().collect();
        stores.sort_unstable();
        Ok(stores)
    }

    /// Makes node `n` unreachable (recovery's undo of an uncommitted write), flushing each
    /// changed pointer. Idempotent. Returns whether it was linked at any level.
    pub fn unlink(&self, region: &Region, tables: &[TableSpec], n: &Node) -> Result<bool> {
        let none = HashMap::new();
        let mut cur = At::Head;
        let mut was_linked = false;
        for level in (0..MAX_HEIGHT).rev() {
            loop {
                let next = self.next_of(region, cur, level, &none);
                if next == 0 || next == n.off {
                    if next == n.off && level < n.height {
                        let f = self.field(cur, level);
                        region.write_u64(f, region.read_u64(n.next_field(level)));
                        region.flush(f, 8);
                        was_linked = true;
                    }
                    break;
                }
                let m = self.after(region, tables, cur, next)?;
                if m.order() >= n.order() {
                    break;
                }
                cur = At::Node(m);
            }
        }
        Ok(was_linked)
    }

    /// The newest node of `(table, key)`, if any.
    pub fn get(
        &self,
        region: &Region,
        tables: &[TableSpec],
        table: u32,
        key: u64,
    ) -> Result<Option<Node>> {
        match self.seek(region, tables, table, key)? {
            Some(n) if n.table == table && n.key == key => Ok(Some(n)),
            _ => Ok(None),
        }
    }

    /// The first node at or after `(table, key)` (its newest version).
    pub fn seek(
        &self,
        region: &Region,
        tables: &[TableSpec],
        table: u32,
        key: u64,
    ) -> Result<Option<Node>> {
        // The node the walk compared, not a second load of its predecessor's pointer
        // (regression `lsm_reads_beside_commits_of_other_keys`: a commit of a key between the
        // predecessor and `key`, linked between the two loads, hid `key`'s newest version, and a
        // read fell through to an older one in the runs: lost updates).
        let target = (table, key, std::cmp::Reverse(u64::MAX));
        Ok(self.walk(region, tables, target, &HashMap::new())?.1)
    }

    pub fn at(&self, region: &Region, tables: &[TableSpec], off: u64) -> Result<Option<Node>> {
        if off == 0 {
            return Ok(None);
        }
        self.node(region, tables, off).map(Some)
    }

    /// The first node after every version of `n`'s key.
    pub fn next_key(
        &self,
        region: &Region,
        tables: &[TableSpec],
        n: &Node,
    ) -> Result<Option<Node>> {
        let mut cur = *n;
        loop {
            let next = region.read_u64(cur.next_field(0));
            if next == 0 {
                return Ok(None);
            }
            let m = self.after(region, tables, At::Node(cur), next)?;
            if m.table == n.table && m.key == n.key {
                cur = m;
            } else {
                return Ok(Some(m));
            }
        }
    }

    /// The first node of the list.
    pub fn first(&self, region: &Region, tables: &[TableSpec]) -> Result<Option<Node>> {
        let next = region.read_u64(self.base + NODE_HEADER);
        self.at(region, tables, next)
    }
}

fn node_crc(header: &[u8], value: &[u8]) -> u32 {
    let head = storage::crc::crc32c(&header[..NODE_CRC]);
    storage::crc::crc32c_append(storage::crc::crc32c_append(head, &header[NODE_CRC + 4..]), value)
}

/// The DRAM memtable of the traditional engine: the newest version of each key.
#[derive(Default)]
pub(crate) struct DramMem {
    pub map: BTreeMap<(u32, u64), Option<Box<[u8]>>>,
    /// Bytes of rows and keys held (the flush threshold).
    pub bytes: u64,
}

impl DramMem {
    pub fn put(&mut self, table: u32, key: u64, value: Option<&[u8]>) {
        let add = 16 + value.map_or(0, |v| v.len() as u64);
        if let Some(old) = self.map.insert((table, key), value.map(Box::from)) {
            self.bytes -= 16 + old.map_or(0, |v| v.len() as u64);
        }
        self.bytes += add;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};

    /// Regression (issue 37, found by `nvmdb fuzz --engine lsm --seed 42 --case 13`, a hang): a
    /// damaged next pointer back to an earlier node is `Corrupt` for every walk, never a cycle.
    #[test]
    fn a_memtable_pointer_back_to_an_earlier_node_is_corrupt_not_a_hang() {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 1 << 20)).expect("dram");
        let tables = [TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 8 }];
        NvmMem::format(&region, 0);
        let m = NvmMem::new(0, 1 << 20, HEAD_BYTES, true);
        let mut nodes = Vec::new();
        for key in 0..8u64 {
            let off = m.used();
            NvmMem::write_node(&region, off, 0, key, 1, 1, Some(&key.to_le_bytes()), true);
            m.set_used(off + node_bytes(1, 8));
            nodes.push(Node { off, table: 0, key, seq: 1, height: 1, tombstone: false });
        }
        for (field, value) in m.plan_links(&region, &tables, &nodes).expect("links") {
            region.write_u64(field, value);
        }
        assert_eq!(m.get(&region, &tables, 0, 7).expect("a sound list").map(|n| n.key), Some(7));
        // Node 5's next pointer back to node 2: 2, 3, 4, 5, 2, ... without the order check.
        region.write_u64(nodes[5].next_field(0), nodes[2].off);
        let corrupt = |r: Result<Option<Node>>| matches!(r, Err(DbError::Corrupt(_)));
        assert!(corrupt(m.get(&region, &tables, 0, 7)), "seek past the cycle");
        assert!(corrupt(m.next_key(&region, &tables, &nodes[5])), "next key at the cycle");
        let unlinked = m.unlink(&region, &tables, &nodes[7]);
        assert!(matches!(unlinked, Err(DbError::Corrupt(_))), "unlink past the cycle");
    }
}

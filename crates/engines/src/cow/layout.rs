//! Byte layouts of `cow` (documented in `docs/format.md`, "cow"; Arulraj et al. SIGMOD 2015
//! §3.2): B+tree nodes, the meta page (the root of one committed version: the directory of
//! every table's root) and the checked master word that names it. Everything
//! read from the region is validated here: a damaged node or meta page is `DbError::Corrupt`,
//! never a panic or an out-of-range access.

use storage::format::{get_u16, get_u32, get_u64, PageId, PAGE_SIZE};
use storage::{DbError, Result, TableSpec};

/// Node header bytes; entries follow.
pub const HEADER: usize = 32;
/// "CL": a leaf (key + row entries).
pub const KIND_LEAF: u16 = u16::from_le_bytes(*b"CL");
/// "CI": an internal node (key + child page entries).
pub const KIND_INTERNAL: u16 = u16::from_le_bytes(*b"CI");
/// Bytes after a leaf entry's row: the CRC-32C of its key and row ([`entry_crc`]), so a reader
/// checks the one row it returns (format version 4, issue 37) instead of the whole leaf's crc
/// (which costs a page of CRC per read: measured 20-30% of a YCSB read).
pub const ROW_CRC_BYTES: usize = 4;
/// Most entries of a node with layout `pointers` (NVM-CoW): a node is then at most 1,056 bytes
/// (header + 64 x 16), the bytes a path copy writes per level. N-Store's NVM-CoW allocates its
/// nodes through the allocator interface (§2.3, §4.2), not as file pages, so nothing ties a
/// node to a page's 510 entries; a page-sized node of pointers would make an update copy 8 KiB
/// per level, as much as CoW's leaves of rows. (Each node still takes a page of the region.)
pub const POINTER_NODE_ENTRIES: usize = 64;
/// Tallest tree a table may have (2^32 leaves at fan-out 2 is far beyond any region).
pub const MAX_HEIGHT: u32 = 32;

const H_KIND: usize = 0;
const H_LEVEL: usize = 2;
const H_COUNT: usize = 4;
const H_OWNER: usize = 8;
const H_VALUE_BYTES: usize = 12;
const H_VERSION: usize = 16;
const H_CRC: usize = 24;

/// Shape of one table's nodes: what every node read for it must say.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Table id + 1 (0 is never an owner, so a zeroed page fails).
    pub owner: u32,
    pub row_bytes: u32,
    /// Leaves hold tuple pointers (NVM-CoW), not rows.
    pub pointers: bool,
    pub leaf_capacity: usize,
    pub internal_capacity: usize,
}

impl Shape {
    pub fn new(table: u32, row_bytes: u32, node_capacity: u32, pointers: bool) -> Shape {
        let leaf_value = if pointers { 8 } else { row_bytes as usize + ROW_CRC_BYTES };
        let cap = if pointers { POINTER_NODE_ENTRIES } else { PAGE_SIZE };
        let leaf_fit = ((PAGE_SIZE - HEADER) / (8 + leaf_value)).min(cap);
        let internal_fit = ((PAGE_SIZE - HEADER) / 16).min(cap);
        Shape {
            owner: table + 1,
            row_bytes,
            pointers,
            leaf_capacity: leaf_fit.min(node_capacity as usize).max(1),
            internal_capacity: internal_fit.min(node_capacity as usize),
        }
    }

    /// A leaf's value is the row and its checksum (or a tuple pointer); an internal node's a
    /// child page.
    pub fn value_bytes(&self, level: u16) -> usize {
        if level == 0 && !self.pointers {
            self.row_bytes as usize + ROW_CRC_BYTES
        } else {
            8
        }
    }

    pub fn capacity(&self, level: u16) -> usize {
        if level == 0 {
            self.leaf_capacity
        } else {
            self.internal_capacity
        }
    }
}

/// A validated node: its header fields, over the page's bytes.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    pub bytes: &'a [u8],
    pub count: usize,
    pub entry_bytes: usize,
}

impl<'a> Node<'a> {
    /// Validates `bytes` (a whole page) as a node of `shape` at `level` (an empty leaf is legal:
    /// a tree's only node after deletes, and in a writer's own nodes).
    pub fn parse(bytes: &'a [u8], page: PageId, shape: &Shape, level: u16) -> Result<Node<'a>> {
        let bad = |why: String| DbError::Corrupt(format!("cow node at page {page}: {why}"));
        if bytes.len() != PAGE_SIZE {
            return Err(bad(format!("{} bytes, not a page", bytes.len())));
        }
        let kind = get_u16(bytes, H_KIND);
        let want = if level == 0 { KIND_LEAF } else { KIND_INTERNAL };
        if kind != want {
            return Err(bad(format!("kind {kind:#x}, expected {want:#x} at level {level}")));
        }
        let got_level = get_u16(bytes, H_LEVEL);
        if got_level != level {
            return Err(bad(format!("level {got_level}, expected {level}")));
        }
        let owner = get_u32(bytes, H_OWNER);
        if owner != shape.owner {
            return Err(bad(format!("belongs to table {}, not {}", owner.wrapping_sub(1), {
                shape.owner - 1
            })));
        }
        let vb = get_u32(bytes, H_VALUE_BYTES) as usize;
        if vb != shape.value_bytes(level) {
            return Err(bad(format!("value size {vb}, expected {}", shape.value_bytes(level))));
        }
        let count = get_u32(bytes, H_COUNT) as usize;
        if count > shape.capacity(level) || (level > 0 && count == 0) {
            return Err(bad(format!(
                "{count} entries (capacity {} at level {level})",
                shape.capacity(level)
            )));
        }
        Ok(Node { bytes, count, entry_bytes: 8 + vb })
    }

    pub fn key(&self, i: usize) -> u64 {
        get_u64(self.bytes, HEADER + i * self.entry_bytes)
    }

    /// Where entry `i`'s value starts in the page.
    pub fn value_at(&self, i: usize) -> usize {
        HEADER + i * self.entry_bytes + 8
    }

    pub fn value(&self, i: usize) -> &'a [u8] {
        let at = self.value_at(i);
        &self.bytes[at..at + self.entry_bytes - 8]
    }

    /// The row of leaf entry `i` (its value without the checksum).
    pub fn row(&self, i: usize) -> &'a [u8] {
        let v = self.value(i);
        &v[..v.len() - ROW_CRC_BYTES]
    }

    /// Whether leaf entry `i`'s row matches its checksum.
    pub fn row_ok(&self, i: usize) -> bool {
        let v = self.value(i);
        let (row, crc) = v.split_at(v.len() - ROW_CRC_BYTES);
        get_u32(crc, 0) == entry_crc(self.key(i), row)
    }

    /// The version that wrote the node: a node reachable from version `v` was written by `v`
    /// or an older one, so a larger stamp means the page was reused while `v` could reach it
    /// (damage, or a stale master).
    pub fn version(&self) -> u64 {
        get_u64(self.bytes, H_VERSION)
    }

    pub fn child(&self, i: usize) -> PageId {
        get_u64(self.bytes, HEADER + i * self.entry_bytes + 8)
    }

    /// The tuple pointer of leaf entry `i` (layout `pointers`): the same word as a child.
    pub fn tuple(&self, i: usize) -> u64 {
        self.child(i)
    }

    /// Index of `key` among the entries (`Err`: where it would go).
    pub fn search(&self, key: u64) -> std::result::Result<usize, usize> {
        let (mut lo, mut hi) = (0usize, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.key(mid).cmp(&key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The child entry whose subtree holds `key`: the last separator `<= key`, or the first
    /// (entry 0's key is a lower bound only for keys at or above it; smaller keys go there too).
    pub fn child_index(&self, key: u64) -> usize {
        match self.search(key) {
            Ok(i) => i,
            Err(0) => 0,
            Err(i) => i - 1,
        }
    }

    /// Bytes in use (header + entries): what a commit writes and checksums.
    pub fn used_bytes(&self) -> usize {
        HEADER + self.count * self.entry_bytes
    }

    /// Whether the stored checksum matches (checked at open for internal nodes, by the integrity
    /// walk, and by a writer before it changes a copy's shape; not by readers).
    pub fn crc_ok(&self) -> bool {
        get_u32(self.bytes, H_CRC) == node_crc(self.bytes, self.used_bytes())
    }
}

/// A leaf entry's checksum: its key and row (entries move between leaves, so no page in it).
pub fn entry_crc(key: u64, row: &[u8]) -> u32 {
    storage::crc::crc32c_append(storage::crc::crc32c(&key.to_le_bytes()), row)
}

/// A leaf value: `row` and its checksum (0 in a region without row checksums).
pub fn leaf_value(key: u64, row: &[u8], checksums: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(row.len() + ROW_CRC_BYTES);
    v.extend_from_slice(row);
    let crc = if checksums { entry_crc(key, row) } else { 0 };
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

fn node_crc(bytes: &[u8], used: usize) -> u32 {
    let head = storage::crc::crc32c(&bytes[..H_CRC]);
    storage::crc::crc32c_append(head, &bytes[H_CRC + 4..used])
}

/// A node being built or changed by a writer (a whole page buffer).
///
/// A copy of a committed node is not verified when it is copied: its checksum is *derived*
/// from the stored one through each in-place change (a child pointer, a row's bytes and its
/// entry checksum, the version stamp), with CRC-32C's affinity (`storage::heap::
/// row_crc_updated`: the cost is the changed bytes', not the node's). Damage anywhere in the
/// node is then not laundered: the derived checksum is the one the node should have, which
/// damaged bytes still fail (the integrity walk, opening, the next writer that changes the node's
/// shape). A change of shape (an entry inserted or removed, a split) first verifies the copy
/// against the derived checksum (`Corrupt` if it fails), and the node is then checksummed in
/// full when sealed. Before (issue 35), every copy was verified and every seal checksummed the
/// whole node: two passes over each node a write copies, a third of a write's time.
pub struct NodeBuf {
    /// Private: every change goes through a method that keeps `derived` current.
    bytes: Vec<u8>,
    /// The checksum the bytes should have, derived from a committed node's (`None`: a node
    /// built here, or verified; checksummed in full by `seal`).
    derived: Option<u32>,
    /// The committed page the node was copied from (named by a failed verification).
    source: PageId,
}

impl NodeBuf {
    /// An empty node of `shape` at `level`, in `bytes` (a buffer to reuse; its contents are
    /// discarded).
    pub fn new_in(mut bytes: Vec<u8>, shape: &Shape, level: u16) -> NodeBuf {
        bytes.clear();
        bytes.resize(PAGE_SIZE, 0);
        let kind = if level == 0 { KIND_LEAF } else { KIND_INTERNAL };
        bytes[H_KIND..H_KIND + 2].copy_from_slice(&kind.to_le_bytes());
        bytes[H_LEVEL..H_LEVEL + 2].copy_from_slice(&level.to_le_bytes());
        bytes[H_OWNER..H_OWNER + 4].copy_from_slice(&shape.owner.to_le_bytes());
        let vb = shape.value_bytes(level) as u32;
        bytes[H_VALUE_BYTES..H_VALUE_BYTES + 4].copy_from_slice(&vb.to_le_bytes());
        NodeBuf { bytes, derived: None, source: 0 }
    }

    /// A copy, in `bytes` (a buffer to reuse), of `node` read from committed page `page`;
    /// not verified here (see the type's doc).
    pub fn copy_of(mut bytes: Vec<u8>, node: &Node<'_>, page: PageId) -> NodeBuf {
        bytes.clear();
        bytes.extend_from_slice(node.bytes);
        let derived = Some(get_u32(node.bytes, H_CRC));
        NodeBuf { bytes, derived, source: page }
    }

    /// The page buffer, for reuse by a later node.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Verifies a copy against its derived checksum before a change of shape; from then on
    /// `seal` checksums the node in full.
    fn settle(&mut self) -> Result<()> {
        if let Some(crc) = self.derived.take() {
            if node_crc(&self.bytes, self.view().used_bytes()) != crc {
                let page = self.source;
                return Err(DbError::Corrupt(format!(
                    "cow: node at page {page} fails its checksum"
                )));
            }
        }
        Ok(())
    }

    /// Overwrites `new.len()` bytes at `at` (inside the entries in use, or the header below
    /// the checksum field) and keeps a derived checksum current.
    fn overwrite(&mut self, at: usize, new: &[u8]) {
        if let Some(crc) = self.derived {
            // node_crc's message skips the 4-byte checksum field.
            let used = self.view().used_bytes();
            let pos = if at >= H_CRC + 4 { at - 4 } else { at };
            debug_assert!(at + new.len() <= H_CRC || at >= H_CRC + 4);
            let old = &self.bytes[at..at + new.len()];
            self.derived = Some(storage::heap::row_crc_updated(crc, used - 4, pos, old, new));
        }
        self.bytes[at..at + new.len()].copy_from_slice(new);
    }

    pub fn level(&self) -> u16 {
        get_u16(&self.bytes, H_LEVEL)
    }

    pub fn count(&self) -> usize {
        get_u32(&self.bytes, H_COUNT) as usize
    }

    fn entry_bytes(&self) -> usize {
        8 + get_u32(&self.bytes, H_VALUE_BYTES) as usize
    }

    fn set_count(&mut self, n: usize) {
        self.bytes[H_COUNT..H_COUNT + 4].copy_from_slice(&(n as u32).to_le_bytes());
    }

    /// A read view (the buffer was built by this process, so it is valid by construction; the
    /// capacity check is the caller's).
    pub fn view(&self) -> Node<'_> {
        Node { bytes: &self.bytes, count: self.count(), entry_bytes: self.entry_bytes() }
    }

    /// Inserts an entry at `i` of a node below its capacity (the caller checks).
    pub fn insert(&mut self, i: usize, key: u64, value: &[u8]) -> Result<()> {
        self.settle()?;
        let (n, es) = (self.count(), self.entry_bytes());
        let at = HEADER + i * es;
        self.bytes.copy_within(at..HEADER + n * es, at + es);
        self.bytes[at..at + 8].copy_from_slice(&key.to_le_bytes());
        self.bytes[at + 8..at + es].copy_from_slice(value);
        self.set_count(n + 1);
        Ok(())
    }

    /// Inserts an entry at `i` of a full node, splitting it: the lower half of the entries
    /// stays, the upper half goes to `right` (an empty node of the same level). Returns the
    /// first key of `right` (the separator). Works for any capacity >= 1 (a page need not hold
    /// capacity + 1 entries).
    pub fn insert_split(
        &mut self,
        i: usize,
        key: u64,
        value: &[u8],
        right: &mut NodeBuf,
    ) -> Result<u64> {
        self.settle()?;
        right.settle()?;
        let (n, es) = (self.count(), self.entry_bytes());
        let mut all = Vec::with_capacity((n + 1) * es);
        all.extend_from_slice(&self.bytes[HEADER..HEADER + i * es]);
        all.extend_from_slice(&key.to_le_bytes());
        all.extend_from_slice(value);
        all.extend_from_slice(&self.bytes[HEADER + i * es..HEADER + n * es]);
        let keep = (n + 1).div_ceil(2);
        let moved = n + 1 - keep;
        self.bytes[HEADER..HEADER + keep * es].copy_from_slice(&all[..keep * es]);
        self.set_count(keep);
        right.bytes[HEADER..HEADER + moved * es].copy_from_slice(&all[keep * es..]);
        right.set_count(moved);
        Ok(right.view().key(0))
    }

    pub fn remove(&mut self, i: usize) -> Result<()> {
        self.settle()?;
        let (n, es) = (self.count(), self.entry_bytes());
        let at = HEADER + i * es;
        self.bytes.copy_within(at + es..HEADER + n * es, at);
        self.set_count(n - 1);
        Ok(())
    }

    /// Where entry `i`'s value starts.
    fn value_at(&self, i: usize) -> usize {
        HEADER + i * self.entry_bytes() + 8
    }

    /// Writes `bytes` at `offset` of leaf entry `i`'s row, and the row's new checksum, derived
    /// from the stored one, so damage elsewhere in the row still fails it (never laundered).
    pub fn update_row(&mut self, i: usize, offset: usize, bytes: &[u8], checksums: bool) {
        let at = self.value_at(i);
        let row_len = self.entry_bytes() - 8 - ROW_CRC_BYTES;
        if checksums {
            let old_crc = get_u32(&self.bytes, at + row_len);
            let old = &self.bytes[at + offset..at + offset + bytes.len()];
            // The entry's message is its key (8 bytes), then the row.
            let crc = storage::heap::row_crc_updated(old_crc, 8 + row_len, 8 + offset, old, bytes);
            self.overwrite(at + row_len, &crc.to_le_bytes());
        }
        self.overwrite(at + offset, bytes);
    }

    pub fn set_child(&mut self, i: usize, child: PageId) {
        self.overwrite(self.value_at(i), &child.to_le_bytes());
    }

    /// Stamps the version and checksum; returns the bytes to write (header + entries).
    pub fn seal(&mut self, version: u64) -> &[u8] {
        self.overwrite(H_VERSION, &version.to_le_bytes());
        let used = self.view().used_bytes();
        let crc = match self.derived {
            Some(crc) => crc,
            None => node_crc(&self.bytes, used),
        };
        self.bytes[H_CRC..H_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        &self.bytes[..used]
    }
}

// ---------------------------------------------------------------------------------------------
// master record: the one word overwritten in place

/// "NVMDBcw2" at offset 8 of the master page: the cow layout this build writes (layout 2: the
/// master word carries a check). Layout 1 (no magic, a bare page id) is refused, not converted.
pub const MASTER_MAGIC: u64 = u64::from_le_bytes(*b"NVMDBcw2");
/// Low bits of the master word: the meta page id (2^40 pages of 8 KiB is 8 PiB).
pub const MASTER_PAGE_BITS: u32 = 40;
const MASTER_PAGE_MASK: u64 = (1 << MASTER_PAGE_BITS) - 1;
/// Most pages a `cow` region may have (every page id fits the master word).
pub const MAX_PAGES: u64 = 1 << MASTER_PAGE_BITS;

/// The master word naming `meta_page` (0: nothing committed) whose stored crc is `meta_crc`
/// (0 for no meta page): the page id in the low 40 bits, and in the high 24 bits a check over
/// the page id *and* that meta page's crc. It stays one aligned 8-byte store (atomic under
/// every crash policy, so a crash never tears it), and a changed word, or a valid word naming
/// a meta page that is not the one it was written for (a reused page, a lost write of the
/// master over a page since reused), fails the check.
pub fn master_word(meta_page: PageId, meta_crc: u32) -> u64 {
    debug_assert!(meta_page <= MASTER_PAGE_MASK);
    (meta_page & MASTER_PAGE_MASK) | (u64::from(master_check(meta_page, meta_crc)) << 40)
}

/// The meta page a master word names (its check is verified by [`master_matches`]).
pub fn master_page(word: u64) -> PageId {
    word & MASTER_PAGE_MASK
}

/// Whether `word` is the master word for the meta page it names, whose crc is `meta_crc`.
pub fn master_matches(word: u64, meta_crc: u32) -> bool {
    word != 0 && word == master_word(master_page(word), meta_crc)
}

/// Master page bytes 8..24: the layout magic, the tuple layout (0 pages, 1 pointers) and a
/// crc32c of bytes 8..20; written once, at format.
pub fn master_header(pointers: bool) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&MASTER_MAGIC.to_le_bytes());
    h[8..12].copy_from_slice(&u32::from(pointers).to_le_bytes());
    let crc = storage::crc::crc32c(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The tuple layout a master page header says (`true`: pointers), or why it is damaged.
pub fn decode_master_header(h: &[u8]) -> std::result::Result<bool, String> {
    if h.len() < 16 || get_u64(h, 0) != MASTER_MAGIC {
        return Err("bad layout magic".into());
    }
    if get_u32(h, 12) != storage::crc::crc32c(&h[..12]) {
        return Err("master page header fails its checksum".into());
    }
    match get_u32(h, 8) {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(format!("tuple layout {other}")),
    }
}

fn master_check(meta_page: PageId, meta_crc: u32) -> u32 {
    let c = storage::crc::crc32c_append(
        storage::crc::crc32c(&meta_page.to_le_bytes()),
        &meta_crc.to_le_bytes(),
    );
    // Never 0, so that a zeroed master word is never valid (0 is what damage most often leaves).
    (c & 0xFF_FFFF).max(1)
}

// ---------------------------------------------------------------------------------------------
// meta page: one committed version

/// "NVMDBcow" at offset 0 of a meta page.
pub const META_MAGIC: u64 = u64::from_le_bytes(*b"NVMDBcow");
pub(crate) const M_VERSION: usize = 8;
const M_TABLES: usize = 16;
const M_CRC: usize = 20;
const M_ENTRIES: usize = 32;
const ENTRY_BYTES: usize = 96;
/// Tables one meta page holds.
pub const MAX_TABLES: usize = 64;
const _: () = assert!(M_ENTRIES + MAX_TABLES * ENTRY_BYTES <= PAGE_SIZE);
const E_NAME_LEN: usize = 0;
const E_NAME: usize = 1;
const E_ROW_BYTES: usize = 52;
const E_EXPECTED_ROWS: usize = 56;
const E_ROOT: usize = 64;
const E_HEIGHT: usize = 72;
const E_ROWS: usize = 80;

/// One table in a version: its spec, its tree's root page (0: empty) and height, its row count.
#[derive(Clone, Debug, PartialEq)]
pub struct TableRoot {
    pub spec: TableSpec,
    pub root: PageId,
    pub height: u32,
    pub rows: u64,
}

/// Encodes a version's meta page; returns the bytes in use.
pub fn encode_meta(version: u64, tables: &[TableRoot]) -> Vec<u8> {
    let mut b = vec![0u8; M_ENTRIES + tables.len() * ENTRY_BYTES];
    b[0..8].copy_from_slice(&META_MAGIC.to_le_bytes());
    b[M_VERSION..M_VERSION + 8].copy_from_slice(&version.to_le_bytes());
    b[M_TABLES..M_TABLES + 4].copy_from_slice(&(tables.len() as u32).to_le_bytes());
    for (i, t) in tables.iter().enumerate() {
        let e = M_ENTRIES + i * ENTRY_BYTES;
        let name = t.spec.name.as_bytes();
        b[e + E_NAME_LEN] = name.len() as u8;
        b[e + E_NAME..e + E_NAME + name.len()].copy_from_slice(name);
        b[e + E_ROW_BYTES..e + E_ROW_BYTES + 4].copy_from_slice(&t.spec.row_bytes.to_le_bytes());
        let expected = t.spec.expected_rows.to_le_bytes();
        b[e + E_EXPECTED_ROWS..e + E_EXPECTED_ROWS + 8].copy_from_slice(&expected);
        b[e + E_ROOT..e + E_ROOT + 8].copy_from_slice(&t.root.to_le_bytes());
        b[e + E_HEIGHT..e + E_HEIGHT + 4].copy_from_slice(&t.height.to_le_bytes());
        b[e + E_ROWS..e + E_ROWS + 8].copy_from_slice(&t.rows.to_le_bytes());
    }
    let crc = meta_crc(&b);
    b[M_CRC..M_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The crc a meta page (as encoded or read) stores: what the master word is bound to.
pub fn stored_meta_crc(b: &[u8]) -> u32 {
    get_u32(b, M_CRC)
}

fn meta_crc(b: &[u8]) -> u32 {
    storage::crc::crc32c_append(storage::crc::crc32c(&b[..M_CRC]), &b[M_CRC + 4..])
}

/// Decodes and validates a meta page (a whole page); `is_data_page` checks root page ids.
pub fn decode_meta(
    page: &[u8],
    at: PageId,
    is_data_page: impl Fn(PageId) -> bool,
) -> Result<(u64, Vec<TableRoot>)> {
    let bad = |why: String| DbError::Corrupt(format!("cow meta page {at}: {why}"));
    if page.len() < M_ENTRIES || get_u64(page, 0) != META_MAGIC {
        return Err(bad(
            "bad magic (the master record names a page that is not a meta page)".into()
        ));
    }
    let n = get_u32(page, M_TABLES) as usize;
    if n > MAX_TABLES {
        return Err(bad(format!("{n} tables, at most {MAX_TABLES}")));
    }
    let used = M_ENTRIES + n * ENTRY_BYTES;
    if get_u32(page, M_CRC) != meta_crc(&page[..used]) {
        return Err(bad("checksum mismatch".into()));
    }
    let mut tables = Vec::with_capacity(n);
    for i in 0..n {
        let e = M_ENTRIES + i * ENTRY_BYTES;
        let len = page[e + E_NAME_LEN] as usize;
        if len == 0 || len > storage::engine::MAX_TABLE_NAME {
            return Err(bad(format!("table {i}: name length {len}")));
        }
        let name = std::str::from_utf8(&page[e + E_NAME..e + E_NAME + len])
            .map_err(|_| bad(format!("table {i}: name is not UTF-8")))?;
        let spec = TableSpec {
            name: name.to_string(),
            row_bytes: get_u32(page, e + E_ROW_BYTES),
            expected_rows: get_u64(page, e + E_EXPECTED_ROWS),
        };
        storage::engine::check_spec(&spec).map_err(|err| bad(format!("table {i}: {err}")))?;
        let (root, height) = (get_u64(page, e + E_ROOT), get_u32(page, e + E_HEIGHT));
        let root_ok = if root == 0 { height == 0 } else { is_data_page(root) };
        if !root_ok || height > MAX_HEIGHT {
            return Err(bad(format!("table {name}: root page {root}, height {height}")));
        }
        tables.push(TableRoot { spec, root, height, rows: get_u64(page, e + E_ROWS) });
    }
    Ok((get_u64(page, M_VERSION), tables))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_rejects_damage() {
        let t = TableRoot {
            spec: TableSpec { name: "usertable".into(), row_bytes: 1000, expected_rows: 7 },
            root: 40,
            height: 2,
            rows: 99,
        };
        let mut page = encode_meta(12, std::slice::from_ref(&t));
        page.resize(PAGE_SIZE, 0);
        let (v, got) = decode_meta(&page, 5, |p| p >= 10).expect("valid");
        assert_eq!((v, got), (12, vec![t]));
        page[M_ENTRIES + E_ROWS] ^= 1;
        assert!(matches!(decode_meta(&page, 5, |_| true), Err(DbError::Corrupt(_))));
    }

    /// The master word's check catches every one- and two-bit change of the word, and binds
    /// it to its meta page's crc (issue 37).
    #[test]
    fn master_word_detects_changed_bits_and_another_meta_page() {
        for (page, crc) in [(0, 0), (9, 0xDEAD_BEEF), (MAX_PAGES - 1, 1), (1 << 20, 7)] {
            let word = master_word(page, crc);
            assert!(master_matches(word, crc) && master_page(word) == page);
            assert!(!master_matches(word, crc ^ 1), "bound to the meta page's crc");
            for a in 0..64 {
                assert!(!master_matches(word ^ (1 << a), crc), "bit {a} of {word:#x}");
                for b in a + 1..64 {
                    let changed = word ^ (1 << a) ^ (1 << b);
                    assert!(!master_matches(changed, crc), "bits {a}, {b} of {word:#x}");
                }
            }
        }
        assert!(!master_matches(0, 0), "a zero word is never valid");
    }

    /// A leaf of `rows` 100-byte rows (key i * 10), and an internal node of `rows` children,
    /// sealed by version 1.
    fn sealed(rows: u64) -> (Shape, Vec<u8>, Shape, Vec<u8>) {
        let leaf_shape = Shape::new(0, 100, 32, false);
        let mut leaf = NodeBuf::new_in(Vec::new(), &leaf_shape, 0);
        let inner_shape = Shape::new(0, 100, 32, false);
        let mut inner = NodeBuf::new_in(Vec::new(), &inner_shape, 1);
        for k in 0..rows {
            let row: Vec<u8> = (0..100).map(|b| (b as u64 * 7 + k) as u8).collect();
            leaf.insert(k as usize, k * 10, &leaf_value(k * 10, &row, true)).unwrap();
            inner.insert(k as usize, k * 10, &(1000 + k).to_le_bytes()).unwrap();
        }
        let (leaf, inner) = (leaf.seal(1).to_vec(), inner.seal(1).to_vec());
        let pad = |mut b: Vec<u8>| {
            b.resize(PAGE_SIZE, 0);
            b
        };
        (leaf_shape, pad(leaf), inner_shape, pad(inner))
    }

    #[test]
    fn a_copys_derived_checksum_is_the_checksum_of_its_bytes() {
        let (ls, leaf, is, inner) = sealed(9);
        let l = Node::parse(&leaf, 5, &ls, 0).unwrap();
        let mut copy = NodeBuf::copy_of(Vec::new(), &l, 5);
        copy.update_row(3, 17, &[0xAB; 31], true);
        copy.update_row(8, 90, &[1; 10], true);
        copy.update_row(3, 0, &[2; 5], true);
        copy.seal(2);
        let v = Node::parse(&copy.bytes, 6, &ls, 0).unwrap();
        assert!(v.crc_ok(), "derived through three row updates and a new version stamp");
        assert!((0..9).all(|i| v.row_ok(i)), "each entry's checksum derived too");
        assert_eq!(&v.row(3)[..5], &[2; 5]);
        let n = Node::parse(&inner, 7, &is, 1).unwrap();
        let mut copy = NodeBuf::copy_of(Vec::new(), &n, 7);
        copy.set_child(0, 77);
        copy.set_child(8, 88);
        copy.seal(3);
        let v = Node::parse(&copy.bytes, 8, &is, 1).unwrap();
        assert!(v.crc_ok(), "derived through two child pointers");
        assert_eq!((v.child(0), v.child(8)), (77, 88));
    }

    #[test]
    fn a_copy_of_a_damaged_node_is_not_laundered() {
        let (ls, mut leaf, is, mut inner) = sealed(9);
        // A bit of row 5 (not the one the copy changes), and a separator key of the inner node.
        leaf[HEADER + 5 * (8 + 100 + ROW_CRC_BYTES) + 8 + 40] ^= 4;
        inner[HEADER + 4 * 16] ^= 1;
        let l = Node::parse(&leaf, 5, &ls, 0).unwrap();
        let mut copy = NodeBuf::copy_of(Vec::new(), &l, 5);
        copy.update_row(2, 0, &[9; 8], true);
        copy.seal(2);
        let v = Node::parse(&copy.bytes, 6, &ls, 0).unwrap();
        assert!(!v.crc_ok(), "the new version's node still fails its checksum");
        assert!(!v.row_ok(5) && v.row_ok(2));
        let n = Node::parse(&inner, 7, &is, 1).unwrap();
        let mut copy = NodeBuf::copy_of(Vec::new(), &n, 7);
        copy.set_child(1, 42);
        let err = copy.insert(3, 25, &43u64.to_le_bytes()).unwrap_err();
        assert!(err.to_string().contains("page 7 fails its checksum"), "{err}");
        let mut copy = NodeBuf::copy_of(Vec::new(), &n, 7);
        copy.set_child(1, 42);
        copy.seal(2);
        assert!(!Node::parse(&copy.bytes, 8, &is, 1).unwrap().crc_ok());
    }

    #[test]
    fn nodes_split_and_validate() {
        let shape = Shape::new(0, 16, 4, false);
        let mut n = NodeBuf::new_in(Vec::new(), &shape, 0);
        for k in 0..4u64 {
            n.insert(k as usize, k * 10, &leaf_value(k * 10, &[k as u8; 16], true)).unwrap();
        }
        let mut right = NodeBuf::new_in(Vec::new(), &shape, 0);
        let sep = n.insert_split(4, 40, &leaf_value(40, &[4; 16], true), &mut right).unwrap();
        assert_eq!(sep, 30);
        assert_eq!((n.count(), right.count()), (3, 2));
        n.update_row(1, 3, &[7; 2], true);
        n.seal(1);
        let v = Node::parse(&n.bytes, 9, &shape, 0).expect("valid");
        assert!(v.crc_ok());
        assert_eq!(v.search(20), Ok(2));
        assert!((0..3).all(|i| v.row_ok(i)), "rows verify after a split and an update");
        assert_eq!(v.row(1), &[1, 1, 1, 7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
        let mut damaged = n.bytes.clone();
        damaged[HEADER + (8 + 16 + ROW_CRC_BYTES) + 8 + 5] ^= 1;
        let d = Node::parse(&damaged, 9, &shape, 0).expect("still parses");
        assert!(!d.row_ok(1) && d.row_ok(0) && d.row_ok(2), "only the changed row fails");
        assert!(Node::parse(&n.bytes, 9, &shape, 1).is_err(), "level checked");
        assert!(
            Node::parse(&n.bytes, 9, &Shape::new(1, 16, 4, false), 0).is_err(),
            "owner checked"
        );
        assert!(Node::parse(&[0u8; PAGE_SIZE], 9, &shape, 0).is_err(), "zero page rejected");
    }
}

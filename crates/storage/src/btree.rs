//! B+tree over the page store: unique `u64` keys to `u64` values, one tree per table index.
//!
//! Concurrency: latch coupling ("crabbing", Bayer & Schkolnick). Readers descend with shared
//! latches, releasing the parent once the child is latched; writers descend with exclusive
//! latches and release every ancestor (and the root-pointer latch) as soon as a node is *safe*:
//! it cannot split (insert: a free slot) or underflow (delete: above the minimum). Leaves are
//! chained left to right and scans couple along the chain; a merge always pulls the right node
//! into the left one and latches siblings left to right, so every latch order is top-down then
//! left-to-right and no deadlock is possible.
//!
//! Crash atomicity: every modification runs inside the caller's [`PageWriter`], a system
//! transaction (see `systxn`), so a split or merge is all-or-nothing across crashes. The
//! modification is completed (or rolled back) *before* its latches are released: physical undo
//! is only safe while nobody else can have changed the pages since.
//!
//! Node layout (`docs/format.md`): 32-byte header `[u16 kind][u16 count][u16 level][2 pad][u64
//! right sibling][u64 leftmost child][u32 owner][4 pad]`, then `count` entries of `[u64 key][u64
//! value]`. In an internal node entry *i* holds the smallest key of child *i + 1*; the leftmost
//! child holds the keys below entry 0. Leaves are level 0; `owner` is the tree's owner id (the
//! table id + 1).
//!
//! Damage: every node is validated where it is read (page id inside the data pages, kind,
//! count within the capacity, owner, and a child exactly one level below its parent), and a
//! scan's walk along the leaf chain must see strictly ascending keys and at most as many leaves
//! as the region has pages. A damaged node is `DbError::Corrupt` naming the tree and page,
//! never an out-of-bounds access, an endless loop, or a write over another structure.
//!
//! Length: the code is about 858 lines, under the workspace's ~900; the other 106 are its unit
//! tests.

use crate::engine::{DbError, Result};
use crate::format::{get_u16, get_u32, get_u64, PageId, PAGE_SIZE};
use crate::pages::{ExclusiveLatch, PageClass, PageStore, PageWriter};
use parking_lot::{RwLock, RwLockWriteGuard};

pub const NODE_HEADER: usize = 32;
pub const ENTRY: usize = 16;
pub const MAX_NODE_ENTRIES: usize = (PAGE_SIZE - NODE_HEADER) / ENTRY;
const LEAF: u16 = 1;
const INTERNAL: u16 = 2;
/// Deepest tree a walk accepts (a 2^64-key tree with 4-entry nodes is 32 levels deep).
const MAX_LEVEL: u16 = 64;

#[inline]
fn kind(n: &[u8]) -> u16 {
    get_u16(n, 0)
}
#[inline]
fn count(n: &[u8]) -> usize {
    get_u16(n, 2) as usize
}
#[inline]
fn level(n: &[u8]) -> u16 {
    get_u16(n, 4)
}
#[inline]
fn owner(n: &[u8]) -> u32 {
    get_u32(n, 24)
}
#[inline]
fn sibling(n: &[u8]) -> PageId {
    get_u64(n, 8)
}
#[inline]
fn leftmost(n: &[u8]) -> PageId {
    get_u64(n, 16)
}
#[inline]
fn key_at(n: &[u8], i: usize) -> u64 {
    get_u64(n, NODE_HEADER + i * ENTRY)
}
#[inline]
fn val_at(n: &[u8], i: usize) -> u64 {
    get_u64(n, NODE_HEADER + i * ENTRY + 8)
}

/// Index of the first key >= `key` (Ok if equal).
fn search(n: &[u8], key: u64) -> std::result::Result<usize, usize> {
    search_in(n, count(n), key)
}

/// [`search`] over the first `count` entries (a count read once, for optimistic readers).
///
/// Interpolation first, then binary search: a node's keys are sorted and, for hashed (YCSB)
/// and dense (TPC-B, TPC-C) keys alike, close to evenly spread, so the key's position estimated
/// from the node's first and last keys lands within a few entries of it (see
/// [`search_estimated`]).
fn search_in(n: &[u8], count: usize, key: u64) -> std::result::Result<usize, usize> {
    if count <= 8 {
        return binary_search(n, 0, count, key);
    }
    let (first, last) = (key_at(n, 0), key_at(n, count - 1));
    if key <= first {
        return if key == first { Ok(0) } else { Err(0) };
    }
    if key >= last {
        return if key == last { Ok(count - 1) } else { Err(count) };
    }
    search_estimated(n, key, (1, count - 1), (0.0, first), ((count - 1) as f64, last))
}

/// [`search_in`] of a node whose keys its parent says lie in `[low, high)` (the separators
/// around the child pointer followed): the fences stand in for the node's first and last keys
/// in the first estimate, which saves reading the last key's line, a dependent cache miss.
/// Fences are only estimates: a torn read may give wrong ones, and the answer stays exact.
fn search_fenced(
    n: &[u8],
    count: usize,
    key: u64,
    fences: (Option<u64>, Option<u64>),
) -> std::result::Result<usize, usize> {
    match fences {
        (Some(low), Some(high)) if count > 8 && low <= key && key < high => {
            search_estimated(n, key, (0, count), (-1.0, low), (count as f64, high))
        }
        _ => search_in(n, count, key),
    }
}

/// The search of `[lo, hi)` (which holds the answer: the first index whose key is `>= key`)
/// by estimates: the key's position interpolated between two points `(index, key)` known or
/// assumed to bracket it, twice, each probe narrowing `[lo, hi)` and becoming a bracket; then a
/// gallop from the last probe towards the answer (steps 1, 2, 4, ...) and a binary search of
/// the bracket left. About 3 of a full node's 128 lines are read where a binary search from
/// the start reads 7-8, and each is a dependent cache miss (measured: `BTree::get` was 37% of a
/// read-heavy YCSB worker's time). Only probes narrow `[lo, hi)`, so the answer is a binary
/// search's for any sorted keys, whatever the estimates; unsorted bytes (a torn read of an
/// optimistic reader, which validates afterwards, or damage) give some index `<= hi`, never a
/// panic or a loop.
fn search_estimated(
    n: &[u8],
    key: u64,
    (mut lo, mut hi): (usize, usize),
    (mut ia, mut ka): (f64, u64),
    (mut ib, mut kb): (f64, u64),
) -> std::result::Result<usize, usize> {
    let mut last_probe = None;
    for probe in 0..2 {
        if hi - lo <= 8 || kb <= ka || key < ka || key >= kb {
            break;
        }
        let at = ia + (ib - ia) * ((key - ka) as f64 / (kb - ka) as f64);
        // `as` saturates (NaN to 0); the clamp keeps the probe inside `[lo, hi)`.
        let pos = (at as usize).clamp(lo, hi - 1);
        if probe == 0 {
            prefetch_around(n, pos, (lo, hi));
        }
        let k = key_at(n, pos);
        if k == key {
            return Ok(pos);
        }
        if k < key {
            (lo, ia, ka) = (pos + 1, pos as f64, k);
        } else {
            (hi, ib, kb) = (pos, pos as f64, k);
        }
        last_probe = Some((pos, k < key));
    }
    if let Some((pos, below)) = last_probe {
        let mut step = 1;
        while hi - lo > 4 {
            if below {
                let p = pos + step;
                if p >= hi {
                    break;
                }
                match key_at(n, p) {
                    k if k == key => return Ok(p),
                    k if k < key => lo = p + 1,
                    _ => {
                        hi = p;
                        break;
                    }
                }
            } else {
                let Some(p) = pos.checked_sub(step).filter(|&p| p >= lo) else { break };
                match key_at(n, p) {
                    k if k == key => return Ok(p),
                    k if k > key => hi = p,
                    _ => {
                        lo = p + 1;
                        break;
                    }
                }
            }
            step *= 2;
        }
    }
    binary_search(n, lo, hi, key)
}

/// Asks the CPU at once for the lines within `sqrt(n) / 2` entries of [`search_estimated`]'s
/// first estimate `pos` in `[lo, hi)` (`n` entries): for keys spread uniformly, as YCSB's hashed
/// keys are, the estimate's error is about that many entries, so the second probe and the
/// gallop usually land in lines already on their way, and their misses become one overlapped
/// batch instead of two or three in a row (one thread, YCSB read-heavy, 5 interleaved rounds
/// with `inplace`'s search first: median 628k -> 698k TPS). A prefetch changes nothing, so a
/// torn or wrong estimate costs only bandwidth.
#[inline]
fn prefetch_around(n: &[u8], pos: usize, (lo, hi): (usize, usize)) {
    let reach = ((hi - lo).isqrt() / 2).clamp(4, 32);
    let first = NODE_HEADER + pos.saturating_sub(reach).max(lo) * ENTRY;
    let end = (NODE_HEADER + (pos + reach).min(hi - 1) * ENTRY + 8).min(n.len());
    let mut line = first - first % 64;
    while line < end {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `line < end <= n.len()`: the address is inside the node; a prefetch never
        // faults nor changes memory.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(n.as_ptr().add(line).cast());
        }
        line += 64;
    }
}

/// Binary search of entries `[lo, hi)`.
fn binary_search(
    n: &[u8],
    mut lo: usize,
    mut hi: usize,
    key: u64,
) -> std::result::Result<usize, usize> {
    while lo < hi {
        let mid = (lo + hi) / 2;
        let k = key_at(n, mid);
        if k == key {
            return Ok(mid);
        }
        if k < key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Err(lo)
}

/// Child slot for `key` in an internal node: 0 = leftmost, i > 0 = value of entry i - 1.
fn child_slot(n: &[u8], key: u64) -> usize {
    child_slot_in(n, count(n), key, (None, None))
}

/// [`child_slot`] over the first `count` entries, with the node's fences ([`search_fenced`]).
fn child_slot_in(n: &[u8], count: usize, key: u64, fences: (Option<u64>, Option<u64>)) -> usize {
    match search_fenced(n, count, key, fences) {
        Ok(i) => i + 1,
        Err(i) => i,
    }
}

fn child(n: &[u8], slot: usize) -> PageId {
    if slot == 0 {
        leftmost(n)
    } else {
        val_at(n, slot - 1)
    }
}

fn entries(n: &[u8]) -> Vec<(u64, u64)> {
    (0..count(n)).map(|i| (key_at(n, i), val_at(n, i))).collect()
}

/// Identity of a node: kind, level and owner (the header fields besides count and links).
#[derive(Clone, Copy)]
struct NodeId {
    kind: u16,
    level: u16,
    owner: u32,
}

impl NodeId {
    fn of(n: &[u8]) -> NodeId {
        NodeId { kind: kind(n), level: level(n), owner: owner(n) }
    }
}

fn header(id: NodeId, count: usize, sibling: PageId, leftmost: PageId) -> [u8; NODE_HEADER] {
    let mut h = [0u8; NODE_HEADER];
    h[0..2].copy_from_slice(&id.kind.to_le_bytes());
    h[2..4].copy_from_slice(&(count as u16).to_le_bytes());
    h[4..6].copy_from_slice(&id.level.to_le_bytes());
    h[8..16].copy_from_slice(&sibling.to_le_bytes());
    h[16..24].copy_from_slice(&leftmost.to_le_bytes());
    h[24..28].copy_from_slice(&id.owner.to_le_bytes());
    h
}

fn encode_entries(es: &[(u64, u64)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(es.len() * ENTRY);
    for (k, v) in es {
        b.extend_from_slice(&k.to_le_bytes());
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// Lines an operation reads in a node (binary search), for the read-latency model.
fn search_lines(n: &[u8]) -> u64 {
    search_lines_of(count(n))
}

fn search_lines_of(count: usize) -> u64 {
    (usize::BITS - count.leading_zeros()) as u64 + 1
}

/// Tests run a writer here, between reading a child pointer and validating its parent.
/// (`level`: the level of the node whose child pointer was read.)
#[cfg(test)]
fn interfere(level: u16) {
    if level == 1 {
        if let Some(f) = tests::INTERFERE.with(|h| h.borrow_mut().take()) {
            f();
        }
    }
}

#[cfg(not(test))]
#[inline(always)]
fn interfere(_level: u16) {}

/// Optimistic descents a point lookup tries before it takes latches.
const OPTIMISTIC_TRIES: usize = 64;

/// What one optimistic descent found.
enum Optimistic {
    Found(Option<u64>),
    /// A writer interfered: try again.
    Retry,
    /// Something reads as damaged in a stable state (or cannot be read optimistically): the
    /// latched walk decides and reports it.
    Latched,
}

/// Writes a complete node (header and entries) with one write.
fn write_node(
    w: &mut dyn PageWriter,
    page: PageId,
    id: NodeId,
    es: &[(u64, u64)],
    sibling: PageId,
    leftmost: PageId,
) -> Result<()> {
    let mut b = header(id, es.len(), sibling, leftmost).to_vec();
    b.extend_from_slice(&encode_entries(es));
    w.write(page, &[(0, &b)])
}

/// Charges the read model for the entries a rewrite from entry `from` shifts (`bytes` of them);
/// the search already counted the header and the line it ended on.
fn touch_shifted(w: &mut dyn PageWriter, page: PageId, from: usize, bytes: usize) {
    let shifted = pmem::line_span((NODE_HEADER + from * ENTRY) as u64, bytes as u64).count;
    w.store().touch_more(PageClass::Index, page, shifted.saturating_sub(1));
}

/// Rewrites entries `from..` of a node whose new entry list is `es`, plus its header.
fn rewrite_from(
    w: &mut dyn PageWriter,
    page: PageId,
    n: &[u8],
    es: &[(u64, u64)],
    from: usize,
) -> Result<()> {
    let h = header(NodeId::of(n), es.len(), sibling(n), leftmost(n));
    let tail = encode_entries(&es[from.min(es.len())..]);
    touch_shifted(w, page, from, tail.len());
    if tail.is_empty() {
        w.write(page, &[(0, &h)])
    } else {
        w.write(page, &[(0, &h), (NODE_HEADER + from * ENTRY, &tail)])
    }
}

/// Where a tree's root page id lives (a u64 in some page, e.g. the catalog entry).
#[derive(Clone, Copy, Debug)]
pub struct RootRef {
    pub page: PageId,
    pub offset: usize,
}

/// A B+tree handle. The root pointer is protected by `root_latch`.
pub struct BTree<'a> {
    store: &'a PageStore,
    root: RootRef,
    root_latch: &'a RwLock<()>,
    capacity: usize,
    /// Stored in every node; a node of another tree reached through a damaged pointer fails.
    owner: u32,
}

/// What a structural check found.
#[derive(Debug, Default)]
pub struct TreeCheck {
    pub entries: Vec<(u64, u64)>,
    pub pages: Vec<PageId>,
    pub depth: usize,
}

struct Held<'a> {
    page: PageId,
    slot_in_parent: usize,
    _g: ExclusiveLatch<'a>,
}

/// The latches a modifying operation holds until it ends (see `BTree::finish`).
#[derive(Default)]
struct Latches<'a> {
    root: Option<RwLockWriteGuard<'a, ()>>,
    path: Vec<Held<'a>>,
    siblings: Vec<ExclusiveLatch<'a>>,
    /// The store group of an insert into a leaf with room or a remove that merges nothing
    /// ([`pmem::Region::store_group`]): its stores (the system undo record, the leaf, the
    /// log's free mark) go only to the worker's own log and the latched leaf, and it closes
    /// before the latches are released. Never around a split or a merge: they allocate and
    /// free pages, stores to the bitmap other workers write too.
    group: Option<pmem::StoreGroup<'a>>,
}

impl<'a> BTree<'a> {
    /// `owner`: a non-zero id stored in every node of this tree (tables use their id + 1).
    pub fn new(
        store: &'a PageStore,
        root: RootRef,
        root_latch: &'a RwLock<()>,
        capacity: usize,
        owner: u32,
    ) -> BTree<'a> {
        assert!((4..=MAX_NODE_ENTRIES).contains(&capacity));
        BTree { store, root, root_latch, capacity, owner }
    }

    /// Allocates an empty root leaf; the caller stores its page id at the root reference.
    pub fn create(w: &mut dyn PageWriter, owner: u32) -> Result<PageId> {
        let page = w.alloc_page()?;
        write_node(w, page, NodeId { kind: LEAF, level: 0, owner }, &[], 0, 0)?;
        Ok(page)
    }

    fn corrupt(&self, page: PageId, what: impl std::fmt::Display) -> DbError {
        DbError::Corrupt(format!("B+tree {} node {page}: {what}", self.owner.wrapping_sub(1)))
    }

    /// A node's bytes after validating what addresses anything: the page id, kind, count,
    /// owner and level (`expect_level`: the level the parent implies).
    fn node(&self, page: PageId, expect_level: Option<u16>) -> Result<&'a [u8]> {
        if !self.store.is_data_page(page) {
            return Err(self.corrupt(page, "pointer outside the data pages"));
        }
        let n = self.store.page(page);
        let (k, c, l) = (kind(n), count(n), level(n));
        if !matches!((k, l), (LEAF, 0) | (INTERNAL, 1..=MAX_LEVEL)) {
            return Err(self.corrupt(page, format_args!("kind {k} at level {l}")));
        }
        if c > self.capacity {
            return Err(self.corrupt(page, format_args!("{c} entries, capacity {}", self.capacity)));
        }
        if owner(n) != self.owner {
            return Err(self.corrupt(page, format_args!("belongs to tree {}", owner(n))));
        }
        if expect_level.is_some_and(|e| e != l) {
            return Err(self.corrupt(
                page,
                format_args!("level {l}, its parent implies {e:?}", e = expect_level),
            ));
        }
        Ok(n)
    }

    fn root_page(&self) -> PageId {
        self.store.touch(PageClass::Other, self.root.page, 1);
        self.root_pointer()
    }

    /// The root page id, read without counting an access (a re-read by the same operation).
    fn root_pointer(&self) -> PageId {
        get_u64(self.store.page(self.root.page), self.root.offset)
    }

    /// Level a child of `n` must have.
    fn below(n: &[u8]) -> Option<u16> {
        Some(level(n).wrapping_sub(1))
    }

    fn min_entries(&self) -> usize {
        (self.capacity / 4).max(1)
    }

    /// Point lookup. Optimistic first (no latch, nothing shared written: see
    /// [`BTree::get_optimistic`]); under persistent interference, or where a node reads as
    /// damaged in a stable state, the latched walk decides (and reports the damage).
    pub fn get(&self, key: u64) -> Result<Option<u64>> {
        for _ in 0..OPTIMISTIC_TRIES {
            match self.get_optimistic(key) {
                Optimistic::Found(v) => return Ok(v),
                Optimistic::Retry => std::hint::spin_loop(),
                Optimistic::Latched => break,
            }
        }
        self.get_latched(key)
    }

    /// One optimistic descent (optimistic lock coupling, Leis et al. DaMoN 2016 §3): each node's
    /// version is read before and validated after its bytes are used, and a child's version is
    /// read before its parent is validated, so the child was the parent's child at that moment
    /// (a page is freed or reused only under its exclusive latch, which changes its version).
    /// The root pointer is read again after the root's version: it changes only while the old
    /// root is latched exclusively. Bytes read under a concurrent writer may be torn: each value
    /// is bounds-checked before it is used, and a value that fails the check is damage only if
    /// the page validates.
    fn get_optimistic(&self, key: u64) -> Optimistic {
        use Optimistic::{Latched, Retry};
        let store = self.store;
        let mut page = self.root_page();
        if !store.is_data_page(page) {
            return Latched;
        }
        let Some(mut v) = store.read_version(page) else { return Retry };
        if self.root_pointer() != page {
            return Retry;
        }
        let mut expect = None;
        // The key range `[low, high)` the parent's separators give the node (estimates only).
        let mut fences = (None, None);
        loop {
            let n = store.page(page);
            // One read of the count: a concurrent writer may change the stored one.
            let (k, c, l) = (kind(n), count(n), level(n));
            let shape_ok = matches!((k, l), (LEAF, 0) | (INTERNAL, 1..=MAX_LEVEL))
                && c <= self.capacity
                && owner(n) == self.owner
                && expect.is_none_or(|e| e == l);
            if !shape_ok {
                return if store.validate(page, v) { Latched } else { Retry };
            }
            if k == LEAF {
                store.touch(PageClass::Index, page, search_lines_of(c));
                let found = search_fenced(n, c, key, fences).ok().map(|i| val_at(n, i));
                return if store.validate(page, v) { Optimistic::Found(found) } else { Retry };
            }
            store.touch(PageClass::Index, page, search_lines_of(c));
            let slot = child_slot_in(n, c, key, fences);
            // The separators around the child: lines the search just read.
            fences = (
                if slot > 0 { Some(key_at(n, slot - 1)) } else { fences.0 },
                if slot < c { Some(key_at(n, slot)) } else { fences.1 },
            );
            let child = child(n, slot);
            interfere(l);
            if !store.is_data_page(child) || child == page {
                return if store.validate(page, v) { Latched } else { Retry };
            }
            let Some(cv) = store.read_version(child) else { return Retry };
            if !store.validate(page, v) {
                return Retry;
            }
            expect = Some(l - 1);
            (page, v) = (child, cv);
        }
    }

    /// Point lookup under shared latches (latch coupling).
    fn get_latched(&self, key: u64) -> Result<Option<u64>> {
        let mut found = None;
        self.scan(key, key, &mut |_, v| {
            found = Some(v);
            Ok(false)
        })?;
        Ok(found)
    }

    /// Visits entries with `low <= key <= high` in order while `visit` returns `Ok(true)`. The
    /// callback runs under the leaf's shared latch (it may take no-wait key locks).
    pub fn scan(
        &self,
        low: u64,
        high: u64,
        visit: &mut dyn FnMut(u64, u64) -> Result<bool>,
    ) -> Result<()> {
        if low > high {
            return Ok(());
        }
        let store = self.store;
        let root_guard = self.root_latch.read();
        let mut page = self.root_page();
        if !store.is_data_page(page) {
            return Err(self.corrupt(page, "root pointer outside the data pages"));
        }
        let mut _guard = store.latch_shared(page);
        drop(root_guard);
        let mut n = self.node(page, None)?;
        while kind(n) != LEAF {
            store.touch(PageClass::Index, page, search_lines(n));
            let c = child(n, child_slot(n, low));
            if !store.is_data_page(c) || c == page {
                return Err(self.corrupt(page, format_args!("bad child pointer {c}")));
            }
            let g = store.latch_shared(c);
            let child = self.node(c, Self::below(n))?;
            _guard = g;
            (page, n) = (c, child);
        }
        store.touch(PageClass::Index, page, search_lines(n));
        let mut pos = match search(n, low) {
            Ok(i) | Err(i) => i,
        };
        // Keys along the chain ascend strictly; that (with the hop bound) ends any walk over a
        // damaged sibling link.
        let mut last: Option<u64> = None;
        let mut hops = 0u64;
        loop {
            while pos < count(n) {
                let k = key_at(n, pos);
                if last.is_some_and(|l| k <= l) {
                    return Err(self.corrupt(page, "keys out of order along the leaf chain"));
                }
                last = Some(k);
                if k > high || !visit(k, val_at(n, pos))? {
                    return Ok(());
                }
                pos += 1;
            }
            if count(n) > 0 {
                last = Some(key_at(n, count(n) - 1));
            }
            let next = sibling(n);
            if next == 0 {
                return Ok(());
            }
            hops += 1;
            // A link to the leaf itself would take its latch twice (a shared latch taken again
            // waits behind a queued writer: a deadlock).
            if !store.is_data_page(next) || next == page || hops > store.page_count() {
                return Err(self.corrupt(page, format_args!("bad right sibling {next}")));
            }
            let g = store.latch_shared(next);
            let nn = self.node(next, Some(0))?;
            store.touch(PageClass::Index, next, 2);
            _guard = g;
            (page, n, pos) = (next, nn, 0);
        }
    }

    /// Inserts `key -> value`. Returns false (and changes nothing) if the key exists.
    pub fn insert(&self, w: &mut dyn PageWriter, key: u64, value: u64) -> Result<bool> {
        let mut latches = Latches::default();
        let result = self.insert_latched(w, key, value, &mut latches);
        Self::finish(w, result, latches)
    }

    /// Ends a modification while `latches` still holds every page it wrote (and the root
    /// pointer, if it may have changed): the writer completes the change, or rolls it back on
    /// error, before any other writer can build on it. A crash can then never roll back one
    /// modification's before-images over another's committed change to the same page.
    fn finish<T>(w: &mut dyn PageWriter, result: Result<T>, mut latches: Latches<'_>) -> Result<T> {
        let ended = match &result {
            Ok(_) => w.complete(),
            Err(_) => w.roll_back(),
        };
        // The group's stores are all made: it closes while the latches still hold its pages.
        drop(latches.group.take());
        drop(latches);
        ended?;
        result
    }

    /// Latches the root exclusively and validates it (the root pointer latch is taken first).
    fn latch_root<'l>(&'l self, latches: &mut Latches<'l>) -> Result<(PageId, &'a [u8])> {
        latches.root = Some(self.root_latch.write());
        let root = self.root_page();
        if !self.store.is_data_page(root) {
            return Err(self.corrupt(root, "root pointer outside the data pages"));
        }
        let g = self.store.latch_exclusive(root);
        latches.path.push(Held { page: root, slot_in_parent: 0, _g: g });
        Ok((root, self.node(root, None)?))
    }

    /// Latches and validates child `slot` of the internal node `n` (at `page`). `held`: the
    /// pages this operation has latched; a damaged pointer to one of them is refused before it
    /// is latched a second time (which would deadlock: the level check comes after the latch).
    fn latch_child<'l>(
        &'l self,
        page: PageId,
        n: &[u8],
        slot: usize,
        held: &[Held<'_>],
    ) -> Result<(PageId, ExclusiveLatch<'l>, &'a [u8])> {
        let c = child(n, slot);
        if !self.store.is_data_page(c) {
            return Err(self.corrupt(page, format_args!("child pointer {c} out of range")));
        }
        if held.iter().any(|h| h.page == c) {
            return Err(self.corrupt(page, format_args!("child pointer {c} leads back up")));
        }
        let g = self.store.latch_exclusive(c);
        let cn = self.node(c, Self::below(n))?;
        Ok((c, g, cn))
    }

    fn insert_latched<'l>(
        &'l self,
        w: &mut dyn PageWriter,
        key: u64,
        value: u64,
        latches: &mut Latches<'l>,
    ) -> Result<bool> {
        let store = self.store;
        let (root, rn) = self.latch_root(latches)?;
        if count(rn) < self.capacity {
            latches.root = None;
        }
        let (mut page, mut n) = (root, rn);
        while kind(n) != LEAF {
            store.touch(PageClass::Index, page, search_lines(n));
            let slot = child_slot(n, key);
            let (c, g, cn) = self.latch_child(page, n, slot, &latches.path)?;
            if count(cn) < self.capacity {
                latches.path.clear();
                latches.root = None;
            }
            latches.path.push(Held { page: c, slot_in_parent: slot, _g: g });
            (page, n) = (c, cn);
        }
        store.touch(PageClass::Index, page, search_lines(n));
        let Latches { root: root_guard, path, group, .. } = latches;
        let leaf = page;
        let pos = match search(n, key) {
            Ok(_) => return Ok(false),
            Err(pos) => pos,
        };
        let c = count(n);
        if c < self.capacity {
            // No split, so no page allocation (a store to the shared bitmap): every store of
            // this insert is to the worker's log or this latched leaf, one store group.
            *group = Some(store.region().store_group());
            // The new entry, then the entries after it as they are stored, written
            // from `pos` on (the bytes `rewrite_from` writes, without decoding the node).
            let mut tail = Vec::with_capacity((c - pos + 1) * ENTRY);
            tail.extend_from_slice(&key.to_le_bytes());
            tail.extend_from_slice(&value.to_le_bytes());
            tail.extend_from_slice(&n[NODE_HEADER + pos * ENTRY..NODE_HEADER + c * ENTRY]);
            let h = header(NodeId::of(n), c + 1, sibling(n), leftmost(n));
            touch_shifted(w, leaf, pos, tail.len());
            w.write(leaf, &[(0, &h), (NODE_HEADER + pos * ENTRY, &tail)])?;
            return Ok(true);
        }
        let mut es = entries(n);
        es.insert(pos, (key, value));
        // Split the leaf; push the separator up through the held ancestors. A key that continues
        // a dense ascending run (history ids, order ids) splits right after itself, so later keys
        // of the run append to a node of their own instead of shifting whatever follows the run
        // (another worker's run) on every insert; any other key splits the node in half.
        let continues_run = pos > 0 && es[pos - 1].0.checked_add(1) == Some(key);
        let mid = if continues_run { (pos + 1).min(es.len() - 1) } else { es.len() / 2 };
        store.counters().split();
        let right = w.alloc_page()?;
        let id = NodeId::of(n);
        write_node(w, right, id, &es[mid..], sibling(n), 0)?;
        let h = header(id, mid, right, 0);
        let tail = encode_entries(&es[pos.min(mid)..mid]);
        w.write(leaf, &[(0, &h), (NODE_HEADER + pos.min(mid) * ENTRY, &tail)])?;
        let mut up = (es[mid].0, right);
        let mut at = path.len() - 1;
        loop {
            if at == 0 {
                debug_assert!(root_guard.is_some(), "root split without the root latch");
                let old_root = path[0].page;
                let old = store.page(old_root);
                if level(old) >= MAX_LEVEL {
                    return Err(self.corrupt(old_root, "tree deeper than the level limit"));
                }
                let new_root = w.alloc_page()?;
                let id = NodeId { kind: INTERNAL, level: level(old) + 1, owner: self.owner };
                write_node(w, new_root, id, &[up], 0, old_root)?;
                w.write(self.root.page, &[(self.root.offset, &new_root.to_le_bytes())])?;
                return Ok(true);
            }
            at -= 1;
            let parent = path[at].page;
            let n = store.page(parent);
            let mut es = entries(n);
            let pos = match search(n, up.0) {
                Ok(_) => {
                    return Err(self.corrupt(parent, format_args!("duplicate separator {}", up.0)))
                }
                Err(p) => p,
            };
            es.insert(pos, up);
            if es.len() <= self.capacity {
                rewrite_from(w, parent, n, &es, pos)?;
                return Ok(true);
            }
            let mid = es.len() / 2;
            store.counters().split();
            let right = w.alloc_page()?;
            let id = NodeId::of(n);
            write_node(w, right, id, &es[mid + 1..], 0, es[mid].1)?;
            let h = header(id, mid, 0, leftmost(n));
            let tail = encode_entries(&es[pos.min(mid)..mid]);
            w.write(parent, &[(0, &h), (NODE_HEADER + pos.min(mid) * ENTRY, &tail)])?;
            up = (es[mid].0, right);
        }
    }

    /// Removes `key`; returns its value, or None if absent. An underfull node merges with its
    /// right sibling (or, as the rightmost child, into its left sibling) when both fit in one.
    pub fn remove(&self, w: &mut dyn PageWriter, key: u64) -> Result<Option<u64>> {
        let mut latches = Latches::default();
        let result = self.remove_latched(w, key, &mut latches);
        Self::finish(w, result, latches)
    }

    fn remove_latched<'l>(
        &'l self,
        w: &mut dyn PageWriter,
        key: u64,
        latches: &mut Latches<'l>,
    ) -> Result<Option<u64>> {
        let store = self.store;
        let min = self.min_entries();
        let (root, rn) = self.latch_root(latches)?;
        if kind(rn) == LEAF || count(rn) >= 2 {
            latches.root = None;
        }
        let (mut page, mut n) = (root, rn);
        while kind(n) != LEAF {
            store.touch(PageClass::Index, page, search_lines(n));
            let slot = child_slot(n, key);
            let (c, g, cn) = self.latch_child(page, n, slot, &latches.path)?;
            if count(cn) > min {
                latches.path.clear();
                latches.root = None;
            }
            latches.path.push(Held { page: c, slot_in_parent: slot, _g: g });
            (page, n) = (c, cn);
        }
        store.touch(PageClass::Index, page, search_lines(n));
        let Latches { root: root_guard, path, siblings, group } = latches;
        if count(n) > min || path.len() == 1 {
            // The leaf keeps at least `min` entries, or it is the root (a leaf root never
            // collapses): no merge follows, so no page is freed (a store to the shared bitmap)
            // and every store is to the worker's log or this leaf. (A leaf alone on the path
            // is the root or was safe: the path is cleared only below a node above `min`.)
            *group = Some(store.region().store_group());
        }
        let leaf = page;
        let Ok(pos) = search(n, key) else { return Ok(None) };
        let value = val_at(n, pos);
        let mut es = entries(n);
        es.remove(pos);
        rewrite_from(w, leaf, n, &es, pos)?;
        let root_held = root_guard.is_some();
        let mut at = path.len() - 1;
        loop {
            let page = path[at].page;
            let n = store.page(page);
            if at == 0 {
                if root_held && kind(n) == INTERNAL && count(n) == 0 {
                    // Collapse: the only child becomes the root.
                    let only = leftmost(n);
                    self.node(only, Self::below(n))?;
                    w.write(self.root.page, &[(self.root.offset, &only.to_le_bytes())])?;
                    w.free_page(page)?;
                }
                return Ok(Some(value));
            }
            if count(n) >= min {
                return Ok(Some(value));
            }
            let parent = path[at - 1].page;
            let pn = store.page(parent);
            let slot = path[at].slot_in_parent;
            // Merge with the right sibling, or (rightmost child) into the left one. Latches are
            // always taken left to right: for the left case the node's latch is released first
            // and retaken after the left sibling's. Nothing can change either node meanwhile:
            // writers reach them only through the parent, which stays exclusively latched.
            let (left, right, sep) = if slot < count(pn) {
                (page, child(pn, slot + 1), slot)
            } else if slot > 0 {
                path.truncate(at);
                (child(pn, slot - 1), page, slot - 1)
            } else {
                return Ok(Some(value)); // an only child: the parent underflows next level up
            };
            for p in [left, right] {
                if !store.is_data_page(p) {
                    return Err(
                        self.corrupt(parent, format_args!("child pointer {p} out of range"))
                    );
                }
            }
            // Damaged pointers naming the node itself (as its sibling) or a latched ancestor
            // would latch a page twice: a deadlock.
            let sibling_page = if left == page { right } else { left };
            if left == right || path.iter().any(|h| h.page == sibling_page) {
                return Err(self.corrupt(
                    parent,
                    format_args!("children {left} and {right} repeat a node on the path"),
                ));
            }
            // Kept until the modification completes (see `finish`), like the path.
            if left != page {
                siblings.push(store.latch_exclusive(left));
            }
            siblings.push(store.latch_exclusive(right));
            let (ln, rn) = (self.node(left, Self::below(pn))?, self.node(right, Self::below(pn))?);
            let merged_len = count(ln) + count(rn) + usize::from(kind(ln) == INTERNAL);
            if merged_len > self.capacity {
                self.redistribute(w, parent, sep, (left, ln), (right, rn))?;
                return Ok(Some(value));
            }
            store.counters().merge();
            let mut es = entries(ln);
            let from = es.len();
            let (sib, lm) = if kind(ln) == LEAF {
                (sibling(rn), 0)
            } else {
                es.push((key_at(pn, sep), leftmost(rn)));
                (0, leftmost(ln))
            };
            es.extend(entries(rn));
            let h = header(NodeId::of(ln), es.len(), sib, lm);
            let tail = encode_entries(&es[from..]);
            w.write(left, &[(0, &h), (NODE_HEADER + from * ENTRY, &tail)])?;
            w.free_page(right)?;
            let mut pes = entries(pn);
            pes.remove(sep);
            rewrite_from(w, parent, pn, &pes, sep)?;
            at -= 1;
        }
    }

    /// Evens out two siblings that do not fit in one node (the caller holds the parent and both
    /// nodes exclusively); the separator between them in the parent changes, its count does not.
    fn redistribute(
        &self,
        w: &mut dyn PageWriter,
        parent: PageId,
        sep: usize,
        (left, ln): (PageId, &[u8]),
        (right, rn): (PageId, &[u8]),
    ) -> Result<()> {
        let pn = self.store.page(parent);
        let id = NodeId::of(ln);
        let mut all = entries(ln);
        let new_sep;
        if kind(ln) == LEAF {
            all.extend(entries(rn));
            let mid = all.len() / 2;
            new_sep = all[mid].0;
            let (lh, rh) = (header(id, mid, right, 0), header(id, all.len() - mid, sibling(rn), 0));
            let (le, re) = (encode_entries(&all[..mid]), encode_entries(&all[mid..]));
            w.write(left, &[(0, &lh), (NODE_HEADER, &le)])?;
            w.write(right, &[(0, &rh), (NODE_HEADER, &re)])?;
        } else {
            all.push((key_at(pn, sep), leftmost(rn)));
            all.extend(entries(rn));
            let mid = all.len() / 2;
            new_sep = all[mid].0;
            let lh = header(id, mid, 0, leftmost(ln));
            let rh = header(id, all.len() - mid - 1, 0, all[mid].1);
            let (le, re) = (encode_entries(&all[..mid]), encode_entries(&all[mid + 1..]));
            w.write(left, &[(0, &lh), (NODE_HEADER, &le)])?;
            w.write(right, &[(0, &rh), (NODE_HEADER, &re)])?;
        }
        w.write(parent, &[(NODE_HEADER + sep * ENTRY, &new_sep.to_le_bytes())])
    }

    /// Walks the whole tree (no concurrent writers) and checks ordering, key bounds, equal leaf
    /// depth, node fill limits, levels, owners and the leaf chain.
    pub fn check(&self) -> std::result::Result<TreeCheck, String> {
        let mut out = TreeCheck::default();
        let root = self.root_page();
        let mut leaves = Vec::new();
        let mut leaf_depth = None;
        self.check_node(root, None, (None, None), 1, &mut out, &mut leaves, &mut leaf_depth)?;
        for pair in leaves.windows(2) {
            let n = self.store.page(pair[0]);
            if sibling(n) != pair[1] {
                return Err(format!("leaf {} links to {} not {}", pair[0], sibling(n), pair[1]));
            }
        }
        if let Some(last) = leaves.last() {
            if sibling(self.store.page(*last)) != 0 {
                return Err(format!("last leaf {last} has a right sibling"));
            }
        }
        out.depth = leaf_depth.unwrap_or(0);
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &self,
        page: PageId,
        expect_level: Option<u16>,
        (low, high): (Option<u64>, Option<u64>),
        depth: usize,
        out: &mut TreeCheck,
        leaves: &mut Vec<PageId>,
        leaf_depth: &mut Option<usize>,
    ) -> std::result::Result<(), String> {
        if out.pages.len() as u64 > self.store.page_count() {
            return Err("cycle in tree".into());
        }
        let n = self.node(page, expect_level).map_err(|e| e.to_string())?;
        out.pages.push(page);
        let c = count(n);
        let mut prev = None;
        for i in 0..c {
            let k = key_at(n, i);
            if prev.is_some_and(|p| p >= k) {
                return Err(format!("node {page}: keys out of order at {i}"));
            }
            if low.is_some_and(|l| k < l) || high.is_some_and(|h| k >= h) {
                return Err(format!("node {page}: key {k} outside its bounds"));
            }
            prev = Some(k);
        }
        if kind(n) == LEAF {
            if let Some(d) = *leaf_depth {
                if d != depth {
                    return Err(format!("leaf {page} at depth {depth}, others at {d}"));
                }
            }
            *leaf_depth = Some(depth);
            leaves.push(page);
            out.entries.extend(entries(n));
            return Ok(());
        }
        for slot in 0..=c {
            let lo = if slot == 0 { low } else { Some(key_at(n, slot - 1)) };
            let hi = if slot == c { high } else { Some(key_at(n, slot)) };
            let below = Self::below(n);
            self.check_node(child(n, slot), below, (lo, hi), depth + 1, out, leaves, leaf_depth)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::PageAllocator;
    use crate::format::{page_offset, Layout, CATALOG_PAGE};
    use crate::systxn::SysTxn;
    use crate::undo::UndoLog;
    use pmem::{Medium, Region, RegionOptions};
    use std::cell::RefCell;

    thread_local! {
        pub(super) static INTERFERE: RefCell<Option<Box<dyn FnOnce()>>> =
            const { RefCell::new(None) };
    }

    struct Fixture {
        store: PageStore,
        alloc: PageAllocator,
        log: parking_lot::Mutex<UndoLog>,
        root_latch: RwLock<()>,
    }

    const ROOT: RootRef = RootRef { page: CATALOG_PAGE, offset: 64 };

    impl Fixture {
        /// Leaked, so a test hook (`'static`) may write through it.
        fn leaked() -> &'static Fixture {
            let region = Region::open(&RegionOptions::new(Medium::Dram, 8 << 20)).unwrap();
            let layout = Layout {
                page_count: region.len() / 8192,
                workers: 1,
                undo_pages: 1,
                sys_undo_pages: 8,
                node_capacity: 4,
                row_checksums: true,
            };
            layout.validate().unwrap();
            let at = page_offset(layout.sys_undo_log_page(0));
            UndoLog::format(&region, at);
            PageAllocator::format(&region, &layout);
            let f: &'static Fixture = Box::leak(Box::new(Fixture {
                store: PageStore::new(&region, &layout, None),
                alloc: PageAllocator::attach(&region, &layout),
                log: parking_lot::Mutex::new(UndoLog::attach(&region, at, 8 * 8192).unwrap()),
                root_latch: RwLock::new(()),
            }));
            let mut log = f.log.lock();
            let mut sys = SysTxn::begin(&f.store, &f.alloc, &mut log);
            let root = BTree::create(&mut sys, 1).unwrap();
            PageWriter::write(&mut sys, ROOT.page, &[(ROOT.offset, &root.to_le_bytes())]).unwrap();
            sys.commit().unwrap();
            drop(log);
            f
        }

        fn tree(&self) -> BTree<'_> {
            BTree::new(&self.store, ROOT, &self.root_latch, 4, 1)
        }

        fn insert(&self, k: u64) {
            let mut log = self.log.lock();
            let mut sys = SysTxn::begin(&self.store, &self.alloc, &mut log);
            assert!(self.tree().insert(&mut sys, k, k * 10).unwrap());
            sys.commit().unwrap();
        }

        /// The largest key in the leaf that holds `key`.
        fn largest_in_leaf_of(&self, key: u64) -> u64 {
            let tree = self.tree();
            let mut n = tree.node(tree.root_page(), None).unwrap();
            while kind(n) != LEAF {
                n = tree.node(child(n, child_slot(n, key)), Self::below(n)).unwrap();
            }
            key_at(n, count(n) - 1)
        }

        fn below(n: &[u8]) -> Option<u16> {
            BTree::below(n)
        }
    }

    /// Regression guard for the optimistic lookup (issue 35): a leaf that splits after the
    /// reader read its pointer but before it validated the parent moves the largest key into a
    /// new sibling; a reader that did not validate would read the old leaf and miss it.
    #[test]
    fn a_split_between_pointer_and_validation_makes_the_lookup_retry() {
        let f = Fixture::leaked();
        for k in 0..40 {
            f.insert(k * 100);
        }
        assert!(level(f.store.page(f.tree().root_page())) >= 2, "a tree of three levels");
        let target = f.largest_in_leaf_of(2000);
        let split_below_target: Box<dyn FnOnce()> = Box::new(move || {
            (1..=3).for_each(|d| f.insert(target - d));
        });
        INTERFERE.with(|h| *h.borrow_mut() = Some(split_below_target));
        let splits = f.store.counters().snapshot().splits;
        assert_eq!(f.tree().get(target).unwrap(), Some(target * 10), "the moved key was missed");
        assert!(INTERFERE.with(|h| h.borrow().is_none()), "the lookup never reached the hook");
        assert!(f.store.counters().snapshot().splits > splits, "the hook split nothing");
        assert_ne!(f.largest_in_leaf_of(target - 3), target, "the key did not move");
        for k in (0..40).map(|k| k * 100).chain((1..=3).map(|d| target - d)) {
            assert_eq!(f.tree().get(k).unwrap(), Some(k * 10), "key {k}");
        }
    }

    /// A node's bytes holding `keys` (sorted or not) with value = index.
    fn node_of(keys: &[u64]) -> Vec<u8> {
        let mut n = vec![0u8; PAGE_SIZE];
        for (i, k) in keys.iter().enumerate() {
            let at = NODE_HEADER + i * ENTRY;
            n[at..at + 8].copy_from_slice(&k.to_le_bytes());
            n[at + 8..at + 16].copy_from_slice(&(i as u64).to_le_bytes());
        }
        n
    }

    /// The interpolating search answers what a binary search of the sorted keys answers, for
    /// every probe key (present, between, below and above all), on hashed, dense, clustered
    /// and tiny nodes; on unsorted (torn or damaged) bytes it answers some index within the
    /// node and never panics.
    #[test]
    fn interpolation_search_agrees_with_binary_search_and_survives_unsorted_keys_and_wrong_fences()
    {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut checked = 0;
        for case in 0..600 {
            let count = match case % 6 {
                0 => rng.gen_range(0..12),
                _ => rng.gen_range(1..=MAX_NODE_ENTRIES),
            };
            let mut keys: Vec<u64> = match case % 4 {
                0 => (0..count).map(|_| rng.gen()).collect(), // hashed
                1 => {
                    let base: u64 = rng.gen_range(0..1 << 40);
                    (0..count as u64).map(|i| base + i * 3).collect() // dense
                }
                2 => (0..count) // clustered: most keys small, a few huge
                    .map(|i| if i % 50 == 49 { rng.gen() } else { rng.gen_range(0..5000) })
                    .collect(),
                _ => (0..count).map(|_| rng.gen_range(u64::MAX - 1000..=u64::MAX)).collect(),
            };
            keys.sort_unstable();
            keys.dedup();
            let n = node_of(&keys);
            let mut probes: Vec<u64> = keys.clone();
            probes.extend(keys.iter().map(|k| k.wrapping_add(1)));
            probes.extend(keys.iter().map(|k| k.wrapping_sub(1)));
            probes.extend([0, 1, u64::MAX, u64::MAX - 1]);
            probes.extend((0..50).map(|_| rng.gen::<u64>()));
            // Fences as a parent gives them, and wrong ones (a torn parent): estimates only.
            let (low, high) = match (keys.first(), keys.last()) {
                (Some(&f), Some(&l)) => {
                    (f.saturating_sub(rng.gen_range(0..100)), l.saturating_add(1))
                }
                _ => (0, u64::MAX),
            };
            let wrong = (Some(rng.gen::<u64>()), Some(rng.gen::<u64>()));
            for key in probes {
                let want = keys.binary_search(&key);
                let what = format!("case {case}: {} keys, key {key}", keys.len());
                assert_eq!(search_in(&n, keys.len(), key), want, "{what}");
                assert_eq!(
                    search_fenced(&n, keys.len(), key, (Some(low), Some(high))),
                    want,
                    "{what}"
                );
                assert_eq!(search_fenced(&n, keys.len(), key, wrong), want, "{what}, wrong fences");
                assert_eq!(search_fenced(&n, keys.len(), key, (None, Some(high))), want, "{what}");
                checked += 1;
            }
            // Unsorted bytes: some index within the node, no panic.
            let mut shuffled = keys.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, rng.gen_range(0..=i));
            }
            let n = node_of(&shuffled);
            for _ in 0..50 {
                let key = rng.gen::<u64>();
                let (Ok(i) | Err(i)) = search_in(&n, shuffled.len(), key);
                assert!(i <= shuffled.len());
                let fences = (Some(rng.gen::<u64>()), Some(rng.gen::<u64>()));
                let (Ok(i) | Err(i)) = search_fenced(&n, shuffled.len(), key, fences);
                assert!(i <= shuffled.len());
            }
        }
        assert!(checked > 100_000, "{checked} probes");
    }
}

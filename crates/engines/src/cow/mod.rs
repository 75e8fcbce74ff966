//! Copy-on-Write Updates — Arulraj, Pavlo, Dulloor, *Let's Talk About Storage & Recovery
//! Methods for Non-Volatile Memory Database Systems*, SIGMOD 2015, §3.2 (CoW, `io=fs`) and §4.2
//! (NVM-CoW, `io=nvm`); shadow paging as in System R and LMDB.
//!
//! Every table is a copy-on-write B+tree of fixed-size pages. A writer never changes a page a
//! committed version can reach: it copies the path from the root to the leaf it changes into
//! fresh pages (the *dirty directory*), and commit writes those pages and a new *meta page* (the
//! directory of every table's root), persists them, then swaps the *master record* — one 8-byte
//! word in page 2 naming the current meta page — with an atomic store that it persists. Readers
//! take the current version (an immutable snapshot) and never wait or lock.
//!
//! **Damage to the master record** (issue 37, cow layout 2): the word carries, beside the meta
//! page id, a 24-bit check over the id and that meta page's crc, so a changed or zeroed word,
//! or one naming a meta page other than the one it was written for, is `Corrupt`. We chose one
//! checked word over two alternating checksummed copies: the word is a single aligned 8-byte
//! store, so no crash tears it and there is no torn-newest-copy case to fall back from; and a
//! fall back to the older copy could not tell a torn copy from one damaged *after* its commit
//! was acknowledged, where it would silently lose that commit. A node reachable from version
//! `v` must carry a stamp `<= v` (checked at open, by readers and by the integrity walk), which
//! catches a stale master naming pages reused since; a lost write of the master over a tree
//! that nothing has reused since is indistinguishable from a crash before the swap, and opens
//! as that older version (the one damage left undetected).
//!
//! **Recovery invariant**: every page (and tuple) reachable from the persisted master record was
//! persisted before the master named it, and is never overwritten while any durable or visible
//! version can reach it; so opening is reading the master record (nothing to undo or redo,
//! N-Store's "no recovery" for NVM-CoW) plus a reachability scan that rebuilds the free-page
//! (and free-slot) sets.
//!
//! * **One writer at a time** (LMDB, N-Store's CoW): a transaction starts as a snapshot reader;
//!   its first write takes the writer slot (a bounded wait, then a retryable `Conflict`). If
//!   another writer committed since its snapshot, its reads are validated against the current
//!   version (issue 35; Silo's read-set validation, Tu et al. SOSP 2013 §4.2): each point read
//!   must end in the same leaf page there, which, since no page a pinned version reaches is
//!   changed or reused, means it would return the same row or the same absence; then it writes
//!   on the current version. A read that changed, a scan, or more than 1,024 reads make the
//!   write fail retryably instead (`snapshot_conflicts`; validated: `reads_revalidated`).
//! * **Pipelined commits** (`pipeline=on`, the default with `group_commit_ms=0`; ours, issue
//!   35): the writer slot is held while a writer builds and writes its version, not while it
//!   persists. The commit publishes the version to the next writer, hands the slot on, and then
//!   flushes its pages, issues its barrier, waits for its *turn* (the previous version's master
//!   swap persisted) and swaps and persists the master; only then do readers' slots get the
//!   version, and the commit returns. Swaps stay in version order, and each names pages
//!   persisted before it (its own by its barrier, older versions' by theirs, which precede
//!   its turn). A writer whose snapshot became that newer, not yet durable version (it
//!   validated its reads there) and then writes nothing waits for its swap before it
//!   acknowledges. `pipeline=off` is LMDB's and N-Store's writer: the slot is held until the
//!   commit is durable. Both do the same flushes and barriers per commit; what moves is the
//!   barrier's latency, out of the one-writer section.
//! * **A copy's checksum is derived** (issue 35, `layout::NodeBuf`): a writer does not verify
//!   a committed node as it copies it nor checksum it in full at commit; the stored checksum is
//!   carried through the copy's in-place changes (CRC-32C is affine), so damage in the copy is
//!   kept as a checksum that fails, never laundered; a change of the node's shape verifies the
//!   copy first. The copies reuse page buffers each worker keeps.
//! * **Group commit** (`group_commit_ms`, N-Store's `gc_interval`): commits within the interval
//!   write their pages at once but share one barrier and one master swap; their tokens become
//!   durable with it. 0: each commit persists alone (2 barriers).
//! * **Snapshots write nothing shared** (issue 35): each worker has a slot where every commit
//!   publishes its version; a transaction copies it once per version into its worker's own
//!   `Arc` and pins its number there, and the reclaimer (a commit, under the state lock) reads
//!   every slot's pins. A read-only transaction takes no engine-wide mutex and writes no shared
//!   reference count. Serializable: writers are one at a time, and one whose reads do not all
//!   hold in the current version fails; read-only transactions read one committed version.
//! * **Reclamation**: pages a version replaces are freed *with* that version and reused only
//!   once that version's master swap is durable and no reader's snapshot is older. The free set
//!   is volatile; opening rebuilds it by a reachability scan of the internal nodes from the
//!   master (leaves are not read), so nothing leaks across a crash and no free list is written
//!   per commit (see `docs/storage.md`, "cow", for the choice and its measured cost).
//! * **`io=fs`** (CoW): pages and the master are written with `pwrite` to the region's file and
//!   `fdatasync` is the barrier; a transaction reads a node through the file as N-Store's CoW
//!   does: a lookup in its worker's DRAM page cache, `pread` of the page on a miss ([`fspages`],
//!   issue 36). Opening, the integrity walk and layout `pointers`' tuples read the mapping.
//! * **`layout`** (fixed at format; `auto`: `pages` for now, a region's own layout on reopen):
//!   `pages` is §3.2's CoW, the rows inside the leaves, so an update copies a leaf of rows;
//!   `pointers` is §4.2's NVM-CoW: tuples are allocated apart, in slots of tuple pages
//!   ([`tuples`], the allocator interface of §2.3), the leaves hold their non-volatile pointers
//!   (region offsets), and an update persists the new tuple and copies only the nodes on the
//!   path to its pointer (at most [`layout::POINTER_NODE_ENTRIES`] entries each). Which slots
//!   are in use is rebuilt at open by the same reachability scan (it then reads the leaves
//!   too); a replaced tuple's slot waits, like a replaced page, until no durable or visible
//!   version reaches it.
//!
//! Test-only faults: `cow-skip-node-persist`, `cow-swap-before-nodes`, `cow-reuse-early`.

mod fspages;
mod layout;
pub mod options;
#[cfg(test)]
mod pipeline_tests;
mod tuples;
mod txn;

use crate::device::Device;
use crate::{EngineOptions, Fault};
use crossbeam_utils::CachePadded;
use layout::{Node, Shape, TableRoot};
use parking_lot::{Condvar, Mutex, MutexGuard};
use pmem::Region;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::engine::{check_spec, RecoveryReport};
use storage::format::{page_offset, Layout, PageId, Superblock, CATALOG_PAGE, PAGE_SIZE_U64};
use storage::{CommitToken, DbError, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};

pub use layout::{master_page, MASTER_MAGIC};
pub use options::{Options, TupleLayout};

pub const ENGINE_NAME: &str = "cow";
/// The master record: page 2, offset 0, the master word naming the current meta page (page 0:
/// no version yet; [`master_page`] reads the id), then [`MASTER_MAGIC`] at offset 8.
pub const MASTER_OFFSET: u64 = CATALOG_PAGE * PAGE_SIZE_U64;
/// Longest a writer waits for the writer slot before a retryable conflict.
const WRITER_WAIT: Duration = Duration::from_millis(20);
/// A worker's kept page buffers ([`Cow::take_buffer`]).
type PageBuffers = Vec<Vec<u8>>;
/// Page buffers kept per worker for its writers' copies ([`Cow::keep_buffers`]).
const KEPT_BUFFERS: usize = 64;
/// How long a writer spins for the writer slot before it sleeps on it.
const WRITER_SPIN: Duration = Duration::from_micros(20);

/// One committed version: what a snapshot sees.
#[derive(Clone)]
pub(crate) struct Version {
    pub number: u64,
    pub meta_page: PageId,
    /// The meta page's stored crc (the master word is bound to it).
    pub meta_crc: u32,
    pub tables: Vec<TableRoot>,
    /// Commit group the version belongs to (its durability token).
    pub group: u64,
}

/// A test hook run with a version's number ([`Cow::persist_in_turn`]).
#[cfg(test)]
type TestHook = Arc<dyn Fn(u64) + Send + Sync>;

/// The free-page state and version bookkeeping (under [`Cow::state`]).
struct State {
    current: Arc<Version>,
    /// Highest version whose master swap is persisted.
    durable_version: u64,
    /// The open commit group (tokens of its commits) and when its first commit ran.
    group: u64,
    group_opened: Option<Instant>,
    /// Pages free for reuse below `high`; pages at or above `high` were never used.
    free: BTreeSet<PageId>,
    high: PageId,
    /// Pages and tuple slots freed by a version (replaced by it), waiting until it is durable
    /// and no reader's snapshot is older: (version, pages, slots), oldest first.
    pending: VecDeque<(u64, Vec<PageId>, Vec<u64>)>,
    /// Layout `pointers`: the tuple pages and their free slots.
    tuples: TupleSpace,
    /// Snapshot version -> snapshots taken outside a worker's slot (writers' checks, the
    /// integrity walk) reading it; transactions' snapshots are in [`Cow::slots`].
    readers: BTreeMap<u64, usize>,
    /// Ranges the open group's commits wrote, with the writing thread: a barrier orders only
    /// its own thread's flushes, so the thread closing the group flushes the others' again.
    group_ranges: Vec<(std::thread::ThreadId, u64, u64)>,
}

/// The volatile half of the tuple allocator (layout `pointers`), rebuilt at open.
#[derive(Default)]
pub(crate) struct TupleSpace {
    pages: std::collections::HashMap<PageId, TuplePage>,
    /// Free slot pointers, per table owner.
    free: std::collections::HashMap<u32, BTreeSet<u64>>,
}

/// A tuple page: its table, its slot size, and its slots allocated (live, pending or a
/// writer's own).
#[derive(Clone, Copy, Debug)]
struct TuplePage {
    owner: u32,
    slot_bytes: usize,
    used: usize,
    /// Whether its header is written (a page taken by a writer that aborted is not yet).
    header_written: bool,
}

/// A worker's snapshot slot (issue 35: a read-only transaction writes no shared word). The
/// commit that makes a version puts it in every slot, under the slot's mutex; a transaction
/// takes its snapshot from its own worker's slot and pins it there, and the reclaimer reads
/// every slot's pins (the per-worker slots of epoch-based reclamation, Fraser 2004 §5.2.3).
/// A slot's mutex is written by its worker's transactions, and once per commit by the
/// committer, never by other readers.
struct ReaderSlot {
    /// The current version, as the last commit published it (readers only read it: its
    /// reference count is the committers').
    latest: Arc<Version>,
    /// This worker's copy of `latest`: transactions clone this one, whose reference count only
    /// this worker writes.
    own: Arc<Version>,
    /// The versions this worker's open transactions read, one entry each.
    pinned: Vec<u64>,
}

/// Engine activity, reported by `nvmdb bench` per commit: counted per thread (summed when
/// read), so a count on the commit path writes no line another thread writes.
#[derive(Default)]
struct Activity {
    /// Indexed by [`Count`].
    counts: pmem::ThreadCounters<{ Count::ALL.len() }>,
    /// Writes to words every thread writes, per thread: `[0]` acquisitions of the engine-wide
    /// state mutex, `[1]` read-modify-writes of a shared counter (a version's reference count).
    shared: pmem::ThreadCounters<2>,
}

/// What [`Activity::counts`] counts, in `activity()`'s order and with its names.
#[derive(Clone, Copy)]
enum Count {
    MasterSwaps,
    NodesWritten,
    NodesCopied,
    PagesReclaimed,
    TuplesWritten,
    SnapshotConflicts,
    /// Writers whose snapshot was no longer current and whose reads held in the current version
    /// (validated instead of failing; `txn::CowTxn::become_writer`).
    ReadsRevalidated,
    /// Bytes written and persist barriers issued through the device (`io=nvm|fs` alike).
    DeviceBytesWritten,
    DeviceBarriers,
    /// Nanoseconds the writer slot was held (from a writer's first write until its commit
    /// hands the slot on or ends): the one-writer section every write transaction queues for.
    WriterSlotNs,
    /// Writers that spun for the writer slot as long as [`WRITER_SPIN`] and then slept on it.
    WriterSlotSleeps,
    /// Pipelined commits that spun for their turn as long as [`WRITER_SPIN`] and then slept.
    TurnSleeps,
}

impl Count {
    const ALL: [(Count, &'static str); 12] = [
        (Count::MasterSwaps, "master_swaps"),
        (Count::NodesWritten, "nodes_written"),
        (Count::NodesCopied, "nodes_copied"),
        (Count::PagesReclaimed, "pages_reclaimed"),
        (Count::TuplesWritten, "tuples_written"),
        (Count::SnapshotConflicts, "snapshot_conflicts"),
        (Count::ReadsRevalidated, "reads_revalidated"),
        (Count::DeviceBytesWritten, "device_bytes_written"),
        (Count::DeviceBarriers, "device_barriers"),
        (Count::WriterSlotNs, "writer_slot_ns"),
        (Count::WriterSlotSleeps, "writer_slot_sleeps"),
        (Count::TurnSleeps, "turn_sleeps"),
    ];
}

impl Activity {
    #[inline]
    fn add(&self, what: Count, n: u64) {
        self.counts.add(what as usize, n);
    }
}

/// `io=fs`: how transactions read nodes through the file ([`fspages`]).
struct FsReads {
    /// One page cache per worker (locked only by that worker's transactions).
    caches: Box<[CachePadded<Mutex<fspages::PageCache>>]>,
    incarnations: fspages::Incarnations,
    /// Per thread: `[0]` pages `pread`, `[1]` their bytes, `[2]` page-cache hits.
    stats: pmem::ThreadCounters<3>,
}

/// A node page's bytes: borrowed from the mapping (`io=nvm`), or read through the file.
pub(crate) enum PageBytes<'a> {
    Mapped(&'a [u8]),
    Read(Arc<[u8]>),
}

impl PageBytes<'_> {
    pub fn bytes(&self) -> &[u8] {
        match self {
            PageBytes::Mapped(b) => b,
            PageBytes::Read(b) => b,
        }
    }
}

pub struct Cow {
    region: Region,
    layout: Layout,
    device: Device,
    node_capacity: u32,
    /// Layout `pointers` (NVM-CoW): leaves hold tuple pointers.
    pointers: bool,
    group_commit: Duration,
    /// Pipelined commits (`pipeline=on` with `group_commit_ms=0`): see [`Cow::persist_in_turn`].
    pipelined: bool,
    fault: Option<Fault>,
    workers: usize,
    /// The single writer slot, held from a transaction's first write until its version is
    /// written (pipelined) or durable.
    writer: Mutex<()>,
    /// Pipelined commits: the newest version whose master swap is persisted (under the mutex;
    /// `swapped` mirrors it for waiters that spin), and the condition its waiters sleep on.
    turn: Mutex<u64>,
    turn_cv: Condvar,
    swapped: AtomicU64,
    /// Test hook: run by a pipelined commit after it handed the writer slot on, before it
    /// persists (with the version's number).
    #[cfg(test)]
    before_persist: Mutex<Option<TestHook>>,
    state: Mutex<State>,
    /// One per worker: the snapshots its transactions read (lock order: `state`, then a slot).
    slots: Box<[CachePadded<Mutex<ReaderSlot>>]>,
    /// One per worker: page buffers its writers' copies reuse (a writer allocated and freed
    /// one per copied node, and the allocator's heap trimming and regrowth cost page faults).
    buffers: Box<[CachePadded<Mutex<PageBuffers>>]>,
    durable_group: AtomicU64,
    /// Deadline of the open group in ns since `epoch` (u64::MAX: no group open).
    group_deadline_ns: AtomicU64,
    epoch: Instant,
    counters: storage::counters::Counters,
    activity: Activity,
    /// `io=fs`: node reads through the file.
    fs: Option<FsReads>,
    report: RecoveryReport,
}

/// The shared superblock's layout of a region of `page_count` pages, with the smallest undo
/// areas it allows (cow keeps no logs): their pages and the bitmap pages stay zero and unused.
fn layout(options: &EngineOptions, page_count: u64) -> Layout {
    Layout {
        page_count,
        workers: 1,
        undo_pages: 1,
        sys_undo_pages: 2,
        node_capacity: options.node_capacity,
        row_checksums: options.checksums,
    }
}

/// The pages formatting a region of `pages` requires (see [`crate::min_region_bytes`]).
pub(crate) fn needed_pages(options: &EngineOptions, pages: u64) -> u64 {
    layout(options, pages).first_data_page() + 16
}

impl Cow {
    /// Opens the engine: formats a blank region, otherwise reads the master record and
    /// rebuilds the free-page set.
    pub fn open(region: Region, options: &EngineOptions) -> Result<Cow> {
        let started = Instant::now();
        if options.workers == 0 || options.workers >= storage::format::MAX_WORKERS {
            return Err(DbError::Invalid(format!(
                "workers must be 1..{}",
                storage::format::MAX_WORKERS
            )));
        }
        let (layout, formatted) = match Superblock::read(&region, ENGINE_NAME, region.created())? {
            Some(sb) => (sb.layout, false),
            None => (Self::format(&region, options)?, true),
        };
        let device = Device::open(&region, options.io, ENGINE_NAME)?;
        let pointers = read_tuple_layout(&region)?;
        let wanted = match options.cow.layout {
            TupleLayout::Auto => pointers,
            TupleLayout::Pointers => true,
            TupleLayout::Pages => false,
        };
        if wanted != pointers {
            return Err(DbError::Invalid(format!(
                "cow: the region was formatted with layout={}; open it with that layout (or \
                 layout=auto)",
                if pointers { "pointers" } else { "pages" }
            )));
        }
        let (version, scan) = recover(&region, &layout, pointers)?;
        let mut report = RecoveryReport { formatted, ..Default::default() };
        report.notes.push(format!(
            "master names version {} (meta page {}, layout {}); reachability scan read {} \
             internal nodes and {} leaves, found {} pages in use and {} free below the high \
             mark {}",
            version.number,
            version.meta_page,
            if pointers { "pointers" } else { "pages" },
            scan.internal_nodes,
            scan.leaves_read,
            scan.in_use,
            scan.free.len(),
            scan.high
        ));
        let group_commit = Duration::from_millis(options.cow.group_commit_ms);
        let state = State {
            durable_version: version.number,
            current: Arc::new(version.clone()),
            group: 1,
            group_opened: None,
            free: scan.free,
            high: scan.high,
            pending: VecDeque::new(),
            tuples: scan.tuples,
            readers: BTreeMap::new(),
            group_ranges: Vec::new(),
        };
        report.duration = started.elapsed();
        Ok(Cow {
            counters: storage::counters::Counters::new(&region),
            region,
            layout,
            device,
            node_capacity: layout.node_capacity,
            pointers,
            group_commit,
            pipelined: options.cow.pipeline && group_commit.is_zero(),
            fault: options.fault,
            workers: options.workers as usize,
            writer: Mutex::new(()),
            turn: Mutex::new(version.number),
            turn_cv: Condvar::new(),
            swapped: AtomicU64::new(version.number),
            #[cfg(test)]
            before_persist: Mutex::new(None),
            state: Mutex::new(state),
            buffers: (0..options.workers.max(1)).map(|_| Default::default()).collect(),
            slots: (0..options.workers.max(1))
                .map(|_| {
                    let (latest, own) = (Arc::new(version.clone()), Arc::new(version.clone()));
                    CachePadded::new(Mutex::new(ReaderSlot { latest, own, pinned: Vec::new() }))
                })
                .collect(),
            durable_group: AtomicU64::new(0),
            group_deadline_ns: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            activity: Activity::default(),
            fs: (options.io == crate::device::Io::Fs).then(|| FsReads {
                caches: (0..options.workers.max(1))
                    .map(|_| {
                        let pages = options.cow.fs_cache_pages as usize;
                        CachePadded::new(Mutex::new(fspages::PageCache::new(pages)))
                    })
                    .collect(),
                incarnations: fspages::Incarnations::new(layout.page_count),
                stats: pmem::ThreadCounters::default(),
            }),
            report,
        })
    }

    fn format(region: &Region, options: &EngineOptions) -> Result<Layout> {
        let layout = layout(options, region.len() / PAGE_SIZE_U64);
        layout.validate()?;
        if layout.page_count > layout::MAX_PAGES {
            return Err(DbError::Invalid(format!(
                "cow: a region of {} pages is larger than the {} pages the master record can \
                 name",
                layout.page_count,
                layout::MAX_PAGES
            )));
        }
        region.ensure_backed(page_offset(layout.first_data_page() + 16)).map_err(|e| {
            DbError::RegionFull(format!("the region cannot hold its metadata: {e}"))
        })?;
        let sb = Superblock { engine: ENGINE_NAME.into(), layout };
        sb.begin_format(region);
        let mut master = vec![0u8; storage::format::PAGE_SIZE];
        master[..8].copy_from_slice(&layout::master_word(0, 0).to_le_bytes());
        // `auto` formats CoW's layout for now: `pointers` passes the `nvmdb` layer's full-region
        // test since it keeps its last pages for freeing work, but has not yet had the crash
        // and fuzz campaigns a default needs.
        let pointers = options.cow.layout == TupleLayout::Pointers;
        master[8..24].copy_from_slice(&layout::master_header(pointers));
        region.write(MASTER_OFFSET, &master);
        region.flush(MASTER_OFFSET, PAGE_SIZE_U64);
        region.fence();
        sb.publish(region);
        Ok(layout)
    }

    pub(crate) fn shape(&self, table: TableId, spec: &TableSpec) -> Shape {
        Shape::new(table, spec.row_bytes, self.node_capacity, self.pointers)
    }

    pub(crate) fn is_data_page(&self, page: PageId) -> bool {
        self.layout.is_data_page(page)
    }

    /// A committed page's bytes, after checking the id names a data page the region holds.
    /// Whether readers verify leaf checksums (fixed at format: `checksums=off` regions skip it).
    pub(crate) fn row_checksums(&self) -> bool {
        self.layout.row_checksums
    }

    pub(crate) fn page(&self, page: PageId) -> Result<&[u8]> {
        if !self.is_data_page(page) || page_offset(page + 1) > self.region.backed_len() {
            return Err(DbError::Corrupt(format!(
                "cow: page id {page} is outside the data pages ({}..{}, {} bytes backed)",
                self.layout.first_data_page(),
                self.layout.page_count,
                self.region.backed_len()
            )));
        }
        // A borrow: the lines a reader uses are charged by `load` (N-Store's read model).
        Ok(self.region.borrow(page_offset(page), storage::format::PAGE_SIZE))
    }

    /// A committed node page for a transaction on `worker`: borrowed from the mapping, or
    /// (`io=fs`) from the worker's page cache, `pread` from the file on a miss ([`fspages`]).
    pub(crate) fn node_page(&self, worker: Option<usize>, page: PageId) -> Result<PageBytes<'_>> {
        let mapped = self.page(page)?; // validates the id
        let Some(fs) = &self.fs else { return Ok(PageBytes::Mapped(mapped)) };
        let incarnation = fs.incarnations.get(page);
        let mut uncached;
        let mut guard;
        let cache = match worker.and_then(|w| fs.caches.get(w)) {
            Some(c) => {
                guard = c.lock();
                if let Some(b) = guard.get(page, incarnation) {
                    fs.stats.add(2, 1);
                    return Ok(PageBytes::Read(b));
                }
                &mut *guard
            }
            None => {
                uncached = fspages::PageCache::new(0);
                &mut uncached
            }
        };
        let len = storage::format::PAGE_SIZE;
        let bytes = cache
            .fill(page, incarnation, len, |buf| self.device.read_at(page_offset(page), buf))?;
        fs.stats.add2(0, 1, Some((1, len as u64)));
        Ok(PageBytes::Read(bytes))
    }

    /// The bytes `[at, at + len)` of node page `page` are read (N-Store's read model charges the
    /// lines its CPU cache misses; without it, nothing). `io=fs`: nothing, the transaction
    /// reads its DRAM copy (the `pread` that made it was charged).
    pub(crate) fn load(&self, page: PageId, at: usize, len: usize) {
        if self.fs.is_none() {
            self.region.load(page_offset(page) + at as u64, len as u64);
        }
    }

    /// The engine-wide state (counted: every acquisition writes the mutex word).
    fn lock_state(&self) -> parking_lot::MutexGuard<'_, State> {
        self.activity.shared.add(0, 1);
        self.state.lock()
    }

    /// Takes a snapshot of the current version (registered until [`Self::release`]).
    pub(crate) fn snapshot(&self) -> Arc<Version> {
        let mut s = self.lock_state();
        self.activity.shared.add(1, 1);
        let v = s.current.clone();
        *s.readers.entry(v.number).or_insert(0) += 1;
        v
    }

    /// A transaction's snapshot on `worker`: the current version as the last commit published
    /// it, pinned in the worker's slot until [`Self::unpin`]. Writes only the worker's slot.
    pub(crate) fn snapshot_of(&self, worker: usize) -> Arc<Version> {
        let mut slot = self.slots[worker].lock();
        if slot.own.number != slot.latest.number {
            // Copied, not shared: this worker's clones then touch only its own count.
            slot.own = Arc::new(Version::clone(&slot.latest));
        }
        let v = slot.own.clone();
        slot.pinned.push(v.number);
        v
    }

    /// Ends a snapshot taken by [`Self::snapshot_of`] on `worker` (`Some`) or by
    /// [`Self::snapshot`] (`None`). Pages it held are reclaimed by the next commit (or the next
    /// allocation that finds no free page), not here: that would take the state lock.
    pub(crate) fn unpin(&self, worker: Option<usize>, version: u64) {
        let Some(worker) = worker else { return self.release(version) };
        let mut slot = self.slots[worker].lock();
        if let Some(i) = slot.pinned.iter().position(|&v| v == version) {
            slot.pinned.swap_remove(i);
        }
    }

    /// The oldest version any snapshot reads (`u64::MAX`: none). The caller holds the state
    /// lock, so no version is published meanwhile: a transaction pins what its slot holds.
    fn oldest_reader(&self, s: &State) -> u64 {
        let global = s.readers.keys().next().copied().unwrap_or(u64::MAX);
        let pinned = self.slots.iter().filter_map(|slot| slot.lock().pinned.iter().min().copied());
        pinned.fold(global, u64::min)
    }

    pub(crate) fn release(&self, version: u64) {
        let mut s = self.lock_state();
        if let Some(n) = s.readers.get_mut(&version) {
            *n -= 1;
            if *n == 0 {
                s.readers.remove(&version);
            }
        }
        self.reclaim(&mut s);
    }

    /// Takes the writer slot (bounded wait): spinning first for about a write transaction's
    /// length, since the slot is held only from a writer's first write to its commit (a
    /// waiter that sleeps at once costs both sides a futex call per hand-off), then sleeping.
    pub(crate) fn writer_slot(&self) -> Option<WriterSlot<'_>> {
        let spin_until = Instant::now() + WRITER_SPIN;
        loop {
            if let Some(slot) = self.writer.try_lock() {
                return Some(WriterSlot::held(self, slot));
            }
            if Instant::now() >= spin_until {
                self.activity.add(Count::WriterSlotSleeps, 1);
                let slot = self.writer.try_lock_for(WRITER_WAIT)?;
                return Some(WriterSlot::held(self, slot));
            }
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
    }

    /// A page buffer for a copy by a writer on `worker` (empty; reused if one is kept).
    pub(crate) fn take_buffer(&self, worker: usize) -> Vec<u8> {
        let kept = self.buffers.get(worker).and_then(|b| b.lock().pop());
        kept.unwrap_or_else(|| Vec::with_capacity(storage::format::PAGE_SIZE))
    }

    /// Keeps a writer's page buffers for `worker`'s next writers (up to [`KEPT_BUFFERS`]).
    pub(crate) fn keep_buffers(&self, worker: usize, bufs: impl Iterator<Item = Vec<u8>>) {
        let Some(kept) = self.buffers.get(worker) else { return };
        let mut kept = kept.lock();
        for mut b in bufs.take(KEPT_BUFFERS.saturating_sub(kept.len())) {
            b.clear();
            kept.push(b);
        }
    }

    /// The current version's number (a writer checks its snapshot is still current).
    pub(crate) fn current(&self) -> Arc<Version> {
        self.lock_state().current.clone()
    }

    /// Allocates a page for a writer's new node.
    pub(crate) fn alloc(&self) -> Result<PageId> {
        self.alloc_page(&mut self.lock_state())
    }

    fn alloc_page(&self, s: &mut State) -> Result<PageId> {
        let page = self.take_page(s)?;
        if let Some(fs) = &self.fs {
            // Cached copies of the page's earlier contents are stale from now on.
            fs.incarnations.bump(page);
        }
        Ok(page)
    }

    fn take_page(&self, s: &mut State) -> Result<PageId> {
        // Layout `pointers`: a delete copies the pointer nodes on its path into new pages, so
        // the last free pages are kept for freeing work (the `nvmdb` layer's drops and trash
        // reclamation run in a `FreeingScope`), as `storage::alloc` keeps them for `inplace`;
        // without it a region filled by inserts could never be emptied.
        if self.pointers && !storage::alloc::FreeingScope::active() {
            let left = s.free.len() as u64 + self.layout.page_count.saturating_sub(s.high);
            if left <= storage::alloc::reserve_pages(&self.layout) {
                return Err(DbError::RegionFull(format!(
                    "cow: the last {left} of {} pages are kept for deletes",
                    self.layout.page_count
                )));
            }
        }
        if s.free.is_empty() {
            // Snapshots that ended since the last commit may have left pages to reclaim.
            self.reclaim(s);
        }
        if let Some(p) = s.free.pop_first() {
            return Ok(p);
        }
        let page = s.high;
        if page >= self.layout.page_count {
            return Err(DbError::RegionFull(format!(
                "cow: all {} pages are in use or held by snapshots",
                self.layout.page_count
            )));
        }
        self.region.ensure_backed(page_offset(page + 1)).map_err(|e| {
            DbError::RegionFull(format!("cow: the region cannot grow to page {page}: {e}"))
        })?;
        s.high = page + 1;
        Ok(page)
    }

    /// Allocates a tuple slot of `shape`'s table for a writer's new tuple (layout `pointers`):
    /// a free slot of one of the table's tuple pages, or a fresh tuple page.
    pub(crate) fn alloc_tuple(&self, shape: &Shape) -> Result<u64> {
        let mut s = self.lock_state();
        let free = s.tuples.free.entry(shape.owner).or_default();
        if let Some(ptr) = free.pop_first() {
            let page = ptr / PAGE_SIZE_U64;
            if let Some(p) = s.tuples.pages.get_mut(&page) {
                p.used += 1;
                return Ok(ptr);
            }
            return Err(DbError::Invalid(format!("cow: internal: free slot {ptr} has no page")));
        }
        let page = self.alloc_page(&mut s)?;
        let slot_bytes = tuples::slot_bytes(shape);
        let page_state =
            TuplePage { owner: shape.owner, slot_bytes, used: 1, header_written: false };
        s.tuples.pages.insert(page, page_state);
        let free = s.tuples.free.entry(shape.owner).or_default();
        free.extend(
            (1..tuples::slots_per_page(slot_bytes)).map(|i| tuples::slot_ptr(page, i, slot_bytes)),
        );
        Ok(tuples::slot_ptr(page, 0, slot_bytes))
    }

    /// Returns tuple slots no committed version ever reached (a writer's own).
    pub(crate) fn give_back_tuples(&self, slots: impl IntoIterator<Item = u64>) {
        let mut s = self.lock_state();
        for ptr in slots {
            release_slot(&mut s, ptr);
        }
    }

    /// A committed tuple's row (layout `pointers`): the pointer must name a slot of a tuple page
    /// of the table, holding `key`, written by version `newest` or older, matching its crc.
    pub(crate) fn tuple(&self, shape: &Shape, ptr: u64, key: u64, newest: u64) -> Result<&[u8]> {
        let slot_bytes = tuples::slot_bytes(shape);
        let Some((page, _)) = tuples::locate(ptr, slot_bytes) else {
            return Err(DbError::Corrupt(format!(
                "cow: table {}: key {key}'s tuple pointer {ptr} is not a slot's",
                shape.owner - 1
            )));
        };
        let bytes = self.page(page)?;
        // Tuples are read through the mapping under `io=fs` too (their pages change in place).
        self.region.load(page_offset(page), tuples::HEADER as u64);
        let at = page_offset(page) + ptr % storage::format::PAGE_SIZE_U64;
        self.region.load(at, slot_bytes as u64);
        tuples::check_page(bytes, page, shape)?;
        tuples::row(bytes, ptr, shape, key, newest, self.row_checksums())
    }

    /// Returns pages no committed version ever reached (a writer's own, on abort or when it
    /// drops one of its new nodes).
    pub(crate) fn give_back(&self, pages: impl IntoIterator<Item = PageId>) {
        self.lock_state().free.extend(pages);
    }

    /// `cow-reuse-early`: frees a committed page the moment a writer copies it.
    pub(crate) fn fault_reuse_early(&self) -> bool {
        self.fault == Some(Fault::CowReuseEarly)
    }

    /// Moves pending frees whose version is durable and older than every snapshot to the
    /// free set.
    fn reclaim(&self, s: &mut State) {
        if s.pending.is_empty() {
            return; // nothing to reclaim: no need to read every worker's pins
        }
        let oldest_reader = self.oldest_reader(s);
        while let Some((v, _, _)) = s.pending.front() {
            if *v > s.durable_version || *v > oldest_reader {
                break;
            }
            let Some((_, pages, slots)) = s.pending.pop_front() else { break };
            self.activity.add(Count::PagesReclaimed, pages.len() as u64);
            s.free.extend(pages);
            for ptr in slots {
                release_slot(s, ptr);
            }
        }
    }

    /// Commits a writer's new pages and tables as the next version (the caller holds the
    /// writer slot, `slot`, and its snapshot is current). Returns the durability token. An
    /// error before the version is published (no meta page) gives the writer's new pages back.
    /// Pipelined, the slot is handed on once the version is written and published to the next
    /// writer, and the commit returns once it is durable ([`Self::persist_in_turn`]).
    pub(crate) fn commit_version(
        &self,
        slot: WriterSlot<'_>,
        dirty: &mut std::collections::HashMap<PageId, layout::NodeBuf>,
        new_tuples: &mut std::collections::HashMap<u64, Vec<u8>>,
        tables: Vec<TableRoot>,
        (mut freed, freed_tuples): (Vec<PageId>, Vec<u64>),
        force_durable: bool,
    ) -> Result<CommitToken> {
        // Regression (`crashtest --workload tpcc --threads 2 --engine-opt group_commit_ms=1`,
        // intermittent): when the meta page could not be allocated (a full region, which ends a
        // run but not its checks) the writer's new pages were dropped without being given back,
        // and the integrity check found them neither reachable nor free. Nothing here was ever
        // visible: a commit that fails before publishing returns its pages.
        let meta_page = match self.device.check().and_then(|()| self.alloc()) {
            Ok(page) => page,
            Err(e) => {
                self.give_back(dirty.drain().map(|(page, _)| page));
                self.give_back_tuples(new_tuples.drain().map(|(ptr, _)| ptr));
                return Err(e);
            }
        };
        let mut s = self.lock_state();
        let number = s.current.number + 1;
        let swap_first = self.fault == Some(Fault::CowSwapBeforeNodes);
        // Pipelined, the pages are flushed after the slot is handed on.
        let flush_now = !swap_first && !self.pipelined;
        // (offset, bytes) written: flushed again by whoever closes the group.
        let mut written = Vec::with_capacity(dirty.len() + new_tuples.len() + 1);
        for (&ptr, tuple) in new_tuples.iter_mut() {
            let page = ptr / PAGE_SIZE_U64;
            let Some(tuple_page) = s.tuples.pages.get_mut(&page) else {
                return Err(DbError::Invalid(format!("cow: internal: slot {ptr} has no page")));
            };
            if !tuple_page.header_written {
                // The page's header, persisted by the same barrier as its first tuples.
                tuple_page.header_written = true;
                let header = tuples::page_header(tuple_page.owner, tuple_page.slot_bytes);
                self.write_page(page_offset(page), &header, flush_now);
                written.push((page_offset(page), header.len() as u64));
            }
            self.activity.add(Count::TuplesWritten, 1);
            tuples::stamp(tuple, number);
            self.write_page(ptr, tuple, flush_now);
            written.push((ptr, tuple.len() as u64));
        }
        // Pipelined, the state lock is not held over the copies: the writer slot keeps
        // `current` as it is, and the commit before this one may need the lock meanwhile.
        let mut held = Some(s);
        if self.pipelined {
            held = None;
        }
        for (&page, node) in dirty.iter_mut() {
            let bytes = node.seal(number);
            self.write_page(page_offset(page), bytes, flush_now);
            written.push((page_offset(page), bytes.len() as u64));
        }
        let meta = layout::encode_meta(number, &tables);
        let meta_crc = layout::stored_meta_crc(&meta);
        self.write_page(page_offset(meta_page), &meta, flush_now);
        written.push((page_offset(meta_page), meta.len() as u64));
        self.activity.add(Count::NodesWritten, dirty.len() as u64);
        if swap_first && !self.pipelined {
            // The fault: the master names the new meta page before its pages are persisted.
            self.swap_master(meta_page, meta_crc);
            for (offset, len) in &written {
                self.device.flush(*offset, *len);
            }
        }
        let mut s = held.unwrap_or_else(|| self.lock_state());
        if !self.group_commit.is_zero() {
            let me = std::thread::current().id();
            s.group_ranges.extend(written.iter().map(|&(offset, len)| (me, offset, len)));
        }
        let group = s.group;
        let now = Instant::now();
        let opened = *s.group_opened.get_or_insert(now);
        if let Some(old) = (s.current.meta_page != 0).then_some(s.current.meta_page) {
            freed.push(old);
        }
        let version = Arc::new(Version { number, meta_page, meta_crc, tables, group });
        s.current = version.clone();
        if !freed.is_empty() || !freed_tuples.is_empty() {
            s.pending.push_back((number, freed, freed_tuples));
        }
        self.counters.commit();
        if self.pipelined {
            // The next writer builds on this version from here; readers see it once durable.
            self.reclaim(&mut s);
            drop(s);
            drop(slot);
            self.persist_in_turn(&version, &written);
            self.device.check()?;
            return Ok(CommitToken::DURABLE);
        }
        let due = force_durable || now.duration_since(opened) >= self.group_commit;
        if due {
            self.close_group(&mut s);
        } else {
            let deadline = (opened + self.group_commit).duration_since(self.epoch);
            self.group_deadline_ns.store(deadline.as_nanos() as u64, Ordering::Release);
        }
        // Published to every worker before any reclaim reads their pins (module doc of
        // `ReaderSlot`): a transaction pins either the old version, seen by the reclaim, or
        // this. Without group commit only once durable, since a read-only transaction's token
        // is then `DURABLE` at once (a reader that saw the version before its master swap
        // was persisted could acknowledge a state a crash then lost).
        for slot in self.slots.iter() {
            slot.lock().latest = version.clone();
        }
        self.reclaim(&mut s);
        self.device.check()?;
        if self.group_commit.is_zero() {
            Ok(CommitToken::DURABLE)
        } else {
            Ok(CommitToken(group))
        }
    }

    /// Pipelined commit of version `v` (whose pages and meta page are `written`), after its
    /// writer handed the slot on: flushes its pages and issues its barrier, waits until the
    /// version before it has its master swap persisted, swaps the master to `v` and persists
    /// it, then publishes `v` to readers. Master swaps thus stay in version order, and each
    /// names pages persisted before it (its own by its barrier, those it shares with older
    /// versions by theirs, ordered before its swap by the turn); pages a version replaced are
    /// reused only once that version is durable (`reclaim`), as before. The flushes and the
    /// barrier, most of a write transaction's time, overlap the next writer's work instead of
    /// holding the writer slot.
    fn persist_in_turn(&self, v: &Arc<Version>, written: &[(u64, u64)]) {
        #[cfg(test)]
        {
            let hook = self.before_persist.lock().clone(); // not held while the hook runs
            if let Some(hook) = hook {
                hook(v.number);
            }
        }
        let swap_first = self.fault == Some(Fault::CowSwapBeforeNodes);
        if !swap_first {
            for &(offset, len) in written {
                self.device.flush(offset, len);
            }
            if self.fault != Some(Fault::CowSkipNodePersist) {
                self.barrier();
            }
        }
        let mut turn = self.wait_turn(v.number - 1);
        self.swap_master(v.meta_page, v.meta_crc);
        if swap_first {
            // The fault: the master named the new meta page before its pages were persisted.
            for &(offset, len) in written {
                self.device.flush(offset, len);
            }
            self.barrier();
        }
        {
            let mut s = self.lock_state();
            s.durable_version = v.number;
            // Published under the state lock, before the reclaim reads the pins (`ReaderSlot`).
            for slot in self.slots.iter() {
                slot.lock().latest = v.clone();
            }
            self.reclaim(&mut s);
        }
        *turn = v.number;
        self.swapped.store(v.number, Ordering::Release);
        drop(turn);
        self.turn_cv.notify_all();
    }

    /// Waits until version `number`'s master swap is persisted (pipelined commits); returns
    /// the turn's guard, which orders the next swap. Spins first for about a write's length.
    fn wait_turn(&self, number: u64) -> MutexGuard<'_, u64> {
        let spin_until = Instant::now() + WRITER_SPIN;
        while self.swapped.load(Ordering::Acquire) < number && Instant::now() < spin_until {
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        let mut turn = self.turn.lock();
        if *turn < number {
            self.activity.add(Count::TurnSleeps, 1);
        }
        while *turn < number {
            self.turn_cv.wait(&mut turn);
        }
        turn
    }

    /// Writes `bytes` at `offset` and, unless `flush` is false, flushes them (`io=nvm`; with
    /// `io=fs` the barrier's `fdatasync` does the flushing).
    fn write_page(&self, offset: u64, bytes: &[u8], flush: bool) {
        self.activity.add(Count::DeviceBytesWritten, bytes.len() as u64);
        self.device.write(offset, bytes);
        if flush {
            self.device.flush(offset, bytes.len() as u64);
        }
    }

    /// The persist barrier: a fence, or `fdatasync`.
    fn barrier(&self) {
        self.activity.add(Count::DeviceBarriers, 1);
        self.device.fence();
    }

    /// Stores and persists the master record (the 8-byte atomic swap).
    fn swap_master(&self, meta_page: PageId, meta_crc: u32) {
        self.activity.add(Count::MasterSwaps, 1);
        let word = layout::master_word(meta_page, meta_crc);
        self.write_page(MASTER_OFFSET, &word.to_le_bytes(), true);
        self.barrier();
    }

    /// Makes the current version durable: one barrier for every page its group wrote, then the
    /// master swap. The caller holds the state lock.
    fn close_group(&self, s: &mut State) {
        if s.durable_version == s.current.number {
            return;
        }
        // Regression (found by `crashtest --workload tpcc --threads 2 --engine-opt
        // group_commit_ms=1`): a group closed by another thread's `is_durable` fenced only that
        // thread's flushes, and the master named pages still in the writer's pending flushes.
        let me = std::thread::current().id();
        for (thread, offset, len) in std::mem::take(&mut s.group_ranges) {
            if thread != me {
                self.device.flush(offset, len);
            }
        }
        if self.fault != Some(Fault::CowSkipNodePersist) {
            self.barrier();
        }
        if self.fault != Some(Fault::CowSwapBeforeNodes) {
            self.swap_master(s.current.meta_page, s.current.meta_crc);
        }
        s.durable_version = s.current.number;
        self.durable_group.store(s.group, Ordering::Release);
        s.group += 1;
        s.group_opened = None;
        self.group_deadline_ns.store(u64::MAX, Ordering::Release);
    }

    /// Closes the open group if its interval has passed (or `now` is set).
    fn close_group_if_due(&self, now: bool) {
        if self.pipelined {
            return; // every commit persists its own version, in turn
        }
        let due_ns = self.group_deadline_ns.load(Ordering::Acquire);
        if !now && (self.epoch.elapsed().as_nanos() as u64) < due_ns {
            return;
        }
        let mut s = self.lock_state();
        self.close_group(&mut s);
        self.reclaim(&mut s);
    }

    /// Token of a read-only transaction that read `version`: durable once its group is.
    /// Pipelined, a writer's snapshot may be a version not yet durable (it read what the
    /// writer before it wrote): it waits for that version's master swap.
    pub(crate) fn read_token(&self, version: &Version) -> CommitToken {
        if self.pipelined {
            if self.swapped.load(Ordering::Acquire) < version.number {
                drop(self.wait_turn(version.number));
            }
            return CommitToken::DURABLE;
        }
        if self.group_commit.is_zero()
            || self.durable_group.load(Ordering::Acquire) >= version.group
        {
            CommitToken::DURABLE
        } else {
            CommitToken(version.group)
        }
    }

    pub(crate) fn note_reads_revalidated(&self) {
        self.activity.add(Count::ReadsRevalidated, 1);
    }

    pub(crate) fn note_snapshot_conflict(&self) {
        self.activity.add(Count::SnapshotConflicts, 1);
    }

    pub(crate) fn note_copy(&self) {
        self.activity.add(Count::NodesCopied, 1);
    }

    pub(crate) fn counters_ref(&self) -> &storage::counters::Counters {
        &self.counters
    }
}

/// The writer slot, held: counts how long it was held when dropped (`writer_slot_ns`).
pub(crate) struct WriterSlot<'a> {
    _guard: MutexGuard<'a, ()>,
    since: Instant,
    activity: &'a Activity,
}

impl<'a> WriterSlot<'a> {
    fn held(db: &'a Cow, guard: MutexGuard<'a, ()>) -> WriterSlot<'a> {
        WriterSlot { _guard: guard, since: Instant::now(), activity: &db.activity }
    }
}

impl Drop for WriterSlot<'_> {
    fn drop(&mut self) {
        self.activity.add(Count::WriterSlotNs, self.since.elapsed().as_nanos() as u64);
    }
}

/// Frees one allocated tuple slot; a tuple page left with none allocated becomes a free page.
fn release_slot(s: &mut State, ptr: u64) {
    let page = ptr / PAGE_SIZE_U64;
    let Some(p) = s.tuples.pages.get_mut(&page) else { return };
    p.used = p.used.saturating_sub(1);
    let TuplePage { owner, slot_bytes, used, .. } = *p;
    let free = s.tuples.free.entry(owner).or_default();
    if used > 0 {
        free.insert(ptr);
        return;
    }
    for i in 0..tuples::slots_per_page(slot_bytes) {
        free.remove(&tuples::slot_ptr(page, i, slot_bytes));
    }
    s.tuples.pages.remove(&page);
    s.free.insert(page);
}

/// What the reachability scan found.
struct Scan {
    free: BTreeSet<PageId>,
    high: PageId,
    in_use: u64,
    internal_nodes: u64,
    leaves_read: u64,
    tuples: TupleSpace,
}

/// The tuple layout the master page records (`true`: pointers), after [`read_master`]'s
/// checks.
fn read_tuple_layout(region: &Region) -> Result<bool> {
    read_master(region)?;
    layout::decode_master_header(region.read(MASTER_OFFSET + 8, 16))
        .map_err(|why| DbError::Corrupt(format!("cow: the master page is damaged: {why}")))
}

/// Reads the master page: the master word, after checking the page is cow layout 2.
fn read_master(region: &Region) -> Result<u64> {
    let word = region.read_u64(MASTER_OFFSET);
    let magic = region.read_u64(MASTER_OFFSET + 8);
    if magic == layout::MASTER_MAGIC {
        return Ok(word);
    }
    // Layout 1 stored a bare page id (high bits zero) and nothing after it.
    if magic == 0 && word != 0 && word >> layout::MASTER_PAGE_BITS == 0 {
        return Err(DbError::Format(
            "cow region written by an older build (cow layout 1: a master record without a \
             check); this build reads layout 2: load it again with this build"
                .into(),
        ));
    }
    Err(DbError::Corrupt(format!(
        "cow: the master page is damaged (magic {magic:#x}, word {word:#x})"
    )))
}

/// Reads and validates the master record and the version it names, then marks every page
/// reachable from it (internal nodes are read and validated, with their checksums; leaves are
/// only marked, except with layout `pointers`, where they are read too and every tuple slot
/// they point to is marked). Unreachable data pages below the highest reachable one are free,
/// and so are the unmarked slots of the tuple pages.
///
/// A master word that fails its check is `Corrupt`, never a fall back to an older version:
/// the word is one atomic store, so no crash leaves it torn, and an older version would lose
/// acknowledged commits.
fn recover(region: &Region, layout: &Layout, pointers: bool) -> Result<(Version, Scan)> {
    let word = read_master(region)?;
    let master = layout::master_page(word);
    let first = layout.first_data_page();
    let page_of = |p: PageId| -> Result<&[u8]> {
        if !layout.is_data_page(p) || page_offset(p + 1) > region.backed_len() {
            return Err(DbError::Corrupt(format!("cow: page {p} is outside the data pages")));
        }
        Ok(region.read(page_offset(p), storage::format::PAGE_SIZE))
    };
    let bad_check = || {
        DbError::Corrupt(format!(
            "cow: the master record ({word:#x}) fails its check against meta page {master}: the \
             master or the meta page it names is damaged"
        ))
    };
    if master == 0 {
        if !layout::master_matches(word, 0) {
            return Err(bad_check());
        }
        let v = Version { number: 0, meta_page: 0, meta_crc: 0, tables: Vec::new(), group: 0 };
        let scan = Scan {
            free: BTreeSet::new(),
            high: first,
            in_use: 0,
            internal_nodes: 0,
            leaves_read: 0,
            tuples: TupleSpace::default(),
        };
        return Ok((v, scan));
    }
    let meta = page_of(master)
        .map_err(|e| DbError::Corrupt(format!("cow: master record names page {master}: {e}")))?;
    let (number, tables) = layout::decode_meta(meta, master, |p| layout.is_data_page(p))?;
    let meta_crc = layout::stored_meta_crc(meta);
    if !layout::master_matches(word, meta_crc) {
        return Err(bad_check());
    }
    let mut used = std::collections::HashSet::new();
    used.insert(master);
    let mut internal_nodes = 0u64;
    let mut leaves_read = 0u64;
    let mut slots = std::collections::HashSet::new();
    let mut tuple_space = TupleSpace::default();
    for (id, t) in tables.iter().enumerate() {
        if t.root == 0 {
            continue;
        }
        let shape = Shape::new(id as TableId, t.spec.row_bytes, layout.node_capacity, pointers);
        // (page, level): depth-first; bounded by the pages of the region (each marked once).
        let mut stack = vec![(t.root, t.height as u16 - 1)];
        while let Some((page, level)) = stack.pop() {
            if !used.insert(page) {
                return Err(DbError::Corrupt(format!(
                    "cow: table {}: page {page} is reachable twice",
                    t.spec.name
                )));
            }
            if !layout.is_data_page(page) {
                return Err(DbError::Corrupt(format!(
                    "cow: table {}: child page {page} is outside the data pages",
                    t.spec.name
                )));
            }
            if level == 0 && !pointers {
                continue;
            }
            let node = Node::parse(page_of(page)?, page, &shape, level)?;
            if !node.crc_ok() {
                return Err(DbError::Corrupt(format!(
                    "cow: table {}: node at page {page} fails its checksum",
                    t.spec.name
                )));
            }
            check_written_before(&node, page, number)?;
            if level == 0 {
                leaves_read += 1;
                for i in 0..node.count {
                    mark_tuple(&page_of, &shape, node.tuple(i), &mut slots, &mut tuple_space)?;
                }
                continue;
            }
            internal_nodes += 1;
            for i in 0..node.count {
                stack.push((node.child(i), level - 1));
            }
        }
    }
    if let Some(p) = tuple_space.pages.keys().find(|p| used.contains(p)) {
        return Err(DbError::Corrupt(format!("cow: page {p} is both a node and a tuple page")));
    }
    let high = used.iter().chain(tuple_space.pages.keys()).max().map_or(first, |m| m + 1);
    let free =
        (first..high).filter(|p| !used.contains(p) && !tuple_space.pages.contains_key(p)).collect();
    for (&page, p) in &tuple_space.pages {
        let free_slots = tuple_space.free.entry(p.owner).or_default();
        for i in 0..tuples::slots_per_page(p.slot_bytes) {
            let ptr = tuples::slot_ptr(page, i, p.slot_bytes);
            if !slots.contains(&ptr) {
                free_slots.insert(ptr);
            }
        }
    }
    let in_use = (used.len() + tuple_space.pages.len()) as u64;
    let version = Version { number, meta_page: master, meta_crc, tables, group: 0 };
    let tuples = tuple_space;
    Ok((version, Scan { free, high, in_use, internal_nodes, leaves_read, tuples }))
}

/// Marks the tuple slot `ptr` of `shape`'s table as in use (its page's header checked once;
/// the tuple itself is checked by whoever reads it).
fn mark_tuple<'r>(
    page_of: &impl Fn(PageId) -> Result<&'r [u8]>,
    shape: &Shape,
    ptr: u64,
    slots: &mut std::collections::HashSet<u64>,
    space: &mut TupleSpace,
) -> Result<()> {
    let slot_bytes = tuples::slot_bytes(shape);
    let Some((page, _)) = tuples::locate(ptr, slot_bytes) else {
        return Err(DbError::Corrupt(format!(
            "cow: table {}: tuple pointer {ptr} is not a slot's",
            shape.owner - 1
        )));
    };
    if !slots.insert(ptr) {
        return Err(DbError::Corrupt(format!("cow: tuple slot {ptr} is reachable twice")));
    }
    match space.pages.get_mut(&page) {
        Some(p) if p.owner == shape.owner => p.used += 1,
        Some(_) => {
            return Err(DbError::Corrupt(format!("cow: tuple page {page} is two tables'")));
        }
        None => {
            tuples::check_page(page_of(page)?, page, shape)?;
            let p = TuplePage { owner: shape.owner, slot_bytes, used: 1, header_written: true };
            space.pages.insert(page, p);
        }
    }
    Ok(())
}

/// A node reachable from version `number` must have been written by it or an older version: a
/// newer stamp means the page was reused (damage, or a master record that lost a write).
pub(crate) fn check_written_before(node: &Node<'_>, page: PageId, number: u64) -> Result<()> {
    if node.version() > number {
        return Err(DbError::Corrupt(format!(
            "cow: node at page {page} was written by version {}, after version {number} that \
             reaches it (a page reused under a live version: damage)",
            node.version()
        )));
    }
    Ok(())
}

/// What opening `region` would find (the version the master names), read without writing.
pub fn inspect(region: &Region, mut outer: crate::Inspection) -> Result<crate::Inspection> {
    let sb = match Superblock::verdict(region, false)? {
        storage::format::Verdict::Open { sb, .. } => sb,
        storage::format::Verdict::Format => return Ok(outer),
    };
    let (version, scan) = recover(region, &sb.layout, read_tuple_layout(region)?)?;
    outer.verdict = format!(
        "{}; master names version {} ({} tables, {} pages in use): nothing to recover",
        outer.verdict,
        version.number,
        version.tables.len(),
        scan.in_use
    );
    Ok(outer)
}

impl Engine for Cow {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let slot = WriterSlot::held(self, self.writer.lock());
        let current = self.current();
        if current.tables.iter().any(|t| t.spec.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} already exists", spec.name)));
        }
        if current.tables.len() >= layout::MAX_TABLES {
            return Err(DbError::Invalid(format!(
                "catalog full: at most {} tables",
                layout::MAX_TABLES
            )));
        }
        let mut tables = current.tables.clone();
        tables.push(TableRoot { spec: spec.clone(), root: 0, height: 0, rows: 0 });
        let id = (tables.len() - 1) as TableId;
        let none = (Vec::new(), Vec::new());
        let (mut dirty, mut tuples) = Default::default();
        self.commit_version(slot, &mut dirty, &mut tuples, tables, none, true)?;
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        let v = self.current();
        v.tables.iter().position(|t| t.spec.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.current().tables.iter().map(|t| t.spec.clone()).collect()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if worker >= self.workers {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: the engine was opened for {} workers",
                self.workers
            )));
        }
        Ok(Box::new(txn::CowTxn::new(self, worker)))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        if token.0 <= self.durable_group.load(Ordering::Acquire) {
            return true;
        }
        self.close_group_if_due(false);
        token.0 <= self.durable_group.load(Ordering::Acquire)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        // Bounded: the group's interval, then this caller closes it.
        let limit = Instant::now() + self.group_commit;
        while !self.is_durable(token) {
            if Instant::now() >= limit {
                self.close_group_if_due(true);
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.device.check()
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }

    fn region(&self) -> Option<&Region> {
        Some(&self.region)
    }

    fn check_integrity(&self) -> IntegrityResult {
        txn::check_integrity(self).map_err(|e| e.to_string())
    }

    fn counters(&self) -> Option<storage::EngineCounters> {
        Some(self.counters.snapshot())
    }

    fn activity(&self) -> Vec<(&'static str, u64)> {
        let a = &self.activity;
        let mut v: Vec<_> =
            Count::ALL.iter().map(|&(what, name)| (name, a.counts.get(what as usize))).collect();
        v.extend([
            ("shared_lock_acquires", a.shared.get(0)),
            ("shared_counter_rmws", a.shared.get(1)),
        ]);
        if let Some(fs) = &self.fs {
            v.extend([
                ("file_reads", fs.stats.get(0)),
                ("file_read_bytes", fs.stats.get(1)),
                ("page_cache_hits", fs.stats.get(2)),
            ]);
        }
        v
    }

    fn footprint_bytes(&self) -> Option<u64> {
        // Pages in use: every page below the high mark that is not free (live versions'
        // pages and pages waiting for reclamation), plus the metadata pages.
        let s = self.lock_state();
        Some(page_offset(s.high - s.free.len() as u64))
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        let page = offset / PAGE_SIZE_U64;
        Some(match page {
            0 => "superblock".into(),
            1 => "superblock copy".into(),
            CATALOG_PAGE => "master record".into(),
            p if p < self.layout.first_data_page() => "unused metadata page".into(),
            _ => "B+tree node or meta page".into(),
        })
    }

    fn shutdown(&self) -> Result<()> {
        if self.writer.is_locked() {
            return Err(DbError::Invalid("a write transaction is still open".into()));
        }
        if self.pipelined {
            // A commit that handed the slot on may still be persisting.
            drop(self.wait_turn(self.current().number));
        }
        self.close_group_if_due(true);
        self.device.check()
    }
}

//! In-Place Updates — Pelley, Gold, Wenisch, Bridge, *Storage Management in the NVRAM Era*,
//! VLDB 2014, §3.2 (thesis §4.2); NVM-InP in Arulraj et al., SIGMOD 2015.
//!
//! Data pages live in the region and are updated in place. Before each write, a physical undo
//! record (the before-image of the byte range) is appended to the transaction's private undo log
//! and persisted; the write itself is persisted by commit. Commit is one 8-byte store: the undo
//! log's header word goes from *active* to *free*. Recovery rolls back the undo logs of in-flight
//! transactions only, so its time depends on in-flight work, not on history.
//!
//! **Recovery invariant**: every in-place change reachable after a crash is either covered by a
//! persisted undo record of an active log or belongs to a committed transaction.
//!
//! Structure: heap rows never move (rid = slot offset), the B+tree maps key -> rid; index
//! changes are system transactions (`storage::systxn`) with their own physical undo, so the
//! user transaction's undo of an index change is *logical* (remove or re-insert the key) and
//! survives splits and merges done by others in between.
//!
//! **Persist barriers**, against Pelley's Fig. 2 (`persist_wal` = 2 barriers per log append,
//! `persist_page` = 4 per page update, so 6 per update):
//! * row update: 1 (its undo record; earlier in-place writes ride on the same fence);
//! * commit: 2 (persist the remaining in-place writes; persist the free mark); a read-only
//!   transaction: 0; a transaction with deletes: 4 (committed mark, slot frees, free mark);
//! * insert / delete: 1 for the logical undo records, plus 3 for the index system transaction
//!   (undo record, data, free mark) and 1 more per extra page a split or merge rewrites.
//!
//! Deliberate differences (`protocol=lean`, the default): undo records carry a checksum and
//! generation instead of a separately persisted tail LSN (saves `persist_wal`'s second barrier),
//! and pages are not copied to a page log: the before-image of just the written bytes is the
//! undo record, so a torn in-place write is already undone by it.
//!
//! `protocol=pelley` runs the paper's protocol for reproduction: each row write (update, insert)
//! latches its heap page, appends the undo entry with `persist_wal` (records without their
//! checksums, barrier, checksums, barrier) and writes with `persist_page` (the before-image of
//! the page's lines the write dirties goes to the worker's system undo log, which is free
//! between system transactions and so serves as the page log; barrier; log marked active =
//! valid; barrier; the write in place; barrier; log marked free = invalid; barrier): 6 barriers
//! per page update. System transactions (B+tree changes) append with `persist_wal` too but keep
//! their own data/free-mark barriers instead of a page log (their system log is busy holding
//! their undo); commit is the same 8-byte free mark. Measured, TPC-B 1 thread: 29.06 barriers
//! per transaction (lean 9.04).

pub mod options;
mod recovery;
mod txn;

pub use recovery::inspect;

use crate::{EngineOptions, Fault};
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use storage::alloc::PageAllocator;
use storage::btree::{BTree, RootRef};
use storage::catalog::{self, CatalogEntry};
use storage::engine::{check_spec, RecoveryReport};
use storage::format::{
    page_offset, Layout, PageId, Superblock, CATALOG_PAGE, MAX_WORKERS, PAGE_SIZE_U64,
};
use storage::pages::PageClass::Heap;
use storage::pages::PageStore;
use storage::systxn::SysTxn;
use storage::undo::UndoLog;
use storage::{DbError, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};

pub use options::Options;

pub const ENGINE_NAME: &str = "inplace";

/// How a page update persists (`--engine-opt protocol=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Ours (the default): one barrier per undo append (checksummed records need no trailer
    /// persist), in-place writes persisted by the next barrier or by commit.
    Lean,
    /// Pelley's (VLDB 2014 §3.2, Fig. 2; thesis §4.2.2): a page update (1) latches the page,
    /// (2) appends its undo entry with `persist_wal` (2 barriers), (3) writes the page with
    /// `persist_page` (the page's before-image to a page log, mark it valid, write in place,
    /// mark it invalid: 4 barriers), (4) unlatches: 6 barriers per page update.
    Pelley,
}

/// A worker's hints of where keys' rows are: a 4-way set-associative table of (key tag, slot
/// address) pairs, one 64-byte line a set (`2^HINT_SET_BITS` sets, 2 MiB, allocated at the
/// worker's first point access; `--engine-opt index_hints=on`, off by default), private to the
/// worker (it is held with the worker's logs), so filling it writes nothing another thread
/// reads. A hint is only ever a guess: a read uses it
/// only after checking that the slot is a used slot of the table's heap holding the key, inside
/// the same optimistic read (the key's stripe word loaded before and after) as a tree search,
/// so a slot freed or reused since can only fail the check (the B+tree is searched then) or
/// fail the stripe check (the read is repeated). Two used slots hold one key only inside a
/// transaction that deleted and re-inserted it, under the key's exclusive lock: other readers
/// wait for its end (when the old slot is free), and its own worker forgets the hint when it
/// deletes or inserts the key. Hints are volatile: recovery starts with none.
pub(crate) struct SlotHints {
    sets: Box<[[(u64, u64); 4]]>,
    /// The next way replaced in a full set (a worker-private clock).
    clock: usize,
}

const HINT_SET_BITS: u32 = 15;

impl SlotHints {
    fn new() -> SlotHints {
        SlotHints { sets: vec![[(0, 0); 4]; 1 << HINT_SET_BITS].into_boxed_slice(), clock: 0 }
    }

    /// The key's tag (never 0, the empty way's) and set.
    fn place(table: TableId, key: u64) -> (u64, usize) {
        let h = (key ^ u64::from(table).rotate_left(40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h | 1, (h >> (64 - HINT_SET_BITS)) as usize)
    }

    /// The hinted slot of `key` (0: none; no slot is at offset 0, the superblock's).
    pub(crate) fn get(&self, table: TableId, key: u64) -> u64 {
        let (tag, set) = Self::place(table, key);
        self.sets[set].iter().find(|w| w.0 == tag).map_or(0, |w| w.1)
    }

    pub(crate) fn put(&mut self, table: TableId, key: u64, rid: u64) {
        let (tag, set) = Self::place(table, key);
        let ways = &mut self.sets[set];
        let way = match ways.iter().position(|w| w.0 == tag || w.0 == 0) {
            Some(i) => i,
            None => {
                self.clock = self.clock.wrapping_add(1);
                self.clock % ways.len()
            }
        };
        ways[way] = (tag, rid);
    }

    pub(crate) fn forget(&mut self, table: TableId, key: u64) {
        let (tag, set) = Self::place(table, key);
        for w in self.sets[set].iter_mut().filter(|w| w.0 == tag) {
            *w = (0, 0);
        }
    }
}

impl Protocol {
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "lean" => Some(Protocol::Lean),
            "pelley" => Some(Protocol::Pelley),
            _ => None,
        }
    }
}

/// User undo record kinds (system records are in `storage::systxn`).
pub(crate) const REC_PHYS: u8 = storage::systxn::REC_PHYS;
pub(crate) const REC_HEAP_ALLOC: u8 = 2;
pub(crate) const REC_INDEX_INSERT: u8 = 3;
pub(crate) const REC_INDEX_DELETE: u8 = 4;
pub(crate) const REC_FREE_SLOT: u8 = 5;

/// Volatile state of one table.
pub(crate) struct TableRt {
    pub id: TableId,
    pub spec: TableSpec,
    pub slot_bytes: u32,
    pub entry: usize,
    pub root_latch: RwLock<()>,
    /// Free heap slots shared by the workers. Held while the heap grows or is scanned. Take it
    /// through [`TableRt::lock_free`] (counted).
    pub free: Mutex<FreeSlots>,
    /// Per worker: free slots moved off `free` (or freed by this worker) in batches of
    /// [`SLOT_BATCH`], so an insert or delete takes the shared list's mutex once per batch
    /// instead of once each. Only its worker locks a cache, except [`InPlace::drain_slot_caches`]
    /// (a full region): uncontended, that lock writes a line no other core reads. Volatile like
    /// `free`: a cached slot is free in the region, so a crash loses nothing (recovery's lazy
    /// scan finds it again).
    pub caches: Box<[crossbeam_utils::CachePadded<Mutex<Vec<u64>>>]>,
    /// Set (under `free`) once the lazy scan has walked the whole heap chain it was opened
    /// with: from then on no scan can list a slot, so a commit may write slot frees without
    /// holding `free` (see `InPlaceTxn::commit`).
    pub scan_done: AtomicBool,
    /// Keys that live transactions have deleted (see [`PendingDeletes`]).
    pub deleted: PendingDeletes,
}

/// Free slots a worker moves between a table's shared list and its own cache at once; a cache
/// holding more than twice this gives the surplus back.
pub const SLOT_BATCH: usize = 32;

/// Heap pages a cache refill may scan beyond the one that found its first slot (bounds the
/// time the shared list is held when the pages met are full).
const REFILL_SCANS: usize = 4;

thread_local! {
    /// Acquisitions of any table's shared free-slot mutex by this thread (tests count them).
    static SHARED_FREE_LOCKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many times the calling thread has taken a table's shared free-slot mutex (issue 35:
/// inserts and deletes take it once per [`SLOT_BATCH`], counted by tests).
pub fn shared_free_list_locks() -> u64 {
    SHARED_FREE_LOCKS.with(|c| c.get())
}

impl TableRt {
    /// The runtime state of catalog entry `entry`, for `workers` workers (the administrator's
    /// included), with the heap chain starting at `heap_head` still to be scanned.
    pub fn new(
        id: TableId,
        spec: TableSpec,
        slot_bytes: u32,
        entry: usize,
        heap_head: PageId,
        workers: usize,
    ) -> TableRt {
        TableRt {
            id,
            spec,
            slot_bytes,
            entry,
            root_latch: RwLock::new(()),
            free: Mutex::new(FreeSlots::new(heap_head)),
            caches: (0..workers).map(|_| Default::default()).collect(),
            scan_done: AtomicBool::new(heap_head == 0),
            deleted: PendingDeletes::default(),
        }
    }

    /// The shared free-slot list, locked (and counted for this thread).
    pub fn lock_free(&self) -> parking_lot::MutexGuard<'_, FreeSlots> {
        SHARED_FREE_LOCKS.with(|c| c.set(c.get() + 1));
        self.free.lock()
    }

    /// Worker `worker`'s cache of free slots (an out-of-range worker shares the last one).
    pub fn cache(&self, worker: usize) -> parking_lot::MutexGuard<'_, Vec<u64>> {
        self.caches[worker.min(self.caches.len() - 1)].lock()
    }
}

/// Keys deleted by transactions that have not ended yet. A delete removes its key from the
/// B+tree at once, so a scan would pass over the gap without meeting the deleter's lock and
/// read the uncommitted delete: a committed transaction could then depend on one that a
/// crash rolls back (found by `crashtest --workload tpcc --threads 2`: two deliveries, the
/// second skipping the first's in-flight new-order delete). Scans check each gap they pass
/// against this set and lock what they find, so they conflict with the deleter as a read of
/// the key would.
#[derive(Default)]
pub(crate) struct PendingDeletes {
    /// Fast path: scans skip the set while no delete is pending.
    count: std::sync::atomic::AtomicUsize,
    keys: Mutex<std::collections::BTreeSet<u64>>,
}

impl PendingDeletes {
    pub fn add(&self, key: u64) {
        if self.keys.lock().insert(key) {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
    }

    pub fn remove(&self, key: u64) {
        if self.keys.lock().remove(&key) {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The pending keys in `low..=high` (none while the set is empty).
    pub fn within(&self, low: u64, high: u64) -> Vec<u64> {
        if low > high || self.count.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.keys.lock().range(low..=high).copied().collect()
    }
}

/// Byte offset of a heap page's `next` link (`storage::heap`'s header layout).
const HEAP_NEXT_OFFSET: usize = 8;

/// A table's free heap slots, found lazily (open scans nothing: recovery is O(in-flight)).
/// Invariant: a free slot of a page in `scanned` is on `list` or held by a transaction; a
/// free slot of a page not yet scanned is found by the scan, never pushed. A page whose every
/// slot is listed may leave the heap (`InPlace::release_empty_heap_pages`).
pub(crate) struct FreeSlots {
    pub list: Vec<u64>,
    /// Next page of the heap chain as it was at open that is not yet scanned (0: none left).
    pub next_page: PageId,
    pub scanned: HashSet<PageId>,
}

impl FreeSlots {
    pub fn new(heap_head: PageId) -> FreeSlots {
        FreeSlots { list: Vec::new(), next_page: heap_head, scanned: HashSet::new() }
    }

    /// Makes a slot freed by a persisted commit or rollback allocatable again.
    pub fn give_back(&mut self, rid: u64) {
        if self.scanned.contains(&(rid / PAGE_SIZE_U64)) {
            self.list.push(rid);
        }
    }
}

/// One worker's persistent logs.
pub(crate) struct WorkerLogs {
    pub user: UndoLog,
    pub sys: UndoLog,
    /// Transactions this worker has begun: with the worker's index, a transaction id that no
    /// other worker can issue, so `begin` writes no word another worker reads.
    pub begun: u64,
    /// Where this worker found keys' rows (`None` until its first point read, and always
    /// when the engine's hints are off).
    pub hints: Option<SlotHints>,
    /// The worker's last transaction's list of in-place writes, empty, kept for its capacity:
    /// the next transaction's writes are listed without allocating.
    pub dirty: Vec<(u64, u64)>,
    /// The age of the worker's last transaction if it died in wait-die (0: none): its retry,
    /// the worker's next transaction, keeps it (`storage::lock::LockSet::refused`).
    pub retry_age: u64,
}

impl WorkerLogs {
    /// The worker's hints, allocated at first use.
    pub(crate) fn hints(&mut self) -> &mut SlotHints {
        self.hints.get_or_insert_with(SlotHints::new)
    }
}

/// The tables of an open engine by id. A table, once created, stays while the engine is open,
/// so readers take no latch and bump no reference count: looking a table up on every operation
/// writes nothing shared (on 16 threads a shared `RwLock` read here was one cache line that
/// every operation of every thread wrote).
pub(crate) struct TableSet {
    slots: Box<[OnceLock<TableRt>]>,
    /// Serialises creation (catalog changes are rare and go through the administrator's log).
    create: Mutex<()>,
}

impl TableSet {
    pub fn new(tables: Vec<TableRt>) -> TableSet {
        let slots: Box<[OnceLock<TableRt>]> =
            (0..catalog::MAX_TABLES).map(|_| OnceLock::new()).collect();
        for (slot, t) in slots.iter().zip(tables) {
            let _ = slot.set(t);
        }
        TableSet { slots, create: Mutex::new(()) }
    }

    pub fn get(&self, id: TableId) -> Option<&TableRt> {
        self.slots.get(id as usize)?.get()
    }

    /// The tables in id order (ids are dense: entry `i` is table `i`).
    pub fn iter(&self) -> impl Iterator<Item = &TableRt> {
        self.slots.iter().map_while(|s| s.get())
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }
}

pub struct InPlace {
    pub(crate) region: Region,
    pub(crate) layout: Layout,
    pub(crate) store: PageStore,
    pub(crate) alloc: PageAllocator,
    pub(crate) locks: storage::lock::LockManager,
    pub(crate) tables: TableSet,
    /// `layout.workers` logs: the last one is the administrator's (catalog changes).
    pub(crate) workers: Box<[Mutex<WorkerLogs>]>,
    pub(crate) report: RecoveryReport,
    pub(crate) fault: Option<Fault>,
    pub(crate) protocol: Protocol,
    /// Whether point reads use the workers' [`SlotHints`].
    pub(crate) hints: bool,
    /// `retry_keeps_age`: a transaction that died in wait-die hands its age to its worker's
    /// next transaction, taken to be its retry ([`WorkerLogs::retry_age`]).
    pub(crate) retry_keeps_age: bool,
    /// Whether a point read searches the B+tree before its optimistic read starts and checks
    /// the slot found inside it, as a hint (`InPlaceTxn::read`). Off while a read model
    /// counts accesses (`--read-latency`, `--cache-pages`, the CPU-cache model): a key found
    /// absent is searched again inside the read, which the model would charge twice.
    pub(crate) search_first: bool,
    /// Set when a transaction was dropped during a panic without rolling back: its undo log
    /// is still active, so the handle refuses further work (reopening recovers).
    pub(crate) poisoned: AtomicBool,
}

/// The layout of a region of `page_count` pages formatted with `options`.
fn layout(options: &EngineOptions, page_count: u64) -> Layout {
    Layout {
        page_count,
        workers: options.workers + 1,
        undo_pages: options.undo_pages,
        sys_undo_pages: options.sys_undo_pages,
        node_capacity: options.node_capacity,
        row_checksums: options.checksums,
    }
}

/// The pages formatting a region of `pages` requires (see [`crate::min_region_bytes`]): the
/// metadata and 16 data pages, as [`Layout::validate`] asks.
pub(crate) fn needed_pages(options: &EngineOptions, pages: u64) -> u64 {
    layout(options, pages).first_data_page() + 16
}

impl InPlace {
    /// Opens the engine: formats a blank region, otherwise validates and recovers it.
    pub fn open(region: Region, options: &EngineOptions) -> Result<InPlace> {
        let started = std::time::Instant::now();
        if options.cache_pages.is_some() && region.cpu_cache_on() {
            return Err(DbError::Invalid(
                "cache_pages (Pelley's page-cache read model) and a CPU cache (N-Store's) both \
                 charge reads: give one of them"
                    .into(),
            ));
        }
        let (layout, formatted) = match Superblock::read(&region, ENGINE_NAME, region.created())? {
            Some(sb) => (sb.layout, false),
            None => (Self::format(&region, options)?, true),
        };
        let mut engine = recovery::recover(region, layout, options)?;
        engine.report.formatted = formatted;
        engine.report.duration = started.elapsed();
        Ok(engine)
    }

    fn format(region: &Region, options: &EngineOptions) -> Result<Layout> {
        if options.workers == 0 || options.workers >= MAX_WORKERS {
            return Err(DbError::Invalid(format!("workers must be 1..{MAX_WORKERS}")));
        }
        let layout = layout(options, region.len() / PAGE_SIZE_U64);
        layout.validate()?;
        // A growing region's file must hold the metadata pages before they are written.
        region.ensure_backed(page_offset(layout.first_data_page() + 16)).map_err(|e| {
            DbError::RegionFull(format!("the region cannot hold its metadata: {e}"))
        })?;
        let sb = Superblock { engine: ENGINE_NAME.into(), layout };
        sb.begin_format(region);
        for w in 0..layout.workers {
            UndoLog::format(region, page_offset(layout.undo_log_page(w)));
            UndoLog::format(region, page_offset(layout.sys_undo_log_page(w)));
        }
        region.write(page_offset(CATALOG_PAGE), &[0u8; storage::format::PAGE_SIZE]);
        region.flush(page_offset(CATALOG_PAGE), PAGE_SIZE_U64);
        PageAllocator::format(region, &layout);
        region.fence();
        // Last: a crash before this leaves a region under the formatting magic, formatted again
        // on the next open.
        sb.publish(region);
        Ok(layout)
    }

    pub(crate) fn table_rt(&self, table: TableId) -> Result<&TableRt> {
        self.tables.get(table).ok_or(DbError::NoSuchTable(table))
    }

    pub(crate) fn tree<'a>(&'a self, t: &'a TableRt) -> BTree<'a> {
        let root = RootRef {
            page: CATALOG_PAGE,
            offset: catalog::entry_offset(t.entry) + catalog::E_ROOT,
        };
        let capacity = self.layout.node_capacity as usize;
        BTree::new(&self.store, root, &t.root_latch, capacity, t.id + 1)
    }

    fn admin_worker(&self) -> usize {
        self.layout.workers as usize - 1
    }

    /// Persist-barrier accounting hook for tests: fences issued so far.
    pub fn fences(&self) -> u64 {
        self.region.stats().fences
    }

    /// A free slot of `t`: from the free list, else from the next heap page not yet scanned,
    /// else from a new heap page. The caller holds `t.free`.
    pub(crate) fn take_slot(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
        free: &mut FreeSlots,
    ) -> Result<u64> {
        let mut scanned_now = 0u64;
        loop {
            if let Some(rid) = free.list.pop() {
                return Ok(rid);
            }
            if free.next_page == 0 {
                self.grow_heap(t, worker, sys_log, free)?;
                continue;
            }
            scanned_now += 1;
            if scanned_now > self.layout.page_count {
                return Err(DbError::Corrupt(format!("table {}: heap chain loops", t.spec.name)));
            }
            self.scan_heap_page(t, free)?;
        }
    }

    /// A free slot of `t` for worker `worker`: from its cache, else with a batch of up to
    /// [`SLOT_BATCH`] from the shared list (scanning or growing the heap as
    /// [`InPlace::take_slot`] does). A full region first takes back the slots every worker
    /// holds cached, of every table, and tries again: a cache never makes a region full.
    pub(crate) fn take_cached_slot(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
    ) -> Result<u64> {
        if let Some(rid) = t.cache(worker).pop() {
            return Ok(rid);
        }
        match self.refill_slot_cache(t, worker, sys_log) {
            Err(DbError::RegionFull(_)) if self.drain_slot_caches(worker, sys_log) > 0 => {
                self.refill_slot_cache(t, worker, sys_log)
            }
            r => r,
        }
    }

    /// One shared-list acquisition: a slot for the caller and up to `SLOT_BATCH - 1` more for
    /// `worker`'s cache (already listed, or from at most [`REFILL_SCANS`] more heap pages,
    /// scanned or grown).
    fn refill_slot_cache(&self, t: &TableRt, worker: usize, sys_log: &mut UndoLog) -> Result<u64> {
        let mut batch = Vec::with_capacity(SLOT_BATCH);
        let first = {
            let mut free = t.lock_free();
            let first = self.take_slot(t, worker, sys_log, &mut free)?;
            let mut scans = 0;
            while batch.len() + 1 < SLOT_BATCH {
                if let Some(rid) = free.list.pop() {
                    batch.push(rid);
                } else if scans == REFILL_SCANS {
                    break;
                } else if free.next_page == 0 {
                    // A heap page's slots are rarely a multiple of the batch: growing now
                    // keeps the refill at one acquisition per batch. The page is needed soon
                    // anyway; on a full region, the batch is what it is.
                    scans += 1;
                    if self.grow_heap(t, worker, sys_log, &mut free).is_err() {
                        break;
                    }
                } else {
                    scans += 1;
                    // A damaged page is reported by the `take_slot` that reaches it.
                    if self.scan_heap_page(t, &mut free).is_err() {
                        break;
                    }
                }
            }
            first
        };
        // Reversed: the cache pops the slots in the order the shared list would have.
        t.cache(worker).extend(batch.into_iter().rev());
        Ok(first)
    }

    /// Puts `rids` (free in the region, durably, and held by no transaction) in `worker`'s
    /// cache of `t`; past `2 * SLOT_BATCH` cached, all but `SLOT_BATCH` go back to the shared
    /// list in one acquisition, and heap pages they leave wholly listed leave the heap.
    pub(crate) fn give_slots(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
        rids: impl IntoIterator<Item = u64>,
    ) {
        let surplus: Vec<u64> = {
            let mut cache = t.cache(worker);
            cache.extend(rids);
            if cache.len() <= 2 * SLOT_BATCH {
                return;
            }
            let n = cache.len() - SLOT_BATCH;
            cache.drain(..n).collect()
        };
        self.return_slots(t, worker, sys_log, &surplus);
    }

    /// [`InPlace::give_slots`] for slots of several tables, one call per table.
    pub(crate) fn give_slots_by_table(
        &self,
        worker: usize,
        sys_log: &mut UndoLog,
        slots: &[(TableId, u64)],
    ) -> Result<()> {
        let mut by_table = std::collections::BTreeMap::<TableId, Vec<u64>>::new();
        for &(table, rid) in slots {
            by_table.entry(table).or_default().push(rid);
        }
        for (table, rids) in by_table {
            self.give_slots(self.table_rt(table)?, worker, sys_log, rids);
        }
        Ok(())
    }

    /// Lists `rids` on `t`'s shared list and releases the heap pages that leaves wholly free.
    fn return_slots(&self, t: &TableRt, worker: usize, sys_log: &mut UndoLog, rids: &[u64]) {
        let mut free = t.lock_free();
        let mut pages = std::collections::BTreeSet::new();
        for &rid in rids {
            free.give_back(rid);
            pages.insert(rid / PAGE_SIZE_U64);
        }
        self.release_empty_heap_pages(t, worker, sys_log, &mut free, &pages);
    }

    /// Moves every worker's cached slots, of every table, back to the shared lists (and the
    /// heap pages that empties to the allocator): what a full region does before it says so.
    /// Returns how many slots moved. Takes no lock while holding another. `sys_log` is
    /// `worker`'s.
    pub(crate) fn drain_slot_caches(&self, worker: usize, sys_log: &mut UndoLog) -> usize {
        let mut moved = 0;
        for t in self.tables.iter() {
            let rids: Vec<u64> =
                t.caches.iter().flat_map(|c| std::mem::take(&mut *c.lock())).collect();
            if !rids.is_empty() {
                moved += rids.len();
                self.return_slots(t, worker, sys_log, &rids);
            }
        }
        moved
    }

    /// Lists the free slots of the next unscanned heap page (validated) and moves on.
    fn scan_heap_page(&self, t: &TableRt, free: &mut FreeSlots) -> Result<()> {
        let page = free.next_page;
        let hp = self.heap_page(t, page)?;
        if !free.scanned.insert(page) {
            return Err(DbError::Corrupt(format!(
                "table {}: heap chain visits page {page} twice",
                t.spec.name
            )));
        }
        for i in (0..hp.slots).rev() {
            let rid = storage::heap::rid(page, t.slot_bytes, i);
            match self.region.read_u64(rid) {
                storage::heap::SLOT_FREE => free.list.push(rid),
                w if storage::heap::slot_state(w) == storage::heap::SLOT_USED => {}
                s => {
                    return Err(DbError::Corrupt(format!(
                        "table {}: slot {rid} has state {s}",
                        t.spec.name
                    )))
                }
            }
        }
        free.next_page = hp.next;
        if hp.next == 0 {
            t.scan_done.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Gives the heap pages among `pages` whose every slot is on `free`'s list back to the page
    /// allocator, so space a table freed can go to another table (issue 39: a database emptied
    /// of large values could not take small ones). Best effort: a page that cannot be unlinked
    /// now stays in the heap, where its table reuses it. The caller holds `t.free`.
    ///
    /// Safe against a crash: every slot of such a page is free and persisted so (the frees'
    /// undo log is finished), none is held by a live transaction (it would not be listed), and
    /// the unlink and the page free are one system transaction: rolled back, the page is an
    /// empty heap page of its table again; committed, it is off the chain and free.
    pub(crate) fn release_empty_heap_pages(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
        free: &mut FreeSlots,
        pages: &std::collections::BTreeSet<PageId>,
    ) {
        let slots = storage::heap::slots_per_page(t.slot_bytes);
        for &page in pages {
            if !free.scanned.contains(&page) {
                continue;
            }
            let listed = free.list.iter().filter(|rid| **rid / PAGE_SIZE_U64 == page).count();
            if listed < slots || self.unlink_heap_page(t, worker, sys_log, page).is_err() {
                continue;
            }
            free.list.retain(|rid| *rid / PAGE_SIZE_U64 != page);
            free.scanned.remove(&page);
        }
    }

    /// Takes `page` off `t`'s heap chain and frees it, in one system transaction.
    fn unlink_heap_page(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
        page: PageId,
    ) -> Result<()> {
        let entry_off = catalog::entry_offset(t.entry);
        let head = storage::format::get_u64(
            self.store.page(CATALOG_PAGE),
            entry_off + catalog::E_HEAP_HEAD,
        );
        let next = self.heap_page(t, page)?.next;
        let (mut prev, mut at, mut steps) = (None, head, 0u64);
        while at != page {
            steps += 1;
            if at == 0 || steps > self.layout.page_count {
                return Err(DbError::Corrupt(format!(
                    "table {}: heap page {page} is not on its chain",
                    t.spec.name
                )));
            }
            prev = Some(at);
            at = self.heap_page(t, at)?.next;
        }
        let mut sys = self.sys_txn(worker, sys_log);
        let result = (|| {
            let link = next.to_le_bytes();
            match prev {
                None => storage::pages::PageWriter::write(
                    &mut sys,
                    CATALOG_PAGE,
                    &[(entry_off + catalog::E_HEAP_HEAD, &link)],
                )?,
                Some(p) => {
                    storage::pages::PageWriter::write(&mut sys, p, &[(HEAP_NEXT_OFFSET, &link)])?
                }
            }
            storage::pages::PageWriter::free_page(&mut sys, page)
        })();
        match result {
            Ok(()) => sys.commit(),
            Err(e) => {
                sys.abort()?;
                Err(e)
            }
        }
    }

    /// Validates and parses heap page `page` of table `t`.
    pub(crate) fn heap_page(&self, t: &TableRt, page: PageId) -> Result<storage::heap::HeapPage> {
        let bad = |why: String| {
            DbError::Corrupt(format!("table {}: heap page {page}: {why}", t.spec.name))
        };
        if !self.store.is_data_page(page) {
            return Err(bad("outside the data pages".into()));
        }
        let hp = storage::heap::parse(self.store.page(page)).map_err(bad)?;
        if hp.table != t.id || hp.slot_bytes != t.slot_bytes {
            return Err(bad(format!("belongs to table {}", hp.table)));
        }
        if hp.next != 0 && !self.store.is_data_page(hp.next) {
            return Err(bad(format!("next page {} outside the data pages", hp.next)));
        }
        Ok(hp)
    }

    /// Validates a rid read from an index or an undo record and the slot it names: in use and
    /// holding `key` (when given). Returns the slot's state word (0 without a key).
    pub(crate) fn check_row(&self, t: &TableRt, rid: u64, key: Option<u64>) -> Result<u64> {
        let page = storage::heap::check_rid(&self.store, t.id, t.slot_bytes, rid)?;
        let Some(key) = key else { return Ok(0) };
        self.slot_word(page, rid, key).map_err(|(state, k)| {
            DbError::Corrupt(format!(
                "table {}: index key {key} names slot {rid} holding state {state} key {k}",
                t.spec.name
            ))
        })
    }

    /// Asks the CPU for slot `rid`'s heap page header (checked first) and its first `bytes`
    /// (slot header, row), so that their misses overlap instead of following one another.
    /// `rid` may be unchecked (a guess): a prefetch reads nothing and stays inside the mapping.
    pub(crate) fn prefetch_slot(&self, rid: u64, bytes: u64) {
        self.region.prefetch(rid - rid % PAGE_SIZE_U64, 64);
        self.region.prefetch(rid, bytes);
    }

    /// The state word of slot `rid` if it is a used slot of `t`'s heap holding `key` (a
    /// [`SlotHints`] guess checked as [`InPlace::check_row`] checks what the index names):
    /// `None`, never an error, for any other address, 0 included.
    pub(crate) fn hinted_row(&self, t: &TableRt, rid: u64, key: u64) -> Option<u64> {
        if rid == 0 {
            return None;
        }
        let page = storage::heap::check_rid(&self.store, t.id, t.slot_bytes, rid).ok()?;
        self.slot_word(page, rid, key).ok()
    }

    /// The state word of the slot `rid` on heap page `page` (checked by `heap::check_rid`) if
    /// it is used and holds `key`; otherwise its state and key.
    fn slot_word(&self, page: PageId, rid: u64, key: u64) -> std::result::Result<u64, (u64, u64)> {
        self.store.touch_more(Heap, page, pmem::line_span(rid, storage::heap::SLOT_HEADER).count);
        let (word, k) = (self.region.read_u64(rid), self.region.read_u64(rid + 8));
        let state = storage::heap::slot_state(word);
        if state != storage::heap::SLOT_USED || k != key {
            return Err((state, k));
        }
        Ok(word)
    }

    /// Checks the row `row` read from slot `rid` (state word `word`, holding `key`) against
    /// its checksum: damaged row bytes are an error naming the row, never data returned.
    pub(crate) fn verify_row(
        &self,
        t: &TableRt,
        rid: u64,
        key: u64,
        word: u64,
        row: &[&[u8]],
    ) -> Result<()> {
        let crc = storage::heap::row_crc(rid, key, row);
        if !self.layout.row_checksums || u64::from(crc) == word >> 32 {
            return Ok(());
        }
        Err(DbError::Corrupt(row_damage(&t.spec.name, t.slot_bytes, rid, key)))
    }

    /// A system transaction on `log`, with the engine's test-only fault applied.
    /// `worker`'s allocator cache serves it (`log` is that worker's system log).
    pub(crate) fn sys_txn<'a>(&'a self, worker: usize, log: &'a mut UndoLog) -> SysTxn<'a> {
        SysTxn::begin(&self.store, &self.alloc, log)
            .on_worker(worker)
            .with_free_before_commit(self.fault == Some(Fault::FreeBeforeCommit))
    }

    /// Refuses work on a handle a panic left with an active undo log.
    pub(crate) fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(DbError::Invalid(
                "a transaction panicked; reopen the database to recover it".into(),
            ));
        }
        Ok(())
    }

    /// Adds a heap page to `t` (a system transaction on `logs.sys`) and fills its free list.
    /// The caller holds `t.free`.
    fn grow_heap(
        &self,
        t: &TableRt,
        worker: usize,
        sys_log: &mut UndoLog,
        free: &mut FreeSlots,
    ) -> Result<()> {
        let entry_off = catalog::entry_offset(t.entry);
        let head = storage::format::get_u64(
            self.store.page(CATALOG_PAGE),
            entry_off + catalog::E_HEAP_HEAD,
        );
        if head != 0 && !self.store.is_data_page(head) {
            return Err(DbError::Corrupt(format!(
                "table {}: heap head {head} outside the data pages",
                t.spec.name
            )));
        }
        self.store.counters().heap_growth();
        let mut sys = self.sys_txn(worker, sys_log);
        let result = (|| {
            let page = storage::pages::PageWriter::alloc_page(&mut sys)?;
            storage::heap::init_page(&mut sys, page, t.id, head, t.slot_bytes)?;
            storage::pages::PageWriter::write(
                &mut sys,
                CATALOG_PAGE,
                &[(entry_off + catalog::E_HEAP_HEAD, &page.to_le_bytes())],
            )?;
            Ok(page)
        })();
        match result {
            Ok(page) => {
                sys.commit()?;
                let n = storage::heap::slots_per_page(t.slot_bytes);
                free.scanned.insert(page);
                free.list.extend((0..n).rev().map(|i| storage::heap::rid(page, t.slot_bytes, i)));
                Ok(())
            }
            Err(e) => {
                sys.abort()?;
                Err(e)
            }
        }
    }
}

/// The read model's latches and lines per page class (Pelley Table 4), when it is on.
pub(crate) fn read_activity(store: &PageStore) -> Vec<(&'static str, u64)> {
    if !store.read_model_on() {
        return Vec::new();
    }
    let [i, h, o] = store.read_stats();
    vec![
        ("index_latches", i.latches),
        ("index_lines", i.lines),
        ("index_missed_lines", i.missed_lines),
        ("heap_latches", h.latches),
        ("heap_lines", h.lines),
        ("heap_missed_lines", h.missed_lines),
        ("other_latches", o.latches),
        ("other_lines", o.lines),
        ("other_missed_lines", o.missed_lines),
    ]
}

/// The one-line report of a row that fails its checksum: table, page, slot and key.
pub(crate) fn row_damage(table: &str, slot_bytes: u32, rid: u64, key: u64) -> String {
    let page = rid / PAGE_SIZE_U64;
    let slot = (rid % PAGE_SIZE_U64 - storage::heap::HEAP_HEADER as u64) / u64::from(slot_bytes);
    format!("table {table}: heap page {page} slot {slot} (key {key}): row fails its checksum")
}

/// What lives at `offset`, for wear reports.
fn describe(db: &InPlace, offset: u64) -> String {
    use storage::format::{BITMAP_FIRST_PAGE, SUPERBLOCK_COPY_PAGE};
    let (page, within) = (offset / PAGE_SIZE_U64, offset % PAGE_SIZE_U64);
    let l = &db.layout;
    if page >= l.page_count || page_offset(page + 1) > db.region.backed_len() {
        return "beyond the region's pages".into();
    }
    match page {
        0 => return "superblock".into(),
        SUPERBLOCK_COPY_PAGE => return "superblock copy".into(),
        CATALOG_PAGE => return "catalog".into(),
        _ => {}
    }
    if page < l.bitmap_mirror_first_page() && page >= BITMAP_FIRST_PAGE {
        return "allocator bitmap".into();
    }
    if page < l.undo_area_first_page() {
        return "allocator bitmap mirror".into();
    }
    if page < l.first_data_page() {
        let per = (l.undo_pages + l.sys_undo_pages) as u64;
        let w = (page - l.undo_area_first_page()) / per;
        let in_log = (page - l.undo_area_first_page()) % per;
        let (kind, first) = if in_log < l.undo_pages as u64 {
            ("user", 0)
        } else {
            ("system", l.undo_pages as u64)
        };
        let at = (in_log - first) * PAGE_SIZE_U64 + within;
        let part = if at < storage::undo::HEADER_BYTES {
            format!("header slot {}", at / 64)
        } else {
            "records".into()
        };
        return format!("{kind} undo log of worker {w}, {part}");
    }
    // A freed page keeps its old contents: the bitmap says whether they still mean anything.
    if let Ok(false) = db.alloc.is_allocated(page) {
        return "free page".into();
    }
    let bytes = db.store.page(page);
    let kind = storage::format::get_u16(bytes, 0);
    let table = |id: u32| db.tables.get(id).map_or(format!("table {id}"), |t| t.spec.name.clone());
    match kind {
        1 | 2 => {
            let owner = storage::format::get_u32(bytes, 24).wrapping_sub(1);
            let level = storage::format::get_u16(bytes, 4);
            format!("B+tree node of {} (level {level})", table(owner))
        }
        3 => format!("heap page of {}", table(storage::format::get_u32(bytes, 4))),
        _ => "free page".into(),
    }
}

impl Engine for InPlace {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.check_poisoned()?;
        check_spec(spec)?;
        let _creating = self.tables.create.lock();
        let tables = &self.tables;
        if tables.iter().any(|t| t.spec.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} already exists", spec.name)));
        }
        if tables.len() >= catalog::MAX_TABLES {
            return Err(DbError::Invalid(format!(
                "catalog full: at most {} tables",
                catalog::MAX_TABLES
            )));
        }
        let entry = tables.len();
        let slot_bytes = catalog::slot_size(spec.row_bytes);
        let mut logs = self.workers[self.admin_worker()].lock();
        let mut sys = self.sys_txn(self.admin_worker(), &mut logs.sys);
        let result = (|| {
            let root = BTree::create(&mut sys, entry as u32 + 1)?;
            let e = CatalogEntry { spec: spec.clone(), slot_bytes, root, heap_head: 0 };
            storage::pages::PageWriter::write(
                &mut sys,
                CATALOG_PAGE,
                &[(catalog::entry_offset(entry), &catalog::encode(&e))],
            )
        })();
        match result {
            Ok(()) => sys.commit()?,
            Err(e) => {
                sys.abort()?;
                return Err(e);
            }
        }
        let id = entry as TableId;
        let rt = TableRt::new(id, spec.clone(), slot_bytes, entry, 0, self.layout.workers as usize);
        if tables.slots[entry].set(rt).is_err() {
            return Err(DbError::Corrupt(format!("table slot {entry} filled twice")));
        }
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.tables.iter().find(|t| t.spec.name == name).map(|t| t.id)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.tables.iter().map(|t| t.spec.clone()).collect()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        self.check_poisoned()?;
        if worker >= self.admin_worker() {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: this region was formatted for {} workers",
                self.admin_worker()
            )));
        }
        let mut logs = self.workers[worker].try_lock().ok_or_else(|| {
            DbError::Invalid(format!("worker {worker} already has an open transaction"))
        })?;
        logs.begun += 1;
        // Unique across workers (MAX_WORKERS < 2^16) and never 0, which the lock manager needs.
        let id = (logs.begun << 16) | (worker as u64 + 1);
        Ok(Box::new(txn::InPlaceTxn::new(self, logs, id, worker)))
    }

    synchronous_engine_methods!();

    fn check_integrity(&self) -> IntegrityResult {
        recovery::check_integrity(self)
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        Some(describe(self, offset))
    }

    fn counters(&self) -> Option<storage::EngineCounters> {
        Some(self.store.counters().snapshot())
    }

    fn footprint_bytes(&self) -> Option<u64> {
        Some(self.alloc.pages_in_use() * storage::format::PAGE_SIZE_U64)
    }

    fn activity(&self) -> Vec<(&'static str, u64)> {
        let mut v = read_activity(&self.store);
        v.extend(self.locks.activity());
        v.extend(self.alloc.activity());
        v
    }

    fn circular_logs(&self) -> Option<Vec<std::ops::Range<u64>>> {
        // Every worker's user and system undo logs, back to back before the data pages.
        let l = &self.layout;
        let undo_area = page_offset(l.undo_area_first_page())..page_offset(l.first_data_page());
        Some(std::iter::once(undo_area).collect())
    }

    fn shutdown(&self) -> Result<()> {
        // Every commit is already durable; make sure no transaction is open.
        for (w, logs) in self.workers.iter().enumerate() {
            if logs.is_locked() {
                return Err(DbError::Invalid(format!("worker {w} still has an open transaction")));
            }
        }
        Ok(())
    }
}

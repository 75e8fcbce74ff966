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
//! Deliberate differences: undo records carry a checksum and generation instead of a separately
//! persisted tail LSN (saves `persist_wal`'s second barrier), and pages are not copied to a page
//! log: the before-image of just the written bytes is the undo record.

mod recovery;
mod txn;

use crate::{EngineOptions, Fault};
use parking_lot::{Mutex, RwLock};
use pmem::Region;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use storage::alloc::PageAllocator;
use storage::btree::{BTree, RootRef};
use storage::catalog::{self, CatalogEntry};
use storage::engine::{check_spec, RecoveryReport};
use storage::format::{page_offset, Layout, Superblock, CATALOG_PAGE, MAX_WORKERS, PAGE_SIZE_U64};
use storage::pages::PageStore;
use storage::systxn::SysTxn;
use storage::undo::UndoLog;
use storage::{CommitToken, DbError, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};

pub const ENGINE_NAME: &str = "inplace";

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
    /// Free heap slots (rids). Held while the heap grows.
    pub free: Mutex<Vec<u64>>,
}

/// One worker's persistent logs.
pub(crate) struct WorkerLogs {
    pub user: UndoLog,
    pub sys: UndoLog,
}

pub struct InPlace {
    pub(crate) region: Region,
    pub(crate) layout: Layout,
    pub(crate) store: PageStore,
    pub(crate) alloc: PageAllocator,
    pub(crate) locks: storage::lock::LockManager,
    pub(crate) tables: RwLock<Vec<Arc<TableRt>>>,
    /// `layout.workers` logs: the last one is the administrator's (catalog changes).
    pub(crate) workers: Box<[Mutex<WorkerLogs>]>,
    pub(crate) next_txn: AtomicU64,
    pub(crate) report: RecoveryReport,
    pub(crate) fault: Option<Fault>,
}

impl InPlace {
    /// Opens the engine: formats a blank region, otherwise validates and recovers it.
    pub fn open(region: Region, options: &EngineOptions) -> Result<InPlace> {
        let started = std::time::Instant::now();
        let (layout, formatted) = match Superblock::read(&region, ENGINE_NAME)? {
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
        let layout = Layout {
            page_count: region.len() / PAGE_SIZE_U64,
            workers: options.workers + 1,
            undo_pages: options.undo_pages,
            sys_undo_pages: options.sys_undo_pages,
            node_capacity: options.node_capacity,
        };
        layout.validate()?;
        for w in 0..layout.workers {
            UndoLog::format(region, page_offset(layout.undo_log_page(w)));
            UndoLog::format(region, page_offset(layout.sys_undo_log_page(w)));
        }
        region.write(page_offset(CATALOG_PAGE), &[0u8; storage::format::PAGE_SIZE]);
        region.flush(page_offset(CATALOG_PAGE), PAGE_SIZE_U64);
        PageAllocator::format(region, &layout);
        region.fence();
        // Last: a crash before this leaves a blank region, formatted again on the next open.
        Superblock { engine: ENGINE_NAME.into(), layout }.write(region);
        Ok(layout)
    }

    pub(crate) fn table_rt(&self, table: TableId) -> Result<Arc<TableRt>> {
        self.tables.read().get(table as usize).cloned().ok_or(DbError::NoSuchTable(table))
    }

    pub(crate) fn tree<'a>(&'a self, t: &'a TableRt) -> BTree<'a> {
        let root = RootRef {
            page: CATALOG_PAGE,
            offset: catalog::entry_offset(t.entry) + catalog::E_ROOT,
        };
        BTree::new(&self.store, root, &t.root_latch, self.layout.node_capacity as usize)
    }

    fn admin_worker(&self) -> usize {
        self.layout.workers as usize - 1
    }

    /// Persist-barrier accounting hook for tests: fences issued so far.
    pub fn fences(&self) -> u64 {
        self.region.stats().fences
    }

    /// Adds a heap page to `t` (a system transaction on `logs.sys`) and fills its free list.
    /// The caller holds `t.free`.
    pub(crate) fn grow_heap(
        &self,
        t: &TableRt,
        sys_log: &mut UndoLog,
        free: &mut Vec<u64>,
    ) -> Result<()> {
        let entry_off = catalog::entry_offset(t.entry);
        let head = storage::format::get_u64(
            self.store.page(CATALOG_PAGE),
            entry_off + catalog::E_HEAP_HEAD,
        );
        let mut sys = SysTxn::begin(&self.store, &self.alloc, sys_log);
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
                sys.commit();
                let n = storage::heap::slots_per_page(t.slot_bytes);
                free.extend((0..n).rev().map(|i| storage::heap::rid(page, t.slot_bytes, i)));
                Ok(())
            }
            Err(e) => {
                sys.abort()?;
                Err(e)
            }
        }
    }
}

impl Engine for InPlace {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        check_spec(spec)?;
        let mut tables = self.tables.write();
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
        let mut sys = SysTxn::begin(&self.store, &self.alloc, &mut logs.sys);
        let result = (|| {
            let root = BTree::create(&mut sys)?;
            let e = CatalogEntry { spec: spec.clone(), slot_bytes, root, heap_head: 0 };
            storage::pages::PageWriter::write(
                &mut sys,
                CATALOG_PAGE,
                &[(catalog::entry_offset(entry), &catalog::encode(&e))],
            )
        })();
        match result {
            Ok(()) => sys.commit(),
            Err(e) => {
                sys.abort()?;
                return Err(e);
            }
        }
        let id = entry as TableId;
        tables.push(Arc::new(TableRt {
            id,
            spec: spec.clone(),
            slot_bytes,
            entry,
            root_latch: RwLock::new(()),
            free: Mutex::new(Vec::new()),
        }));
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.tables.read().iter().find(|t| t.spec.name == name).map(|t| t.id)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.tables.read().iter().map(|t| t.spec.clone()).collect()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if worker >= self.admin_worker() {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: this region was formatted for {} workers",
                self.admin_worker()
            )));
        }
        let logs = self.workers[worker].try_lock().ok_or_else(|| {
            DbError::Invalid(format!("worker {worker} already has an open transaction"))
        })?;
        let id = self.next_txn.fetch_add(1, Ordering::Relaxed);
        Ok(Box::new(txn::InPlaceTxn::new(self, logs, id)))
    }

    fn is_durable(&self, _token: CommitToken) -> bool {
        true
    }

    fn wait_durable(&self, _token: CommitToken) -> Result<()> {
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }

    fn region(&self) -> Option<&Region> {
        Some(&self.region)
    }

    fn check_integrity(&self) -> IntegrityResult {
        recovery::check_integrity(self)
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

//! Recovery for In-Place Updates (Pelley §3.2): roll back unfinished system transactions
//! (physical undo, so every B+tree is structurally whole), then roll back in-flight user
//! transactions (physical undo of row bytes, logical undo of index changes) and finish the
//! post-commit frees of committed ones. Every step is idempotent, so a crash during recovery is
//! recovered by running it again. Nothing else is scanned: the allocator and the free-slot
//! lists fill lazily after open, so recovery time depends on in-flight work only.
//!
//! Every value an undo record carries (table, rid, page, byte range) is validated before it is
//! used; a damaged record is `DbError::Corrupt`, never a write outside its structure.

use super::{
    InPlace, TableRt, TableSet, WorkerLogs, REC_FREE_SLOT, REC_HEAP_ALLOC, REC_INDEX_DELETE,
    REC_INDEX_INSERT, REC_PHYS,
};
use crate::{EngineOptions, Fault};
use parking_lot::Mutex;
use pmem::Region;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use storage::alloc::PageAllocator;
use storage::catalog;
use storage::format::{
    get_u32, get_u64, page_offset, Layout, PageId, Superblock, CATALOG_PAGE, PAGE_SIZE_U64,
};
use storage::heap::{self, SLOT_FREE, SLOT_USED};
use storage::pages::PageStore;
use storage::systxn::{self, apply_phys, SysTxn};
use storage::undo::{LogState, UndoLog};
use storage::{DbError, IntegrityReport, IntegrityResult, RecoveryReport, Result, TableId};

/// What rolling back a user transaction changed.
pub(crate) struct Rollback {
    /// Ranges written in place (to persist before the log is freed).
    pub written: Vec<(u64, u64)>,
    /// Heap slots freed (to return to free lists once the log is freed).
    pub freed: Vec<(TableId, u64)>,
}

fn decode_logical(payload: &[u8]) -> Result<(TableId, u64, u64)> {
    if payload.len() != 20 {
        return Err(DbError::Corrupt("malformed logical undo record".into()));
    }
    Ok((get_u32(payload, 0), get_u64(payload, 4), get_u64(payload, 12)))
}

/// The table an undo record names (an unknown table in a log is damage, not a user error).
fn record_table(db: &InPlace, table: TableId) -> Result<&TableRt> {
    db.table_rt(table).map_err(|_| {
        DbError::Corrupt(format!("undo record names table {table}, which is not in the catalog"))
    })
}

/// Undoes a user transaction's records in reverse order. Idempotent.
pub(crate) fn rollback_user(
    db: &InPlace,
    worker: usize,
    sys_log: &mut UndoLog,
    records: &[(u8, Vec<u8>)],
) -> Result<Rollback> {
    let mut out = Rollback { written: Vec::new(), freed: Vec::new() };
    for (kind, payload) in records.iter().rev() {
        match *kind {
            REC_PHYS => out.written.extend(apply_phys(&db.region, &db.layout, payload)?),
            REC_HEAP_ALLOC => {
                let (table, rid, _) = decode_logical(payload)?;
                let t = record_table(db, table)?;
                db.check_row(t, rid, None)?;
                db.region.write_u64(rid, SLOT_FREE);
                out.written.push((rid, 8));
                out.freed.push((table, rid));
            }
            REC_INDEX_INSERT => {
                let (table, key, rid) = decode_logical(payload)?;
                let t = record_table(db, table)?;
                let tree = db.tree(t);
                if tree.get(key)? == Some(rid) {
                    run_system(db, worker, sys_log, |sys| tree.remove(sys, key).map(|_| ()))?;
                }
            }
            REC_INDEX_DELETE => {
                let (table, key, rid) = decode_logical(payload)?;
                let t = record_table(db, table)?;
                db.check_row(t, rid, None)?;
                let tree = db.tree(t);
                if tree.get(key)?.is_none() {
                    run_system(db, worker, sys_log, |sys| tree.insert(sys, key, rid).map(|_| ()))?;
                }
            }
            REC_FREE_SLOT => {}
            other => return Err(DbError::Corrupt(format!("unknown undo record kind {other}"))),
        }
    }
    Ok(out)
}

fn run_system(
    db: &InPlace,
    worker: usize,
    sys_log: &mut UndoLog,
    f: impl FnOnce(&mut SysTxn<'_>) -> Result<()>,
) -> Result<()> {
    let mut sys = db.sys_txn(worker, sys_log);
    match f(&mut sys) {
        Ok(()) => sys.commit(),
        Err(e) => {
            sys.abort()?;
            Err(e)
        }
    }
}

fn attach_logs(region: &Region, layout: &Layout) -> Result<Vec<WorkerLogs>> {
    let user_cap = layout.undo_pages as u64 * PAGE_SIZE_U64;
    let sys_cap = layout.sys_undo_pages as u64 * PAGE_SIZE_U64;
    (0..layout.workers)
        .map(|w| {
            Ok(WorkerLogs {
                user: UndoLog::attach(region, page_offset(layout.undo_log_page(w)), user_cap)?,
                sys: UndoLog::attach(region, page_offset(layout.sys_undo_log_page(w)), sys_cap)?,
                begun: 0,
                hints: None,
                dirty: Vec::new(),
                retry_age: 0,
            })
        })
        .collect()
}

fn load_tables(store: &PageStore, workers: usize) -> Result<Vec<TableRt>> {
    let page = store.page(CATALOG_PAGE);
    let mut tables: Vec<TableRt> = Vec::new();
    let mut ended = false;
    for i in 0..catalog::MAX_TABLES {
        match catalog::decode(page, i).map_err(DbError::Corrupt)? {
            None => ended = true,
            Some(_) if ended => {
                return Err(DbError::Corrupt(format!("catalog entry {i} follows an empty one")))
            }
            Some(e) => {
                if tables.iter().any(|t| t.spec.name == e.spec.name) {
                    return Err(DbError::Corrupt(format!("catalog names {} twice", e.spec.name)));
                }
                tables.push(TableRt::new(
                    i as TableId,
                    e.spec,
                    e.slot_bytes,
                    i,
                    e.heap_head,
                    workers,
                ))
            }
        }
    }
    Ok(tables)
}

/// Heap pages of a table, following the chain from the catalog (bounded by the page count).
fn heap_pages(db: &InPlace, t: &TableRt) -> std::result::Result<Vec<PageId>, String> {
    let mut pages = Vec::new();
    let entry_off = catalog::entry_offset(t.entry);
    let mut p = get_u64(db.store.page(CATALOG_PAGE), entry_off + catalog::E_HEAP_HEAD);
    while p != 0 {
        if pages.len() as u64 >= db.layout.page_count {
            return Err(format!("table {}: heap chain has a cycle", t.spec.name));
        }
        let hp = db.heap_page(t, p).map_err(|e| e.to_string())?;
        pages.push(p);
        p = hp.next;
    }
    Ok(pages)
}

pub(crate) fn recover(region: Region, layout: Layout, options: &EngineOptions) -> Result<InPlace> {
    let mut report = RecoveryReport::default();
    let mut logs = attach_logs(&region, &layout)?;
    for l in logs.iter_mut() {
        let pelley = options.inplace.protocol == super::Protocol::Pelley;
        l.user.set_lsn_last(pelley);
        l.sys.set_lsn_last(pelley);
    }
    let alloc = PageAllocator::attach(&region, &layout);
    alloc.set_recovering(true);
    // 1. Unfinished structure modifications: physical undo; committed ones: redo their frees.
    for l in logs.iter_mut() {
        let records = l.sys.read_records();
        match l.sys.state() {
            LogState::Free => {}
            LogState::Active => {
                let (_, written) = systxn::rollback(&region, &layout, &alloc, &records)?;
                report.records_applied += records.len() as u64;
                report.system_txns_rolled_back += 1;
                l.sys.finish(&written);
            }
            LogState::Committed => {
                let written = systxn::redo_frees(&alloc, &records)?;
                l.sys.finish(&written);
            }
        }
    }
    // Every interrupted bitmap update has been replayed: from here a word that differs from
    // its mirror is damage.
    alloc.set_recovering(false);
    // 2. Volatile structures that user rollback needs (all O(tables), nothing scanned).
    let store = PageStore::with_cache(&region, &layout, options.cache_pages, options.cache_policy);
    let tables = load_tables(&store, layout.workers as usize)?;
    let search_first = !store.read_model_on() && !region.cpu_cache_on();
    let db = InPlace {
        alloc,
        region,
        layout,
        store,
        locks: Default::default(),
        tables: TableSet::new(tables),
        workers: Box::new([]),
        report: RecoveryReport::default(),
        fault: options.fault,
        protocol: options.inplace.protocol,
        hints: options.inplace.index_hints,
        retry_keeps_age: options.retry_keeps_age,
        search_first,
        poisoned: AtomicBool::new(false),
    };
    // 3. In-flight user transactions: roll back; committed ones: finish their frees. Slots
    // freed here are found by the lazy free-slot scan (no page is scanned yet).
    for (worker, l) in logs.iter_mut().enumerate() {
        let records = l.user.read_records();
        match l.user.state() {
            LogState::Free => {}
            LogState::Active => {
                let out = rollback_user(&db, worker, &mut l.sys, &records)?;
                report.records_applied += records.len() as u64;
                report.txns_rolled_back += 1;
                if db.fault == Some(Fault::RecoveryRollbackNotPersisted) {
                    l.user.finish(&[]);
                } else {
                    l.user.finish(&out.written);
                }
            }
            LogState::Committed => {
                let mut written = Vec::new();
                for (kind, payload) in &records {
                    if *kind == REC_FREE_SLOT {
                        let (table, rid, _) = decode_logical(payload)?;
                        db.check_row(record_table(&db, table)?, rid, None)?;
                        db.region.write_u64(rid, SLOT_FREE);
                        written.push((rid, 8));
                    }
                }
                report.txns_completed += 1;
                l.user.finish(&written);
            }
        }
    }
    let tables = db.tables.len();
    report.notes.push(format!("scanned {} undo logs; {tables} tables", logs.len() * 2));
    Ok(InPlace { workers: logs.into_iter().map(Mutex::new).collect(), report, ..db })
}

/// What opening `region` would do, read without writing anything (`nvmdb check`).
pub fn inspect(region: &Region) -> Result<crate::Inspection> {
    use storage::format::Verdict;
    let mut out = crate::Inspection::default();
    let (sb, repair_primary, repair_copy) = match Superblock::verdict(region, false)? {
        Verdict::Format => {
            out.verdict = "blank: no committed format (open formats it)".into();
            return Ok(out);
        }
        Verdict::Open { sb, repair_primary, repair_copy } => (sb, repair_primary, repair_copy),
    };
    out.engine = Some(sb.engine.clone());
    out.page_count = sb.layout.page_count;
    out.workers = sb.layout.workers.saturating_sub(1);
    out.verdict = match (repair_primary, repair_copy) {
        (true, _) => "valid; page 0 is damaged and would be rewritten from its copy".into(),
        (_, true) => "valid; the superblock copy would be rewritten".into(),
        _ => "valid".into(),
    };
    if sb.engine != super::ENGINE_NAME {
        return Ok(out);
    }
    for l in attach_logs(region, &sb.layout)? {
        for (log, system) in [(&l.sys, true), (&l.user, false)] {
            let records = log.read_records().len() as u64;
            match (log.state(), system) {
                (LogState::Free, _) => {}
                (LogState::Active, true) => out.system_txns_to_roll_back += 1,
                (LogState::Active, false) => out.txns_to_roll_back += 1,
                (LogState::Committed, _) => out.txns_to_complete += 1,
            }
            if log.state() != LogState::Free {
                out.undo_records += records;
            }
        }
    }
    Ok(out)
}

/// Index and heap agree, the allocator accounts for every page, no transaction is in flight.
pub(crate) fn check_integrity(db: &InPlace) -> IntegrityResult {
    let mut report = IntegrityReport::default();
    let mut owned: HashSet<PageId> = HashSet::new();
    let mut claim = |p: PageId, what: &str| -> std::result::Result<(), String> {
        if !owned.insert(p) {
            return Err(format!("page {p} is used twice (second use: {what})"));
        }
        Ok(())
    };
    for p in 0..db.layout.first_data_page() {
        claim(p, "metadata")?;
    }
    // Rows that fail their checksums are all reported (the structure around them is sound, so
    // the walk goes on): what was damaged is the first thing a reader of `check` needs.
    let mut damaged: Vec<String> = Vec::new();
    for t in db.tables.iter() {
        report.tables += 1;
        let tree = db.tree(t).check().map_err(|e| format!("table {}: {e}", t.spec.name))?;
        for p in &tree.pages {
            claim(*p, "index")?;
        }
        let pages = heap_pages(db, t)?;
        let mut used: HashMap<u64, u64> = HashMap::new();
        for p in &pages {
            claim(*p, "heap")?;
            for i in 0..heap::slots_per_page(t.slot_bytes) {
                let rid = heap::rid(*p, t.slot_bytes, i);
                match db.region.read_u64(rid) {
                    SLOT_FREE => {}
                    w if heap::slot_state(w) == SLOT_USED => {
                        let key = db.region.read_u64(rid + 8);
                        let row = db.region.read(rid + heap::SLOT_HEADER, t.spec.row_bytes as _);
                        if db.verify_row(t, rid, key, w, &[row]).is_err() {
                            damaged.push(super::row_damage(&t.spec.name, t.slot_bytes, rid, key));
                        }
                        used.insert(rid, key);
                    }
                    s => return Err(format!("table {}: slot {rid} has state {s}", t.spec.name)),
                }
            }
        }
        for (key, rid) in &tree.entries {
            match used.get(rid) {
                Some(k) if k == key => {}
                Some(k) => {
                    return Err(format!(
                        "table {}: index key {key} points to slot {rid} holding key {k}",
                        t.spec.name
                    ))
                }
                None => {
                    return Err(format!(
                        "table {}: index key {key} points to free slot {rid}",
                        t.spec.name
                    ))
                }
            }
        }
        if used.len() != tree.entries.len() {
            return Err(format!(
                "table {}: {} used heap slots but {} index entries (leaked or lost rows)",
                t.spec.name,
                used.len(),
                tree.entries.len()
            ));
        }
        report.rows += used.len() as u64;
    }
    if !damaged.is_empty() {
        const SHOWN: usize = 8;
        let more = damaged.len().saturating_sub(SHOWN);
        let mut why = format!(
            "{} damaged rows: {}",
            damaged.len(),
            damaged[..damaged.len().min(SHOWN)].join("; ")
        );
        if more > 0 {
            why += &format!("; and {more} more");
        }
        return Err(why);
    }
    // Beyond the file (a growable region is laid out for far more) nothing may be in use; those
    // pages are checked a bitmap word at a time, or a 1 TiB layout takes seconds.
    let backed = (db.region.backed_len() / storage::format::PAGE_SIZE_U64)
        .clamp(db.layout.first_data_page(), db.layout.page_count);
    let beyond = db.alloc.count_free_in(backed..db.layout.page_count).map_err(|e| e.to_string())?;
    if beyond != db.layout.page_count - backed || owned.iter().any(|p| *p >= backed) {
        return Err(format!("a page beyond the file's {backed} pages is in use"));
    }
    report.pages_free += beyond;
    for p in db.layout.first_data_page()..backed {
        let marked = db.alloc.is_allocated(p).map_err(|e| e.to_string())?;
        let used = owned.contains(&p);
        if marked && !used {
            return Err(format!("page {p} is allocated but unreachable (leaked)"));
        }
        if used && !marked {
            return Err(format!("page {p} is in use but marked free"));
        }
        if marked {
            report.pages_in_use += 1;
        } else {
            report.pages_free += 1;
        }
    }
    for (w, logs) in db.workers.iter().enumerate() {
        if let Some(l) = logs.try_lock() {
            if l.user.state() != LogState::Free || l.sys.state() != LogState::Free {
                return Err(format!("worker {w} has an unfinished undo log"));
            }
        }
    }
    Ok(report)
}

//! A transaction of the In-Place Updates engine. Where a commit becomes durable:
//! [`InPlaceTxn::commit`] — the undo log header's free mark.

use super::{
    InPlace, Protocol, TableRt, WorkerLogs, REC_FREE_SLOT, REC_HEAP_ALLOC, REC_INDEX_DELETE,
    REC_INDEX_INSERT, REC_PHYS,
};
use crate::Fault;
use parking_lot::MutexGuard;
use storage::engine::{check_row, check_update};
use storage::format::{page_offset, PAGE_SIZE_U64};
use storage::heap::{row_crc, row_lines, used_word, SLOT_CRC_OFFSET, SLOT_FREE, SLOT_HEADER};
use storage::lock::{LockMode, LockSet};
use storage::pages::PageClass::Heap;
use storage::systxn::{encode_phys, SysTxn};
use storage::{CommitToken, DbError, Result, TableId, Txn};

pub(crate) struct InPlaceTxn<'a> {
    db: &'a InPlace,
    logs: MutexGuard<'a, WorkerLogs>,
    id: u64,
    /// The worker running it: whose free-slot caches it uses.
    worker: usize,
    locks: LockSet,
    /// In-place writes not yet flushed (they ride on the next barrier).
    dirty: Vec<(u64, u64)>,
    /// Slots this transaction allocated: writes to them need no undo (rollback frees them).
    fresh: Vec<u64>,
    /// Slots to free after commit.
    to_free: Vec<(TableId, u64)>,
    /// Keys this transaction deleted: pending in their tables' `deleted` sets until it ends.
    deleted: Vec<(TableId, u64)>,
    /// Where this transaction last found a few keys' rows ([`Located`]).
    located: Located,
    finished: bool,
}

/// The slots of the last few keys a transaction read or wrote, so that a write of a row it has
/// just read (YCSB's update reads the row, then writes two ranges of it; TPC-B reads each row
/// for update, then writes it) does not search the index again. An entry is used only once
/// the key's exclusive lock is held: taking it validated the read that found the slot (the
/// key's stripe word unchanged since, `LockSet::became_exclusive`), or the slot was found under
/// it; either way no other transaction can have moved the row since, and while the lock is held
/// none can. This transaction's own delete or insert of the key forgets the entry. The slot's
/// header is still checked on every use (`InPlace::check_row`). Fixed size, no allocation.
#[derive(Default)]
struct Located {
    entries: [(TableId, u64, u64); 4],
    len: usize,
    next: usize,
}

impl Located {
    fn get(&self, table: TableId, key: u64) -> Option<u64> {
        self.entries[..self.len].iter().find(|e| (e.0, e.1) == (table, key)).map(|e| e.2)
    }

    fn put(&mut self, table: TableId, key: u64, rid: u64) {
        if let Some(e) = self.entries[..self.len].iter_mut().find(|e| (e.0, e.1) == (table, key)) {
            e.2 = rid;
        } else if self.len < self.entries.len() {
            self.entries[self.len] = (table, key, rid);
            self.len += 1;
        } else {
            self.entries[self.next] = (table, key, rid);
            self.next = (self.next + 1) % self.entries.len();
        }
    }

    fn forget(&mut self, table: TableId, key: u64) {
        if let Some(i) = self.entries[..self.len].iter().position(|e| (e.0, e.1) == (table, key)) {
            self.entries.swap(i, self.len - 1);
            self.len -= 1;
        }
    }
}

/// `[u32 table][u64 a][u64 b]`, the payload of logical records.
pub(crate) fn logical(table: TableId, a: u64, b: u64) -> [u8; 20] {
    let mut p = [0u8; 20];
    p[0..4].copy_from_slice(&table.to_le_bytes());
    p[4..12].copy_from_slice(&a.to_le_bytes());
    p[12..20].copy_from_slice(&b.to_le_bytes());
    p
}

impl<'a> InPlaceTxn<'a> {
    pub(crate) fn new(
        db: &'a InPlace,
        mut logs: MutexGuard<'a, WorkerLogs>,
        id: u64,
        worker: usize,
    ) -> Self {
        let dirty = std::mem::take(&mut logs.dirty);
        // The begin time orders transactions for wait-die; with `retry_keeps_age` a retry of
        // one that died keeps the age it died with (it becomes the oldest in time).
        let age = match std::mem::take(&mut logs.retry_age) {
            0 => pmem::timing::rdtsc(),
            kept => kept,
        };
        InPlaceTxn {
            db,
            logs,
            id,
            worker,
            locks: LockSet::aged(age),
            dirty,
            fresh: Vec::new(),
            to_free: Vec::new(),
            deleted: Vec::new(),
            located: Located::default(),
            finished: false,
        }
    }

    /// A point request (no latch held): may wait for a younger holder (wait-die).
    fn lock(&mut self, table: TableId, key: u64, mode: LockMode) -> Result<()> {
        self.locks.lock_or_wait(&self.db.locks, self.id, table, key, mode)
    }

    /// Appends undo records; earlier in-place writes are persisted by the same barrier.
    fn log(&mut self, records: &[(u8, &[u8])]) -> Result<()> {
        self.logs.user.append(records, &self.dirty)?;
        self.dirty.clear();
        Ok(())
    }

    fn write(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        if self.db.protocol == Protocol::Pelley {
            return self.persist_page(offset, bytes, false);
        }
        self.db.region.write(offset, bytes);
        self.dirty.push((offset, bytes.len() as u64));
        Ok(())
    }

    /// Pelley's `persist_page` (VLDB 2014 Fig. 2) for a write within one page: the page's
    /// before-image of the lines the write dirties (the paper's timing model tracks and persists
    /// buffer-cache writes at cache-line granularity, thesis §5.1: "track buffer cache writes at
    /// cache line granularity ... using efficient dirty bitmaps") goes to a page log (this
    /// worker's system undo log, free between system transactions: recovery rolls an active one
    /// back before user undo, which is the page
    /// log's "copy valid logs back in place"), barrier, the log is marked valid, barrier, the
    /// write is made in place, barrier, the log is marked invalid, barrier.
    /// `skip_flush`: the test-only fault [`Fault::PelleyPageNotFlushed`] (row updates only, so
    /// that the load still verifies and crashes find it).
    fn persist_page(&mut self, offset: u64, bytes: &[u8], skip_flush: bool) -> Result<()> {
        let db = self.db;
        let page = offset / PAGE_SIZE_U64;
        if (offset + bytes.len() as u64).div_ceil(PAGE_SIZE_U64) != page + 1 {
            return Err(DbError::Corrupt(format!("write at {offset} crosses a page boundary")));
        }
        let line = pmem::CACHE_LINE;
        let first = offset / line * line;
        let end = (offset + bytes.len() as u64).div_ceil(line) * line;
        debug_assert!(first >= page_offset(page) && end <= page_offset(page) + PAGE_SIZE_U64);
        let image = encode_phys(&db.region, &[(first, (end - first) as usize)]);
        self.logs.sys.append_then_activate(&[(REC_PHYS, &image)])?;
        db.region.write(offset, bytes);
        if skip_flush {
            self.logs.sys.finish(&[]);
        } else {
            self.logs.sys.finish(&[(offset, bytes.len() as u64)]);
        }
        Ok(())
    }

    /// The page latch Pelley's protocol holds across a page update (none in ours: rows are
    /// protected by their key locks).
    fn page_latch(&self, offset: u64) -> Option<storage::pages::ExclusiveLatch<'a>> {
        let db: &'a InPlace = self.db;
        (db.protocol == Protocol::Pelley).then(|| db.store.latch_exclusive(offset / PAGE_SIZE_U64))
    }

    /// Runs `f` as a system transaction on this worker's system log.
    fn system<T>(&mut self, f: impl FnOnce(&mut SysTxn<'_>) -> Result<T>) -> Result<T> {
        let db = self.db;
        let mut sys = db.sys_txn(self.worker, &mut self.logs.sys);
        match f(&mut sys) {
            Ok(v) => {
                sys.commit()?;
                Ok(v)
            }
            Err(e) => {
                sys.abort()?;
                Err(e)
            }
        }
    }

    /// The checksum the row in `rid` will have once `bytes` are written at `offset` (`None`
    /// in a region without row checksums), from its stored checksum and the bytes replaced
    /// (`heap::row_crc_updated`): the rest of the row is not read. An update never launders
    /// damaged bytes into a row that verifies: the new checksum is the one the row should
    /// have, so damage elsewhere in it (or in its stored checksum) still fails the next read
    /// and `check`, as before the update.
    fn new_row_crc(
        &self,
        t: &TableRt,
        rid: u64,
        offset: usize,
        bytes: &[u8],
    ) -> Result<Option<u32>> {
        let db = self.db;
        if !db.layout.row_checksums {
            return Ok(None);
        }
        let stored = storage::heap::stored_crc(db.region.read_u64(rid));
        let old = db.region.read(rid + SLOT_HEADER + offset as u64, bytes.len());
        let row_len = t.spec.row_bytes as usize;
        Ok(Some(storage::heap::row_crc_updated(stored, row_len, offset, old, bytes)))
    }

    /// Writes a row update and its new checksum (when the region has them). Pelley's protocol
    /// persists one page update per row write, so there the checksum and the bytes go as one
    /// contiguous write from the checksum field on (the bytes between are rewritten unchanged);
    /// ours writes the two ranges, which the same barrier persists.
    fn write_update(
        &mut self,
        rid: u64,
        at: u64,
        bytes: &[u8],
        crc: Option<u32>,
        skip_flush: bool,
    ) -> Result<()> {
        let pelley = self.db.protocol == Protocol::Pelley;
        let Some(crc) = crc else {
            return if skip_flush {
                self.persist_page(at, bytes, true)
            } else {
                self.write(at, bytes)
            };
        };
        let crc_at = rid + SLOT_CRC_OFFSET;
        if pelley || skip_flush {
            let mut span = self.db.region.read(crc_at, (at - crc_at) as usize).to_vec();
            span[..4].copy_from_slice(&crc.to_le_bytes());
            span.extend_from_slice(bytes);
            return if skip_flush {
                self.persist_page(crc_at, &span, true)
            } else {
                self.write(crc_at, &span)
            };
        }
        self.write(at, bytes)?;
        self.write(crc_at, &crc.to_le_bytes())
    }

    fn take_slot(&mut self, t: &TableRt) -> Result<u64> {
        self.db.take_cached_slot(t, self.worker, &mut self.logs.sys)
    }

    /// The commit's slot frees (the log is marked committed) without the shared free-slot
    /// lists, when every table involved has finished its lazy scan: no scan can then list a
    /// slot whose free a crash could still redo over its next row, so the lists need not be
    /// held until the frees are durable. The slots go to this worker's caches. Returns false
    /// (nothing done) when a scan is still going: the caller holds the lists instead.
    fn free_slots_unlisted(&mut self, frees: &[(TableId, u64)]) -> Result<bool> {
        let db = self.db;
        for (table, _) in frees {
            if !db.table_rt(*table)?.scan_done.load(std::sync::atomic::Ordering::Acquire) {
                return Ok(false);
            }
        }
        let mut written = Vec::with_capacity(frees.len());
        for (_, rid) in frees {
            db.region.write_u64(*rid, SLOT_FREE);
            written.push((*rid, 8));
        }
        self.logs.user.finish(&written);
        db.give_slots_by_table(self.worker, &mut self.logs.sys, frees)?;
        Ok(true)
    }

    /// Forgets where `key`'s row was (this transaction deletes or inserts it): its old slot
    /// still holds the key until the commit frees it.
    fn forget(&mut self, table: TableId, key: u64) {
        self.located.forget(table, key);
        if let Some(h) = self.logs.hints.as_mut() {
            h.forget(table, key);
        }
    }

    /// A point read (`Txn::read`), starting from `guess`, a slot the caller found for the key
    /// (0: none).
    fn read_guessing(
        &mut self,
        table: TableId,
        key: u64,
        out: &mut Vec<u8>,
        mut guess: u64,
    ) -> Result<bool> {
        let db = self.db;
        let t = db.table_rt(table)?;
        let mut hints = db.hints.then(|| self.logs.hints());
        let row_and_header = SLOT_HEADER + u64::from(t.spec.row_bytes);
        // A guess of the key's slot, checked against the slot inside the optimistic read: the
        // worker's hint, or else (`search_first`) the B+tree searched before the read begins
        // (the descent validates itself, node by node), so that the stripe word's miss comes
        // after the search's and overlaps the row's instead of preceding them. The slot check
        // is the hint's: a slot freed, reused or moved since fails it and the tree is searched
        // again inside the read.
        if guess == 0 {
            guess = hints.as_ref().map_or(0, |h| h.get(table, key));
        }
        if guess == 0 && db.search_first {
            db.locks.prefetch_for_read(table, key);
            guess = db.tree(t).get(key)?.unwrap_or(0);
            if let (Some(h), true) = (hints.as_mut(), guess != 0) {
                h.put(table, key, guess);
            }
        }
        if guess != 0 {
            db.prefetch_slot(guess, row_and_header);
        }
        let found = self.locks.read_optimistic(&db.locks, self.id, table, key, || {
            out.clear();
            let (rid, word) = match db.hinted_row(t, guess, key) {
                Some(word) => (guess, word),
                None => {
                    let Some(rid) = db.tree(t).get(key)? else { return Ok(None) };
                    db.prefetch_slot(rid, row_and_header);
                    if let Some(h) = hints.as_mut() {
                        h.put(table, key, rid);
                    }
                    (rid, db.check_row(t, rid, Some(key))?)
                }
            };
            let row = db.region.read(rid + SLOT_HEADER, t.spec.row_bytes as usize);
            db.store.touch_more(Heap, rid / PAGE_SIZE_U64, row_lines(rid, 0, row.len() as u64));
            db.verify_row(t, rid, key, word, &[row])?;
            out.extend_from_slice(row);
            Ok(Some(rid))
        })?;
        // Usable by a later write of the key only once its exclusive lock validates this read.
        if let Some(rid) = found {
            self.located.put(table, key, rid);
        }
        Ok(found.is_some())
    }

    /// Before a point write's lock (`search_first`): the key's stripe line is fetched for
    /// writing while the B+tree is searched, and the slot found is returned as a guess to be
    /// checked under the lock (0: none found, or not searching first). A slot this
    /// transaction found before needs no search.
    fn search_before_lock(&mut self, t: &TableRt, key: u64) -> Result<u64> {
        let db = self.db;
        if !db.search_first || self.located.get(t.id, key).is_some() {
            return Ok(0);
        }
        db.locks.prefetch_for_lock(t.id, key);
        let guess = db.tree(t).get(key)?.unwrap_or(0);
        if guess != 0 {
            db.prefetch_slot(guess, SLOT_HEADER);
        }
        Ok(guess)
    }

    /// The rid the index holds for `key`, validated against the heap. The caller holds the
    /// key's exclusive lock: a slot this transaction found for the key before is still its row
    /// ([`Located`]) and the index is not searched again.
    /// `guess`: a slot [`InPlaceTxn::search_before_lock`] found (0: none; then the worker's
    /// slot hint, if hints are on), used if it holds the key now that the lock is held (under
    /// the key's exclusive lock no other transaction moves its row).
    fn find(&mut self, t: &TableRt, key: u64, guess: u64) -> Result<Option<u64>> {
        if let Some(rid) = self.located.get(t.id, key) {
            self.db.check_row(t, rid, Some(key))?;
            return Ok(Some(rid));
        }
        let from_hints = guess == 0 && self.db.hints;
        let guess = if from_hints { self.logs.hints().get(t.id, key) } else { guess };
        if self.db.hinted_row(t, guess, key).is_some() {
            self.located.put(t.id, key, guess);
            if self.db.hints && !from_hints {
                self.logs.hints().put(t.id, key, guess);
            }
            return Ok(Some(guess));
        }
        let Some(rid) = self.db.tree(t).get(key)? else { return Ok(None) };
        self.located.put(t.id, key, rid);
        if self.db.hints {
            self.logs.hints().put(t.id, key, rid);
        }
        self.db.prefetch_slot(rid, SLOT_HEADER);
        self.db.check_row(t, rid, Some(key))?;
        Ok(Some(rid))
    }

    /// Ends the transaction's hold on its keys: pending deletes first (the keys are back in
    /// the tree after a rollback, or gone for good after a commit), then the locks. Every key
    /// held exclusively gets a new version, after a rollback too: the rows were written in
    /// place and restored, and an optimistic read that overlapped the write and the restore
    /// must fail its check of the stripe word (keeping the old version let the word go back to
    /// what that read loaded first, so a torn or uncommitted row passed as committed —
    /// `regression_inplace_rollback_torn_read`).
    fn release(&mut self) {
        for (table, key) in std::mem::take(&mut self.deleted) {
            if let Ok(t) = self.db.table_rt(table) {
                t.deleted.remove(key);
            }
        }
        self.locks.release_all(&self.db.locks, self.id);
        self.dirty.clear();
        self.logs.dirty = std::mem::take(&mut self.dirty);
        self.finished = true;
    }

    fn rollback(&mut self) -> Result<()> {
        if self.db.retry_keeps_age && self.locks.refused() {
            // Died on a conflict: the worker's next transaction is taken to be its retry.
            self.logs.retry_age = self.locks.age();
        }
        self.dirty.clear();
        if !self.logs.user.is_active() {
            return Ok(());
        }
        let db = self.db;
        let records = self.logs.user.read_records();
        let logs = &mut *self.logs;
        let outcome = super::recovery::rollback_user(db, self.worker, &mut logs.sys, &records)?;
        logs.user.finish(&outcome.written);
        // Slots this transaction took: their pages were scanned, so they go to our cache.
        db.give_slots_by_table(self.worker, &mut logs.sys, &outcome.freed)
    }
}

impl Txn for InPlaceTxn<'_> {
    /// Optimistic (`storage::lock`): no lock-table entry, no latch, nothing shared written;
    /// validated again by every later read and before the commit point.
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.read_guessing(table, key, out, 0)
    }

    /// The key's exclusive lock first (waited for, wait-die), then the read under it.
    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        let t = self.db.table_rt(table)?;
        let guess = self.search_before_lock(t, key)?;
        self.lock(table, key, LockMode::Exclusive)?;
        self.read_guessing(table, key, out, guess)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.db.table_rt(table)?;
        check_row(table, &t.spec, row)?;
        self.lock(table, key, LockMode::Exclusive)?;
        self.forget(table, key);
        let db = self.db;
        if db.tree(t).get(key)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        let rid = self.take_slot(t)?;
        // Under `wal`, the undo records and the new row go to the log as one insert: the undo
        // log is this worker's, and the slot it took is its alone (`wal::capture`).
        let group = db.region.store_group();
        let alloc_rec = logical(table, rid, 0);
        let index_rec = logical(table, key, rid);
        if let Err(e) = self.log(&[(REC_HEAP_ALLOC, &alloc_rec), (REC_INDEX_INSERT, &index_rec)]) {
            t.cache(self.worker).push(rid);
            return Err(e);
        }
        self.fresh.push(rid);
        let mut slot = Vec::with_capacity(SLOT_HEADER as usize + row.len());
        let crc = if db.layout.row_checksums { row_crc(rid, key, &[row]) } else { 0 };
        slot.extend_from_slice(&used_word(crc).to_le_bytes());
        slot.extend_from_slice(&key.to_le_bytes());
        slot.extend_from_slice(row);
        let lines = pmem::line_span(rid, slot.len() as u64).count;
        db.store.touch(Heap, rid / PAGE_SIZE_U64, lines);
        {
            let _latch = self.page_latch(rid);
            self.write(rid, &slot)?;
        }
        drop(group);
        let tree = db.tree(t);
        let inserted = self.system(|sys| tree.insert(sys, key, rid))?;
        if !inserted {
            return Err(DbError::Corrupt(format!("key {key} appeared under an exclusive lock")));
        }
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.db.table_rt(table)?;
        check_update(table, &t.spec, offset, bytes.len())?;
        let guess = self.search_before_lock(t, key)?;
        self.lock(table, key, LockMode::Exclusive)?;
        let Some(rid) = self.find(t, key, guess)? else { return Ok(false) };
        let at = rid + SLOT_HEADER + offset as u64;
        let crc = self.new_row_crc(t, rid, offset as usize, bytes)?;
        let lines = row_lines(rid, offset.into(), bytes.len() as u64);
        self.db.store.touch_more(Heap, rid / PAGE_SIZE_U64, lines);
        let _latch = self.page_latch(at);
        // Under `wal`, the undo record and the row go to the log as one insert: both are this
        // worker's alone until the latch and the row lock go (dropped after the latch guard
        // above is taken, so before it is released; see `wal::capture`).
        let db = self.db;
        let _group = db.region.store_group();
        if self.fresh.contains(&rid) {
            self.write_update(rid, at, bytes, crc, false)?;
            return Ok(true);
        }
        // One undo record holds the old bytes and the old checksum: rolled back, they agree.
        let crc_at = rid + SLOT_CRC_OFFSET;
        let before = match crc {
            Some(_) => encode_phys(&self.db.region, &[(at, bytes.len()), (crc_at, 4)]),
            None => encode_phys(&self.db.region, &[(at, bytes.len())]),
        };
        if matches!(self.db.fault, Some(Fault::UpdateBeforeUndo | Fault::PelleyPageBeforeWal)) {
            self.write_update(rid, at, bytes, crc, false)?;
            self.log(&[(REC_PHYS, &before)])?;
            return Ok(true);
        }
        self.log(&[(REC_PHYS, &before)])?;
        let skip_flush = self.db.fault == Some(Fault::PelleyPageNotFlushed);
        self.write_update(rid, at, bytes, crc, skip_flush)?;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.db.table_rt(table)?;
        let guess = self.search_before_lock(t, key)?;
        self.lock(table, key, LockMode::Exclusive)?;
        let db = self.db;
        let Some(rid) = self.find(t, key, guess)? else { return Ok(false) };
        self.forget(table, key);
        {
            // Under `wal`, the undo records go to the log as one insert (the log is ours).
            let _group = db.region.store_group();
            self.log(&[
                (REC_INDEX_DELETE, &logical(table, key, rid)),
                (REC_FREE_SLOT, &logical(table, rid, 0)),
            ])?;
        }
        // Pending before the key leaves the tree: a scan that misses the key finds it here.
        t.deleted.add(key);
        self.deleted.push((table, key));
        let tree = db.tree(t);
        let removed = self.system(|sys| tree.remove(sys, key))?;
        if removed != Some(rid) {
            return Err(DbError::Corrupt(format!("key {key} changed under an exclusive lock")));
        }
        self.to_free.push((table, rid));
        db.store.counters().delete();
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
        let t = self.db.table_rt(table)?;
        let db = self.db;
        let (locks, id) = (&mut self.locks, self.id);
        let mut n = 0usize;
        if limit == 0 {
            return Ok(0);
        }
        // The keys from `gap` up to the next visited key were passed over: any of them that a
        // live transaction deleted is locked as if read (conflicting unless it is our own).
        let mut gap = Some(low);
        let mut stopped = false;
        db.tree(t).scan(low, high, &mut |key, rid| {
            // No-wait locking under the leaf latch: never blocks, so cannot deadlock.
            if let Some(from) = gap.filter(|&g| g < key) {
                for k in t.deleted.within(from, key - 1) {
                    locks.lock(&db.locks, id, table, k, LockMode::Shared)?;
                }
            }
            locks.lock(&db.locks, id, table, key, LockMode::Shared)?;
            let word = db.check_row(t, rid, Some(key))?;
            let row = db.region.read(rid + SLOT_HEADER, t.spec.row_bytes as usize);
            db.store.touch_more(Heap, rid / PAGE_SIZE_U64, row_lines(rid, 0, row.len() as u64));
            db.verify_row(t, rid, key, word, &[row])?;
            n += 1;
            gap = key.checked_add(1);
            stopped = !(visit(key, row) && n < limit);
            Ok(!stopped)
        })?;
        if let Some(from) = gap.filter(|_| !stopped) {
            for k in t.deleted.within(from, high) {
                locks.lock(&db.locks, id, table, k, LockMode::Shared)?;
            }
        }
        Ok(n)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let db = self.db;
        // Every lock is held: the reads validated now hold at the commit point (on failure the
        // drop rolls back, as an abort would).
        self.locks.validate(&db.locks)?;
        db.store.counters().commit();
        if !self.logs.user.is_active() {
            self.release();
            return Ok(CommitToken::DURABLE);
        }
        let dirty = std::mem::take(&mut self.dirty);
        if self.to_free.is_empty() {
            if db.fault == Some(Fault::CommitBeforeData) {
                self.logs.user.finish(&[]);
                db.region.flush_ranges(&dirty);
                db.region.fence();
            } else {
                // The commit point: the data, then the 8-byte free mark (2 barriers); one
                // insert into `wal`'s log (the undo log is this worker's).
                let _group = db.region.store_group();
                self.logs.user.finish(&dirty);
            }
            self.dirty = dirty;
        } else {
            db.region.flush_ranges(&dirty);
            db.region.fence();
            self.dirty = dirty;
            self.logs.user.mark_committed();
            let frees = std::mem::take(&mut self.to_free);
            if self.free_slots_unlisted(&frees)? {
                self.release();
                return Ok(CommitToken::DURABLE);
            }
            // The free lists of every table involved stay locked until the frees are durable,
            // so the lazy free-slot scan cannot hand out a slot whose free a crash could still
            // redo over its next row. Locked in table order: no deadlock.
            let ids: std::collections::BTreeSet<TableId> = frees.iter().map(|f| f.0).collect();
            let tables = ids.iter().map(|id| db.table_rt(*id)).collect::<Result<Vec<_>>>()?;
            let mut lists: Vec<_> = tables.iter().map(|t| t.lock_free()).collect();
            let mut written = Vec::with_capacity(frees.len());
            for (_, rid) in &frees {
                db.region.write_u64(*rid, SLOT_FREE);
                written.push((*rid, 8));
            }
            self.logs.user.finish(&written);
            let mut pages = vec![std::collections::BTreeSet::new(); tables.len()];
            for (table, rid) in frees {
                let i = tables.iter().position(|t| t.id == table).expect("locked above");
                lists[i].give_back(rid);
                pages[i].insert(rid / storage::format::PAGE_SIZE_U64);
            }
            // The frees are durable: heap pages they emptied go back to the allocator.
            for (i, t) in tables.iter().enumerate() {
                db.release_empty_heap_pages(
                    t,
                    self.worker,
                    &mut self.logs.sys,
                    &mut lists[i],
                    &pages[i],
                );
            }
        }
        self.release();
        Ok(CommitToken::DURABLE)
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        let r = self.rollback();
        self.release();
        r
    }
}

impl Drop for InPlaceTxn<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if std::thread::panicking() {
            // A second panic while unwinding would abort the process: leave the undo log
            // active for recovery and refuse further work on this handle.
            self.db.poisoned.store(true, std::sync::atomic::Ordering::Relaxed);
            self.release();
            return;
        }
        // An error here means the region is damaged; recovery will roll back on reopen.
        let rolled_back = self.rollback().is_ok();
        if !rolled_back {
            self.db.poisoned.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, Region, RegionOptions};
    use storage::{Engine, TableSpec};

    fn row(key: u64) -> Vec<u8> {
        (0..64).map(|i| (key as u8).wrapping_mul(31).wrapping_add(i)).collect()
    }

    /// A transaction of worker 0 (its own type: the guesses are a private path).
    fn txn(db: &InPlace) -> InPlaceTxn<'_> {
        InPlaceTxn::new(db, db.workers[0].lock(), 1 << 16 | 1, 0)
    }

    /// Wait-die as the textbook has it (`retry_keeps_age=on`) restarts a transaction that died
    /// with its original age: the worker's next transaction after one that was refused a lock
    /// keeps its age (and is older than every transaction begun since), while one after a
    /// commit or a plain rollback is young; with the default, a retry is young too.
    /// Would catch a retry that takes a new age with the option on (it can die again and again
    /// behind older holders), an age kept past a commit, or the option leaking into the default.
    #[test]
    fn a_transaction_that_died_in_wait_die_is_retried_with_its_age() {
        for keeps in [true, false] {
            let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).expect("region");
            let opts =
                crate::EngineOptions { workers: 3, retry_keeps_age: keeps, ..Default::default() };
            let db = InPlace::open(region, &opts).expect("open");
            let table = db
                .create_table(&TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 0 })
                .expect("table");
            let mut w = db.begin(0).expect("begin");
            for key in 0..4 {
                w.insert(table, key, &row(key)).expect("insert");
            }
            w.commit().expect("commit");
            let begin = |worker: usize, n: u64| {
                let id = n << 16 | (worker as u64 + 1);
                InPlaceTxn::new(&db, db.workers[worker].lock(), id, worker)
            };
            // The older transaction (worker 1) holds key 1; the younger (worker 0) dies on it.
            let mut older = begin(1, 1);
            older.lock(table, 1, LockMode::Exclusive).expect("older locks");
            let mut young = begin(0, 2);
            let died_age = young.locks.age();
            assert!(died_age > older.locks.age());
            young.lock(table, 2, LockMode::Exclusive).expect("a free key");
            let e = young.lock(table, 1, LockMode::Exclusive).expect_err("younger dies");
            assert!(e.is_retryable(), "{e}");
            assert!(young.locks.refused());
            Box::new(young).abort().expect("abort");
            // Meanwhile another transaction begins, younger than the one that died.
            let later = begin(2, 3);
            assert!(later.locks.age() > died_age);
            drop(later);
            let retry = begin(0, 4);
            match keeps {
                true => assert_eq!(retry.locks.age(), died_age, "the retry keeps its age"),
                false => assert!(retry.locks.age() > died_age, "the default: a new age"),
            }
            drop(retry);
            drop(older);
            // Kept once: the worker's transaction after the retry is young again.
            let next = begin(0, 5);
            assert!(next.locks.age() > died_age);
            // A rollback without a conflict, and a commit, pass no age on.
            Box::new(next).abort().expect("abort");
            let after = begin(0, 6);
            assert!(after.locks.age() > died_age && !after.locks.refused());
            drop(after);
            let mut t = begin(0, 7);
            t.lock(table, 3, LockMode::Exclusive).expect("lock");
            Box::new(t).commit().expect("commit");
            assert!(begin(0, 8).locks.age() > died_age);
        }
    }

    /// The guesses a search before the read or lock may hand over stale: every kind of wrong
    /// slot must be checked and replaced by a search, never read as the key's row, never
    /// reported as damage. Would catch a guess used unchecked, or checked as an index entry
    /// is (a mismatch there is `Corrupt`).
    #[test]
    fn a_stale_or_wrong_guess_reads_and_writes_the_keys_row_or_finds_it_absent() {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).expect("region");
        let opts = crate::EngineOptions { workers: 2, node_capacity: 8, ..Default::default() };
        let db = InPlace::open(region, &opts).expect("open");
        let table = db
            .create_table(&TableSpec { name: "t".into(), row_bytes: 64, expected_rows: 0 })
            .expect("table");
        let t = db.table_rt(table).expect("table");
        let mut w = db.begin(0).expect("begin");
        for key in 0..100 {
            w.insert(table, key, &row(key)).expect("insert");
        }
        w.commit().expect("commit");
        let rid = |key| db.tree(t).get(key).expect("get").expect("present");
        // Key 7's slot is freed; key 8's is freed and reused by key 500.
        let (old7, old8) = (rid(7), rid(8));
        let mut w = db.begin(0).expect("begin");
        assert!(w.delete(table, 7).expect("delete"));
        assert!(w.delete(table, 8).expect("delete"));
        w.commit().expect("commit");
        let mut w = db.begin(0).expect("begin");
        w.insert(table, 500, &row(500)).expect("insert");
        w.commit().expect("commit");
        let reused = (rid(500) == old8 || rid(500) == old7).then(|| rid(500));
        let guesses = [
            0,
            rid(3),
            rid(4),
            old7,
            old8,
            rid(4) + 8,
            db.region.len() - 8,
            PAGE_SIZE_U64,
            u64::MAX,
        ];
        for key in [3u64, 7, 8, 500, 1000] {
            let expect = (key == 3 || key == 500).then(|| row(key));
            for &guess in guesses.iter().chain(&reused) {
                let mut out = Vec::new();
                let mut x = txn(&db);
                let found = x.read_guessing(table, key, &mut out, guess);
                let found = found.unwrap_or_else(|e| panic!("key {key} guess {guess}: {e}"));
                assert_eq!(found.then_some(out), expect, "read of key {key} from guess {guess}");
                x.lock(table, key, LockMode::Exclusive).expect("lock");
                let at = x.find(t, key, guess).unwrap_or_else(|e| panic!("find {key}: {e}"));
                assert_eq!(at, expect.as_ref().map(|_| rid(key)), "find {key} from guess {guess}");
                x.rollback().expect("rollback");
            }
        }
    }
}

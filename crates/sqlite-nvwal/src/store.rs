//! What the VFS stores in a region: the database file (an area written in place, persisted at
//! its `xSync`) and NVWAL's log (Kim et al., ASPLOS 2016): SQLite's WAL frames as differential
//! records (§3.2) in a linked list of heap blocks with free / pending / in-use states (§3.3,
//! Algorithm 1), made durable at the commit frame's sync by lazy, eager or checksum commit (§4.1,
//! §4.2), and recovered by the cases of §4.3.
//!
//! SQLite's view of the WAL is a byte-exact file kept in DRAM (the *shadow*): its writes land
//! there and its reads are served from there. At the WAL's `xSync` the frames written since the
//! last sync become records in NVRAM. At open the shadow is rebuilt from the records, so SQLite's
//! own WAL recovery reads exactly the frames it wrote.
//!
//! Recovery invariant: a record belongs to the log iff it is reachable from the header through
//! in-use blocks, carries the current WAL header's salts and the next frame number, and is
//! followed (within its transaction) by a record whose commit word is set (and, in `cs` mode,
//! whose checksum matches every record of the transaction); nothing after the last such commit
//! record is part of the log, and no block outside the list stays allocated.

use crate::layout::*;
use crate::{DiffMode, Fault, HeapMode, NvwalOptions, SyncMode};
use parking_lot::Mutex;
use pmem::Region;
use std::collections::HashMap;
use storage::{DbError, Result};

/// Byte ranges flushed and persisted on their own: the WAL header line.
const LINE: u64 = 64;

/// One record of the log, by frame number.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// Region offset of the record.
    pos: u64,
    /// Index in `Log::blocks` of the block holding it.
    slot: usize,
    pgno: u32,
    bytes: u64,
}

/// What recovery found, for the engine's report and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFacts {
    pub frames_recovered: u64,
    pub commits_recovered: u64,
    /// Records after the last valid commit that were dropped.
    pub records_dropped: u64,
    /// Commit records whose checksum did not match their transaction (`cs` torn commits).
    pub torn_commits_by_checksum: u64,
    /// Linked blocks that were not in use (paper §4.3 case 2): the link was cut.
    pub links_cut: u64,
    /// Pending or unreachable in-use blocks returned to the free state (§4.3 case 1).
    pub blocks_reclaimed: u64,
    /// Blocks after the recovered log's end that were freed.
    pub tail_blocks_freed: u64,
}

/// Volatile state of the log.
struct Log {
    /// 0 until a valid WAL header is known.
    page_bytes: u32,
    shadow: Vec<u8>,
    records: Vec<Rec>,
    /// Frames covered by a persisted commit mark.
    committed: usize,
    last_of_page: HashMap<u32, u32>,
    /// Linked blocks, in list order.
    blocks: Vec<u32>,
    tail_slot: usize,
    tail_off: u64,
    /// Free blocks (popped from the end: lowest index first).
    free: Vec<u32>,
    header_dirty: bool,
    /// `cs` mode: record ranges written but never flushed (made durable by `sync_all`).
    unflushed: Vec<(u64, u64)>,
    /// `cs` mode: crc32c of the records of the transaction being written.
    txn_crc: u32,
    commits: u64,
    durable_commits: u64,
}

/// Counters of what the log did (bytes stored into records, blocks allocated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub records: u64,
    pub record_bytes: u64,
    pub page_bytes_full: u64,
    pub blocks_allocated: u64,
    pub commits: u64,
}

struct Db {
    len: u64,
    persisted_len: u64,
    dirty: Vec<(u64, u64)>,
}

/// Most dirty ranges of the database file kept before they are flushed early (without a
/// fence: the sync still fences them).
const MAX_DIRTY_RANGES: usize = 1 << 16;

/// One region's database file and log.
pub struct Store {
    region: Region,
    layout: Layout,
    options: NvwalOptions,
    log: Mutex<Log>,
    db: Mutex<Db>,
    counters: Mutex<LogCounters>,
    facts: RecoveryFacts,
    formatted_now: bool,
}

fn corrupt(m: String) -> DbError {
    DbError::Corrupt(format!("sqlite-nvwal: {m}"))
}

impl Store {
    /// Opens the region: formats a blank one (or one whose format never finished), recovers
    /// the log of a formatted one.
    pub fn open(region: Region, options: &NvwalOptions) -> Result<Store> {
        options.validate()?;
        // The file's length, not the mapping's: a growable mapping (`bench` maps half the free
        // disk) is longer than the file, differs from one open to the next, and its tail is not
        // backed. The store never grows its file, so the geometry recorded in the header at
        // format time is what every later open reads, whatever the mapping.
        let len = region.backed_len();
        if len < HEADER_BYTES * 2 {
            // Too small to format is the size's fault; an existing file this short with
            // something in it was cut.
            if region.created() || region.read(0, len as usize).iter().all(|b| *b == 0) {
                return Err(DbError::RegionFull(format!("sqlite-nvwal: region of {len} bytes")));
            }
            return Err(corrupt(format!(
                "region file of {len} bytes is shorter than its header (truncated?)"
            )));
        }
        let magic = region.read_u64(H_MAGIC);
        let (layout, formatted_now) = if magic == MAGIC {
            let geometry = region.read(0, 64).to_vec();
            let layout = Layout::decode(&geometry, region.read_u64(H_GEOMETRY_CRC), len)?;
            if region.read_u64(H_FORMATTED) == 1 {
                (layout, false)
            } else {
                // A crash while the database was being created: start again.
                format(&region, &layout);
                (layout, true)
            }
        } else if magic == FORMATTING_MAGIC || blank_header_over_blank_region(&region)? {
            // Blank, or a format that a crash cut short (nothing but the header and the block
            // table was written, and no database exists yet): format it (again).
            let log_bytes = options.log_bytes.unwrap_or((len / 2).clamp(4 << 20, 64 << 20));
            let layout = Layout::plan(len, log_bytes, options.block_bytes)?;
            format(&region, &layout);
            (layout, true)
        } else {
            return Err(DbError::Format(
                "sqlite-nvwal: the region holds something else (no NVWAL header); use a blank \
                 region"
                    .into(),
            ));
        };
        let db_len = region.read_u64(H_DB_LEN);
        if db_len > layout.db_cap {
            return Err(corrupt(format!("database length {db_len} > capacity {}", layout.db_cap)));
        }
        let mut store = Store {
            region,
            layout,
            options: options.clone(),
            log: Mutex::new(Log::empty()),
            db: Mutex::new(Db { len: db_len, persisted_len: db_len, dirty: Vec::new() }),
            counters: Mutex::new(LogCounters::default()),
            facts: RecoveryFacts::default(),
            formatted_now,
        };
        let (log, facts) = store.recover()?;
        store.log = Mutex::new(log);
        store.facts = facts;
        Ok(store)
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn formatted_now(&self) -> bool {
        self.formatted_now
    }

    pub fn facts(&self) -> &RecoveryFacts {
        &self.facts
    }

    pub fn counters(&self) -> LogCounters {
        *self.counters.lock()
    }

    pub fn options(&self) -> &NvwalOptions {
        &self.options
    }

    /// Marks the database created (its WAL mode and schema are durable in the log).
    pub fn mark_formatted(&self) {
        self.region.write_u64(H_FORMATTED, 1);
        self.region.persist(H_FORMATTED, 8);
    }

    // ----- the database file -----

    pub fn db_len(&self) -> u64 {
        self.db.lock().len
    }

    /// Reads at `offset`; bytes past the end are zero. Returns the bytes that existed.
    pub fn db_read(&self, offset: u64, out: &mut [u8]) -> usize {
        let db = self.db.lock();
        let have = db.len.saturating_sub(offset).min(out.len() as u64) as usize;
        if have > 0 {
            out[..have].copy_from_slice(self.region.read(self.layout.db_off + offset, have));
        }
        out[have..].fill(0);
        have
    }

    pub fn db_write(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let end = offset.checked_add(bytes.len() as u64).filter(|e| *e <= self.layout.db_cap);
        let Some(end) = end else {
            return Err(DbError::RegionFull(format!(
                "sqlite-nvwal: the database file would pass its {}-byte area",
                self.layout.db_cap
            )));
        };
        let mut db = self.db.lock();
        self.region.write(self.layout.db_off + offset, bytes);
        if db.dirty.len() >= MAX_DIRTY_RANGES {
            for (o, l) in db.dirty.drain(..) {
                self.region.flush(self.layout.db_off + o, l);
            }
        }
        db.dirty.push((offset, bytes.len() as u64));
        db.len = db.len.max(end);
        Ok(())
    }

    pub fn db_truncate(&self, len: u64) {
        let mut db = self.db.lock();
        db.len = db.len.min(len);
    }

    /// `xSync` of the database file: its writes, then its length, persist.
    pub fn db_sync(&self) {
        let mut db = self.db.lock();
        for (o, l) in db.dirty.drain(..) {
            self.region.flush(self.layout.db_off + o, l);
        }
        self.region.fence();
        if db.len != db.persisted_len {
            self.region.write_u64(H_DB_LEN, db.len);
            self.region.persist(H_DB_LEN, 8);
            db.persisted_len = db.len;
        }
    }

    // ----- the WAL file -----

    pub fn wal_len(&self) -> u64 {
        self.log.lock().shadow.len() as u64
    }

    pub fn wal_read(&self, offset: u64, out: &mut [u8]) -> usize {
        let log = self.log.lock();
        let have = (log.shadow.len() as u64).saturating_sub(offset).min(out.len() as u64) as usize;
        if have > 0 {
            out[..have].copy_from_slice(&log.shadow[offset as usize..offset as usize + have]);
        }
        out[have..].fill(0);
        have
    }

    pub fn wal_write(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut log = self.log.lock();
        if offset == 0 {
            if bytes.len() != WAL_HEADER_BYTES {
                return Err(DbError::Invalid(format!(
                    "sqlite-nvwal: a {}-byte write at the WAL's start (expected its 32-byte \
                     header)",
                    bytes.len()
                )));
            }
            let Some(page_bytes) = wal_header_page_bytes(bytes) else {
                return Err(DbError::Invalid(
                    "sqlite-nvwal: WAL header with a bad page size".into(),
                ));
            };
            if page_bytes as u64 + RecordHeader::record_bytes(0) > self.layout.block_bytes {
                return Err(DbError::Invalid(format!(
                    "sqlite-nvwal: {page_bytes}-byte pages do not fit {}-byte blocks",
                    self.layout.block_bytes
                )));
            }
            // SQLite rewrites the header only when every frame is checkpointed and the database
            // file synced (a WAL restart): the old log is no longer needed.
            self.reset(&mut log);
            log.page_bytes = page_bytes;
            log.shadow.extend_from_slice(bytes);
            self.region.write(H_WAL_HEADER, bytes);
            if self.options.sync == SyncMode::Eager {
                self.region.persist(H_WAL_HEADER, LINE);
            } else {
                log.header_dirty = true;
            }
            return Ok(());
        }
        if log.page_bytes == 0 || offset < WAL_HEADER_BYTES as u64 {
            return Err(DbError::Invalid(format!(
                "sqlite-nvwal: WAL write at {offset} before its header"
            )));
        }
        let frame_bytes = u64::from(log.page_bytes) + FRAME_HEADER_BYTES as u64;
        let first_frame = ((offset - WAL_HEADER_BYTES as u64) / frame_bytes) as usize;
        if first_frame < log.records.len() {
            // SQLite rewrites a frame of the open transaction (a page spilled, then changed).
            if first_frame < log.committed {
                return Err(corrupt(format!("SQLite rewrote committed frame {first_frame}")));
            }
            self.drop_records(&mut log, first_frame);
        }
        let end = offset as usize + bytes.len();
        if log.shadow.len() < end {
            log.shadow.resize(end, 0);
        }
        log.shadow[offset as usize..end].copy_from_slice(bytes);
        Ok(())
    }

    pub fn wal_truncate(&self, len: u64) -> Result<()> {
        let mut log = self.log.lock();
        if len == 0 {
            self.reset(&mut log);
            self.clear_header();
            return Ok(());
        }
        if len >= log.shadow.len() as u64 {
            return Ok(());
        }
        let frame_bytes = u64::from(log.page_bytes) + FRAME_HEADER_BYTES as u64;
        let kept = (len.saturating_sub(WAL_HEADER_BYTES as u64) / frame_bytes) as usize;
        if kept < log.committed {
            return Err(DbError::Invalid(format!(
                "sqlite-nvwal: truncating the WAL to {len} bytes would drop committed frames"
            )));
        }
        if kept < log.records.len() {
            self.drop_records(&mut log, kept);
        }
        log.shadow.truncate(len as usize);
        Ok(())
    }

    /// `xDelete` of the WAL (SQLite deletes it after the last connection's checkpoint).
    pub fn wal_delete(&self) {
        let mut log = self.log.lock();
        self.reset(&mut log);
        self.clear_header();
    }

    fn clear_header(&self) {
        self.region.write(H_WAL_HEADER, &[0u8; WAL_HEADER_BYTES]);
        self.region.persist(H_WAL_HEADER, LINE);
    }

    /// `xSync` of the WAL: Algorithm 1. The frames written since the last sync become records
    /// (copied without flushes), then, by sync mode, persist before the commit mark is set.
    pub fn wal_sync(&self) -> Result<()> {
        let mut log = self.log.lock();
        let log = &mut *log;
        if log.page_bytes == 0 {
            return Ok(());
        }
        let frame_bytes = log.page_bytes as usize + FRAME_HEADER_BYTES;
        let complete = log.shadow.len().saturating_sub(WAL_HEADER_BYTES) / frame_bytes;
        let first_new = log.records.len();
        let mut written: Vec<(u64, u64)> = Vec::with_capacity(complete - first_new.min(complete));
        for frame in first_new..complete {
            let range = self.append_record(log, frame)?;
            if self.options.sync == SyncMode::Eager {
                self.flush_frame(range);
                self.region.fence();
            } else {
                written.push(range);
            }
        }
        if log.records.len() <= log.committed {
            return Ok(());
        }
        let last = log.records.len() - 1;
        let commit_frame = frame_commit_size(Self::frame_header_of(log, last)) != 0;
        match self.options.sync {
            SyncMode::Lazy => {
                // Lines 21-28: flush every dirty line of the transaction's records, one barrier.
                if log.header_dirty {
                    self.region.flush(H_WAL_HEADER, LINE);
                    log.header_dirty = false;
                }
                for range in &written {
                    self.flush_frame(*range);
                }
                self.region.fence();
            }
            SyncMode::Eager => {}
            SyncMode::Checksum => {
                // §4.2: no flush of the records; the checksum in the commit word covers them.
                log.unflushed.extend_from_slice(&written);
            }
        }
        if !commit_frame {
            return Ok(());
        }
        // Lines 29-35: set the commit mark and persist it.
        let pos = log.records[last].pos;
        let word = match self.options.sync {
            SyncMode::Checksum => (u64::from(log.txn_crc) << 32) | COMMIT_TAG_CS,
            _ => COMMIT_TAG,
        };
        self.region.write_u64(pos, word);
        if self.options.sync == SyncMode::Checksum && log.header_dirty {
            self.region.flush(H_WAL_HEADER, LINE);
            log.header_dirty = false;
        }
        if self.options.fault != Some(Fault::SkipCommitPersist) {
            self.region.flush(pos, 8);
        }
        self.region.fence();
        log.committed = log.records.len();
        log.txn_crc = 0;
        log.commits += 1;
        if self.options.sync != SyncMode::Checksum {
            log.durable_commits = log.commits;
        }
        self.counters.lock().commits += 1;
        Ok(())
    }

    fn flush_frame(&self, (pos, bytes): (u64, u64)) {
        if self.options.fault != Some(Fault::SkipFrameFlush) {
            self.region.flush(pos, bytes);
        }
    }

    /// `cs` mode's durability point: flushes every record written so far and fences, so every
    /// commit so far survives a crash. Returns the commits now durable.
    pub fn sync_all(&self) -> u64 {
        let mut log = self.log.lock();
        if !log.unflushed.is_empty() || log.header_dirty {
            for (pos, bytes) in log.unflushed.drain(..) {
                self.region.flush(pos, bytes);
            }
            if log.header_dirty {
                self.region.flush(H_WAL_HEADER, LINE);
                log.header_dirty = false;
            }
            self.region.fence();
        }
        log.durable_commits = log.commits;
        log.durable_commits
    }

    /// Commits made so far and commits durable so far (they differ only in `cs` mode).
    pub fn commit_counts(&self) -> (u64, u64) {
        let log = self.log.lock();
        (log.commits, log.durable_commits)
    }

    fn frame_header_of(log: &Log, frame: usize) -> &[u8] {
        let off = WAL_HEADER_BYTES + frame * (log.page_bytes as usize + FRAME_HEADER_BYTES);
        &log.shadow[off..off + FRAME_HEADER_BYTES]
    }

    fn page_of(log: &Log, frame: usize) -> &[u8] {
        let off = WAL_HEADER_BYTES
            + frame * (log.page_bytes as usize + FRAME_HEADER_BYTES)
            + FRAME_HEADER_BYTES;
        &log.shadow[off..off + log.page_bytes as usize]
    }

    /// Writes frame `frame` of the shadow as a record (no flush); returns its region range.
    fn append_record(&self, log: &mut Log, frame: usize) -> Result<(u64, u64)> {
        let frame_header: [u8; FRAME_HEADER_BYTES] =
            Self::frame_header_of(log, frame).try_into().expect("24 bytes");
        let pgno = frame_pgno(&frame_header);
        if pgno == 0 {
            return Err(DbError::Invalid(format!("sqlite-nvwal: frame {frame} has page 0")));
        }
        let max_ranges = match self.options.diff {
            DiffMode::Off => 0,
            DiffMode::Range => 1,
            DiffMode::On => MAX_RANGES,
        };
        let base = if max_ranges > 0 { log.last_of_page.get(&pgno).copied() } else { None };
        let page = Self::page_of(log, frame);
        let diff = base.map(|b| {
            let ranges = diff_ranges(Self::page_of(log, b as usize), page, max_ranges);
            (ranges.len() as u32, encode_ranges(page, &ranges))
        });
        // A differential payload no smaller than the page is stored as the whole page, so a
        // record never holds more than a page (what `wal_write` checked fits a block).
        let (base, (ranges, payload)) = match diff {
            Some(d) if d.1.len() < page.len() => (base, d),
            _ => (None, (0, page.to_vec())),
        };
        let len = payload.len() as u32;
        let bytes = RecordHeader::record_bytes(len);
        let new_block = log.blocks.is_empty()
            || log.tail_off + bytes > self.layout.block_bytes
            || (self.options.heap == HeapMode::PerFrame && log.tail_off > 0);
        if new_block {
            self.advance_block(log)?;
        }
        let pos = self.layout.block(log.blocks[log.tail_slot]) + log.tail_off;
        let header = RecordHeader {
            commit: 0,
            frame: frame as u32,
            base: base.unwrap_or(NO_BASE),
            ranges,
            len,
            frame_header,
        };
        let encoded = header.encode();
        // Lines 15-17: copy the (differential) frame into NVRAM, no flush yet.
        self.region.write(pos, &encoded);
        self.region.write(pos + RECORD_HEADER_BYTES as u64, &payload);
        if self.options.sync == SyncMode::Checksum {
            log.txn_crc = crc32c::crc32c_append(log.txn_crc, &encoded[8..]);
            log.txn_crc = crc32c::crc32c_append(log.txn_crc, &payload);
        }
        log.records.push(Rec { pos, slot: log.tail_slot, pgno, bytes });
        log.last_of_page.insert(pgno, frame as u32);
        log.tail_off += bytes;
        let mut c = self.counters.lock();
        c.records += 1;
        c.record_bytes += bytes;
        c.page_bytes_full += u64::from(log.page_bytes) + RECORD_HEADER_BYTES as u64;
        Ok((pos, bytes))
    }

    /// Moves the tail to the next block of the list, allocating one (Algorithm 1 lines 4-14:
    /// pending, linked and persisted, then in use) when the list has none after the tail.
    fn advance_block(&self, log: &mut Log) -> Result<()> {
        if !log.blocks.is_empty() && log.tail_slot + 1 < log.blocks.len() {
            log.tail_slot += 1;
            log.tail_off = 0;
            return Ok(());
        }
        let Some(block) = log.free.pop() else {
            return Err(DbError::RegionFull(format!(
                "sqlite-nvwal: all {} log blocks of {} bytes are in use; give a larger \
                 log_bytes or checkpoint more often",
                self.layout.block_count, self.layout.block_bytes
            )));
        };
        let meta = self.layout.meta(block);
        let start = self.layout.block(block);
        // mv_pre_malloc: pending, no successor, and no stale record at the block's start.
        self.region.write_u64(meta, BLOCK_PENDING);
        self.region.write_u64(meta + 8, 0);
        self.region.write(start, &[0u8; RECORD_HEADER_BYTES]);
        self.region.flush(meta, META_ENTRY_BYTES);
        self.region.flush(start, RECORD_HEADER_BYTES as u64);
        self.region.fence();
        // wh.add_new_block + flush + persist barrier.
        let link = match log.blocks.last() {
            Some(prev) => self.layout.meta(*prev) + 8,
            None => H_FIRST_BLOCK,
        };
        self.region.write_u64(link, u64::from(block) + 1);
        self.region.persist(link, 8);
        // mv_malloc_set_used_flag.
        self.region.write_u64(meta, BLOCK_IN_USE);
        self.region.persist(meta, 8);
        log.blocks.push(block);
        log.tail_slot = log.blocks.len() - 1;
        log.tail_off = 0;
        self.counters.lock().blocks_allocated += 1;
        Ok(())
    }

    /// Forgets the (uncommitted) records from frame `from` on; the tail moves back to it.
    fn drop_records(&self, log: &mut Log, from: usize) {
        let first = log.records[from];
        log.tail_slot = first.slot;
        log.tail_off = first.pos - self.layout.block(log.blocks[first.slot]);
        log.records.truncate(from);
        log.unflushed.retain(|(pos, _)| {
            // Ranges of dropped records: those at or after the new tail in list order.
            log.records.iter().any(|r| r.pos == *pos)
        });
        log.last_of_page.clear();
        for (i, r) in log.records.iter().enumerate() {
            log.last_of_page.insert(r.pgno, i as u32);
        }
        if self.options.sync == SyncMode::Checksum {
            let mut crc = 0;
            for r in &log.records[log.committed..] {
                let bytes = self.region.read(r.pos + 8, r.bytes as usize - 8);
                let header = RecordHeader::decode(self.region.read(r.pos, RECORD_HEADER_BYTES));
                crc = crc32c::crc32c_append(
                    crc,
                    &bytes[..RECORD_HEADER_BYTES - 8 + header.len as usize],
                );
            }
            log.txn_crc = crc;
        }
    }

    /// Empties the log: unlinks the whole list (persisted), then frees every block (§4.3: the
    /// log is dropped only when every frame is in the database file).
    fn reset(&self, log: &mut Log) {
        if !log.blocks.is_empty() {
            self.region.write_u64(H_FIRST_BLOCK, 0);
            self.region.persist(H_FIRST_BLOCK, 8);
            for b in &log.blocks {
                let meta = self.layout.meta(*b);
                self.region.write_u64(meta, BLOCK_FREE);
                self.region.flush(meta, 8);
            }
            self.region.fence();
            let mut freed = std::mem::take(&mut log.blocks);
            freed.reverse();
            log.free.extend(freed);
        }
        log.page_bytes = 0;
        log.shadow.clear();
        log.records.clear();
        log.committed = 0;
        log.last_of_page.clear();
        log.tail_slot = 0;
        log.tail_off = 0;
        log.header_dirty = false;
        log.unflushed.clear();
        log.txn_crc = 0;
        // Reset follows a checkpoint that synced the database file: every commit is durable.
        log.durable_commits = log.commits;
    }

    // ----- recovery (§4.3) -----

    fn state(&self, block: u32) -> Result<u64> {
        let s = self.region.read_u64(self.layout.meta(block));
        match s {
            BLOCK_FREE | BLOCK_PENDING | BLOCK_IN_USE => Ok(s),
            other => Err(corrupt(format!("block {block} has state {other:#x}"))),
        }
    }

    /// Walks the block list; cuts it at the first block that is not in use (§4.3 case 2).
    fn walk_list(&self, facts: &mut RecoveryFacts) -> Result<Vec<u32>> {
        let mut chain = Vec::new();
        let mut seen = vec![false; self.layout.block_count as usize];
        let mut link = H_FIRST_BLOCK;
        loop {
            let next = self.region.read_u64(link);
            if next == 0 {
                break;
            }
            let ok = next <= self.layout.block_count
                && !seen[(next - 1) as usize]
                && self.state((next - 1) as u32)? == BLOCK_IN_USE;
            if !ok {
                if next > self.layout.block_count || seen[(next - 1) as usize] {
                    return Err(corrupt(format!("block list link {next} at {link}")));
                }
                self.region.write_u64(link, 0);
                self.region.persist(link, 8);
                facts.links_cut += 1;
                break;
            }
            let block = (next - 1) as u32;
            seen[block as usize] = true;
            chain.push(block);
            link = self.layout.meta(block) + 8;
        }
        Ok(chain)
    }

    fn recover(&self) -> Result<(Log, RecoveryFacts)> {
        let mut facts = RecoveryFacts::default();
        let mut log = Log::empty();
        let chain = self.walk_list(&mut facts)?;
        let wal_header = self.region.read(H_WAL_HEADER, WAL_HEADER_BYTES).to_vec();
        let page_bytes = if wal_header.iter().all(|b| *b == 0) {
            None
        } else {
            wal_header_page_bytes(&wal_header)
        };
        let mut end = (0usize, 0u64);
        if let Some(page_bytes) = page_bytes {
            log.page_bytes = page_bytes;
            log.shadow.extend_from_slice(&wal_header);
            log.blocks = chain.clone();
            end = self.scan(&mut log, &wal_header, &mut facts)?;
        }
        let kept_blocks = if log.committed == 0 { 0 } else { end.0 + 1 };
        // Free the blocks after the last committed record's block.
        if kept_blocks < chain.len() {
            let link = match kept_blocks {
                0 => H_FIRST_BLOCK,
                n => self.layout.meta(chain[n - 1]) + 8,
            };
            self.region.write_u64(link, 0);
            self.region.persist(link, 8);
            for b in &chain[kept_blocks..] {
                self.region.write_u64(self.layout.meta(*b), BLOCK_FREE);
                self.region.flush(self.layout.meta(*b), 8);
                facts.tail_blocks_freed += 1;
            }
            self.region.fence();
        }
        log.blocks = chain[..kept_blocks].to_vec();
        // Terminate the log at its end so that no stale record there is read as the next one.
        if kept_blocks > 0 {
            let (slot, off) = end;
            log.tail_slot = slot;
            log.tail_off = off;
            if off + RECORD_HEADER_BYTES as u64 <= self.layout.block_bytes {
                let pos = self.layout.block(chain[slot]) + off;
                if self.region.read(pos, RECORD_HEADER_BYTES).iter().any(|b| *b != 0) {
                    self.region.write(pos, &[0u8; RECORD_HEADER_BYTES]);
                    self.region.persist(pos, RECORD_HEADER_BYTES as u64);
                }
            }
        }
        // Every block outside the list is free (§4.3 case 1: pending blocks; and in-use blocks
        // a crash during a reset left unlinked).
        let mut in_list = vec![false; self.layout.block_count as usize];
        for b in &log.blocks {
            in_list[*b as usize] = true;
        }
        let mut reclaimed = false;
        for b in (0..self.layout.block_count as u32).rev() {
            if in_list[b as usize] {
                continue;
            }
            if self.state(b)? != BLOCK_FREE {
                self.region.write_u64(self.layout.meta(b), BLOCK_FREE);
                self.region.flush(self.layout.meta(b), 8);
                facts.blocks_reclaimed += 1;
                reclaimed = true;
            }
            log.free.push(b);
        }
        if reclaimed {
            self.region.fence();
        }
        facts.frames_recovered = log.committed as u64;
        Ok((log, facts))
    }

    /// Reads the records of the current WAL header's generation, rebuilding the shadow; keeps
    /// the frames up to the last valid commit. Returns the log's end `(block slot, offset)`.
    fn scan(
        &self,
        log: &mut Log,
        wal_header: &[u8],
        facts: &mut RecoveryFacts,
    ) -> Result<(usize, u64)> {
        let salts = wal_header_salts(wal_header);
        let page_bytes = log.page_bytes;
        let block_bytes = self.layout.block_bytes;
        let (mut slot, mut off) = (0usize, 0u64);
        let mut end = (0usize, 0u64);
        let mut crc = 0u32;
        let mut frame = 0usize;
        let mut page = vec![0u8; page_bytes as usize];
        while slot < log.blocks.len() {
            let fits = off + RECORD_HEADER_BYTES as u64 <= block_bytes;
            let pos = self.layout.block(log.blocks[slot]) + off;
            let header = fits
                .then(|| RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES)))
                .filter(|h| self.plausible(log, h, frame, &salts, pos, off));
            // A differential record's range table is checked like its header: a damaged one
            // means the record is not part of the log.
            let record = header.and_then(|h| {
                if h.base == NO_BASE {
                    return Some((h, Vec::new()));
                }
                let payload = self.region.read(pos + RECORD_HEADER_BYTES as u64, h.len as usize);
                decode_ranges(payload, h.ranges, page_bytes).map(|r| (h, r))
            });
            let Some((header, ranges)) = record else {
                if off == 0 {
                    break;
                }
                // The writer moves to the next block when a record does not fit.
                slot += 1;
                off = 0;
                continue;
            };
            let payload_at = pos + RECORD_HEADER_BYTES as u64;
            let payload = self.region.read(payload_at, header.len as usize);
            if header.base == NO_BASE {
                page.copy_from_slice(payload);
            } else {
                page.copy_from_slice(Self::page_of(log, header.base as usize));
                apply_ranges(&mut page, &ranges, payload)?;
            }
            let encoded = header.encode();
            crc = crc32c::crc32c_append(crc, &encoded[8..]);
            crc = crc32c::crc32c_append(crc, payload);
            let bytes = RecordHeader::record_bytes(header.len);
            log.shadow.extend_from_slice(&header.frame_header);
            log.shadow.extend_from_slice(&page);
            log.records.push(Rec { pos, slot, pgno: header.pgno(), bytes });
            log.last_of_page.insert(header.pgno(), frame as u32);
            off += bytes;
            frame += 1;
            if header.commit != 0 {
                let tag = header.commit & 0xFFFF_FFFF;
                let valid = tag == COMMIT_TAG
                    || (tag == COMMIT_TAG_CS && (header.commit >> 32) as u32 == crc);
                if !valid {
                    if tag == COMMIT_TAG_CS {
                        facts.torn_commits_by_checksum += 1;
                    }
                    break;
                }
                log.committed = frame;
                facts.commits_recovered += 1;
                end = (slot, off);
                crc = 0;
            }
        }
        facts.records_dropped = (log.records.len() - log.committed) as u64;
        self.drop_uncommitted_scan(log);
        Ok(end)
    }

    /// After a scan: only committed frames stay.
    fn drop_uncommitted_scan(&self, log: &mut Log) {
        let keep = log.committed;
        log.records.truncate(keep);
        let frame_bytes = log.page_bytes as usize + FRAME_HEADER_BYTES;
        log.shadow.truncate(WAL_HEADER_BYTES + keep * frame_bytes);
        log.last_of_page.clear();
        for (i, r) in log.records.iter().enumerate() {
            log.last_of_page.insert(r.pgno, i as u32);
        }
        log.commits = 0;
        log.durable_commits = 0;
    }

    /// Whether `h`, read at block offset `off`, can be frame `frame` of this log.
    fn plausible(
        &self,
        log: &Log,
        h: &RecordHeader,
        frame: usize,
        salts: &[u8; 8],
        _pos: u64,
        off: u64,
    ) -> bool {
        let page = log.page_bytes;
        // The range table itself is checked by `decode_ranges` once the payload is read.
        let table_ok = h.ranges as usize <= MAX_RANGES && h.len <= page;
        let fits = off + RecordHeader::record_bytes(h.len) <= self.layout.block_bytes;
        let base_ok = if h.base == NO_BASE {
            h.ranges == 0 && h.len == page
        } else {
            log.last_of_page.get(&h.pgno()) == Some(&h.base)
        };
        h.frame as usize == frame
            && table_ok
            && fits
            && base_ok
            && h.pgno() != 0
            && frame_salts(&h.frame_header) == *salts
    }

    /// The shadow WAL (for tests: what SQLite reads).
    pub fn wal_image(&self) -> Vec<u8> {
        self.log.lock().shadow.clone()
    }

    /// Frames covered by a persisted commit mark.
    pub fn committed_frames(&self) -> usize {
        self.log.lock().committed
    }

    /// Blocks in the list, and blocks free (for tests).
    pub fn heap_census(&self) -> Result<(usize, usize, usize)> {
        let log = self.log.lock();
        let mut states = [0usize; 3];
        for b in 0..self.layout.block_count as u32 {
            states[self.state(b)? as usize] += 1;
        }
        if states[BLOCK_IN_USE as usize] != log.blocks.len() {
            return Err(corrupt(format!(
                "{} blocks in use, {} in the list",
                states[BLOCK_IN_USE as usize],
                log.blocks.len()
            )));
        }
        Ok((states[BLOCK_FREE as usize], states[BLOCK_PENDING as usize], log.blocks.len()))
    }
}

/// Tag of a `cs`-mode commit word (the checksum in its high half).
pub const COMMIT_TAG_CS: u64 = 0x4E57_4353;

impl Log {
    fn empty() -> Log {
        Log {
            page_bytes: 0,
            shadow: Vec::new(),
            records: Vec::new(),
            committed: 0,
            last_of_page: HashMap::new(),
            blocks: Vec::new(),
            tail_slot: 0,
            tail_off: 0,
            free: Vec::new(),
            header_dirty: false,
            unflushed: Vec::new(),
            txn_crc: 0,
            commits: 0,
            durable_commits: 0,
        }
    }
}

/// Whether the header is all zero, and then whether the rest of the region is too (it is
/// formatted). A zero header over data is damage (the first 4 KiB overwritten): formatting it
/// would silently drop the database, so it is `Corrupt`. A region this open created is known
/// to be blank without a scan.
fn blank_header_over_blank_region(region: &Region) -> Result<bool> {
    if region.read(0, HEADER_BYTES as usize).iter().any(|b| *b != 0) {
        return Ok(false);
    }
    if region.created() || storage::format::region_is_blank(region) {
        return Ok(true);
    }
    Err(corrupt(
        "the header is zero but the region holds data (its first 4 KiB were overwritten?); \
         refusing to format over it"
            .into(),
    ))
}

/// Writes a fresh header (geometry, empty log, empty database) and a free block table. Order:
/// [`FORMATTING_MAGIC`] persisted first, then the rest persisted, then [`MAGIC`] persisted, so
/// a crash at any point leaves either a blank region, one marked as being formatted, or a
/// whole header (found by `crashtest` load crashes: the magic persisted without the geometry's
/// checksum, or header lines without the magic, and the region no longer opened).
fn format(region: &Region, layout: &Layout) {
    region.write_u64(H_MAGIC, FORMATTING_MAGIC);
    region.write_u64(H_FORMATTED, 0);
    region.flush(H_MAGIC, 8);
    region.flush(H_FORMATTED, 8);
    region.fence();
    let geometry = layout.geometry_bytes();
    region.write(8, &geometry[8..]);
    region.write_u64(H_GEOMETRY_CRC, u64::from(crc32c::crc32c(&geometry)));
    region.write_u64(H_DB_LEN, 0);
    region.write_u64(H_FIRST_BLOCK, 0);
    region.write(H_WAL_HEADER, &[0u8; WAL_HEADER_BYTES]);
    let table = vec![0u8; (layout.block_count * META_ENTRY_BYTES) as usize];
    region.write(layout.meta_off, &table);
    region.flush(0, HEADER_BYTES);
    region.flush(layout.meta_off, table.len() as u64);
    region.fence();
    region.write_u64(H_MAGIC, MAGIC);
    region.persist(H_MAGIC, 8);
}

//! The WAL file: SQLite's frames in the DRAM shadow, turned into NVWAL's differential records
//! (Kim et al., ASPLOS 2016, §3.2, §3.3) and made durable at the commit frame's sync (§4.1,
//! §4.2).

use super::*;

impl Store {
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
            log.epoch = log.epoch.wrapping_add(1);
            self.write_wal_header(bytes, log.epoch);
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
            self.clear_header(log.epoch);
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
        self.clear_header(log.epoch);
    }

    fn clear_header(&self, epoch: u32) {
        self.write_wal_header(&[0u8; WAL_HEADER_BYTES], epoch);
        self.region.persist(H_WAL_HEADER, LINE);
    }

    /// The WAL header and its sealed checksum, in one line (flushed together; a crash may
    /// tear them apart only before the generation's first commit mark).
    fn write_wal_header(&self, header: &[u8], epoch: u32) {
        let mut line = [0u8; WAL_HEADER_BYTES + 16];
        line[..WAL_HEADER_BYTES].copy_from_slice(header);
        line[WAL_HEADER_BYTES..WAL_HEADER_BYTES + 8]
            .copy_from_slice(&wal_header_seal(header, epoch).to_le_bytes());
        line[WAL_HEADER_BYTES + 8..].copy_from_slice(&u64::from(epoch).to_le_bytes());
        self.region.write(H_WAL_HEADER, &line);
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
            // The record's checksum binds the mark to it: a mark left by an older record at
            // this place does not commit a new one that a crash tore.
            _ => {
                (u64::from(RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES)).crc)
                    << 32)
                    | COMMIT_TAG
            }
        };
        if self.options.sync == SyncMode::Checksum && log.header_dirty {
            // The header persists before its generation's first commit mark (once per WAL
            // restart), so a commit never survives with an older header: recovery takes a
            // commit of another generation than the header's for damage.
            self.region.flush(H_WAL_HEADER, LINE);
            self.region.fence();
            log.header_dirty = false;
        }
        self.region.write_u64(pos, word);
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

    pub(super) fn frame_header_of(log: &Log, frame: usize) -> &[u8] {
        let off = WAL_HEADER_BYTES + frame * (log.page_bytes as usize + FRAME_HEADER_BYTES);
        &log.shadow[off..off + FRAME_HEADER_BYTES]
    }

    pub(super) fn page_of(log: &Log, frame: usize) -> &[u8] {
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
            crc: 0,
            epoch: log.epoch,
        };
        // The record's checksum is written with it, before any flush: the commit mark that
        // makes it part of the log is set only after the whole record persisted.
        let header = RecordHeader { crc: header.sum(&payload), ..header };
        let encoded = header.encode();
        // Lines 15-17: copy the (differential) frame into NVRAM, no flush yet.
        self.region.write(pos, &encoded);
        self.region.write(pos + RECORD_HEADER_BYTES as u64, &payload);
        if self.options.sync == SyncMode::Checksum {
            log.txn_crc = storage::crc::crc32c_append(log.txn_crc, &encoded[8..]);
            log.txn_crc = storage::crc::crc32c_append(log.txn_crc, &payload);
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
        self.set_state(block, BLOCK_PENDING);
        self.set_link(Some(block), 0);
        self.region.write(start, &[0u8; RECORD_HEADER_BYTES]);
        self.region.flush(meta, META_ENTRY_BYTES);
        self.region.flush(start, RECORD_HEADER_BYTES as u64);
        self.region.fence();
        // wh.add_new_block + flush + persist barrier.
        let owner = log.blocks.last().copied();
        self.set_link(owner, u64::from(block) + 1);
        self.region.persist(self.link_at(owner).0, 8);
        // mv_malloc_set_used_flag.
        self.set_state(block, BLOCK_IN_USE);
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
                crc = storage::crc::crc32c_append(
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
            self.set_link(None, 0);
            self.region.persist(H_FIRST_BLOCK, 8);
            for b in &log.blocks {
                self.set_state(*b, BLOCK_FREE);
                self.region.flush(self.layout.meta(*b), 8);
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
}

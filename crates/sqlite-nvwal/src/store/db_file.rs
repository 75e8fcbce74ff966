//! The database file's area, written in place and persisted at its `xSync`, with a crc32c per
//! 4 KiB chunk (ours, not the paper's: NVWAL trusts the file system under SQLite's database
//! file; here the file is NVRAM the fuzzer damages, issue 37).
//!
//! Invariant: at every crash point, a chunk below the persisted length whose checksum does not
//! match was being written by a checkpoint, so each of its changed pages has a committed frame
//! in the log (SQLite resets the WAL only after the database file's `xSync` has persisted the
//! chunks and their sums with one fence): such a chunk is read from the log, never from here.

use super::*;

impl Store {
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
        // The log before the data: a checkpoint copies frames of `cs` commits whose records may
        // not be durable yet; a crash would leave the file holding pages of a commit the log
        // lost (found by `nvmdb crashtest --engine-opt nvwal=cs`: a chunk failed its checksum).
        self.sync_all();
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

    /// `xSync` of the database file: its writes and their chunks' checksums (one fence), then
    /// its length, persist.
    pub fn db_sync(&self) {
        let mut db = self.db.lock();
        let mut chunks: Vec<u64> = Vec::with_capacity(db.dirty.len());
        for (o, l) in db.dirty.drain(..) {
            self.region.flush(self.layout.db_off + o, l);
            chunks.extend(o / CHUNK_BYTES..(o + l).div_ceil(CHUNK_BYTES));
        }
        if db.len > db.persisted_len {
            // Chunks the file grew over without a write (a sparse write) get sums too.
            chunks.extend(db.persisted_len / CHUNK_BYTES..db.len.div_ceil(CHUNK_BYTES));
        }
        chunks.sort_unstable();
        chunks.dedup();
        for c in chunks.into_iter().filter(|c| *c < self.layout.chunks()) {
            let sum = chunk_sum(c, self.chunk_bytes(c));
            self.region.write(self.layout.sum(c), &sum.to_le_bytes());
            self.region.flush(self.layout.sum(c), CHUNK_SUM_BYTES);
        }
        self.region.fence();
        if db.len != db.persisted_len {
            self.region.write_u64(H_DB_LEN, seal_len(db.len));
            self.region.persist(H_DB_LEN, 8);
            db.persisted_len = db.len;
        }
    }

    /// The bytes of chunk `chunk` (the last one may be shorter than a chunk).
    fn chunk_bytes(&self, chunk: u64) -> &[u8] {
        let start = chunk * CHUNK_BYTES;
        let len = CHUNK_BYTES.min(self.layout.db_cap - start);
        self.region.read(self.layout.db_off + start, len as usize)
    }

    /// (For a store that holds SQLite's files; the engine calls it.) The database file is long
    /// enough for every page SQLite reads from it: the pages up to
    /// the size the last commit recorded (its commit frame's, or with no log, the in-header size
    /// of page 1) that have no committed frame in the log. A crash never leaves it shorter: the
    /// log is reset only after a checkpoint persisted the pages and then the length. A stale
    /// length word (an older header) does, and SQLite would read the missing pages as zeros.
    pub fn verify_db_length(&self) -> Result<()> {
        let log = self.log.lock();
        let len = self.db.lock().len;
        let (pages, page_bytes) = if log.committed > 0 {
            let h = Self::frame_header_of(&log, log.committed - 1);
            (u64::from(frame_commit_size(h)), u64::from(log.page_bytes))
        } else {
            let mut first = [0u8; 100];
            if self.db_read_locked(len, 0, &mut first) < first.len()
                || &first[..16] != b"SQLite format 3\0"
                || first[24..28] != first[92..96]
            {
                return Ok(());
            }
            let raw = u16::from_be_bytes([first[16], first[17]]);
            let size = if raw == 1 { 65536 } else { u64::from(raw) };
            (u64::from(u32::from_be_bytes([first[28], first[29], first[30], first[31]])), size)
        };
        let Some(last_from_file) = (1..=pages)
            .rev()
            .find(|p| u32::try_from(*p).map_or(true, |p| !log.last_of_page.contains_key(&p)))
        else {
            return Ok(());
        };
        if last_from_file.saturating_mul(page_bytes) > len {
            return Err(corrupt(format!(
                "the database file is {len} bytes, but page {last_from_file} of {page_bytes} \
                 bytes is in it (not in the log): its length word is damaged or an older copy"
            )));
        }
        Ok(())
    }

    fn db_read_locked(&self, len: u64, offset: u64, out: &mut [u8]) -> usize {
        let have = len.saturating_sub(offset).min(out.len() as u64) as usize;
        out[..have].copy_from_slice(self.region.read(self.layout.db_off + offset, have));
        have
    }

    /// Checks every chunk of the database file against its checksum, except those holding a
    /// page that the log has a committed frame of (SQLite reads that page from the log, and a
    /// checkpoint cut by a crash leaves it half written) or that are written and not yet
    /// synced. Damage is `Corrupt`, naming the chunk.
    pub fn verify_db_chunks(&self) -> Result<()> {
        let log = self.log.lock();
        let db = self.db.lock();
        let page = u64::from(log.page_bytes);
        let mut pending: Vec<u64> = db
            .dirty
            .iter()
            .flat_map(|(o, l)| o / CHUNK_BYTES..(o + l).div_ceil(CHUNK_BYTES))
            .collect();
        pending.sort_unstable();
        let in_log = |c: u64| {
            page > 0 && {
                // Pages (numbered from 1) that overlap the chunk.
                let first = c * CHUNK_BYTES / page + 1;
                let last = ((c + 1) * CHUNK_BYTES).div_ceil(page);
                (first..=last)
                    .any(|p| u32::try_from(p).is_ok_and(|p| log.last_of_page.contains_key(&p)))
            }
        };
        let persisted = db.persisted_len.min(self.layout.db_cap);
        for c in 0..persisted.div_ceil(CHUNK_BYTES) {
            let stored = u32::from_le_bytes(
                self.region
                    .read(self.layout.sum(c), CHUNK_SUM_BYTES as usize)
                    .try_into()
                    .expect("4 bytes"),
            );
            if stored == chunk_sum(c, self.chunk_bytes(c))
                || pending.binary_search(&c).is_ok()
                || in_log(c)
            {
                continue;
            }
            return Err(corrupt(format!(
                "database file chunk {c} (bytes {}..{}) does not match its checksum",
                c * CHUNK_BYTES,
                (c + 1) * CHUNK_BYTES
            )));
        }
        Ok(())
    }
}

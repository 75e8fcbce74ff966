//! The database file's area, written in place and persisted at its `xSync`.

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
}

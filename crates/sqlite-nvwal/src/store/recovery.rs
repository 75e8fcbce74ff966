//! Recovery (Kim et al., ASPLOS 2016, §4.3): walk the block list, scan the records and keep
//! those followed by a commit record of the current WAL header; with the checksums of format
//! version 3 (issue 37), tell the states a crash can leave from damage.
//!
//! What a crash can leave, by the persist order of Algorithm 1 (the commit mark is the last
//! persisted write of a transaction): a link to a *pending* block whose first record header is
//! zero; records after the last commit mark that are torn; a WAL header torn while no record of
//! its generation is committed; in-use blocks no link reaches after a reset (the list empty) or
//! after recovery cut the log's tail (holding no commit). Anything else is damage, and is
//! `Corrupt`: a link to a free block, a committed record that fails its checksum, a commit mark
//! of this WAL generation past the log's end, committed records of another generation than the
//! WAL header's, a sealed word or block-table entry that fails its seal.

use super::*;

/// Where the scan stopped: the first place no record of the log was found.
#[derive(Clone, Copy, Debug)]
struct Stop {
    slot: usize,
    off: u64,
    frame: usize,
}

impl Store {
    // ----- sealed words of the block table and the header -----

    pub(super) fn state(&self, block: u32) -> Result<u64> {
        let word = self.region.read_u64(self.layout.meta(block));
        match unseal(word, SEAL_STATE, block).map(u64::from) {
            Some(s) if s <= BLOCK_IN_USE => Ok(s),
            _ => {
                Err(corrupt(format!("block table entry {block}: state word {word:#x} is damaged")))
            }
        }
    }

    /// Stores block `block`'s state (no flush).
    pub(super) fn set_state(&self, block: u32, state: u64) {
        self.region.write_u64(self.layout.meta(block), seal(SEAL_STATE, block, state as u32));
    }

    /// Region offset and seal index of a link: the header's (`None`) or block `owner`'s `next`.
    pub(super) fn link_at(&self, owner: Option<u32>) -> (u64, u32) {
        match owner {
            None => (H_FIRST_BLOCK, HEADER_LINK),
            Some(b) => (self.layout.meta(b) + 8, b),
        }
    }

    /// The block a link names (block index + 1; 0: none).
    fn link(&self, owner: Option<u32>) -> Result<u64> {
        let (at, index) = self.link_at(owner);
        let word = self.region.read_u64(at);
        match unseal(word, SEAL_NEXT, index) {
            Some(next) => Ok(u64::from(next)),
            None => Err(corrupt(match owner {
                None => format!("the header's first-block link {word:#x} is damaged"),
                Some(b) => format!("block table entry {b}: link word {word:#x} is damaged"),
            })),
        }
    }

    /// Stores a link (no flush); `next` is a block index + 1, or 0.
    pub(super) fn set_link(&self, owner: Option<u32>, next: u64) {
        let (at, index) = self.link_at(owner);
        self.region.write_u64(at, seal(SEAL_NEXT, index, next as u32));
    }

    // ----- recovery (§4.3) -----

    /// Walks the block list up to its first block that is not in use; returns the blocks and,
    /// when the list ends at a pending block (§4.3 case 2: a crash between linking it and
    /// marking it in use), the owner of the link to cut. Writes nothing.
    fn walk_list(&self) -> Result<(Vec<u32>, Option<Option<u32>>)> {
        let mut chain = Vec::new();
        let mut seen = vec![false; self.layout.block_count as usize];
        let mut owner = None;
        loop {
            let next = self.link(owner)?;
            if next == 0 {
                return Ok((chain, None));
            }
            if next > self.layout.block_count || seen[(next - 1) as usize] {
                return Err(corrupt(format!("block list link {next} after block {owner:?}")));
            }
            let block = (next - 1) as u32;
            match self.state(block)? {
                BLOCK_IN_USE => {}
                BLOCK_PENDING => {
                    // Algorithm 1 zeroes a block's first record header before linking it.
                    let start = self.region.read(self.layout.block(block), RECORD_HEADER_BYTES);
                    if start.iter().any(|b| *b != 0) {
                        return Err(corrupt(format!(
                            "block {block} is linked and pending but holds a record (its state \
                             word is damaged)"
                        )));
                    }
                    return Ok((chain, Some(owner)));
                }
                _ => {
                    return Err(corrupt(format!(
                        "the block list links block {block}, which is free (a damaged link or \
                         state)"
                    )));
                }
            }
            seen[block as usize] = true;
            chain.push(block);
            owner = Some(block);
        }
    }

    /// The WAL header, its epoch and whether its seal holds. A torn header (a crash before its
    /// generation's first commit) still gives an epoch no committed record exceeds.
    fn wal_header(&self) -> Result<(Vec<u8>, u32, bool)> {
        let header = self.region.read(H_WAL_HEADER, WAL_HEADER_BYTES).to_vec();
        let word = self.region.read_u64(H_WAL_EPOCH);
        let Ok(epoch) = u32::try_from(word) else {
            return Err(corrupt(format!("the WAL header's epoch word {word:#x} is damaged")));
        };
        let sealed = self.region.read_u64(H_WAL_CRC) == wal_header_seal(&header, epoch);
        Ok((header, epoch, sealed))
    }

    pub(super) fn recover(&self) -> Result<(Log, RecoveryFacts)> {
        let mut facts = RecoveryFacts::default();
        let mut log = Log::empty();
        let (chain, cut) = self.walk_list()?;
        let (wal_header, epoch, sealed) = self.wal_header()?;
        log.epoch = epoch;
        let page_bytes = if !sealed || wal_header.iter().all(|b| *b == 0) {
            None
        } else {
            wal_header_page_bytes(&wal_header)
        };
        let mut end = (0usize, 0u64);
        if let Some(page_bytes) = page_bytes {
            log.page_bytes = page_bytes;
            log.shadow.extend_from_slice(&wal_header);
            log.blocks = chain.clone();
            let stop;
            (end, stop) = self.scan(&mut log, &wal_header, &mut facts)?;
            let salts = wal_header_salts(&wal_header);
            self.no_commit_beyond(&chain, stop, &salts)?;
            let unlinked = (log.committed > 0).then_some((salts, stop.frame));
            self.no_stray_commit(&chain, epoch, unlinked)?;
        } else {
            self.no_stray_commit(&chain, epoch, None)?;
        }
        if log.committed == 0 && !chain.is_empty() {
            // A torn WAL header is a crash before its generation's first commit: a committed
            // record of another generation means the header is damaged or an older copy.
            let salts = page_bytes.map(|_| wal_header_salts(&wal_header));
            self.no_other_generation(&chain, salts)?;
        }
        // Checks done; from here recovery writes.
        if let Some(owner) = cut {
            let (at, _) = self.link_at(owner);
            self.set_link(owner, 0);
            self.region.persist(at, 8);
            facts.links_cut += 1;
        }
        let kept_blocks = if log.committed == 0 { 0 } else { end.0 + 1 };
        // Free the blocks after the last committed record's block.
        if kept_blocks < chain.len() {
            let owner = kept_blocks.checked_sub(1).map(|n| chain[n]);
            self.set_link(owner, 0);
            self.region.persist(self.link_at(owner).0, 8);
            for b in &chain[kept_blocks..] {
                self.set_state(*b, BLOCK_FREE);
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
                self.set_state(b, BLOCK_FREE);
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
    /// the frames up to the last valid commit. Returns the log's end `(block slot, offset)` and
    /// where the scan stopped (a slot past the list's last block: it ran off the list).
    fn scan(
        &self,
        log: &mut Log,
        wal_header: &[u8],
        facts: &mut RecoveryFacts,
    ) -> Result<((usize, u64), Stop)> {
        let salts = wal_header_salts(wal_header);
        let page_bytes = log.page_bytes;
        let block_bytes = self.layout.block_bytes;
        let (mut slot, mut off) = (0usize, 0u64);
        let mut end = (0usize, 0u64);
        let mut crc = 0u32;
        let mut frame = 0usize;
        let mut page = vec![0u8; page_bytes as usize];
        // Where a record was looked for and not found before the scan moved to the next block.
        let mut skipped: Option<Stop> = None;
        while slot < log.blocks.len() {
            let fits = off + RECORD_HEADER_BYTES as u64 <= block_bytes;
            let pos = self.layout.block(log.blocks[slot]) + off;
            let header = fits
                .then(|| RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES)))
                .filter(|h| self.plausible(log, h, frame, &salts, off));
            let payload_at = pos + RECORD_HEADER_BYTES as u64;
            let mut torn_cs = false;
            let record = match header {
                None => None,
                Some(h) => {
                    let payload = self.region.read(payload_at, h.len as usize);
                    if !h.sum_ok(payload) {
                        let mark = (h.commit >> 32) as u32;
                        let bound = mark == h.crc || mark == h.sum(payload);
                        if h.commit & 0xFFFF_FFFF == COMMIT_TAG && bound {
                            // The mark (naming this record's checksum, so not a stale word of
                            // an older record here) is set only after the record persisted.
                            return Err(corrupt(format!(
                                "log record of frame {frame} (block {}, offset {off}) is \
                                 committed but fails its checksum",
                                log.blocks[slot]
                            )));
                        }
                        torn_cs = h.commit & 0xFFFF_FFFF == COMMIT_TAG_CS;
                        None
                    } else if h.base == NO_BASE {
                        Some((h, Vec::new()))
                    } else {
                        // A range table that passed the checksum and is still invalid was
                        // written so: damage all the same.
                        match decode_ranges(payload, h.ranges, page_bytes) {
                            Some(r) => Some((h, r)),
                            None => {
                                return Err(corrupt(format!(
                                    "log record of frame {frame} has an invalid range table"
                                )))
                            }
                        }
                    }
                }
            };
            let Some((header, ranges)) = record else {
                let here = Stop { slot, off, frame };
                if torn_cs {
                    // §4.2: a commit whose records did not all persist.
                    facts.torn_commits_by_checksum += 1;
                    skipped = skipped.or(Some(here));
                    break;
                }
                if off == 0 {
                    skipped = skipped.or(Some(here));
                    break;
                }
                // The writer moves to the next block when a record does not fit.
                skipped = skipped.or(Some(here));
                slot += 1;
                off = 0;
                continue;
            };
            skipped = None;
            let payload = self.region.read(payload_at, header.len as usize);
            if header.base == NO_BASE {
                page.copy_from_slice(payload);
            } else {
                page.copy_from_slice(Self::page_of(log, header.base as usize));
                apply_ranges(&mut page, &ranges, payload)?;
            }
            let encoded = header.encode();
            crc = storage::crc::crc32c_append(crc, &encoded[8..]);
            crc = storage::crc::crc32c_append(crc, payload);
            let bytes = RecordHeader::record_bytes(header.len);
            log.shadow.extend_from_slice(&header.frame_header);
            log.shadow.extend_from_slice(&page);
            log.records.push(Rec { pos, slot, pgno: header.pgno(), bytes });
            log.last_of_page.insert(header.pgno(), frame as u32);
            off += bytes;
            frame += 1;
            if header.commit != 0 {
                let tag = header.commit & 0xFFFF_FFFF;
                if tag == COMMIT_TAG_CS && (header.commit >> 32) as u32 != crc {
                    facts.torn_commits_by_checksum += 1;
                    break;
                }
                if tag == COMMIT_TAG && (header.commit >> 32) as u32 != header.crc {
                    // An older record's mark left at this place, the new record's own not set:
                    // the record is not committed (a crash), and the log ends before it.
                    skipped = Some(Stop { slot, off: off - bytes, frame: frame - 1 });
                    break;
                }
                // Only 0 and the two tags are ever written, each in one aligned word.
                if tag != COMMIT_TAG && tag != COMMIT_TAG_CS {
                    return Err(corrupt(format!(
                        "log record of frame {} has a damaged commit word {:#x}",
                        frame - 1,
                        header.commit
                    )));
                }
                log.committed = frame;
                facts.commits_recovered += 1;
                end = (slot, off);
                crc = 0;
            }
        }
        facts.records_dropped = (log.records.len() - log.committed) as u64;
        self.drop_uncommitted_scan(log);
        Ok((end, skipped.unwrap_or(Stop { slot, off, frame })))
    }

    /// Whether a whole record of this generation numbered `frame` or later is at `pos` with
    /// its commit mark (`COMMIT_TAG`, set only after its transaction persisted).
    fn commit_mark_at(&self, pos: u64, salts: &[u8; 8], frame: usize) -> bool {
        let h = RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES));
        h.frame as usize >= frame
            && frame_salts(&h.frame_header) == *salts
            && self.whole_commit_at(pos)
    }

    /// Whether a whole record (its checksum matches) with its own commit mark is at `pos`.
    fn whole_commit_at(&self, pos: u64) -> bool {
        if self.region.read_u64(pos) & 0xFFFF_FFFF != COMMIT_TAG {
            return false;
        }
        let h = RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES));
        let start = pos - self.layout.blocks_off;
        let room = self.layout.block_bytes - start % self.layout.block_bytes;
        (h.commit >> 32) as u32 == h.crc
            && RecordHeader::record_bytes(h.len) <= room
            && h.sum_ok(self.region.read(pos + RECORD_HEADER_BYTES as u64, h.len as usize))
    }

    /// The first commit mark of this generation at or after `from` in block `block`.
    fn commit_mark_in(&self, block: u32, from: u64, salts: &[u8; 8], frame: usize) -> Option<u64> {
        let start = self.layout.block(block);
        let last = self.layout.block_bytes.checked_sub(RECORD_HEADER_BYTES as u64)?;
        if from > last {
            return None;
        }
        // One pass over the words in memory; a candidate is checked in full.
        let words = self.region.read(start + from, (last - from + 8) as usize);
        words
            .chunks_exact(8)
            .enumerate()
            .filter(|(_, w)| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64 == COMMIT_TAG)
            .map(|(i, _)| start + from + 8 * i as u64)
            .find(|pos| self.commit_mark_at(*pos, salts, frame))
    }

    /// After the log's end only torn or stale records lie: a commit mark of this generation
    /// there means a record before it was damaged (its transaction was durable).
    fn no_commit_beyond(&self, chain: &[u32], stop: Stop, salts: &[u8; 8]) -> Result<()> {
        for (slot, block) in chain.iter().enumerate().skip(stop.slot) {
            let from = if slot == stop.slot { stop.off } else { 0 };
            if let Some(pos) = self.commit_mark_in(*block, from, salts, stop.frame) {
                return Err(corrupt(format!(
                    "the log ends at frame {} (block {}, offset {}) but a committed record \
                     follows at region offset {pos}: a record of a durable transaction is \
                     damaged",
                    stop.frame, chain[stop.slot], stop.off
                )));
            }
        }
        Ok(())
    }

    /// One pass over every block's committed records (an older copy of the header and block
    /// table recovers an older, consistent-looking log; these find what it left out):
    /// - none has a later epoch than the WAL header's: the header persists its epoch before
    ///   the generation's first commit mark;
    /// - with `unlinked = Some((salts, frame))` (commits of the header's generation recovered,
    ///   `frame` records scanned), no block outside the list holds a commit of that generation
    ///   numbered `frame` or later: recovery frees only a tail without one, and a reset frees
    ///   blocks only after emptying the list, before the next generation's header.
    fn no_stray_commit(
        &self,
        chain: &[u32],
        epoch: u32,
        unlinked: Option<([u8; 8], usize)>,
    ) -> Result<()> {
        let mut in_chain = vec![false; self.layout.block_count as usize];
        for b in chain {
            in_chain[*b as usize] = true;
        }
        // Blocks are allocated lowest index first, so the used ones are a prefix: past every
        // block the table names (in use, pending or linked to), stop at the first that does not
        // start with a record (reading the never-used rest faulted in the whole log area).
        let mut named = 0u64;
        for b in 0..self.layout.block_count as u32 {
            if self.state(b)? != BLOCK_FREE {
                named = named.max(u64::from(b) + 1);
            }
            named = named.max(self.link(Some(b))?);
        }
        for b in 0..self.layout.block_count as u32 {
            let head =
                RecordHeader::decode(self.region.read(self.layout.block(b), RECORD_HEADER_BYTES));
            if u64::from(b) >= named && head.pgno() == 0 {
                break;
            }
            for pos in self.commit_marks_in(b) {
                let h = RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES));
                if h.epoch > epoch {
                    return Err(corrupt(format!(
                        "a committed log record (block {b}, region offset {pos}) is of epoch {}, \
                         later than the WAL header's {epoch}: the header is damaged or an older \
                         copy",
                        h.epoch
                    )));
                }
                let stray = unlinked.is_some_and(|(salts, frame)| {
                    !in_chain[b as usize]
                        && frame_salts(&h.frame_header) == salts
                        && h.frame as usize >= frame
                });
                if stray {
                    return Err(corrupt(format!(
                        "block {b}, outside the block list, holds a committed record (region \
                         offset {pos}) past the log's end: the list or the block table is \
                         damaged or an older copy"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Region offsets of the whole records with their commit marks in block `block`, walking
    /// its records from offset 0 as the writer lays them out (a block is filled from its start)
    /// up to the first that does not read as one: a never-used block costs one header read,
    /// where a pass over every word of a 32 MiB log cost 30-240 ms per open. Only a mark whose
    /// record passes its checksum counts, so a stale or torn record is never taken for one.
    fn commit_marks_in(&self, block: u32) -> Vec<u64> {
        let start = self.layout.block(block);
        let block_bytes = self.layout.block_bytes;
        let mut marks = Vec::new();
        let mut off = 0u64;
        while off + RECORD_HEADER_BYTES as u64 <= block_bytes {
            let pos = start + off;
            let h = RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES));
            let bytes = RecordHeader::record_bytes(h.len);
            if h.pgno() == 0 || h.len > MAX_PAGE_BYTES || bytes > block_bytes - off {
                break;
            }
            match h.commit & 0xFFFF_FFFF {
                0 if h.commit == 0 => {}
                COMMIT_TAG if self.whole_commit_at(pos) => marks.push(pos),
                COMMIT_TAG_CS => {}
                _ => break,
            }
            off += bytes;
        }
        marks
    }

    /// With no commit recovered under the WAL header (`salts`; `None`: no valid header), the
    /// list must not start a generation of its own with a commit: a block's first record is
    /// written after it is linked, and a commit mark only after the header persisted.
    fn no_other_generation(&self, chain: &[u32], salts: Option<[u8; 8]>) -> Result<()> {
        let pos = self.layout.block(chain[0]);
        let h = RecordHeader::decode(self.region.read(pos, RECORD_HEADER_BYTES));
        let own = frame_salts(&h.frame_header);
        let page = h.len;
        let whole = h.frame == 0 && h.base == NO_BASE && h.ranges == 0 && h.pgno() != 0;
        if !whole
            || salts == Some(own)
            || !page.is_power_of_two()
            || !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&page)
            || RecordHeader::record_bytes(page) > self.layout.block_bytes
        {
            return Ok(());
        }
        // Scan that generation as if its header were the WAL header.
        let mut header = vec![0u8; WAL_HEADER_BYTES];
        header[8..12].copy_from_slice(&(if page == 65536 { 1 } else { page }).to_be_bytes());
        header[16..24].copy_from_slice(&own);
        let mut trial = Log::empty();
        trial.page_bytes = page;
        trial.shadow.extend_from_slice(&header);
        trial.blocks = chain.to_vec();
        let mut facts = RecoveryFacts::default();
        let ((_, _), stop) = self.scan(&mut trial, &header, &mut facts)?;
        let beyond = self.no_commit_beyond(chain, stop, &own).is_err();
        if trial.committed > 0 || beyond {
            return Err(corrupt(
                "the WAL header is damaged or an older copy: the log holds committed \
                 transactions of another WAL generation"
                    .into(),
            ));
        }
        Ok(())
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
}

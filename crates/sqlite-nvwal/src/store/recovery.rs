//! Recovery (Kim et al., ASPLOS 2016, §4.3): walk the block list, scan the records and keep
//! those followed by a commit record of the current WAL header.

use super::*;

impl Store {
    // ----- recovery (§4.3) -----

    pub(super) fn state(&self, block: u32) -> Result<u64> {
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

    pub(super) fn recover(&self) -> Result<(Log, RecoveryFacts)> {
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
}

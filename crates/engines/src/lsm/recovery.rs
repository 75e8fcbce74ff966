//! Open-time recovery of the `lsm` engine: the control page's areas, the manifest, the free
//! list, and the replay (`io=fs`) or undo (`io=nvm`) of the log, with the log-record codecs
//! that commit shares.

use super::*;

/// The control page's areas, checked against the superblock's nominal layout.
pub(super) fn read_areas(region: &Region, sb: &Superblock) -> Result<Areas> {
    let control_page = sb.layout.undo_log_page(0);
    if page_offset(sb.layout.first_data_page()) > region.backed_len() {
        return Err(DbError::Corrupt("region is shorter than its lsm areas".into()));
    }
    let areas = Areas::decode(
        region.read(page_offset(control_page), 64),
        control_page,
        sb.layout.page_count,
    )?;
    if areas.first_run_page() != sb.layout.first_data_page() {
        return Err(DbError::Corrupt("lsm control page disagrees with the superblock".into()));
    }
    Ok(areas)
}

pub(super) fn read_manifest(region: &Region, areas: &Areas) -> Result<(Manifest, u64)> {
    let mut best: Option<(Manifest, u64)> = None;
    for slot in 0..2 {
        let b = region.read(areas.manifest_slot(slot), MANIFEST_BYTES);
        if let Some(m) = Manifest::decode(b, areas)? {
            if best.as_ref().is_none_or(|(bm, _)| m.generation > bm.generation) {
                best = Some((m, slot));
            }
        }
    }
    best.ok_or_else(|| DbError::Corrupt("lsm: neither manifest slot is valid".into()))
}

pub(super) fn free_extents(areas: &Areas, runs: &[RunRef]) -> BTreeMap<u64, u64> {
    let mut used: Vec<(u64, u64)> = runs.iter().map(|r| (r.first_page, r.pages)).collect();
    used.sort_unstable();
    let mut free = BTreeMap::new();
    let mut at = areas.first_run_page();
    for (p, n) in used {
        if p > at {
            free.insert(at, p - at);
        }
        at = p + n;
    }
    if areas.page_count > at {
        free.insert(at, areas.page_count - at);
    }
    free
}

/// `io=fs` log record: `[len u32][crc u32][seq u64][count u32][pad u32]`, then per row
/// `[table u32][flags u32][key u64][row]` (no row for a delete). The crc covers bytes 8..len.
pub(super) fn encode_log_record(seq: u64, writes: &Writes<'_>) -> Vec<u8> {
    let mut b = vec![0u8; REC_HEADER];
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    b[16..20].copy_from_slice(&(writes.len() as u32).to_le_bytes());
    for &(&(table, key), v) in writes {
        b.extend_from_slice(&table.to_le_bytes());
        b.extend_from_slice(&(v.is_none() as u32).to_le_bytes());
        b.extend_from_slice(&key.to_le_bytes());
        if let Some(v) = v {
            b.extend_from_slice(v);
        }
    }
    let len = b.len() as u32;
    b[0..4].copy_from_slice(&len.to_le_bytes());
    let c = crc(&b[8..]);
    b[4..8].copy_from_slice(&c.to_le_bytes());
    b
}

/// Replays the `io=fs` log (records in sequence after the manifest's `flushed_seq`) into a new
/// DRAM memtable.
pub(super) fn recover_fs(
    region: &Region,
    areas: &Areas,
    m: &Manifest,
    report: &mut RecoveryReport,
) -> Result<(Mem, u64, u64)> {
    let mut mem = DramMem::default();
    let mut pos = 0u64;
    let mut seq = m.flushed_seq;
    let base = areas.log_base();
    while pos + REC_HEADER as u64 <= areas.log_bytes {
        let h = region.read(base + pos, REC_HEADER);
        let len = get_u32(h, 0) as u64;
        if len < REC_HEADER as u64 || pos + len > areas.log_bytes || get_u64(h, 8) != seq + 1 {
            break;
        }
        let rec = region.read(base + pos, len as usize);
        if get_u32(rec, 4) != crc(&rec[8..]) {
            break;
        }
        // A record that passes its checksum but does not parse is damage, not a torn tail.
        let count = get_u32(rec, 16) as usize;
        let mut at = REC_HEADER;
        for _ in 0..count {
            let bad = || DbError::Corrupt(format!("lsm log record {} does not parse", seq + 1));
            if at + REC_ENTRY_HEADER > rec.len() {
                return Err(bad());
            }
            let table = get_u32(rec, at);
            let delete = get_u32(rec, at + 4);
            let key = get_u64(rec, at + 8);
            at += REC_ENTRY_HEADER;
            let spec = m.tables.get(table as usize).ok_or_else(bad)?;
            match delete {
                1 => mem.put(table, key, None),
                0 => {
                    let end = at + spec.row_bytes as usize;
                    if end > rec.len() {
                        return Err(bad());
                    }
                    mem.put(table, key, Some(&rec[at..end]));
                    at = end;
                }
                _ => return Err(bad()),
            }
        }
        report.records_applied += 1;
        seq += 1;
        pos += len;
    }
    report.notes.push(format!(
        "replayed {} log records ({pos} bytes) into a new memtable",
        report.records_applied
    ));
    Ok((Mem::Dram(mem), seq, pos))
}

/// `io=nvm` pointer record: `[seq u64][count u32][crc u32][arena_start u64][arena_end u64]`,
/// then `count` node offsets. The crc covers the record with its crc field zero.
pub(super) fn encode_ptr_record(seq: u64, start: u64, end: u64, nodes: &[Node]) -> Vec<u8> {
    let mut b = vec![0u8; PTR_HEADER as usize + 8 * nodes.len()];
    b[0..8].copy_from_slice(&seq.to_le_bytes());
    b[8..12].copy_from_slice(&(nodes.len() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&start.to_le_bytes());
    b[24..32].copy_from_slice(&end.to_le_bytes());
    for (i, n) in nodes.iter().enumerate() {
        let at = PTR_HEADER as usize + 8 * i;
        b[at..at + 8].copy_from_slice(&n.off.to_le_bytes());
    }
    let c = crc(&b);
    b[12..16].copy_from_slice(&c.to_le_bytes());
    b
}

/// A decoded pointer record: (seq, arena_start, arena_end, node offsets), if valid.
pub(super) fn decode_ptr_record(region: &Region, at: u64) -> Option<(u64, u64, u64, Vec<u64>)> {
    let h = region.read(at, PTR_HEADER as usize);
    let count = get_u32(h, 8) as u64;
    if count > MAX_TXN_WRITES {
        return None;
    }
    let mut b = region.read(at, (PTR_HEADER + 8 * count) as usize).to_vec();
    let c = get_u32(&b, 12);
    b[12..16].fill(0);
    if c != crc(&b) {
        return None;
    }
    let ptrs = (0..count as usize).map(|i| get_u64(&b, PTR_HEADER as usize + 8 * i)).collect();
    Some((get_u64(&b, 0), get_u64(&b, 16), get_u64(&b, 24), ptrs))
}

/// NVM-Log recovery: finds the memtable's end from the last committed pointer record and
/// undoes the one commit that may be in flight.
pub(super) fn recover_nvm(
    region: &Region,
    areas: &Areas,
    m: &Manifest,
    checksums: bool,
    report: &mut RecoveryReport,
) -> Result<(Mem, u64, u64)> {
    let control = page_offset(areas.control_page);
    let committed = region.read_u64(control + C_COMMITTED);
    let slot_of = |seq: u64| areas.log_base() + (seq % 2) * LOG_SLOT_BYTES;
    let base = areas.arena_base(m.active_arena);
    let cap = areas.memtable_bytes;
    let check_end = |end: u64, what: &str| {
        if !(HEAD_BYTES..=cap).contains(&end) {
            return Err(DbError::Corrupt(format!("lsm: {what} arena end {end} outside the arena")));
        }
        Ok(end)
    };
    if committed < m.flushed_seq {
        return Err(DbError::Corrupt(format!(
            "lsm: committed sequence {committed} is before the flushed {}",
            m.flushed_seq
        )));
    }
    let used = if committed == m.flushed_seq {
        HEAD_BYTES
    } else {
        match decode_ptr_record(region, slot_of(committed)) {
            Some((seq, _, end, _)) if seq == committed => check_end(end, "committed")?,
            _ => {
                return Err(DbError::Corrupt(format!(
                    "lsm: the pointer record of committed transaction {committed} is missing"
                )))
            }
        }
    };
    let mem = NvmMem::new(base, cap, used, checksums);
    if let Some((seq, start, end, ptrs)) = decode_ptr_record(region, slot_of(committed + 1)) {
        if seq == committed + 1 && start == used {
            // Follow pointers up to the in-flight record's end while undoing it.
            mem.set_used(check_end(end, "in-flight")?);
            let tables = &m.tables;
            for &p in &ptrs {
                // A node whose header does not check out was never linked (links follow the
                // barrier that persists the nodes): nothing to undo.
                if let Ok(n) = mem.node(region, tables, p) {
                    if n.seq == seq && mem.unlink(region, tables, &n)? {
                        report.records_applied += 1;
                    }
                }
            }
            region.fence();
            region.write_u64(slot_of(seq), 0);
            region.persist(slot_of(seq), 8);
            mem.set_used(used);
            report.txns_rolled_back += 1;
            report.notes.push(format!(
                "undid in-flight transaction {seq}: {} of its {} nodes were linked",
                report.records_applied,
                ptrs.len()
            ));
        }
    }
    Ok((Mem::Nvm(mem), committed, 0))
}

//! Open-time recovery of the `wal` engine: the control line, the page log's replay, and
//! analysis and redo of either log manager ([`Recovering`]).

use super::*;

/// What analysis and redo of either log manager read and write.
pub(super) struct Recovering<'a> {
    pub(super) nvram: &'a Region,
    /// The buffer pool, a copy of the image that redo brings up to date.
    pub(super) staging: &'a Region,
    pub(super) device: &'a Arc<Device>,
    pub(super) dc: dlog::Control,
    pub(super) options: &'a EngineOptions,
}

impl Recovering<'_> {
    /// Analysis and redo of the central log: from the checkpoint's redo point to the end.
    pub(super) fn central(&self, image_bytes: u64, report: &mut RecoveryReport) -> Result<Central> {
        let (nvram, capacity, log_area) = (self.nvram, self.dc.per_log_bytes, log_area());
        let redo_from = nvram.read_u64(control(C_REDO));
        let redo_started = Instant::now();
        let (end, records) = log::scan(nvram, log_area, capacity, redo_from, image_bytes, |r| {
            self.staging.write(r.offset, r.bytes)
        })?;
        report.records_applied = records;
        report.notes.push(format!(
            "redo: {records} records ({} KiB) from LSN {redo_from} in {:.1} ms",
            (end - redo_from) >> 10,
            redo_started.elapsed().as_secs_f64() * 1e3
        ));
        log::erase_stale_tail(nvram, log_area, capacity, redo_from, end);
        let insert = self.options.wal.log_insert;
        let mut log = Log::new(self.device.clone(), log_area, capacity, redo_from, end, insert);
        if self.options.fault == Some(Fault::WalGroupDropsLastStore) {
            log = log.with_group_tails_dropped();
        }
        let skip_barrier = self.options.fault == Some(Fault::WalSkipLogBarrier);
        let force = self.options.wal.log_force;
        Ok(Central::new(log, nvram.clone(), self.device.clone(), skip_barrier, force))
    }

    /// Analysis and redo over every log ([`dlog::recover`]).
    pub(super) fn distributed(
        &self,
        image_bytes: u64,
        report: &mut RecoveryReport,
    ) -> Result<Dlog> {
        let (nvram, dc, log_area) = (self.nvram, self.dc, log_area());
        let dfault = match self.options.fault {
            Some(Fault::DlogAckOwnLogs) => Some(DlogFault::AckOwnLogs),
            Some(Fault::DlogSkipLaggingLog) => Some(DlogFault::SkipLaggingLog),
            Some(Fault::DlogRedoPastHorizon) => Some(DlogFault::RedoPastHorizon),
            Some(Fault::DlogRedoUnsorted) => Some(DlogFault::RedoUnsorted),
            _ => None,
        };
        let redo_started = Instant::now();
        let rec = dlog::recover(
            nvram,
            self.staging,
            control(0),
            log_area,
            dc,
            image_bytes,
            true,
            dfault,
        )?;
        report.records_applied = rec.redone;
        report.notes.push(format!(
            "redo: {} records from {} logs ({}) in {:.1} ms; {} records above the GSN horizon \
             {} retired",
            rec.redone,
            rec.ends.len(),
            dc.layout,
            redo_started.elapsed().as_secs_f64() * 1e3,
            rec.retired,
            rec.horizon
        ));
        if let Some(note) = &rec.redo.note {
            report.notes.push(note.clone());
        }
        for (i, (&from, &end)) in rec.redo.points.iter().zip(&rec.ends).enumerate() {
            let area = log_area + i as u64 * dc.per_log_bytes;
            log::erase_stale_tail(nvram, area, dc.per_log_bytes, from, end);
        }
        Ok(Dlog::new(
            self.device.clone(),
            control(0),
            log_area,
            dc,
            &rec,
            self.options.wal.log_insert,
            image_bytes / PAGE_SIZE_U64,
            dfault,
        ))
    }
}

pub(super) fn log_area() -> u64 {
    page_offset(FIRST_LOG_PAGE)
}

pub(super) fn read_control(nvram: &Region, pages: u64) -> Result<(u64, PageId)> {
    let c = nvram.read(control(0), 48);
    let bad = |why: String| Err(DbError::Corrupt(format!("wal control line: {why}")));
    if get_u64(c, C_MAGIC as usize) != MAGIC {
        return bad("bad magic".into());
    }
    let (capacity, base) = (get_u64(c, C_CAPACITY as usize), get_u64(c, C_BASE as usize));
    if get_u64(c, C_CRC as usize) != params_crc(capacity, base) {
        return bad("checksum mismatch".into());
    }
    if capacity == 0
        || !capacity.is_multiple_of(PAGE_SIZE_U64)
        || base != FIRST_LOG_PAGE + capacity / PAGE_SIZE_U64
        || base >= pages
    {
        return bad(format!("log of {capacity} bytes and base page {base} do not fit"));
    }
    Ok((capacity, base))
}

/// Pelley's `persist_page` crash case: a page log marked valid is written in place again.
pub(super) fn replay_page_log(nvram: &Region, base: u64, image_bytes: u64) -> Result<Option<u64>> {
    let state = nvram.read_u64(control(C_PAGE_LOG));
    if state == 0 {
        return Ok(None);
    }
    let page = state - 1;
    if page.checked_add(1).is_none_or(|end| page_offset(end) > image_bytes) {
        return Err(DbError::Corrupt(format!("wal page log names page {page}")));
    }
    let at = base + page_offset(page);
    let logged = nvram.read(page_offset(PAGE_LOG_PAGE), PAGE_SIZE).to_vec();
    nvram.write(at, &logged);
    nvram.persist(at, PAGE_SIZE_U64);
    nvram.write_u64(control(C_PAGE_LOG), 0);
    nvram.persist(control(C_PAGE_LOG), 8);
    Ok(Some(page))
}

//! `wal` inspection: what opening a region would redo, on a private copy of its image.

use super::*;

/// What opening `region` would do, on a private copy: the image after redo, as `inplace` would
/// recover it. `outer` is the superblock's inspection of the whole region.
pub fn inspect(region: &Region, outer: crate::Inspection) -> Result<crate::Inspection> {
    crate::staging::require_backed(region, outer.page_count)?;
    let (capacity, base_page) = read_control(region, outer.page_count)?;
    let image_bytes = page_offset(outer.page_count - base_page);
    let image = Region::dram_copy(
        region.read(page_offset(base_page), image_bytes as usize),
        &RegionOptions::default(),
    )?;
    let log_area = log_area();
    if let Some(dc) = dlog::read_layout(region, control(0), capacity)? {
        let rec =
            dlog::recover(region, &image, control(0), log_area, dc, image_bytes, false, None)?;
        let mut outer = crate::staging::inspect_image(outer, &image, rec.redone)?;
        outer.verdict += &format!(
            "; {} log records in {} logs ({}) to redo, {} above the GSN horizon {}",
            rec.redone,
            rec.ends.len(),
            dc.layout,
            rec.retired,
            rec.persisted_horizon
        );
        outer.log = Some(crate::LogInspection {
            layout: dc.layout.to_string(),
            logs: dc.layout.logs(),
            cache: dc.cache.name().into(),
            log_bytes: capacity,
            per_log_bytes: dc.per_log_bytes,
            horizon: Some(rec.persisted_horizon),
            redo_points: rec.redo.points.clone(),
            ends: rec.ends.clone(),
            records_to_redo: rec.redone,
            records_above_horizon: rec.retired,
        });
        return Ok(outer);
    }
    let redo_from = region.read_u64(control(C_REDO));
    let (end, records) = log::scan(region, log_area, capacity, redo_from, image_bytes, |r| {
        image.write(r.offset, r.bytes)
    })?;
    let mut outer = crate::staging::inspect_image(outer, &image, records)?;
    outer.verdict += &format!("; {records} log records ({} KiB) to redo", (end - redo_from) >> 10);
    outer.log = Some(crate::LogInspection {
        layout: LogLayout::Central.to_string(),
        logs: 1,
        cache: Cache::Volatile.name().into(),
        log_bytes: capacity,
        per_log_bytes: capacity,
        horizon: None,
        redo_points: vec![redo_from],
        ends: vec![end],
        records_to_redo: records,
        records_above_horizon: 0,
    });
    Ok(outer)
}

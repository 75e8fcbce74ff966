//! `lsm` inspection: what opening a region would do, read without writing.

use super::recovery::decode_ptr_record;
use super::*;

/// What opening `region` (an `lsm` region) would do, read without writing.
pub fn inspect(region: &Region, mut outer: crate::Inspection) -> Result<crate::Inspection> {
    let sb = match Superblock::verdict(region, false)? {
        storage::format::Verdict::Open { sb, .. } => sb,
        storage::format::Verdict::Format => return Ok(outer),
    };
    let areas = read_areas(region, &sb)?;
    let control_page = areas.control_page;
    let (m, _) = read_manifest(region, &areas)?;
    if areas.io_fs {
        let mut report = RecoveryReport::default();
        recover_fs(region, &areas, &m, &mut report)?;
        outer.txns_to_complete = report.records_applied;
        outer.undo_records = report.records_applied;
    } else {
        let committed = region.read_u64(page_offset(control_page) + C_COMMITTED);
        let slot = areas.log_base() + ((committed + 1) % 2) * LOG_SLOT_BYTES;
        if let Some((seq, _, _, ptrs)) = decode_ptr_record(region, slot) {
            if seq == committed + 1 {
                outer.txns_to_roll_back = 1;
                outer.undo_records = ptrs.len() as u64;
            }
        }
    }
    Ok(outer)
}

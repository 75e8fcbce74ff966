//! What `group` and `wal` share about running `inplace` on a volatile copy of an NVRAM image:
//! making the copy, folding `inplace`'s recovery into the engine's report, and inspecting the
//! image as `inplace` would recover it.

use pmem::{Medium, Region, RegionOptions};
use storage::engine::RecoveryReport;
use storage::Result;

/// The staging copy (buffer pool) of the image at `[base, base + image_bytes)` of `nvram`,
/// tracking the lines written to it. A blank image needs no copy; a file-backed region's image
/// is mapped copy-on-write (pages load on first touch); anything else is copied.
pub(crate) fn copy_of(nvram: &Region, base: u64, image_bytes: u64, blank: bool) -> Result<Region> {
    let options = RegionOptions { track_dirty: true, ..RegionOptions::default() };
    if blank {
        let fresh = RegionOptions { medium: Medium::Dram, size_bytes: image_bytes, ..options };
        return Ok(Region::open(&fresh)?);
    }
    Ok(match nvram.private_view(base, image_bytes, &options) {
        Some(view) => view?,
        None => Region::dram_copy(nvram.read(base, image_bytes as usize), &options)?,
    })
}

/// Adds what `inplace` recovery did on the staging copy to the engine's report.
pub(crate) fn merge_report(report: &mut RecoveryReport, inner: RecoveryReport, formatted: bool) {
    report.formatted = formatted;
    report.txns_rolled_back = inner.txns_rolled_back;
    report.system_txns_rolled_back = inner.system_txns_rolled_back;
    report.txns_completed = inner.txns_completed;
    report.records_applied += inner.records_applied;
    report.notes.extend(inner.notes);
}

/// `outer` (the superblock's inspection of the whole region) completed with the inspection of
/// `image` as `inplace` would recover it; `extra_records` is the engine's own recovery work.
pub(crate) fn inspect_image(
    mut outer: crate::Inspection,
    image: &Region,
    extra_records: u64,
) -> Result<crate::Inspection> {
    let inner = crate::inplace::inspect(image)?;
    outer.workers = inner.workers;
    outer.txns_to_roll_back = inner.txns_to_roll_back;
    outer.system_txns_to_roll_back = inner.system_txns_to_roll_back;
    outer.txns_to_complete = inner.txns_to_complete;
    outer.undo_records = inner.undo_records + extra_records;
    outer.verdict += &format!("; image: {}", inner.verdict);
    Ok(outer)
}

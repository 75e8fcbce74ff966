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

/// The pages a formatted `group` / `wal` region's superblock describes, refused when the file
/// holds fewer: both engines lay their log and image out over the whole region at format time
/// and never grow it, so a shorter file is truncated, and reading its missing tail would fault
/// (SIGBUS on a mapped file). `open` and `inspect` (`nvmdb check`) both go through this.
pub(crate) fn require_backed(nvram: &Region, pages: u64) -> Result<u64> {
    let backed_pages = nvram.backed_len() / storage::format::PAGE_SIZE_U64;
    if pages > backed_pages {
        return Err(storage::DbError::Corrupt(format!(
            "superblock says {pages} pages, the region file holds {backed_pages} (truncated?)"
        )));
    }
    Ok(pages)
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

/// The crash-atomic format of a region that holds an engine area (a log) of pages
/// `2..base_page` before an `inplace` image: superblock under the formatting magic,
/// `write_area` (which persists the engine's control line), then the published superblock. The
/// image itself is formatted in the staging copy later and reaches NVRAM through the engine's
/// own protocol, so a crash before that leaves a blank image. `area` names the engine area and
/// the option that sizes it, for the error when the region is too small.
pub(crate) fn format_region(
    nvram: &Region,
    engine: &str,
    options: &crate::EngineOptions,
    pages: u64,
    base_page: u64,
    area: (&str, &str, u64),
    write_area: impl FnOnce(&Region),
) -> Result<()> {
    let layout = image_layout(options, pages);
    layout.validate()?;
    let needed = needed_pages(options, pages, base_page);
    if pages < needed {
        let (what, option, bytes) = area;
        return Err(storage::DbError::RegionFull(format!(
            "a region of {pages} pages cannot hold a {} MiB {what} and the database (needs at \
             least {needed} pages); use a larger --size or a smaller {option}",
            bytes >> 20
        )));
    }
    let sb = storage::format::Superblock { engine: engine.into(), layout };
    sb.begin_format(nvram);
    write_area(nvram);
    sb.publish(nvram);
    Ok(())
}

/// The superblock layout of a region of `pages` that holds an engine area and an image.
fn image_layout(options: &crate::EngineOptions, pages: u64) -> storage::format::Layout {
    storage::format::Layout {
        page_count: pages,
        workers: options.workers + 1,
        undo_pages: options.undo_pages,
        sys_undo_pages: options.sys_undo_pages,
        node_capacity: options.node_capacity,
        row_checksums: options.checksums,
    }
}

/// The pages [`format_region`] requires of a region of `pages` whose engine area ends at
/// `base_page` (the area, the image's metadata and 64 data pages): one rule for formatting and
/// for [`crate::min_region_bytes`].
pub(crate) fn needed_pages(options: &crate::EngineOptions, pages: u64, base_page: u64) -> u64 {
    base_page + image_layout(options, pages).first_data_page() + 64
}

/// Checksum of an engine control line's fixed parameters and magic.
pub(crate) fn params_crc(a: u64, b: u64, magic: u64) -> u64 {
    let mut bytes = [0u8; 24];
    bytes[0..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..16].copy_from_slice(&b.to_le_bytes());
    bytes[16..24].copy_from_slice(&magic.to_le_bytes());
    u64::from(storage::format::crc(&bytes))
}

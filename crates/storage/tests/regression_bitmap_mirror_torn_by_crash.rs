//! Regression (found by `crash_points_single_thread_all_policies`, seed 562250 fence 5 policy
//! torn + a crash in recovery: "allocator bitmap word of pages 64..128 differs from its mirror"):
//! a system transaction allocated two pages, the bitmap line persisted and the mirror line did
//! not, and recovery's rollback refused the pair as damaged. Would catch: recovery that cannot
//! replay interrupted bitmap updates, or live code that accepts a damaged pair.

use pmem::{Medium, Region, RegionOptions};
use storage::alloc::PageAllocator;
use storage::format::{page_offset, Layout, BITMAP_FIRST_PAGE};
use storage::DbError;

#[test]
fn regression_bitmap_mirror_torn_by_crash() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 8 << 20)).unwrap();
    let layout = Layout {
        page_count: region.len() / 8192,
        workers: 2,
        undo_pages: 1,
        sys_undo_pages: 2,
        node_capacity: 8,
        row_checksums: true,
    };
    layout.validate().unwrap();
    PageAllocator::format(&region, &layout);
    let alloc = PageAllocator::attach(&region, &layout);
    let (a, b) = (alloc.reserve(0).unwrap().unwrap(), alloc.reserve(0).unwrap().unwrap());
    assert_eq!(a / 64, b / 64, "both pages in one bitmap word");
    alloc.set_bit(a).unwrap();
    alloc.set_bit(b).unwrap();
    // The crash image: the bitmap line persisted with both bits, the mirror line without them.
    let mirror = page_offset(layout.bitmap_mirror_first_page()) + a / 64 * 8;
    let word = region.read_u64(page_offset(BITMAP_FIRST_PAGE) + a / 64 * 8);
    region.write_u64(mirror, word & !(1 << (a % 64)) & !(1 << (b % 64)));

    let after_crash = PageAllocator::attach(&region, &layout);
    assert!(matches!(after_crash.is_allocated(a), Err(DbError::Corrupt(_))), "live: damage");
    after_crash.set_recovering(true);
    after_crash.clear_bit(b).unwrap();
    after_crash.clear_bit(a).unwrap();
    after_crash.set_recovering(false);
    assert!(!after_crash.is_allocated(a).unwrap() && !after_crash.is_allocated(b).unwrap());
    assert_eq!(after_crash.count_free().unwrap(), layout.page_count - layout.first_data_page());
}

//! Guards against a full region that can never be freed (issue 39): the allocator refuses the
//! last `reserve_pages()` pages to ordinary allocations and hands them out inside a
//! `FreeingScope` (deletes), and pages it frees are handed out again.

use pmem::{Medium, Region, RegionOptions};
use storage::alloc::{FreeingScope, PageAllocator, RESERVE_PAGES};
use storage::format::Layout;

fn allocator() -> PageAllocator {
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
    PageAllocator::attach(&region, &layout)
}

fn take(alloc: &PageAllocator) -> Option<u64> {
    let page = alloc.reserve(0).unwrap()?;
    alloc.set_bit(page).unwrap();
    Some(page)
}

#[test]
fn the_last_pages_are_kept_for_deletes_and_freed_pages_come_back() {
    let alloc = allocator();
    let free = alloc.count_free().unwrap();
    let kept = alloc.reserve_pages();
    assert_eq!(kept, RESERVE_PAGES, "an 8 MiB region keeps the full reserve");
    let mut taken = Vec::new();
    while let Some(p) = take(&alloc) {
        taken.push(p);
    }
    assert_eq!(taken.len() as u64, free - kept, "ordinary allocations stop at the reserve");
    assert_eq!(alloc.count_free().unwrap(), kept);
    {
        let _scope = FreeingScope::enter();
        assert!(FreeingScope::active());
        for _ in 0..kept {
            taken.push(take(&alloc).expect("a delete gets a kept page"));
        }
        assert_eq!(take(&alloc), None, "the region is full, reserve included");
    }
    assert!(!FreeingScope::active());
    // Freed pages are allocatable again (beyond the reserve, once it is refilled).
    let freed: Vec<u64> = taken.drain(..2 * kept as usize).collect();
    alloc.free_committed(0, &freed, |_| {}).unwrap();
    let again: Vec<u64> = std::iter::from_fn(|| take(&alloc)).collect();
    assert_eq!(again.len() as u64, kept, "the freed pages above the reserve come back");
    assert!(again.iter().all(|p| freed.contains(p)));
}

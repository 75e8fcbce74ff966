//! Per-worker free-page caches (issue 35): page allocations from one worker take the
//! allocator's shared mutex once per `PAGE_BATCH`, and a cache never makes a region full.
//! Would catch: an allocator that locks its shared list per page (one line every core writes),
//! or a full region that says so while pages sit in another worker's cache.

use pmem::{Medium, Region, RegionOptions};
use std::collections::{BTreeMap, BTreeSet};
use storage::alloc::{shared_locks_taken, FreeingScope, PageAllocator, PAGE_BATCH};
use storage::format::Layout;

fn allocator(workers: u32) -> PageAllocator {
    allocator_of(workers, 8 << 20)
}

fn allocator_of(workers: u32, bytes: u64) -> PageAllocator {
    let region = Region::open(&RegionOptions::new(Medium::Dram, bytes)).unwrap();
    let layout = Layout {
        page_count: region.len() / 8192,
        workers,
        undo_pages: 1,
        sys_undo_pages: 2,
        node_capacity: 8,
        row_checksums: true,
    };
    layout.validate().unwrap();
    PageAllocator::format(&region, &layout);
    PageAllocator::attach(&region, &layout)
}

fn take(alloc: &PageAllocator, worker: usize) -> Option<u64> {
    let page = alloc.reserve(worker).unwrap()?;
    alloc.set_bit(page).unwrap();
    Some(page)
}

/// N allocations (and N frees of pages below the scan) from one worker: about N / PAGE_BATCH
/// shared acquisitions each way, and no page handed out twice.
#[test]
fn page_allocations_take_the_shared_mutex_once_per_batch() {
    let alloc = allocator(2);
    let n = 20 * PAGE_BATCH as u64;
    let before = shared_locks_taken();
    let pages: Vec<u64> = (0..n).map(|_| take(&alloc, 0).expect("a free page")).collect();
    let allocs = shared_locks_taken() - before;
    assert!(
        (n / PAGE_BATCH as u64..=n / PAGE_BATCH as u64 + 1).contains(&allocs),
        "{n} allocations took the shared mutex {allocs} times"
    );
    let distinct: std::collections::HashSet<_> = pages.iter().collect();
    assert_eq!(distinct.len() as u64, n, "a page was handed out twice");
    assert!(pages.windows(2).all(|w| w[0] < w[1]), "low pages first (a compact region)");
    // Frees go to the worker's cache and spill a batch at a time.
    let before = shared_locks_taken();
    for chunk in pages.chunks(4) {
        alloc.free_committed(0, chunk, |_| {}).unwrap();
    }
    let frees = shared_locks_taken() - before;
    assert!(frees <= n / PAGE_BATCH as u64 + 1, "{n} frees took the shared mutex {frees} times");
    // Freed pages come back (from the cache first), each once.
    let again: std::collections::HashSet<u64> =
        (0..n).map(|_| take(&alloc, 0).expect("a free page")).collect();
    assert_eq!(again.len() as u64, n);
    assert!(again.iter().all(|p| distinct.contains(p)), "freed pages are reused first");
}

/// Worker 0's cache holds a batch while worker 1 fills the region: the full region takes the
/// cached pages back before it says full, and the reserve is still whole.
#[test]
fn a_full_region_drains_the_caches_and_keeps_the_reserve() {
    let alloc = allocator(2);
    let free = alloc.count_free().unwrap();
    let kept = alloc.reserve_pages();
    let first = take(&alloc, 0).expect("a page");
    let mut taken = vec![first];
    while let Some(p) = take(&alloc, 1) {
        taken.push(p);
    }
    assert_eq!(taken.len() as u64, free - kept, "worker 0's cached pages were not drained");
    assert_eq!(alloc.count_free().unwrap(), kept, "the reserve was dipped into");
    assert_eq!(take(&alloc, 0), None, "worker 0 is refused too");
    {
        let _scope = FreeingScope::enter();
        for _ in 0..kept {
            taken.push(take(&alloc, 0).expect("a delete gets a kept page"));
        }
        assert_eq!(take(&alloc, 1), None);
    }
    let distinct: std::collections::HashSet<_> = taken.iter().collect();
    assert_eq!(distinct.len(), taken.len(), "a page was handed out twice");
    // Pages freed on a full region refill the reserve before they serve anyone else.
    let freed: Vec<u64> = taken.drain(..2 * kept as usize).collect();
    alloc.free_committed(0, &freed, |_| {}).unwrap();
    let again: Vec<u64> = std::iter::from_fn(|| take(&alloc, 1)).collect();
    assert_eq!(again.len() as u64, kept, "the freed pages above the reserve come back");
}

/// Two workers allocate and free at once: every page is handed to one owner at a time.
#[test]
fn two_workers_never_share_a_page() {
    let alloc = allocator(2);
    let owned: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|w| {
                let alloc = &alloc;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for round in 0..20 {
                        for _ in 0..40 {
                            mine.push(take(alloc, w).expect("a free page"));
                        }
                        if round % 2 == 1 {
                            let freed: Vec<u64> = mine.drain(..60).collect();
                            alloc.free_committed(w, &freed, |_| {}).unwrap();
                        }
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Vec<u64> = owned.concat();
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "a page is owned by two workers");
    for p in &all {
        assert!(alloc.is_allocated(*p).unwrap(), "page {p} owned but free in the bitmap");
    }
    let layout = alloc.layout();
    let data = layout.page_count - layout.first_data_page();
    assert_eq!(alloc.count_free().unwrap(), data - all.len() as u64, "pages leaked");
}

/// Pages per 64-byte line of the bitmap (one bit per page).
const PAGES_PER_BITMAP_LINE: u64 = 512;

fn figure(alloc: &PageAllocator, name: &str) -> u64 {
    alloc.activity().into_iter().find(|a| a.0 == name).map_or(0, |a| a.1)
}

/// Guards batches aligned to bitmap lines (issue 35): two workers allocating in turn never take
/// pages of one bitmap line at the same time, so neither writes the line (or takes the line
/// lock) the other is setting bits in. Would catch: batches cut from the shared list without
/// regard to lines (32-page batches of two workers falling in one 512-page line).
#[test]
fn two_workers_refills_never_share_a_bitmap_line() {
    // 4096 pages: 8 bitmap lines, each worker takes most of 3.
    let alloc = allocator_of(2, 32 << 20);
    let mut current = [None, None];
    let mut batches = 0;
    for step in 0..1500 {
        for w in 0..2 {
            let page = take(&alloc, w).expect("a free page");
            let line = page / PAGES_PER_BITMAP_LINE;
            if current[w] != Some(line) {
                batches += 1;
            }
            current[w] = Some(line);
            assert_ne!(current[w], current[1 - w], "step {step}: both workers in line {line}");
        }
    }
    assert!(batches >= 4, "each worker moved on to another line: {batches} line changes");
    assert_eq!(figure(&alloc, "alloc_shared_line_refills"), 0);
}

/// The same with two threads at once: every bitmap line's pages went to one worker only, and
/// no page to two.
#[test]
fn two_concurrent_workers_fill_disjoint_bitmap_lines() {
    let alloc = allocator_of(2, 32 << 20);
    let start = std::sync::Barrier::new(2);
    let owned: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|w| {
                let (alloc, start) = (&alloc, &start);
                s.spawn(move || {
                    start.wait();
                    (0..1500).map(|_| take(alloc, w).expect("a free page")).collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut owners: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    for (w, pages) in owned.iter().enumerate() {
        for p in pages {
            owners.entry(p / PAGES_PER_BITMAP_LINE).or_default().insert(w);
        }
    }
    for (line, workers) in &owners {
        assert_eq!(workers.len(), 1, "bitmap line {line} was filled by workers {workers:?}");
    }
    let all: BTreeSet<u64> = owned.concat().into_iter().collect();
    assert_eq!(all.len(), 3000, "a page was handed out twice");
    eprintln!("{} lines, bit-lock waits {}", owners.len(), figure(&alloc, "alloc_bit_lock_waits"));
}

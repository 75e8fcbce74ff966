//! Point lookups are optimistic (issue 35: a read that writes no shared cache line): they take no
//! latch, and they stay exact while writers split, merge and collapse the nodes under them.
//! Would catch: a lookup that takes a shared latch again (a write to a shared word on every
//! read), a stale root or a freed node followed without noticing, torn node bytes trusted.

use parking_lot::{Mutex, RwLock};
use pmem::{Medium, Region, RegionOptions};
use storage::alloc::PageAllocator;
use storage::btree::{BTree, RootRef};
use storage::format::{page_offset, Layout, CATALOG_PAGE};
use storage::pages::{shared_latches_taken, PageStore};
use storage::systxn::SysTxn;
use storage::undo::UndoLog;

const ROOT: RootRef = RootRef { page: CATALOG_PAGE, offset: 64 };

struct Fixture {
    store: PageStore,
    alloc: PageAllocator,
    logs: Vec<Mutex<UndoLog>>,
    root_latch: RwLock<()>,
}

fn fixture(workers: u32) -> Fixture {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 32 << 20)).unwrap();
    let layout = Layout {
        page_count: region.len() / 8192,
        workers,
        undo_pages: 1,
        sys_undo_pages: 8,
        node_capacity: 4,
    };
    layout.validate().unwrap();
    for w in 0..workers {
        UndoLog::format(&region, page_offset(layout.sys_undo_log_page(w)));
    }
    PageAllocator::format(&region, &layout);
    let logs = (0..workers)
        .map(|w| {
            let at = page_offset(layout.sys_undo_log_page(w));
            Mutex::new(UndoLog::attach(&region, at, 8 * 8192).unwrap())
        })
        .collect();
    let f = Fixture {
        store: PageStore::new(&region, &layout, None),
        alloc: PageAllocator::attach(&region, &layout),
        logs,
        root_latch: RwLock::new(()),
    };
    let mut log = f.logs[0].lock();
    let mut sys = SysTxn::begin(&f.store, &f.alloc, &mut log);
    let root = BTree::create(&mut sys, 1).unwrap();
    storage::pages::PageWriter::write(&mut sys, ROOT.page, &[(ROOT.offset, &root.to_le_bytes())])
        .unwrap();
    sys.commit().unwrap();
    drop(log);
    f
}

impl Fixture {
    fn tree(&self) -> BTree<'_> {
        // Capacity 4: splits, merges and root changes on almost every write.
        BTree::new(&self.store, ROOT, &self.root_latch, 4, 1)
    }

    fn write(&self, worker: usize, k: u64, insert: bool) {
        let mut log = self.logs[worker].lock();
        let mut sys = SysTxn::begin(&self.store, &self.alloc, &mut log);
        if insert {
            self.tree().insert(&mut sys, k, k * 10).unwrap();
        } else {
            self.tree().remove(&mut sys, k).unwrap();
        }
        sys.commit().unwrap();
    }

    fn root(&self) -> u64 {
        u64::from_le_bytes(self.store.page(ROOT.page)[64..72].try_into().unwrap())
    }
}

#[test]
fn a_point_lookup_takes_no_latch_and_changes_no_version() {
    let f = fixture(1);
    for k in 0..500 {
        f.write(0, k * 2, true);
    }
    let root = f.root();
    let version = f.store.read_version(root).expect("no writer holds the root");
    let latches = shared_latches_taken();
    for k in 0..1000 {
        let expect = (k % 2 == 0).then_some(k * 10);
        assert_eq!(f.tree().get(k).unwrap(), expect, "key {k}");
    }
    assert_eq!(shared_latches_taken(), latches, "a lookup took a shared latch");
    assert_eq!(f.store.read_version(root), Some(version), "a lookup changed the root's version");
    // Scans still couple shared latches (their callbacks take key locks under them).
    f.tree().scan(0, 10, &mut |_, _| Ok(true)).unwrap();
    assert!(shared_latches_taken() > latches, "the latch counter does not count");
}

#[test]
fn optimistic_lookups_stay_exact_under_splits_merges_and_root_changes() {
    const WRITERS: usize = 2;
    let f = fixture(WRITERS as u32);
    // Stable keys (multiples of 4) stay; churn keys (4i + 1, 4i + 2) come and go; keys 4i + 3
    // are never written.
    for i in 0..400 {
        f.write(0, i * 4, true);
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (f, done) = (&f, &done);
        let readers: Vec<_> = (0..2u64)
            .map(|r| {
                s.spawn(move || {
                    let mut x = 99 + r;
                    let mut lookups = 0u64;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) || lookups < 1000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let i = (x >> 33) % 400;
                        assert_eq!(f.tree().get(i * 4).unwrap(), Some(i * 40), "stable key lost");
                        assert_eq!(f.tree().get(i * 4 + 3).unwrap(), None, "phantom key");
                        lookups += 1;
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    for _round in 0..6 {
                        let keys = (0..400).map(|i| i * 4 + 1 + w as u64);
                        // Ascending inserts then descending removes: splits, then merges down
                        // to collapsing roots.
                        keys.clone().for_each(|k| f.write(w, k, true));
                        keys.rev().for_each(|k| f.write(w, k, false));
                    }
                })
            })
            .collect();
        writers.into_iter().for_each(|h| h.join().unwrap());
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        readers.into_iter().for_each(|h| h.join().unwrap());
    });
}

//! A B+tree insert into a leaf with room, and a remove that merges nothing, run as one store
//! group of the region (`pmem::Region::store_group`; issue 35): under `wal` its system undo
//! record, the leaf and the log's free mark become one insert into the central log instead of
//! one each. A group may only hold stores no other thread can make before it closes, so an
//! insert that splits or a remove that merges (they allocate or free pages: stores to the
//! shared allocation bitmap) must not open one.
//! Would catch: a group around a split or a merge (a bitmap store held back in a group, whose
//! record could reach the log after another thread's later store to the same word), a group
//! closed before the modification completes (a store of it made outside the group), or no
//! group at all.

use parking_lot::{Mutex, RwLock};
use pmem::{Events, Medium, Region, RegionOptions, StoreObserver};
use std::sync::Arc;
use storage::alloc::PageAllocator;
use storage::btree::{BTree, RootRef};
use storage::format::{page_offset, Layout, CATALOG_PAGE, PAGE_SIZE_U64};
use storage::pages::PageStore;
use storage::systxn::SysTxn;
use storage::undo::UndoLog;

const ROOT: RootRef = RootRef { page: CATALOG_PAGE, offset: 64 };
const SYS_UNDO_PAGES: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ev {
    Store(u64, u64),
    Open,
    Close,
}

/// Records every store and group event, in order (the test is single-threaded).
#[derive(Default)]
struct Recorder(Mutex<Vec<Ev>>);

impl StoreObserver for Recorder {
    fn events(&self) -> Events {
        Events::STORE | Events::GROUP
    }

    fn on_store(&self, offset: u64, bytes: &[u8]) {
        self.0.lock().push(Ev::Store(offset, bytes.len() as u64));
    }

    fn on_group(&self, open: bool) {
        self.0.lock().push(if open { Ev::Open } else { Ev::Close });
    }
}

#[test]
fn a_modification_of_one_leaf_is_one_group_and_a_split_or_merge_opens_none() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 16 << 20)).unwrap();
    let layout = Layout {
        page_count: region.len() / 8192,
        workers: 1,
        undo_pages: 1,
        sys_undo_pages: SYS_UNDO_PAGES,
        node_capacity: 8,
        row_checksums: true,
    };
    layout.validate().unwrap();
    UndoLog::format(&region, page_offset(layout.sys_undo_log_page(0)));
    PageAllocator::format(&region, &layout);
    let log = UndoLog::attach(
        &region,
        page_offset(layout.sys_undo_log_page(0)),
        u64::from(SYS_UNDO_PAGES) * PAGE_SIZE_U64,
    )
    .unwrap();
    let mut log = Mutex::new(log);
    let store = PageStore::new(&region, &layout, None);
    let alloc = PageAllocator::attach(&region, &layout);
    let root_latch = RwLock::new(());
    {
        let log = log.get_mut();
        let mut sys = SysTxn::begin(&store, &alloc, log);
        let root = BTree::create(&mut sys, 1).unwrap();
        storage::pages::PageWriter::write(
            &mut sys,
            ROOT.page,
            &[(ROOT.offset, &root.to_le_bytes())],
        )
        .unwrap();
        sys.commit().unwrap();
    }
    let recorder = Arc::new(Recorder::default());
    assert!(region.add_observer(recorder.clone()));
    let tree = BTree::new(&store, ROOT, &root_latch, 8, 1);
    let sys_log = page_offset(layout.sys_undo_log_page(0))
        ..page_offset(layout.sys_undo_log_page(0) + u64::from(SYS_UNDO_PAGES));
    let first_data = page_offset(layout.first_data_page());

    let ctx = Ctx { sys_log, first_data };
    let (mut grouped, mut split) = (0, 0);
    // Keys in an order that fills leaves in the middle as well as at the ends.
    let key_of = |i: u64| (i * 7919) % 1009;
    for i in 0..300u64 {
        let key = key_of(i);
        recorder.0.lock().clear();
        {
            let log = log.get_mut();
            let mut sys = SysTxn::begin(&store, &alloc, log);
            assert!(tree.insert(&mut sys, key, key + 1).unwrap());
            sys.commit().unwrap();
        }
        match ctx.check(&format!("insert {key}"), &recorder.0.lock()) {
            true => grouped += 1,
            false => split += 1,
        }
    }
    assert!(grouped > 100 && split > 20, "inserts: {grouped} grouped, {split} splits");
    for key in 0..1009u64 {
        let want = ((0..300u64).any(|i| key_of(i) == key)).then_some(key + 1);
        assert_eq!(tree.get(key).unwrap(), want, "key {key}");
    }
    let (mut grouped, mut merged) = (0, 0);
    for i in 0..300u64 {
        let key = key_of(i * 13 % 300);
        recorder.0.lock().clear();
        {
            let log = log.get_mut();
            let mut sys = SysTxn::begin(&store, &alloc, log);
            assert_eq!(tree.remove(&mut sys, key).unwrap(), Some(key + 1));
            sys.commit().unwrap();
        }
        match ctx.check(&format!("remove {key}"), &recorder.0.lock()) {
            true => grouped += 1,
            false => merged += 1,
        }
    }
    assert!(grouped > 100 && merged > 20, "removes: {grouped} grouped, {merged} reshaping");
    assert!((0..1009u64).all(|k| tree.get(k).unwrap().is_none()), "every key removed");
}

struct Ctx {
    sys_log: std::ops::Range<u64>,
    first_data: u64,
}

impl Ctx {
    /// Checks one modification's events; returns whether it ran as a group.
    fn check(&self, what: &str, evs: &[Ev]) -> bool {
        let opens = evs.iter().filter(|e| **e == Ev::Open).count();
        let closes = evs.iter().filter(|e| **e == Ev::Close).count();
        assert_eq!(opens, closes, "{what}: {evs:?}");
        assert!(opens <= 1, "{what}: one group a modification: {evs:?}");
        // Pages allocated or freed: stores to the bitmap, below the data pages and outside the
        // system undo log.
        let bitmap = evs.iter().any(
            |e| matches!(e, Ev::Store(o, _) if *o < self.first_data && !self.sys_log.contains(o)),
        );
        let nodes = |evs: &[Ev]| -> std::collections::BTreeSet<u64> {
            evs.iter()
                .filter_map(|e| match e {
                    Ev::Store(o, _) if *o >= self.first_data => Some(o / PAGE_SIZE_U64),
                    _ => None,
                })
                .collect()
        };
        if opens == 0 {
            // An insert opens none only to split (it allocates a page); a remove also when the
            // leaf is at its minimum (it may merge), whatever then happens.
            assert!(
                !what.starts_with("insert") || bitmap,
                "{what}: an insert without a group must split: {evs:?}"
            );
            return false;
        }
        assert!(!bitmap, "{what}: a group around a page allocation or free: {evs:?}");
        // Every store of the modification falls inside its group: the log's, and one leaf's.
        let (open, close) = (
            evs.iter().position(|e| *e == Ev::Open).unwrap(),
            evs.iter().position(|e| *e == Ev::Close).unwrap(),
        );
        let outside = evs[..open].iter().chain(&evs[close + 1..]);
        assert!(
            outside.into_iter().all(|e| !matches!(e, Ev::Store(..))),
            "{what}: stores outside the group: {evs:?}"
        );
        assert_eq!(nodes(&evs[open..close]).len(), 1, "{what}: one leaf written: {evs:?}");
        assert!(
            evs[open..close]
                .iter()
                .any(|e| matches!(e, Ev::Store(o, _) if self.sys_log.contains(o))),
            "{what}: the system undo record and free mark are in the group: {evs:?}"
        );
        true
    }
}

//! The region's store stream as one seam (`docs/design.md` §2): every observer of the access
//! path — the wear map, the dirty-line tracker of NVRAM Group Commit (Pelley thesis §4.3.2), the
//! persist tracer (thesis Ch. VI–VIII), the timing model (Pelley et al., VLDB 2014, §4; thesis
//! §5.1) and whatever an engine attaches (`wal`'s redo capture) — implements
//! [`StoreObserver`] and sits in one short list that the access path walks.
//!
//! Each observer says which [`Events`] it wants; the list keeps their union in one word, so an
//! event no observer wants costs the access path one load and one branch, and an observer is
//! never called for an event it did not ask for (a store-only capture leaves reads alone).
//!
//! The crash simulator is not an observer: it is the `sim` medium's persistence domain. It runs
//! each store under its own lock (a crash cut falls before or after a store, never inside it)
//! and its flush replaces the hardware's, where an observer sees an event and changes nothing.
//!
//! Invariant: observers are only added, never removed, and at most [`MAX_OBSERVERS`] of them;
//! an observer sees the events of every access made after it was added, in each thread's order.

use crate::cpucache::CpuCache;
use crate::dirty::DirtyLines;
use crate::flush::LineSpan;
use crate::stats::{Stats, ThreadCounters, WearMap};
use crate::timing::TimingModel;
use crate::trace::{TraceKind, Tracer};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The events of the access path an observer may ask for (a set: combine with `|`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Events(u16);

impl Events {
    /// None at all.
    pub const NONE: Events = Events(0);
    /// A read, before the bytes are borrowed: [`StoreObserver::on_load`].
    pub const LOAD: Events = Events(1);
    /// A store, before its bytes land: [`StoreObserver::on_store`].
    pub const STORE: Events = Events(1 << 1);
    /// A store, after its bytes landed: [`StoreObserver::on_stored`].
    pub const STORED: Events = Events(1 << 2);
    /// A flush, before the lines are written back: [`StoreObserver::on_flush`].
    pub const FLUSH: Events = Events(1 << 3);
    /// A fence, before the hardware fence: [`StoreObserver::on_fence`].
    pub const FENCE: Events = Events(1 << 4);
    /// A fence, after the hardware fence: [`StoreObserver::on_fenced`].
    pub const FENCED: Events = Events(1 << 5);
    /// A borrow of bytes whose lines the caller charges itself ([`super::Region::borrow`]; a
    /// page's bytes, of which an operation reads a few lines): [`StoreObserver::on_load`] too.
    /// The tracer records it as a load; the CPU-cache read model leaves it alone.
    pub const BORROW: Events = Events(1 << 6);
    /// Not an observer's event: set on a `sim` region, whose stores and flushes go through the
    /// crash simulator, so that the store path's one branch also decides "plain store or not".
    pub(super) const SIM_MEDIUM: Events = Events(1 << 7);
    /// A store group opens or closes on the calling thread ([`super::Region::store_group`]):
    /// [`StoreObserver::on_group`].
    pub const GROUP: Events = Events(1 << 8);

    /// Whether `self` and `other` share an event.
    #[inline(always)]
    pub fn intersects(self, other: Events) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for Events {
    type Output = Events;

    fn bitor(self, other: Events) -> Events {
        Events(self.0 | other.0)
    }
}

/// Sees the accesses to a region, in the accessing thread and inside whatever critical section
/// it holds: stores to the same bytes are observed in the order they are made. Every method
/// has a no-op default; [`StoreObserver::events`] says which ones the region calls.
pub trait StoreObserver: Send + Sync {
    /// The events this observer is called for; asked once, when it is added. The default,
    /// stores (before) and fences (before), is what a write-ahead log's capture needs.
    fn events(&self) -> Events {
        Events::STORE | Events::FENCE
    }

    /// `len` bytes at `offset` are about to be read.
    fn on_load(&self, _offset: u64, _len: u64) {}

    /// `bytes` are about to be stored at `offset`.
    fn on_store(&self, _offset: u64, _bytes: &[u8]) {}

    /// `len` bytes at `offset` were stored (a reader may see them now).
    fn on_stored(&self, _offset: u64, _len: u64) {}

    /// The lines of `span` (covering `[offset, offset + len)`) are about to be written back.
    fn on_flush(&self, _offset: u64, _len: u64, _span: LineSpan) {}

    /// A fence by the calling thread, before the hardware fence: everything it stored before is
    /// ordered before what it does next (a commit's last fence comes before its locks are
    /// released).
    fn on_fence(&self) {}

    /// The hardware fence of the calling thread completed (its earlier flushes are durable).
    fn on_fenced(&self) {}

    /// A store group of the calling thread opens (`true`) or closes (`false`); groups nest.
    /// The thread promises what [`super::Region::store_group`] says: no other thread stores to
    /// the bytes it stores inside the group before the group closes. A redo capture may then
    /// hold the group's stores and log them together when the outermost group closes.
    fn on_group(&self, _open: bool) {}
}

/// How many observers a region holds at most: the four built-in ones and room for engines.
pub const MAX_OBSERVERS: usize = 8;

/// The observers of one region, in the order they were added.
pub(super) struct Observers {
    /// Union of the events the observers want (plus [`Events::SIM_MEDIUM`]): the access path's
    /// one test per event.
    wants: AtomicU16,
    /// Slots `0..count` are set.
    count: AtomicUsize,
    slots: [OnceLock<(Events, Arc<dyn StoreObserver>)>; MAX_OBSERVERS],
    /// Serialises adders (readers never take it).
    adding: parking_lot::Mutex<()>,
    /// An observer came through [`super::Region::set_observer`] (one per region).
    external: AtomicBool,
}

impl Observers {
    pub(super) fn new(medium_bits: Events) -> Observers {
        Observers {
            wants: AtomicU16::new(medium_bits.0),
            count: AtomicUsize::new(0),
            slots: [const { OnceLock::new() }; MAX_OBSERVERS],
            adding: parking_lot::Mutex::new(()),
            external: AtomicBool::new(false),
        }
    }

    /// Whether anything wants one of `events`. Relaxed is enough: [`Observers::each`] reads
    /// `count` with Acquire before it touches a slot.
    #[inline(always)]
    pub(super) fn wants(&self, events: Events) -> bool {
        Events(self.wants.load(Ordering::Relaxed)).intersects(events)
    }

    /// Adds `observer`; false if the list is full.
    pub(super) fn add(&self, observer: Arc<dyn StoreObserver>) -> bool {
        let _guard = self.adding.lock();
        let n = self.count.load(Ordering::Relaxed);
        if n == MAX_OBSERVERS {
            return false;
        }
        let events = observer.events();
        let fresh = self.slots[n].set((events, observer)).is_ok();
        assert!(fresh, "observer slot {n} set twice (adders are serialised)");
        self.count.store(n + 1, Ordering::Release);
        self.wants.fetch_or(events.0, Ordering::Release);
        true
    }

    /// Adds the one observer [`super::Region::set_observer`] allows; false if one was set or
    /// the list is full.
    pub(super) fn set_external(&self, observer: Arc<dyn StoreObserver>) -> bool {
        if self.external.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.add(observer)
    }

    /// Calls `visit` on each observer that wants `event`, in the order they were added.
    #[inline]
    pub(super) fn each(&self, event: Events, mut visit: impl FnMut(&dyn StoreObserver)) {
        let n = self.count.load(Ordering::Acquire);
        debug_assert!(n <= MAX_OBSERVERS);
        for slot in &self.slots[..n] {
            if let Some((events, observer)) = slot.get() {
                if events.intersects(event) {
                    visit(observer.as_ref());
                }
            }
        }
    }
}

/// The wear map counts write-backs (flushes); at byte granularity it also marks stored bytes,
/// so that a flush counts only the bytes stored since the line's last write-back.
impl StoreObserver for WearMap {
    fn events(&self) -> Events {
        if self.granularity() == crate::stats::WearGranularity::Byte {
            Events::STORED | Events::FLUSH
        } else {
            Events::FLUSH
        }
    }

    fn on_stored(&self, offset: u64, len: u64) {
        self.mark_stored(offset, len);
    }

    fn on_flush(&self, _offset: u64, _len: u64, span: LineSpan) {
        self.record(span);
    }
}

/// A line is marked after its bytes landed: a collector that clears the mark and then copies
/// the line cannot miss the store (marking before would let it copy the old bytes).
impl StoreObserver for DirtyLines {
    fn events(&self) -> Events {
        Events::STORED
    }

    fn on_stored(&self, offset: u64, len: u64) {
        self.mark(offset, len);
    }
}

impl StoreObserver for Tracer {
    fn events(&self) -> Events {
        Events::LOAD | Events::BORROW | Events::STORED | Events::FLUSH | Events::FENCE
    }

    fn on_load(&self, offset: u64, len: u64) {
        self.record(TraceKind::Load, offset, len);
    }

    fn on_stored(&self, offset: u64, len: u64) {
        self.record(TraceKind::Store, offset, len);
    }

    fn on_flush(&self, offset: u64, len: u64, _span: LineSpan) {
        self.record(TraceKind::Flush, offset, len);
    }

    fn on_fence(&self) {
        self.record(TraceKind::Fence, 0, 0);
    }
}

/// The timing model's counters, kept by the model itself and added to the region's [`Stats`].
#[derive(Clone, Copy)]
#[repr(usize)]
enum Charged {
    DelayNs = 0,
    LinesRead = 1,
    Reservations = 2,
    FsSyncs = 3,
    FsBytes = 4,
    /// Time (TSC ticks, converted once when read) the CPU-cache model spent simulating loads
    /// and stores.
    ModelTicks = 5,
    /// ... of which a charged read stall absorbed.
    AbsorbedTicks = 6,
}

/// The most simulation time a thread carries toward its next charged stall: enough to cover
/// the hits between two misses, never a warm-up's worth (a stall must be paid in the window
/// that owes it). Time beyond it is the model's unabsorbed cost, counted.
const MODEL_CREDIT_CAP_NS: u64 = 20_000;

thread_local! {
    /// Ticks this thread spent in a CPU-cache model and no stall has absorbed yet, and the
    /// model (its address) they belong to.
    static MODEL_CREDIT: std::cell::Cell<(usize, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The timing model as an observer: a flush reserves device bandwidth, a completed fence waits
/// out the modelled barrier; with a CPU cache (N-Store §2.2) a read charges its missed lines and
/// a store installs its lines. Charges only while enabled (loaders and checkers turn it off: the
/// papers measure only the run); the cache does not simulate meanwhile either (a load would take
/// several times as long), so a run starts with a cold cache and its warmup warms it.
pub(super) struct TimingCharge {
    pub(super) model: TimingModel,
    on: AtomicBool,
    counters: ThreadCounters<7>,
    cpu_cache: Option<CpuCache>,
    /// [`MODEL_CREDIT_CAP_NS`] in ticks.
    credit_cap: u64,
    /// The next address of the simulated cache's address space not taken by the region or by
    /// a region charged through [`ChargedReads`].
    next_address: AtomicU64,
}

impl TimingCharge {
    /// The model of a region of `region_len` bytes.
    pub(super) fn new(model: TimingModel, region_len: u64) -> TimingCharge {
        let bytes = model.options.cpu_cache_bytes;
        TimingCharge {
            model,
            on: AtomicBool::new(true),
            counters: ThreadCounters::default(),
            cpu_cache: (bytes > 0).then(|| CpuCache::new(bytes)),
            credit_cap: crate::timing::Tsc::get().ns_to_ticks(MODEL_CREDIT_CAP_NS),
            next_address: AtomicU64::new(region_len.next_multiple_of(crate::CACHE_LINE)),
        }
    }

    /// Whether reads go through the simulated CPU cache.
    pub(super) fn cpu_cache_on(&self) -> bool {
        self.cpu_cache.is_some()
    }

    /// The cache, when it is to simulate an access: on, enabled and charging reads. At a read
    /// latency of zero nothing is charged, so nothing is simulated either (the model's own time
    /// would be all it added).
    #[inline]
    fn simulating(&self) -> Option<&CpuCache> {
        match &self.cpu_cache {
            Some(cache) if self.enabled() && self.model.charges_reads() => Some(cache),
            _ => None,
        }
    }

    /// The lines of `[offset, offset + len)` are loaded: those the CPU cache misses are charged
    /// the read latency (no cache: nothing). The time the simulation took counts toward that
    /// stall (module doc of [`crate::cpucache`]).
    #[inline]
    pub(super) fn load(&self, offset: u64, len: u64) {
        if let Some(cache) = self.simulating() {
            if cache.recent(offset, len) {
                return;
            }
            let start = crate::timing::rdtsc();
            let missed = cache.access_range(offset, len);
            self.credit(crate::timing::rdtsc().saturating_sub(start), missed);
        }
    }

    /// The lines of `[offset, offset + len)` were stored: write-allocate, they enter the cache
    /// uncharged (a store's cost is the persist latency).
    #[inline]
    pub(super) fn stored(&self, offset: u64, len: u64) {
        if let Some(cache) = self.simulating() {
            if cache.recent(offset, len) {
                return;
            }
            let start = crate::timing::rdtsc();
            cache.access_range(offset, len);
            self.credit(crate::timing::rdtsc().saturating_sub(start), 0);
        }
    }

    /// Reserves `len` bytes of the cache's address space beyond the region's own (and beyond
    /// every earlier reservation) for the memory of another region whose reads this model
    /// charges ([`ChargedReads`]); returns where they start.
    pub(super) fn reserve_addresses(&self, len: u64) -> u64 {
        let len = len.next_multiple_of(crate::CACHE_LINE);
        self.next_address.fetch_add(len, Ordering::Relaxed)
    }

    /// Adds `spent` ticks of simulation to this thread's credit and charges `missed` lines
    /// against it.
    #[inline]
    fn credit(&self, spent: u64, missed: u64) {
        let me = self as *const TimingCharge as usize;
        let carried = MODEL_CREDIT.with(|c| match c.get() {
            (model, ticks) if model == me => ticks,
            _ => 0,
        });
        let credit = carried + spent;
        let mut left = credit;
        if missed > 0 {
            let (ns, rest) = self.model.charge_read_after(missed, credit);
            left = rest;
            self.counters.add2(Charged::LinesRead as usize, missed, None);
            self.counters.add(Charged::DelayNs as usize, ns);
            self.counters.add(Charged::AbsorbedTicks as usize, credit - rest);
        }
        self.counters.add(Charged::ModelTicks as usize, spent);
        MODEL_CREDIT.with(|c| c.set((me, left.min(self.credit_cap))));
    }

    pub(super) fn set_enabled(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }

    #[inline]
    fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Charges the read latency of `lines` lines read from the device.
    pub(super) fn charge_read(&self, lines: u64) {
        if self.enabled() {
            let ns = self.model.charge_read(lines);
            self.counters.add2(Charged::LinesRead as usize, lines, None);
            self.counters.add(Charged::DelayNs as usize, ns);
        }
    }

    /// Charges one modelled `fdatasync` of `bytes` written through the file since the last one.
    pub(super) fn charge_fs_sync(&self, bytes: u64) {
        if self.enabled() {
            let ns = self.model.charge_fs_sync(bytes);
            self.counters.add2(
                Charged::FsSyncs as usize,
                1,
                Some((Charged::FsBytes as usize, bytes)),
            );
            self.counters.add(Charged::DelayNs as usize, ns);
        }
    }

    /// Adds the model's counters to `stats` (the region's own counters).
    pub(super) fn add_to(&self, stats: &mut Stats) {
        stats.delay_ns += self.counters.get(Charged::DelayNs as usize);
        stats.lines_read_charged += self.counters.get(Charged::LinesRead as usize);
        stats.reservations += self.counters.get(Charged::Reservations as usize);
        stats.fs_syncs_charged += self.counters.get(Charged::FsSyncs as usize);
        stats.fs_bytes_charged += self.counters.get(Charged::FsBytes as usize);
        let model = self.counters.get(Charged::ModelTicks as usize);
        let absorbed = self.counters.get(Charged::AbsorbedTicks as usize);
        stats.cpu_cache_model_ns += self.model.ticks_to_ns(model);
        stats.cpu_cache_unabsorbed_ns += self.model.ticks_to_ns(model.saturating_sub(absorbed));
    }
}

impl StoreObserver for TimingCharge {
    fn events(&self) -> Events {
        match self.cpu_cache {
            Some(_) => Events::FLUSH | Events::FENCED | Events::LOAD | Events::STORED,
            None => Events::FLUSH | Events::FENCED,
        }
    }

    fn on_load(&self, offset: u64, len: u64) {
        self.load(offset, len);
    }

    /// Write-allocate: a store brings its lines into the cache, uncharged.
    fn on_stored(&self, offset: u64, len: u64) {
        self.stored(offset, len);
    }

    fn on_flush(&self, _offset: u64, _len: u64, span: LineSpan) {
        if self.enabled() {
            let reserved = self.model.on_flush(span.count);
            if reserved > 0 {
                self.counters.add(Charged::Reservations as usize, reserved);
            }
        }
    }

    fn on_fenced(&self) {
        if self.enabled() {
            let (ns, reserved) = self.model.on_fence_reserving();
            if ns > 0 {
                self.counters.add(Charged::DelayNs as usize, ns);
            }
            if reserved > 0 {
                self.counters.add(Charged::Reservations as usize, reserved);
            }
        }
    }
}

/// Another region's reads charged by a region's CPU-cache read model, as reads of the same
/// device (N-Store §2.2: its emulator makes all of the DBMS's memory NVM, so a traditional
/// engine's buffer pool pays the read latency too): a load misses or hits the one simulated
/// cache the device's own reads go through, at addresses of its own (`base` and up, beyond the
/// device's), and a store installs its lines. Flushes and fences are the other region's own
/// business (it is volatile; its persistence is the engine's log and page writes).
pub(super) struct ChargedReads {
    pub(super) model: Arc<TimingCharge>,
    pub(super) base: u64,
}

impl StoreObserver for ChargedReads {
    fn events(&self) -> Events {
        Events::LOAD | Events::STORED
    }

    fn on_load(&self, offset: u64, len: u64) {
        self.model.load(self.base + offset, len);
    }

    fn on_stored(&self, offset: u64, len: u64) {
        self.model.stored(self.base + offset, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::{Medium, Region, RegionOptions};

    /// Records every event it is called for, as text.
    struct Seen {
        events: Events,
        log: parking_lot::Mutex<Vec<String>>,
    }

    impl Seen {
        fn new(events: Events) -> Arc<Seen> {
            Arc::new(Seen { events, log: parking_lot::Mutex::new(Vec::new()) })
        }

        fn push(&self, event: String) {
            self.log.lock().push(event);
        }

        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.log.lock())
        }
    }

    impl StoreObserver for Seen {
        fn events(&self) -> Events {
            self.events
        }
        fn on_load(&self, offset: u64, len: u64) {
            self.push(format!("load {offset}+{len}"));
        }
        fn on_store(&self, offset: u64, bytes: &[u8]) {
            self.push(format!("store {offset}+{}", bytes.len()));
        }
        fn on_stored(&self, offset: u64, len: u64) {
            self.push(format!("stored {offset}+{len}"));
        }
        fn on_flush(&self, offset: u64, len: u64, span: LineSpan) {
            self.push(format!("flush {offset}+{len} lines {}+{}", span.first, span.count));
        }
        fn on_fence(&self) {
            self.push("fence".into());
        }
        fn on_fenced(&self) {
            self.push("fenced".into());
        }
    }

    /// The default events of the old one-slot observer: stores (before) and fences.
    struct StoresAndFences(parking_lot::Mutex<Vec<String>>);

    impl StoreObserver for StoresAndFences {
        fn on_store(&self, offset: u64, bytes: &[u8]) {
            self.0.lock().push(format!("store {offset}+{}", bytes.len()));
        }
        fn on_fence(&self) {
            self.0.lock().push("fence".into());
        }
    }

    #[test]
    fn an_observer_sees_every_store_and_every_fence_in_order() {
        let region = Region::open(&RegionOptions::new(Medium::Dram, 1 << 20)).unwrap();
        let seen = Arc::new(StoresAndFences(parking_lot::Mutex::new(Vec::new())));
        assert!(region.set_observer(seen.clone()));
        region.write(64, &[1; 8]);
        region.fence();
        region.write_u64(128, 7);
        region.persist(128, 8);
        let _ = region.read(0, 8);
        assert_eq!(*seen.0.lock(), ["store 64+8", "fence", "store 128+8", "fence"]);
    }

    /// Guards the observer seam: each event reaches exactly the observers that asked for it,
    /// before and after the access as its name says, in the order the observers were added.
    #[test]
    fn each_event_reaches_only_the_observers_that_want_it() {
        let region = Region::open(&RegionOptions::new(Medium::Sim, 1 << 16)).unwrap();
        let all = Seen::new(
            Events::LOAD
                | Events::STORE
                | Events::STORED
                | Events::FLUSH
                | Events::FENCE
                | Events::FENCED,
        );
        let flushes = Seen::new(Events::FLUSH);
        assert!(region.add_observer(all.clone()));
        assert!(region.add_observer(flushes.clone()));
        region.write(100, &[1; 3]);
        region.write_u64(64, 9);
        let _ = region.read(100, 3);
        let _ = region.read_u64(64);
        region.persist(60, 10);
        assert_eq!(
            all.take(),
            [
                "store 100+3",
                "stored 100+3",
                "store 64+8",
                "stored 64+8",
                "load 100+3",
                "load 64+8",
                "flush 60+10 lines 0+2",
                "fence",
                "fenced",
            ]
        );
        assert_eq!(flushes.take(), ["flush 60+10 lines 0+2"]);
        // The sim medium still saw the stores, the flush and the fence.
        let image = region.crash_image(crate::CrashPolicy::Persisted, 0).unwrap();
        assert_eq!(&image[64..72], 9u64.to_le_bytes());
        assert_eq!(&image[100..103], [1; 3]);
    }

    /// Guards `on_store` running before the bytes land and `on_stored` after: a redo capture
    /// needs the first, the dirty-line tracker the second (a collector must not copy old bytes).
    #[test]
    fn on_store_sees_the_old_bytes_and_on_stored_the_new() {
        struct Peek(Region, parking_lot::Mutex<Vec<u64>>);
        impl StoreObserver for Peek {
            fn events(&self) -> Events {
                Events::STORE | Events::STORED
            }
            fn on_store(&self, offset: u64, _bytes: &[u8]) {
                self.1.lock().push(self.0.read_u64(offset));
            }
            fn on_stored(&self, offset: u64, _len: u64) {
                self.1.lock().push(self.0.read_u64(offset));
            }
        }
        let region = Region::open(&RegionOptions::new(Medium::Dram, 4096)).unwrap();
        region.write_u64(8, 1);
        let peek = Arc::new(Peek(region.clone(), parking_lot::Mutex::new(Vec::new())));
        assert!(region.add_observer(peek.clone()));
        region.write_u64(8, 2);
        region.write(8, &3u64.to_le_bytes());
        assert_eq!(*peek.1.lock(), [1, 2, 2, 3]);
    }

    /// Guards the list's bound: a full list refuses another observer instead of growing, and
    /// `set_observer` still allows exactly one.
    #[test]
    fn a_full_observer_list_refuses_more_and_set_observer_allows_one() {
        let options = RegionOptions {
            wear: true,
            trace: true,
            track_dirty: true,
            ..RegionOptions::new(Medium::Dram, 4096)
        };
        let region = Region::open(&options).unwrap();
        assert!(region.set_observer(Seen::new(Events::STORE)));
        assert!(!region.set_observer(Seen::new(Events::STORE)), "one per region");
        let mut added = 0;
        while region.add_observer(Seen::new(Events::FENCE)) {
            added += 1;
            assert!(added <= MAX_OBSERVERS, "the list never grows past its bound");
        }
        // Wear, trace and dirty tracking hold three slots, set_observer's one a fourth.
        assert_eq!(added, MAX_OBSERVERS - 4);
        region.write_u64(0, 1);
        assert_eq!(region.dirty().unwrap().lines(), [0]);
    }
}

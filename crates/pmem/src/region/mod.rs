//! `Region`: a byte range of persistent memory addressed by `u64` offsets, on one medium
//! (`docs/design.md` §2; persist primitives after Pelley et al., VLDB 2014, §3.2).
//!
//! Split by job (the files of `region/`):
//! * `options.rs`: the medium, the sync mode and [`RegionOptions`] with their defaults and checks;
//! * `mapping.rs`: mapping each medium, the region file's lock, and growth under a fixed mapping;
//! * `access.rs`: the access path — loads, stores, flushes, fences — and what a flush does on
//!   each medium;
//! * `observe.rs`: the store-event seam, [`StoreObserver`], and its implementations (wear map,
//!   dirty-line tracker, tracer, timing model);
//! * `image.rs`: crash images, staging copies, saved images;
//! * `probe.rs`: file-system probes (free space, kind, DAX).
//!
//! This file holds the region itself: what an open assembles and what a caller may ask of it.
//! Invariant: every persistent store goes through [`Region::write`] / [`Region::write_u64`], so
//! the statistics, the observers and the crash simulator see all of them.

mod access;
mod image;
mod mapping;
mod observe;
mod options;
mod probe;

pub use access::StoreGroup;
pub use image::{sparse_clone, IMAGE_BLOCK};
pub use mapping::{classify_dax_map_error, map_flags};
pub use observe::{Events, StoreObserver, MAX_OBSERVERS};
pub use options::{Medium, RegionOptions, SyncMode};
pub use probe::{filesystem_name, free_bytes, is_dax};

use crate::dirty::DirtyLines;
use crate::flush::FlushKind;
use crate::lock::FileLock;
use crate::sim::{CrashPolicy, Sim, View};
use crate::stats::{Counter, StatCounters, Stats, WearMap};
use crate::timing::{TimingModel, TimingOptions};
use crate::trace::{TraceEvent, Tracer};
use access::WriteBack;
use mapping::{Grower, Mapping, Opened};
use observe::{ChargedReads, Observers, TimingCharge};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

struct Inner {
    map: Mapping,
    medium: Medium,
    flush_kind: FlushKind,
    eadr: bool,
    /// What a flush does here (the medium, `eadr`, the sync mode and the flush instruction).
    write_back: WriteBack,
    path: Option<PathBuf>,
    stats: StatCounters,
    /// Everything that sees the access path's events; the fields below are the built-in
    /// observers' own handles, for what is asked of them directly (counts, traces, delays).
    observers: Observers,
    /// The `sim` medium's persistence domain (not an observer: see `observe.rs`).
    sim: Option<Sim>,
    timing: Option<Arc<TimingCharge>>,
    /// Another region's CPU-cache read model charges this one's reads
    /// ([`Region::charge_reads_to`]).
    charged_reads: OnceLock<Arc<ChargedReads>>,
    /// An `fdatasync` of this region's file is charged by the timing model (see
    /// [`Region::fs_sync_modelled`]).
    fs_sync_modelled: bool,
    wear: Option<Arc<WearMap>>,
    tracer: Option<Arc<Tracer>>,
    dirty: Option<Arc<DirtyLines>>,
    /// This open produced brand-new zeroed contents (see [`Region::created`]).
    created: bool,
    /// How a growable region extends its file (`None`: the mapping is all backed).
    grower: Option<Grower>,
    file: Option<std::fs::File>,
    /// The exclusive lock on the region file (file media with a path). Declared last so that it
    /// is released after `map` is unmapped: no other opener maps the file while this one does.
    _lock: Option<FileLock>,
}

/// A persistent-memory region. Cheap to clone (shared).
///
/// **Contract**: every store goes through [`Region::write`] / [`Region::write_u64`]; durability
/// and ordering only through [`Region::flush`], [`Region::fence`] and [`Region::persist`]. Eight
/// aligned bytes persist atomically, nothing larger does. Concurrent writers of the same bytes
/// must be serialised by the caller (page latches); reads may borrow slices.
#[derive(Clone)]
pub struct Region {
    inner: Arc<Inner>,
}

impl Region {
    /// The region around a mapping: its statistics, the observers its options ask for (added
    /// in the order tracer, wear map, dirty lines, timing model) and, with `sim_image`, the
    /// crash simulator over that persisted image.
    fn assemble(
        options: &RegionOptions,
        opened: Opened,
        flush_kind: FlushKind,
        sim_image: Option<Vec<u8>>,
    ) -> Region {
        let Opened { map, path, lock, created, grower, file } = opened;
        let len = map.len;
        let sim = sim_image.map(|img| Sim::new(img, options.eadr));
        let write_back = WriteBack::new(sim.is_some(), options.eadr, options.sync, flush_kind);
        let medium_bits = if sim.is_some() { observe::Events::SIM_MEDIUM } else { Events::NONE };
        let observers = Observers::new(medium_bits);
        let tracer = options.trace.then(|| Arc::new(Tracer::default()));
        let wear = options.wear.then(|| Arc::new(WearMap::new(len, options.wear_granularity)));
        let dirty = options.track_dirty.then(|| Arc::new(DirtyLines::new(len)));
        let (nvm_timed, fs_timed) = (!options.timing.is_off(), !options.timing.fs_is_off());
        let timing = (nvm_timed || fs_timed)
            .then(|| Arc::new(TimingCharge::new(TimingModel::new(options.timing), len)));
        let fs_sync_modelled = timing.is_some() && sync_is_free(options.medium, path.as_deref());
        // A model of the file-system sync alone watches no store, flush or fence: the NVM path
        // of a region stays exactly as fast as with no model at all.
        let observed_timing = timing.clone().filter(|_| nvm_timed);
        let built_in: [Option<Arc<dyn StoreObserver>>; 4] = [
            tracer.clone().map(|t| t as Arc<dyn StoreObserver>),
            wear.clone().map(|w| w as Arc<dyn StoreObserver>),
            dirty.clone().map(|d| d as Arc<dyn StoreObserver>),
            observed_timing.map(|t| t as Arc<dyn StoreObserver>),
        ];
        for observer in built_in.into_iter().flatten() {
            let added = observers.add(observer);
            assert!(added, "{MAX_OBSERVERS} observer slots hold the 4 built-in observers");
        }
        Region {
            inner: Arc::new(Inner {
                map,
                medium: options.medium,
                flush_kind,
                eadr: options.eadr,
                write_back,
                path,
                stats: StatCounters::new(),
                observers,
                sim,
                timing,
                charged_reads: OnceLock::new(),
                fs_sync_modelled,
                wear,
                tracer,
                dirty,
                created,
                grower,
                file,
                _lock: lock,
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.inner.map.len == 0
    }

    pub fn medium(&self) -> Medium {
        self.inner.medium
    }

    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Whether this open produced brand-new zeroed contents: `dram`, a new `sim` region, the
    /// private `shm` file, or a region file that did not exist or was empty before this open.
    /// False for a file with contents (even all-zero ones) and for [`Region::from_image`]. An
    /// engine may format a created region without scanning it first.
    pub fn created(&self) -> bool {
        self.inner.created
    }

    pub fn flush_kind(&self) -> FlushKind {
        self.inner.flush_kind
    }

    pub fn eadr(&self) -> bool {
        self.inner.eadr
    }

    fn whole(&self) -> &[u8] {
        // SAFETY: the mapping is live for as long as `self` and `len` bytes long.
        unsafe { std::slice::from_raw_parts(self.inner.map.base, self.inner.map.len as usize) }
    }

    /// The mapping's address, for the raw-instruction baselines in [`crate::calib`].
    pub(crate) fn base_ptr(&self) -> *mut u8 {
        self.inner.map.base
    }

    /// The mapping as the crash simulator reads it (under its lock).
    fn view(&self) -> View {
        // SAFETY: the mapping is live for as long as `self`; on a `sim` region every store goes
        // through `Sim::store` (the access path's observed store).
        unsafe { View::new(self.inner.map.base, self.inner.map.len as usize) }
    }

    /// Whether this region records a trace.
    pub fn tracing(&self) -> bool {
        self.inner.tracer.is_some()
    }

    pub fn stats(&self) -> Stats {
        let mut stats = self.inner.stats.snapshot();
        if let Some(timing) = &self.inner.timing {
            timing.add_to(&mut stats);
        }
        stats
    }

    /// Turns the timing model's delays off (loading, checking) or back on. Statistics are kept
    /// either way.
    pub fn set_timing_enabled(&self, on: bool) {
        if let Some(timing) = &self.inner.timing {
            timing.set_enabled(on);
        }
    }

    /// Charges this region's reads to `device`'s CPU-cache read model ([`crate::cpucache`]), as
    /// reads of memory of the same device at addresses of their own, through the one simulated
    /// cache: N-Store's testbed makes all memory NVM (Arulraj et al. SIGMOD 2015 §2.2), so a
    /// traditional engine's buffer pool (`wal`'s `pool_reads=nvm`) pays the read latency its
    /// NVM-aware counterpart pays. The charges, and the model's on/off switch, are `device`'s
    /// ([`Region::stats`], [`Region::set_timing_enabled`]); this region's stores install their
    /// lines uncharged, its flushes and fences stay free. False, and nothing changes, when
    /// `device` has no CPU cache or this region has a timing model of its own or already
    /// charges its reads elsewhere. Call it before an engine opens on this region (a page
    /// store asks [`Region::cpu_cache_on`] once).
    pub fn charge_reads_to(&self, device: &Region) -> bool {
        let Some(model) = device.inner.timing.as_ref().filter(|t| t.cpu_cache_on()) else {
            return false;
        };
        if self.inner.timing.is_some() || self.inner.charged_reads.get().is_some() {
            return false;
        }
        let base = model.reserve_addresses(self.inner.map.len);
        let charged = Arc::new(ChargedReads { model: model.clone(), base });
        if self.inner.charged_reads.set(charged.clone()).is_err() {
            return false;
        }
        self.inner.observers.add(charged)
    }

    /// Whether an `fdatasync` of this region's file is charged by the timing model
    /// ([`Region::charge_fs_sync`]): a model is on and the file lives on tmpfs or ramfs, where
    /// the sync itself is free. On a real disk the real `fdatasync` is the cost, and charging
    /// the model on top would count the sync twice (issue 36).
    pub fn fs_sync_modelled(&self) -> bool {
        self.inner.fs_sync_modelled
    }

    /// Charges one `fdatasync` of this region's file after `bytes` were written through it
    /// since the previous one (`pmem::timing` module doc); nothing where
    /// [`Region::fs_sync_modelled`] is false.
    pub fn charge_fs_sync(&self, bytes: u64) {
        if let (true, Some(timing)) = (self.inner.fs_sync_modelled, &self.inner.timing) {
            timing.charge_fs_sync(bytes);
        }
    }

    /// Counts a `pwrite` of `bytes` to this region's file as a store (the `stores` and
    /// `bytes_written` statistics): the bytes reach the same device as [`Region::write`]'s,
    /// and the write counts must compare across the two paths (N-Store §5.3).
    pub fn count_file_write(&self, bytes: u64) {
        self.inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, bytes)));
    }

    pub fn timing(&self) -> Option<&TimingOptions> {
        self.inner.timing.as_ref().map(|t| &t.model.options)
    }

    /// Per-line flush counts, if the region was opened with `wear`.
    pub fn wear(&self) -> Option<Vec<u32>> {
        self.inner.wear.as_deref().map(WearMap::counts)
    }

    /// The wear map itself (byte counts, granularity, reset), if the region keeps one.
    pub fn wear_map(&self) -> Option<&WearMap> {
        self.inner.wear.as_deref()
    }

    /// Takes the recorded trace and the count of events dropped over the limit.
    pub fn take_trace(&self) -> Option<(Vec<TraceEvent>, u64)> {
        self.inner.tracer.as_deref().map(Tracer::take)
    }

    /// Installs the observer of every later store (once per region): how a write-ahead log
    /// captures the stores made to a volatile buffer-pool copy. Returns false if one is set
    /// (or the region's [`MAX_OBSERVERS`] are taken).
    pub fn set_observer(&self, observer: Arc<dyn StoreObserver>) -> bool {
        self.inner.observers.set_external(observer)
    }

    /// Adds an observer of the events it asks for ([`StoreObserver::events`]) from now on,
    /// after those already there. Returns false when the region holds [`MAX_OBSERVERS`].
    pub fn add_observer(&self, observer: Arc<dyn StoreObserver>) -> bool {
        self.inner.observers.add(observer)
    }

    /// The lines written since the set was last cleared (regions opened with `track_dirty`).
    pub fn dirty(&self) -> Option<&DirtyLines> {
        self.inner.dirty.as_deref()
    }

    /// The crash simulator, on the `sim` medium.
    pub fn sim(&self) -> Option<&Sim> {
        self.inner.sim.as_ref()
    }

    /// What a power failure now would leave (sim medium only).
    pub fn crash_image(&self, policy: CrashPolicy, seed: u64) -> Option<Vec<u8>> {
        self.inner.sim.as_ref().map(|s| s.crash_image(self.view(), policy, seed))
    }

    /// A copy of the current contents (as a crash image with durable caches would be).
    pub fn snapshot(&self) -> Vec<u8> {
        self.whole()[..self.backed_len() as usize].to_vec()
    }
}

/// A fresh scratch directory in `/dev/shm` for a test named `name`.
#[cfg(test)]
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!("/dev/shm/nvmdb-region-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether a sync of a region file costs nothing real: its file system is tmpfs or ramfs (an
/// `shm` region without a path is on tmpfs by definition). A probe that fails counts as a real
/// file system: better to charge nothing than to charge a real sync twice.
fn sync_is_free(medium: Medium, path: Option<&Path>) -> bool {
    match (medium, path) {
        (Medium::Shm | Medium::File, Some(path)) => {
            matches!(probe::filesystem_name(path).as_deref(), Ok("tmpfs" | "ramfs"))
        }
        (Medium::Shm, None) => true,
        _ => false,
    }
}

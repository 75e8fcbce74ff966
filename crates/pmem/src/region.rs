//! `Region`: a byte range of persistent memory addressed by `u64` offsets, on one medium.

use crate::dirty::DirtyLines;
use crate::error::{PmemError, Result};
use crate::flush::{flush_line, line_span, select_flush, store_fence, CpuFlushSupport, FlushKind};
use crate::flush::{LineSpan, CACHE_LINE};
use crate::lock::FileLock;
use crate::sim::{CrashPolicy, Sim, View};
use crate::stats::{Counter, StatCounters, Stats, WearGranularity, WearMap};
use crate::timing::{TimingModel, TimingOptions};
use crate::trace::{TraceEvent, TraceKind, Tracer};
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering};
use std::sync::Arc;

/// Where a region lives. See `docs/design.md` §2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Medium {
    /// Anonymous memory: nothing durable; upper-bound runs.
    Dram,
    /// `mmap(MAP_SHARED)` of a file on tmpfs (`/dev/shm`); survives a process crash.
    Shm,
    /// `mmap(MAP_SHARED)` of a file anywhere; with `SyncMode::Msync` durable on a block device.
    File,
    /// `mmap(MAP_SHARED_VALIDATE | MAP_SYNC)` on a DAX file system: real persistent memory.
    Dax,
    /// Anonymous memory plus a shadow persisted image: the crash simulator.
    Sim,
}

impl Medium {
    pub const ALL: [Medium; 5] =
        [Medium::Dram, Medium::Shm, Medium::File, Medium::Dax, Medium::Sim];

    pub fn name(self) -> &'static str {
        match self {
            Medium::Dram => "dram",
            Medium::Shm => "shm",
            Medium::File => "file",
            Medium::Dax => "dax",
            Medium::Sim => "sim",
        }
    }

    pub fn parse(s: &str) -> Option<Medium> {
        Medium::ALL.into_iter().find(|m| m.name() == s)
    }

    /// What a persist (flush + fence) does on this medium, in a few words.
    pub fn persist_action(self) -> &'static str {
        match self {
            Medium::Dram => "nothing durable (fence only)",
            Medium::Shm => "cache-line flush + fence",
            Medium::File => "flush + fence; msync of the pages with --sync msync",
            Medium::Dax => "CLWB/CLFLUSHOPT/CLFLUSH + SFENCE to the persistence domain",
            Medium::Sim => "flush + fence, recorded in a shadow persisted image",
        }
    }

    /// Whether a persist on this medium survives a process crash / a power failure.
    pub fn survives(self) -> (&'static str, &'static str) {
        match self {
            Medium::Dram => ("no", "no"),
            Medium::Shm => ("yes", "no"),
            Medium::File => ("yes", "with --sync msync"),
            Medium::Dax => ("yes", "yes"),
            Medium::Sim => ("simulated", "simulated"),
        }
    }
}

impl std::str::FromStr for Medium {
    type Err = PmemError;

    fn from_str(s: &str) -> Result<Medium> {
        Medium::parse(&s.to_ascii_lowercase()).ok_or_else(|| {
            PmemError::InvalidOption(format!(
                "unknown medium `{s}` (expected dram, shm, file, dax or sim)"
            ))
        })
    }
}

impl std::fmt::Display for Medium {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How `flush` makes data durable on a file medium.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMode {
    /// Cache-line flush instructions only (tmpfs, DAX).
    #[default]
    Cache,
    /// `msync(MS_SYNC)` of the flushed pages: durable on a block device.
    Msync,
}

/// Everything needed to open a region. Defaults live here (DESIGN: one place).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionOptions {
    pub medium: Medium,
    /// File path for `shm`, `file` and `dax`. `shm` without a path uses a private file in
    /// `/dev/shm`, unlinked once mapped (nothing to reopen, nothing left behind).
    pub path: Option<PathBuf>,
    /// Size to create or grow to. 0 opens an existing file at its size.
    pub size_bytes: u64,
    /// Create the file (or grow it to `size_bytes`) if needed.
    pub create: bool,
    pub sync: SyncMode,
    /// Flush instruction; `None` picks the best the CPU has (`dram` defaults to no flush).
    pub flush: Option<FlushKind>,
    /// Durable processor caches (eADR): flushes become no-ops, fences stay.
    pub eadr: bool,
    pub timing: TimingOptions,
    /// Keep per-line write counts (wear map).
    pub wear: bool,
    /// What the wear map counts (with `wear`): lines, or lines and bytes.
    pub wear_granularity: WearGranularity,
    /// Record a persist trace.
    pub trace: bool,
    /// Track written lines in a [`DirtyLines`] set (the staging copy of NVRAM Group Commit).
    pub track_dirty: bool,
    /// Largest size the region may grow to (file media): the mapping is this long from the
    /// start, the file only `size_bytes`, and [`Region::ensure_backed`] extends the file as the
    /// engine allocates further. 0: the region stays at its size.
    pub max_size_bytes: u64,
    /// Map an existing file privately (copy-on-write): stores never reach the file. For
    /// read-only inspection (`nvmdb check`): recovery can run without changing the region.
    pub private: bool,
}

impl Default for RegionOptions {
    fn default() -> Self {
        RegionOptions {
            medium: Medium::Dram,
            path: None,
            size_bytes: 64 << 20,
            create: true,
            sync: SyncMode::Cache,
            flush: None,
            eadr: false,
            timing: TimingOptions::default(),
            wear: false,
            wear_granularity: WearGranularity::Line,
            trace: false,
            track_dirty: false,
            max_size_bytes: 0,
            private: false,
        }
    }
}

impl RegionOptions {
    pub fn new(medium: Medium, size_bytes: u64) -> RegionOptions {
        RegionOptions { medium, size_bytes, ..Default::default() }
    }

    /// Rejects combinations that cannot mean anything, before any file is touched.
    pub fn validate(&self) -> Result<()> {
        self.timing.validate()?;
        if self.max_size_bytes != 0 {
            if !matches!(self.medium, Medium::Shm | Medium::File | Medium::Dax) {
                return Err(PmemError::InvalidOption(format!(
                    "a region can grow only on a file medium (shm, file, dax), not `{}`",
                    self.medium.name()
                )));
            }
            if self.max_size_bytes < self.size_bytes && !self.private {
                return Err(PmemError::InvalidOption(format!(
                    "--max-size ({}) is smaller than --size ({})",
                    self.max_size_bytes, self.size_bytes
                )));
            }
        }
        if self.private && (self.path.is_none() || self.create || self.size_bytes != 0) {
            return Err(PmemError::InvalidOption(
                "a private mapping opens an existing file at its size (path set, create off, \
                 size 0)"
                    .into(),
            ));
        }
        if self.sync == SyncMode::Msync {
            if matches!(self.medium, Medium::Dram | Medium::Sim) {
                return Err(PmemError::InvalidOption(format!(
                    "--sync msync needs a file-backed medium (file, shm or dax), not `{}`",
                    self.medium.name()
                )));
            }
            if self.eadr {
                return Err(PmemError::InvalidOption(
                    "--eadr and --sync msync contradict each other (durable CPU caches need no \
                     msync; a block device has no durable CPU cache)"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    pub fn with_path(mut self, path: impl Into<PathBuf>) -> RegionOptions {
        self.path = Some(path.into());
        self
    }
}

struct Mapping {
    base: *mut u8,
    len: u64,
}

// SAFETY: the mapping is plain shared memory; all mutation goes through `Region` methods and the
// callers' latches, and the pointer itself never changes after creation.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` come from a successful mmap and nothing borrows them any more
        // (every borrow is tied to a `Region` reference, and this is the last one).
        unsafe { libc::munmap(self.base.cast(), self.len as usize) };
    }
}

struct Inner {
    map: Mapping,
    medium: Medium,
    flush_kind: FlushKind,
    sync: SyncMode,
    eadr: bool,
    path: Option<PathBuf>,
    timing: Option<TimingModel>,
    /// The timing model charges delays only while this is set (loaders and checkers turn it
    /// off: the papers measure only the run).
    timing_on: std::sync::atomic::AtomicBool,
    stats: StatCounters,
    wear: Option<WearMap>,
    tracer: Option<Tracer>,
    sim: Option<Sim>,
    dirty: Option<DirtyLines>,
    observer: std::sync::OnceLock<Arc<dyn StoreObserver>>,
    /// This open produced brand-new zeroed contents (see [`Region::created`]).
    created: bool,
    /// How a growable region extends its file (`None`: the mapping is all backed).
    grower: Option<Grower>,
    file: Option<std::fs::File>,
    /// The exclusive lock on the region file (file media with a path). Declared last so that it
    /// is released after `map` is unmapped: no other opener maps the file while this one does.
    _lock: Option<FileLock>,
}

/// Sees every store to a region, in the storing thread, just before the bytes are stored and
/// inside whatever critical section the writer holds: stores to the same bytes are observed in
/// the order they are made.
pub trait StoreObserver: Send + Sync {
    fn on_store(&self, offset: u64, bytes: &[u8]);

    /// A fence by the calling thread: everything it stored before is ordered before what it
    /// does next (a commit's last fence comes before its locks are released).
    fn on_fence(&self) {}
}

/// What opening a medium produced, before the region's bookkeeping is added.
struct Opened {
    map: Mapping,
    path: Option<PathBuf>,
    lock: Option<FileLock>,
    created: bool,
    grower: Option<Grower>,
    /// The file behind a file-backed region (for [`Region::private_view`]).
    file: Option<std::fs::File>,
}

/// The file behind a growable region: the mapping covers the maximum size, the file only
/// `backed` bytes; touching the mapping beyond `backed` would fault (SIGBUS), so nothing is
/// placed there before [`Region::ensure_backed`] extends the file.
struct Grower {
    file: std::fs::File,
    /// A private (copy-on-write) mapping never extends its file.
    fixed: bool,
    backed: StdAtomicU64,
    lock: parking_lot::Mutex<()>,
}

/// Smallest step a growing region's file is extended by.
const GROW_STEP_BYTES: u64 = 64 << 20;

impl Grower {
    fn new(
        file: &std::fs::File,
        backed: u64,
        map_len: u64,
        fixed: bool,
    ) -> std::io::Result<Option<Grower>> {
        if map_len <= backed {
            return Ok(None);
        }
        let file = file.try_clone()?;
        Ok(Some(Grower {
            file,
            fixed,
            backed: StdAtomicU64::new(backed),
            lock: parking_lot::Mutex::new(()),
        }))
    }
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

static PRIVATE_SHM_SEQ: StdAtomicU64 = StdAtomicU64::new(0);

fn io_err(path: &Path, cause: std::io::Error) -> PmemError {
    PmemError::Io { path: path.to_path_buf(), cause }
}

/// `mmap` flags for a medium; `dax` asks for synchronous page faults so that flushed data is
/// durable without `msync`.
pub fn map_flags(medium: Medium) -> libc::c_int {
    match medium {
        Medium::Dram | Medium::Sim => libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        Medium::Shm | Medium::File => libc::MAP_SHARED,
        Medium::Dax => libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
    }
}

/// Interprets a failed `MAP_SYNC` mapping: EOPNOTSUPP (and EINVAL on kernels that predate
/// `MAP_SHARED_VALIDATE`) mean the file system cannot give DAX semantics.
pub fn classify_dax_map_error(path: &Path, errno: i32) -> PmemError {
    match errno {
        libc::EOPNOTSUPP | libc::EINVAL => PmemError::NotDax {
            path: path.to_path_buf(),
            reason: if errno == libc::EINVAL {
                "kernel does not know MAP_SHARED_VALIDATE".into()
            } else {
                "file system does not support MAP_SYNC".into()
            },
        },
        _ => PmemError::Map { size_bytes: 0, cause: std::io::Error::from_raw_os_error(errno) },
    }
}

fn mmap(len: u64, flags: libc::c_int, fd: libc::c_int) -> std::result::Result<*mut u8, i32> {
    // SAFETY: a fresh mapping at a kernel-chosen address; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(p.cast())
    }
}

/// Opens (or, with `create`, creates) a region file for reading and writing; also says whether
/// this call created it. Creation is exclusive, so that "created here" is exact even when two
/// openers race.
fn open_region_file(path: &Path, create: bool) -> Result<(std::fs::File, bool)> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if create {
        match options.clone().create_new(true).open(path) {
            Ok(file) => return Ok((file, true)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    let file = options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => PmemError::Missing { path: path.to_path_buf() },
        _ => io_err(path, e),
    })?;
    Ok((file, false))
}

/// Reserves the file's blocks now, so that a full file system is an error at open rather than a
/// SIGBUS on some later store into the mapping. File systems that cannot preallocate are left as
/// they are.
fn preallocate(file: &std::fs::File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    // SAFETY: a plain syscall on an open descriptor; it reports errors through its return value.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len as libc::off_t) };
    match rc {
        0 | libc::EOPNOTSUPP | libc::EINVAL => Ok(()),
        errno => Err(std::io::Error::from_raw_os_error(errno)),
    }
}

impl Region {
    /// Opens (or creates) a region.
    pub fn open(options: &RegionOptions) -> Result<Region> {
        Self::open_with_cpu(options, CpuFlushSupport::detect())
    }

    /// [`Region::open`] as if the CPU offered only the flush instructions in `cpu`: for tests,
    /// and to measure an older CPU's instruction on a newer one.
    pub fn open_with_cpu(options: &RegionOptions, cpu: CpuFlushSupport) -> Result<Region> {
        options.validate()?;
        // Checked before any file is created or mapped, so a bad request leaves nothing behind.
        let flush_kind = Self::flush_kind_for(options, cpu)?;
        let opened = match options.medium {
            Medium::Dram | Medium::Sim => Opened {
                map: Self::map_anonymous(options.size_bytes)?,
                path: None,
                lock: None,
                created: true,
                grower: None,
                file: None,
            },
            Medium::Shm | Medium::File | Medium::Dax => Self::map_file(options)?,
        };
        let initial_image = if options.medium == Medium::Sim {
            // The mapping is freshly created and zeroed: so is its persisted image (allocated
            // zeroed, so untouched pages cost no memory).
            Some(vec![0u8; opened.map.len as usize])
        } else {
            None
        };
        Ok(Self::finish(options, opened, flush_kind, initial_image))
    }

    /// Opens a `sim` region whose contents (and persisted image) are `image`: how an engine is
    /// opened on a crash image. The options of the run that made the image may be passed as
    /// they are: medium, size, path and sync mode are replaced by the image's.
    pub fn from_image(image: &[u8], options: &RegionOptions) -> Result<Region> {
        if image.is_empty() {
            return Err(PmemError::InvalidOption("empty crash image".into()));
        }
        let options = RegionOptions {
            medium: Medium::Sim,
            size_bytes: image.len() as u64,
            path: None,
            sync: SyncMode::Cache,
            ..options.clone()
        };
        options.validate()?;
        let flush_kind = Self::flush_kind_for(&options, CpuFlushSupport::detect())?;
        let map = Self::map_anonymous(image.len() as u64)?;
        // SAFETY: the mapping is exactly `image.len()` bytes and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, image.len()) };
        // The fresh mapping and the zeroed shadow read zero already: a crash campaign's images
        // are mostly never-written pages, and copying those was most of an iteration's time.
        copy_nonzero_pages(dest, image);
        let opened =
            Opened { map, path: None, lock: None, created: false, grower: None, file: None };
        Ok(Self::finish(&options, opened, flush_kind, Some(sparse_clone(image))))
    }

    /// A `dram` region holding a copy of `contents` (not marked dirty, not [`Region::created`]):
    /// the volatile staging copy of a persistent region (NVRAM Group Commit's "replicate to
    /// DRAM"). Only the size, statistics and dirty-tracking options apply.
    pub fn dram_copy(contents: &[u8], options: &RegionOptions) -> Result<Region> {
        if contents.is_empty() {
            return Err(PmemError::InvalidOption("empty staging copy".into()));
        }
        let options = dram_options(options, contents.len() as u64);
        options.validate()?;
        let map = Self::map_anonymous(contents.len() as u64)?;
        // SAFETY: the mapping is exactly `contents.len()` bytes and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, contents.len()) };
        // Zero pages are skipped: the fresh mapping reads zero there without a page of memory
        // (a mostly empty 4 GiB region copies in a fraction of the time and memory).
        copy_nonzero_pages(dest, contents);
        let opened =
            Opened { map, path: None, lock: None, created: false, grower: None, file: None };
        Ok(Self::finish(&options, opened, FlushKind::None, None))
    }

    /// A `dram` region whose contents start as a copy of the file at `path`: a region file, or
    /// an image [`Region::save_image`] wrote. A loaded database is restored in the time a copy
    /// takes instead of the time a load takes (`nvmdb bench --image`). The file is only read,
    /// never locked or changed. Its holes (sparse zero ranges, found with `SEEK_DATA`) are not
    /// copied: the anonymous mapping is zero there already, so a mostly empty region costs its
    /// data, not its size. The size is the file's; medium, path, sync, flush and growth in
    /// `options` are replaced (`dram`, none, cache, none, none); timing, wear, trace and dirty
    /// tracking apply.
    pub fn dram_from_file(path: &Path, options: &RegionOptions) -> Result<Region> {
        let io = |cause| PmemError::Io { path: path.to_path_buf(), cause };
        let file = std::fs::File::open(path).map_err(|cause| match cause.kind() {
            std::io::ErrorKind::NotFound => PmemError::Missing { path: path.to_path_buf() },
            _ => io(cause),
        })?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            return Err(PmemError::EmptyFile { path: path.to_path_buf() });
        }
        let options = dram_options(options, len);
        options.validate()?;
        let map = Self::map_anonymous(len)?;
        // SAFETY: the mapping is exactly `len` bytes, freshly created and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, len as usize) };
        for (start, end) in data_extents(&file, len).map_err(io)? {
            let slice = &mut dest[start as usize..end as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, slice, start).map_err(io)?;
        }
        let opened =
            Opened { map, path: None, lock: None, created: false, grower: None, file: None };
        Ok(Self::finish(&options, opened, FlushKind::None, None))
    }

    /// Writes the region's contents (up to [`Region::backed_len`]) to `path` as a region file
    /// [`Region::dram_from_file`] and the file media can open: written to `path.tmp` and renamed,
    /// so a reader never sees half an image. Blocks of [`IMAGE_BLOCK`] bytes that are all zero
    /// become holes. Call it on a quiescent region (after a clean shutdown): it copies what is
    /// there, it does not persist anything. Returns the bytes of data written.
    pub fn save_image(&self, path: &Path) -> Result<u64> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let io = |cause| PmemError::Io { path: tmp.clone(), cause };
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let contents = &self.whole()[..self.backed_len() as usize];
        let mut written = 0u64;
        for (i, block) in contents.chunks(IMAGE_BLOCK).enumerate() {
            if is_zero(block) {
                continue;
            }
            let at = (i * IMAGE_BLOCK) as u64;
            std::os::unix::fs::FileExt::write_all_at(&file, block, at).map_err(io)?;
            written += block.len() as u64;
        }
        file.set_len(contents.len() as u64).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, path)
            .map_err(|cause| PmemError::Io { path: path.to_path_buf(), cause })?;
        Ok(written)
    }

    /// A private copy-on-write view of `[offset, offset + len)` of this region's file, as a
    /// `dram` region: its pages read the file until first written, then belong to the view
    /// alone. A lazily loaded buffer pool / staging copy in O(1), where [`Region::dram_copy`]
    /// copies everything. `None` when the region has no file (dram, sim) or `offset` is not
    /// page-aligned.
    pub fn private_view(
        &self,
        offset: u64,
        len: u64,
        options: &RegionOptions,
    ) -> Option<Result<Region>> {
        let file = self.inner.file.as_ref()?;
        if len == 0 || !offset.is_multiple_of(4096) || offset + len > self.backed_len() {
            return None;
        }
        let options = dram_options(options, len);
        if let Err(e) = options.validate() {
            return Some(Err(e));
        }
        // SAFETY: a fresh private mapping of an open file at a page-aligned offset inside it;
        // the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_NORESERVE,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            let cause = std::io::Error::last_os_error();
            return Some(Err(PmemError::Map { size_bytes: len, cause }));
        }
        let map = Mapping { base: p.cast(), len };
        let opened =
            Opened { map, path: None, lock: None, created: false, grower: None, file: None };
        Some(Ok(Self::finish(&options, opened, FlushKind::None, None)))
    }

    fn flush_kind_for(options: &RegionOptions, cpu: CpuFlushSupport) -> Result<FlushKind> {
        match (options.medium, options.flush) {
            (Medium::Dram, None) => Ok(FlushKind::None),
            (_, requested) => select_flush(cpu, requested),
        }
    }

    fn finish(
        options: &RegionOptions,
        opened: Opened,
        flush_kind: FlushKind,
        sim_image: Option<Vec<u8>>,
    ) -> Region {
        let Opened { map, path, lock, created, grower, file } = opened;
        let len = map.len;
        Region {
            inner: Arc::new(Inner {
                map,
                medium: options.medium,
                flush_kind,
                sync: options.sync,
                eadr: options.eadr,
                path,
                created,
                timing: (!options.timing.is_off()).then(|| TimingModel::new(options.timing)),
                timing_on: std::sync::atomic::AtomicBool::new(true),
                stats: StatCounters::new(),
                wear: options.wear.then(|| WearMap::new(len, options.wear_granularity)),
                tracer: options.trace.then(Tracer::default),
                sim: sim_image.map(|img| Sim::new(img, options.eadr)),
                dirty: options.track_dirty.then(|| DirtyLines::new(len)),
                observer: std::sync::OnceLock::new(),
                grower,
                file,
                _lock: lock,
            }),
        }
    }

    fn map_anonymous(size_bytes: u64) -> Result<Mapping> {
        if size_bytes == 0 {
            return Err(PmemError::InvalidOption("region size must be > 0".into()));
        }
        let base = mmap(size_bytes, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1).map_err(|e| {
            PmemError::Map { size_bytes, cause: std::io::Error::from_raw_os_error(e) }
        })?;
        Ok(Mapping { base, len: size_bytes })
    }

    fn map_file(options: &RegionOptions) -> Result<Opened> {
        let Some(path) = options.path.clone() else {
            return match options.medium {
                Medium::Shm => Self::map_private_shm(options),
                m => Err(PmemError::NeedsPath { medium: m.name() }),
            };
        };
        if !path.exists() && (!options.create || options.size_bytes == 0) {
            return Err(PmemError::Missing { path });
        }
        let (file, made_here) = open_region_file(&path, options.create)?;
        // Locked before the file is sized, grown or mapped: a file another open holds is left
        // exactly as it is, even one this open created (a racing opener holds it now).
        let lock = match FileLock::lock(file, &path) {
            Ok(lock) => lock,
            Err(e @ PmemError::Locked { .. }) => return Err(e),
            Err(e) => {
                if made_here {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(e);
            }
        };
        let file = lock.file();
        // Undo what this open did to the file system if it fails later.
        let undo = |grown_from: Option<u64>| {
            if made_here {
                let _ = std::fs::remove_file(&path);
            } else if let Some(len) = grown_from {
                let _ = file.set_len(len);
            }
        };
        let actual = match file.metadata() {
            Ok(meta) => meta.len(),
            Err(e) => {
                undo(None);
                return Err(io_err(&path, e));
            }
        };
        let mut grown_from = None;
        let len = if options.size_bytes == 0 {
            if actual == 0 {
                return Err(PmemError::EmptyFile { path });
            }
            actual
        } else if actual < options.size_bytes {
            if !options.create {
                return Err(PmemError::TooSmall {
                    path,
                    actual_bytes: actual,
                    needed_bytes: options.size_bytes,
                });
            }
            // Regions grow only here, at open.
            if let Err(e) = file.set_len(options.size_bytes).and_then(|()| preallocate(file)) {
                undo(Some(actual));
                return Err(io_err(&path, e));
            }
            grown_from = Some(actual);
            options.size_bytes
        } else {
            if let Err(e) = preallocate(file) {
                return Err(io_err(&path, e));
            }
            actual
        };
        // A private mapping reserves no swap for its copy-on-write pages: a growable region maps far
        // more than it will ever touch, and the kernel would refuse the whole reservation.
        let flags = if options.private {
            libc::MAP_PRIVATE | libc::MAP_NORESERVE
        } else {
            map_flags(options.medium)
        };
        // A growable region maps its maximum size now (addresses never move); the file covers
        // only `len` bytes until the engine needs more.
        let backed = len;
        let len = len.max(options.max_size_bytes);
        let grower = match Grower::new(file, backed, len, options.private) {
            Ok(g) => g,
            Err(e) => {
                undo(grown_from);
                return Err(io_err(&path, e));
            }
        };
        let base = mmap(len, flags, file.as_raw_fd()).map_err(|errno| match options.medium {
            Medium::Dax => match classify_dax_map_error(&path, errno) {
                PmemError::Map { cause, .. } => PmemError::Map { size_bytes: len, cause },
                other => other,
            },
            _ => {
                PmemError::Map { size_bytes: len, cause: std::io::Error::from_raw_os_error(errno) }
            }
        });
        let file = file.try_clone().ok();
        match base {
            // A file of length 0 had no contents: the mapping is all zeros, as a new file's.
            Ok(base) => Ok(Opened {
                map: Mapping { base, len },
                path: Some(path),
                lock: Some(lock),
                created: actual == 0,
                grower,
                file,
            }),
            Err(e) => {
                undo(grown_from);
                Err(e)
            }
        }
    }

    /// `shm` without a path: a fresh file in `/dev/shm`, unlinked as soon as it is mapped, so
    /// that nothing is left behind even if the process is killed.
    fn map_private_shm(options: &RegionOptions) -> Result<Opened> {
        if options.size_bytes == 0 {
            return Err(PmemError::InvalidOption("region size must be > 0".into()));
        }
        let map_len = options.size_bytes.max(options.max_size_bytes);
        let n = PRIVATE_SHM_SEQ.fetch_add(1, Ordering::Relaxed);
        let path = PathBuf::from(format!("/dev/shm/nvmdb-{}-{n}.region", std::process::id()));
        // `create_new`: a stale file of an earlier process with the same pid is never reused.
        let _ = std::fs::remove_file(&path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        let mapped = file
            .set_len(options.size_bytes)
            .and_then(|()| preallocate(&file))
            .map_err(|e| io_err(&path, e))
            .and_then(|()| {
                mmap(map_len, map_flags(Medium::Shm), file.as_raw_fd()).map_err(|e| {
                    PmemError::Map {
                        size_bytes: map_len,
                        cause: std::io::Error::from_raw_os_error(e),
                    }
                })
            });
        let _ = std::fs::remove_file(&path);
        let base = mapped?;
        // Unlinked and private to this process: nothing else can open it, so no lock.
        let map = Mapping { base, len: map_len };
        let grower =
            Grower::new(&file, options.size_bytes, map_len, false).map_err(|e| io_err(&path, e))?;
        Ok(Opened { map, path: None, lock: None, created: true, grower, file: Some(file) })
    }

    #[inline(always)]
    fn check(&self, offset: u64, len: u64) {
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= self.inner.map.len),
            "region access [{offset}, +{len}) outside region of {} bytes",
            self.inner.map.len
        );
    }

    /// Length of the mapping: the region's maximum size (see [`Region::backed_len`]).
    pub fn len(&self) -> u64 {
        self.inner.map.len
    }

    /// Bytes from offset 0 that are backed by the file (or the whole mapping): only these may
    /// be read or written. Grows through [`Region::ensure_backed`].
    #[inline]
    pub fn backed_len(&self) -> u64 {
        match &self.inner.grower {
            Some(g) => g.backed.load(Ordering::Acquire),
            None => self.inner.map.len,
        }
    }

    /// Makes `[0, end)` backed, extending the file (by at least `GROW_STEP_BYTES`, or an eighth
    /// of its size) if needed. A full medium or an `end` beyond the maximum is
    /// [`PmemError::Full`], and the file keeps its size.
    pub fn ensure_backed(&self, end: u64) -> Result<()> {
        if end <= self.backed_len() {
            return Ok(());
        }
        let max = self.inner.map.len;
        let Some(g) = &self.inner.grower else {
            return Err(PmemError::Full {
                needed_bytes: end,
                max_bytes: max,
                reason: "the region has a fixed size".into(),
            });
        };
        if g.fixed {
            let reason = "a private mapping does not grow its file".into();
            return Err(PmemError::Full { needed_bytes: end, max_bytes: max, reason });
        }
        if end > max {
            let reason = "beyond the region's maximum size".into();
            return Err(PmemError::Full { needed_bytes: end, max_bytes: max, reason });
        }
        let _guard = g.lock.lock();
        let backed = g.backed.load(Ordering::Acquire);
        if end <= backed {
            return Ok(());
        }
        let step = GROW_STEP_BYTES.max(backed / 8);
        let target = end.max(backed + step).div_ceil(2 << 20) * (2 << 20);
        let target = target.min(max);
        // SAFETY: a plain syscall on an open descriptor; errors come back as its return value.
        let rc = unsafe {
            libc::posix_fallocate(
                g.file.as_raw_fd(),
                backed as libc::off_t,
                (target - backed) as libc::off_t,
            )
        };
        let grown = match rc {
            0 => Ok(()),
            // No fallocate on this file system: extend the length (a later write may fault).
            libc::EOPNOTSUPP | libc::EINVAL => g.file.set_len(target),
            errno => Err(std::io::Error::from_raw_os_error(errno)),
        };
        if let Err(e) = grown {
            let _ = g.file.set_len(backed);
            return Err(PmemError::Full {
                needed_bytes: end,
                max_bytes: max,
                reason: format!("the medium refused more space ({e})"),
            });
        }
        g.backed.store(target, Ordering::Release);
        Ok(())
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
        // through `Sim::store` (write / write_u64 below).
        unsafe { View::new(self.inner.map.base, self.inner.map.len as usize) }
    }

    /// Borrows `len` bytes at `offset`.
    #[inline]
    pub fn read(&self, offset: u64, len: usize) -> &[u8] {
        self.check(offset, len as u64);
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::Load, offset, len as u64);
        }
        // SAFETY: bounds checked above; the mapping outlives `self`.
        unsafe { std::slice::from_raw_parts(self.inner.map.base.add(offset as usize), len) }
    }

    /// Reads an aligned `u64` atomically.
    #[inline]
    pub fn read_u64(&self, offset: u64) -> u64 {
        self.check(offset, 8);
        assert!(offset.is_multiple_of(8), "read_u64 at unaligned offset {offset}");
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::Load, offset, 8);
        }
        // SAFETY: in bounds, 8-aligned (the mapping is page-aligned), and AtomicU64 has the
        // layout of u64.
        let a = unsafe { &*(self.inner.map.base.add(offset as usize) as *const StdAtomicU64) };
        a.load(Ordering::Acquire)
    }

    /// Stores `bytes` at `offset` (into the cache: not yet durable).
    #[inline]
    pub fn write(&self, offset: u64, bytes: &[u8]) {
        self.check(offset, bytes.len() as u64);
        let inner = &*self.inner;
        if let Some(o) = inner.observer.get() {
            o.on_store(offset, bytes);
        }
        // SAFETY: bounds checked; callers serialise writers of the same bytes.
        let copy = || unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                inner.map.base.add(offset as usize),
                bytes.len(),
            )
        };
        match &inner.sim {
            Some(sim) => sim.store(offset as usize, bytes.len(), self.view(), copy),
            None => copy(),
        }
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, bytes.len() as u64)));
        if let Some(w) = &inner.wear {
            w.on_store(offset, bytes.len() as u64);
        }
        if let Some(d) = &inner.dirty {
            d.mark(offset, bytes.len() as u64);
        }
        if let Some(t) = &inner.tracer {
            t.record(TraceKind::Store, offset, bytes.len() as u64);
        }
    }

    /// Stores an aligned `u64` atomically (8 aligned bytes are the unit of failure atomicity).
    #[inline]
    pub fn write_u64(&self, offset: u64, value: u64) {
        self.check(offset, 8);
        assert!(offset.is_multiple_of(8), "write_u64 at unaligned offset {offset}");
        let inner = &*self.inner;
        if let Some(o) = inner.observer.get() {
            o.on_store(offset, &value.to_le_bytes());
        }
        // SAFETY: in bounds and 8-aligned; AtomicU64 has the layout of u64.
        let a = unsafe { &*(inner.map.base.add(offset as usize) as *const StdAtomicU64) };
        match &inner.sim {
            Some(sim) => {
                sim.store(offset as usize, 8, self.view(), || a.store(value, Ordering::Release))
            }
            None => a.store(value, Ordering::Release),
        }
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, 8)));
        if let Some(w) = &inner.wear {
            w.on_store(offset, 8);
        }
        if let Some(d) = &inner.dirty {
            d.mark(offset, 8);
        }
        if let Some(t) = &inner.tracer {
            t.record(TraceKind::Store, offset, 8);
        }
    }

    /// Starts writing back the cache lines covering `[offset, offset+len)`. Not durable until
    /// the next [`Region::fence`] of this thread.
    #[inline]
    pub fn flush(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.check(offset, len);
        let inner = &*self.inner;
        let span = line_span(offset, len);
        inner.stats.add(Counter::LinesFlushed, span.count);
        if let Some(t) = &inner.tracer {
            t.record(TraceKind::Flush, offset, len);
        }
        if let Some(w) = &inner.wear {
            w.record(span);
        }
        if let Some(timing) =
            inner.timing.as_ref().filter(|_| inner.timing_on.load(Ordering::Relaxed))
        {
            let reserved = timing.on_flush(span.count);
            if reserved > 0 {
                inner.stats.add(Counter::Reservations, reserved);
            }
        }
        if let Some(sim) = &inner.sim {
            sim.flush(span, self.view());
            return;
        }
        if inner.eadr {
            return;
        }
        if inner.sync == SyncMode::Msync {
            self.msync(offset, len);
            return;
        }
        let kind = inner.flush_kind;
        if kind == FlushKind::None {
            return;
        }
        self.for_each_line(span, |line| {
            // SAFETY: `for_each_line` passes only lines of `span`, which `check` put inside the
            // mapping; `kind` was validated against CPUID at open.
            unsafe { flush_line(kind, line) }
        });
    }

    /// The hardware loop of [`Region::flush`]: calls `per_line` with the address of each line
    /// of `span`, in order. A function of its own so that a test can pass a recorder where
    /// `flush` passes the flush instruction, and check the very loop the hardware runs.
    #[inline(always)]
    fn for_each_line(&self, span: LineSpan, mut per_line: impl FnMut(*const u8)) {
        let base = self.inner.map.base;
        debug_assert!(
            (span.first + span.count) * CACHE_LINE
                <= self.inner.map.len.next_multiple_of(CACHE_LINE)
        );
        for line in span.lines() {
            per_line(base.wrapping_add((line * CACHE_LINE) as usize));
        }
    }

    fn msync(&self, offset: u64, len: u64) {
        const PAGE: u64 = 4096;
        let start = offset / PAGE * PAGE;
        let end = (offset + len).div_ceil(PAGE) * PAGE;
        let end = end.min(self.inner.map.len);
        // SAFETY: page-aligned range inside the live mapping.
        let rc = unsafe {
            libc::msync(
                self.inner.map.base.add(start as usize).cast(),
                (end - start) as usize,
                libc::MS_SYNC,
            )
        };
        // A failed msync means the device lost data under us: nothing an engine can repair, and
        // acknowledging later commits would be a lie.
        assert!(rc == 0, "msync failed: {}", std::io::Error::last_os_error());
    }

    /// The persist barrier (Pelley §3.2): completes this thread's earlier flushes before any
    /// later store. Charges the modelled barrier latency.
    #[inline]
    pub fn fence(&self) {
        let inner = &*self.inner;
        inner.stats.add(Counter::Fences, 1);
        if let Some(o) = inner.observer.get() {
            o.on_fence();
        }
        if let Some(t) = &inner.tracer {
            t.record(TraceKind::Fence, 0, 0);
        }
        if let Some(sim) = &inner.sim {
            sim.fence(self.view());
        }
        store_fence();
        if let Some(timing) =
            inner.timing.as_ref().filter(|_| inner.timing_on.load(Ordering::Relaxed))
        {
            let (ns, reserved) = timing.on_fence_reserving();
            if ns > 0 {
                inner.stats.add(Counter::DelayNs, ns);
            }
            if reserved > 0 {
                inner.stats.add(Counter::Reservations, reserved);
            }
        }
    }

    /// [`Region::flush`] of each `(offset, len)` range (not yet durable: fence after).
    #[inline]
    pub fn flush_ranges(&self, ranges: &[(u64, u64)]) {
        for (offset, len) in ranges {
            self.flush(*offset, *len);
        }
    }

    /// `flush` + `fence`.
    #[inline]
    pub fn persist(&self, offset: u64, len: u64) {
        self.flush(offset, len);
        self.fence();
    }

    /// Charges the modelled read latency for `lines` cache lines read from the device.
    #[inline]
    pub fn charge_read(&self, lines: u64) {
        if let Some(timing) =
            self.inner.timing.as_ref().filter(|_| self.inner.timing_on.load(Ordering::Relaxed))
        {
            let ns = timing.charge_read(lines);
            self.inner.stats.add(Counter::LinesReadCharged, lines);
            self.inner.stats.add(Counter::DelayNs, ns);
        }
    }

    /// Strand persistency's NewStrand, recorded in the trace (no hardware effect today).
    pub fn new_strand(&self) {
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::NewStrand, 0, 0);
        }
    }

    /// An epoch/strand persist barrier recorded in the trace without a hardware fence.
    pub fn strand_barrier(&self) {
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::StrandBarrier, 0, 0);
        }
    }

    /// Runs the volatile access `op` (a lock word's swap, a flag's load) and, when tracing,
    /// records it as `kind` (`VolatileLoad` or `VolatileStore`) at process address `addr` in
    /// one step under the trace mutex, so the trace's total order is the order the accesses
    /// took effect. Without a trace it only runs `op`.
    #[inline]
    pub fn trace_volatile<R>(
        &self,
        kind: TraceKind,
        addr: u64,
        len: u64,
        op: impl FnOnce() -> R,
    ) -> R {
        assert!(kind.is_volatile(), "trace_volatile records volatile accesses only, not {kind:?}");
        match &self.inner.tracer {
            Some(t) => t.record_with(kind, addr, len, op),
            None => op(),
        }
    }

    /// Whether this region records a trace.
    pub fn tracing(&self) -> bool {
        self.inner.tracer.is_some()
    }

    pub fn stats(&self) -> Stats {
        self.inner.stats.snapshot()
    }

    /// Turns the timing model's delays off (loading, checking) or back on. Statistics are kept
    /// either way.
    pub fn set_timing_enabled(&self, on: bool) {
        self.inner.timing_on.store(on, Ordering::Relaxed);
    }

    pub fn timing(&self) -> Option<&TimingOptions> {
        self.inner.timing.as_ref().map(|t| &t.options)
    }

    /// Per-line flush counts, if the region was opened with `wear`.
    pub fn wear(&self) -> Option<Vec<u32>> {
        self.inner.wear.as_ref().map(WearMap::counts)
    }

    /// The wear map itself (byte counts, granularity, reset), if the region keeps one.
    pub fn wear_map(&self) -> Option<&WearMap> {
        self.inner.wear.as_ref()
    }

    /// Takes the recorded trace and the count of events dropped over the limit.
    pub fn take_trace(&self) -> Option<(Vec<TraceEvent>, u64)> {
        self.inner.tracer.as_ref().map(Tracer::take)
    }

    /// Installs the observer of every later store (once per region): how a write-ahead log
    /// captures the stores made to a volatile buffer-pool copy. Returns false if one is set.
    pub fn set_observer(&self, observer: Arc<dyn StoreObserver>) -> bool {
        self.inner.observer.set(observer).is_ok()
    }

    /// The lines written since the set was last cleared (regions opened with `track_dirty`).
    pub fn dirty(&self) -> Option<&DirtyLines> {
        self.inner.dirty.as_ref()
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

/// `options` for a private `dram` region of `size_bytes` (a staging copy, a view, an image's
/// copy): no file, no flush instruction, no growth; timing, wear, trace and dirty tracking kept.
fn dram_options(options: &RegionOptions, size_bytes: u64) -> RegionOptions {
    RegionOptions {
        medium: Medium::Dram,
        size_bytes,
        path: None,
        sync: SyncMode::Cache,
        flush: None,
        max_size_bytes: 0,
        private: false,
        ..options.clone()
    }
}

/// Copies every 4 KiB page of `src` that is not all zero to the same offset of `dest` (which
/// must read zero elsewhere already, e.g. a fresh mapping or a zeroed allocation, and be at
/// least as long). Zero pages are only read, so `dest` gets no memory behind them.
pub(crate) fn copy_nonzero_pages(dest: &mut [u8], src: &[u8]) {
    debug_assert!(dest.len() >= src.len());
    for (i, page) in src.chunks(4096).enumerate() {
        if !is_zero(page) {
            dest[i * 4096..i * 4096 + page.len()].copy_from_slice(page);
        }
    }
}

/// A copy of `src` in a zeroed allocation with only its nonzero pages written: the same bytes
/// as `src.to_vec()`, but a mostly zero image costs the memory (and page faults) of its data.
pub fn sparse_clone(src: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    copy_nonzero_pages(&mut out, src);
    out
}

/// Whether every byte of `bytes` is zero (word at a time).
fn is_zero(bytes: &[u8]) -> bool {
    let (head, words, tail) = {
        // SAFETY: any bit pattern is a valid u64.
        unsafe { bytes.align_to::<u64>() }
    };
    // Eight words OR-ed per step (vectorised), stopping at the first nonzero block.
    head.iter().all(|&b| b == 0)
        && words.chunks(8).all(|block| block.iter().fold(0, |acc, &w| acc | w) == 0)
        && tail.iter().all(|&b| b == 0)
}

/// Granularity of the holes [`Region::save_image`] leaves for zero blocks.
pub const IMAGE_BLOCK: usize = 64 << 10;

/// The `[start, end)` ranges of `file` (of `len` bytes) that may hold data: its extents from
/// `SEEK_DATA`/`SEEK_HOLE`, or the whole file where the file system cannot say.
fn data_extents(file: &std::fs::File, len: u64) -> std::io::Result<Vec<(u64, u64)>> {
    let fd = file.as_raw_fd();
    let seek = |offset: u64, whence: libc::c_int| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on an open descriptor; the result is checked.
        let r = unsafe { libc::lseek(fd, offset as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        match std::io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
            e => Err(e),
        }
    };
    let mut extents = Vec::new();
    let mut at = 0;
    while at < len {
        let start = match seek(at, libc::SEEK_DATA) {
            Ok(Some(start)) => start.min(len),
            Ok(None) => break,
            // No SEEK_DATA here (EINVAL): read everything.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && extents.is_empty() => {
                return Ok(vec![(0, len)]);
            }
            Err(e) => return Err(e),
        };
        let end = seek(start, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        if end > start {
            extents.push((start, end));
        }
        at = end.max(start + 1);
    }
    Ok(extents)
}

/// Free bytes (for unprivileged users) of the file system holding `dir`, from statvfs.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs is a plain C struct of integers; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a valid out-parameter.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail as u64 * st.f_frsize as u64)
}

/// Whether `path` is on a file system that offers DAX mappings: tries a one-page `MAP_SYNC`
/// mapping of the file itself when it exists (without touching its contents or length), else of
/// a scratch file in the directory (`path` itself, or its parent), removed afterwards.
pub fn is_dax(path: &Path) -> std::result::Result<bool, PmemError> {
    if path.is_file() {
        // A mapping may extend past the end of a file as long as nothing touches it, so the
        // file's length does not matter. Read-only files cannot be mapped writable: fall back
        // to a scratch file beside them.
        if let Ok(file) = OpenOptions::new().read(true).write(true).open(path) {
            return probe_map_sync(path, &file);
        }
    }
    let dir = if path.is_dir() {
        path
    } else {
        path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
    };
    if !dir.is_dir() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory");
        return Err(io_err(dir, missing));
    }
    let n = PRIVATE_SHM_SEQ.fetch_add(1, Ordering::Relaxed);
    let probe = dir.join(format!(".nvmdb-dax-probe-{}-{n}", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| io_err(&probe, e))?;
    let result = file
        .set_len(4096)
        .map_err(|e| io_err(&probe, e))
        .and_then(|()| probe_map_sync(&probe, &file));
    let _ = std::fs::remove_file(&probe);
    result
}

/// The kind of file system `path` (or, if it does not exist yet, its nearest existing ancestor)
/// lives on: "tmpfs", "ext4", "xfs", ... or the magic number in hex.
pub fn filesystem_name(path: &Path) -> std::result::Result<String, PmemError> {
    let existing = path.ancestors().find(|p| p.exists()).unwrap_or(Path::new("."));
    let c_path = std::ffi::CString::new(existing.as_os_str().as_encoded_bytes()).map_err(|_| {
        PmemError::InvalidOption(format!("path {} contains a NUL byte", path.display()))
    })?;
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_path` is NUL-terminated and `stat` is writable memory of the right type.
    let rc = unsafe { libc::statfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(io_err(existing, std::io::Error::last_os_error()));
    }
    // SAFETY: statfs succeeded, so it filled `stat`.
    let magic = unsafe { stat.assume_init() }.f_type as u64;
    Ok(match magic {
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xef53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0xf2f5_2010 => "f2fs",
        0x2fc1_2fc1 => "zfs",
        0x6969 => "nfs",
        0x794c_7630 => "overlay",
        0x6573_5546 => "fuse",
        0x0102_1997 => "9p",
        other => return Ok(format!("{other:#x}")),
    }
    .to_string())
}

fn probe_map_sync(path: &Path, file: &std::fs::File) -> std::result::Result<bool, PmemError> {
    match mmap(4096, map_flags(Medium::Dax), file.as_raw_fd()) {
        Ok(p) => {
            // SAFETY: unmapping the one page just mapped, never touched.
            unsafe { libc::munmap(p.cast(), 4096) };
            Ok(true)
        }
        Err(errno) => match classify_dax_map_error(path, errno) {
            PmemError::NotDax { .. } => Ok(false),
            PmemError::Map { cause, .. } => Err(PmemError::Map { size_bytes: 4096, cause }),
            other => Err(other),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = PathBuf::from(format!("/dev/shm/nvmdb-region-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn an_image_restores_the_contents_and_leaves_zero_blocks_as_holes() {
        let dir = scratch("image");
        let path = dir.join("db.img");
        let size = 16 * IMAGE_BLOCK as u64;
        let r = Region::open(&RegionOptions::new(Medium::Dram, size)).unwrap();
        r.write(100, b"first block");
        r.write(9 * IMAGE_BLOCK as u64 - 4, b"straddles two blocks");
        r.write(size - 8, &7u64.to_le_bytes());
        let written = r.save_image(&path).unwrap();
        assert_eq!(written, 4 * IMAGE_BLOCK as u64, "blocks 0, 8, 9 and 15 hold data");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), size);
        assert!(!dir.join("db.img.tmp").exists());
        // tmpfs allocates only the data blocks.
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) * 512 <= 5 * IMAGE_BLOCK as u64);
        let opts = RegionOptions { wear: true, ..RegionOptions::new(Medium::Shm, 1) };
        let copy = Region::dram_from_file(&path, &opts).unwrap();
        assert_eq!(copy.medium(), Medium::Dram);
        assert!(!copy.created(), "an image is an existing database");
        assert!(copy.wear().is_some(), "the run's options apply");
        assert_eq!(copy.len(), size);
        assert_eq!(copy.snapshot(), r.snapshot());
        // The copy is private: writing it leaves the image alone.
        copy.write(0, b"changed");
        assert_eq!(Region::dram_from_file(&path, &opts).unwrap().snapshot(), r.snapshot());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dram_copy_holds_every_nonzero_byte_and_zero_elsewhere() {
        let mut contents = vec![0u8; 10 * 4096 + 100];
        for at in [0, 4095, 4096 * 3 + 17, 4096 * 7 + 4095, 10 * 4096 + 99] {
            contents[at] = (at % 251) as u8 + 1;
        }
        let copy = Region::dram_copy(&contents, &RegionOptions::default()).unwrap();
        assert_eq!(copy.snapshot(), contents);
        assert!(is_zero(&[0; 13]) && !is_zero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
        assert_eq!(sparse_clone(&contents), contents);
    }

    #[test]
    fn an_observer_sees_every_store_and_every_fence_in_order() {
        #[derive(Default)]
        struct Seen(parking_lot::Mutex<Vec<String>>);
        impl StoreObserver for Seen {
            fn on_store(&self, offset: u64, bytes: &[u8]) {
                self.0.lock().push(format!("store {offset}+{}", bytes.len()));
            }
            fn on_fence(&self) {
                self.0.lock().push("fence".into());
            }
        }
        let region = Region::open(&RegionOptions::new(Medium::Dram, 1 << 20)).unwrap();
        let seen = Arc::new(Seen::default());
        assert!(region.set_observer(seen.clone()));
        region.write(64, &[1; 8]);
        region.fence();
        region.write_u64(128, 7);
        region.persist(128, 8);
        assert_eq!(*seen.0.lock(), ["store 64+8", "fence", "store 128+8", "fence"]);
    }

    #[test]
    fn a_region_from_a_crash_image_reads_and_cuts_back_the_same_bytes() {
        let mut image = vec![0u8; 9 * 4096 + 64];
        for at in [1, 4096 * 2, 4096 * 5 + 4000, 9 * 4096 + 63] {
            image[at] = 0xA5;
        }
        let region = Region::from_image(&image, &RegionOptions::default()).unwrap();
        assert_eq!(region.snapshot(), image);
        for policy in [CrashPolicy::Persisted, CrashPolicy::Evict, CrashPolicy::Torn] {
            assert_eq!(region.crash_image(policy, 7).unwrap(), image, "{policy:?}");
        }
        // A store after opening is in the current contents, not yet in the persisted image.
        region.write(4096 * 3, &[7; 8]);
        assert_eq!(region.crash_image(CrashPolicy::Persisted, 0).unwrap(), image);
        let mut written = image.clone();
        written[4096 * 3..4096 * 3 + 8].copy_from_slice(&[7; 8]);
        assert_eq!(region.snapshot(), written);
    }

    #[test]
    fn a_missing_or_empty_image_is_an_error() {
        let dir = scratch("image-bad");
        let opts = RegionOptions::default();
        let missing = Region::dram_from_file(&dir.join("none.img"), &opts);
        assert!(matches!(missing, Err(PmemError::Missing { .. })), "{:?}", missing.err());
        std::fs::write(dir.join("empty.img"), b"").unwrap();
        let empty = Region::dram_from_file(&dir.join("empty.img"), &opts);
        assert!(matches!(empty, Err(PmemError::EmptyFile { .. })), "{:?}", empty.err());
        let unwritable = Region::open(&opts).unwrap().save_image(&dir.join("no/such/dir.img"));
        assert!(matches!(unwritable, Err(PmemError::Io { .. })), "{:?}", unwritable.err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_extents_cover_every_byte_that_is_not_a_hole() {
        let dir = scratch("extents");
        let path = dir.join("sparse");
        let file = std::fs::File::create(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[1; 10], 1 << 20).unwrap();
        file.set_len(4 << 20).unwrap();
        let extents = data_extents(&file, 4 << 20).unwrap();
        assert!(!extents.is_empty());
        assert!(extents.iter().any(|&(s, e)| s <= 1 << 20 && e >= (1 << 20) + 10), "{extents:?}");
        assert!(extents.iter().all(|&(s, e)| s < e && e <= 4 << 20), "{extents:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn map_flags_per_medium() {
        let dax = map_flags(Medium::Dax);
        assert_eq!(dax & libc::MAP_SYNC, libc::MAP_SYNC, "dax must ask for synchronous faults");
        // MAP_SHARED_VALIDATE (the mapping type 3, not a flag bit) makes an unsupported
        // MAP_SYNC an error instead of silently ignoring it.
        let mapping_type = libc::MAP_SHARED | libc::MAP_PRIVATE;
        assert_eq!(dax & mapping_type, libc::MAP_SHARED_VALIDATE);
        assert_eq!(dax & libc::MAP_ANONYMOUS, 0);
        for m in [Medium::Shm, Medium::File] {
            assert_eq!(map_flags(m), libc::MAP_SHARED, "{m:?} must write through to the file");
        }
        for m in [Medium::Dram, Medium::Sim] {
            assert_eq!(map_flags(m), libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
        }
    }

    #[test]
    fn dax_map_errors_fall_back_to_not_dax_or_map() {
        let path = Path::new("/mnt/x");
        for (errno, reason) in [
            (libc::EOPNOTSUPP, "file system does not support MAP_SYNC"),
            (libc::EINVAL, "kernel does not know MAP_SHARED_VALIDATE"),
        ] {
            match classify_dax_map_error(path, errno) {
                PmemError::NotDax { path: p, reason: r } => {
                    assert_eq!((p.as_path(), r.as_str()), (path, reason));
                }
                other => panic!("errno {errno}: {other:?}"),
            }
        }
        for errno in [libc::ENOMEM, libc::EACCES, libc::ENODEV] {
            let err = classify_dax_map_error(path, errno);
            assert!(
                matches!(&err, PmemError::Map { cause, .. }
                if cause.raw_os_error() == Some(errno)),
                "{err:?}"
            );
        }
    }

    #[test]
    fn tmpfs_is_not_dax() {
        assert!(!is_dax(Path::new("/dev/shm")).unwrap());
        assert_eq!(filesystem_name(Path::new("/dev/shm")).unwrap(), "tmpfs");
        // A path yet to be created is judged by its nearest existing ancestor.
        assert_eq!(filesystem_name(Path::new("/dev/shm/no/such/file")).unwrap(), "tmpfs");
    }

    #[test]
    fn is_dax_leaves_files_and_directories_as_they_were() {
        let dir = scratch("isdax");
        // An existing short file is probed in place, neither grown nor written.
        let file = dir.join("short");
        std::fs::write(&file, [7u8; 10]).unwrap();
        assert!(!is_dax(&file).unwrap());
        assert_eq!(std::fs::read(&file).unwrap(), [7u8; 10]);
        // A file yet to be created is probed beside it, and the probe removed.
        assert!(!is_dax(&dir.join("later.region")).unwrap());
        assert!(!is_dax(&dir).unwrap());
        let left: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["short"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn is_dax_in_a_missing_directory_is_an_error() {
        let err = is_dax(Path::new("/dev/shm/nvmdb-no-such-dir/x/r.region")).unwrap_err();
        assert!(matches!(err, PmemError::Io { .. }), "{err:?}");
    }

    /// Bytes in the regions of the flush-line tests: 1024 lines.
    const FLUSH_REGION_BYTES: u64 = 64 << 10;

    /// `(offset, len)` ranges: one byte, exactly one line, straddling two lines, ending exactly
    /// on a line boundary, starting mid-line, large, at the region's ends, and a seeded sweep.
    fn flush_cases() -> Vec<(u64, u64)> {
        let end = FLUSH_REGION_BYTES;
        let mut cases = vec![
            (0, 1),
            (63, 1),
            (64, 1),
            (100, 1),
            (0, 64),
            (64, 64),
            (640, 64),
            (60, 8),
            (63, 2),
            (120, 16),
            (0, 128),
            (32, 96),
            (64, 192),
            (1, 63),
            (33, 31),
            (17, 64),
            (65, 127),
            (5, 4096),
            (0, 4096),
            (4095, 2),
            (100, 40_000),
            (end - 1, 1),
            (end - 64, 64),
            (end - 65, 65),
            (end - 100, 100),
            (0, end),
        ];
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0x5EED);
        for _ in 0..200 {
            let offset = rand::Rng::gen_range(&mut rng, 0..end);
            let max = (end - offset).min(3 * 4096);
            cases.push((offset, rand::Rng::gen_range(&mut rng, 1..=max)));
        }
        cases
    }

    /// The lines holding a byte of `[offset, offset+len)`, found byte by byte.
    fn lines_touched(offset: u64, len: u64) -> Vec<u64> {
        let mut lines: Vec<u64> = (offset..offset + len).map(|b| b / CACHE_LINE).collect();
        lines.dedup();
        lines
    }

    /// The lines `Region::flush`'s hardware loop visits for `[offset, offset+len)`.
    fn hardware_loop_lines(region: &Region, offset: u64, len: u64) -> Vec<u64> {
        let base = region.base_ptr() as usize;
        let mut visited = Vec::new();
        region.for_each_line(line_span(offset, len), |line| {
            let at = line as usize - base;
            assert_eq!(at % CACHE_LINE as usize, 0, "address {at:#x} is not a line start");
            visited.push(at as u64 / CACHE_LINE);
        });
        visited
    }

    /// The lines the crash simulator persists for a flush of `[offset, offset+len)` and a fence
    /// after every byte of the region was stored to.
    fn sim_flushed_lines(offset: u64, len: u64) -> Vec<u64> {
        let region = Region::open(&RegionOptions::new(Medium::Sim, FLUSH_REGION_BYTES)).unwrap();
        region.write(0, &vec![0xff; FLUSH_REGION_BYTES as usize]);
        region.flush(offset, len);
        region.fence();
        let image = region.crash_image(CrashPolicy::Persisted, 0).unwrap();
        let mut persisted = Vec::new();
        for (line, bytes) in image.chunks(CACHE_LINE as usize).enumerate() {
            if bytes.iter().all(|b| *b == 0xff) {
                persisted.push(line as u64);
            } else {
                assert!(bytes.iter().all(|b| *b == 0), "line {line} persisted in part");
            }
        }
        persisted
    }

    #[test]
    fn the_hardware_flush_loop_visits_exactly_the_lines_of_the_range() {
        let region = Region::open(&RegionOptions::new(Medium::Dram, FLUSH_REGION_BYTES)).unwrap();
        for (offset, len) in flush_cases() {
            let expected = lines_touched(offset, len);
            assert_eq!(hardware_loop_lines(&region, offset, len), expected, "[{offset}, +{len})");
            assert_eq!(sim_flushed_lines(offset, len), expected, "sim, [{offset}, +{len})");
        }
    }

    #[test]
    fn statistics_and_wear_count_the_lines_of_the_range() {
        let options = RegionOptions { wear: true, ..RegionOptions::new(Medium::Dram, 4096) };
        for (offset, len) in [(0, 1), (63, 2), (64, 64), (1, 128), (100, 3000), (4095, 1)] {
            let region = Region::open(&options).unwrap();
            region.flush(offset, len);
            let expected = lines_touched(offset, len);
            assert_eq!(region.stats().lines_flushed, expected.len() as u64, "[{offset}, +{len})");
            let worn: Vec<u64> = (region.wear().unwrap().iter().enumerate())
                .filter(|(_, count)| **count > 0)
                .map(|(line, count)| {
                    assert_eq!(*count, 1, "line {line} counted twice");
                    line as u64
                })
                .collect();
            assert_eq!(worn, expected, "[{offset}, +{len})");
        }
    }

    #[test]
    fn a_private_shm_region_leaves_no_file() {
        let pattern = format!("nvmdb-{}-", std::process::id());
        let count = || {
            std::fs::read_dir("/dev/shm")
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(&pattern))
                .count()
        };
        let before = count();
        let region = Region::open(&RegionOptions::new(Medium::Shm, 8192)).unwrap();
        region.write_u64(0, 5);
        assert_eq!(count(), before, "the private file must be unlinked once mapped");
        assert_eq!(region.read_u64(0), 5);
    }
}

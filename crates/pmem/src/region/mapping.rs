//! Mapping a medium and growing it: anonymous memory for `dram`/`sim`, a shared (or, for
//! inspection, private) mapping of a locked region file for `shm`/`file`/`dax`, and the grower
//! that extends a region's file under a mapping that never moves. `dax` maps with `MAP_SYNC`
//! so that a flush + fence is durable without `msync` (Pelley et al., VLDB 2014, §3.2;
//! `docs/persistence.md`, "One opener per file").
//!
//! Invariant: nothing is placed in the mapping beyond [`Region::backed_len`] (it would fault),
//! and a failed open leaves the file system as it found it.

use super::options::{dram_options, Medium, RegionOptions};
use super::Region;
use crate::error::{PmemError, Result};
use crate::flush::{select_flush, CpuFlushSupport, FlushKind};
use crate::lock::FileLock;
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering};

/// The live mapping of a region: `len` bytes at `base`, unmapped on drop.
pub(super) struct Mapping {
    pub(super) base: *mut u8,
    pub(super) len: u64,
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

/// What opening a medium produced, before the region's bookkeeping is added.
pub(super) struct Opened {
    pub(super) map: Mapping,
    pub(super) path: Option<PathBuf>,
    pub(super) lock: Option<FileLock>,
    pub(super) created: bool,
    pub(super) grower: Option<Grower>,
    /// The file behind a file-backed region (for [`Region::private_view`]).
    pub(super) file: Option<std::fs::File>,
}

impl Opened {
    /// An anonymous or private mapping that holds existing contents: no file, no lock, no
    /// growth, not [`Region::created`].
    pub(super) fn volatile(map: Mapping) -> Opened {
        Opened { map, path: None, lock: None, created: false, grower: None, file: None }
    }
}

/// The file behind a growable region: the mapping covers the maximum size, the file only
/// `backed` bytes; touching the mapping beyond `backed` would fault (SIGBUS), so nothing is
/// placed there before [`Region::ensure_backed`] extends the file.
pub(super) struct Grower {
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

pub(super) static PRIVATE_SHM_SEQ: StdAtomicU64 = StdAtomicU64::new(0);

pub(super) fn io_err(path: &Path, cause: std::io::Error) -> PmemError {
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

pub(super) fn mmap(
    len: u64,
    flags: libc::c_int,
    fd: libc::c_int,
) -> std::result::Result<*mut u8, i32> {
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
        Ok(Self::assemble(options, opened, flush_kind, initial_image))
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
        let opened = Opened::volatile(map);
        Some(Ok(Self::assemble(&options, opened, FlushKind::None, None)))
    }

    pub(super) fn flush_kind_for(
        options: &RegionOptions,
        cpu: CpuFlushSupport,
    ) -> Result<FlushKind> {
        match (options.medium, options.flush) {
            (Medium::Dram, None) => Ok(FlushKind::None),
            (_, requested) => select_flush(cpu, requested),
        }
    }

    pub(super) fn map_anonymous(size_bytes: u64) -> Result<Mapping> {
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
        // A private mapping reserves no swap for its copy-on-write pages: a growable region maps
        // far more than it will ever touch, and the kernel would refuse the whole reservation.
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
        // Postcondition of the growth step, which callers rely on to place data at `end`.
        assert!(backed < target && end <= target && target <= max, "grow {backed} -> {target}");
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
}

#[cfg(test)]
mod tests {
    use super::*;

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

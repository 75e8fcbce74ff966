//! File-system probes: free space, the file system's kind, and whether a path can be mapped
//! with `MAP_SYNC` (DAX, real persistent memory; `docs/persistence.md`). They answer what
//! `nvmdb` reports and refuses before it opens a region; none of them changes a file.

use super::mapping::{classify_dax_map_error, io_err, map_flags, mmap, PRIVATE_SHM_SEQ};
use super::options::Medium;
use crate::error::PmemError;
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::Ordering;

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
    use crate::region::scratch;

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
}

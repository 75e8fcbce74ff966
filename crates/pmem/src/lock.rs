//! Exclusive locks on region files and peer directories, so that two openers never share (and
//! damage) one database.
//!
//! The locks are open-file-description locks (`F_OFD_SETLK`, a write lock over the whole file):
//! unlike POSIX `fcntl` locks they conflict between two opens in one process too, and closing
//! some other descriptor of the file does not drop them. The kernel releases one when the last
//! descriptor of its open file description closes, so a killed process leaves no lock behind.
//!
//! Invariant: while a [`FileLock`] lives, no other open file description holds a lock on its
//! file, and this process's registry of held files (`HELD`) names it.

use crate::error::{PmemError, Result};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Most `/proc/PID/fdinfo` entries read while looking for a lock's holder.
const MAX_FDINFO_SCANNED: usize = 100_000;

/// A file as the kernel identifies it: device and inode. Stable while a descriptor of the file is
/// open (the inode cannot be reused then), which a [`FileLock`] guarantees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct FileKey {
    dev: u64,
    ino: u64,
}

impl FileKey {
    fn of(file: &File, path: &Path) -> Result<FileKey> {
        let meta = file.metadata().map_err(|cause| io_err(path, cause))?;
        Ok(FileKey { dev: meta.dev(), ino: meta.ino() })
    }

    /// How `/proc/locks` and `fdinfo` name the file: `MAJOR:MINOR:INODE`, the device in hex.
    fn proc_name(self) -> String {
        format!("{:02x}:{:02x}:{}", libc::major(self.dev), libc::minor(self.dev), self.ino)
    }
}

/// Files this process holds a [`FileLock`] on, with the path each was locked through. Taking
/// and releasing a lock happen under this mutex, so that a conflict found while holding it is
/// this process's own exactly when the file is listed here.
static HELD: parking_lot::Mutex<BTreeMap<FileKey, PathBuf>> =
    parking_lot::const_mutex(BTreeMap::new());

fn io_err(path: &Path, cause: std::io::Error) -> PmemError {
    PmemError::Io { path: path.to_path_buf(), cause }
}

/// An exclusive lock on a file, held until this value is dropped; owns the locked descriptor.
#[derive(Debug)]
pub struct FileLock {
    file: File,
    path: PathBuf,
    key: FileKey,
}

impl FileLock {
    /// Locks `file` (opened for writing on `path`) exclusively, or fails with
    /// [`PmemError::Locked`] naming the holder if some other open file description holds a lock
    /// on it, in this process or another.
    pub fn lock(file: File, path: &Path) -> Result<FileLock> {
        let key = FileKey::of(&file, path)?;
        let mut held = HELD.lock();
        if let Err(cause) = set_lock(&file, libc::F_WRLCK) {
            if !matches!(cause.raw_os_error(), Some(libc::EAGAIN | libc::EACCES)) {
                return Err(io_err(path, cause));
            }
            let holder = if held.contains_key(&key) {
                Some(std::process::id())
            } else {
                drop(held);
                lock_holder(key)
            };
            return Err(PmemError::Locked { path: path.to_path_buf(), holder });
        }
        held.insert(key, path.to_path_buf());
        Ok(FileLock { file, path: path.to_path_buf(), key })
    }

    /// Opens `path` (creating an empty file if there is none) and locks it: a lock file.
    pub fn create(path: &Path) -> Result<FileLock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|cause| io_err(path, cause))?;
        FileLock::lock(file, path)
    }

    /// The locked file.
    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let mut held = HELD.lock();
        // Unlocked here, under `HELD`, rather than by the close that follows: a conflict seen
        // while holding `HELD` is then never a lock this process is about to give up. A failed
        // unlock is harmless: closing the descriptor releases the lock anyway.
        let _ = set_lock(&self.file, libc::F_UNLCK);
        held.remove(&self.key);
    }
}

/// `F_OFD_SETLK` of `kind` (write lock or unlock) over the whole file, without waiting.
fn set_lock(file: &File, kind: libc::c_int) -> std::io::Result<()> {
    // SAFETY: an all-zero `flock` is a valid value (start 0, length 0: the whole file).
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = kind as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a plain syscall on an open descriptor with a valid `flock`; OFD locks require
    // `l_pid` 0, which the zeroed value has.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut request) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The process holding a lock on `key`, if it can be found.
///
/// `/proc/locks` names the owner of POSIX and `flock` locks, but prints -1 as the pid of every
/// OFD lock (`OFDLCK ADVISORY WRITE -1 00:1b:2 0 EOF`, checked on Linux 6.18; an OFD lock
/// belongs to an open file description, which several processes may share), and `F_OFD_GETLK`
/// reports no pid either. The lock is also listed in the `fdinfo` of each descriptor of the
/// holding description, so the holder is found by scanning `/proc/*/fdinfo` (other users'
/// processes are unreadable and skipped).
fn lock_holder(key: FileKey) -> Option<u32> {
    let name = key.proc_name();
    let locks = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    if let Some(pid) = locks.lines().find_map(|line| lock_line_pid(line, &name)) {
        return Some(pid);
    }
    let mut budget = MAX_FDINFO_SCANNED;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fdinfo")) else { continue };
        for fd in fds.flatten() {
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            let mut locks = info.lines().filter_map(|l| l.strip_prefix("lock:"));
            if locks.any(|line| lock_line_names(line, &name)) {
                return Some(pid);
            }
        }
    }
    None
}

/// Whether a `/proc/locks`-format line is a granted lock on the file named `name`.
fn lock_line_names(line: &str, name: &str) -> bool {
    // Waiters are listed as "N: -> TYPE ...": they hold nothing.
    !line.contains("->") && line.split_whitespace().any(|field| field == name)
}

/// The owner pid of a `/proc/locks` line that locks the file `name`, when the kernel gives one.
fn lock_line_pid(line: &str, name: &str) -> Option<u32> {
    if !lock_line_names(line, name) {
        return None;
    }
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|field| *field == name)?;
    let pid: i64 = fields.get(at.checked_sub(1)?)?.parse().ok()?;
    u32::try_from(pid).ok().filter(|pid| *pid > 0)
}

/// How an error names the holder of a lock: "is already open (held by process 1234); close that
/// process" and its variants, to be followed by what else the user may do.
pub fn already_open(holder: Option<u32>) -> String {
    match holder {
        Some(pid) if pid == std::process::id() => {
            "is already open in this process; drop the other handle first".to_string()
        }
        Some(pid) => format!("is already open (held by process {pid}); close that process"),
        None => "is already open (held by another open file description); close the process \
                 that holds it"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_lines_parse() {
        let name = "00:1b:2";
        assert_eq!(lock_line_pid("1: OFDLCK ADVISORY  WRITE -1 00:1b:2 0 EOF", name), None);
        assert!(lock_line_names("1: OFDLCK ADVISORY  WRITE -1 00:1b:2 0 EOF", name));
        assert_eq!(lock_line_pid("2: POSIX  ADVISORY  WRITE 4321 00:1b:2 0 EOF", name), Some(4321));
        assert_eq!(lock_line_pid("2: POSIX  ADVISORY  WRITE 4321 00:1b:22 0 EOF", name), None);
        assert!(!lock_line_names("2: -> POSIX  ADVISORY  WRITE 4321 00:1b:2 0 EOF", name));
    }

    #[test]
    fn the_holding_descriptor_is_found_in_fdinfo() {
        let path = PathBuf::from(format!("/dev/shm/nvmdb-lock-unit-{}", std::process::id()));
        let lock = FileLock::create(&path).unwrap();
        // This process's own descriptor is listed: the scan finds the description's holder.
        assert_eq!(lock_holder(lock.key), Some(std::process::id()));
        drop(lock);
        let again = FileLock::create(&path).unwrap();
        drop(again);
        std::fs::remove_file(&path).unwrap();
    }
}

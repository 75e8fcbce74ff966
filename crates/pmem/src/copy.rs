//! Copying region files without writing out their holes. A region file of many GiB that holds a
//! small database is mostly holes (pages never allocated); a plain copy on tmpfs reads the holes
//! as zeros and allocates them all, so three copies of an 8 GiB region fill a 24 GiB /dev/shm.
//!
//! Invariant: the target reads exactly as the source (same length, same bytes; holes read as
//! zeros in both), whether or not the file system reports holes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Bytes copied per read.
const CHUNK: usize = 1 << 20;

/// Copies `source` to `target` (created or truncated), copying only the data extents the file
/// system reports (`SEEK_DATA` / `SEEK_HOLE`); where it reports none, everything.
pub fn copy_sparse(source: &Path, target: &Path) -> io::Result<()> {
    let from = File::open(source)?;
    let to = File::create(target)?;
    let len = from.metadata()?.len();
    to.set_len(len)?;
    let mut buf = vec![0u8; CHUNK];
    let mut at = 0u64;
    while at < len {
        let Some((start, end)) = next_extent(&from, at, len)? else { break };
        copy_range(&from, &to, start, end, &mut buf)?;
        at = end;
    }
    to.sync_all()
}

/// The next data extent at or after `at`: `None` if only a hole remains.
fn next_extent(file: &File, at: u64, len: u64) -> io::Result<Option<(u64, u64)>> {
    let fd = file.as_raw_fd();
    let Ok(offset) = libc::off_t::try_from(at) else { return Ok(Some((at, len))) };
    // SAFETY: lseek on an open descriptor reads no memory of ours.
    let data = unsafe { libc::lseek(fd, offset, libc::SEEK_DATA) };
    if data < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            // No data at or after `at`.
            Some(libc::ENXIO) => Ok(None),
            // The file system cannot say: copy the rest as data.
            Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => Ok(Some((at, len))),
            _ => Err(e),
        };
    }
    // SAFETY: as above.
    let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
    if hole < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some((data as u64, (hole as u64).min(len))))
}

fn copy_range(from: &File, to: &File, start: u64, end: u64, buf: &mut [u8]) -> io::Result<()> {
    let mut at = start;
    while at < end {
        let n = ((end - at) as usize).min(buf.len());
        from.read_exact_at(&mut buf[..n], at)?;
        to.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_copy_reads_the_same_and_keeps_the_holes() {
        let dir = std::env::temp_dir().join(format!("nvmdb-copy-sparse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (source, target) = (dir.join("s"), dir.join("t"));
        let f = File::create(&source).unwrap();
        f.set_len(64 << 20).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(&[7u8; 5000], 40 << 20).unwrap();
        f.write_all_at(b"tail", (64 << 20) - 4).unwrap();
        drop(f);
        copy_sparse(&source, &target).unwrap();
        assert_eq!(std::fs::read(&source).unwrap(), std::fs::read(&target).unwrap());
        use std::os::unix::fs::MetadataExt;
        let blocks = std::fs::metadata(&target).unwrap().blocks();
        assert!(blocks * 512 < 8 << 20, "the holes were written out: {blocks} blocks");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

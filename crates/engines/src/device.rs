//! The `io` option of `wal`, `cow` and `lsm`: how an engine's writes reach the medium.
//! `io=nvm`: load/store on the NVRAM region, flush + fence (Pelley's NVRAM Disk-Replacement,
//! N-Store's NVM-aware engines, Arulraj et al. SIGMOD 2015 §4); `io=fs`: `pwrite` to the region's
//! file and `fdatasync` as the barrier (N-Store's traditional engines, §3). Reads go through the
//! mapping (the page cache keeps it coherent with `pwrite`), except where an engine reads
//! through the file on purpose ([`Device::read_into`]: `lsm io=fs` point reads of its runs).
//!
//! **The file-system sync cost** (issue 36). On tmpfs `fdatasync` is free, so the traditional
//! engines would run without the cost of the paper's path to NVM through PMFS and the VFS
//! (§2.2: the filesystem interface "requires the application's writes to go through the
//! kernel's virtual filesystem (VFS) layer"; §2.3: the allocator's "10-12x higher write
//! bandwidth than the filesystem"). Each `fdatasync` is therefore charged by the region's timing
//! model for the bytes written through the file since the previous sync (`pmem::timing`,
//! `TimingModel::charge_fs_sync`): the same clock and device bandwidth the NVM engines pay, plus
//! the file-system constants `--fs-sync-latency` and `--fs-write-bandwidth` (ours; see the CLI).
//! Only where the sync is free (`Region::fs_sync_modelled`: tmpfs, ramfs): on a real disk
//! (`--medium file` on ext4, ...) the real `fdatasync` is the cost and is not charged twice.
//! Pwritten bytes count as stores in the region's statistics, so that bytes written per
//! transaction compare across `io=nvm` and `io=fs` (N-Store §5.3).
//!
//! **Invariant**: once a file write or sync fails, `Device::check` fails until the engine is
//! reopened, so nothing written after the failure is reported durable. See `docs/design.md` §4.

use pmem::Region;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::{DbError, Result};

/// The I/O interface of `wal`, `cow` and `lsm` (`io=nvm|fs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Io {
    Nvm,
    Fs,
}

impl Io {
    pub fn parse(s: &str) -> Option<Io> {
        match s {
            "nvm" => Some(Io::Nvm),
            "fs" => Some(Io::Fs),
            _ => None,
        }
    }
}

impl storage::options::OptionValue for Io {
    const ACCEPTS: &'static str = "nvm or fs";
    fn parse_option(text: &str) -> Option<Self> {
        Io::parse(text)
    }
    fn show_option(&self) -> Option<String> {
        Some(match self {
            Io::Nvm => "nvm".into(),
            Io::Fs => "fs".into(),
        })
    }
}

/// One engine's path to its region: stores + flushes, or `pwrite` + `fdatasync`.
pub(crate) struct Device {
    /// The engine named in errors.
    engine: &'static str,
    region: Region,
    file: Option<std::fs::File>,
    /// A file write or sync failed: nothing written since is durable.
    failed: AtomicBool,
    /// Bytes written through the file since the last `fdatasync`, by every thread (a sync
    /// makes all of them durable, so it pays for all of them).
    unsynced_bytes: AtomicU64,
}

impl Device {
    /// `engine` names the engine in error messages.
    pub fn open(region: &Region, io: Io, engine: &'static str) -> Result<Device> {
        let file = match io {
            Io::Nvm => None,
            Io::Fs => {
                let path = region.path().ok_or_else(|| {
                    DbError::Invalid(format!(
                        "engine {engine}: io=fs needs a file medium (--medium file, or shm with \
                         --path)"
                    ))
                })?;
                let file = std::fs::OpenOptions::new().read(true).write(true).open(path);
                Some(file.map_err(|e| {
                    DbError::Invalid(format!(
                        "engine {engine}: io=fs: opening {}: {e}",
                        path.display()
                    ))
                })?)
            }
        };
        Ok(Device {
            engine,
            region: region.clone(),
            file,
            failed: AtomicBool::new(false),
            unsynced_bytes: AtomicU64::new(0),
        })
    }

    pub fn write(&self, offset: u64, bytes: &[u8]) {
        match &self.file {
            None => self.region.write(offset, bytes),
            Some(f) => {
                if f.write_all_at(bytes, offset).is_err() {
                    self.failed.store(true, Ordering::Release);
                }
                let len = bytes.len() as u64;
                self.region.count_file_write(len);
                self.unsynced_bytes.fetch_add(len, Ordering::Relaxed);
            }
        }
    }

    /// Reads `len` bytes at `offset` into `buf` (resized to `len`): `pread` of the file, or a
    /// copy from the mapping. A file read's bytes are charged to the CPU-cache read model as
    /// loads (the kernel's copy reads them from the device).
    pub fn read_into(&self, offset: u64, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        buf.resize(len, 0);
        self.read_at(offset, buf)
    }

    /// Fills `buf` from `offset`: `pread` of the file, or a copy from the mapping (as
    /// [`Self::read_into`]).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let len = buf.len();
        let end = offset.checked_add(len as u64);
        if end.is_none_or(|end| end > self.region.backed_len()) {
            return Err(DbError::Corrupt(format!(
                "engine {}: a read of {len} bytes at {offset} is past the region's end",
                self.engine
            )));
        }
        match &self.file {
            None => buf.copy_from_slice(self.region.read(offset, len)),
            Some(f) => {
                f.read_exact_at(buf, offset).map_err(|e| {
                    DbError::Invalid(format!(
                        "engine {}: io=fs: reading {len} bytes at {offset}: {e}",
                        self.engine
                    ))
                })?;
                self.region.load(offset, len as u64);
            }
        }
        Ok(())
    }

    pub fn write_u64(&self, offset: u64, value: u64) {
        match &self.file {
            None => self.region.write_u64(offset, value),
            Some(_) => self.write(offset, &value.to_le_bytes()),
        }
    }

    pub fn flush(&self, offset: u64, len: u64) {
        if self.file.is_none() {
            self.region.flush(offset, len);
        }
    }

    /// The persist barrier: a fence, or `fdatasync` of the file (charged by the timing model for
    /// the bytes written since the previous sync where the sync itself is free; module doc).
    pub fn fence(&self) {
        match &self.file {
            None => self.region.fence(),
            Some(f) => {
                if f.sync_data().is_err() {
                    self.failed.store(true, Ordering::Release);
                }
                self.region.charge_fs_sync(self.unsynced_bytes.swap(0, Ordering::Relaxed));
            }
        }
    }

    pub fn persist(&self, offset: u64, len: u64) {
        self.flush(offset, len);
        self.fence();
    }

    /// `Err` if a file write or sync has failed since open.
    pub fn check(&self) -> Result<()> {
        if self.failed.load(Ordering::Acquire) {
            return Err(DbError::Invalid(format!(
                "engine {}: a file write or fdatasync failed; reopen the database to recover",
                self.engine
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions, TimingOptions};
    use std::path::PathBuf;

    /// A region file in `dir`, removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// 100 MB/s through the file system: 10 ns a byte, long enough to see over the noise.
    const FS: TimingOptions = TimingOptions {
        persist_barrier_ns: 0,
        write_bandwidth_bytes_per_s: 0,
        read_ns: 0,
        reservation: pmem::timing::Reservation::Lines4,
        write_line_ns: 0,
        fs_sync_ns: 1_000,
        fs_write_bytes_per_s: 100_000_000,
        cpu_cache_bytes: 0,
    };

    fn region(dir: &str, name: &str, medium: Medium, timing: TimingOptions) -> (Region, Scratch) {
        let path = PathBuf::from(dir).join(format!("nvmdb-device-{}-{name}", std::process::id()));
        let scratch = Scratch(path.clone());
        let options =
            RegionOptions { path: Some(path), timing, ..RegionOptions::new(medium, 4 << 20) };
        (Region::open(&options).expect("region file"), scratch)
    }

    /// Writes `bytes` through `device` in 4 KiB pwrites, syncs, and returns the stats delta.
    fn write_and_sync(region: &Region, device: &Device, bytes: u64) -> pmem::Stats {
        let before = region.stats();
        let block = [7u8; 4096];
        for i in 0..bytes / 4096 {
            device.write(i * 4096, &block);
        }
        device.fence();
        device.check().expect("file writes and syncs succeed");
        region.stats().since(&before)
    }

    /// Guards issue 36: `fdatasync` on tmpfs is free, so the traditional (`io=fs`) engines paid
    /// nothing where the NVM ones paid every barrier; a sync now costs per byte written before it.
    #[test]
    fn fs_sync_is_charged_per_byte_written() {
        let (region, _file) = region("/dev/shm", "per-byte", Medium::Shm, FS);
        assert!(region.fs_sync_modelled(), "a file on tmpfs: its free sync is modelled");
        let device = Device::open(&region, Io::Fs, "test").expect("io=fs device");
        let small = write_and_sync(&region, &device, 4 << 10);
        let large = write_and_sync(&region, &device, 256 << 10);
        assert_eq!((small.fs_syncs_charged, small.fs_bytes_charged), (1, 4 << 10));
        assert_eq!((large.fs_syncs_charged, large.fs_bytes_charged), (1, 256 << 10));
        // The pwritten bytes count as writes to the device, like the NVM path's stores.
        assert_eq!((large.bytes_written, large.stores), (256 << 10, 64));
        // 1 µs + 41 µs, and 1 µs + 2,621 µs: the delay follows the bytes, not the sync count.
        // `delay_ns` is wall-clock time spent spinning, so only its lower bounds are exact: a
        // descheduled thread overshoots (a 4 KiB sync once read 831 µs on a loaded 2-core CI VM).
        assert!(small.delay_ns >= 40_000, "4 KiB: {} ns", small.delay_ns);
        assert!(large.delay_ns >= 2_600_000, "256 KiB: {} ns", large.delay_ns);
        // A sync with nothing written since the last one pays only the fixed part.
        let empty = write_and_sync(&region, &device, 0);
        assert_eq!((empty.fs_syncs_charged, empty.fs_bytes_charged), (1, 0));
    }

    #[test]
    fn io_nvm_is_not_charged_the_fs_sync() {
        let (region, _file) = region("/dev/shm", "nvm", Medium::Shm, FS);
        let device = Device::open(&region, Io::Nvm, "test").expect("io=nvm device");
        let stats = write_and_sync(&region, &device, 64 << 10);
        assert_eq!((stats.fs_syncs_charged, stats.fs_bytes_charged, stats.delay_ns), (0, 0, 0));
        assert_eq!(stats.bytes_written, 64 << 10);
        assert_eq!(stats.fences, 1, "the barrier is a fence, not an fdatasync");
    }

    /// On a real file system the real `fdatasync` is the cost: charging the model on top would
    /// count the sync twice.
    #[test]
    fn a_real_disk_sync_is_not_charged_twice() {
        let dir = std::env::temp_dir();
        let dir = dir.to_str().expect("utf-8 temp dir");
        if matches!(pmem::filesystem_name(std::path::Path::new(dir)).as_deref(), Ok("tmpfs")) {
            eprintln!("skipped: {dir} is tmpfs here, no real disk to test against");
            return;
        }
        let (region, _file) = region(dir, "disk", Medium::File, FS);
        assert!(!region.fs_sync_modelled());
        let device = Device::open(&region, Io::Fs, "test").expect("io=fs device");
        let stats = write_and_sync(&region, &device, 64 << 10);
        assert_eq!((stats.fs_syncs_charged, stats.delay_ns), (0, 0));
        assert_eq!(stats.bytes_written, 64 << 10, "its writes are still counted");
    }
}

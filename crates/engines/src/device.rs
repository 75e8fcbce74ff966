//! The `io` option of `wal`, `cow` and `lsm`: how an engine's writes reach the medium.
//! `io=nvm`: load/store on the NVRAM region, flush + fence (Pelley's NVRAM Disk-Replacement,
//! N-Store's NVM-aware engines, Arulraj et al. SIGMOD 2015 §4); `io=fs`: `pwrite` to the region's
//! file and `fdatasync` as the barrier (N-Store's traditional engines, §3). Reads always go
//! through the mapping (the page cache keeps it coherent with `pwrite`).
//!
//! **Invariant**: once a file write or sync fails, `Device::check` fails until the engine is
//! reopened, so nothing written after the failure is reported durable. See `docs/design.md` §4.

use pmem::Region;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
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
        Ok(Device { engine, region: region.clone(), file, failed: AtomicBool::new(false) })
    }

    pub fn write(&self, offset: u64, bytes: &[u8]) {
        match &self.file {
            None => self.region.write(offset, bytes),
            Some(f) => {
                if f.write_all_at(bytes, offset).is_err() {
                    self.failed.store(true, Ordering::Release);
                }
            }
        }
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

    /// The persist barrier: a fence, or `fdatasync` of the file.
    pub fn fence(&self) {
        match &self.file {
            None => self.region.fence(),
            Some(f) => {
                if f.sync_data().is_err() {
                    self.failed.store(true, Ordering::Release);
                }
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

//! Region options: the medium, its sync mode and every knob of [`RegionOptions`], with their
//! defaults and the checks that refuse meaningless combinations before any file is touched.
//! The media follow Pelley et al., VLDB 2014, §3.2 (a persist is a flush + fence) and
//! `docs/design.md` §2; the defaults live here and nowhere else.

use crate::error::{PmemError, Result};
use crate::flush::FlushKind;
use crate::stats::WearGranularity;
use crate::timing::TimingOptions;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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

/// Everything needed to open a region. Defaults live here and only here.
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
    /// Track written lines in a [`crate::DirtyLines`] set (the staging copy of NVRAM Group Commit).
    pub track_dirty: bool,
    /// Largest size the region may grow to (file media): the mapping is this long from the
    /// start, the file only `size_bytes`, and [`crate::Region::ensure_backed`] extends the file
    /// as the engine allocates further. 0: the region stays at its size.
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

/// `options` for a private `dram` region of `size_bytes` (a staging copy, a view, an image's
/// copy): no file, no flush instruction, no growth; timing, wear, trace and dirty tracking kept.
pub(super) fn dram_options(options: &RegionOptions, size_bytes: u64) -> RegionOptions {
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

use crate::lock::already_open;
use std::path::PathBuf;

/// Errors a user or a damaged file can cause. Programming errors (an out-of-range write) are
/// assertions instead: they are bugs, not conditions to handle.
#[derive(Debug, thiserror::Error)]
pub enum PmemError {
    #[error("region file {path} does not exist (create it with a size, e.g. --size 1GiB)")]
    Missing { path: PathBuf },
    #[error(
        "region file {path} is {actual_bytes} bytes, smaller than the {needed_bytes} bytes needed"
    )]
    TooSmall { path: PathBuf, actual_bytes: u64, needed_bytes: u64 },
    #[error(
        "region cannot grow to {needed_bytes} bytes: {reason} (its maximum is {max_bytes} bytes; \
         raise --max-size or free space on the medium)"
    )]
    Full { needed_bytes: u64, max_bytes: u64, reason: String },
    #[error("region file {path} is empty (give a size to create the region, e.g. --size 1GiB)")]
    EmptyFile { path: PathBuf },
    #[error(
        "{path} is not on a DAX file system (MAP_SYNC refused: {reason}); use --medium file or shm"
    )]
    NotDax { path: PathBuf, reason: String },
    #[error("medium `{medium}` needs a path (--path)")]
    NeedsPath { medium: &'static str },
    #[error("invalid region option: {0}")]
    InvalidOption(String),
    #[error("flush instruction {0} is not supported by this CPU (see `nvmdb info`)")]
    FlushUnsupported(&'static str),
    // The OS error is part of the one-line message, and deliberately not an error `source`:
    // a chain printer (`anyhow`'s `{:#}`) would print it twice.
    #[error("I/O error on {path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
    /// Another open of the file holds its lock. `holder` is the pid of a process with the
    /// holding descriptor open when it could be found: this process's own when another handle
    /// in this process holds it.
    #[error("region file {} {} or use another --path", path.display(), already_open(*holder))]
    Locked { path: PathBuf, holder: Option<u32> },
    #[error("mmap of {size_bytes} bytes failed: {cause}")]
    Map { size_bytes: u64, cause: std::io::Error },
}

pub type Result<T> = std::result::Result<T, PmemError>;

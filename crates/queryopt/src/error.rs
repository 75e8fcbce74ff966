//! Typed errors. Every one a user can cause (an impossible parameter, a path that refuses
//! O_DIRECT) names the parameter or the path and what would be accepted, in one line.

use thiserror::Error;

/// Errors from the devices, the generator and the operators.
#[derive(Debug, Error)]
pub enum Error {
    /// A parameter outside the range the operators accept.
    #[error("invalid {name} = {value}: {expected}")]
    InvalidParameter { name: &'static str, value: String, expected: String },
    /// The file system refused O_DIRECT (tmpfs, some overlay file systems).
    #[error(
        "{path}: the file system refuses O_DIRECT ({source}); put --path on a block-device \
         file system (ext4, xfs), not tmpfs such as /dev/shm"
    )]
    NoDirectIo { path: String, source: std::io::Error },
    /// The file system keeps files in memory (tmpfs, ramfs): even with O_DIRECT, reads would
    /// measure memory, not a device.
    #[error(
        "{path}: {fs} keeps files in memory, so O_DIRECT would time memory, not a disk; put \
         --path on a block-device file system (ext4, xfs), or pass --allow-buffered to run anyway"
    )]
    MemoryFileSystem { path: String, fs: &'static str },
    /// Any other I/O error on a device file.
    #[error("{path}: {what}: {source}")]
    Io { path: String, what: &'static str, source: std::io::Error },
    /// A read or write outside the device, or a buffer of the wrong size: a bug in an operator.
    #[error("block request out of range: {0}")]
    OutOfRange(String),
    /// A claim set that breaks the verdict rules (a "differs" without its cause).
    #[error(transparent)]
    Verdict(#[from] experiments::verdict::RuleError),
    /// An operator would have needed more memory than its limit (a bug or an extreme skew).
    #[error("memory limit of {limit_pages} pages exceeded in {stage}: needs {needed_pages}")]
    MemoryLimit { stage: &'static str, limit_pages: u64, needed_pages: u64 },
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// An [`Error::InvalidParameter`] for `name = value`.
pub(crate) fn invalid(name: &'static str, value: impl ToString, expected: impl ToString) -> Error {
    Error::InvalidParameter { name, value: value.to_string(), expected: expected.to_string() }
}

//! Helpers shared by the peers' integration tests.

use std::path::PathBuf;
use storage::conformance::Writers;

/// A scratch directory under /dev/shm (tmpfs: fsyncs are cheap), else the system temp dir.
pub fn scratch() -> tempfile::TempDir {
    let shm = PathBuf::from("/dev/shm");
    let base = if shm.is_dir() { shm } else { std::env::temp_dir() };
    tempfile::Builder::new().prefix("nvmdb-peers-").tempdir_in(base).expect("scratch directory")
}

/// How the peer orders conflicting writers.
#[allow(dead_code)]
pub fn writers(peer: &str) -> Writers {
    peers::info(peer).map_or(Writers::KeyLocks, |info| info.writers)
}

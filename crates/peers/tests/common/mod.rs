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

/// `peers::open` with a small PMDK pool (PMDK writes the whole pool file when it makes it, and
/// the scratch directories live in tmpfs memory).
#[allow(dead_code)]
pub fn open(
    peer: &str,
    dir: &std::path::Path,
    durability: peers::PeerDurability,
    workers: usize,
) -> Result<Box<dyn storage::Engine>, storage::DbError> {
    let options = peers::PeerOptions {
        durability,
        workers,
        pmemobj_pool_bytes: 32 << 20,
        ..Default::default()
    };
    peers::open_with(peer, dir, &options)
}

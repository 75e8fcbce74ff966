//! The storage crate's Engine conformance suite, run against every peer in both durability modes.

mod common;

use peers::{open_with, PeerDurability, PeerOptions};
use std::sync::atomic::{AtomicUsize, Ordering};
use storage::conformance::run_all;

fn conform(peer: &str, durability: PeerDurability) {
    let dir = common::scratch();
    let next = AtomicUsize::new(0);
    let make = || {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let path = dir.path().join(format!("{peer}-{n}"));
        std::fs::create_dir(&path).unwrap();
        // A small PMDK pool: PMDK writes the whole pool when it makes it (tmpfs memory).
        let options = PeerOptions {
            durability,
            workers: 2,
            pmemobj_pool_bytes: 32 << 20,
            ..Default::default()
        };
        match open_with(peer, &path, &options) {
            Ok(engine) => engine,
            Err(e) => panic!("open {peer} at {}: {e}", path.display()),
        }
    };
    run_all(&make, common::writers(peer));
}

#[test]
fn sqlite_durable() {
    conform("sqlite", PeerDurability::Durable);
}

#[test]
fn sqlite_relaxed() {
    conform("sqlite", PeerDurability::Relaxed);
}

#[test]
fn lmdb_durable() {
    conform("lmdb", PeerDurability::Durable);
}

#[test]
fn lmdb_relaxed() {
    conform("lmdb", PeerDurability::Relaxed);
}

#[test]
fn redb_durable() {
    conform("redb", PeerDurability::Durable);
}

#[test]
fn redb_relaxed() {
    conform("redb", PeerDurability::Relaxed);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_durable() {
    conform("rocksdb", PeerDurability::Durable);
}

#[cfg(feature = "rocksdb")]
#[test]
fn rocksdb_relaxed() {
    conform("rocksdb", PeerDurability::Relaxed);
}

#[cfg(feature = "pmemobj")]
#[test]
fn pmemobj_durable() {
    conform("pmemobj", PeerDurability::Durable);
}

#[cfg(feature = "pmemobj")]
#[test]
fn pmemobj_relaxed() {
    conform("pmemobj", PeerDurability::Relaxed);
}

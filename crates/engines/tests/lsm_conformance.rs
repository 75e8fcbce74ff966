//! The Engine conformance suite on the log-structured engine (`lsm`), NVM-Log on `dram` and
//! `sim`, with a memtable small enough that the checks' rows are flushed into runs and merged;
//! and the Log engine (`io=fs`: a DRAM memtable, runs read through the file) on a /dev/shm file.
//! Would catch: any deviation from the trait's semantics (locks, abort, scans, errors).

use engines::{device::Io, lsm::Lsm, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 16 << 20)).expect("region");
    let mut opts = EngineOptions { workers: 4, ..Default::default() };
    opts.lsm.memtable_bytes = 64 << 10;
    Box::new(Lsm::open(region, &opts).expect("open"))
}

#[test]
fn lsm_conformance_on_dram() {
    run_all(&|| make(Medium::Dram), Writers::KeyLocks);
}

#[test]
fn lsm_conformance_on_sim() {
    run_all(&|| make(Medium::Sim), Writers::KeyLocks);
}

/// `io=fs` on a fresh /dev/shm file, unlinked once open (the engine keeps its mapping and its
/// descriptor).
fn make_fs() -> Box<dyn Engine> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::path::PathBuf::from(format!(
        "/dev/shm/nvmdb-lsm-conformance-{}-{n}",
        std::process::id()
    ));
    let mut ro = RegionOptions::new(Medium::Shm, 16 << 20);
    ro.path = Some(path.clone());
    let region = Region::open(&ro).expect("region");
    let mut opts = EngineOptions { workers: 4, io: Io::Fs, ..Default::default() };
    opts.lsm.memtable_bytes = 64 << 10;
    let engine = Lsm::open(region, &opts);
    let _ = std::fs::remove_file(&path);
    Box::new(engine.expect("open"))
}

#[test]
fn lsm_io_fs_conformance() {
    run_all(&make_fs, Writers::KeyLocks);
}

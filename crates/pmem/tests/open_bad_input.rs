//! Catches `Region::open` panicking, leaving files behind, or giving a vague or multi-line error
//! on bad input: missing or short files, size 0, dax off DAX, no path, unsupported flushes.

use pmem::{
    CpuFlushSupport, FlushKind, Medium, PmemError, Region, RegionOptions, SyncMode, TimingOptions,
};
use std::path::{Path, PathBuf};

/// A fresh directory on tmpfs, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = PathBuf::from(format!("/dev/shm/nvmdb-bad-input-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    fn entries(&self) -> usize {
        std::fs::read_dir(&self.0).unwrap().count()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens, expects an error, and checks that its message is one line naming `needle`.
fn open_err(options: &RegionOptions, needle: &str) -> PmemError {
    let err = match Region::open(options) {
        Ok(_) => panic!("{options:?} opened"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "multi-line error: {msg:?}");
    assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
    err
}

fn file_options(medium: Medium, path: &Path, size_bytes: u64) -> RegionOptions {
    RegionOptions::new(medium, size_bytes).with_path(path)
}

#[test]
fn missing_file_without_create() {
    let dir = Scratch::new("missing");
    let path = dir.path("nope.region");
    let options = RegionOptions { create: false, ..file_options(Medium::File, &path, 4096) };
    let err = open_err(&options, "does not exist");
    assert!(matches!(err, PmemError::Missing { .. }));
    assert!(err.to_string().contains(path.to_str().unwrap()));
    assert_eq!(dir.entries(), 0);
}

#[test]
fn missing_file_with_size_zero_is_not_created() {
    let dir = Scratch::new("missing0");
    let path = dir.path("nope.region");
    let err = open_err(&file_options(Medium::File, &path, 0), "create it with a size");
    assert!(matches!(err, PmemError::Missing { .. }));
    assert_eq!(dir.entries(), 0, "an empty file was left behind");
}

#[test]
fn file_smaller_than_requested() {
    let dir = Scratch::new("small");
    let path = dir.path("small.region");
    std::fs::write(&path, [1u8; 100]).unwrap();
    let options = RegionOptions { create: false, ..file_options(Medium::File, &path, 4096) };
    let err = open_err(&options, "is 100 bytes, smaller than the 4096 bytes needed");
    assert!(matches!(err, PmemError::TooSmall { actual_bytes: 100, needed_bytes: 4096, .. }));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 100, "the file was changed");
}

#[test]
fn empty_file_with_size_zero() {
    let dir = Scratch::new("empty");
    let path = dir.path("empty.region");
    std::fs::write(&path, []).unwrap();
    let err = open_err(&file_options(Medium::File, &path, 0), "is empty");
    assert!(matches!(err, PmemError::EmptyFile { .. }));
}

#[test]
fn existing_file_opens_at_its_size_with_size_zero() {
    let dir = Scratch::new("existing");
    let path = dir.path("r.region");
    std::fs::write(&path, [3u8; 8192]).unwrap();
    let region = Region::open(&file_options(Medium::File, &path, 0)).unwrap();
    assert_eq!(region.len(), 8192);
    assert_eq!(region.read(8000, 2), [3, 3]);
}

#[test]
fn size_zero_for_anonymous_media() {
    for medium in [Medium::Dram, Medium::Sim, Medium::Shm] {
        let err = open_err(&RegionOptions::new(medium, 0), "region size must be > 0");
        assert!(matches!(err, PmemError::InvalidOption(_)), "{medium:?}");
    }
}

#[test]
fn dax_on_tmpfs_is_not_dax_and_leaves_nothing() {
    let dir = Scratch::new("dax");
    let path = dir.path("dax.region");
    let err = open_err(&file_options(Medium::Dax, &path, 1 << 20), "is not on a DAX file system");
    assert!(matches!(err, PmemError::NotDax { .. }), "{err:?}");
    assert!(err.to_string().contains("use --medium file or shm"));
    assert_eq!(dir.entries(), 0, "the region file it created was left behind");
    // An existing file keeps its length even though opening grew it first.
    std::fs::write(&path, [1u8; 4096]).unwrap();
    open_err(&file_options(Medium::Dax, &path, 1 << 20), "is not on a DAX file system");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 4096);
}

#[test]
fn file_media_need_a_path() {
    for medium in [Medium::File, Medium::Dax] {
        let err = open_err(&RegionOptions::new(medium, 4096), "needs a path (--path)");
        assert!(matches!(err, PmemError::NeedsPath { .. }), "{medium:?}");
        assert!(err.to_string().contains(medium.name()));
    }
    // `shm` makes a private file instead, and leaves nothing in /dev/shm.
    let region = Region::open(&RegionOptions::new(Medium::Shm, 4096)).unwrap();
    assert_eq!(region.path(), None);
}

#[test]
fn a_forced_flush_the_cpu_lacks_is_refused_before_touching_files() {
    let dir = Scratch::new("flush");
    let path = dir.path("r.region");
    let only_clflush = CpuFlushSupport { clwb: false, clflushopt: false, clflush: true };
    for kind in [FlushKind::Clwb, FlushKind::Clflushopt] {
        let options =
            RegionOptions { flush: Some(kind), ..file_options(Medium::File, &path, 4096) };
        let err = Region::open_with_cpu(&options, only_clflush).err().unwrap();
        assert!(matches!(err, PmemError::FlushUnsupported(_)), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains(kind.name()) && msg.contains("not supported by this CPU"), "{msg}");
        assert_eq!(dir.entries(), 0);
    }
    // And on this CPU: what it supports opens with exactly that instruction.
    let cpu = CpuFlushSupport::detect();
    for kind in [FlushKind::Clwb, FlushKind::Clflushopt, FlushKind::Clflush, FlushKind::None] {
        let options = RegionOptions { flush: Some(kind), ..RegionOptions::new(Medium::Shm, 4096) };
        match Region::open(&options) {
            Ok(region) => {
                assert!(cpu.supports(kind));
                assert_eq!(region.flush_kind(), kind);
                region.write(0, &[1; 100]);
                region.persist(0, 100);
            }
            Err(e) => assert!(!cpu.supports(kind), "{kind:?} is supported yet: {e}"),
        }
    }
}

#[test]
fn contradictory_options() {
    let msync_dram =
        RegionOptions { sync: SyncMode::Msync, ..RegionOptions::new(Medium::Dram, 64) };
    open_err(&msync_dram, "needs a file-backed medium");
    let dir = Scratch::new("contra");
    let path = dir.path("r.region");
    let both = RegionOptions {
        sync: SyncMode::Msync,
        eadr: true,
        ..file_options(Medium::File, &path, 4096)
    };
    open_err(&both, "contradict");
    assert_eq!(dir.entries(), 0);
    let slow = RegionOptions {
        timing: TimingOptions { persist_barrier_ns: 10_000_000_000, ..Default::default() },
        ..RegionOptions::new(Medium::Dram, 64)
    };
    open_err(&slow, "latency above 1 s");
}

#[test]
fn a_directory_or_a_missing_parent_is_an_io_error_naming_the_path() {
    let dir = Scratch::new("dir");
    let err = open_err(&file_options(Medium::File, &dir.0, 4096), dir.0.to_str().unwrap());
    assert!(matches!(err, PmemError::Io { .. }), "{err:?}");
    let deep = dir.path("no/such/dir/r.region");
    let err = open_err(&file_options(Medium::File, &deep, 4096), deep.to_str().unwrap());
    assert!(matches!(err, PmemError::Io { .. }), "{err:?}");
}

#[test]
fn unknown_names_list_the_choices() {
    let err = "nvram".parse::<Medium>().unwrap_err().to_string();
    assert!(err.contains("`nvram`") && err.contains("dram, shm, file, dax or sim"), "{err}");
    let err = "sfence".parse::<FlushKind>().unwrap_err().to_string();
    assert!(err.contains("`sfence`") && err.contains("clwb"), "{err}");
    let err = "half".parse::<pmem::CrashPolicy>().unwrap_err().to_string();
    assert!(err.contains("`half`") && err.contains("persisted, evict or torn"), "{err}");
    assert_eq!("DAX".parse::<Medium>().unwrap(), Medium::Dax);
    assert_eq!("CLWB".parse::<FlushKind>().unwrap(), FlushKind::Clwb);
}

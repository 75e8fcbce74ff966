//! Catches `Region::created` calling existing contents new (an engine would then format over a
//! database whose superblock happens to read as zero) or new contents old (a needless scan).

use pmem::{Medium, Region, RegionOptions};
use std::path::PathBuf;

/// A fresh directory on tmpfs, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = PathBuf::from(format!("/dev/shm/nvmdb-created-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn anonymous_and_private_regions_are_created() {
    for medium in [Medium::Dram, Medium::Sim, Medium::Shm] {
        let region = Region::open(&RegionOptions::new(medium, 8192)).unwrap();
        assert!(region.created(), "{medium}");
    }
}

#[test]
fn a_new_or_empty_file_is_created_and_a_file_with_contents_is_not() {
    let dir = Scratch::new("files");
    for medium in [Medium::Shm, Medium::File] {
        let path = dir.0.join(format!("{medium}.region"));
        let options = |size_bytes| RegionOptions::new(medium, size_bytes).with_path(&path);
        assert!(Region::open(&options(8192)).unwrap().created(), "{medium}: new file");
        // Nothing was written: the file is all zeros, but it had a length, so it has contents.
        assert!(!Region::open(&options(0)).unwrap().created(), "{medium}: reopened");
        assert!(!Region::open(&options(8192)).unwrap().created(), "{medium}: same size");
        assert!(!Region::open(&options(1 << 20)).unwrap().created(), "{medium}: grown");

        std::fs::write(&path, []).unwrap();
        assert!(Region::open(&options(8192)).unwrap().created(), "{medium}: empty file");
    }
}

#[test]
fn a_region_from_an_image_is_not_created() {
    let region = Region::from_image(&[0u8; 4096], &RegionOptions::default()).unwrap();
    assert!(!region.created());
}

//! A growable region (`max_size_bytes`): the mapping is the maximum, the file grows on demand.
//! Would catch: a grown file that loses what was written before it grew, a region that grows past
//! its maximum or silently fails to grow, and a private (check) mapping that extends its file.

use pmem::{Medium, PmemError, Region, RegionOptions};
use std::path::PathBuf;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = PathBuf::from(format!("/dev/shm/nvmdb-grows-{}-{name}.region", std::process::id()));
        let _ = std::fs::remove_file(&p);
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

const MIB: u64 = 1 << 20;

fn growable(path: &Scratch, size: u64, max: u64) -> RegionOptions {
    RegionOptions {
        max_size_bytes: max,
        ..RegionOptions::new(Medium::Shm, size).with_path(&path.0)
    }
}

#[test]
fn the_file_grows_on_demand_up_to_the_maximum_and_keeps_its_contents() {
    let path = Scratch::new("grow");
    let region = Region::open(&growable(&path, 4 * MIB, 256 * MIB)).unwrap();
    assert_eq!(region.len(), 256 * MIB, "the mapping covers the maximum");
    assert_eq!(region.backed_len(), 4 * MIB);
    region.write(4096, b"before");
    region.ensure_backed(5 * MIB).unwrap();
    let backed = region.backed_len();
    assert!((5 * MIB..=256 * MIB).contains(&backed), "{backed}");
    assert_eq!(std::fs::metadata(&path.0).unwrap().len(), backed, "the file grew with it");
    region.write(5 * MIB - 8, b"grown!!!");
    region.persist(5 * MIB - 8, 8);
    assert_eq!(region.read(4096, 6), b"before");
    match region.ensure_backed(257 * MIB) {
        Err(PmemError::Full { .. }) => {}
        other => panic!("beyond the maximum: {other:?}"),
    }
    region.ensure_backed(256 * MIB).unwrap();
    assert_eq!(region.backed_len(), 256 * MIB);
    drop(region);

    // Reopened at its grown size: the data written beyond the first size is there.
    let reopened = Region::open(&RegionOptions::new(Medium::Shm, 0).with_path(&path.0)).unwrap();
    assert_eq!(reopened.read(5 * MIB - 8, 8), b"grown!!!");
}

#[test]
fn a_fixed_or_private_region_does_not_grow() {
    let path = Scratch::new("fixed");
    let fixed = Region::open(&RegionOptions::new(Medium::Shm, 4 * MIB).with_path(&path.0)).unwrap();
    assert!(matches!(fixed.ensure_backed(5 * MIB), Err(PmemError::Full { .. })));
    fixed.ensure_backed(4 * MIB).unwrap();
    drop(fixed);
    let private = RegionOptions {
        private: true,
        create: false,
        max_size_bytes: 64 * MIB,
        ..RegionOptions::new(Medium::Shm, 0).with_path(&path.0)
    };
    let region = Region::open(&private).unwrap();
    assert_eq!(region.backed_len(), 4 * MIB);
    assert!(matches!(region.ensure_backed(5 * MIB), Err(PmemError::Full { .. })));
    assert_eq!(std::fs::metadata(&path.0).unwrap().len(), 4 * MIB, "the file is untouched");
}

#[test]
fn growth_is_refused_on_anonymous_media_and_below_the_size() {
    for medium in [Medium::Dram, Medium::Sim] {
        let o = RegionOptions { max_size_bytes: 8 * MIB, ..RegionOptions::new(medium, MIB) };
        assert!(matches!(Region::open(&o), Err(PmemError::InvalidOption(_))), "{medium}");
    }
    let path = Scratch::new("small");
    assert!(matches!(
        Region::open(&growable(&path, 8 * MIB, 4 * MIB)),
        Err(PmemError::InvalidOption(_))
    ));
}

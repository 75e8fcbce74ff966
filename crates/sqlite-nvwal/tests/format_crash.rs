//! Regression test found by `nvmdb crashtest --engine sqlite-nvwal` load crashes (3 in 2,000
//! points): a region cut while its header was being formatted did not open again ("geometry
//! checksum mismatch", "the region holds something else"). A crash at any store or fence of the
//! format, under every policy, must leave a region that opens (formatting it again if needed).

use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use sqlite_nvwal::store::Store;
use sqlite_nvwal::NvwalOptions;

const REGION_BYTES: u64 = 12 << 20;

#[test]
fn a_format_cut_short_opens_again() {
    let options = NvwalOptions { log_bytes: Some(4 << 20), ..NvwalOptions::default() };
    let mut cuts = 0;
    for event in [CrashEvent::Fence, CrashEvent::Store] {
        for count in 1..=12u64 {
            for (i, policy) in CrashPolicy::ALL.into_iter().enumerate() {
                let region = Region::open(&RegionOptions::new(Medium::Sim, REGION_BYTES))
                    .expect("a sim region");
                let sim = region.sim().expect("sim medium");
                let seed = count * 31 + i as u64;
                sim.arm(CrashPoint { event, count }, policy, seed);
                let _ = Store::open(region.clone(), &options);
                let Some(image) = sim.take_image() else { continue };
                cuts += 1;
                let crashed =
                    Region::from_image(&image, &RegionOptions::default()).expect("an image region");
                let what = format!("{event:?} {count} {policy:?}");
                let store = Store::open(crashed, &options)
                    .unwrap_or_else(|e| panic!("{what}: the region does not open: {e}"));
                assert_eq!(store.committed_frames(), 0, "{what}: frames in a new region");
            }
        }
    }
    assert!(cuts > 20, "only {cuts} crash points fell inside the format");
}

//! Catches the `evict` policy tearing a line (mixing words of two versions) or inventing a line
//! version, and an `evict` policy that never writes back an unpersisted line at all.

mod common;

use common::{ops, run, LINE, REGION_BYTES};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;

proptest! {
    #[test]
    fn every_line_is_one_whole_version(ops in ops(REGION_BYTES)) {
        run(&vec![0u8; REGION_BYTES], &ops, |model, policy, image| {
            if policy != CrashPolicy::Evict {
                return Ok(());
            }
            for (line, got) in image.chunks(LINE).enumerate() {
                let newer = &model.versions[line][model.persisted[line]..];
                prop_assert!(
                    newer.iter().any(|v| &v[..] == got),
                    "line {} is no whole version at or after the persisted one: {:?}",
                    line,
                    got
                );
            }
            Ok(())
        })?;
    }
}

#[test]
fn evict_images_sometimes_hold_unpersisted_lines() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    region.write(0, &[7; LINE]);
    let (mut old, mut new) = (0, 0);
    for seed in 0..64 {
        match region.crash_image(CrashPolicy::Evict, seed).unwrap()[..LINE] {
            [0, ..] => old += 1,
            [7, ..] => new += 1,
            ref other => panic!("seed {seed}: line is neither version: {other:?}"),
        }
    }
    assert!(old > 0 && new > 0, "64 evict images: {old} kept the old line, {new} the new");
}

//! Catches the `persisted` policy leaking stores that never completed a persist: unflushed
//! stores, and flushed stores whose fence had not run yet (or a fence of the wrong thread).

mod common;

use common::{ops, run, LINE, REGION_BYTES};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;

proptest! {
    #[test]
    fn persisted_image_is_exactly_the_completed_persists(ops in ops(REGION_BYTES)) {
        run(&vec![0u8; REGION_BYTES], &ops, |model, policy, image| {
            if policy != CrashPolicy::Persisted {
                return Ok(());
            }
            for (line, got) in image.chunks(LINE).enumerate() {
                let want = &model.versions[line][model.persisted[line]];
                prop_assert_eq!(got, &want[..], "line {}", line);
            }
            Ok(())
        })?;
    }
}

#[test]
fn unflushed_and_unfenced_stores_are_not_in_the_image() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    let zeros = vec![0u8; 4096];
    region.write(0, &[1; 64]);
    assert_eq!(region.crash_image(CrashPolicy::Persisted, 1).unwrap(), zeros, "unflushed");
    region.flush(0, 64);
    assert_eq!(region.crash_image(CrashPolicy::Persisted, 2).unwrap(), zeros, "unfenced");
    region.fence();
    let image = region.crash_image(CrashPolicy::Persisted, 3).unwrap();
    assert_eq!(&image[..64], &[1; 64], "persisted");
    // A fence without a flush persists nothing.
    region.write(64, &[2; 64]);
    region.fence();
    assert_eq!(region.crash_image(CrashPolicy::Persisted, 4).unwrap()[64..128], [0; 64]);
}

//! Catches `Region::from_image` failing to reopen a crash image faithfully: contents differ,
//! the reopened region's persisted state is not the image, or it cannot crash again.

use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn an_image_reopens_as_itself(
        image in prop::collection::vec(any::<u8>(), 1..5000),
        writes in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..20),
    ) {
        let options = RegionOptions::new(Medium::Sim, 0);
        let region = Region::from_image(&image, &options).unwrap();
        prop_assert_eq!(region.len(), image.len() as u64);
        prop_assert_eq!(region.medium(), Medium::Sim);
        prop_assert_eq!(region.read(0, image.len()), &image[..]);
        prop_assert_eq!(region.stats(), pmem::Stats::default());
        // Nothing happened yet: every policy leaves the image as it was.
        for policy in CrashPolicy::ALL {
            prop_assert_eq!(region.crash_image(policy, 1).unwrap(), image.clone());
        }
        // Unpersisted writes vanish under `persisted`: the image is the persisted state.
        for (at, byte) in &writes {
            region.write(at.index(image.len()) as u64, &[*byte]);
        }
        let again = region.crash_image(CrashPolicy::Persisted, 2).unwrap();
        prop_assert_eq!(&again, &image);
        // And an image of the reopened region reopens in turn.
        let reopened = Region::from_image(&again, &options).unwrap();
        prop_assert_eq!(reopened.snapshot(), image);
    }
}

#[test]
fn a_persisted_write_survives_a_second_crash() {
    let options = RegionOptions::new(Medium::Sim, 0);
    let first = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    first.write_u64(8, 41);
    first.persist(8, 8);
    let image = first.crash_image(CrashPolicy::Persisted, 0).unwrap();
    let second = Region::from_image(&image, &options).unwrap();
    assert_eq!(second.read_u64(8), 41);
    second.write_u64(16, 42);
    second.persist(16, 8);
    second.write_u64(24, 43); // never persisted
    let image = second.crash_image(CrashPolicy::Persisted, 0).unwrap();
    let third = Region::from_image(&image, &options).unwrap();
    assert_eq!((third.read_u64(8), third.read_u64(16), third.read_u64(24)), (41, 42, 0));
}

#[test]
fn the_options_of_the_run_that_made_the_image_are_accepted() {
    let run = RegionOptions {
        sync: pmem::SyncMode::Msync,
        ..RegionOptions::new(Medium::File, 1 << 20).with_path("/nonexistent/region")
    };
    let region = Region::from_image(&[1, 2, 3], &run).unwrap();
    assert_eq!((region.medium(), region.len(), region.path()), (Medium::Sim, 3, None));
}

#[test]
fn an_empty_image_is_an_error() {
    let err = Region::from_image(&[], &RegionOptions::new(Medium::Sim, 0)).err().unwrap();
    assert!(err.to_string().contains("empty crash image"), "{err}");
}

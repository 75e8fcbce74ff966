//! Catches the crash simulator ignoring `eadr` (durable CPU caches): with it, every completed
//! store survives a crash whether or not it was flushed, under every policy.

use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};

#[test]
fn with_eadr_every_policy_keeps_unflushed_stores() {
    let options = RegionOptions { eadr: true, ..RegionOptions::new(Medium::Sim, 4096) };
    let region = Region::open(&options).unwrap();
    region.write(100, &[5; 300]);
    region.write_u64(1024, 77);
    for policy in CrashPolicy::ALL {
        assert_eq!(region.crash_image(policy, 3).unwrap(), region.snapshot(), "{policy:?}");
    }
}

#[test]
fn with_eadr_an_armed_cut_holds_the_stores_before_it() {
    let options = RegionOptions { eadr: true, ..RegionOptions::new(Medium::Sim, 4096) };
    let region = Region::open(&options).unwrap();
    let sim = region.sim().unwrap();
    sim.arm(CrashPoint { event: CrashEvent::Store, count: 3 }, CrashPolicy::Persisted, 0);
    for i in 0..5u64 {
        region.write_u64(i * 8, i + 1);
    }
    let image = sim.take_image().unwrap();
    let words: Vec<u64> =
        (0..5).map(|i| u64::from_le_bytes(image[i * 8..i * 8 + 8].try_into().unwrap())).collect();
    assert_eq!(words, [1, 2, 0, 0, 0]);
}

#[test]
fn without_eadr_unflushed_stores_are_lost() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    region.write(100, &[5; 300]);
    assert_eq!(region.crash_image(CrashPolicy::Persisted, 3).unwrap(), vec![0; 4096]);
}

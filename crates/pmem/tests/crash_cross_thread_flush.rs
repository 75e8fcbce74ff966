//! Regression (found by review): a line flushed by one thread and then flushed and fenced by
//! another was not persisted by the second thread's fence, because the simulator skipped lines
//! another thread's flush had already snapshotted.

use pmem::{CrashPolicy, Medium, Region, RegionOptions};

#[test]
fn a_thread_persists_a_line_another_thread_flushed_but_did_not_fence() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    region.write(0, &[9; 64]);
    region.flush(0, 64);
    std::thread::scope(|s| {
        s.spawn(|| region.persist(0, 64));
    });
    let image = region.crash_image(CrashPolicy::Persisted, 0).unwrap();
    assert_eq!(image[..64], [9; 64], "the other thread's flush + fence must persist the line");
}

#[test]
fn a_fence_does_not_complete_another_threads_flush() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    region.write(0, &[9; 64]);
    region.flush(0, 64);
    std::thread::scope(|s| {
        s.spawn(|| region.fence());
    });
    let image = region.crash_image(CrashPolicy::Persisted, 0).unwrap();
    assert_eq!(image[..64], [0; 64], "SFENCE orders only its own thread's flushes");
    region.fence();
    let image = region.crash_image(CrashPolicy::Persisted, 0).unwrap();
    assert_eq!(image[..64], [9; 64]);
}

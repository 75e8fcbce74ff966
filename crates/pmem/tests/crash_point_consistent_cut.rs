//! Catches an armed crash point that cuts an inconsistent image while several threads write:
//! an image missing a persist that another persisted record had already observed, or cut one
//! event early or late.
//!
//! Each thread, at step i: reads every other thread's progress word, stores a record (its step
//! and the progress it saw) in its own log line and persists it, then stores and persists its own
//! progress word = i. A record that saw thread u at step j implies u's records 1..=j persisted
//! before it was written, so a consistent cut holding the record holds them too. Every step is
//! 2 stores and 2 fences, so the image also tells how many fences completed before the cut.

use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;
use std::sync::Barrier;

const THREADS: usize = 4;
const STEPS: u64 = 60;
const LINE: u64 = 64;

fn progress_offset(t: usize) -> u64 {
    t as u64 * LINE
}

fn log_offset(t: usize, step: u64) -> u64 {
    (THREADS as u64 + t as u64 * STEPS + (step - 1)) * LINE
}

fn tag(t: usize, step: u64) -> u64 {
    0xC0DE_0000_0000_0000 | (t as u64) << 32 | step
}

fn worker(region: &Region, t: usize, barrier: &Barrier) {
    barrier.wait();
    for step in 1..=STEPS {
        let mut record = [0u64; 8];
        record[0] = tag(t, step);
        for u in 0..THREADS {
            record[1 + u] = region.read_u64(progress_offset(u));
        }
        let bytes: Vec<u8> = record.iter().flat_map(|w| w.to_le_bytes()).collect();
        region.write(log_offset(t, step), &bytes);
        region.persist(log_offset(t, step), LINE);
        region.write_u64(progress_offset(t), step);
        region.persist(progress_offset(t), 8);
    }
}

fn word(image: &[u8], offset: u64, index: usize) -> u64 {
    let at = offset as usize + index * 8;
    u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
}

/// Checks the image; returns the number of fences it shows completed.
fn check(image: &[u8]) -> Result<u64, TestCaseError> {
    let mut persisted_steps = [0u64; THREADS];
    for (t, steps) in persisted_steps.iter_mut().enumerate() {
        *steps = (1..=STEPS).take_while(|&i| word(image, log_offset(t, i), 0) == tag(t, i)).count()
            as u64;
        for i in *steps + 1..=STEPS {
            prop_assert_eq!(
                word(image, log_offset(t, i), 0),
                0,
                "thread {} record {} after a gap",
                t,
                i
            );
        }
    }
    let mut fences = 0;
    for t in 0..THREADS {
        let progress = word(image, progress_offset(t), 0);
        let k = persisted_steps[t];
        prop_assert!(
            progress == k || progress + 1 == k,
            "thread {}: progress {} vs {} records",
            t,
            progress,
            k
        );
        fences += k + progress;
        for i in 1..=k {
            for (u, &held) in persisted_steps.iter().enumerate() {
                let seen = word(image, log_offset(t, i), 1 + u);
                prop_assert!(
                    seen <= held,
                    "thread {}'s record {} saw thread {} at step {}, but the image holds only {} \
                     of its records",
                    t,
                    i,
                    u,
                    seen,
                    held
                );
            }
        }
    }
    Ok(fences)
}

fn run(event: CrashEvent, count: u64, seed: u64) -> Result<(), TestCaseError> {
    let size = (THREADS as u64 * (STEPS + 1)) * LINE;
    let region = Region::open(&RegionOptions::new(Medium::Sim, size)).unwrap();
    let sim = region.sim().unwrap();
    sim.arm(CrashPoint { event, count }, CrashPolicy::Persisted, seed);
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (region, barrier) = (&region, &barrier);
            s.spawn(move || worker(region, t, barrier));
        }
    });
    prop_assert!(sim.cut_taken());
    let image = sim.take_image().unwrap();
    let fences = check(&image)?;
    match event {
        CrashEvent::Fence => prop_assert_eq!(fences, count - 1, "cut before fence {}", count),
        // Each thread may have one store whose fence had not run at the cut.
        CrashEvent::Store => prop_assert!(
            fences < count && fences + THREADS as u64 >= count - 1,
            "cut before store {} shows {} fences",
            count,
            fences
        ),
    }
    Ok(())
}

const EVENTS: u64 = THREADS as u64 * STEPS * 2;

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn nth_fence_cuts_a_consistent_image(count in 1..=EVENTS, seed in any::<u64>()) {
        run(CrashEvent::Fence, count, seed)?;
    }

    #[test]
    fn nth_store_cuts_a_consistent_image(count in 1..=EVENTS, seed in any::<u64>()) {
        run(CrashEvent::Store, count, seed)?;
    }
}

//! Catches lost statistics updates: threads sharing a counter shard (once more threads live than
//! there are owned shards) must update it atomically, and an exited thread's counts must stay.

use pmem::{Medium, Region, RegionOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

#[test]
fn counts_are_exact_when_threads_share_a_shard() {
    // More holders than owned shards: every owned shard is taken while the hammers run, so the
    // hammers share the last shard. They run for a fixed time rather than a fixed count, so that
    // they overlap on both cores even when the machine is busy.
    const HOLDERS: usize = 64;
    const HAMMERS: usize = 2;
    const RUN: Duration = Duration::from_millis(150);
    let region = Region::open(&RegionOptions::new(Medium::Dram, 1 << 20)).unwrap();
    let claimed = Barrier::new(HOLDERS + 1);
    let done = Barrier::new(HOLDERS + 1);
    let writes = AtomicU64::new(0);
    let flushes = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..HOLDERS {
            s.spawn(|| {
                region.write_u64(0, 1); // claims a shard
                claimed.wait();
                done.wait();
            });
        }
        claimed.wait();
        std::thread::scope(|h| {
            for t in 0..HAMMERS as u64 {
                let (region, writes, flushes) = (&region, &writes, &flushes);
                h.spawn(move || {
                    let started = Instant::now();
                    let (mut i, mut persisted) = (0u64, 0u64);
                    while i % 1024 != 0 || started.elapsed() < RUN {
                        region.write_u64(4096 + t * 64 + i % 8 * 8, i);
                        if i % 64 == 0 {
                            region.persist(4096 + t * 64, 8);
                            persisted += 1;
                        }
                        i += 1;
                    }
                    writes.fetch_add(i, Ordering::Relaxed);
                    flushes.fetch_add(persisted, Ordering::Relaxed);
                });
            }
        });
        done.wait();
    });
    let stats = region.stats();
    let n = writes.load(Ordering::Relaxed) + HOLDERS as u64;
    assert_eq!(stats.stores, n);
    assert_eq!(stats.bytes_written, n * 8);
    assert_eq!(stats.lines_flushed, flushes.load(Ordering::Relaxed));
    assert_eq!(stats.fences, stats.lines_flushed);
}

#[test]
fn counts_of_exited_threads_are_kept() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 4096)).unwrap();
    for round in 1..=100u64 {
        std::thread::scope(|s| {
            s.spawn(|| region.write(0, &[1, 2, 3]));
        });
        assert_eq!(region.stats().stores, round);
        assert_eq!(region.stats().bytes_written, round * 3);
    }
}

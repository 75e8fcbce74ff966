//! Measures the modelled persist-barrier delay: the distribution of single delays (median and
//! tail) and the mean per fence against wall time. On a loaded machine the mean exceeds the
//! request because a spinning thread that is descheduled keeps the TSC running; the median shows
//! the delay loop itself. `cargo run --release -p nvmdb-pmem --example fence_delay -- 1000`
use pmem::{Medium, Region, RegionOptions, TimingOptions};
use std::time::Instant;

fn main() {
    let ns: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mut o = RegionOptions::new(Medium::Dram, 1 << 20);
    o.timing = TimingOptions { persist_barrier_ns: ns, ..Default::default() };
    let tsc = pmem::Tsc::get();
    let t = Instant::now();
    for _ in 0..100_000 {
        tsc.delay_ns(ns);
    }
    println!("delay_ns({ns}): wall {:.0} ns", t.elapsed().as_nanos() as f64 / 1e5);
    let mut v: Vec<u64> = (0..100_000).map(|_| tsc.ticks_to_ns(tsc.delay_ns(ns))).collect();
    v.sort_unstable();
    println!(
        "delay_ns({ns}): median {} ns, p10 {} p90 {} p99 {}",
        v[50_000], v[10_000], v[90_000], v[99_000]
    );
    let t = Instant::now();
    for _ in 0..100_000 {
        pmem::flush::store_fence();
    }
    println!("sfence alone: {:.0} ns", t.elapsed().as_nanos() as f64 / 1e5);
    let r = Region::open(&o).expect("region");
    let n = 100_000;
    let t0 = Instant::now();
    for i in 0..n {
        r.write_u64((i % 1000) * 8, i);
        r.persist((i % 1000) * 8, 8);
    }
    let wall = t0.elapsed().as_nanos() as f64 / n as f64;
    let s = r.stats();
    println!(
        "requested {ns} ns: wall {wall:.0} ns/fence, modelled {:.0} ns/fence, tsc {:.4} ticks/ns",
        s.delay_ns as f64 / s.fences as f64,
        pmem::Tsc::get().ticks_per_ns()
    );
}

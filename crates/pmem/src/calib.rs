//! Measurement kernels behind `nvmdb calibrate` (thesis §5.1: delay precision, Fig. 5.1;
//! bandwidth-reservation accuracy, Table 5.2), and the cost of store + flush + fence through raw
//! instructions and through the region API. They live in `pmem` because the raw baseline needs
//! the mapping's address and the flush instructions, which nothing outside this crate touches.
//!
//! Every kernel returns raw TSC ticks or per-sample nanoseconds; statistics are the caller's.

use crate::flush::{flush_line, store_fence, CACHE_LINE};
use crate::region::Region;
use crate::timing::{rdtsc, TimingModel, TimingOptions, Tsc};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Lines the store/flush kernels cycle through: small enough to stay in L2, large enough that
/// a line is cold in the write-back path by the time it is stored again.
pub const RING_LINES: u64 = 1024;

/// Bound on one kernel's repetitions, so a typo cannot run for hours.
pub const MAX_REPS: usize = 10_000_000;

/// Median cost of two back-to-back `rdtsc` reads, in ticks: what a `rdtsc; work; rdtsc`
/// measurement adds to the work.
pub fn rdtsc_pair_ticks() -> u64 {
    let mut samples = crate::timing::rdtsc_pair_samples(10_001);
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// Times `reps` calls of [`Tsc::delay_ns`]`(requested_ns)`; returns each call's duration in
/// nanoseconds, measurement overhead (`pair_ticks`, see [`rdtsc_pair_ticks`]) subtracted.
pub fn measure_delay_ns(requested_ns: u64, reps: usize, pair_ticks: u64) -> Vec<f64> {
    measure_delay_on(Tsc::get(), requested_ns, reps, pair_ticks)
}

/// [`measure_delay_ns`] on the clock `tsc` (its rate and the fixed cost it subtracts).
pub fn measure_delay_on(tsc: &Tsc, requested_ns: u64, reps: usize, pair_ticks: u64) -> Vec<f64> {
    (0..reps.min(MAX_REPS))
        .map(|_| {
            let t0 = rdtsc();
            tsc.delay_ns(requested_ns);
            let t1 = rdtsc();
            t1.wrapping_sub(t0).saturating_sub(pair_ticks) as f64 / tsc.ticks_per_ns()
        })
        .collect()
}

/// Thesis Fig. 5.1: the median duration of `tsc`'s [`Tsc::delay_ns`] for each intended delay
/// in `intended_ns`, `reps` trials each (the thesis takes the median of ten thousand: "a small
/// number of trials result in excessively large delays and skew the mean").
pub fn delay_medians_ns(tsc: &Tsc, intended_ns: &[u64], reps: usize, pair_ticks: u64) -> Vec<f64> {
    intended_ns
        .iter()
        .map(|&ns| {
            let mut samples = measure_delay_on(tsc, ns, reps.max(1), pair_ticks);
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect()
}

/// The least-squares fit of thesis §5.1, `delay(x) = a * floor(x / a + b) + c`: delays come in
/// steps of `a` (one loop iteration), `b` is where in a step the loop's deadline falls, `c` the
/// fixed cost. The thesis finds `a = 12.5`, `b = .434`, `c = 10.1` with `R^2 = .997`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepFit {
    pub a_ns: f64,
    pub b: f64,
    pub c_ns: f64,
    /// `1 - SS_res / SS_tot` of the fit.
    pub r2: f64,
}

impl StepFit {
    pub fn at(&self, x_ns: f64) -> f64 {
        self.a_ns * (x_ns / self.a_ns + self.b).floor() + self.c_ns
    }
}

/// Steps the fit considers, in ns: below 2 ns a step function is a straight line (any data fits
/// it), above 40 ns no `rdtsc` loop iteration has ever been.
pub const STEP_FIT_RANGE_NS: (f64, f64) = (2.0, 40.0);

/// Fits [`StepFit`] to `(x, y)` by search: `c` is the mean residual for each `(a, b)`, `(a, b)`
/// a grid over [`STEP_FIT_RANGE_NS`] x `[0, 1)`, refined around the best point. The objective
/// is piecewise constant in `(a, b)` (it jumps where a point changes step), so no gradient
/// method applies. `None` with fewer than three points or no spread in `y`.
pub fn fit_step(x: &[f64], y: &[f64]) -> Option<StepFit> {
    if x.len() != y.len() || x.len() < 3 {
        return None;
    }
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let ss_tot: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    if ss_tot <= 0.0 {
        return None;
    }
    // Sum of squared residuals at (a, b), with c at its optimum, and that c.
    let sse = |a: f64, b: f64| -> (f64, f64) {
        let steps = x.iter().map(|&xi| a * (xi / a + b).floor());
        let c = y.iter().zip(steps.clone()).map(|(yi, s)| yi - s).sum::<f64>() / n;
        let e = y.iter().zip(steps).map(|(yi, s)| (yi - s - c).powi(2)).sum();
        (e, c)
    };
    // (sse, a, b, c) of the best point so far.
    let mut best = (f64::INFINITY, 0.0, 0.0, 0.0);
    let search = |best: &mut (f64, f64, f64, f64), a_grid: [f64; 3], b_grid: [f64; 3]| {
        let steps = |[from, to, step]: [f64; 3]| {
            (0..).map(move |i| from + i as f64 * step).take_while(move |v| *v <= to)
        };
        for a in steps(a_grid) {
            for b in steps(b_grid) {
                let (e, c) = sse(a, b);
                if e < best.0 {
                    *best = (e, a, b, c);
                }
            }
        }
    };
    let (lo, hi) = STEP_FIT_RANGE_NS;
    search(&mut best, [lo, hi, 0.02], [0.0, 0.99, 0.01]);
    let (_, a0, b0, _) = best;
    search(&mut best, [a0 - 0.05, a0 + 0.05, 0.001], [b0 - 0.02, b0 + 0.02, 0.0005]);
    let (e, a_ns, b, c_ns) = best;
    // The same function with b in [0, 1): a whole step moves from floor() into c.
    let shift = b.floor();
    Some(StepFit { a_ns, b: b - shift, c_ns: c_ns + shift * a_ns, r2: 1.0 - e / ss_tot })
}

/// `R^2` of the ordinary least-squares straight line through `(x, y)`: what a step fit must
/// beat for the delays to be steps at all (a fine enough step function is a line).
pub fn line_r2(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    if x.len() != y.len() || x.len() < 3 {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx).powi(2)).sum();
    let syy: f64 = y.iter().map(|b| (b - my).powi(2)).sum();
    (sxx > 0.0 && syy > 0.0).then(|| sxy * sxy / (sxx * syy))
}

/// Times `reps` fences of a `dram` region whose timing model charges `barrier_ns` per persist
/// barrier; returns each fence's duration in nanoseconds minus the median duration of a fence
/// on the same medium without the model (so what remains is the modelled delay).
pub fn measure_barrier_ns(barrier_ns: u64, reps: usize) -> crate::Result<Vec<f64>> {
    let tsc = Tsc::get();
    let time_fences = |region: &Region| -> Vec<f64> {
        (0..reps.min(MAX_REPS))
            .map(|_| {
                let t0 = rdtsc();
                region.fence();
                rdtsc().wrapping_sub(t0) as f64 / tsc.ticks_per_ns()
            })
            .collect()
    };
    let options = crate::RegionOptions::new(crate::Medium::Dram, 4096);
    let plain = Region::open(&options)?;
    let mut base = time_fences(&plain);
    base.sort_by(f64::total_cmp);
    let base_ns = base[base.len() / 2];
    let timing = TimingOptions { persist_barrier_ns: barrier_ns, ..Default::default() };
    let timed = Region::open(&crate::RegionOptions { timing, ..options })?;
    Ok(time_fences(&timed).into_iter().map(|ns| (ns - base_ns).max(0.0)).collect())
}

/// How the store/flush kernels issue their work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// `copy_nonoverlapping` + the flush instruction + `sfence`, straight on the mapping.
    Raw,
    /// `Region::write` + `Region::flush` per line, `Region::fence` per batch.
    Api,
}

/// Stores `store_bytes` (1..=64) into each of `batch_lines` lines, flushes each, then fences
/// once; `rounds` times, cycling through [`RING_LINES`] lines of `region`. Returns total ticks.
/// The raw path uses the region's flush instruction, so both paths do the same hardware work.
pub fn store_flush_fence_ticks(
    region: &Region,
    path: Path,
    store_bytes: usize,
    batch_lines: u64,
    rounds: u64,
) -> u64 {
    assert!((1..=CACHE_LINE as usize).contains(&store_bytes), "store of {store_bytes} bytes");
    let ring = RING_LINES.min(region.len() / CACHE_LINE);
    assert!(ring > 0 && batch_lines > 0, "region of {} bytes too small", region.len());
    let kind = region.flush_kind();
    let base = region.base_ptr();
    let mut payload = [0x5au8; CACHE_LINE as usize];
    let mut line = 0u64;
    let start = rdtsc();
    for round in 0..rounds {
        payload[..8].copy_from_slice(&round.to_le_bytes());
        for _ in 0..batch_lines {
            let offset = line * CACHE_LINE;
            match path {
                Path::Raw => {
                    // SAFETY: `offset + store_bytes <= ring * 64 <= region.len()`: inside the
                    // live mapping; `kind` was checked against CPUID when the region opened.
                    unsafe {
                        let target = base.add(offset as usize);
                        std::ptr::copy_nonoverlapping(payload.as_ptr(), target, store_bytes);
                        flush_line(kind, target);
                    }
                }
                Path::Api => {
                    region.write(offset, &payload[..store_bytes]);
                    region.flush(offset, store_bytes as u64);
                }
            }
            line = if line + 1 == ring { 0 } else { line + 1 };
        }
        match path {
            Path::Raw => store_fence(),
            Path::Api => region.fence(),
        }
    }
    rdtsc().wrapping_sub(start)
}

/// What [`reservation_fraction`] saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReservationRun {
    pub reservations: u64,
    /// Device time reserved, in ticks.
    pub reserved_ticks: u64,
    /// Device idle between back-to-back reservations: the reservation overhead.
    pub overhead_idle_ticks: u64,
    /// Device idle longer than [`PREEMPTION_GAP_NS`]: every thread was off the CPU.
    pub preempted_idle_ticks: u64,
    pub elapsed_ticks: u64,
    /// How late threads returned from waiting for their reservations, in nanoseconds past each
    /// reservation's end: 99th percentile (the delay error of 99 % of reservations).
    pub late_ns_p99: f64,
    /// CPU time the reserving threads got, over threads x elapsed time: below 1 when they
    /// shared the cores with other work (another process on a shared machine), so that fewer
    /// of them reserved at once than the run asked for.
    pub on_cpu_fraction: f64,
}

impl ReservationRun {
    /// Fraction of device time reserved while some thread was running: Table 5.2's measure.
    pub fn fraction_reserved(&self) -> f64 {
        let busy = self.reserved_ticks + self.overhead_idle_ticks;
        if busy == 0 {
            return 0.0;
        }
        self.reserved_ticks as f64 / busy as f64
    }

    /// Fraction of wall time reserved (also counts time the threads were preempted).
    pub fn wall_fraction(&self) -> f64 {
        (self.reserved_ticks as f64 / self.elapsed_ticks.max(1) as f64).min(1.0)
    }
}

/// CPU time of the calling thread, in nanoseconds (0 where the clock is unavailable).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    if rc != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

const LATE_BUCKET_NS: usize = 2;
const LATE_BUCKETS: usize = 4096;

/// An idle gap at least this long is a preemption (every reserving thread descheduled), not
/// reservation overhead; on a shared machine those would otherwise swamp the measurement.
pub const PREEMPTION_GAP_NS: u64 = 5_000;

/// Thesis Table 5.2: `threads` threads repeatedly reserve `reservation_ns` of device time on one
/// shared `next_available` word and wait until their reservation ends, for `duration`. The
/// device idles between reservations when reserving costs more than the reservation lasts; the
/// fraction reserved (1.0 = modelled bandwidth exact) is what [`ReservationRun`] reports.
pub fn reservation_fraction(
    reservation_ns: u64,
    threads: usize,
    duration: Duration,
) -> ReservationRun {
    let tsc = Tsc::get();
    // One line per reservation: bandwidth = 64 bytes per `reservation_ns`.
    let bandwidth = (CACHE_LINE as f64 * 1e9 / reservation_ns.max(1) as f64) as u64;
    let model = TimingModel::new(TimingOptions {
        write_bandwidth_bytes_per_s: bandwidth.max(64),
        ..Default::default()
    });
    let gap_limit = tsc.ns_to_ticks(PREEMPTION_GAP_NS);
    // Reservations, overhead idle ticks, preempted idle ticks, thread CPU nanoseconds.
    let totals = [const { AtomicU64::new(0) }; 4];
    // Lateness histogram: 2 ns buckets up to 8 µs, the last one open-ended.
    let late = [const { AtomicU64::new(0) }; LATE_BUCKETS];
    let stop = AtomicBool::new(false);
    let go = AtomicBool::new(false);
    let t0 = std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let cpu_start_ns = thread_cpu_ns();
                let (mut count, mut overhead, mut preempted) = (0u64, 0u64, 0u64);
                let mut hist = vec![0u64; LATE_BUCKETS];
                while !stop.load(Ordering::Relaxed) {
                    let (idle, end) = model.reserve_lines_until(1);
                    let ended = model.on_fence_ended();
                    let late_ns = tsc.ticks_to_ns(ended.saturating_sub(end)) as usize;
                    hist[(late_ns / LATE_BUCKET_NS).min(LATE_BUCKETS - 1)] += 1;
                    if idle < gap_limit {
                        overhead += idle;
                    } else if count > 0 {
                        // (A thread's first reservation may find the word at tick 0.)
                        preempted += idle;
                    }
                    count += 1;
                }
                let cpu_ns = thread_cpu_ns().saturating_sub(cpu_start_ns);
                for (total, v) in totals.iter().zip([count, overhead, preempted, cpu_ns]) {
                    total.fetch_add(v, Ordering::Relaxed);
                }
                for (bucket, n) in late.iter().zip(hist) {
                    bucket.fetch_add(n, Ordering::Relaxed);
                }
            });
        }
        let t0 = rdtsc();
        go.store(true, Ordering::Release);
        let started = Instant::now();
        while started.elapsed() < duration {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Relaxed);
        t0
    });
    // Every reservation started after `t0` and was waited for before its thread ended.
    let elapsed_ticks = rdtsc().wrapping_sub(t0);
    let reservations = totals[0].load(Ordering::Relaxed);
    let hist: Vec<u64> = late.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    let (mut seen, wanted) = (0u64, (hist.iter().sum::<u64>() * 99).div_ceil(100));
    let p99_bucket = hist.iter().position(|n| {
        seen += n;
        seen >= wanted
    });
    let thread_ns = threads.max(1) as f64 * elapsed_ticks as f64 / tsc.ticks_per_ns();
    ReservationRun {
        on_cpu_fraction: (totals[3].load(Ordering::Relaxed) as f64 / thread_ns).min(1.0),
        late_ns_p99: p99_bucket.map_or(0.0, |b| ((b + 1) * LATE_BUCKET_NS) as f64),
        reservations,
        reserved_ticks: reservations * model.line_ticks(),
        overhead_idle_ticks: totals[1].load(Ordering::Relaxed),
        preempted_idle_ticks: totals[2].load(Ordering::Relaxed),
        elapsed_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Medium, RegionOptions};

    #[test]
    fn both_paths_do_the_same_work_and_only_the_api_is_counted() {
        let region = Region::open(&RegionOptions::new(Medium::Shm, 64 * 64)).unwrap();
        store_flush_fence_ticks(&region, Path::Raw, 64, 4, 10);
        assert_eq!(region.stats(), crate::Stats::default(), "raw stores bypass the region");
        let raw_bytes = region.snapshot();
        let fresh = Region::open(&RegionOptions::new(Medium::Shm, 64 * 64)).unwrap();
        store_flush_fence_ticks(&fresh, Path::Api, 64, 4, 10);
        let stats = fresh.stats();
        assert_eq!((stats.stores, stats.lines_flushed, stats.fences), (40, 40, 10));
        assert_eq!(fresh.snapshot(), raw_bytes, "both paths store the same bytes");
    }

    #[test]
    fn long_reservations_reserve_most_of_the_time() {
        // On a loaded machine the measuring thread may not run at all within 20 ms (seen at
        // load average 30: 0 reservations): lengthen the run until it has made some.
        let mut run = reservation_fraction(2_000, 1, Duration::from_millis(20));
        for attempt in 2..=8u64 {
            if run.reservations >= 100 {
                break;
            }
            run = reservation_fraction(2_000, 1, Duration::from_millis(20 * attempt * attempt));
        }
        assert!(run.reservations > 0, "{run:?}");
        assert!(run.fraction_reserved() > 0.5, "{run:?}");
        assert!(run.wall_fraction() <= 1.0);
        assert!(run.on_cpu_fraction > 0.0 && run.on_cpu_fraction <= 1.0, "{run:?}");
    }

    /// Guards the Fig. 5.1 fit: on the thesis's own step function it must give back the
    /// thesis's parameters (a = 12.5, b = .434, c = 10.1), else `nvmdb calibrate`'s `a`, `b`,
    /// `c` and R^2 are not comparable with the thesis's.
    #[test]
    fn step_fit_recovers_the_thesis_parameters() {
        let thesis = StepFit { a_ns: 12.5, b: 0.434, c_ns: 10.1, r2: 1.0 };
        let x: Vec<f64> = (0..=150).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|&v| thesis.at(v)).collect();
        let fit = fit_step(&x, &y).unwrap();
        assert!((fit.a_ns - 12.5).abs() < 0.01, "{fit:?}");
        // On whole-ns intended delays x / 12.5 moves in 0.08s: any b in (.36, .44] gives the
        // same steps, so b is known to that interval only.
        assert!((fit.b - 0.434).abs() < 0.08 && (fit.c_ns - 10.1).abs() < 0.15, "{fit:?}");
        assert!(fit.r2 > 0.9999, "{fit:?}");
        for v in [0.0, 7.0, 30.0, 149.0] {
            assert!((fit.at(v) - thesis.at(v)).abs() < 1e-6, "{v}: {fit:?}");
        }
        // Thesis §5.1's example: an intended 30 ns always results in a 35 ns delay.
        assert!((thesis.at(30.0) - 35.1).abs() < 1e-9);
    }

    #[test]
    fn a_step_function_beats_a_line_and_flat_data_has_no_fit() {
        let x: Vec<f64> = (0..=100).map(f64::from).collect();
        let steps: Vec<f64> = x.iter().map(|v| 10.0 * (v / 10.0).floor() + 5.0).collect();
        let fit = fit_step(&x, &steps).unwrap();
        assert!((fit.a_ns - 10.0).abs() < 0.01 && fit.r2 > 0.9999, "{fit:?}");
        let line = line_r2(&x, &steps).unwrap();
        assert!(line < fit.r2 && line > 0.98, "line {line}");
        assert_eq!(fit_step(&x, &vec![3.0; x.len()]), None);
        assert_eq!(fit_step(&x[..2], &steps[..2]), None);
    }

    #[test]
    fn delays_measure_close_to_the_request() {
        let pair = rdtsc_pair_ticks();
        let mut samples = measure_delay_ns(1_000, 1001, pair);
        samples.sort_by(f64::total_cmp);
        assert!((samples[500] - 1_000.0).abs() < 100.0, "median {}", samples[500]);
    }
}

//! The NVRAM timing model of Pelley et al., VLDB 2014, §4 and thesis §5.1: delays are calibrated
//! TSC spin loops; a persist barrier costs a fixed latency at every fence; persist bandwidth is
//! modelled by one shared `next_available` reservation word advanced by compare-and-swap, each
//! persisted cache line reserving device time and the thread waiting until its reservation ends;
//! reads that miss the simulated page cache are charged a per-line latency.
//!
//! Deliberate difference: the thesis delays at each persist; we delay at the fence that completes
//! the persists, until the latest reservation the thread made, then add the barrier latency. A
//! thread that flushes several lines under one fence therefore overlaps their transfers, as real
//! write-combining hardware does.

use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Timing-model parameters; all zero (off) by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingOptions {
    /// Extra latency of every persist barrier (fence), in nanoseconds.
    pub persist_barrier_ns: u64,
    /// Device write bandwidth in bytes per second; 0 means unlimited.
    pub write_bandwidth_bytes_per_s: u64,
    /// Extra latency per cache line read from NVRAM on a simulated cache miss.
    pub read_ns: u64,
}

impl TimingOptions {
    pub fn is_off(&self) -> bool {
        *self == TimingOptions::default()
    }

    /// Rejects parameters no device could have (more than a second per barrier, bandwidth below
    /// one line per second of modelled time).
    pub fn validate(&self) -> Result<(), crate::PmemError> {
        const LIMIT_NS: u64 = 1_000_000_000;
        if self.persist_barrier_ns > LIMIT_NS || self.read_ns > LIMIT_NS {
            return Err(crate::PmemError::InvalidOption(format!(
                "latency above 1 s is not a device (persist barrier {} ns, read {} ns)",
                self.persist_barrier_ns, self.read_ns
            )));
        }
        if self.write_bandwidth_bytes_per_s != 0 && self.write_bandwidth_bytes_per_s < 64 {
            return Err(crate::PmemError::InvalidOption("write bandwidth below 64 bytes/s".into()));
        }
        Ok(())
    }
}

/// TSC clock, calibrated once against the monotonic clock.
#[derive(Debug)]
pub struct Tsc {
    ticks_per_ns: f64,
}

static TSC: OnceLock<Tsc> = OnceLock::new();

#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: RDTSC has no preconditions on x86-64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

impl Tsc {
    /// The process-wide calibrated clock (calibrates on first use, ~20 ms).
    pub fn get() -> &'static Tsc {
        TSC.get_or_init(Tsc::calibrate)
    }

    fn calibrate() -> Tsc {
        // Take the median of a few short windows, so a preemption in one does not skew the rate.
        let mut rates: Vec<f64> = (0..5)
            .map(|_| {
                let t0 = Instant::now();
                let c0 = rdtsc();
                while t0.elapsed() < Duration::from_millis(4) {
                    std::hint::spin_loop();
                }
                let c1 = rdtsc();
                let ns = t0.elapsed().as_nanos() as f64;
                (c1.wrapping_sub(c0)) as f64 / ns
            })
            .collect();
        rates.sort_by(|a, b| a.total_cmp(b));
        let ticks_per_ns = rates[rates.len() / 2];
        Tsc { ticks_per_ns: if ticks_per_ns > 0.0 { ticks_per_ns } else { 1.0 } }
    }

    pub fn ticks_per_ns(&self) -> f64 {
        self.ticks_per_ns
    }

    pub fn frequency_hz(&self) -> f64 {
        self.ticks_per_ns * 1e9
    }

    #[inline]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        (ns as f64 * self.ticks_per_ns) as u64
    }

    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 / self.ticks_per_ns) as u64
    }

    /// Spins until the TSC reaches `deadline`.
    #[inline]
    pub fn spin_until(&self, deadline_ticks: u64) {
        while rdtsc() < deadline_ticks {
            std::hint::spin_loop();
        }
    }

    /// Spins for `ns` nanoseconds; returns the ticks actually spent.
    #[inline]
    pub fn delay_ns(&self, ns: u64) -> u64 {
        if ns == 0 {
            return 0;
        }
        let start = rdtsc();
        self.spin_until(start + self.ns_to_ticks(ns));
        rdtsc() - start
    }
}

thread_local! {
    /// The end (in TSC ticks) of the latest bandwidth reservation this thread made.
    static RESERVED_UNTIL: Cell<u64> = const { Cell::new(0) };
}

/// The live model for one region.
#[derive(Debug)]
pub struct TimingModel {
    pub options: TimingOptions,
    barrier_ticks: u64,
    read_line_ticks: u64,
    line_ticks: u64,
    /// Thesis §5.1: the next TSC tick at which the device can accept a write.
    next_available: AtomicU64,
}

impl TimingModel {
    pub fn new(options: TimingOptions) -> TimingModel {
        let tsc = Tsc::get();
        let line_ticks = if options.write_bandwidth_bytes_per_s == 0 {
            0
        } else {
            let ns_per_line = 64.0 * 1e9 / options.write_bandwidth_bytes_per_s as f64;
            (ns_per_line * tsc.ticks_per_ns()).max(1.0) as u64
        };
        TimingModel {
            options,
            barrier_ticks: tsc.ns_to_ticks(options.persist_barrier_ns),
            read_line_ticks: tsc.ns_to_ticks(options.read_ns),
            line_ticks,
            next_available: AtomicU64::new(0),
        }
    }

    /// Reserves device time for `lines` persisted cache lines (CAS loop on `next_available`).
    #[inline]
    pub fn reserve_lines(&self, lines: u64) {
        if self.line_ticks == 0 || lines == 0 {
            return;
        }
        let want = self.line_ticks * lines;
        let mut current = self.next_available.load(Ordering::Relaxed);
        loop {
            let start = current.max(rdtsc());
            let end = start + want;
            match self.next_available.compare_exchange_weak(
                current,
                end,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    RESERVED_UNTIL.with(|r| r.set(r.get().max(end)));
                    return;
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// The delay of a persist barrier: wait for this thread's reservations, then the barrier
    /// latency. Returns the modelled delay in nanoseconds.
    #[inline]
    pub fn on_fence(&self) -> u64 {
        let start = rdtsc();
        let until = RESERVED_UNTIL.with(|r| r.replace(0));
        let tsc = Tsc::get();
        if until > start {
            tsc.spin_until(until);
        }
        if self.barrier_ticks > 0 {
            let now = rdtsc();
            tsc.spin_until(now + self.barrier_ticks);
        }
        if until > start || self.barrier_ticks > 0 {
            tsc.ticks_to_ns(rdtsc() - start)
        } else {
            0
        }
    }

    /// Charges the read latency of `lines` cache lines; returns the delay in nanoseconds.
    #[inline]
    pub fn charge_read(&self, lines: u64) -> u64 {
        if self.read_line_ticks == 0 || lines == 0 {
            return 0;
        }
        let start = rdtsc();
        Tsc::get().spin_until(start + self.read_line_ticks * lines);
        Tsc::get().ticks_to_ns(rdtsc() - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_is_calibrated_to_a_plausible_rate() {
        let tsc = Tsc::get();
        // 100 MHz .. 10 GHz
        assert!(tsc.ticks_per_ns() > 0.1 && tsc.ticks_per_ns() < 10.0, "{tsc:?}");
    }

    #[test]
    fn delay_is_at_least_requested() {
        let tsc = Tsc::get();
        let t0 = Instant::now();
        tsc.delay_ns(2_000_000);
        assert!(t0.elapsed() >= Duration::from_micros(1_800));
    }

    #[test]
    fn bandwidth_reservations_serialise_device_time() {
        // 64 MB/s -> 1 µs per line; 100 lines reserved must take >= ~100 µs at the fence.
        let model = TimingModel::new(TimingOptions {
            write_bandwidth_bytes_per_s: 64_000_000,
            ..Default::default()
        });
        let t0 = Instant::now();
        model.reserve_lines(100);
        model.on_fence();
        assert!(t0.elapsed() >= Duration::from_micros(90), "{:?}", t0.elapsed());
    }

    #[test]
    fn impossible_parameters_are_rejected() {
        let bad = TimingOptions { persist_barrier_ns: 5_000_000_000, ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = TimingOptions { write_bandwidth_bytes_per_s: 1, ..Default::default() };
        assert!(bad.validate().is_err());
        assert!(TimingOptions::default().validate().is_ok());
    }
}

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
//!
//! **Write latency per line** (`write_line_ns`, Kim et al. ASPLOS 2016 §5.3-5.4): NVWAL's Fig. 7
//! varies the NVRAM *write* latency, which its emulations charge per cache line written back
//! (Tuna's FPGA delays every write to the emulated NVRAM; on the Nexus 5 "`nop` instructions
//! after each `clflush`"), next to a fixed 1 µs persist-barrier delay. A fence here charges, on
//! top of the barrier latency, `write_line_ns` for each line this thread flushed since its
//! previous fence: the same total as a delay after each flush, in one spin.
//!
//! **CPU-cache read model** (`cpu_cache_bytes`, issue 36): N-Store's emulator (Arulraj et al.,
//! SIGMOD 2015, §2.2) stalls every load that misses the CPU caches. With a capacity set, the
//! region routes each read through a simulated last-level cache ([`crate::cpucache`]) and charges
//! `read_ns` per missed line through [`TimingModel::charge_read`], the charge Pelley's page-cache
//! model uses; the two models are alternatives, never both on one region.
//!
//! **Reservation granularity** ([`Reservation`]). A reservation shorter than what a contended CAS
//! costs leaves device time unreserved, so the modelled bandwidth comes out lower than asked:
//! Pelley §4 finds reservations "above 85ns" accurate, thesis Table 5.2 needs 44–122 ns to
//! reserve 99 % of time, and the thesis relies on "at least four cache lines are always reserved
//! together (in `persist_page` and `persist_wal`)". One line at 1.5 GiB/s is 39.7 ns. So by
//! default ([`Reservation::Lines4`]) a thread's flushed lines accumulate until at least
//! [`MIN_RESERVATION_LINES`] are pending and are then reserved in one CAS; fewer left at a fence
//! ride on the thread's next reservation (device time is never lost, only deferred by at most
//! three lines). [`Reservation::Epoch`] reserves everything a thread flushed between two barriers
//! as one, at the barrier; [`Reservation::Flush`] (before issue 16) one per flush call.
//!
//! **File-system sync** ([`TimingModel::charge_fs_sync`], issue 36). N-Store's traditional
//! engines (Arulraj et al., SIGMOD 2015, §2.2) reach NVM through "a special filesystem that is
//! optimized for non-volatile memory" (PMFS), whose writes "go through the kernel's virtual
//! filesystem (VFS) layer"; our `io=fs` engines `pwrite` + `fdatasync` a file on tmpfs, where the
//! sync costs nothing. A sync is charged here, on the same TSC clock and the same
//! `next_available` word the NVM engines pay: the bytes written since the previous sync reserve
//! device bandwidth and pay `write_line_ns` per line like flushed lines; the sync pays the
//! persist-barrier latency like a fence; on top, the file-system path costs `fs_sync_ns` per
//! sync and `1 / fs_write_bytes_per_s` per byte. The paper states no absolute cost of PMFS, only
//! a ratio (§2.3: "NVM-aware allocator delivers 10-12x higher write bandwidth than the
//! filesystem"), so both constants are ours: the defaults live in the CLI (`--fs-sync-latency`,
//! `--fs-write-bandwidth`) and say how they were chosen.

use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Lines the default reservation policy reserves together at least (thesis §5.1).
pub const MIN_RESERVATION_LINES: u64 = 4;

/// How flushed lines are grouped into bandwidth reservations (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reservation {
    /// At least [`MIN_RESERVATION_LINES`] lines per reservation (thesis §5.1); a remainder at a
    /// fence is carried to the thread's next reservation.
    #[default]
    Lines4,
    /// Every line a thread flushed between two barriers, reserved as one at the barrier.
    Epoch,
    /// One reservation per `flush` call, however short (the model before issue 16).
    Flush,
}

impl Reservation {
    pub const ALL: [Reservation; 3] = [Reservation::Lines4, Reservation::Epoch, Reservation::Flush];

    pub fn name(self) -> &'static str {
        match self {
            Reservation::Lines4 => "lines4",
            Reservation::Epoch => "epoch",
            Reservation::Flush => "flush",
        }
    }

    pub fn parse(s: &str) -> Option<Reservation> {
        Reservation::ALL.into_iter().find(|r| r.name() == s)
    }
}

/// Timing-model parameters; all zero (off) by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingOptions {
    /// Extra latency of every persist barrier (fence), in nanoseconds.
    pub persist_barrier_ns: u64,
    /// Device write bandwidth in bytes per second; 0 means unlimited.
    pub write_bandwidth_bytes_per_s: u64,
    /// Extra latency per cache line read from NVRAM on a simulated cache miss.
    pub read_ns: u64,
    /// How flushed lines are grouped into bandwidth reservations.
    #[serde(default)]
    pub reservation: Reservation,
    /// Extra latency of every cache line written back (flushed), charged at the fence that
    /// completes it, in nanoseconds (NVWAL §5.3's NVRAM write latency).
    #[serde(default)]
    pub write_line_ns: u64,
    /// Extra latency of each `fdatasync` of an `io=fs` engine whose file sync is modelled (a
    /// file on tmpfs), in nanoseconds: the file-system path's fixed cost (module doc).
    #[serde(default)]
    pub fs_sync_ns: u64,
    /// Write bandwidth of the file-system path in bytes per second, charged at each modelled
    /// `fdatasync` for the bytes written since the previous one; 0 means unlimited.
    #[serde(default)]
    pub fs_write_bytes_per_s: u64,
    /// Capacity of the simulated CPU last-level cache in bytes (N-Store §2.2,
    /// [`crate::cpucache`]): every region read consults it and each missed line is charged
    /// `read_ns`. 0: off (reads are charged only where an engine's page store charges them,
    /// Pelley's model).
    #[serde(default)]
    pub cpu_cache_bytes: u64,
}

impl TimingOptions {
    /// No delay of any kind is modelled on the load/store path (the reservation policy alone
    /// changes nothing). The file-system sync charge is apart: [`TimingOptions::fs_is_off`].
    pub fn is_off(&self) -> bool {
        self.persist_barrier_ns == 0
            && self.write_bandwidth_bytes_per_s == 0
            && self.read_ns == 0
            && self.write_line_ns == 0
            && self.cpu_cache_bytes == 0
    }

    /// No file-system sync cost of its own is modelled (an `io=fs` sync still pays the device's
    /// barrier, bandwidth and write latency when those are on).
    pub fn fs_is_off(&self) -> bool {
        self.fs_sync_ns == 0 && self.fs_write_bytes_per_s == 0
    }

    /// What a modelled sync of `bytes` written since the previous one costs beyond the device
    /// (no bandwidth wait), in nanoseconds: `fs_sync_ns` + `bytes / fs_write_bytes_per_s`,
    /// + the barrier latency + `write_line_ns` per line. For tests and reports.
    pub fn fs_sync_fixed_ns(&self, bytes: u64) -> f64 {
        let per_byte = if self.fs_write_bytes_per_s == 0 {
            0.0
        } else {
            bytes as f64 * 1e9 / self.fs_write_bytes_per_s as f64
        };
        let lines = bytes.div_ceil(64);
        let fixed = self.fs_sync_ns.saturating_add(self.persist_barrier_ns);
        fixed.saturating_add(lines.saturating_mul(self.write_line_ns)) as f64 + per_byte
    }

    /// Device time of one cache line at the configured bandwidth, in nanoseconds (0: unlimited).
    /// The thesis's "35 ns per cache line (approximately 1.7GB/s)" is 64 B / 35 ns = 1.70 GiB/s:
    /// its GB are GiB, so its 1.5GB/s is `1.5GiB/s` here (39.7 ns a line), not 1.5 * 10^9.
    pub fn ns_per_line(&self) -> f64 {
        if self.write_bandwidth_bytes_per_s == 0 {
            return 0.0;
        }
        64.0 * 1e9 / self.write_bandwidth_bytes_per_s as f64
    }

    /// Rejects parameters no device could have (more than a second per barrier, bandwidth below
    /// one line per second of modelled time).
    pub fn validate(&self) -> Result<(), crate::PmemError> {
        const LIMIT_NS: u64 = 1_000_000_000;
        if self.persist_barrier_ns > LIMIT_NS
            || self.read_ns > LIMIT_NS
            || self.write_line_ns > LIMIT_NS
            || self.fs_sync_ns > LIMIT_NS
        {
            return Err(crate::PmemError::InvalidOption(format!(
                "latency above 1 s is not a device (persist barrier {} ns, read {} ns, write {} \
                 ns a line, file-system sync {} ns)",
                self.persist_barrier_ns, self.read_ns, self.write_line_ns, self.fs_sync_ns
            )));
        }
        if self.write_bandwidth_bytes_per_s != 0 && self.write_bandwidth_bytes_per_s < 64 {
            return Err(crate::PmemError::InvalidOption("write bandwidth below 64 bytes/s".into()));
        }
        let cpu_cache = crate::cpucache::CPU_CACHE_MIN_BYTES..=crate::cpucache::CPU_CACHE_MAX_BYTES;
        if self.cpu_cache_bytes != 0 && !cpu_cache.contains(&self.cpu_cache_bytes) {
            return Err(crate::PmemError::InvalidOption(format!(
                "a CPU cache of {} bytes is outside {} bytes ..= {} MiB",
                self.cpu_cache_bytes,
                cpu_cache.start(),
                cpu_cache.end() >> 20
            )));
        }
        if self.fs_write_bytes_per_s != 0 && self.fs_write_bytes_per_s < 64 {
            return Err(crate::PmemError::InvalidOption(
                "file-system write bandwidth below 64 bytes/s".into(),
            ));
        }
        Ok(())
    }
}

/// TSC clock, calibrated once against the monotonic clock.
#[derive(Debug)]
pub struct Tsc {
    ticks_per_ns: f64,
    /// Fixed cost of a delay beyond its spin (the `rdtsc` that starts it, the overshoot of the
    /// last loop iteration, the return), taken off every requested delay so that a delay lasts
    /// what was asked rather than that plus a constant (thesis §5.1 subtracts 9.3 ns likewise).
    overhead_ticks: u64,
}

static TSC: OnceLock<Tsc> = OnceLock::new();

/// `n` samples of two back-to-back `rdtsc` reads, in ticks: what a `rdtsc; work; rdtsc`
/// measurement adds to the work.
pub fn rdtsc_pair_samples(n: usize) -> Vec<u64> {
    (0..n)
        .map(|_| {
            let t0 = rdtsc();
            rdtsc().wrapping_sub(t0)
        })
        .collect()
}

/// The mean of the fastest 95% of `samples` (sorted in place): the slowest 5% are
/// preemptions and interrupts, not the cost being measured.
fn mean_of_fastest(samples: &mut [i64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    samples.sort_unstable();
    let kept = &samples[..(samples.len() * 95).div_ceil(100)];
    kept.iter().sum::<i64>() as f64 / kept.len() as f64
}

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
    /// Whether the CPU reports an invariant TSC (constant rate across P-, C- and T-states;
    /// CPUID 0x8000_0007 EDX bit 8), without which TSC delays drift with the clock speed.
    pub fn invariant() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let max_extended = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            max_extended >= 0x8000_0007
                && core::arch::x86_64::__cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The process-wide calibrated clock (calibrates on first use, ~20 ms).
    pub fn get() -> &'static Tsc {
        TSC.get_or_init(Tsc::calibrate)
    }

    /// A calibration of its own, not the process-wide one: what another process would get.
    /// `nvmdb calibrate --out` takes one per repetition, so that its range over repetitions
    /// covers the run-to-run spread of the fixed cost every delay subtracts.
    pub fn fresh() -> Tsc {
        Tsc::calibrate()
    }

    fn calibrate() -> Tsc {
        let ticks_per_ns = Self::calibrate_rate();
        let first = Tsc { ticks_per_ns, overhead_ticks: Self::calibrate_overhead(ticks_per_ns) };
        Tsc { ticks_per_ns, overhead_ticks: first.corrected_overhead() }
    }

    /// The fixed cost corrected by the delays it inserts: the mean excess of 100–137 ns
    /// delays (requests dithered over 97 ticks, several loop steps) over their request, timed
    /// as a caller times them (a `rdtsc` pair, its mean cost removed), added to the first
    /// estimate. On the 2-core VM the first estimate ([`Tsc::calibrate_overhead`]) came out
    /// ~21 ns in most processes (~15 in the others) while the delays' real fixed cost was ~13
    /// ns, so every modelled delay of 50–200 ns of such a process was 6–10 ns short (a 50 ns
    /// read charge inserted ~41 ns); corrected, the mean error of 50–200 ns delays was within
    /// −1..+4 ns in every process tried (2026-11-29, issue 38). The requests stay below the
    /// loop's PAUSE margin, where the short delays (read charges) fall; a delay of
    /// microseconds may still end a step (~10 ns, 1%) early or late. The slowest 5% of each
    /// sample (preemptions, interrupts) are left out of its mean.
    fn corrected_overhead(&self) -> u64 {
        const TRIALS: u64 = 4001;
        let mut pairs: Vec<i64> =
            rdtsc_pair_samples(TRIALS as usize).into_iter().map(|t| t as i64).collect();
        let pair = mean_of_fastest(&mut pairs);
        let base = (100.0 * self.ticks_per_ns) as u64;
        let mut excess: Vec<i64> = (0..TRIALS)
            .map(|i| {
                let want = base + i % 97;
                let t0 = rdtsc();
                let start = rdtsc();
                self.spin_until(self.deadline(start, want));
                rdtsc().wrapping_sub(t0) as i64 - want as i64
            })
            .collect();
        let excess = mean_of_fastest(&mut excess) - pair;
        (self.overhead_ticks as f64 + excess).clamp(0.0, 100.0 * self.ticks_per_ns).round() as u64
    }

    /// What a `spin_until` call costs beyond its spin, as a caller timing it with a `rdtsc`
    /// pair sees it (the pair's own cost removed). Samples come in steps of one `rdtsc` (about
    /// 10 ns), so a median would snap to one step or the next from run to run; instead the spin
    /// length is dithered across trials and the interquartile mean taken.
    fn calibrate_overhead(ticks_per_ns: f64) -> u64 {
        const TRIALS: u64 = 4001;
        let raw = Tsc { ticks_per_ns, overhead_ticks: 0 };
        let spin_ticks = (500.0 * ticks_per_ns) as u64;
        let interquartile_mean = |mut v: Vec<u64>| {
            v.sort_unstable();
            let middle = &v[v.len() / 4..v.len() * 3 / 4];
            middle.iter().sum::<u64>() as f64 / middle.len() as f64
        };
        let pair = interquartile_mean(rdtsc_pair_samples(TRIALS as usize));
        let beyond = interquartile_mean(
            (0..TRIALS)
                .map(|i| {
                    let spin = spin_ticks + i % 97;
                    let t0 = rdtsc();
                    let start = rdtsc();
                    raw.spin_until(start + spin);
                    rdtsc().wrapping_sub(t0).saturating_sub(spin)
                })
                .collect(),
        );
        // Never more than 100 ns: a preempted calibration must not shorten every delay.
        (beyond - pair).clamp(0.0, 100.0 * ticks_per_ns).round() as u64
    }

    fn calibrate_rate() -> f64 {
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
        if ticks_per_ns > 0.0 {
            ticks_per_ns
        } else {
            1.0
        }
    }

    pub fn ticks_per_ns(&self) -> f64 {
        self.ticks_per_ns
    }

    pub fn frequency_hz(&self) -> f64 {
        self.ticks_per_ns * 1e9
    }

    /// The fixed cost taken off every delay, in nanoseconds.
    pub fn overhead_ns(&self) -> f64 {
        self.overhead_ticks as f64 / self.ticks_per_ns
    }

    #[inline]
    pub fn ns_to_ticks(&self, ns: u64) -> u64 {
        (ns as f64 * self.ticks_per_ns) as u64
    }

    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 / self.ticks_per_ns) as u64
    }

    /// Spins until the TSC reaches `deadline`; returns the first reading at or past it.
    ///
    /// PAUSE (kind to a hyperthread sibling) costs tens of cycles on recent cores, which would
    /// make the last iteration overshoot by that much; so the loop pauses only while the
    /// deadline is more than `PAUSE_MARGIN_TICKS` away and polls the TSC tightly after that.
    #[inline]
    pub fn spin_until(&self, deadline_ticks: u64) -> u64 {
        const PAUSE_MARGIN_TICKS: u64 = 512;
        loop {
            let now = rdtsc();
            if now >= deadline_ticks {
                return now;
            }
            if deadline_ticks - now > PAUSE_MARGIN_TICKS {
                std::hint::spin_loop();
            }
        }
    }

    /// A deadline `ticks` after `start`, less the fixed cost of the delay itself.
    #[inline]
    fn deadline(&self, start: u64, ticks: u64) -> u64 {
        start + ticks.saturating_sub(self.overhead_ticks)
    }

    /// Spins for `ns` nanoseconds (call overhead included); returns the ticks spent spinning.
    #[inline]
    pub fn delay_ns(&self, ns: u64) -> u64 {
        if ns == 0 {
            return 0;
        }
        let start = rdtsc();
        self.spin_until(self.deadline(start, self.ns_to_ticks(ns))).wrapping_sub(start)
    }
}

thread_local! {
    /// The end (in TSC ticks) of the latest bandwidth reservation this thread made.
    static RESERVED_UNTIL: Cell<u64> = const { Cell::new(0) };
    /// Lines this thread flushed but has not reserved yet, and the model they belong to (its
    /// address): lines pending for one region never ride on another region's reservation (a
    /// thread that moves to another timed region drops its at most 3 pending lines).
    static PENDING: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
    /// Lines this thread flushed since its last fence, and the model they belong to: each
    /// costs `write_line_ns` at that fence.
    static UNFENCED: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

/// The live model for one region.
#[derive(Debug)]
pub struct TimingModel {
    pub options: TimingOptions,
    tsc: &'static Tsc,
    barrier_ticks: u64,
    read_line_ticks: u64,
    line_ticks: u64,
    write_line_ticks: u64,
    /// File-system sync: fixed ticks per sync, and ticks per byte written (fractional).
    fs_sync_ticks: u64,
    fs_ticks_per_byte: f64,
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
            tsc,
            barrier_ticks: tsc.ns_to_ticks(options.persist_barrier_ns),
            read_line_ticks: tsc.ns_to_ticks(options.read_ns),
            line_ticks,
            write_line_ticks: tsc.ns_to_ticks(options.write_line_ns),
            fs_sync_ticks: tsc.ns_to_ticks(options.fs_sync_ns),
            fs_ticks_per_byte: if options.fs_write_bytes_per_s == 0 {
                0.0
            } else {
                1e9 * tsc.ticks_per_ns() / options.fs_write_bytes_per_s as f64
            },
            next_available: AtomicU64::new(0),
        }
    }

    /// Device time one cache line reserves, in TSC ticks (0: unlimited bandwidth).
    pub fn line_ticks(&self) -> u64 {
        self.line_ticks
    }

    fn key(&self) -> usize {
        self as *const TimingModel as usize
    }

    /// Adds `lines` to this thread's unreserved lines of this model; returns the new total.
    fn add_pending(&self, lines: u64) -> u64 {
        let key = self.key();
        PENDING.with(|p| {
            let (k, n) = p.get();
            let total = if k == key { n + lines } else { lines };
            p.set((key, total));
            total
        })
    }

    /// This thread's lines of this model flushed since its last fence (then none).
    fn take_unfenced(&self) -> u64 {
        if self.write_line_ticks == 0 {
            return 0;
        }
        let key = self.key();
        UNFENCED.with(|u| {
            let (k, n) = u.replace((key, 0));
            if k == key {
                n
            } else {
                0
            }
        })
    }

    fn take_pending(&self) -> u64 {
        let key = self.key();
        PENDING.with(|p| {
            let (k, n) = p.get();
            p.set((key, 0));
            if k == key {
                n
            } else {
                0
            }
        })
    }

    /// A flush of `lines` lines, grouped into reservations by the policy. Returns the number of
    /// reservations made (0 or 1).
    #[inline]
    pub fn on_flush(&self, lines: u64) -> u64 {
        if self.write_line_ticks > 0 && lines > 0 {
            let key = self.key();
            UNFENCED.with(|u| {
                let (k, n) = u.get();
                u.set((key, if k == key { n + lines } else { lines }));
            });
        }
        if self.line_ticks == 0 || lines == 0 {
            return 0;
        }
        match self.options.reservation {
            Reservation::Flush => {
                self.reserve_lines(lines);
                1
            }
            Reservation::Epoch => {
                self.add_pending(lines);
                0
            }
            Reservation::Lines4 => {
                if self.add_pending(lines) < MIN_RESERVATION_LINES {
                    return 0;
                }
                self.reserve_lines(self.take_pending());
                1
            }
        }
    }

    /// Reserves device time for `lines` persisted cache lines (CAS loop on `next_available`).
    /// Returns how long the device sat idle before this reservation, in ticks (0 when the
    /// reservation queued behind another): what `nvmdb calibrate` sums to judge the model.
    #[inline]
    pub fn reserve_lines(&self, lines: u64) -> u64 {
        self.reserve_lines_until(lines).0
    }

    /// [`TimingModel::reserve_lines`], also returning the tick at which the reservation ends.
    #[inline]
    pub fn reserve_lines_until(&self, lines: u64) -> (u64, u64) {
        if self.line_ticks == 0 || lines == 0 {
            return (0, 0);
        }
        let want = self.line_ticks * lines;
        let mut current = self.next_available.load(Ordering::Relaxed);
        loop {
            let now = rdtsc();
            let start = current.max(now);
            let end = start + want;
            match self.next_available.compare_exchange_weak(
                current,
                end,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    RESERVED_UNTIL.with(|r| r.set(r.get().max(end)));
                    return (now.saturating_sub(current), end);
                }
                Err(actual) => current = actual,
            }
        }
    }

    /// The delay of a persist barrier: reserve the epoch's lines (policy `epoch`), wait for this
    /// thread's reservations, then the barrier latency, in one spin. Returns the delay spent in
    /// nanoseconds and the number of reservations made (0 or 1).
    #[inline]
    pub fn on_fence_reserving(&self) -> (u64, u64) {
        let mut reserved = 0;
        if self.options.reservation == Reservation::Epoch && self.line_ticks > 0 {
            let lines = self.take_pending();
            if lines > 0 {
                self.reserve_lines(lines);
                reserved = 1;
            }
        }
        (self.on_fence(), reserved)
    }

    /// The wait of a persist barrier for reservations already made, plus the barrier latency, in
    /// one spin. Returns the delay spent in nanoseconds.
    #[inline]
    pub fn on_fence(&self) -> u64 {
        self.fence_wait().map_or(0, |(start, end)| self.tsc.ticks_to_ns(end - start))
    }

    /// [`TimingModel::on_fence`], returning the TSC reading at which the wait ended instead:
    /// `nvmdb calibrate` times its reservations by it rather than by another `rdtsc`, which
    /// would add ~10 ns to every reservation cycle that the thesis's benchmark does not have.
    #[inline]
    pub fn on_fence_ended(&self) -> u64 {
        self.fence_wait().map_or_else(rdtsc, |(_, end)| end)
    }

    /// The fence's wait: the TSC reading that started it and the one that ended it (equal when
    /// the deadline had passed); `None` when there was nothing to wait for.
    #[inline]
    fn fence_wait(&self) -> Option<(u64, u64)> {
        let until = RESERVED_UNTIL.with(|r| r.replace(0));
        let written = self.take_unfenced().saturating_mul(self.write_line_ticks);
        let fixed = self.barrier_ticks.saturating_add(written);
        if until == 0 && fixed == 0 {
            return None;
        }
        let start = rdtsc();
        // The wait ends when the reservation does, less the delay's own fixed cost (see
        // `Tsc::overhead_ticks`), so a thread can reserve again just as its reservation ends.
        let deadline = if fixed > 0 {
            self.tsc.deadline(until.max(start), fixed)
        } else {
            until.saturating_sub(self.tsc.overhead_ticks)
        };
        if deadline <= start {
            return Some((start, start));
        }
        Some((start, self.tsc.spin_until(deadline)))
    }

    /// The delay of one modelled `fdatasync` of a file through which `bytes` were written since
    /// the previous sync (module doc): their lines reserve device bandwidth and pay the write
    /// latency, the sync pays the barrier latency, and the file-system path adds `fs_sync_ns`
    /// and the bytes at `fs_write_bytes_per_s`, in one spin. Returns the delay in nanoseconds.
    pub fn charge_fs_sync(&self, bytes: u64) -> u64 {
        let lines = bytes.div_ceil(64);
        // Earlier reservations of this thread (its own flushes) complete at this sync too.
        let (_, reserved_end) = self.reserve_lines_until(lines);
        let until = RESERVED_UNTIL.with(|r| r.replace(0)).max(reserved_end);
        let per_byte = (bytes as f64 * self.fs_ticks_per_byte) as u64;
        let fixed = self
            .barrier_ticks
            .saturating_add(lines.saturating_mul(self.write_line_ticks))
            .saturating_add(self.fs_sync_ticks)
            .saturating_add(per_byte);
        if until == 0 && fixed == 0 {
            return 0;
        }
        let start = rdtsc();
        let deadline = self.tsc.deadline(until.max(start), fixed);
        if deadline <= start {
            return 0;
        }
        self.tsc.ticks_to_ns(self.tsc.spin_until(deadline) - start)
    }

    /// Whether reads are charged at all (a read latency above zero).
    #[inline]
    pub fn charges_reads(&self) -> bool {
        self.read_line_ticks > 0
    }

    /// TSC ticks as nanoseconds on this model's clock.
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        self.tsc.ticks_to_ns(ticks)
    }

    /// Charges the read latency of `lines` missed lines when the caller has already spent
    /// `credit` ticks simulating reads (the CPU-cache model's own time, issue 36): that time
    /// counts toward the stall, and only the rest is spun. Returns the delay charged (the full
    /// latency of the lines, in ns) and the ticks of `credit` the stall did not absorb.
    #[inline]
    pub fn charge_read_after(&self, lines: u64, credit: u64) -> (u64, u64) {
        let owed = self.read_line_ticks * lines;
        if owed == 0 {
            return (0, credit);
        }
        let absorbed = owed.min(credit);
        if owed > absorbed {
            let start = rdtsc();
            self.tsc.spin_until(self.tsc.deadline(start, owed - absorbed));
        }
        (self.tsc.ticks_to_ns(owed), credit - absorbed)
    }

    /// Charges the read latency of `lines` cache lines; returns the delay in nanoseconds.
    #[inline]
    pub fn charge_read(&self, lines: u64) -> u64 {
        if self.read_line_ticks == 0 || lines == 0 {
            return 0;
        }
        let start = rdtsc();
        let end = self.tsc.spin_until(self.tsc.deadline(start, self.read_line_ticks * lines));
        self.tsc.ticks_to_ns(end - start)
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
    fn short_delays_are_accurate_to_ten_percent() {
        // Medians: robust to the odd preemption on a busy machine.
        let tsc = Tsc::get();
        for ns in [200u64, 1_000] {
            let mut samples: Vec<f64> = (0..1001)
                .map(|_| {
                    let t0 = Instant::now();
                    tsc.delay_ns(ns);
                    t0.elapsed().as_nanos() as f64
                })
                .collect();
            samples.sort_by(f64::total_cmp);
            let median = samples[500];
            // `Instant::now` costs more than `rdtsc`; allow it on the high side.
            assert!(median > ns as f64 * 0.9 && median < ns as f64 * 1.1 + 60.0, "{ns}: {median}");
        }
    }

    #[test]
    fn spin_until_returns_a_reading_at_or_past_the_deadline() {
        let tsc = Tsc::get();
        let deadline = rdtsc() + tsc.ns_to_ticks(1_000);
        assert!(tsc.spin_until(deadline) >= deadline);
    }

    #[test]
    fn reserve_lines_reports_idle_device_time() {
        let model = TimingModel::new(TimingOptions {
            write_bandwidth_bytes_per_s: 64_000_000,
            ..Default::default()
        });
        let tsc = Tsc::get();
        model.reserve_lines(1);
        // Back to back: the second reservation queues behind the first, no idle time.
        assert_eq!(model.reserve_lines(1), 0);
        model.on_fence();
        tsc.delay_ns(20_000);
        let idle = model.reserve_lines(1);
        assert!(idle >= tsc.ns_to_ticks(15_000), "idle {idle} ticks after a 20 µs pause");
        model.on_fence();
    }

    /// Guards `nvmdb calibrate`'s lateness probe: the reading `on_fence_ended` returns is where
    /// the wait ended (no earlier than the reservation's end less the delay's fixed cost), and
    /// a fence with nothing to wait for still returns a current reading.
    #[test]
    fn on_fence_ended_is_the_reading_that_ended_the_wait() {
        let model = TimingModel::new(TimingOptions {
            write_bandwidth_bytes_per_s: 64_000_000,
            ..Default::default()
        });
        let (_, end) = model.reserve_lines_until(2);
        let ended = model.on_fence_ended();
        assert!(ended + model.tsc.overhead_ticks >= end, "ended {ended}, reservation end {end}");
        let before = rdtsc();
        assert!(model.on_fence_ended() >= before, "nothing to wait for: a current reading");
    }

    #[test]
    fn mean_of_fastest_leaves_out_the_slowest_twentieth() {
        let mut samples: Vec<i64> = (0..95).map(|i| i % 2 * 24).collect();
        samples.extend([1_000_000; 5]);
        assert_eq!(mean_of_fastest(&mut samples), 24.0 * 47.0 / 95.0);
        assert_eq!(mean_of_fastest(&mut []), 0.0);
    }

    /// Guards the fixed cost's correction (issue 38: on the 2-core VM the open-loop estimate,
    /// ~21 ns, put 50-200 ns delays 6-10 ns short of their request; corrected ~16 ns): from a
    /// first estimate of 0 or of 40 ns, one correction lands within a few ns of the same fixed
    /// cost, because the mean excess of dithered delays moves one for one with the estimate.
    /// A correction of the wrong sign, or none, leaves them 40 ns apart.
    #[test]
    fn the_fixed_costs_correction_converges_from_any_first_estimate() {
        let ticks_per_ns = Tsc::get().ticks_per_ns();
        let from = |ns: f64| {
            let first = Tsc { ticks_per_ns, overhead_ticks: (ns * ticks_per_ns) as u64 };
            first.corrected_overhead() as f64 / ticks_per_ns
        };
        let (low, high) = (from(0.0), from(40.0));
        assert!(
            (low - high).abs() < 8.0,
            "corrected from 0 ns: {low:.1} ns, from 40 ns: {high:.1}"
        );
        assert!(low > 0.0 && low < 100.0, "{low}");
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

    fn model(reservation: Reservation) -> TimingModel {
        // 64 MB/s: 1 µs per line, long enough to see in elapsed time.
        TimingModel::new(TimingOptions {
            write_bandwidth_bytes_per_s: 64_000_000,
            reservation,
            ..Default::default()
        })
    }

    #[test]
    fn lines4_reserves_at_least_four_lines_together() {
        // Before issue 16 every flush call reserved on its own: one line (42.7 ns at 1.5 GB/s),
        // below the accuracy floor of thesis Table 5.2.
        let m = model(Reservation::Lines4);
        let before = m.next_available.load(Ordering::Relaxed);
        assert_eq!((m.on_flush(1), m.on_flush(1), m.on_flush(1)), (0, 0, 0));
        assert_eq!(m.next_available.load(Ordering::Relaxed), before, "3 lines: nothing yet");
        // A fence does not reserve the remainder; it rides on the next reservation.
        assert_eq!(m.on_fence_reserving().1, 0);
        let (t0, tick0) = (Instant::now(), rdtsc());
        assert_eq!(m.on_flush(1), 1, "the fourth line reserves all four");
        let reserved = m.next_available.load(Ordering::Relaxed) - tick0;
        assert!(reserved >= 4 * m.line_ticks(), "one CAS of 4 lines: {reserved} ticks");
        m.on_fence();
        assert!(t0.elapsed() >= Duration::from_micros(3), "waited {:?}", t0.elapsed());
        assert_eq!(m.on_flush(7), 1, "7 lines at once: one reservation");
    }

    #[test]
    fn epoch_reserves_a_barriers_lines_as_one_at_the_barrier() {
        let m = model(Reservation::Epoch);
        assert_eq!(m.on_flush(1) + m.on_flush(1) + m.on_flush(1), 0);
        let t0 = Instant::now();
        assert_eq!(m.on_fence_reserving().1, 1);
        assert!(t0.elapsed() >= Duration::from_micros(2), "3 lines: {:?}", t0.elapsed());
        assert_eq!(m.on_fence_reserving().1, 0, "an empty epoch reserves nothing");
    }

    #[test]
    fn flush_policy_reserves_per_flush_call() {
        let m = model(Reservation::Flush);
        assert_eq!(m.on_flush(1) + m.on_flush(1), 2);
        m.on_fence();
    }

    #[test]
    fn pending_lines_do_not_cross_models() {
        let (a, b) = (model(Reservation::Lines4), model(Reservation::Lines4));
        a.on_flush(3);
        assert_eq!(b.on_flush(1), 0, "a's three lines are not b's");
        assert_eq!(b.on_flush(3), 1, "b reserves its own four");
        // A thread that moves to another timed region leaves at most 3 unreserved lines behind.
        assert_eq!(a.on_flush(3), 0);
        assert_eq!(a.on_flush(1), 1);
        a.on_fence();
        b.on_fence();
    }

    #[test]
    fn thesis_bandwidth_is_in_gib() {
        // Thesis §5.1: "35ns per cache line (approximately 1.7GB/s persists)".
        let gib = |x: f64| (x * (1u64 << 30) as f64) as u64;
        let o = |bw| TimingOptions { write_bandwidth_bytes_per_s: bw, ..Default::default() };
        assert!((o(gib(1.7)).ns_per_line() - 35.0).abs() < 0.2);
        assert!((o(1_700_000_000).ns_per_line() - 35.0).abs() > 2.0, "10^9 B is not its GB");
        assert!((o(gib(1.5)).ns_per_line() - 39.7).abs() < 0.1);
        assert!(Reservation::ALL.iter().all(|r| Reservation::parse(r.name()) == Some(*r)));
    }

    /// Guards issue 36: an `io=fs` sync on tmpfs cost nothing, so the traditional engines ran
    /// free where the NVM ones paid; a sync's charge must grow with the bytes written before it.
    #[test]
    fn fs_sync_charge_scales_with_bytes_written() {
        let model = TimingModel::new(TimingOptions {
            fs_sync_ns: 2_000,
            fs_write_bytes_per_s: 1_000_000_000,
            ..Default::default()
        });
        // Medians over repetitions: robust to the odd preemption on a busy machine.
        let median = |bytes: u64| {
            let mut v: Vec<u64> = (0..101).map(|_| model.charge_fs_sync(bytes)).collect();
            v.sort_unstable();
            v[50] as f64
        };
        let (none, small, large) = (median(0), median(4_096), median(65_536));
        // 2 µs fixed; 4 KiB at 1 GB/s is 4.1 µs more, 64 KiB 65.5 µs more.
        assert!((1_800.0..2_600.0).contains(&none), "fixed part: {none} ns");
        assert!((5_700.0..7_000.0).contains(&small), "4 KiB: {small} ns");
        assert!((60_000.0..72_000.0).contains(&large), "64 KiB: {large} ns");
        let o = model.options;
        assert!((o.fs_sync_fixed_ns(65_536) - 67_536.0).abs() < 1.0);
        assert!(o.is_off() && !o.fs_is_off(), "the fs charge does not turn the NVM model on");
    }

    #[test]
    fn fs_sync_pays_the_device_barrier_and_bandwidth_too() {
        // 64 MB/s: 1 µs a line; 32 lines written through the file system wait 32 µs of device
        // time, plus the 5 µs barrier, as flushed lines and a fence would.
        let model = TimingModel::new(TimingOptions {
            persist_barrier_ns: 5_000,
            write_bandwidth_bytes_per_s: 64_000_000,
            ..Default::default()
        });
        let t0 = Instant::now();
        model.charge_fs_sync(32 * 64);
        assert!(t0.elapsed() >= Duration::from_micros(35), "{:?}", t0.elapsed());
    }

    #[test]
    fn impossible_parameters_are_rejected() {
        let bad = TimingOptions { persist_barrier_ns: 5_000_000_000, ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = TimingOptions { write_bandwidth_bytes_per_s: 1, ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = TimingOptions { fs_write_bytes_per_s: 1, ..Default::default() };
        assert!(bad.validate().is_err());
        let bad = TimingOptions { fs_sync_ns: 2_000_000_000, ..Default::default() };
        assert!(bad.validate().is_err());
        assert!(TimingOptions::default().validate().is_ok());
    }
}

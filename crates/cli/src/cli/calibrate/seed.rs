//! `nvmdb calibrate --out DIR`: thesis §5.1's two measurements of the timing model as a seed
//! directory (issue 36) — Fig. 5.1, delay precision (the step function of a TSC spin loop, "within
//! 6ns of the intended delay", its least-squares fit `a = 12.5`, `R^2 = .997`), and Table 5.2,
//! bandwidth-reservation accuracy (44–122 ns reservations reserve 99% of time; "122ns and greater
//! reservations accurately model constrained bandwidth"). Each is measured `--repeat` times and
//! judged by `experiments::verdict`; `nvmdb report --seed DIR` judges the claims again.
//!
//! Invariant: what this machine is (the loop's step `a`, the fit's `b` and `c`) is an input,
//! never a reproduced output; the outputs are the inserted delays' error, the fit's `R^2` and the
//! fraction of time reserved, and each one that is not reproduced carries a measured cause.

use experiments::plot::{render, Figure, Panel, Reference, Series, XY};
use experiments::report::seeds::Manifest;
use experiments::verdict::{self, Bound, Claim, Role, Verdict};
use pmem::calib::{self, StepFit};
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// Fig. 5.1's sweep: every whole nanosecond of intended delay up to here. Below ~200 ns the
/// loop polls the TSC without PAUSE (`Tsc::spin_until`), so this is the step function itself;
/// longer delays are judged apart, at [`LONG_DELAYS_NS`].
pub const STEP_MAX_NS: u64 = 200;
/// Trials per intended delay, as the thesis: "Points show the median of ten thousand delay
/// trials".
const STEP_TRIALS: usize = 10_000;
/// Delays the experiments insert (persist barriers, reservations of several lines, read
/// stalls): hundreds of ns to µs, where "within 6ns" must hold too.
pub const LONG_DELAYS_NS: [u64; 6] = [200, 500, 1_000, 2_000, 5_000, 10_000];
/// Thesis §5.1's bound on inserted delays (Fig. 5.1's caption; the text says 6.25 ns, half its
/// 12.5 ns step: we hold ours to the caption's 6).
pub const PAPER_DELAY_ERROR_NS: f64 = 6.0;
/// Thesis §5.1's fit: `a`, `b`, `c` and its `R^2`.
pub const PAPER_FIT: StepFit = StepFit { a_ns: 12.5, b: 0.434, c_ns: 10.1, r2: 0.997 };
/// What the thesis subtracts from an intended delay "to match to the closest step".
const PAPER_CORRECTION_NS: f64 = 9.3;
/// Thesis Table 5.2: reservation (ns) reserving 99% of time, the cells it was needed in.
pub const TABLE_5_2: [(u64, &str); 7] = [
    (44, "6 threads, pack sockets, spread cores"),
    (51, "12 threads, pack sockets (spread or pack cores)"),
    (96, "12 threads, spread sockets, spread cores"),
    (101, "12 threads, spread sockets, pack cores"),
    (104, "6 threads, pack sockets, pack cores"),
    (109, "6 threads, spread sockets, spread cores"),
    (122, "6 threads, spread sockets, pack cores: the worst cell"),
];
/// "122ns and greater reservations accurately model constrained bandwidth."
pub const PAPER_ACCURATE_FROM_NS: u64 = 122;
/// The model's shortest reservation: `MIN_RESERVATION_LINES` lines at the experiments' 1.5
/// GiB/s (39.7 ns a line), rounded up to a whole ns.
pub const MODEL_RESERVATION_NS: u64 = 159;
/// Reservation sizes tried: Table 5.2's, the model's, and enough others to bracket where this
/// machine reaches 99% (43 next to 44, so a threshold at the table's low end is resolved).
pub const RESERVATIONS_NS: [u64; 19] =
    [10, 20, 30, 40, 43, 44, 51, 60, 80, 96, 101, 104, 109, 122, 159, 200, 500, 1_000, 2_000];
/// Sizes the headline claim covers ("122ns and greater").
const ACCURATE_SIZES_NS: [u64; 6] = [122, 159, 200, 500, 1_000, 2_000];
/// The fraction the thesis calls accurate.
pub const RESERVED_TARGET: f64 = 0.99;
const RESERVATION_RUN: Duration = Duration::from_millis(100);
/// Fig. 5.1's left panel shows intended delays up to here, where the steps are visible.
const ZOOM_NS: u64 = 100;

/// What one repetition measured.
#[derive(Clone, Debug, Serialize)]
pub struct Repetition {
    /// The fixed cost this repetition's clock takes off every delay (`Tsc::overhead_ns`).
    pub overhead_ns: f64,
    pub step: StepRun,
    /// Median inserted delay at each of [`LONG_DELAYS_NS`].
    pub long_delays: Vec<(u64, f64)>,
    pub reservations: Vec<ReservationPoint>,
    /// N-Store §2.3's ratio on this machine, with the file-system model's bandwidth charge.
    pub fs_bandwidth: FsBandwidth,
}

/// N-Store (Arulraj et al., SIGMOD 2015, §2.3): "the NVM-aware allocator delivers 10-12x
/// higher write bandwidth than the filesystem". `--fs-write-bandwidth` (1 GB/s, ours) was
/// chosen so that this machine's ratio lands there; this measures the ratio it gives.
#[derive(Clone, Debug, Serialize)]
pub struct FsBandwidth {
    /// `Region::write` + `Region::persist` of 4 KiB at a time (store, flush of each line, one
    /// fence: the NVM-aware engines' persist), over a 32 MiB span.
    pub nvm_bytes_per_s: f64,
    /// A real 64 KiB `pwrite` to a file in `/dev/shm` (the `io=fs` engines' write), over a
    /// span of the same size.
    pub pwrite_bytes_per_s: f64,
    /// What the timing model charges per byte written through a file on tmpfs.
    pub charged_bytes_per_s: f64,
    /// The file path as the `io=fs` engines pay it: the `pwrite` and the charge in series.
    pub file_path_bytes_per_s: f64,
    /// `nvm_bytes_per_s / file_path_bytes_per_s`.
    pub ratio: f64,
}

/// Bytes each bandwidth trial writes.
const FS_TRIAL_BYTES: u64 = 4 << 20;
/// The span both paths cycle over: more than a core's caches hold, as a database's writes do,
/// and the same bytes on both sides.
const FS_SPAN_BYTES: u64 = 32 << 20;
/// The NVM path's persist unit: a page of rows written, flushed, one fence.
const NVM_PERSIST_BYTES: usize = 4 << 10;
/// The file path's write size: a run of pages, as a checkpoint or log append writes.
const FS_WRITE_BYTES: usize = 64 << 10;

/// Measures [`FsBandwidth`]: the medians over `trials` of each path's bandwidth over the same
/// span of bytes, trials of the two paths interleaved so that a drift of the shared machine
/// hits both alike.
pub fn fs_bandwidth(charged_bytes_per_s: f64, trials: usize) -> anyhow::Result<FsBandwidth> {
    use anyhow::Context as _;
    use std::os::unix::fs::FileExt;
    let options = pmem::RegionOptions {
        flush: Some(pmem::CpuFlushSupport::detect().best()),
        ..pmem::RegionOptions::new(pmem::Medium::Shm, FS_SPAN_BYTES)
    };
    let region = pmem::Region::open(&options).context("opening a scratch shm region")?;
    let dir = Path::new("/dev/shm");
    let dir = if dir.is_dir() { dir.to_path_buf() } else { std::env::temp_dir() };
    let path = dir.join(format!("nvmdb-calibrate-fs-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let result = (|| -> anyhow::Result<FsBandwidth> {
        let page = vec![0x5au8; NVM_PERSIST_BYTES];
        let chunk = vec![0xa5u8; FS_WRITE_BYTES];
        // Each trial continues where the last ended, so every trial writes cold-ish lines.
        let (mut nvm_at, mut fs_at) = (0u64, 0u64);
        let mut write_nvm = || {
            let start = std::time::Instant::now();
            for _ in 0..FS_TRIAL_BYTES / NVM_PERSIST_BYTES as u64 {
                region.write(nvm_at, &page);
                region.persist(nvm_at, NVM_PERSIST_BYTES as u64);
                nvm_at = (nvm_at + NVM_PERSIST_BYTES as u64) % FS_SPAN_BYTES;
            }
            FS_TRIAL_BYTES as f64 / start.elapsed().as_secs_f64()
        };
        let mut write_file = || -> anyhow::Result<f64> {
            let start = std::time::Instant::now();
            for _ in 0..FS_TRIAL_BYTES / FS_WRITE_BYTES as u64 {
                file.write_all_at(&chunk, fs_at).context("pwrite to the scratch file")?;
                fs_at = (fs_at + FS_WRITE_BYTES as u64) % FS_SPAN_BYTES;
            }
            Ok(FS_TRIAL_BYTES as f64 / start.elapsed().as_secs_f64())
        };
        // Touch the whole span of both first: page faults are neither path's cost.
        for _ in 0..FS_SPAN_BYTES / FS_TRIAL_BYTES {
            write_nvm();
            write_file()?;
        }
        let (mut nvm, mut fs) = (Vec::new(), Vec::new());
        for _ in 0..trials {
            nvm.push(write_nvm());
            fs.push(write_file()?);
        }
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (nvm, pwrite) = (median(nvm), median(fs));
        let file_path = 1.0 / (1.0 / pwrite + 1.0 / charged_bytes_per_s);
        Ok(FsBandwidth {
            nvm_bytes_per_s: nvm,
            pwrite_bytes_per_s: pwrite,
            charged_bytes_per_s,
            file_path_bytes_per_s: file_path,
            ratio: nvm / file_path,
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// Fig. 5.1: the median inserted delay per intended delay, and the thesis's fit of it.
#[derive(Clone, Debug, Serialize)]
pub struct StepRun {
    pub intended_ns: Vec<u64>,
    pub median_ns: Vec<f64>,
    /// The shortest delay the loop inserts (the median at 1 ns intended): intended delays
    /// below it cannot be met by any loop and are not judged.
    pub floor_ns: f64,
    /// Intended delays from here to [`STEP_MAX_NS`] are judged and fitted.
    pub judged_from_ns: u64,
    #[serde(serialize_with = "fit_json")]
    pub fit: Option<StepFit>,
    /// `R^2` of a straight line through the same points: what the step fit must beat.
    pub line_r2: Option<f64>,
}

fn fit_json<S: serde::Serializer>(fit: &Option<StepFit>, s: S) -> Result<S::Ok, S::Error> {
    let v = fit.map(|f| serde_json::json!({"a_ns": f.a_ns, "b": f.b, "c_ns": f.c_ns, "r2": f.r2}));
    v.serialize(s)
}

impl StepRun {
    /// From the medians of a sweep starting at 0 ns intended, one ns apart.
    pub fn new(intended_ns: Vec<u64>, median_ns: Vec<f64>) -> StepRun {
        let floor_ns =
            intended_ns.iter().zip(&median_ns).find(|(i, _)| **i >= 1).map_or(0.0, |(_, m)| *m);
        let judged_from_ns = (floor_ns.ceil() as u64).max(1);
        let (x, y) = judged(&intended_ns, &median_ns, judged_from_ns);
        let (fit, line_r2) = (calib::fit_step(&x, &y), calib::line_r2(&x, &y));
        StepRun { intended_ns, median_ns, floor_ns, judged_from_ns, fit, line_r2 }
    }

    /// The worst `|inserted - intended|` over the judged range, and the intended delay of it.
    pub fn worst_error(&self) -> (f64, u64) {
        let (x, y) = judged(&self.intended_ns, &self.median_ns, self.judged_from_ns);
        x.iter().zip(&y).map(|(i, m)| ((m - i).abs(), *i as u64)).fold((f64::NAN, 0), |w, e| {
            if w.0.is_nan() || e.0 > w.0 {
                e
            } else {
                w
            }
        })
    }
}

fn judged(intended: &[u64], median: &[f64], from: u64) -> (Vec<f64>, Vec<f64>) {
    intended
        .iter()
        .zip(median)
        .filter(|(i, _)| (from..=STEP_MAX_NS).contains(*i))
        .map(|(i, m)| (*i as f64, *m))
        .unzip()
}

/// Table 5.2: one run of `threads` threads reserving `reservation_ns` at a time.
#[derive(Clone, Debug, Serialize)]
pub struct ReservationPoint {
    pub threads: usize,
    pub reservation_ns: u64,
    /// Reserved over reserved + idle gaps shorter than a preemption (Table 5.2's measure).
    pub fraction_reserved: f64,
    pub wall_fraction: f64,
    /// CPU time the threads got over threads x elapsed (below 1: the cores were shared).
    pub on_cpu_fraction: f64,
    /// 99th percentile of how long past its reservation's end a thread's wait ended: long when
    /// reserving (a CAS of the shared word between cores) outlasts the reservation.
    pub late_ns_p99: f64,
    pub reservations: u64,
}

/// Measures one repetition: the Fig. 5.1 sweep, the long delays, and the reservation grid at 1
/// thread (nothing to overlap a reservation's cost with) and at `threads`.
pub fn measure(threads: usize, quick: bool) -> anyhow::Result<Repetition> {
    let trials = if quick { STEP_TRIALS / 10 } else { STEP_TRIALS };
    let pair = calib::rdtsc_pair_ticks();
    // A clock calibrated for this repetition alone, as another process would calibrate it.
    let tsc = pmem::Tsc::fresh();
    let intended: Vec<u64> = (0..=STEP_MAX_NS).collect();
    let median = calib::delay_medians_ns(&tsc, &intended, trials, pair);
    let long = calib::delay_medians_ns(&tsc, &LONG_DELAYS_NS, trials, pair);
    let run = if quick { RESERVATION_RUN / 10 } else { RESERVATION_RUN };
    let mut counts = vec![1, threads];
    counts.dedup();
    let reservations = counts
        .into_iter()
        .flat_map(|t| {
            RESERVATIONS_NS.iter().map(move |&ns| {
                let r = calib::reservation_fraction(ns, t, run);
                ReservationPoint {
                    threads: t,
                    reservation_ns: ns,
                    fraction_reserved: r.fraction_reserved(),
                    wall_fraction: r.wall_fraction(),
                    on_cpu_fraction: r.on_cpu_fraction,
                    late_ns_p99: r.late_ns_p99,
                    reservations: r.reservations,
                }
            })
        })
        .collect();
    let charged = crate::cli::bench::fs_write_bandwidth_default()?;
    Ok(Repetition {
        overhead_ns: tsc.overhead_ns(),
        step: StepRun::new(intended, median),
        long_delays: LONG_DELAYS_NS.iter().copied().zip(long).collect(),
        reservations,
        fs_bandwidth: fs_bandwidth(charged, if quick { 3 } else { 15 })?,
    })
}

/// The claims live as long as the command: their texts name this run's thread count.
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn range(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    (lo, values.iter().copied().fold(f64::NEG_INFINITY, f64::max))
}

/// Every claim of Fig. 5.1 and Table 5.2 on `reps` (ours: the range over them), the reservation
/// claims at `threads` threads.
pub fn claims(reps: &[Repetition], threads: usize) -> Vec<Claim> {
    let mut all = delay_claims(reps);
    all.extend(reservation_claims(reps, threads));
    all.push(fs_ratio_claim(reps));
    all
}

/// N-Store §2.3's allocator-over-file-system ratio: the constant `--fs-write-bandwidth` was
/// fitted to it, so it is listed as a fitted constant beside the paper's number, never judged.
fn fs_ratio_claim(reps: &[Repetition]) -> Claim {
    let of = |f: fn(&FsBandwidth) -> f64| -> Vec<f64> {
        reps.iter().map(|r| f(&r.fs_bandwidth)).collect()
    };
    let gb = |v: &[f64]| {
        let (lo, hi) = range(v);
        format!("{:.1}–{:.1} GB/s", lo / 1e9, hi / 1e9)
    };
    let charged = of(|b| b.charged_bytes_per_s);
    Claim::new(
        "NVM-aware allocator ÷ file system, write bandwidth (×): 4 KiB written and persisted \
         (a flush per line, one fence) against a 64 KiB `pwrite` to tmpfs plus the model's \
         per-byte charge, both over 32 MiB",
        "Arulraj et al., SIGMOD 2015, §2.3",
        Role::Fitted,
        Bound::Paper,
        11.0,
        &of(|b| b.ratio),
        (10.0, 12.0),
        format!(
            "the paper's 10–12x is what `--fs-write-bandwidth`'s default ({:.1} GB/s, ours) was \
             chosen to give on this machine, so the ratio restates a fitted constant: the NVM \
             path measured {}, the `pwrite` {}, the file path with the charge {} (medians over \
             interleaved trials, per repetition). The file system's sync is charged apart \
             (`--fs-sync-latency`, 2 µs a sync)",
            charged.first().copied().unwrap_or(0.0) / 1e9,
            gb(&of(|b| b.nvm_bytes_per_s)),
            gb(&of(|b| b.pwrite_bytes_per_s)),
            gb(&of(|b| b.file_path_bytes_per_s)),
        ),
    )
}

fn delay_claims(reps: &[Repetition]) -> Vec<Claim> {
    let fits: Vec<StepFit> = reps.iter().filter_map(|r| r.step.fit).collect();
    let worst: Vec<(f64, u64)> = reps.iter().map(|r| r.step.worst_error()).collect();
    let a = fits.iter().map(|f| f.a_ns).collect::<Vec<_>>();
    let (a_lo, a_hi) = range(&a);
    let from = reps.iter().map(|r| r.step.judged_from_ns).max().unwrap_or(1);
    let floor = range(&reps.iter().map(|r| r.step.floor_ns).collect::<Vec<_>>());
    let errors: Vec<f64> = worst.iter().map(|w| w.0).collect();
    let at: Vec<String> = worst
        .iter()
        .zip(reps)
        .map(|((e, i), r)| {
            let m = r.step.median_ns.get(*i as usize).copied().unwrap_or(f64::NAN);
            format!("{e:.1} ns at {i} ns intended ({m:.1} inserted)")
        })
        .collect();
    let (ovh_lo, ovh_hi) = range(&reps.iter().map(|r| r.overhead_ns).collect::<Vec<_>>());
    let step_cause = format!(
        "our loop's step is a = {a_lo:.1}–{a_hi:.1} ns (one `rdtsc` poll on this machine, fitted), \
         so rounding to a step alone allows ±a/2 = {:.1} ns, and where the steps fall depends on \
         the fixed cost each delay subtracts ({ovh_lo:.1}–{ovh_hi:.1} ns, calibrated per \
         repetition); worst per repetition: {}",
        a_hi / 2.0,
        at.join("; ")
    );
    let mut claims = vec![Claim::new(
        leak(format!(
            "worst |inserted − intended| of the median delay, ns, intended {from}–{STEP_MAX_NS} ns \
             (below {from} ns: shorter than the loop's shortest delay, {:.1}–{:.1} ns, not judged)",
            floor.0, floor.1
        )),
        "Fig. 5.1 caption, §5.1",
        Role::Output,
        Bound::Paper,
        PAPER_DELAY_ERROR_NS,
        &errors,
        (0.0, PAPER_DELAY_ERROR_NS),
        step_cause,
    )];
    claims.push(long_delay_claim(reps));
    claims.push(r2_claim(reps, &fits));
    claims.extend(fit_inputs(&fits));
    claims
}

fn long_delay_claim(reps: &[Repetition]) -> Claim {
    let worst: Vec<(f64, u64)> = reps
        .iter()
        .map(|r| {
            r.long_delays
                .iter()
                .map(|(i, m)| ((m - *i as f64).abs(), *i))
                .fold((f64::NAN, 0), |w, e| if w.0.is_nan() || e.0 > w.0 { e } else { w })
        })
        .collect();
    let errors: Vec<f64> = worst.iter().map(|w| w.0).collect();
    let at: Vec<String> = worst.iter().map(|(e, i)| format!("{e:.1} ns at {i} ns")).collect();
    Claim::new(
        "worst |inserted − intended| of the median delay, ns, at the delays the experiments \
         insert (200 ns – 10 µs)",
        "Fig. 5.1 caption, §5.1 (\"NVRAM persist latencies are expected to be in the hundreds \
         of ns or greater\")",
        Role::Output,
        Bound::Paper,
        PAPER_DELAY_ERROR_NS,
        &errors,
        (0.0, PAPER_DELAY_ERROR_NS),
        format!(
            "worst per repetition: {}; above ~200 ns the loop PAUSEs until its last ~200 ns \
             (`Tsc::spin_until`), and the fixed cost taken off every delay \
             (`Tsc::overhead_ns`) is estimated on a 500 ns spin and corrected by the mean error of \
             100–137 ns delays, once per process (here once per repetition)",
            at.join("; ")
        ),
    )
}

fn r2_claim(reps: &[Repetition], fits: &[StepFit]) -> Claim {
    let r2: Vec<f64> = fits.iter().map(|f| f.r2).collect();
    let lines: Vec<String> =
        reps.iter().filter_map(|r| r.step.line_r2).map(|v| format!("{v:.4}")).collect();
    let mut r2_all = r2.clone();
    if fits.len() < reps.len() {
        // A repetition without a fit (no spread in its medians) settles nothing.
        r2_all.push(f64::NAN);
    }
    let line: Vec<f64> = reps.iter().filter_map(|r| r.step.line_r2).collect();
    let (line_lo, line_hi) = range(&line);
    Claim::new(
        leak(format!(
            "R² of the step fit a·floor(x/a + b) + c to the medians, intended range as above (a \
             straight line through them: R² {line_lo:.4}–{line_hi:.4})"
        )),
        "§5.1",
        Role::Output,
        Bound::Paper,
        PAPER_FIT.r2,
        &r2_all,
        (PAPER_FIT.r2 - 0.0005, 1.0),
        format!(
            "R² of the step fit {} against {} for a straight line through the same medians: \
             the residuals around our steps are larger than the thesis's",
            r2.iter().map(|v| format!("{v:.4}")).collect::<Vec<_>>().join(", "),
            lines.join(", ")
        ),
    )
}

/// The fit's parameters: properties of this machine and loop, never outputs.
fn fit_inputs(fits: &[StepFit]) -> Vec<Claim> {
    let of = |f: fn(&StepFit) -> f64| fits.iter().map(f).collect::<Vec<_>>();
    let machine = "a property of this machine (the latency of one `rdtsc` poll of the delay \
                   loop), fitted to the medians; the thesis's Xeon E5645 took 12.5 ns";
    let where_in_step = "where in a step the loop's deadline falls, fitted; ours are delays \
                         after the loop's fixed cost is subtracted (`Tsc::overhead_ns`), the \
                         thesis's before its 9.3 ns correction";
    vec![
        input("a, ns per loop iteration (the step)", PAPER_FIT.a_ns, &of(|f| f.a_ns), machine),
        input("b, the step's phase", PAPER_FIT.b, &of(|f| f.b), where_in_step),
        input("c, ns, the fixed cost", PAPER_FIT.c_ns, &of(|f| f.c_ns), where_in_step),
    ]
}

fn input(what: &'static str, paper: f64, ours: &[f64], cause: &str) -> Claim {
    Claim::new(what, "§5.1", Role::Input, Bound::Paper, paper, ours, (paper, paper), cause)
}

/// `threads`' fraction reserved at `ns`, one value per repetition.
fn fractions(reps: &[Repetition], threads: usize, ns: u64) -> Vec<f64> {
    reps.iter()
        .filter_map(|r| {
            r.reservations
                .iter()
                .find(|p| p.threads == threads && p.reservation_ns == ns)
                .map(|p| p.fraction_reserved)
        })
        .collect()
}

fn reservation_claims(reps: &[Repetition], threads: usize) -> Vec<Claim> {
    let cause = |ns: u64| reservation_cause(reps, threads, ns);
    let mut claims: Vec<Claim> = TABLE_5_2
        .iter()
        .map(|&(ns, cell)| {
            Claim::new(
                leak(format!(
                    "fraction of time reserved by {ns} ns reservations, {threads} threads \
                     (Table 5.2 needs {ns} ns with {cell})"
                )),
                "Table 5.2",
                Role::Output,
                Bound::Paper,
                RESERVED_TARGET,
                &fractions(reps, threads, ns),
                (RESERVED_TARGET, 1.0),
                cause(ns),
            )
        })
        .collect();
    claims.push(Claim::new(
        leak(format!(
            "fraction of time reserved by the model's shortest reservation (4 lines at 1.5 GiB/s, \
             {MODEL_RESERVATION_NS} ns), {threads} threads"
        )),
        "§5.1 (\"at least four cache lines are always reserved together … the bandwidth \
         reservation is accurate\")",
        Role::Output,
        Bound::Paper,
        RESERVED_TARGET,
        &fractions(reps, threads, MODEL_RESERVATION_NS),
        (RESERVED_TARGET, 1.0),
        cause(MODEL_RESERVATION_NS),
    ));
    // Per repetition, the worst of the sizes: every size must reach 99% in a repetition for it
    // to count, and repetitions that disagree are inconclusive, as for any other claim.
    let worst: Vec<f64> = reps
        .iter()
        .map(|r| {
            let rep = std::slice::from_ref(r);
            let sizes = ACCURATE_SIZES_NS.iter().flat_map(|&ns| fractions(rep, threads, ns));
            sizes.fold(f64::INFINITY, f64::min)
        })
        .collect();
    claims.push(Claim::new(
        leak(format!(
            "fraction of time reserved by reservations of {PAPER_ACCURATE_FROM_NS} ns or more, the \
             smallest of 122, 159, 200, 500, 1000 and 2000 ns in a repetition, {threads} threads"
        )),
        "Table 5.2 caption (\"122ns and greater reservations accurately model constrained \
         bandwidth\")",
        Role::Output,
        Bound::Paper,
        RESERVED_TARGET,
        &worst,
        (RESERVED_TARGET, 1.0),
        format!(
            "{}; {}",
            short_sizes(reps, threads, &ACCURATE_SIZES_NS),
            cause(PAPER_ACCURATE_FROM_NS)
        ),
    ));
    claims.push(threshold_claim(reps, threads));
    claims
}

/// `threads`' runs at `ns`, over the repetitions.
fn points(reps: &[Repetition], threads: usize, ns: u64) -> Vec<&ReservationPoint> {
    reps.iter()
        .flat_map(|r| &r.reservations)
        .filter(|p| p.threads == threads && p.reservation_ns == ns)
        .collect()
}

/// Why `threads` threads reserve less than 99% at `ns`, from what the runs measured.
fn reservation_cause(reps: &[Repetition], threads: usize, ns: u64) -> String {
    let of = |t: usize, f: fn(&ReservationPoint) -> f64| {
        range(&points(reps, t, ns).into_iter().map(f).collect::<Vec<_>>())
    };
    let (cpu_lo, cpu_hi) = of(threads, |p| p.on_cpu_fraction * 100.0);
    let (_, late) = of(threads, |p| p.late_ns_p99);
    let (_, late_one) = of(1, |p| p.late_ns_p99);
    let (one_lo, one_hi) = of(1, |p| p.fraction_reserved * 100.0);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let shared = if cpu_lo < 90.0 { ", sharing the cores with other work" } else { "" };
    format!(
        "{threads} threads on this guest's {cores} vCPUs, on CPU {cpu_lo:.0}–{cpu_hi:.0}% of each \
         run{shared}: time goes unreserved when reserving again (the wait's end, a `rdtsc`, a \
         CAS moving `next_available` between the vCPUs) outlasts the other threads' \
         reservations; 99% of waits ended within {late:.0} ns of their reservation's end (1 \
         thread: {late_one:.0} ns), and 1 thread, which overlaps nothing, reserves \
         {one_lo:.1}–{one_hi:.1}% at {ns} ns. The thesis's 6 and 12 threads needed 44–122 ns \
         by their placement on its two-socket Xeon E5645; where this guest's vCPUs sit on its \
         host is unknown and may change between repetitions"
    )
}

/// The sizes of `sizes` where some repetition of `threads` threads reserved less than 99%.
fn short_sizes(reps: &[Repetition], threads: usize, sizes: &[u64]) -> String {
    let short: Vec<String> = sizes
        .iter()
        .filter_map(|&ns| {
            let (lo, hi) = range(&fractions(reps, threads, ns));
            (lo < RESERVED_TARGET)
                .then(|| format!("{ns} ns ({:.1}–{:.1}%)", lo * 100.0, hi * 100.0))
        })
        .collect();
    format!("below 99% at {}", short.join(", "))
}

/// Table 5.2's number itself: the smallest reservation that reserves 99%, as the bracket the
/// tried sizes leave ([previous size + 1, size]; unbounded when no size reaches it).
fn threshold_claim(reps: &[Repetition], threads: usize) -> Claim {
    let brackets: Vec<(f64, f64)> = reps
        .iter()
        .map(|r| {
            let reached = |ns: &u64| {
                r.reservations.iter().any(|p| {
                    p.threads == threads
                        && p.reservation_ns == *ns
                        && p.fraction_reserved >= RESERVED_TARGET
                })
            };
            match RESERVATIONS_NS.iter().position(reached) {
                Some(0) => (1.0, RESERVATIONS_NS[0] as f64),
                Some(i) => ((RESERVATIONS_NS[i - 1] + 1) as f64, RESERVATIONS_NS[i] as f64),
                None => ((RESERVATIONS_NS[RESERVATIONS_NS.len() - 1] + 1) as f64, f64::INFINITY),
            }
        })
        .collect();
    let lo = brackets.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let hi = brackets.iter().map(|b| b.1).fold(f64::NEG_INFINITY, f64::max);
    let (min, max) = (TABLE_5_2[0].0 as f64, PAPER_ACCURATE_FROM_NS as f64);
    let mut c = Claim::new(
        leak(format!(
            "smallest reservation reserving 99% of time, ns, {threads} threads (Table 5.2: 44–122 \
             over its eight cells; ours: the bracket between the sizes tried)"
        )),
        "Table 5.2",
        Role::Output,
        Bound::Paper,
        max,
        &[lo, hi.min(f64::MAX)],
        (min, max),
        reservation_cause(reps, threads, PAPER_ACCURATE_FROM_NS),
    );
    // An unbounded end (no size reached 99%) is judged like any other: above every maximum.
    c.ours_hi = hi;
    c.verdict = verdict::judge(lo, hi, Some(min), Some(max));
    if c.verdict == Verdict::Reproduced {
        c.cause.clear();
    } else if lo < min && hi <= max {
        c.cause = format!(
            "this machine reserves 99% with shorter reservations than any cell of Table 5.2 (a \
             CAS between {threads} threads of one socket is cheaper than across the thesis's \
             sockets and SMT contexts)"
        );
    }
    c
}

/// Where and how the measurements ran, for titles and notes.
pub struct Context {
    pub commit: String,
    pub threads: usize,
    pub quick: bool,
    /// 1-, 5- and 15-minute load averages before and after the measurements.
    pub load_before: Option<[f64; 3]>,
    pub load_after: Option<[f64; 3]>,
    /// `nvmdb calibrate --json`'s report of the same process, written beside.
    pub report_json: String,
}

fn load_text(l: Option<[f64; 3]>) -> String {
    l.map_or("unknown".into(), |[a, b, c]| format!("{a:.2} / {b:.2} / {c:.2}"))
}

/// Writes the seed directory: the measurements, the claims, the figures and the manifest;
/// returns the claims as text.
pub fn write(dir: &Path, reps: &[Repetition], ctx: &Context) -> anyhow::Result<String> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let put = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).with_context(|| format!("writing {name}"))
    };
    let claims = claims(reps, ctx.threads);
    verdict::check(&claims)?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let sub = format!(
        "{}nvmdb calibrate at {}, {cores} CPUs, {} repetitions; load average (1/5/15 min) {} \
         before, {} after",
        if ctx.quick { "QUICK run: " } else { "" },
        ctx.commit,
        reps.len(),
        load_text(ctx.load_before),
        load_text(ctx.load_after)
    );
    let text = format!("Thesis §5.1 beside ours ({sub}):\n{}", verdict::text(&claims));
    put("claims.txt", &text)?;
    put("claims.json", &serde_json::to_string_pretty(&claims)?)?;
    put("measurements.json", &serde_json::to_string_pretty(reps)?)?;
    put("calibrate.json", &ctx.report_json)?;
    let fig = |f: Figure, stem: &str| {
        render(&f, &dir.join(format!("{stem}.svg")), &dir.join(format!("{stem}.png")))
            .map_err(anyhow::Error::msg)
    };
    fig(step_figure(reps, &sub), "fig5.1")?;
    fig(reservation_figure(reps, ctx.threads, &sub), "table5.2")?;
    manifest(dir, reps, ctx, &sub)?;
    Ok(text)
}

fn manifest(dir: &Path, reps: &[Repetition], ctx: &Context, sub: &str) -> anyhow::Result<()> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).map(str::to_string))
        .and_then(|l| l.split(':').nth(1).map(|s| s.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let m = Manifest {
        seed: "timing model".into(),
        name: "thesis-fig5.1-table5.2-calibrate".into(),
        title: "NVRAM timing model: delay precision and bandwidth-reservation accuracy".into(),
        source: "Pelley, PhD thesis 2014, ch. V §5.1, Fig. 5.1, Table 5.2".into(),
        description: "The TSC spin loop behind every modelled delay, as a step function of the \
                      intended delay (its error and the thesis's least-squares fit), and the \
                      fraction of device time threads reserve on the shared `next_available` \
                      word at Table 5.2's reservation sizes; and the write bandwidth of the \
                      NVM path over the file-system model's (N-Store §2.3's 10-12x, to which \
                      `--fs-write-bandwidth` was fitted)."
            .into(),
        command: format!(
            "nvmdb calibrate --out {}{}{}",
            dir.display(),
            if reps.len() == 3 { String::new() } else { format!(" --repeat {}", reps.len()) },
            if ctx.quick { " --quick" } else { "" }
        ),
        claims: "claims.json".into(),
        figures: vec!["fig5.1.svg".into(), "table5.2.svg".into()],
        ours_range: format!(
            "{} repetitions in one process, each with a freshly calibrated clock",
            reps.len()
        ),
        quick: ctx.quick,
        notes: vec![
            format!(
                "measured on this machine ({cpu}, {} CPUs), not the thesis's dedicated two-socket \
                 Xeon E5645: the loop's step and the reservations' cost are properties of the \
                 machine; {sub}",
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ),
            format!(
                "Table 5.2's claims run {} threads (this machine's cores; the thesis 6 and 12 over \
                 socket and core placements, which a {}-CPU guest cannot place)",
                ctx.threads,
                std::thread::available_parallelism().map_or(0, |n| n.get())
            ),
            "our loop polls `rdtsc` (the thesis `rdtscp`) and subtracts its calibrated fixed \
             cost from every delay; the thesis subtracts 9.3 ns after its fit"
                .into(),
        ],
    };
    m.write(dir, "experiment.json")
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("experiment.json").display()))
}

fn xy(x: f64, y: f64) -> XY {
    XY { x, y, y_lo: y, y_hi: y }
}

/// Fig. 5.1 beside ours: inserted vs intended delay (last repetition), our fit, the thesis's
/// fit, and the error of every repetition against the ±6 ns bound.
fn step_figure(reps: &[Repetition], sub: &str) -> Figure {
    let Some(last) = reps.last() else { return Figure::default() };
    let s = &last.step;
    // The left panel shows the steps up close: the first 100 ns.
    let zoomed = |f: &dyn Fn(u64, f64) -> f64| -> Vec<XY> {
        let pts = s.intended_ns.iter().zip(&s.median_ns).filter(|(i, _)| **i <= ZOOM_NS);
        pts.map(|(i, m)| xy(*i as f64, f(*i, *m))).collect()
    };
    let mut delays = Panel {
        title: format!("inserted vs intended, 0–{ZOOM_NS} ns (medians; last repetition)"),
        ..Panel::default()
    };
    delays
        .series
        .push(Series { name: "intended (y = x)".into(), points: zoomed(&|i, _| i as f64) });
    if let Some(fit) = s.fit {
        delays.series.push(Series {
            name: format!(
                "ours: fit a = {:.2}, b = {:.3}, c = {:.1} (R² {:.4})",
                fit.a_ns, fit.b, fit.c_ns, fit.r2
            ),
            points: zoomed(&|i, _| fit.at(i as f64)),
        });
    }
    delays.series.push(Series { name: "ours: Tsc::delay_ns".into(), points: zoomed(&|_, m| m) });
    // The thesis's fit as its delays came out after its 9.3 ns correction, every 2.5 ns.
    for i in (4..=ZOOM_NS * 4 / 10).map(|q| q as f64 * 2.5) {
        delays.references.push(Reference::Point {
            x: i,
            ys: vec![PAPER_FIT.at(i - PAPER_CORRECTION_NS)],
            label: "thesis's fit 12.5·floor(x/12.5 + .434) + 10.1, at x − 9.3 ns".into(),
            short: String::new(),
        });
    }
    let mut errors = Panel {
        title: "inserted − intended (median), each repetition".into(),
        ..Panel::default()
    };
    for (n, r) in reps.iter().enumerate() {
        let pts = r
            .step
            .intended_ns
            .iter()
            .zip(&r.step.median_ns)
            .filter(|(i, _)| **i >= 1)
            .map(|(i, m)| xy(*i as f64, m - *i as f64))
            .collect();
        errors.series.push(Series { name: format!("ours: repetition {}", n + 1), points: pts });
    }
    for x in [s.judged_from_ns as f64, STEP_MAX_NS as f64] {
        errors.references.push(Reference::Point {
            x,
            ys: vec![-PAPER_DELAY_ERROR_NS, PAPER_DELAY_ERROR_NS],
            label: "Fig. 5.1: within 6 ns (judged from the loop's shortest delay)".into(),
            short: String::new(),
        });
    }
    Figure {
        title: "Fig. 5.1: delay precision of the TSC spin loop".into(),
        subtitle: sub.into(),
        note: "black: the thesis (its Xeon E5645, RDTSCP); ours: this machine, RDTSC".into(),
        x_label: "intended delay, ns".into(),
        y_label: "ns".into(),
        panels: vec![delays, errors],
        ..Figure::default()
    }
}

/// Table 5.2 beside ours: fraction of time reserved vs reservation size, 1 thread and
/// `threads`, the range over repetitions as error bars; the table's cells at 99%.
fn reservation_figure(reps: &[Repetition], threads: usize, sub: &str) -> Figure {
    let mut panel = Panel { title: String::new(), ..Panel::default() };
    let mut counts = vec![1, threads];
    counts.dedup();
    for t in counts {
        let points = RESERVATIONS_NS
            .iter()
            .filter_map(|&ns| {
                let v = fractions(reps, t, ns);
                let (lo, hi) = range(&v);
                let mut sorted = v.clone();
                sorted.sort_by(f64::total_cmp);
                let mid = *sorted.get(sorted.len() / 2)?;
                Some(XY {
                    x: (ns as f64).log10(),
                    y: mid * 100.0,
                    y_lo: lo * 100.0,
                    y_hi: hi * 100.0,
                })
            })
            .collect();
        let on_cpu: Vec<f64> = reps
            .iter()
            .flat_map(|r| &r.reservations)
            .filter(|p| p.threads == t)
            .map(|p| p.on_cpu_fraction * 100.0)
            .collect();
        let (cpu_lo, cpu_hi) = range(&on_cpu);
        let name = format!(
            "ours: {t} thread{} (median, range; on CPU {cpu_lo:.0}–{cpu_hi:.0}% of each run)",
            if t == 1 { "" } else { "s" }
        );
        panel.series.push(Series { name, points });
    }
    for (ns, _) in TABLE_5_2 {
        panel.references.push(Reference::Point {
            x: (ns as f64).log10(),
            ys: vec![RESERVED_TARGET * 100.0],
            label: "Table 5.2: 99% reserved from this size (one of its cells)".into(),
            short: String::new(),
        });
    }
    panel.references.push(Reference::X {
        x: (PAPER_ACCURATE_FROM_NS as f64).log10(),
        label: "122 ns and greater: accurate".into(),
    });
    panel
        .marks
        .push(((MODEL_RESERVATION_NS as f64).log10(), "the model's 4 lines at 1.5 GiB/s".into()));
    Figure {
        title: "Table 5.2: fraction of device time reserved".into(),
        subtitle: sub.into(),
        note: format!(
            "thesis: 6 and 12 threads on a two-socket Xeon E5645; ours: 1 and {threads} threads"
        ),
        x_label: "reservation, ns (log)".into(),
        y_label: "time reserved, %".into(),
        log_x: true,
        panels: vec![panel],
        ..Figure::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repetition whose medians are `intended + error(intended)` and whose reservations
    /// reserve `fraction(size)` at every thread count.
    fn synthetic(error: impl Fn(u64) -> f64, fraction: impl Fn(u64) -> f64) -> Repetition {
        let intended: Vec<u64> = (0..=STEP_MAX_NS).collect();
        let median = intended
            .iter()
            .map(|&i| if i == 0 { 0.0 } else { (i as f64 + error(i)).max(20.0) })
            .collect();
        let reservations = [1, 2]
            .into_iter()
            .flat_map(|t| {
                RESERVATIONS_NS.iter().map(move |&ns| ReservationPoint {
                    threads: t,
                    reservation_ns: ns,
                    fraction_reserved: 0.0,
                    wall_fraction: 0.0,
                    on_cpu_fraction: 0.8,
                    late_ns_p99: 12.0,
                    reservations: 1_000,
                })
            })
            .map(|mut p| {
                p.fraction_reserved = fraction(p.reservation_ns);
                p
            })
            .collect();
        Repetition {
            overhead_ns: 20.0,
            step: StepRun::new(intended, median),
            long_delays: LONG_DELAYS_NS.iter().map(|&i| (i, i as f64 + error(i))).collect(),
            reservations,
            fs_bandwidth: FsBandwidth {
                nvm_bytes_per_s: 8e9,
                pwrite_bytes_per_s: 2e9,
                charged_bytes_per_s: 1e9,
                file_path_bytes_per_s: 2e9 / 3.0,
                ratio: 12.0,
            },
        }
    }

    /// Steps of `a` ns, rounded to the nearest step: the error stays within a/2.
    fn steps(a: f64) -> impl Fn(u64) -> f64 {
        move |i| (i as f64 / a).round() * a - i as f64
    }

    fn find<'a>(claims: &'a [Claim], starts: &str) -> &'a Claim {
        claims.iter().find(|c| c.what.starts_with(starts)).expect(starts)
    }

    /// Guards the Fig. 5.1 claim judging a loop whose steps are too coarse as reproduced:
    /// 20 ns steps put a median up to 10 ns off, beyond the thesis's 6 ns, so it differs and
    /// says why (the step and the worst point), while 10 ns steps (5 ns off) reproduce.
    #[test]
    fn a_delay_error_beyond_six_ns_differs_with_its_cause() {
        let coarse = vec![synthetic(steps(20.0), |_| 1.0); 3];
        let claims = claims(&coarse, 2);
        let c = find(&claims, "worst |inserted − intended| of the median delay, ns, intended");
        assert_eq!(c.verdict, Verdict::Differs, "{c:?}");
        assert!(c.ours_lo > 9.0 && c.cause.contains("a = 20.0"), "{c:?}");
        let fine = vec![synthetic(steps(10.0), |_| 1.0); 3];
        let claims = super::claims(&fine, 2);
        let c = find(&claims, "worst |inserted − intended| of the median delay, ns, intended");
        assert_eq!(c.verdict, Verdict::Reproduced, "{c:?}");
        assert!(c.ours_hi <= 5.0 + 1e-9 && c.cause.is_empty(), "{c:?}");
        assert!(verdict::check(&claims).is_ok());
    }

    /// Guards `a` being counted as a reproduced result: the loop's step is this machine's
    /// property, listed as an input even when it equals the thesis's 12.5 ns.
    #[test]
    fn the_fitted_step_is_an_input_never_reproduced() {
        let reps = vec![synthetic(steps(12.5), |_| 1.0); 3];
        let claims = claims(&reps, 2);
        let a = find(&claims, "a, ns per loop iteration");
        assert_eq!((a.role, a.verdict), (Role::Input, Verdict::NotJudged));
        assert!((a.ours_lo - 12.5).abs() < 0.05, "{a:?}");
        assert!(claims.iter().filter(|c| c.role == Role::Input).all(|c| !c.counts_as_reproduced()));
        let r2 = find(&claims, "R² of the step fit");
        assert_eq!(r2.verdict, Verdict::Reproduced, "{r2:?}");
    }

    /// Guards N-Store's allocator ratio being counted as a reproduction: the file-system
    /// model's charge was fitted to it, so it is a fitted constant (never judged, not even
    /// inside 10-12x), and it says what was measured on each path.
    #[test]
    fn the_allocator_over_file_system_ratio_is_a_fitted_constant() {
        let reps = vec![synthetic(steps(10.0), |_| 1.0); 3];
        let claims = claims(&reps, 2);
        let c = find(&claims, "NVM-aware allocator ÷ file system");
        assert_eq!((c.role, c.verdict), (Role::Fitted, Verdict::NotJudged));
        assert_eq!((c.ours_lo, c.ours_hi, c.paper), (12.0, 12.0, 11.0));
        assert!(!c.counts_as_reproduced());
        assert!(c.cause.contains("NVM path measured 8.0–8.0 GB/s"), "{}", c.cause);
        assert!(c.cause.contains("with the charge 0.7–0.7 GB/s"), "{}", c.cause);
    }

    /// Guards the ratio's measurement: both paths write and the file path is the slower, with
    /// the charge in series (a path measured as 0 or infinite bytes/s would be a broken timer).
    #[test]
    fn the_file_path_is_measured_with_its_charge_in_series() {
        let b = fs_bandwidth(1e9, 3).unwrap();
        assert!(b.nvm_bytes_per_s.is_finite() && b.nvm_bytes_per_s > 0.0, "{b:?}");
        assert!(b.pwrite_bytes_per_s.is_finite() && b.pwrite_bytes_per_s > 0.0, "{b:?}");
        assert!(b.file_path_bytes_per_s < b.charged_bytes_per_s.min(b.pwrite_bytes_per_s));
        assert!((b.ratio - b.nvm_bytes_per_s / b.file_path_bytes_per_s).abs() < 1e-9);
    }

    /// Guards the Table 5.2 claims: 98% reserved at every size below 500 ns differs at each
    /// table size, the headline "122 ns and greater" differs (one size below in every
    /// repetition is enough), and the threshold lies above the table's 122 ns; repetitions
    /// either side of 99% are inconclusive.
    #[test]
    fn reservations_below_99_percent_differ_and_straddling_ones_are_inconclusive() {
        let short = |ns: u64| if ns < 500 { 0.98 } else { 0.995 };
        let reps = vec![synthetic(steps(10.0), short); 3];
        let claims = claims(&reps, 2);
        for (ns, _) in TABLE_5_2 {
            let c = find(&claims, &format!("fraction of time reserved by {ns} ns"));
            assert_eq!(c.verdict, Verdict::Differs, "{c:?}");
            assert!(
                c.cause.contains("on CPU 80–80% of each run, sharing the cores"),
                "{}",
                c.cause
            );
        }
        let every = find(&claims, "fraction of time reserved by reservations of 122 ns or more");
        assert_eq!(every.verdict, Verdict::Differs, "{every:?}");
        assert!(every.cause.starts_with("below 99% at 122 ns (98.0–98.0%), 159 ns"), "{every:?}");
        let t = find(&claims, "smallest reservation reserving 99%");
        assert_eq!((t.ours_lo, t.ours_hi, t.verdict), (201.0, 500.0, Verdict::Differs));
        let mut mixed = reps.clone();
        mixed[0] = synthetic(steps(10.0), |_| 0.995);
        let claims = super::claims(&mixed, 2);
        let c = find(&claims, "fraction of time reserved by 44 ns");
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        // One repetition with every size >= 122 ns at 99.5%, two with some below: inconclusive.
        let c = find(&claims, "fraction of time reserved by reservations of 122 ns or more");
        assert_eq!(c.verdict, Verdict::Inconclusive, "{c:?}");
        assert!(verdict::check(&claims).is_ok());
    }

    /// A machine where no size reaches 99%: the threshold is unbounded, above 122, so differs.
    #[test]
    fn no_size_reaching_99_percent_is_an_unbounded_threshold_that_differs() {
        let reps = vec![synthetic(steps(10.0), |_| 0.9); 3];
        let claims = claims(&reps, 2);
        let t = find(&claims, "smallest reservation reserving 99%");
        assert!(t.ours_hi.is_infinite(), "{t:?}");
        assert_eq!(t.verdict, Verdict::Differs);
        assert!(!t.cause.is_empty());
    }
}

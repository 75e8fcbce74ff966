//! Native insert rate (the instruction-execution rate of thesis §8.1) and traced runs.
//!
//! The native rate runs the queue on a `dram` region (flushes are no-ops there, fences remain),
//! untraced: inserts per second over all threads, in rounds that each fill a region and then
//! reset it (the thesis inserted 10^8 entries into a circular buffer; a round is our lap). The
//! traced run records one total order of every persistent and lock access for the analyser.

use crate::queue::{self, payload_for, Design, Queue, QueueOptions};
use crate::Result;
use pmem::{Medium, Region, RegionOptions, TraceEvent, TraceKind};
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Slots of the region a rate round fills (32 MiB of entries).
pub const ROUND_SLOTS: u64 = 1 << 18;
/// Most threads a run may use.
pub const MAX_THREADS: u64 = 64;
/// Most inserts one traced run may record (a trace is ~30 events of 40 bytes per insert).
pub const MAX_TRACE_INSERTS: u64 = 2_000_000;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct NativeRate {
    pub inserts: u64,
    pub seconds: f64,
    pub inserts_per_s: f64,
}

fn check_threads(threads: u64) -> Result<()> {
    if threads == 0 || threads > MAX_THREADS {
        return Err(crate::error::invalid("threads", format!("{threads} (expected 1 to 64)")));
    }
    Ok(())
}

fn region(slots: u64, trace: bool) -> Result<Region> {
    let size = queue::DATA_OFFSET + slots * queue::SLOT_BYTES;
    Ok(Region::open(&RegionOptions { trace, ..RegionOptions::new(Medium::Dram, size) })?)
}

/// Runs one round: every thread inserts `per_thread` entries; returns the wall time from the
/// common start to the last thread's end.
fn round(q: &Arc<Queue>, threads: u64, per_thread: u64) -> Result<Duration> {
    let start = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (q, start) = (q.clone(), start.clone());
            std::thread::spawn(move || -> Result<Instant> {
                let entry = payload_for(t);
                start.wait();
                for _ in 0..per_thread {
                    std::hint::black_box(q.insert(&entry)?);
                }
                Ok(Instant::now())
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    let mut last = began;
    for h in handles {
        last = last.max(h.join().expect("an insert thread panicked")?);
    }
    Ok(last - began)
}

/// Inserts per second of `design` on `threads` threads, over at least `inserts` inserts.
pub fn native_rate(design: Design, threads: u64, inserts: u64) -> Result<NativeRate> {
    check_threads(threads)?;
    let per_round = (ROUND_SLOTS / threads).max(1);
    let mut q =
        Queue::format(region(per_round * threads, false)?, design, QueueOptions::default())?;
    // One untimed round warms the region's pages and the caches.
    let warm = Arc::new(q);
    round(&warm, threads, per_round)?;
    q = Arc::into_inner(warm).expect("threads joined");
    let (mut done, mut time) = (0u64, Duration::ZERO);
    while done < inserts.max(1) {
        q.reset();
        let shared = Arc::new(q);
        time += round(&shared, threads, per_round)?;
        q = Arc::into_inner(shared).expect("threads joined");
        done += per_round * threads;
    }
    let seconds = time.as_secs_f64().max(1e-9);
    Ok(NativeRate { inserts: done, seconds, inserts_per_s: done as f64 / seconds })
}

/// How the threads of a traced run interleave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Threads run freely (the thesis's method). On a machine with fewer idle cores than
    /// threads, the OS runs them one at a time for whole time slices, so the trace shows long
    /// runs of one thread and little of the thread concurrency the thesis measured.
    Free,
    /// Threads take turns, one insert each, as threads of equal speed on their own cores
    /// would: insert-level interleaving regardless of the machine's load.
    RoundRobin,
}

impl Schedule {
    pub fn parse(s: &str) -> Option<Schedule> {
        match s {
            "free" => Some(Schedule::Free),
            "round-robin" => Some(Schedule::RoundRobin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Schedule::Free => "free",
            Schedule::RoundRobin => "round-robin",
        }
    }
}

/// A traced run's events and how its threads interleaved.
pub struct Traced {
    pub events: Vec<TraceEvent>,
    pub inserts: u64,
    /// Of consecutive inserts (in trace order), the fraction by different threads: 1 is perfect
    /// alternation of two threads, 0 one thread at a time.
    pub switch_fraction: f64,
    /// The event that starts the second half of the inserts (their NewStrand), and how many
    /// inserts start from there: the analyser measures the steady-state path over that half
    /// ([`crate::analyse::Analysis::path_per_unit`]), so the first inserts' start-up does not
    /// count and a path that stops growing does not make the rate grow with the trace.
    pub split_event: u64,
    pub inserts_after_split: u64,
}

impl Traced {
    /// An analyser configuration that records the path at [`Traced::split_event`].
    pub fn config(&self, config: crate::analyse::Config) -> crate::analyse::Config {
        crate::analyse::Config { split_event: Some(self.split_event), ..config }
    }

    /// The steady-state persist critical path per insert of an analysis of this trace made
    /// with [`Traced::config`].
    pub fn path_per_insert(&self, a: &crate::analyse::Analysis) -> f64 {
        a.path_per_unit(self.inserts, self.inserts_after_split)
    }

    /// The finite-trace reading of an analysis of this trace: its whole critical path ÷ the
    /// inserts traced ([`crate::analyse::Analysis::finite_path_per_unit`]).
    pub fn finite_path_per_insert(&self, a: &crate::analyse::Analysis) -> f64 {
        a.finite_path_per_unit(self.inserts)
    }
}

/// Records the trace of `inserts` inserts (split over `threads`), after formatting.
pub fn traced_run(
    design: Design,
    threads: u64,
    inserts: u64,
    schedule: Schedule,
) -> Result<Traced> {
    check_threads(threads)?;
    if inserts == 0 || inserts > MAX_TRACE_INSERTS {
        return Err(crate::error::invalid(
            "trace inserts",
            format!("{inserts} (expected 1 to {MAX_TRACE_INSERTS})"),
        ));
    }
    let per_thread = inserts.div_ceil(threads);
    let q = Queue::format(region(per_thread * threads, true)?, design, QueueOptions::default())?;
    let q = Arc::new(q);
    q.region().take_trace();
    match schedule {
        Schedule::Free => {
            round(&q, threads, per_thread)?;
        }
        Schedule::RoundRobin => turns(&q, threads, per_thread)?,
    }
    let (events, dropped) = q.region().take_trace().expect("a traced region");
    if dropped > 0 {
        return Err(crate::error::invalid(
            "trace inserts",
            format!("{dropped} events over the trace limit"),
        ));
    }
    // Every insert starts one strand (Fig. 7.1), so NewStrand events mark inserts.
    let starts: Vec<(u64, u64)> = (0u64..)
        .zip(&events)
        .filter(|(_, e)| e.kind == TraceKind::NewStrand)
        .map(|(i, e)| (i, e.thread))
        .collect();
    let switches = starts.windows(2).filter(|w| w[0].1 != w[1].1).count();
    let switch_fraction = switches as f64 / (starts.len().max(2) - 1) as f64;
    let half = starts.len() / 2;
    let (split_event, inserts_after_split) = match starts.get(half) {
        Some(&(event, _)) => (event, (starts.len() - half) as u64),
        None => (0, 0),
    };
    Ok(Traced {
        events,
        inserts: per_thread * threads,
        switch_fraction,
        split_event,
        inserts_after_split,
    })
}

/// Threads insert in turn, one insert each.
fn turns(q: &Arc<Queue>, threads: u64, per_thread: u64) -> Result<()> {
    let turn = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (q, turn) = (q.clone(), turn.clone());
            std::thread::spawn(move || -> Result<()> {
                let entry = payload_for(t);
                for k in 0..per_thread {
                    let mine = k * threads + t;
                    while turn.load(Ordering::Acquire) != mine {
                        std::thread::yield_now();
                    }
                    q.insert(&entry)?;
                    turn.store(mine + 1, Ordering::Release);
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().expect("an insert thread panicked")?;
    }
    Ok(())
}

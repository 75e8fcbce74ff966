//! Crash tests of the queues on the `sim` medium: run inserts on N threads, cut a crash image
//! at a chosen store or fence under a policy (persisted / evict / torn), recover, and check:
//! every entry is one that was inserted (no stale, torn or phantom entry), at the place its
//! insert got, each thread's entries in its insertion order, and every insert whose
//! [`Queue::sync`] returned before the cut is present.
//!
//! Would catch: a missing or misplaced persist barrier (the head covering an entry that is not
//! yet durable, an end bit set before its entry), a head that moves backwards, and an
//! acknowledgement given before the insert was durable.

use crate::queue::{self, id_of, payload_for, Design, Fault, Queue, QueueOptions, STALE_ID_BASE};
use crate::Result;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// One crash test's workload.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CrashOptions {
    pub design: Design,
    pub threads: u64,
    pub inserts_per_thread: u64,
    pub fault: Option<Fault>,
}

/// A failed check, with what reproduces it (multi-threaded runs only probabilistically).
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub event: CrashEvent,
    pub count: u64,
    pub policy: CrashPolicy,
    pub seed: u64,
    pub message: String,
}

/// The outcome of many crash points.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CrashReport {
    /// Crash points tried.
    pub points: u64,
    /// Points the run reached (a cut was taken).
    pub cuts: u64,
    /// Acknowledged inserts checked, and entries recovered, over all cuts.
    pub acked: u64,
    pub recovered: u64,
    pub holes: u64,
    pub violations: Vec<Violation>,
}

/// Most threads a crash test runs (ids pack the thread into the top bits).
const MAX_THREADS: u64 = 64;

fn id(thread: u64, k: u64) -> u64 {
    (thread << 32) | k
}

fn validate(o: &CrashOptions) -> Result<()> {
    if o.threads == 0 || o.threads > MAX_THREADS {
        return Err(crate::error::invalid("threads", format!("{} (expected 1 to 64)", o.threads)));
    }
    if o.inserts_per_thread == 0 || o.inserts_per_thread >= 1 << 20 {
        return Err(crate::error::invalid(
            "inserts per thread",
            format!("{} (expected 1 to 1048575)", o.inserts_per_thread),
        ));
    }
    Ok(())
}

fn new_queue(o: &CrashOptions) -> Result<Queue> {
    let slots = o.threads * o.inserts_per_thread;
    let region = Region::open(&RegionOptions::new(
        Medium::Sim,
        queue::DATA_OFFSET + slots * queue::SLOT_BYTES,
    ))?;
    Queue::format(region, o.design, QueueOptions { fault: o.fault, stale_fill: true })
}

/// Inserts on every thread; returns, per thread, `(id, start, acknowledged before the cut)`.
fn run_inserts(q: &Arc<Queue>, o: &CrashOptions) -> Result<Vec<Vec<(u64, u64, bool)>>> {
    let handles: Vec<_> = (0..o.threads)
        .map(|t| {
            let q = q.clone();
            let n = o.inserts_per_thread;
            std::thread::spawn(move || -> Result<Vec<(u64, u64, bool)>> {
                let sim = q.region().sim().expect("a sim region");
                let mut done = Vec::with_capacity(n as usize);
                for k in 0..n {
                    let ticket = q.insert(&payload_for(id(t, k)))?;
                    q.sync(&ticket)?;
                    done.push((id(t, k), ticket.start, !sim.cut_taken()));
                }
                Ok(done)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("an insert thread panicked")).collect()
}

/// Stores and fences one run makes after formatting (to spread crash points over).
pub fn count_events(o: &CrashOptions) -> Result<(u64, u64)> {
    validate(o)?;
    let q = Arc::new(new_queue(o)?);
    let before = q.region().sim().expect("sim").event_counts();
    run_inserts(&q, o)?;
    let after = q.region().sim().expect("sim").event_counts();
    Ok((after.0 - before.0, after.1 - before.1))
}

/// What one crash found.
#[derive(Clone, Debug, Default)]
pub struct CrashOutcome {
    /// Empty when recovery was correct.
    pub problems: Vec<String>,
    pub acked: u64,
    pub recovered: u64,
    pub holes: u64,
}

/// One crash: `Ok(None)` if the run ended before the point.
pub fn crash_once(
    o: &CrashOptions,
    point: CrashPoint,
    policy: CrashPolicy,
    seed: u64,
) -> Result<Option<CrashOutcome>> {
    validate(o)?;
    let q = Arc::new(new_queue(o)?);
    let sim = q.region().sim().expect("sim");
    sim.arm(point, policy, seed);
    let runs = run_inserts(&q, o)?;
    let Some(image) = sim.take_image() else { return Ok(None) };
    let back = Region::from_image(&image, &RegionOptions::new(Medium::Sim, 0))?;
    let mut problems = Vec::new();
    let rec = match queue::recover(&back) {
        Ok(rec) => rec,
        Err(e) => {
            let problems = vec![format!("recovery failed: {e}")];
            return Ok(Some(CrashOutcome { problems, ..Default::default() }));
        }
    };
    let placed: HashMap<u64, u64> =
        runs.iter().flatten().map(|&(id, start, _)| (id, start)).collect();
    let mut seen: HashMap<u64, u64> = HashMap::new();
    let mut last_of_thread: HashMap<u64, u64> = HashMap::new();
    for (start, entry) in &rec.entries {
        let Some(id) = id_of(entry) else {
            problems.push(format!("entry at {start} is torn or garbage (not an inserted entry)"));
            continue;
        };
        if id >= STALE_ID_BASE {
            problems.push(format!("entry at {start} is a stale slot (phantom entry)"));
            continue;
        }
        let (thread, k) = (id >> 32, id & 0xffff_ffff);
        if thread >= o.threads || k >= o.inserts_per_thread {
            problems.push(format!("entry at {start} has id {id:#x}, never inserted"));
            continue;
        }
        if let Some(first) = seen.insert(id, *start) {
            problems.push(format!("entry {id:#x} at {start} and again at {first}"));
        }
        if let Some(&want) = placed.get(&id) {
            if want != *start {
                problems.push(format!("entry {id:#x} at {start}, but its insert got {want}"));
            }
        }
        if let Some(prev) = last_of_thread.insert(thread, k) {
            if prev >= k {
                problems.push(format!("thread {thread}: entry {k} recovered after entry {prev}"));
            }
        }
    }
    let mut acked = 0;
    for &(id, start, ack) in runs.iter().flatten() {
        if ack {
            acked += 1;
            if !seen.contains_key(&id) {
                problems.push(format!("acknowledged insert {id:#x} (at {start}) lost"));
            }
        }
    }
    Ok(Some(CrashOutcome {
        problems,
        acked,
        recovered: rec.entries.len() as u64,
        holes: rec.holes,
    }))
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `points` crash points spread uniformly over one run's stores and fences, cycling through
/// `policies`; stops collecting after `max_violations`.
pub fn crash_many(
    o: &CrashOptions,
    points: u64,
    policies: &[CrashPolicy],
    seed: u64,
    max_violations: usize,
) -> Result<CrashReport> {
    if policies.is_empty() {
        return Err(crate::error::invalid("policy", "no crash policy given"));
    }
    let (stores, fences) = count_events(o)?;
    let mut report = CrashReport::default();
    let mut rng = seed;
    for i in 0..points {
        let policy = policies[(i % policies.len() as u64) as usize];
        let (event, total) = if i % 2 == 0 || fences == 0 {
            (CrashEvent::Store, stores)
        } else {
            (CrashEvent::Fence, fences)
        };
        let count = 1 + splitmix(&mut rng) % total.max(1);
        let run_seed = seed.wrapping_add(i);
        report.points += 1;
        let point = CrashPoint { event, count };
        let Some(outcome) = crash_once(o, point, policy, run_seed)? else { continue };
        report.cuts += 1;
        report.acked += outcome.acked;
        report.recovered += outcome.recovered;
        report.holes += outcome.holes;
        for message in outcome.problems {
            if report.violations.len() < max_violations {
                report.violations.push(Violation { event, count, policy, seed: run_seed, message });
            }
        }
    }
    Ok(report)
}

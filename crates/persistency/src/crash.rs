//! Crash tests of the queues (thesis §7.1's recovery) on the `sim` medium: run inserts — and,
//! with `wrap_slots`, dequeues on a small circular buffer that wraps many times — on N
//! threads, cut a crash image at a chosen store or fence under a policy (persisted / evict /
//! torn), recover, and check that the queue is a prefix-consistent state: every entry is one
//! that was inserted (no stale, torn, phantom or duplicated entry), at the place its insert
//! got, each thread's entries in its insertion order; every insert whose [`Queue::sync`]
//! returned before the cut is present unless a dequeue took it; no entry whose dequeue
//! [`Queue::sync_dequeue`] acknowledged is. The run itself checks that dequeues return every
//! entry once, intact, in insertion order.
//!
//! Would catch: a missing or misplaced persist barrier (the head covering an entry that is not
//! yet durable, an end bit set before its entry, a recycled slot overwritten before the tail
//! that freed it is durable, a tail persisted past a head that is not), a head or tail that
//! moves backwards, and an acknowledgement given before the operation was durable.

use crate::error::Error;
use crate::queue::{self, id_of, payload_for, Design, Fault, Queue, QueueOptions, STALE_ID_BASE};
use crate::Result;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One crash test's workload.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct CrashOptions {
    pub design: Design,
    pub threads: u64,
    pub inserts_per_thread: u64,
    pub fault: Option<Fault>,
    /// `Some(n)`: an `n`-slot queue, and every thread also dequeues — after every second
    /// insert, and whenever its insert finds the queue full — so the buffer wraps around.
    /// `None`: inserts only, into a queue that holds them all.
    pub wrap_slots: Option<u64>,
}

/// How long a thread of a wrapped run waits for a full queue to drain (another thread's
/// insert may be still copying the oldest entry) before the run fails.
const FULL_PATIENCE: Duration = Duration::from_secs(30);

/// One dequeue of a run: the entry's id (`None`: torn or unknown), its counter, and whether
/// [`Queue::sync_dequeue`] acknowledged it before the cut.
type DequeueLog = Mutex<Vec<(Option<u64>, u64, bool)>>;

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
    /// Acknowledged dequeues checked (their entries must be gone), over all cuts.
    pub acked_dequeues: u64,
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
    if let Some(n) = o.wrap_slots {
        // Each thread may hold one slot while it waits for the others to drain the rest.
        if n < o.threads + 1 || n > 1 << 20 {
            return Err(crate::error::invalid(
                "wrap slots",
                format!("{n} (expected threads + 1 to 1048576)"),
            ));
        }
    }
    Ok(())
}

fn new_queue(o: &CrashOptions) -> Result<Queue> {
    let slots = o.wrap_slots.unwrap_or(o.threads * o.inserts_per_thread);
    let region = Region::open(&RegionOptions::new(
        Medium::Sim,
        queue::DATA_OFFSET + slots * queue::SLOT_BYTES,
    ))?;
    Queue::format(region, o.design, QueueOptions { fault: o.fault, stale_fill: true })
}

/// One thread's dequeue; logs it (acknowledgement comes later, [`acknowledge`]).
fn dequeue_one(q: &Queue, log: &DequeueLog, pending: &mut Vec<usize>) -> Result<bool> {
    let Some(d) = q.dequeue()? else { return Ok(false) };
    let mut log = log.lock().map_err(|_| Error::Corrupt("a dequeue thread panicked".into()))?;
    pending.push(log.len());
    log.push((id_of(&d.entry), d.start, false));
    Ok(true)
}

/// Acknowledges this thread's pending dequeues: `sync_dequeue`, then, if the cut has not been
/// taken yet, they count as durable.
fn acknowledge(q: &Queue, log: &DequeueLog, pending: &mut Vec<usize>) -> Result<()> {
    if pending.is_empty() {
        return Ok(());
    }
    q.sync_dequeue();
    let acked = !q.region().sim().is_some_and(|s| s.cut_taken());
    let mut log = log.lock().map_err(|_| Error::Corrupt("a dequeue thread panicked".into()))?;
    for i in pending.drain(..) {
        log[i].2 = acked;
    }
    Ok(())
}

/// One thread's work: insert and sync each entry; in a wrapped run also dequeue after every
/// second insert (acknowledged only after the next insert, so that inserts run while a tail
/// is not yet durable) and whenever the queue is full.
fn thread_work(
    q: &Queue,
    o: &CrashOptions,
    t: u64,
    log: &DequeueLog,
) -> Result<Vec<(u64, u64, bool)>> {
    let sim = q.region().sim().expect("a sim region");
    let n = o.inserts_per_thread;
    let mut done = Vec::with_capacity(n as usize);
    let mut pending = Vec::new();
    for k in 0..n {
        let deadline = Instant::now() + FULL_PATIENCE;
        let ticket = loop {
            match q.insert(&payload_for(id(t, k))) {
                Err(Error::Full { .. }) if o.wrap_slots.is_some() => {
                    if Instant::now() > deadline {
                        return Err(Error::Corrupt("a full queue did not drain".into()));
                    }
                    if !dequeue_one(q, log, &mut pending)? {
                        std::thread::yield_now();
                    }
                }
                other => break other?,
            }
        };
        q.sync(&ticket)?;
        done.push((id(t, k), ticket.start, !sim.cut_taken()));
        acknowledge(q, log, &mut pending)?;
        if o.wrap_slots.is_some() && k % 2 == 1 {
            dequeue_one(q, log, &mut pending)?;
        }
    }
    acknowledge(q, log, &mut pending)?;
    Ok(done)
}

/// A run's inserts, per thread `(id, start, acknowledged before the cut)`, and its dequeues.
struct Run {
    inserts: Vec<Vec<(u64, u64, bool)>>,
    dequeues: Vec<(Option<u64>, u64, bool)>,
}

/// Runs every thread's work.
fn run_threads(q: &Arc<Queue>, o: &CrashOptions) -> Result<Run> {
    let log: Arc<DequeueLog> = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..o.threads)
        .map(|t| {
            let (q, o, log) = (q.clone(), *o, log.clone());
            std::thread::spawn(move || thread_work(&q, &o, t, &log))
        })
        .collect();
    let inserts = handles
        .into_iter()
        .map(|h| h.join().expect("a queue thread panicked"))
        .collect::<Result<Vec<_>>>()?;
    let dequeues = std::mem::take(
        &mut *log.lock().map_err(|_| Error::Corrupt("a dequeue thread panicked".into()))?,
    );
    Ok(Run { inserts, dequeues })
}

/// What the run itself must show: each dequeue took the entry inserted at its counter, intact,
/// counters consecutive from 0 (FIFO, nothing twice, nothing skipped but QH's holes — none
/// without a crash).
fn check_dequeues(run: &Run) -> Vec<String> {
    let placed: HashMap<u64, u64> =
        run.inserts.iter().flatten().map(|&(id, start, _)| (start, id)).collect();
    let mut starts: Vec<(u64, Option<u64>)> =
        run.dequeues.iter().map(|&(id, start, _)| (start, id)).collect();
    starts.sort_unstable();
    let mut problems = Vec::new();
    for (k, (start, id)) in starts.iter().enumerate() {
        if *start != k as u64 * queue::SLOT_BYTES {
            problems.push(format!("dequeue {k} took counter {start}: not FIFO or skipped"));
            break;
        }
        match id {
            None => problems.push(format!("dequeue at {start} returned a torn entry")),
            Some(id) if placed.get(start) != Some(id) => {
                problems.push(format!("dequeue at {start} returned {id:#x}, not its insert's"))
            }
            Some(_) => {}
        }
    }
    problems
}

/// Stores and fences one run makes after formatting (to spread crash points over).
pub fn count_events(o: &CrashOptions) -> Result<(u64, u64)> {
    validate(o)?;
    let q = Arc::new(new_queue(o)?);
    let before = q.region().sim().expect("sim").event_counts();
    run_threads(&q, o)?;
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
    pub acked_dequeues: u64,
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
    let run = run_threads(&q, o)?;
    let runs = &run.inserts;
    let Some(image) = sim.take_image() else { return Ok(None) };
    let back = Region::from_image(&image, &RegionOptions::new(Medium::Sim, 0))?;
    let mut problems = check_dequeues(&run);
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
    let dequeued: HashMap<u64, bool> =
        run.dequeues.iter().filter_map(|&(id, _, ack)| Some((id?, ack))).collect();
    let mut acked = 0;
    for &(id, start, ack) in runs.iter().flatten() {
        match dequeued.get(&id) {
            Some(true) if seen.contains_key(&id) => {
                problems.push(format!("acknowledged dequeue of {id:#x} (at {start}) undone"))
            }
            // Taken by a dequeue, acknowledged or not: it may or may not be there.
            Some(_) => {}
            None if ack => {
                acked += 1;
                if !seen.contains_key(&id) {
                    problems.push(format!("acknowledged insert {id:#x} (at {start}) lost"));
                }
            }
            None => {}
        }
    }
    Ok(Some(CrashOutcome {
        problems,
        acked,
        recovered: rec.entries.len() as u64,
        holes: rec.holes,
        acked_dequeues: dequeued.values().filter(|ack| **ack).count() as u64,
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
        report.acked_dequeues += outcome.acked_dequeues;
        for message in outcome.problems {
            if report.violations.len() < max_violations {
                report.violations.push(Violation { event, count, policy, seed: run_seed, message });
            }
        }
    }
    Ok(report)
}

//! Helpers shared by the integration tests: load a workload, run workers on threads, tamper with
//! a database through ordinary transactions.
#![allow(dead_code)]

use std::collections::BTreeMap;
use storage::{Engine, TableId, Txn};
use workloads::testing::MemEngine;
use workloads::{Ack, Workload};

/// What a run did.
#[derive(Default, Debug)]
pub struct RunStats {
    pub kinds: BTreeMap<&'static str, u64>,
    pub retries: u64,
    /// Transactions that ended without a durability token (rolled back or read-only).
    pub without_token: u64,
    pub acks: Vec<Ack>,
}

pub fn loaded(w: &dyn Workload) -> MemEngine {
    let e = MemEngine::new();
    let progress_calls = std::sync::atomic::AtomicU64::new(0);
    w.load(&e, &|done, total| {
        assert!(done <= total, "progress {done} beyond total {total}");
        progress_calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })
    .expect("load");
    assert!(progress_calls.into_inner() >= 2, "load reported no progress");
    w.attach(&e).expect("attach after load");
    e
}

/// Runs `per_thread` transactions on each of `threads` workers; checks no lock leaks.
pub fn run(
    w: &dyn Workload,
    e: &MemEngine,
    threads: usize,
    per_thread: usize,
    seed: u64,
) -> RunStats {
    let start = std::sync::Barrier::new(threads);
    let results: Vec<RunStats> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let mut worker = w.worker(t, seed);
                let start = &start;
                s.spawn(move || {
                    let mut stats = RunStats::default();
                    // Start together, so that workers really contend.
                    start.wait();
                    for _ in 0..per_thread {
                        let done = worker.run_one(e).expect("transaction failed");
                        *stats.kinds.entry(done.kind).or_insert(0) += 1;
                        stats.retries += done.retries as u64;
                        stats.without_token += done.token.is_none() as u64;
                        stats.acks.extend(done.acks);
                    }
                    stats
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker panicked")).collect()
    });
    assert_eq!(e.locks_held(), 0, "locks leaked after the run");
    let mut total = RunStats::default();
    for r in results {
        for (k, n) in r.kinds {
            *total.kinds.entry(k).or_insert(0) += n;
        }
        total.retries += r.retries;
        total.without_token += r.without_token;
        total.acks.extend(r.acks);
    }
    total
}

/// Loads, checks, runs on 1 and then 2 threads, checks and verifies every ack after each.
pub fn load_run_check(w: &dyn Workload, per_thread: usize) -> RunStats {
    let e = loaded(w);
    w.check(&e).expect("checker fails on a freshly loaded database");
    let mut all = RunStats::default();
    for threads in [1, 2] {
        let stats = run(w, &e, threads, per_thread, 1000 + threads as u64);
        w.check(&e).unwrap_or_else(|err| panic!("checker after {threads} thread(s): {err}"));
        w.verify_acks(&e, &stats.acks).unwrap_or_else(|err| panic!("acks: {err}"));
        eprintln!(
            "{} on {threads} thread(s): {:?} retries {}",
            w.name(),
            stats.kinds,
            stats.retries
        );
        for (k, n) in stats.kinds {
            *all.kinds.entry(k).or_insert(0) += n;
        }
        all.retries += stats.retries;
        all.without_token += stats.without_token;
        all.acks.extend(stats.acks);
    }
    all
}

pub fn table(e: &dyn Engine, name: &str) -> TableId {
    e.table(name).unwrap_or_else(|| panic!("no table {name}"))
}

/// Runs `f` in a committed transaction: the way tests tamper with a database.
pub fn tamper(e: &dyn Engine, f: impl FnOnce(&mut dyn Txn)) {
    let mut txn = e.begin(0).expect("begin");
    f(&mut *txn);
    txn.commit().expect("commit");
}

pub fn read(e: &dyn Engine, table: TableId, key: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut txn = e.begin(0).expect("begin");
    let found = txn.read(table, key, &mut out).expect("read");
    txn.commit().expect("commit");
    found.then_some(out)
}

/// Keys of the first `n` rows of a table at or above `low`.
pub fn first_keys(e: &dyn Engine, table: TableId, low: u64, n: usize) -> Vec<u64> {
    let mut keys = Vec::new();
    let mut txn = e.begin(0).expect("begin");
    txn.scan(table, low, u64::MAX, n, &mut |k, _| {
        keys.push(k);
        true
    })
    .expect("scan");
    txn.commit().expect("commit");
    keys
}

/// Asserts the checker rejects the database and its message mentions `needle`.
pub fn assert_check_fails(w: &dyn Workload, e: &dyn Engine, needle: &str) {
    match w.check(e) {
        Ok(()) => panic!("checker passed a corrupted database (expected: {needle})"),
        Err(msg) => assert!(msg.contains(needle), "checker said {msg:?}, expected {needle:?}"),
    }
}

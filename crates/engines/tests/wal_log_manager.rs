//! `wal` behind its `LogManager` interface (issue 34): the central log and the distributed logs
//! report the same figures, summed over every log, under the same names bench reads; a commit
//! is forced by whichever log manager the region was formatted with.
//! Would catch: a log manager whose forces are not counted (bench's `log_forces` per commit
//! silently 0), figures taken from one log of several, or a renamed figure.

use engines::wal::{LogForce, LogLayout, Wal};
use engines::EngineOptions;
use pmem::{Medium, Region, RegionOptions};
use storage::{Engine, TableSpec};

const WAL_FIGURES: [&str; 10] = [
    "checkpoints",
    "pages_flushed",
    "page_flush_fences",
    "page_flush_lines",
    "page_flush_ns",
    "log_forces",
    "log_force_fences",
    "log_bytes_forced",
    "log_copy_waits",
    "log_reserve_locks",
];

const DLOG_FIGURES: [&str; 7] = [
    "commits_queued",
    "commits_immediate",
    "commits_nudged",
    "nudges",
    "passive_rounds",
    "commit_queue_full",
    "horizon_persists",
];

/// The page flusher's rounds (`flusher=pelley`), after the log's figures.
const FLUSHER_FIGURES: [&str; 4] =
    ["flush_rounds", "dirty_pages_peak", "flusher_waits", "flusher_wait_ns"];

/// The central log's own (Aether's consolidation array and flush pipelining).
const CENTRAL_FIGURES: [&str; 5] = [
    "insert_groups",
    "insert_grouped_records",
    "flush_daemon_rounds",
    "commit_blocked_waits",
    "commit_helped_forces",
];

/// The lock table's counters (`storage::lock`), after the log's figures.
const LOCK_FIGURES: [&str; 9] = [
    "lock_requests",
    "lock_conflicts",
    "optimistic_reads",
    "reads_locked",
    "validation_failures",
    "lock_waits",
    "lock_fast",
    "read_waits",
    "reads_own_lock",
];

fn run_commits(log: LogLayout, commits: u64) -> Vec<(&'static str, u64)> {
    run_commits_forced(log, LogForce::Pipelined, commits)
}

fn run_commits_forced(log: LogLayout, force: LogForce, commits: u64) -> Vec<(&'static str, u64)> {
    let mut options = EngineOptions {
        workers: 2,
        wal: engines::wal::Options { log, log_force: force, ..Default::default() },
        ..Default::default()
    };
    options.wal.log_bytes = engines::wal::default_log_bytes(&options);
    let region =
        Region::open(&RegionOptions::new(Medium::Dram, options.wal.log_bytes + (32 << 20)));
    let region = region.unwrap();
    let e = Wal::open(region, &options).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    for key in 0..commits {
        // Both workers, so a txn-partitioned layout writes to both of its logs.
        let mut txn = e.begin((key % 2) as usize).unwrap();
        txn.insert(t, key, &[7u8; 16]).unwrap();
        let token = txn.commit().unwrap();
        e.wait_durable(token).unwrap();
    }
    let (_, _, _, forces, bytes) = e.totals();
    let figures = e.activity();
    let get = |name: &str| figures.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(get("log_forces"), Some(forces), "{log}: activity and totals agree");
    assert_eq!(get("log_bytes_forced"), Some(bytes), "{log}");
    figures
}

#[test]
fn the_central_log_reports_the_wal_figures_and_forces_every_commit() {
    for force in [LogForce::Pipelined, LogForce::Inline] {
        let figures = run_commits_forced(LogLayout::Central, force, 40);
        let names: Vec<&str> = figures.iter().map(|(n, _)| *n).collect();
        let expected: Vec<&str> = WAL_FIGURES
            .iter()
            .chain(&CENTRAL_FIGURES)
            .chain(&FLUSHER_FIGURES)
            .chain(&LOCK_FIGURES)
            .copied()
            .collect();
        assert_eq!(names, expected);
        let forces = figures[5].1;
        // One `persist_wal` per commit (each waited for before the next begins), two barriers
        // each.
        assert!(forces >= 40, "{force:?}: {forces} forces for 40 commits");
        assert_eq!(figures[6].1, 2 * forces, "two barriers per persist_wal");
        let (groups, grouped) = (figures[10].1, figures[11].1);
        assert!(groups > 0 && grouped >= groups, "records went through the consolidation array");
        // Each commit here is waited for at once: a waiter leads the force itself when none
        // runs, so the daemon's rounds and the committers' own forces share the work.
        let (rounds, helped) = (figures[12].1, figures[14].1);
        match force {
            LogForce::Pipelined => {
                assert!(rounds + helped >= 40, "pipelined forces covered it: {figures:?}")
            }
            LogForce::Inline => assert_eq!(rounds + helped, 0, "no daemon inline: {figures:?}"),
        }
    }
}

/// A pipelined commit is not acknowledged at once: its token is its commit LSN, durable only
/// once the flush daemon forced past it (Aether §3). Would catch a pipelined commit that
/// forces inline (no pipelining) or a token acknowledged before the force.
#[test]
fn a_pipelined_commit_returns_a_token_that_becomes_durable_when_the_daemon_forces() {
    let mut options = EngineOptions { workers: 2, ..Default::default() };
    options.wal.log_bytes = engines::wal::default_log_bytes(&options);
    assert_eq!(options.wal.log_force, LogForce::Pipelined, "the default");
    let region =
        Region::open(&RegionOptions::new(Medium::Dram, options.wal.log_bytes + (32 << 20)));
    let e = Wal::open(region.unwrap(), &options).unwrap();
    let spec = TableSpec { name: "t".into(), row_bytes: 16, expected_rows: 100 };
    let t = e.create_table(&spec).unwrap();
    let mut tokens = Vec::new();
    for key in 0..20u64 {
        let mut txn = e.begin(0).unwrap();
        txn.insert(t, key, &[7u8; 16]).unwrap();
        tokens.push(txn.commit().unwrap());
    }
    // A commit is queued (its token its LSN) unless the daemon forced past it already or the
    // committer helped a daemon that fell behind (DURABLE).
    let queued: Vec<u64> = tokens.iter().map(|t| t.0).filter(|&t| t > 0).collect();
    assert!(queued.len() >= tokens.len() / 2, "commits were queued: {tokens:?}");
    assert!(queued.windows(2).all(|w| w[0] < w[1]), "one worker's tokens rise: {tokens:?}");
    // The daemon forces without being asked to wait: polling alone sees the last durable.
    let last = *tokens.last().unwrap();
    let started = std::time::Instant::now();
    while !e.is_durable(last) {
        assert!(started.elapsed().as_secs() < 10, "the flush daemon never forced");
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    assert!(tokens.iter().all(|t| e.is_durable(*t)), "durability is a prefix of the log");
    e.wait_durable(last).unwrap();
}

#[test]
fn distributed_logs_report_the_same_figures_summed_over_every_log_and_their_own() {
    let figures = run_commits(LogLayout::Txn(2), 40);
    let names: Vec<&str> = figures.iter().map(|(n, _)| *n).collect();
    let expected: Vec<&str> = WAL_FIGURES
        .iter()
        .chain(DLOG_FIGURES.iter())
        .chain(FLUSHER_FIGURES.iter())
        .chain(LOCK_FIGURES.iter())
        .copied()
        .collect();
    assert_eq!(names, expected);
    let forces = figures[5].1;
    assert!(forces > 0, "the logs were forced");
    let acknowledged = figures[10].1 + figures[11].1 + figures[12].1;
    assert!(acknowledged > 0, "commits went through passive group commit: {figures:?}");
}

//! The crash tester's own contract, on a toy redo-log engine over the `sim` medium: a correct
//! engine passes every policy; one that acknowledges commits before their fence is caught (lost
//! acks); a violation's replay reproduces it. Would catch: acks recorded after the cut, images
//! checked against the wrong acks, and a checker that never fails.

mod common;

use bench::crash::{self, CrashOptions, EventChoice, Observer, Replay, SimTarget, ViolationKind};
use common::Bank;
use parking_lot::{Mutex, MutexGuard};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use std::collections::BTreeMap;
use storage::{
    CommitToken, DbError, Engine, IntegrityResult, RecoveryReport, TableId, TableSpec, Txn,
};
use workloads::Workload;

/// Where the committed log length lives; the log starts at the next line.
const LENGTH_AT: u64 = 0;
const LOG_START: u64 = 64;
const OP_TABLE: u8 = 1;
const OP_PUT: u8 = 2;
const OP_DELETE: u8 = 3;

#[derive(Default)]
struct State {
    specs: Vec<TableSpec>,
    rows: Vec<BTreeMap<u64, Vec<u8>>>,
    /// Log bytes written so far (the next record goes at `LOG_START + tail`).
    tail: u64,
}

/// Rows in DRAM, every commit appended to a redo log in the region: records, persist, then the
/// new length, persist. `skip_commit_fence` forgets the second persist's fence (the bug).
struct RedoEngine {
    region: Region,
    state: Mutex<State>,
    skip_commit_fence: bool,
}

impl RedoEngine {
    fn open(region: Region, skip_commit_fence: bool) -> Result<RedoEngine, String> {
        let mut state = State::default();
        let length = region.read_u64(LENGTH_AT);
        if LOG_START + length > region.len() {
            return Err(format!("log length {length} is past the end of the region"));
        }
        let log = region.read(LOG_START, length as usize).to_vec();
        let mut at = 0usize;
        while at < log.len() {
            at = replay_record(&log, at, &mut state)?;
        }
        state.tail = length;
        Ok(RedoEngine { region, state: Mutex::new(state), skip_commit_fence })
    }

    fn append(&self, state: &mut State, log: &[u8]) {
        if log.is_empty() {
            return;
        }
        let at = LOG_START + state.tail;
        assert!(at + log.len() as u64 <= self.region.len(), "toy log full");
        self.region.write(at, log);
        self.region.persist(at, log.len() as u64);
        state.tail += log.len() as u64;
        self.region.write_u64(LENGTH_AT, state.tail);
        if self.skip_commit_fence {
            self.region.flush(LENGTH_AT, 8);
        } else {
            self.region.persist(LENGTH_AT, 8);
        }
    }
}

fn replay_record(log: &[u8], at: usize, state: &mut State) -> Result<usize, String> {
    let bad = || format!("malformed record at log offset {at}");
    let header = log.get(at..at + 17).ok_or_else(bad)?;
    let (op, table) = (header[0], u32::from_le_bytes(header[1..5].try_into().unwrap()));
    let key = u64::from_le_bytes(header[5..13].try_into().unwrap());
    let len = u32::from_le_bytes(header[13..17].try_into().unwrap()) as usize;
    let body = log.get(at + 17..at + 17 + len).ok_or_else(bad)?;
    match op {
        OP_TABLE => {
            let name = String::from_utf8(body.to_vec()).map_err(|_| bad())?;
            state.specs.push(TableSpec { name, row_bytes: key as u32, expected_rows: 0 });
            state.rows.push(BTreeMap::new());
        }
        OP_PUT | OP_DELETE => {
            let rows = state.rows.get_mut(table as usize).ok_or_else(bad)?;
            if op == OP_PUT {
                rows.insert(key, body.to_vec());
            } else {
                rows.remove(&key);
            }
        }
        _ => return Err(bad()),
    }
    Ok(at + 17 + len)
}

fn record(log: &mut Vec<u8>, op: u8, table: TableId, key: u64, body: &[u8]) {
    log.push(op);
    log.extend_from_slice(&table.to_le_bytes());
    log.extend_from_slice(&key.to_le_bytes());
    log.extend_from_slice(&(body.len() as u32).to_le_bytes());
    log.extend_from_slice(body);
}

impl Engine for RedoEngine {
    fn name(&self) -> &str {
        "redo"
    }

    fn create_table(&self, spec: &TableSpec) -> storage::Result<TableId> {
        let mut state = self.state.lock();
        let mut log = Vec::new();
        record(&mut log, OP_TABLE, 0, u64::from(spec.row_bytes), spec.name.as_bytes());
        self.append(&mut state, &log);
        state.specs.push(spec.clone());
        state.rows.push(BTreeMap::new());
        Ok((state.specs.len() - 1) as TableId)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.state.lock().specs.iter().position(|t| t.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.state.lock().specs.clone()
    }

    fn begin(&self, _worker: usize) -> storage::Result<Box<dyn Txn + '_>> {
        Ok(Box::new(RedoTxn { engine: self, state: self.state.lock(), writes: BTreeMap::new() }))
    }

    fn is_durable(&self, _token: CommitToken) -> bool {
        true
    }

    fn wait_durable(&self, _token: CommitToken) -> storage::Result<()> {
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport::default()
    }

    fn region(&self) -> Option<&Region> {
        Some(&self.region)
    }

    fn check_integrity(&self) -> IntegrityResult {
        Ok(Default::default())
    }

    fn shutdown(&self) -> storage::Result<()> {
        self.region.fence();
        Ok(())
    }
}

/// One transaction at a time (the state lock); writes are buffered until commit.
struct RedoTxn<'a> {
    engine: &'a RedoEngine,
    state: MutexGuard<'a, State>,
    /// Final image of every written row (`None`: deleted).
    writes: BTreeMap<(TableId, u64), Option<Vec<u8>>>,
}

impl RedoTxn<'_> {
    fn get(&self, table: TableId, key: u64) -> storage::Result<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(&(table, key)) {
            return Ok(w.clone());
        }
        let rows = self.state.rows.get(table as usize).ok_or(DbError::NoSuchTable(table))?;
        Ok(rows.get(&key).cloned())
    }
}

impl Txn for RedoTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> storage::Result<bool> {
        out.clear();
        let row = self.get(table, key)?;
        out.extend_from_slice(row.as_deref().unwrap_or_default());
        Ok(row.is_some())
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> storage::Result<()> {
        if self.get(table, key)?.is_some() {
            return Err(DbError::Duplicate { table, key });
        }
        self.writes.insert((table, key), Some(row.to_vec()));
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, at: u32, bytes: &[u8]) -> storage::Result<bool> {
        let Some(mut row) = self.get(table, key)? else { return Ok(false) };
        row[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
        self.writes.insert((table, key), Some(row));
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> storage::Result<bool> {
        let found = self.get(table, key)?.is_some();
        self.writes.insert((table, key), None);
        Ok(found)
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> storage::Result<usize> {
        assert!(self.writes.is_empty(), "the toy engine scans committed rows only");
        let rows = self.state.rows.get(table as usize).ok_or(DbError::NoSuchTable(table))?;
        let mut n = 0;
        for (k, v) in rows.range(low..=high).take(limit) {
            n += 1;
            if !visit(*k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn commit(mut self: Box<Self>) -> storage::Result<CommitToken> {
        let mut log = Vec::new();
        let writes = std::mem::take(&mut self.writes);
        for ((table, key), row) in &writes {
            match row {
                Some(row) => record(&mut log, OP_PUT, *table, *key, row),
                None => record(&mut log, OP_DELETE, *table, *key, &[]),
            }
        }
        self.engine.append(&mut self.state, &log);
        for ((table, key), row) in writes {
            let rows = &mut self.state.rows[table as usize];
            match row {
                Some(row) => rows.insert(key, row),
                None => rows.remove(&key),
            };
        }
        Ok(CommitToken::DURABLE)
    }

    fn abort(self: Box<Self>) -> storage::Result<()> {
        Ok(())
    }
}

struct Quiet;
impl Observer for Quiet {}

fn campaign(skip_commit_fence: bool, options: &CrashOptions) -> crash::Summary {
    let open = move |region: Region| -> Result<Box<dyn Engine>, String> {
        Ok(Box::new(RedoEngine::open(region, skip_commit_fence)?))
    };
    let make = || -> Box<dyn Workload> { Box::new(Bank::new(20)) };
    let target = SimTarget {
        open: &open,
        workload: &make,
        region: RegionOptions::new(Medium::Sim, 1 << 20),
        image_check: None,
    };
    crash::run_sim(&target, options, &Quiet).expect("the campaign runs")
}

fn options(crashes: u64, seed: u64) -> CrashOptions {
    CrashOptions { crashes, seed, txns_per_thread: 40, jobs: 4, ..CrashOptions::default() }
}

#[test]
fn a_correct_engine_passes_every_policy_and_crashes_in_recovery() {
    let s = campaign(false, &CrashOptions { recovery_crashes: 2, ..options(120, 7) });
    assert_eq!(s.violations, 0, "{:?}", s.kept.first());
    assert!(s.crashes >= 110, "only {} of 120 crash points reached", s.crashes);
    assert!(s.acks_verified > 0);
    let span = s.span.expect("a dry run measured the span");
    assert!(span.fences > 0 && span.stores > 0, "{span:?}");
    assert_eq!(s.recovery_ms.len() as u64, s.crashes + s.recovery_crashes);
}

#[test]
fn two_threads_pass_too() {
    let s = campaign(false, &CrashOptions { threads: 2, ..options(60, 8) });
    assert_eq!(s.violations, 0, "{:?}", s.kept.first());
    assert!(s.crashes >= 50, "only {} of 60 crash points reached", s.crashes);
}

#[test]
fn acks_before_the_fence_are_caught_and_replay_exactly() {
    let persisted = CrashOptions {
        policies: vec![CrashPolicy::Persisted],
        event: EventChoice::Store,
        ..options(60, 9)
    };
    let s = campaign(true, &persisted);
    let lost = s.violations_by_kind.get(&ViolationKind::Durability).copied().unwrap_or(0);
    assert!(lost > 0, "a commit acknowledged before its fence went unnoticed: {s:?}");
    let first = &s.kept[0];
    assert!(first.crash.contains("policy persisted"), "{}", first.crash);
    // The replay arguments name the case; running it alone finds the same violation.
    let replay = first.replay.as_deref().expect("simulated crashes replay");
    let case = replay.strip_prefix("--replay ").and_then(|r| r.split(' ').next()).unwrap();
    let replay = Replay::parse(case, CrashPolicy::Persisted).unwrap();
    let again = campaign(true, &CrashOptions { replay: Some(replay), ..options(1, 0) });
    assert_eq!(again.iterations, 1);
    assert_eq!(again.kept.first().map(|v| &v.message), Some(&first.message));
}

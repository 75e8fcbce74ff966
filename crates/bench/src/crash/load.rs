//! Crashes while a blank region is formatted, its tables created and the workload loaded.
//!
//! Would catch: a half-formatted region that does not open (or opens as garbage instead of
//! blank), a table whose creation returned but is gone after recovery, loaded rows whose
//! commit returned but are lost, and index, heap or allocator damage left by a crash in a bulk
//! load (page allocation on every insert, splits on every few).
//!
//! One iteration: a blank `sim` region with a crash armed at a point of the load's span; the
//! engine formats it and the workload's loader, then the driver's load-complete mark
//! ([`crate::loaded`]), run through [`LoadAcks`], which records each insert whose commit was
//! observed durable before the cut, and each table created before such a commit (group commit
//! makes a creation durable with the batch that follows it), and refuses work after the cut. The cut image
//! must then open (blank or recovered), every acknowledged table must exist with at least its
//! acknowledged rows, and the engine's integrity check must pass. By the mark: a completed load
//! must pass the workload's checker; a region cut before its first table must load afresh and
//! pass it. The image is also cut right after recovery and verified again.

use super::{
    derive, describe_violation, panic_message, Checked, Ctx, Outcome, Phase, Replay, Span,
    ViolationKind, SALT_AFTER_RECOVERY, SALT_IMAGE,
};
use crate::loaded::LoadState;
use parking_lot::Mutex;
use pmem::{CrashPolicy, Region, Sim};
use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;
use storage::{
    CommitToken, DbError, Engine, EngineCounters, IntegrityResult, RecoveryReport, Result, TableId,
    TableSpec, Txn,
};
use workloads::Workload;

/// Rows acknowledged per table name (a table is present once its creation returned).
type Acked = BTreeMap<String, u64>;

/// What a cut load left.
struct LoadCut {
    image: Option<Vec<u8>>,
    acked: Acked,
    window: Option<EngineCounters>,
    run_error: Option<String>,
}

impl Ctx<'_> {
    /// One crash during format and load (see the module doc).
    pub(super) fn load_iteration(
        &self,
        workload: &dyn Workload,
        index: u64,
        case: &Replay,
    ) -> Outcome {
        let mut outcome = Outcome { index, phase: Some(Phase::Load), ..Outcome::default() };
        let violation = |kind, message: String| describe_violation(case, kind, &[], message);
        let cut = match catch_unwind(AssertUnwindSafe(|| self.cut_load(workload, case))) {
            Ok(cut) => cut,
            Err(payload) => {
                let message = format!("while loading: {}", panic_message(&*payload));
                outcome.violations.push(violation(ViolationKind::Panic, message));
                return outcome;
            }
        };
        if let Some(e) = cut.run_error {
            outcome.violations.push(violation(ViolationKind::Run, e));
        }
        let Some(image) = cut.image else { return outcome };
        outcome.reached = true;
        outcome.window = cut.window;
        outcome.acks = cut.acked.len() as u64 + cut.acked.values().sum::<u64>();
        let after = Some((case.policy, derive(case.seed, SALT_AFTER_RECOVERY)));
        let mut checked = self.verify_load(workload, &image, &cut.acked, after);
        if let Some(again) = checked.after.take() {
            for (kind, message) in self.verify_load(workload, &again, &cut.acked, None).failures {
                let message = format!("crash right after recovery: {message}");
                outcome.violations.push(violation(kind, message));
            }
        }
        outcome.recovery_ms.extend(checked.recovery_ms);
        for (kind, message) in checked.failures {
            outcome.violations.push(violation(kind, message));
        }
        outcome
    }

    /// Formats a blank region and loads it with `case` armed; the cut image and the acks.
    fn cut_load(&self, workload: &dyn Workload, case: &Replay) -> LoadCut {
        let failed = |e: String| LoadCut {
            image: None,
            acked: Acked::new(),
            window: None,
            run_error: Some(e),
        };
        let region = match Region::open(&self.region) {
            Ok(region) => region,
            Err(e) => return failed(format!("opening a sim region: {e}")),
        };
        let Some(sim) = region.sim() else { return failed("not a sim region".into()) };
        sim.arm(case.point, case.policy, derive(case.seed, SALT_IMAGE));
        let engine = match self.open(region.clone()) {
            Ok(engine) => engine,
            // What fails after the cut cannot change the image.
            Err(_) if sim.cut_taken() => {
                return LoadCut {
                    image: sim.take_image(),
                    acked: Acked::new(),
                    window: None,
                    run_error: None,
                }
            }
            Err(e) => return failed(format!("formatting a blank region: {e}")),
        };
        let loader = LoadAcks { inner: &*engine, sim, state: Mutex::new(AckState::default()) };
        let loaded = workload
            .load(&loader, &|_, _| {})
            .and_then(|()| crate::loaded::mark_loaded(&loader, workload.name()));
        let run_error = match loaded {
            Err(e) if !sim.cut_taken() => Some(format!("loading before the crash: {e}")),
            _ => None,
        };
        let window = engine.counters();
        let image = sim.take_image();
        let acked = loader.state.into_inner().acked;
        drop(engine);
        LoadCut { image, acked, window, run_error }
    }

    /// Recovers a load's crash image (timed) and checks it (see the module doc).
    fn verify_load(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acked: &Acked,
        after: Option<(CrashPolicy, u64)>,
    ) -> Checked {
        let mut checked =
            Checked { recovery_ms: None, span: Span::default(), failures: Vec::new(), after: None };
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.verify_load_into(workload, image, acked, after, &mut checked)
        }));
        if let Err(payload) = result {
            let message = format!("during recovery or verification: {}", panic_message(&*payload));
            checked.failures.push((ViolationKind::Panic, message));
        }
        checked
    }

    fn verify_load_into(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acked: &Acked,
        after: Option<(CrashPolicy, u64)>,
        out: &mut Checked,
    ) {
        let region = match self.image_region(image) {
            Ok(region) => region,
            Err(e) => return out.failures.push((ViolationKind::Recovery, e)),
        };
        let started = Instant::now();
        let opened = self.open(region.clone());
        out.recovery_ms = Some(started.elapsed().as_secs_f64() * 1e3);
        let engine = match opened {
            Ok(engine) => engine,
            Err(e) => {
                let message = format!("a region cut while loading does not open: {e}");
                return out.failures.push((ViolationKind::Recovery, message));
            }
        };
        if let Some((policy, seed)) = after {
            out.after = region.crash_image(policy, seed);
        }
        out.failures.extend(check_loaded(&*engine, acked));
        if !out.failures.is_empty() {
            return;
        }
        match crate::loaded::load_state(&*engine) {
            // Cut before the first table: the region must be as good as blank.
            LoadState::Empty => {
                if let Err(e) = workload.load(&*engine, &|_, _| {}) {
                    let message = format!("loading afresh after a crash before any table: {e}");
                    return out.failures.push((ViolationKind::Recovery, message));
                }
                if let Err(e) = workload.check(&*engine) {
                    let message = format!("after loading afresh: {e}");
                    out.failures.push((ViolationKind::Consistency, message));
                }
            }
            // The whole load committed: the database must be the workload's.
            LoadState::Complete(_) => {
                if let Err(e) = workload.attach(&*engine) {
                    let message = format!("a completed load does not attach: {e}");
                    return out.failures.push((ViolationKind::Recovery, message));
                }
                if let Err(e) = workload.check(&*engine) {
                    out.failures.push((ViolationKind::Consistency, e));
                }
            }
            // Half loaded: what was acknowledged is there (checked above), nothing more holds.
            LoadState::Incomplete => {}
        }
    }
}

/// Every acknowledged table exists with at least its acknowledged rows; the engine's
/// structures agree.
fn check_loaded(engine: &dyn Engine, acked: &Acked) -> Vec<(ViolationKind, String)> {
    let mut failures = Vec::new();
    for (name, rows) in acked {
        let Some(table) = engine.table(name) else {
            let message = format!("table {name}, created before the crash, is gone");
            failures.push((ViolationKind::Durability, message));
            continue;
        };
        match count_rows(engine, table) {
            Ok(n) if n >= *rows => {}
            Ok(n) => failures.push((
                ViolationKind::Durability,
                format!(
                    "table {name}: {n} rows after recovery, but {rows} inserts had committed \
                     before the crash"
                ),
            )),
            Err(e) => {
                failures.push((ViolationKind::Integrity, format!("table {name}: scanning it: {e}")))
            }
        }
    }
    if let Err(e) = engine.check_integrity() {
        failures.push((ViolationKind::Integrity, e));
    }
    failures
}

fn count_rows(engine: &dyn Engine, table: TableId) -> Result<u64> {
    let mut txn = engine.begin(0)?;
    let mut rows = 0u64;
    txn.scan(table, 0, u64::MAX, usize::MAX, &mut |_, _| {
        rows += 1;
        true
    })?;
    txn.commit()?;
    Ok(rows)
}

/// The engine as the loader sees it: records what was acknowledged before the cut and refuses
/// new work after it (what runs after the cut cannot change the image).
struct LoadAcks<'a> {
    inner: &'a dyn Engine,
    sim: &'a Sim,
    state: Mutex<AckState>,
}

/// A commit not yet observed durable: its token, the tables created before it, and the rows it
/// inserted per table.
type PendingCommit = (CommitToken, usize, Vec<(String, u64)>);

#[derive(Default)]
struct AckState {
    acked: Acked,
    /// Tables created so far, in order.
    tables: Vec<String>,
    /// Commits not yet observed durable, in commit order.
    pending: VecDeque<PendingCommit>,
}

impl LoadAcks<'_> {
    fn halted(&self) -> Result<()> {
        if self.sim.cut_taken() {
            return Err(DbError::Invalid("the load halted at the crash cut".into()));
        }
        Ok(())
    }

    /// Acknowledges the pending commits that are durable now, oldest first (tokens become
    /// durable in commit order). The ack ordering rule: durability observed while the cut was
    /// not yet taken held at the cut (the flag only goes from false to true).
    fn sweep(&self) {
        let mut state = self.state.lock();
        let state = &mut *state;
        while let Some((token, _, _)) = state.pending.front() {
            if !self.inner.is_durable(*token) || self.sim.cut_taken() {
                return;
            }
            let Some((_, tables, rows)) = state.pending.pop_front() else { return };
            for name in &state.tables[..tables] {
                state.acked.entry(name.clone()).or_insert(0);
            }
            for (name, n) in rows {
                *state.acked.entry(name).or_insert(0) += n;
            }
        }
    }
}

impl Engine for LoadAcks<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.halted()?;
        let id = self.inner.create_table(spec)?;
        self.state.lock().tables.push(spec.name.clone());
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.inner.table(name)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.inner.tables()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        self.halted()?;
        let inner = self.inner.begin(worker)?;
        Ok(Box::new(LoadTxn { inner, owner: self, inserted: BTreeMap::new() }))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        self.inner.is_durable(token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.inner.wait_durable(token)?;
        self.sweep();
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.inner.recovery_report()
    }

    fn region(&self) -> Option<&Region> {
        self.inner.region()
    }

    fn check_integrity(&self) -> IntegrityResult {
        self.inner.check_integrity()
    }

    fn shutdown(&self) -> Result<()> {
        self.inner.shutdown()
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        self.inner.describe_offset(offset)
    }

    fn counters(&self) -> Option<EngineCounters> {
        self.inner.counters()
    }
}

struct LoadTxn<'a> {
    inner: Box<dyn Txn + 'a>,
    owner: &'a LoadAcks<'a>,
    /// Inserts per table, acknowledged at commit.
    inserted: BTreeMap<TableId, u64>,
}

impl Txn for LoadTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.inner.read(table, key, out)
    }

    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.inner.read_for_update(table, key, out)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.inner.insert(table, key, row)?;
        *self.inserted.entry(table).or_insert(0) += 1;
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        self.inner.update(table, key, offset, bytes)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        // Rows only ever accumulate in a load; a delete would make the row count a lower bound
        // that no longer holds, so refuse it loudly rather than check something false.
        Err(DbError::Invalid(format!(
            "the crash tester's loader does not expect deletes (table {table} key {key})"
        )))
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.inner.scan(table, low, high, limit, visit)
    }

    fn commit(self: Box<Self>) -> Result<CommitToken> {
        let LoadTxn { inner, owner, inserted } = *self;
        let token = inner.commit()?;
        let specs = owner.inner.tables();
        let rows = inserted
            .into_iter()
            .filter_map(|(table, n)| specs.get(table as usize).map(|s| (s.name.clone(), n)))
            .collect();
        {
            let mut state = owner.state.lock();
            let tables = state.tables.len();
            state.pending.push_back((token, tables, rows));
        }
        owner.sweep();
        Ok(token)
    }

    fn abort(self: Box<Self>) -> Result<()> {
        self.inner.abort()
    }
}

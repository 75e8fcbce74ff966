//! NVRAM Group Commit — Pelley, Gold, Wenisch, Bridge, *Storage Management in the NVRAM Era*,
//! VLDB 2014, §3.2 and §6; thesis §4.3 (operating principles, hierarchical bitmap set,
//! concurrent batch persist) and §5.3.
//!
//! Transactions run in **batches** against a volatile **staging copy** of the database (the
//! paper's "replicate to DRAM" configuration): an `inplace`-format database on a `dram` region
//! whose every store marks its 64-byte lines in a hierarchical bitmap set
//! ([`pmem::DirtyLines`]). Every `batch_period_ms` (or after `batch_txns` commits, or when the
//! staged lines near the batch log's capacity, `staging_bytes`) the batch closes: new operations
//! wait at the *gate*, running ones finish, and the dirty lines reach NVRAM through a
//! database-wide undo log with four persist barriers whatever the batch's size
//! ([`batch::BatchLog::persist`], shared among `persist_threads` threads). Commit tokens of a
//! batch become durable together, so the driver measures latency to the batch's end (§6.2).
//!
//! **Recovery invariant**: the NVRAM image is always the image at the end of some batch, or a
//! batch in progress whose valid log restores the previous one; transactions still running when
//! their batch closed are in that image with their (`inplace`) undo logs active, so after the
//! batch log is applied, `inplace` recovery on the staging copy rolls them back (the paper's
//! long transactions that "persist their own undo log and join the next batch").
//!
//! Deliberate choices: transactions keep `inplace`'s private undo log for aborts, in the staging
//! copy (volatile until a batch closes, as the paper's volatile undo log is); a transaction
//! spanning batches needs no separate persistent log because its undo log is persisted with the
//! batch it spans. Opening copies the whole image to DRAM, so recovery time grows with the
//! database (the price of replicating to DRAM, as in the paper).

mod batch;
pub mod options;

use crate::inplace::InPlace;
use crate::{EngineOptions, Fault};
use batch::{BatchLog, LogLayout, MAX_CAPACITY_LINES};
use parking_lot::{Condvar, Mutex};
use pmem::{Region, CACHE_LINE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::engine::RecoveryReport;
use storage::format::{page_offset, Superblock, PAGE_SIZE_U64};
use storage::{CommitToken, DbError, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};

pub use options::Options;

pub const ENGINE_NAME: &str = "group";

/// Lines one operation (or an abort's rollback) can dirty at most, per worker: bounded by what
/// its undo logs can describe plus a full-height B+tree split and a heap page. Staging must keep
/// this much room per worker so a batch never outgrows its log (`docs/storage.md`).
fn op_margin_lines(o: &EngineOptions) -> u64 {
    let pages = u64::from(o.undo_pages) + u64::from(o.sys_undo_pages) + 24;
    (u64::from(o.workers) + 1) * pages * (PAGE_SIZE_U64 / CACHE_LINE)
}

/// Batch timing and sizing, validated.
#[derive(Clone, Copy, Debug)]
struct BatchOptions {
    period: Duration,
    persist_threads: usize,
    batch_txns: u64,
    /// Staged lines at which a batch closes early (capacity minus the operation margin).
    close_at_lines: u64,
}

/// Slots of [`Shared::commit_marks`] (threads share a slot when there are more).
const COMMIT_MARK_SLOTS: usize = 64;

/// The open batch, under [`Shared::state`].
struct BatchState {
    started: Instant,
    /// Commits (tokens handed out) in the open batch, counted only with `batch_txns` (crash
    /// tests' deterministic batches); otherwise [`Shared::commit_marks`] say whether any.
    commits: u64,
    close_requested: bool,
    stop: bool,
}

/// What the batch daemon, the workers and the engine share.
pub(crate) struct Shared {
    nvram: Region,
    staging: Region,
    log: BatchLog,
    /// Operations hold it shared; closing a batch holds it exclusively (quiesce).
    gate: crate::gated::GateLock,
    /// One closer at a time.
    closer: Mutex<()>,
    state: Mutex<BatchState>,
    wake: Condvar,
    /// Per thread slot (`pmem::thread_id()` modulo their number), the id of the last batch a
    /// commit on that slot joined: the daemon closes a period without staged lines only if
    /// some slot holds the open batch's id (its read-only commits wait for that batch). A
    /// commit writes only its own slot, and only the first time in a batch: the count under
    /// `state` that this replaces was a global mutex every commit took (on 16 cores, YCSB
    /// read-heavy fell from 3.3M TPS at 8 threads to 1.1M at 16).
    commit_marks: Box<[crossbeam_utils::CachePadded<AtomicU64>]>,
    /// Id of the open batch (tokens of commits in it); ids start at 1.
    open: AtomicU64,
    /// Highest batch id known durable.
    durable: AtomicU64,
    durable_lock: Mutex<()>,
    durable_cv: Condvar,
    /// A batch persist failed: nothing after the last durable batch will be.
    failed: Mutex<Option<String>>,
    has_failed: AtomicBool,
    options: BatchOptions,
    pub(crate) stats: BatchStats,
}

/// Counters of the batches persisted since open.
#[derive(Default)]
pub(crate) struct BatchStats {
    pub batches: AtomicU64,
    pub lines: AtomicU64,
    pub persist_ns: AtomicU64,
    pub early_closes: AtomicU64,
}

pub struct Group {
    shared: Arc<Shared>,
    inner: InPlace,
    daemon: Mutex<Option<std::thread::JoinHandle<()>>>,
    report: RecoveryReport,
}

impl Group {
    /// Opens the engine on `nvram`: formats a blank region, otherwise rolls back an interrupted
    /// batch, copies the image to the staging copy and recovers it.
    pub fn open(nvram: Region, options: &EngineOptions) -> Result<Group> {
        let started = Instant::now();
        let batch_options = validate(options)?;
        // A growable mapping is not grown: the batch log and the image are laid out over what
        // the file holds when the region is formatted.
        let backed_pages = nvram.backed_len() / PAGE_SIZE_U64;
        let mut report = RecoveryReport::default();
        let (log, pages, formatted) = match Superblock::read(&nvram, ENGINE_NAME, nvram.created())?
        {
            Some(sb) => {
                let pages = crate::staging::require_backed(&nvram, sb.layout.page_count)?;
                (BatchLog::open(&nvram, pages, options.fault)?, pages, false)
            }
            None => (Self::format(&nvram, options, backed_pages)?, backed_pages, true),
        };
        let image_bytes = page_offset(pages - log.layout.base_page);
        if let Some(r) = log.restore(image_bytes)? {
            report.records_applied += r.lines;
            report.notes.push(format!("rolled back batch {} ({} lines)", r.batch, r.lines));
        }
        let copy_started = Instant::now();
        let staging = crate::staging::copy_of(&nvram, log.layout.base(), image_bytes, formatted)?;
        report.notes.push(format!(
            "staging copy of {} MiB set up in {:.1} ms",
            image_bytes >> 20,
            copy_started.elapsed().as_secs_f64() * 1e3
        ));
        let inner_options = EngineOptions { fault: None, ..options.clone() };
        let inner = InPlace::open(staging.clone(), &inner_options)?;
        crate::staging::merge_report(&mut report, inner.recovery_report(), formatted);
        let shared = Arc::new(Shared {
            nvram,
            staging,
            log,
            gate: Default::default(),
            closer: Mutex::new(()),
            state: Mutex::new(BatchState {
                started: Instant::now(),
                commits: 0,
                close_requested: false,
                stop: false,
            }),
            wake: Condvar::new(),
            commit_marks: (0..COMMIT_MARK_SLOTS).map(|_| Default::default()).collect(),
            open: AtomicU64::new(1),
            durable: AtomicU64::new(0),
            durable_lock: Mutex::new(()),
            durable_cv: Condvar::new(),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            options: batch_options,
            stats: BatchStats::default(),
        });
        // What recovery (or the format) changed in the staging copy is persisted before open
        // returns: a crash right after open must not redo it from an older image.
        shared.close_batch()?;
        let daemon = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("nvmdb-group-batch".into())
                .spawn(move || shared.daemon())
                .map_err(|e| DbError::Invalid(format!("cannot start the batch thread: {e}")))?
        };
        report.duration = started.elapsed();
        Ok(Group { shared, inner, daemon: Mutex::new(Some(daemon)), report })
    }

    /// Formats a blank region: superblock (under the formatting magic), an empty batch log,
    /// then the published superblock. The database image is formatted in the staging copy and
    /// reaches NVRAM through the first batch, so a crash before it leaves a blank image.
    fn format(nvram: &Region, options: &EngineOptions, pages: u64) -> Result<BatchLog> {
        let log = batch_layout(options);
        let area = ("batch log", "staging_bytes", options.group.staging_bytes);
        crate::staging::format_region(
            nvram,
            ENGINE_NAME,
            options,
            pages,
            log.base_page,
            area,
            |r| BatchLog::format(r, log),
        )?;
        BatchLog::open(nvram, pages, options.fault)
    }

    /// The batch that commits made now would join.
    pub fn open_batch(&self) -> u64 {
        self.shared.open.load(Ordering::Acquire)
    }

    /// Batches persisted, lines persisted and time spent persisting since open.
    pub fn batch_totals(&self) -> (u64, u64, Duration) {
        let s = &self.shared.stats;
        (
            s.batches.load(Ordering::Relaxed),
            s.lines.load(Ordering::Relaxed),
            Duration::from_nanos(s.persist_ns.load(Ordering::Relaxed)),
        )
    }

    /// Closes the open batch now and waits until it is durable.
    pub fn flush_batch(&self) -> Result<()> {
        self.shared.close_batch()
    }

    fn stop_daemon(&self) {
        self.shared.state.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(handle) = self.daemon.lock().take() {
            let _ = handle.join();
        }
    }
}

/// The batch log `staging_bytes` asks for.
fn batch_layout(options: &EngineOptions) -> LogLayout {
    LogLayout::for_capacity(options.group.staging_bytes / CACHE_LINE)
}

/// The pages formatting a region of `pages` requires (see [`crate::min_region_bytes`]).
pub(crate) fn needed_pages(options: &EngineOptions, pages: u64) -> u64 {
    crate::staging::needed_pages(options, pages, batch_layout(options).base_page)
}

fn validate(o: &EngineOptions) -> Result<BatchOptions> {
    let invalid = |why: String| Err(DbError::Invalid(format!("engine group: {why}")));
    if !(1..=60_000).contains(&o.group.batch_period_ms) {
        return invalid(format!("batch_period_ms={} outside 1..=60000", o.group.batch_period_ms));
    }
    if o.group.persist_threads > 64 {
        return invalid(format!("persist_threads={} outside 0..=64", o.group.persist_threads));
    }
    let capacity = o.group.staging_bytes / CACHE_LINE;
    if !o.group.staging_bytes.is_multiple_of(CACHE_LINE) || capacity > MAX_CAPACITY_LINES {
        return invalid(format!(
            "staging_bytes={} must be a multiple of 64 and at most {} MiB",
            o.group.staging_bytes,
            (MAX_CAPACITY_LINES * CACHE_LINE) >> 20
        ));
    }
    let margin = op_margin_lines(o);
    if capacity < 2 * margin {
        return invalid(format!(
            "staging_bytes={} is too small for {} workers: a batch needs room for every worker's \
             largest operation; use at least {} MiB",
            o.group.staging_bytes,
            o.workers,
            (2 * margin * CACHE_LINE).div_ceil(1 << 20)
        ));
    }
    Ok(BatchOptions {
        period: Duration::from_millis(o.group.batch_period_ms),
        // 0: every worker slot's thread helps, as the quiesced workers do in the thesis.
        persist_threads: if o.group.persist_threads == 0 {
            o.workers as usize
        } else {
            o.group.persist_threads as usize
        }
        .clamp(1, 64),
        batch_txns: o.group.batch_txns,
        close_at_lines: capacity - margin,
    })
}

impl Shared {
    fn fail_reason(&self) -> Option<DbError> {
        if !self.has_failed.load(Ordering::Acquire) {
            return None;
        }
        let why = self.failed.lock().clone().unwrap_or_default();
        Some(DbError::Invalid(format!(
            "a batch could not be persisted ({why}); reopen the database to recover"
        )))
    }

    fn staged_lines(&self) -> u64 {
        self.staging.dirty().map_or(0, pmem::DirtyLines::count)
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        token.0 <= self.durable.load(Ordering::Acquire)
    }

    /// Closes the open batch: quiesces every operation, persists the staged lines, opens the
    /// next batch. Returns once the batch is durable (or nothing needed persisting).
    pub(crate) fn close_batch(&self) -> Result<()> {
        let _closer = self.closer.lock();
        if let Some(e) = self.fail_reason() {
            return Err(e);
        }
        let _quiesced = self.gate.write();
        let id = self.open.load(Ordering::Acquire);
        let dirty = self.staging.dirty().expect("the staging copy tracks dirty lines");
        let started = Instant::now();
        let announce = || {
            self.durable.store(id, Ordering::Release);
            let _g = self.durable_lock.lock();
            self.durable_cv.notify_all();
        };
        let result =
            self.log.persist(id, &self.staging, dirty, self.options.persist_threads, &announce);
        match result {
            Ok(lines) => {
                if lines > 0 {
                    self.stats.batches.fetch_add(1, Ordering::Relaxed);
                    self.stats.lines.fetch_add(lines, Ordering::Relaxed);
                    let ns = started.elapsed().as_nanos() as u64;
                    self.stats.persist_ns.fetch_add(ns, Ordering::Relaxed);
                }
                self.open.store(id + 1, Ordering::Release);
                let mut st = self.state.lock();
                st.started = Instant::now();
                st.commits = 0;
                st.close_requested = false;
                Ok(())
            }
            Err(e) => {
                *self.failed.lock() = Some(e.to_string());
                self.has_failed.store(true, Ordering::Release);
                let _g = self.durable_lock.lock();
                self.durable_cv.notify_all();
                Err(e)
            }
        }
    }

    /// Whether a commit joined the open batch (read by the daemon, outside the gate: a commit
    /// marked after this look is seen at the next period's end, the batch still open).
    fn any_commit_marked(&self) -> bool {
        let id = self.open.load(Ordering::Acquire);
        self.commit_marks.iter().any(|m| m.load(Ordering::Relaxed) == id)
    }

    /// The batch thread: closes a batch every period (a period with neither commits nor staged
    /// lines just restarts), or earlier on request, until stopped.
    fn daemon(&self) {
        loop {
            {
                let mut st = self.state.lock();
                loop {
                    if st.stop {
                        return;
                    }
                    if st.close_requested {
                        break;
                    }
                    let deadline = st.started + self.options.period;
                    if Instant::now() >= deadline {
                        if st.commits > 0 || self.staged_lines() > 0 || self.any_commit_marked() {
                            break;
                        }
                        st.started = Instant::now();
                        continue;
                    }
                    self.wake.wait_until(&mut st, deadline);
                }
            }
            if self.close_batch().is_err() {
                return;
            }
        }
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        let mut g = self.durable_lock.lock();
        while !self.is_durable(token) {
            if let Some(e) = self.fail_reason() {
                return Err(e);
            }
            self.durable_cv.wait_for(&mut g, Duration::from_millis(50));
            if !self.is_durable(token) && self.state.lock().stop {
                // No batch thread any more (after shutdown): close the batch ourselves.
                drop(g);
                self.close_batch()?;
                g = self.durable_lock.lock();
            }
        }
        Ok(())
    }
}

impl crate::gated::Gate for Shared {
    /// Closes the batch first if the staged lines near the log's capacity.
    fn enter(&self) -> Result<crate::gated::GateRead<'_>> {
        if let Some(e) = self.fail_reason() {
            return Err(e);
        }
        if self.staged_lines() >= self.options.close_at_lines {
            self.stats.early_closes.fetch_add(1, Ordering::Relaxed);
            self.close_batch()?;
        }
        Ok(self.gate.read())
    }

    fn gate(&self) -> &crate::gated::GateLock {
        &self.gate
    }

    /// The open batch's token; `true` when `batch_txns` commits filled the batch. Without
    /// `batch_txns`, writes only this thread's commit mark (no lock, no shared line).
    fn committed(&self) -> (CommitToken, bool) {
        let id = self.open.load(Ordering::Acquire);
        if self.options.batch_txns == 0 {
            let mark = &self.commit_marks[pmem::thread_id() as usize % COMMIT_MARK_SLOTS];
            if mark.load(Ordering::Relaxed) != id {
                mark.store(id, Ordering::Relaxed);
            }
            return (CommitToken(id), false);
        }
        let mut st = self.state.lock();
        st.commits += 1;
        (CommitToken(id), st.commits >= self.options.batch_txns)
    }

    /// `batch_txns` reached: the committing worker closes the batch itself (deterministic
    /// batches for crash tests).
    fn after_commit(&self, token: CommitToken) -> Result<CommitToken> {
        self.close_batch()?;
        Ok(token)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.stop_daemon();
        // A clean close persists what committed; a failed engine leaves NVRAM as it is.
        let _ = self.shared.close_batch();
    }
}

impl Engine for Group {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        let _g = crate::gated::Gate::enter(&*self.shared)?;
        self.inner.create_table(spec)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.inner.table(name)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.inner.tables()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if let Some(e) = self.shared.fail_reason() {
            return Err(e);
        }
        let inner = self.inner.begin(worker)?;
        Ok(Box::new(crate::gated::GatedTxn::new(&*self.shared, inner)))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        self.shared.is_durable(token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.shared.wait_durable(token)
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }

    fn region(&self) -> Option<&Region> {
        Some(&self.shared.nvram)
    }

    fn check_integrity(&self) -> IntegrityResult {
        let _g = self.shared.gate.read();
        let batch = self.shared.log.valid_batch();
        if batch != 0 {
            return Err(format!("the batch log of batch {batch} is still valid outside a persist"));
        }
        self.inner.check_integrity()
    }

    fn activity(&self) -> Vec<(&'static str, u64)> {
        let s = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut v = vec![
            ("batches", get(&s.batches)),
            ("batch_lines", get(&s.lines)),
            ("batch_persist_ns", get(&s.persist_ns)),
            ("batches_closed_by_size", get(&s.early_closes)),
        ];
        v.extend(self.inner.locks.activity());
        v
    }

    /// The batch log area in front of the image, plus the image's pages in use.
    fn footprint_bytes(&self) -> Option<u64> {
        Some(self.shared.log.layout.base() + self.inner.footprint_bytes()?)
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        let base = self.shared.log.layout.base();
        if offset >= base {
            return self.inner.describe_offset(offset - base).map(|d| format!("image: {d}"));
        }
        Some(match offset / PAGE_SIZE_U64 {
            0 | 1 => "group superblock".into(),
            2 => "group batch log control line".into(),
            _ => "group batch log entries".into(),
        })
    }

    /// The batch log's entries (its first page up to the image) and the undo logs inside the
    /// image. Each batch writes its entries from the start of the area, so without this the area's
    /// first lines would be the most written; the thesis leaves logs out of Fig. 5.7 because
    /// its logs are circular buffers.
    fn circular_logs(&self) -> Option<Vec<std::ops::Range<u64>>> {
        let base = self.shared.log.layout.base();
        let image_logs = self.inner.circular_logs()?;
        let shifted = image_logs.into_iter().map(|r| base + r.start..base + r.end);
        Some(std::iter::once(page_offset(batch::FIRST_LOG_PAGE)..base).chain(shifted).collect())
    }

    /// The batch log's control line page (its state, written twice by every batch).
    fn log_control_words(&self) -> Option<Vec<std::ops::Range<u64>>> {
        let at = page_offset(batch::CONTROL_PAGE);
        Some(std::iter::once(at..at + PAGE_SIZE_U64).collect())
    }

    fn shutdown(&self) -> Result<()> {
        self.inner.shutdown()?;
        self.shared.close_batch()
    }
}

/// What opening `region` would do, found on a private copy: a valid batch log is rolled back
/// there first, then the image is inspected as `inplace` would recover it. `outer` is the
/// superblock's inspection of the whole region.
pub fn inspect(region: &Region, outer: crate::Inspection) -> Result<crate::Inspection> {
    crate::staging::require_backed(region, outer.page_count)?;
    let copy =
        Region::dram_copy(region.read(0, region.backed_len() as usize), &Default::default())?;
    let log = BatchLog::open(&copy, outer.page_count, None)?;
    let image_bytes = page_offset(outer.page_count - log.layout.base_page);
    let rolled_back = log.restore(image_bytes)?;
    let image =
        Region::dram_copy(copy.read(log.layout.base(), image_bytes as usize), &Default::default())?;
    let lines = rolled_back.as_ref().map_or(0, |r| r.lines);
    let mut outer = crate::staging::inspect_image(outer, &image, lines)?;
    if let Some(r) = rolled_back {
        outer.verdict +=
            &format!("; batch {} was interrupted: {} lines would be rolled back", r.batch, r.lines);
    }
    Ok(outer)
}

/// The test-only faults that belong to this engine.
pub const FAULTS: &[Fault] =
    &[Fault::BatchSkipLogBarrier, Fault::BatchCopyBeforeLog, Fault::BatchAckEarly];

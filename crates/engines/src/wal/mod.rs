//! NVRAM Disk-Replacement: write-ahead logging with a DRAM buffer pool — Pelley, Gold, Wenisch,
//! Bridge, *Storage Management in the NVRAM Era*, VLDB 2014, §2.2 and §3.2 (`persist_wal`,
//! `persist_page`, Fig. 2); thesis §4.2.1. N-Store's InP engine (Arulraj et al.) is this design.
//!
//! The buffer pool is a volatile copy of the database image (a `dram` region; the whole image
//! is cached, as in Pelley's runs with a buffer cache larger than the database). The `inplace`
//! engine runs on it unchanged, and every store it makes — rows, B+tree nodes, heap pages,
//! allocator words, and its per-transaction undo logs — is captured as a physical redo record in
//! the write-ahead log ([`log`]). Commits are made durable by `persist_wal` (2 barriers), run
//! by the central log's flush daemon for every commit in the buffer at once (group commit).
//! A page flusher writes dirty pages back with `persist_page` (page log, 4 barriers per page,
//! as in the paper; `page_flush=direct` writes the dirty lines of the dirty pages in place, one
//! barrier per 64 pages, without the page log, which our physical redo makes safe), after
//! forcing the log past their changes (the WAL rule), and then advances the checkpoint's redo
//! point, which truncates the log. `max_dirty_pages` is the flush-rate knob of Pelley's Fig. 1.
//! `flusher=checkpoint` (the default, ours) checkpoints every dirty page once the budget is
//! exceeded; `flusher=pelley` is the paper's (§3.2, Fig. 1: a constant number of dirty pages,
//! the oldest flushed continuously on a flusher thread, redo from the oldest recLSN left;
//! [`oldest_first`]).
//!
//! **Recovery** (ARIES phases, InnoDB-style undo): *analysis* reads the checkpoint's redo point
//! and finds the end of the log; *redo* applies every valid record from the redo point to the
//! image in the buffer pool (physical, so a torn page is repaired too); *undo* is `inplace`
//! recovery on the redone image: the undo logs of transactions that had not committed are in the
//! image (they were redo-logged like any page), and their rollback is itself logged (the
//! compensation records). A checkpoint then persists it all before open returns.
//!
//! **Recovery invariant**: every change to the image after the checkpoint's redo point has a
//! durable log record before the page holding it persists, and the redo point moves only after
//! every page changed before it is durable.
//!
//! Deliberate choices (see the closing note of the issue): undo information lives in undo-log
//! pages that are redo-logged (as InnoDB's undo segments), not in the log records themselves;
//! the checkpoint is fuzzy (it quiesces operations, never transactions, and only for a moment
//! at a time: see [`Shared::checkpoint`]); the central log is Aether's (Johnson et al., VLDB
//! 2010): a consolidation array inserts its records ([`carray`], §4-§5) and a log flush daemon
//! forces it for the commits ([`pipeline`], §3).

pub(crate) mod capture;
pub(crate) mod carray;
mod checkpoint;
pub(crate) mod dlog;
mod horizon_check;
mod inspect;
pub(crate) mod log;
pub(crate) mod manager;
mod oldest_first;
pub mod options;
pub(crate) mod pipeline;
mod recovery;

use checkpoint::dirty_pages;
pub use inspect::inspect;
use recovery::{log_area, read_control, replay_page_log, Recovering};

pub use crate::device::Io;
pub use dlog::{Cache, LogLayout};
pub use horizon_check::{dlog_horizon_check, HorizonCheck};
pub use log::LogInsert;
pub use pipeline::LogForce;

use crate::device::Device;
use crate::gated::{Gate, GatedTxn};
use crate::inplace::InPlace;
use crate::{EngineOptions, Fault};
use dlog::{Dlog, DlogFault};
use log::Log;
use manager::{Central, LogManager};
use parking_lot::{Condvar, Mutex};
use pmem::{Region, RegionOptions, CACHE_LINE};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::engine::RecoveryReport;
use storage::format::{get_u64, page_offset, PageId, Superblock, PAGE_SIZE, PAGE_SIZE_U64};
use storage::{CommitToken, DbError, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};

pub use options::Options;

pub const ENGINE_NAME: &str = "wal";

const CONTROL_PAGE: PageId = 2;
const PAGE_LOG_PAGE: PageId = 3;
const FIRST_LOG_PAGE: PageId = 4;
/// Pages one quiesced moment of a checkpoint copies (512 KiB).
const SNAPSHOT_PAGES: usize = 64;
const MAGIC: u64 = u64::from_le_bytes(*b"NVMDBwal");
const C_REDO: u64 = 0;
const C_PAGE_LOG: u64 = 8;
const C_CAPACITY: u64 = 16;
const C_BASE: u64 = 24;
const C_MAGIC: u64 = 32;
const C_CRC: u64 = 40;

/// How the page flusher writes pages back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageFlush {
    /// Pelley's `persist_page`: each page through a persistent page log, 4 barriers per page.
    Paper,
    /// The dirty lines in place, one barrier per 64 pages (physical redo repairs a torn page).
    Direct,
}

impl PageFlush {
    pub fn parse(s: &str) -> Option<PageFlush> {
        match s {
            "paper" => Some(PageFlush::Paper),
            "direct" => Some(PageFlush::Direct),
            _ => None,
        }
    }
}

/// What a read of the buffer pool costs (`pool_reads=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PoolReads {
    /// The pool is DRAM and its reads are free (Pelley: the buffer pool is DRAM, NVRAM only
    /// what the log and the page flusher write).
    #[default]
    Dram,
    /// The pool's reads are charged as reads of the NVRAM device, through the device's CPU-cache
    /// read model ([`pmem::Region::charge_reads_to`]): N-Store's testbed (Arulraj et al. §2.2)
    /// makes all memory NVM, its InP engine's tuples and indexes included. Without a CPU cache
    /// on the device nothing is charged, as for every other read.
    Nvm,
}

impl PoolReads {
    pub fn parse(s: &str) -> Option<PoolReads> {
        match s {
            "dram" => Some(PoolReads::Dram),
            "nvm" => Some(PoolReads::Nvm),
            _ => None,
        }
    }
}

/// How the page flusher keeps the dirty pages of the buffer pool bounded (`flusher=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flusher {
    /// Ours: a fuzzy checkpoint of every dirty page once more than `max_dirty_pages` are dirty
    /// (or the log is half full); the redo point moves to the checkpoint's start.
    #[default]
    Checkpoint,
    /// Pelley's (VLDB 2014 §3.2, Fig. 1): the oldest dirty pages are written back continuously
    /// so that `max_dirty_pages` stay dirty; the redo point follows the oldest recLSN left
    /// ([`oldest_first`]). Needs the central log.
    Pelley,
}

impl Flusher {
    pub fn parse(s: &str) -> Option<Flusher> {
        match s {
            "checkpoint" => Some(Flusher::Checkpoint),
            "pelley" => Some(Flusher::Pelley),
            _ => None,
        }
    }
}

/// Log bytes one operation can append at most, per worker: what its undo logs can describe plus
/// a full-height split, doubled for the record overhead of small stores. The log keeps this much
/// room per worker so appends inside an operation never overflow it.
fn op_margin_bytes(o: &EngineOptions) -> u64 {
    let pages = u64::from(o.undo_pages) + u64::from(o.sys_undo_pages) + 24;
    (u64::from(o.workers) + 1) * pages * PAGE_SIZE_U64 * 2
}

/// `log_bytes` of [`EngineOptions::default`]: 64 MiB, the size of one log in Wang & Johnson's
/// setup (20 logs × 64 MB).
pub const DEFAULT_LOG_BYTES: u64 = 64 << 20;

/// The `log_bytes` the CLI uses when none is given: [`DEFAULT_LOG_BYTES`], raised for `N` logs
/// to what `open` requires of each (twice the operation margin of `o.workers` workers, about
/// 2.25 MiB per worker), rounded up to 1 MiB; so `log=txn:N|page:N` opens with any `N` and
/// worker count without naming `log_bytes`.
pub fn default_log_bytes(o: &EngineOptions) -> u64 {
    DEFAULT_LOG_BYTES.max(min_log_bytes(o))
}

/// The smallest `log_bytes`, in whole MiB, that `open` accepts for `o`'s workers and logs (each
/// log at least twice the operation margin, after rounding each log down to 8 KiB).
pub fn min_log_bytes(o: &EngineOptions) -> u64 {
    let margin = op_margin_bytes(o);
    let mut need = (2 * margin * o.wal.log.logs()).div_ceil(1 << 20) << 20;
    while dlog::per_log_bytes(need, o.wal.log) < 2 * margin {
        need += 1 << 20;
    }
    need
}

/// The first page of the image: the log area (`log_bytes`) ends there.
fn base_page(options: &EngineOptions) -> PageId {
    FIRST_LOG_PAGE + options.wal.log_bytes / PAGE_SIZE_U64
}

/// The pages formatting a region of `pages` requires (see [`crate::min_region_bytes`]).
pub(crate) fn needed_pages(options: &EngineOptions, pages: u64) -> u64 {
    crate::staging::needed_pages(options, pages, base_page(options))
}

fn params_crc(capacity: u64, base: u64) -> u64 {
    crate::staging::params_crc(capacity, base, MAGIC)
}

fn control(field: u64) -> u64 {
    page_offset(CONTROL_PAGE) + field
}

/// Test-only protocol violations of `wal`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalFault {
    /// The flusher writes pages before forcing the log (breaks the WAL rule).
    PageBeforeLog,
    /// The checkpoint's redo point moves before the flushed pages are durable.
    CheckpointBeforePages,
    /// `flusher=pelley` moves the redo point past pages still dirty (to the log's end).
    FlusherRedoPastDirty,
}

/// What the flusher, the workers and the engine share.
pub(crate) struct Shared {
    nvram: Region,
    device: Arc<Device>,
    staging: Region,
    /// The log manager: the central log or the distributed logs ([`manager`]).
    log: Arc<dyn LogManager>,
    /// Serializes the log's system work (catalog changes).
    system: Mutex<()>,
    log_area: u64,
    base: u64,
    gate: crate::gated::GateLock,
    /// Serializes page write-back; the Pelley flusher's dirty pages, oldest first.
    checkpoint_lock: Mutex<oldest_first::Tracker>,
    page_flush: PageFlush,
    flusher: Flusher,
    max_dirty_pages: u64,
    /// `flusher=pelley`: how far past `max_dirty_pages` its last look may find the dirty set
    /// before operations wait for it ([`oldest_first`]; 0: never).
    flusher_lag: u64,
    /// Set by the Pelley flusher while it is more than `flusher_lag` pages behind; operations
    /// entering wait on `caught_up` until it clears (read once per operation: a line only the
    /// flusher writes, and only when it falls behind or catches up).
    behind: AtomicBool,
    /// Between the flusher's looks: the dirty lines (the staging region's count, which every
    /// new dirty line raises and write-back lowers) past which operations wait too, set at each
    /// look to `max_dirty_pages + flusher_lag` pages at the lines per dirty page it saw
    /// (`u64::MAX`: none).
    line_limit: AtomicU64,
    caught_up: Condvar,
    /// Checkpoint when the log holds more than this (capacity minus the operation margin).
    log_high_water: u64,
    fault: Option<WalFault>,
    failed: AtomicBool,
    stop: Mutex<bool>,
    wake: Condvar,
    pub(crate) stats: WalStats,
}

#[derive(Default)]
pub(crate) struct WalStats {
    pub checkpoints: AtomicU64,
    pub pages_flushed: AtomicU64,
    pub flush_ns: AtomicU64,
    /// Persist barriers and lines flushed by page write-back (not the log's).
    pub flush_fences: AtomicU64,
    pub flush_lines: AtomicU64,
    /// `flusher=pelley`: rounds that wrote pages back, and the most dirty pages it saw.
    pub flush_rounds: AtomicU64,
    pub dirty_pages_peak: AtomicU64,
    /// `flusher=pelley`: operations that waited for the flusher to catch up, and the time
    /// they waited (written only by operations that wait).
    pub flusher_waits: AtomicU64,
    pub flusher_wait_ns: AtomicU64,
}

pub struct Wal {
    shared: Arc<Shared>,
    inner: InPlace,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The log's daemon, if it needs one ([`LogManager::needs_daemon`]).
    daemon: Mutex<Option<std::thread::JoinHandle<()>>>,
    report: RecoveryReport,
}

fn validate(o: &EngineOptions) -> Result<()> {
    let invalid = |why: String| Err(DbError::Invalid(format!("engine wal: {why}")));
    if !o.wal.log_bytes.is_multiple_of(PAGE_SIZE_U64) || o.wal.log_bytes > 1 << 40 {
        return invalid(format!("log_bytes={} must be a multiple of 8 KiB", o.wal.log_bytes));
    }
    let margin = op_margin_bytes(o);
    let logs = o.wal.log.logs();
    if dlog::per_log_bytes(o.wal.log_bytes, o.wal.log) < 2 * margin {
        return invalid(format!(
            "log_bytes={} is too small for {} workers and {logs} log(s): each log needs room \
             for every worker's largest operation between checkpoints; use at least {} MiB \
             (or leave log_bytes unset: its default grows with the workers and logs)",
            o.wal.log_bytes,
            o.workers,
            min_log_bytes(o) >> 20
        ));
    }
    if o.wal.flusher == Flusher::Pelley && o.wal.log != LogLayout::Central {
        // One redo point per log would need a recLSN per log for every page.
        return invalid("flusher=pelley needs the central log (log=central)".into());
    }
    if o.wal.log == LogLayout::Central && o.wal.cache == Cache::Durable {
        return invalid("cache=durable needs a distributed log (log=txn:N or log=page:N)".into());
    }
    Ok(())
}

impl Wal {
    /// Opens the engine: formats a blank region, otherwise recovers it (analysis, redo, undo)
    /// and checkpoints before returning.
    pub fn open(nvram: Region, options: &EngineOptions) -> Result<Wal> {
        let started = Instant::now();
        validate(options)?;
        let backed_pages = nvram.backed_len() / PAGE_SIZE_U64;
        let mut report = RecoveryReport::default();
        let (pages, formatted) = match Superblock::read(&nvram, ENGINE_NAME, nvram.created())? {
            Some(sb) => (crate::staging::require_backed(&nvram, sb.layout.page_count)?, false),
            None => (Self::format(&nvram, options, backed_pages)?, true),
        };
        let (capacity, base_page) = read_control(&nvram, pages)?;
        let base = page_offset(base_page);
        let image_bytes = page_offset(pages - base_page);
        if let Some(page) = replay_page_log(&nvram, base, image_bytes)? {
            report.notes.push(format!("page log: page {page} rewritten"));
        }
        let dc =
            dlog::read_control(&nvram, control(0), capacity, options.wal.log, options.wal.cache)?;
        // Analysis + redo into the buffer pool, by the log manager the region was formatted with.
        let staging = crate::staging::copy_of(&nvram, base, image_bytes, formatted)?;
        if options.wal.pool_reads == PoolReads::Nvm {
            // False only where the device has no CPU cache: then no read is charged anywhere.
            staging.charge_reads_to(&nvram);
        }
        let device = Arc::new(Device::open(&nvram, options.io, ENGINE_NAME)?);
        let from = Recovering { nvram: &nvram, staging: &staging, device: &device, dc, options };
        let log: Arc<dyn LogManager> = match dc.layout {
            LogLayout::Central => Arc::new(from.central(image_bytes, &mut report)?),
            LogLayout::Txn(_) | LogLayout::Page(_) => {
                Arc::new(from.distributed(image_bytes, &mut report)?)
            }
        };
        // Undo: inplace recovery on the redone image, as system work; its writes are logged.
        log.enter_system();
        staging.set_observer(log.clone().observer());
        let inner_options = EngineOptions { fault: None, ..options.clone() };
        let inner = InPlace::open(staging.clone(), &inner_options)?;
        crate::staging::merge_report(&mut report, inner.recovery_report(), formatted);
        log.force_all()?;
        let fault = match options.fault {
            Some(Fault::WalPageBeforeLog) => Some(WalFault::PageBeforeLog),
            Some(Fault::WalCheckpointBeforePages) => Some(WalFault::CheckpointBeforePages),
            Some(Fault::WalFlusherRedoPastDirty) => Some(WalFault::FlusherRedoPastDirty),
            _ => None,
        };
        let shared = Arc::new(Shared {
            nvram,
            device,
            staging,
            log,
            system: Mutex::new(()),
            log_area: log_area(),
            base,
            gate: Default::default(),
            checkpoint_lock: Mutex::new(Default::default()),
            page_flush: options.wal.page_flush,
            flusher: options.wal.flusher,
            max_dirty_pages: options.wal.max_dirty_pages,
            flusher_lag: options.wal.flusher_lag,
            behind: AtomicBool::new(false),
            line_limit: AtomicU64::new(u64::MAX),
            caught_up: Condvar::new(),
            log_high_water: dc.per_log_bytes - op_margin_bytes(options),
            fault,
            failed: AtomicBool::new(false),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            stats: WalStats::default(),
        });
        // What redo and undo produced becomes durable before open returns, and the log restarts
        // from there.
        shared.checkpoint()?;
        Self::start(shared, inner, report, started)
    }

    fn start(
        shared: Arc<Shared>,
        inner: InPlace,
        mut report: RecoveryReport,
        started: Instant,
    ) -> Result<Wal> {
        let flusher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("nvmdb-wal-flusher".into())
                .spawn(move || shared.flusher())
                .map_err(|e| DbError::Invalid(format!("cannot start the page flusher: {e}")))?
        };
        let daemon = if shared.log.needs_daemon() {
            let log = shared.log.clone();
            let h = std::thread::Builder::new()
                .name("nvmdb-wal-commit-daemon".into())
                .spawn(move || log.daemon())
                .map_err(|e| DbError::Invalid(format!("cannot start the commit daemon: {e}")));
            Some(h?)
        } else {
            None
        };
        report.duration = started.elapsed();
        Ok(Wal {
            shared,
            inner,
            flusher: Mutex::new(Some(flusher)),
            daemon: Mutex::new(daemon),
            report,
        })
    }

    /// Superblock under the formatting magic, control line, published superblock. The image is
    /// formatted in the buffer pool and reaches NVRAM through the log and the first checkpoint.
    fn format(nvram: &Region, options: &EngineOptions, pages: u64) -> Result<u64> {
        let base_page = base_page(options);
        let area = ("log", "log_bytes", options.wal.log_bytes);
        crate::staging::format_region(nvram, ENGINE_NAME, options, pages, base_page, area, |r| {
            let mut line = [0u8; 48];
            line[C_CAPACITY as usize..][..8].copy_from_slice(&options.wal.log_bytes.to_le_bytes());
            line[C_BASE as usize..][..8].copy_from_slice(&base_page.to_le_bytes());
            line[C_MAGIC as usize..][..8].copy_from_slice(&MAGIC.to_le_bytes());
            let crc = params_crc(options.wal.log_bytes, base_page);
            line[C_CRC as usize..][..8].copy_from_slice(&crc.to_le_bytes());
            r.write(control(0), &line);
            r.persist(control(0), line.len() as u64);
            let c = dlog::Control {
                layout: options.wal.log,
                cache: options.wal.cache,
                per_log_bytes: dlog::per_log_bytes(options.wal.log_bytes, options.wal.log),
            };
            dlog::format_control(r, control(0), c);
            // Each log's first page too, for the same reason.
            for i in 1..options.wal.log.logs() {
                let at = page_offset(FIRST_LOG_PAGE) + i * c.per_log_bytes;
                r.write(at, &[0u8; PAGE_SIZE]);
                r.persist(at, PAGE_SIZE_U64);
            }
            // A log area left by an earlier region must not read as records: zero its first page.
            r.write(page_offset(FIRST_LOG_PAGE), &[0u8; PAGE_SIZE]);
            r.persist(page_offset(FIRST_LOG_PAGE), PAGE_SIZE_U64);
        })?;
        Ok(pages)
    }

    /// Flushes every dirty page and advances the checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.shared.checkpoint()
    }

    /// Checkpoints, pages flushed, time flushing, log forces and bytes forced since open.
    pub fn totals(&self) -> (u64, u64, Duration, u64, u64) {
        let s = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let t = self.shared.log.totals();
        (
            get(&s.checkpoints),
            get(&s.pages_flushed),
            Duration::from_nanos(get(&s.flush_ns)),
            t.forces,
            t.bytes_forced,
        )
    }

    fn stop_flusher(&self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(h) = self.flusher.lock().take() {
            let _ = h.join();
        }
        self.shared.log.stop_daemon();
        if let Some(h) = self.daemon.lock().take() {
            let _ = h.join();
        }
    }
}

impl Gate for Shared {
    /// Checkpoints first if the log is nearly full (appends inside an operation cannot wait).
    fn enter(&self) -> Result<crate::gated::GateRead<'_>> {
        if let Some(e) = self.failed_error() {
            return Err(e);
        }
        if self.flusher_must_wait() {
            self.wait_for_flusher();
        }
        if self.log.most_used().0 >= self.log_high_water {
            self.checkpoint()?;
        }
        Ok(self.gate.read())
    }

    fn gate(&self) -> &crate::gated::GateLock {
        &self.gate
    }

    fn committed(&self) -> (CommitToken, bool) {
        (CommitToken::DURABLE, true)
    }

    /// The log makes the commit durable: `persist_wal` of the central log (by its flush daemon,
    /// or here with `log_force=inline`), or passive group commit of the distributed logs
    /// ([`LogManager::commit`]).
    fn after_commit(&self, token: CommitToken) -> Result<CommitToken> {
        self.log.commit(token).inspect_err(|e| self.fail(e))
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop_flusher();
        // A clean close: force what is logged (later recovery redoes it).
        self.shared.log.enter_system();
        let _ = self.shared.log.force_all();
    }
}

impl Engine for Wal {
    fn name(&self) -> &str {
        ENGINE_NAME
    }

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        let _system = self.shared.system.lock();
        self.shared.log.enter_system();
        let id = {
            let _g = Gate::enter(&*self.shared)?;
            self.inner.create_table(spec)?
        };
        self.shared.log.force_all()?;
        Ok(id)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.inner.table(name)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.inner.tables()
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        if let Some(e) = self.shared.failed_error() {
            return Err(e);
        }
        let inner = self.inner.begin(worker)?;
        self.shared.log.enter_worker(worker);
        Ok(Box::new(GatedTxn::new(&*self.shared, inner)))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        self.shared.log.is_durable(token)
    }

    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.shared.log.wait_durable(token)
    }

    fn recovery_report(&self) -> RecoveryReport {
        self.report.clone()
    }

    fn region(&self) -> Option<&Region> {
        Some(&self.shared.nvram)
    }

    fn check_integrity(&self) -> IntegrityResult {
        // Not during a checkpoint: its page writes (outside the gate) hold the page log valid.
        let _c = self.shared.checkpoint_lock.lock();
        let _g = self.shared.gate.read();
        if self.shared.nvram.read_u64(control(C_PAGE_LOG)) != 0 {
            return Err("the page log is still valid outside a page flush".into());
        }
        self.inner.check_integrity()
    }

    /// The log's and the page flusher's work, apart: Pelley's `persist_wal` and `persist_page`
    /// counts read off per commit and per page flushed.
    fn activity(&self) -> Vec<(&'static str, u64)> {
        let s = &self.shared.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let l = self.shared.log.totals();
        let mut v = vec![
            ("checkpoints", get(&s.checkpoints)),
            ("pages_flushed", get(&s.pages_flushed)),
            ("page_flush_fences", get(&s.flush_fences)),
            ("page_flush_lines", get(&s.flush_lines)),
            ("page_flush_ns", get(&s.flush_ns)),
            // Summed over every log.
            ("log_forces", l.forces),
            ("log_force_fences", l.force_fences),
            ("log_bytes_forced", l.bytes_forced),
            ("log_copy_waits", l.copy_waits),
            ("log_reserve_locks", l.reserve_locks),
        ];
        self.shared.log.activity(&mut v);
        // `flusher=pelley`'s rounds, and the most dirty pages one saw (0 with checkpoints).
        v.push(("flush_rounds", get(&s.flush_rounds)));
        v.push(("dirty_pages_peak", get(&s.dirty_pages_peak)));
        v.push(("flusher_waits", get(&s.flusher_waits)));
        v.push(("flusher_wait_ns", get(&s.flusher_wait_ns)));
        v.extend(self.inner.locks.activity());
        v
    }

    /// The log and page-log areas in front of the image, plus the image's pages in use.
    fn footprint_bytes(&self) -> Option<u64> {
        Some(self.shared.base + self.inner.footprint_bytes()?)
    }

    fn describe_offset(&self, offset: u64) -> Option<String> {
        if offset >= self.shared.base {
            return self
                .inner
                .describe_offset(offset - self.shared.base)
                .map(|d| format!("image: {d}"));
        }
        Some(match offset / PAGE_SIZE_U64 {
            0 | 1 => "wal superblock".into(),
            2 => "wal control line (checkpoint redo point, page log state)".into(),
            3 => "wal page log".into(),
            _ => format!("wal log area (byte {})", offset - self.shared.log_area),
        })
    }

    /// The page log with its state word, the circular log area (pages 3.. up to the image),
    /// and the undo logs inside the image. The page log is one page and one state word
    /// rewritten by every `persist_page` (twice per page flushed), not a ring; it is left out
    /// as the thesis leaves out every log ("Logs are implemented as circular buffers"), which
    /// a ring of page-log slots, each with its own state, would make true of ours too. Without
    /// it the state word is Fig. 5.7's hottest byte (found by `wear_fig57_logs`).
    fn circular_logs(&self) -> Option<Vec<std::ops::Range<u64>>> {
        let base = self.shared.base;
        let state = control(C_PAGE_LOG);
        let mut logs = vec![state..state + 8, page_offset(PAGE_LOG_PAGE)..base];
        for r in self.inner.circular_logs()? {
            logs.push(base + r.start..base + r.end);
        }
        Some(logs)
    }

    /// The control page: the checkpoint's redo point (every checkpoint or Pelley flusher
    /// round), the page log's state word (twice per page flushed), the distributed logs' redo
    /// points and horizon.
    fn log_control_words(&self) -> Option<Vec<std::ops::Range<u64>>> {
        let at = page_offset(CONTROL_PAGE);
        Some(std::iter::once(at..at + PAGE_SIZE_U64).collect())
    }

    fn shutdown(&self) -> Result<()> {
        self.inner.shutdown()?;
        self.shared.checkpoint()
    }
}

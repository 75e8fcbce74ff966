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
//! as in the paper; `page_flush=direct` writes the
//! dirty lines of the dirty pages in place, one barrier per 64 pages, without the page log, which our physical redo makes
//! safe), after
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
//!
//! Not split yet (about 1,010 lines without its tests): open and recovery, and the page flusher
//! with its checkpoint, are the two jobs to part (`wal/checkpoint.rs`); deferred while the log
//! manager interface (issue 34) and the log tests (branch `fuzzlogs`) change this file.

pub(crate) mod carray;
pub(crate) mod dlog;
mod horizon_check;
pub(crate) mod log;
pub(crate) mod manager;
mod oldest_first;
pub mod options;
pub(crate) mod pipeline;

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
/// a full-height split, doubled for the record overhead of small stores. The log keeps this much room
/// per worker so appends inside an operation never overflow it.
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

/// What analysis and redo of either log manager read and write.
struct Recovering<'a> {
    nvram: &'a Region,
    /// The buffer pool, a copy of the image that redo brings up to date.
    staging: &'a Region,
    device: &'a Arc<Device>,
    dc: dlog::Control,
    options: &'a EngineOptions,
}

impl Recovering<'_> {
    /// Analysis and redo of the central log: from the checkpoint's redo point to the end.
    fn central(&self, image_bytes: u64, report: &mut RecoveryReport) -> Result<Central> {
        let (nvram, capacity, log_area) = (self.nvram, self.dc.per_log_bytes, log_area());
        let redo_from = nvram.read_u64(control(C_REDO));
        let redo_started = Instant::now();
        let (end, records) = log::scan(nvram, log_area, capacity, redo_from, image_bytes, |r| {
            self.staging.write(r.offset, r.bytes)
        })?;
        report.records_applied = records;
        report.notes.push(format!(
            "redo: {records} records ({} KiB) from LSN {redo_from} in {:.1} ms",
            (end - redo_from) >> 10,
            redo_started.elapsed().as_secs_f64() * 1e3
        ));
        log::erase_stale_tail(nvram, log_area, capacity, redo_from, end);
        let insert = self.options.wal.log_insert;
        let log = Log::new(self.device.clone(), log_area, capacity, redo_from, end, insert);
        let skip_barrier = self.options.fault == Some(Fault::WalSkipLogBarrier);
        let force = self.options.wal.log_force;
        Ok(Central::new(log, nvram.clone(), self.device.clone(), skip_barrier, force))
    }

    /// Analysis and redo over every log ([`dlog::recover`]).
    fn distributed(&self, image_bytes: u64, report: &mut RecoveryReport) -> Result<Dlog> {
        let (nvram, dc, log_area) = (self.nvram, self.dc, log_area());
        let dfault = match self.options.fault {
            Some(Fault::DlogAckOwnLogs) => Some(DlogFault::AckOwnLogs),
            Some(Fault::DlogSkipLaggingLog) => Some(DlogFault::SkipLaggingLog),
            Some(Fault::DlogRedoPastHorizon) => Some(DlogFault::RedoPastHorizon),
            Some(Fault::DlogRedoUnsorted) => Some(DlogFault::RedoUnsorted),
            _ => None,
        };
        let redo_started = Instant::now();
        let rec = dlog::recover(
            nvram,
            self.staging,
            control(0),
            log_area,
            dc,
            image_bytes,
            true,
            dfault,
        )?;
        report.records_applied = rec.redone;
        report.notes.push(format!(
            "redo: {} records from {} logs ({}) in {:.1} ms; {} records above the GSN horizon \
             {} retired",
            rec.redone,
            rec.ends.len(),
            dc.layout,
            redo_started.elapsed().as_secs_f64() * 1e3,
            rec.retired,
            rec.horizon
        ));
        if let Some(note) = &rec.redo.note {
            report.notes.push(note.clone());
        }
        for (i, (&from, &end)) in rec.redo.points.iter().zip(&rec.ends).enumerate() {
            let area = log_area + i as u64 * dc.per_log_bytes;
            log::erase_stale_tail(nvram, area, dc.per_log_bytes, from, end);
        }
        Ok(Dlog::new(
            self.device.clone(),
            control(0),
            log_area,
            dc,
            &rec,
            self.options.wal.log_insert,
            image_bytes / PAGE_SIZE_U64,
            dfault,
        ))
    }
}

fn log_area() -> u64 {
    page_offset(FIRST_LOG_PAGE)
}

fn read_control(nvram: &Region, pages: u64) -> Result<(u64, PageId)> {
    let c = nvram.read(control(0), 48);
    let bad = |why: String| Err(DbError::Corrupt(format!("wal control line: {why}")));
    if get_u64(c, C_MAGIC as usize) != MAGIC {
        return bad("bad magic".into());
    }
    let (capacity, base) = (get_u64(c, C_CAPACITY as usize), get_u64(c, C_BASE as usize));
    if get_u64(c, C_CRC as usize) != params_crc(capacity, base) {
        return bad("checksum mismatch".into());
    }
    if capacity == 0
        || !capacity.is_multiple_of(PAGE_SIZE_U64)
        || base != FIRST_LOG_PAGE + capacity / PAGE_SIZE_U64
        || base >= pages
    {
        return bad(format!("log of {capacity} bytes and base page {base} do not fit"));
    }
    Ok((capacity, base))
}

/// Pelley's `persist_page` crash case: a page log marked valid is written in place again.
fn replay_page_log(nvram: &Region, base: u64, image_bytes: u64) -> Result<Option<u64>> {
    let state = nvram.read_u64(control(C_PAGE_LOG));
    if state == 0 {
        return Ok(None);
    }
    let page = state - 1;
    if page.checked_add(1).is_none_or(|end| page_offset(end) > image_bytes) {
        return Err(DbError::Corrupt(format!("wal page log names page {page}")));
    }
    let at = base + page_offset(page);
    let logged = nvram.read(page_offset(PAGE_LOG_PAGE), PAGE_SIZE).to_vec();
    nvram.write(at, &logged);
    nvram.persist(at, PAGE_SIZE_U64);
    nvram.write_u64(control(C_PAGE_LOG), 0);
    nvram.persist(control(C_PAGE_LOG), 8);
    Ok(Some(page))
}

/// Runs of set bits of a line mask: (first line, count), ascending.
fn line_runs(mut mask: u128) -> Vec<(u64, u64)> {
    let mut runs = Vec::new();
    let mut base = 0u64;
    while mask != 0 {
        let skip = u64::from(mask.trailing_zeros());
        mask >>= skip;
        let n = u64::from(mask.trailing_ones());
        runs.push((base + skip, n));
        base += skip + n;
        mask = mask.checked_shr(n as u32).unwrap_or(0);
    }
    runs
}

/// Dirty pages of the buffer pool: image page ids, ascending, each with a mask of its dirty
/// lines (bit i: line i of the page's 128).
fn dirty_pages(staging: &Region) -> Vec<(PageId, u128)> {
    const _: () = assert!(PAGE_SIZE_U64 / CACHE_LINE == 128);
    let lines_per_page = PAGE_SIZE_U64 / CACHE_LINE;
    let mut pages: Vec<(PageId, u128)> = Vec::new();
    if let Some(d) = staging.dirty() {
        for s in d.segments() {
            d.segment_lines(s, |l| {
                let (p, bit) = (l / lines_per_page, 1u128 << (l % lines_per_page));
                match pages.last_mut() {
                    Some((last, mask)) if *last == p => *mask |= bit,
                    _ => pages.push((p, bit)),
                }
            });
        }
    }
    pages
}

impl Shared {
    fn fail(&self, e: &DbError) {
        self.failed.store(true, Ordering::Release);
        let _ = e;
    }

    fn failed_error(&self) -> Option<DbError> {
        (self.failed.load(Ordering::Acquire) || self.log.failed()).then(|| {
            DbError::Invalid(
                "the write-ahead log failed (a checkpoint or a log force did not complete); \
                 reopen the database to recover"
                    .into(),
            )
        })
    }

    /// The page flusher, a fuzzy checkpoint: with operations quiesced only for a moment, takes
    /// the redo point (`cut`, the end of the log) and the set of dirty pages, clearing it; then,
    /// [`SNAPSHOT_PAGES`] at a time, copies pages (operations quiesced for the copy), forces the
    /// log past everything the copies may hold (the WAL rule) and writes them back while
    /// transactions run; finally moves the redo point to `cut` (truncating the log). A page
    /// changed after its set was taken is dirty again, so the next checkpoint writes it; a copy
    /// may hold changes after `cut` — redo from `cut` reapplies them in order (physical records).
    fn checkpoint(&self) -> Result<()> {
        let mut tracker = self.checkpoint_lock.lock();
        if let Some(e) = self.failed_error() {
            return Err(e);
        }
        let started = Instant::now();
        let (cut, pages) = {
            let _quiesced = self.gate.write();
            let cut = self.log.ends();
            let pages = dirty_pages(&self.staging);
            if let Some(d) = self.staging.dirty() {
                d.clear();
            }
            (cut, pages)
        };
        let result = self.write_back(&cut, &pages);
        if let Err(e) = &result {
            self.fail(e);
        }
        result?;
        tracker.reset(cut[0]);
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.stats.pages_flushed.fetch_add(pages.len() as u64, Ordering::Relaxed);
        self.stats.flush_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn write_back(&self, cut: &[u64], pages: &[(PageId, u128)]) -> Result<()> {
        if self.fault == Some(WalFault::CheckpointBeforePages) {
            self.log.advance_redo(cut);
        }
        for chunk in pages.chunks(SNAPSHOT_PAGES) {
            self.flush_chunk(chunk, false)?;
        }
        self.log.advance_redo(cut);
        self.device.check()
    }

    /// Copies `chunk`'s pages with operations quiesced, forces the log past everything the
    /// copies may hold (the WAL rule) and writes them back while transactions run. `take`: the
    /// lines written are the page's dirty lines now, taken out of the dirty set (the Pelley
    /// flusher); otherwise the masks given (cleared when the checkpoint began).
    fn flush_chunk(&self, chunk: &[(PageId, u128)], take: bool) -> Result<()> {
        let (end, snapshot) = {
            let _quiesced = self.gate.write();
            let snapshot: Vec<(PageId, u128, Vec<u8>)> = chunk
                .iter()
                .map(|&(p, m)| {
                    let mask = if take { self.take_dirty(p) } else { m };
                    (p, mask, self.staging.read(page_offset(p), PAGE_SIZE).to_vec())
                })
                .filter(|&(_, mask, _)| mask != 0)
                .collect();
            (self.log.ends(), snapshot)
        };
        if self.fault != Some(WalFault::PageBeforeLog) {
            self.log.force_for_pages(&end)?;
        }
        match self.page_flush {
            PageFlush::Paper => {
                for (page, _, bytes) in &snapshot {
                    self.persist_page(*page, bytes);
                }
            }
            PageFlush::Direct => {
                // Only the lines dirty when the page was taken; a line dirtied since is dirty
                // again and covered by redo from the redo point.
                for (page, mask, bytes) in &snapshot {
                    let at = self.base + page_offset(*page);
                    for (first, n) in line_runs(*mask) {
                        let (from, len) = (first * CACHE_LINE, n * CACHE_LINE);
                        let range = from as usize..(from + len) as usize;
                        self.device.write(at + from, &bytes[range]);
                        self.flush_counted(at + from, len);
                    }
                }
                self.fence_counted();
            }
        }
        if self.fault == Some(WalFault::PageBeforeLog) {
            self.log.force_for_pages(&end)?;
        }
        Ok(())
    }

    /// The dirty lines of `page`, taken out of the dirty set (operations quiesced).
    fn take_dirty(&self, page: PageId) -> u128 {
        let Some(d) = self.staging.dirty() else { return u128::MAX };
        let first = page * (PAGE_SIZE_U64 / CACHE_LINE);
        u128::from(d.take_word(first)) | u128::from(d.take_word(first + 64)) << 64
    }

    /// Pelley's `persist_page` (Fig. 2): copy to the page log, barrier; mark it valid, barrier;
    /// write in place, barrier; invalidate, barrier.
    fn persist_page(&self, page: PageId, bytes: &[u8]) {
        let log_at = page_offset(PAGE_LOG_PAGE);
        let d = &self.device;
        d.write(log_at, bytes);
        self.persist_counted(log_at, PAGE_SIZE_U64);
        d.write_u64(control(C_PAGE_LOG), page + 1);
        self.persist_counted(control(C_PAGE_LOG), 8);
        let at = self.base + page_offset(page);
        d.write(at, bytes);
        self.persist_counted(at, PAGE_SIZE_U64);
        d.write_u64(control(C_PAGE_LOG), 0);
        self.persist_counted(control(C_PAGE_LOG), 8);
    }

    /// A flush by the page flusher, counted apart from the log's (bench's `engine` figures).
    fn flush_counted(&self, at: u64, len: u64) {
        self.device.flush(at, len);
        let lines = (at + len).div_ceil(CACHE_LINE) - at / CACHE_LINE;
        self.stats.flush_lines.fetch_add(lines, Ordering::Relaxed);
    }

    fn fence_counted(&self) {
        self.device.fence();
        self.stats.flush_fences.fetch_add(1, Ordering::Relaxed);
    }

    fn persist_counted(&self, at: u64, len: u64) {
        self.flush_counted(at, len);
        self.fence_counted();
    }

    /// Background flusher: with `flusher=checkpoint`, checkpoints when the dirty pages exceed
    /// `max_dirty_pages` or the log passes half its capacity; with `flusher=pelley`, writes
    /// back the oldest dirty pages every round ([`oldest_first`]).
    fn flusher(&self) {
        let round = match self.flusher {
            Flusher::Checkpoint => Duration::from_millis(5),
            Flusher::Pelley => oldest_first::ROUND,
        };
        loop {
            {
                let mut stop = self.stop.lock();
                if *stop {
                    return;
                }
                self.wake.wait_for(&mut stop, round);
                if *stop {
                    return;
                }
            }
            if self.flusher == Flusher::Pelley {
                if self.flush_oldest().is_err() {
                    return;
                }
                continue;
            }
            let (used, capacity) = self.log.most_used();
            let log_busy = used > capacity / 2;
            let lines = self.staging.dirty().map_or(0, pmem::DirtyLines::count);
            // Cheap test first: fewer dirty lines than pages allowed means few enough pages.
            let too_dirty = self.max_dirty_pages > 0
                && lines > self.max_dirty_pages
                && dirty_pages(&self.staging).len() as u64 > self.max_dirty_pages;
            if (log_busy || too_dirty) && self.checkpoint().is_err() {
                return;
            }
        }
    }
}

impl Gate for Shared {
    /// Checkpoints first if the log is nearly full (appends inside an operation cannot wait).
    fn enter(&self) -> Result<crate::gated::GateRead<'_>> {
        if let Some(e) = self.failed_error() {
            return Err(e);
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
        ];
        self.shared.log.activity(&mut v);
        // `flusher=pelley`'s rounds, and the most dirty pages one saw (0 with checkpoints).
        v.push(("flush_rounds", get(&s.flush_rounds)));
        v.push(("dirty_pages_peak", get(&s.dirty_pages_peak)));
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

/// What opening `region` would do, on a private copy: the image after redo, as `inplace` would
/// recover it. `outer` is the superblock's inspection of the whole region.
pub fn inspect(region: &Region, outer: crate::Inspection) -> Result<crate::Inspection> {
    crate::staging::require_backed(region, outer.page_count)?;
    let (capacity, base_page) = read_control(region, outer.page_count)?;
    let image_bytes = page_offset(outer.page_count - base_page);
    let image = Region::dram_copy(
        region.read(page_offset(base_page), image_bytes as usize),
        &RegionOptions::default(),
    )?;
    let log_area = log_area();
    if let Some(dc) = dlog::read_layout(region, control(0), capacity)? {
        let rec =
            dlog::recover(region, &image, control(0), log_area, dc, image_bytes, false, None)?;
        let mut outer = crate::staging::inspect_image(outer, &image, rec.redone)?;
        outer.verdict += &format!(
            "; {} log records in {} logs ({}) to redo, {} above the GSN horizon {}",
            rec.redone,
            rec.ends.len(),
            dc.layout,
            rec.retired,
            rec.persisted_horizon
        );
        outer.log = Some(crate::LogInspection {
            layout: dc.layout.to_string(),
            logs: dc.layout.logs(),
            cache: dc.cache.name().into(),
            log_bytes: capacity,
            per_log_bytes: dc.per_log_bytes,
            horizon: Some(rec.persisted_horizon),
            redo_points: rec.redo.points.clone(),
            ends: rec.ends.clone(),
            records_to_redo: rec.redone,
            records_above_horizon: rec.retired,
        });
        return Ok(outer);
    }
    let redo_from = region.read_u64(control(C_REDO));
    let (end, records) = log::scan(region, log_area, capacity, redo_from, image_bytes, |r| {
        image.write(r.offset, r.bytes)
    })?;
    let mut outer = crate::staging::inspect_image(outer, &image, records)?;
    outer.verdict += &format!("; {records} log records ({} KiB) to redo", (end - redo_from) >> 10);
    outer.log = Some(crate::LogInspection {
        layout: LogLayout::Central.to_string(),
        logs: 1,
        cache: Cache::Volatile.name().into(),
        log_bytes: capacity,
        per_log_bytes: capacity,
        horizon: None,
        redo_points: vec![redo_from],
        ends: vec![end],
        records_to_redo: records,
        records_above_horizon: 0,
    });
    Ok(outer)
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_runs_are_the_runs_of_set_bits() {
        assert_eq!(super::line_runs(0), vec![]);
        assert_eq!(super::line_runs(1), vec![(0, 1)]);
        assert_eq!(super::line_runs(0b0111_0110), vec![(1, 2), (4, 3)]);
        assert_eq!(super::line_runs(u128::MAX), vec![(0, 128)]);
        assert_eq!(super::line_runs(1 << 127 | 1 << 126 | 1), vec![(0, 1), (126, 2)]);
    }
}

//! The database-wide batch undo log of NVRAM Group Commit and the batch persist — Pelley et
//! al., VLDB 2014, §3.2 (*NVRAM Group Commit*); thesis §4.3.2 (concurrent batch persist).
//! Where a batch becomes durable: [`BatchLog::persist`], its fourth barrier.
//!
//! Layout in the NVRAM region (`docs/format.md`, "group"):
//! ```text
//! page 2, line 0   control: [0] state (0, or the id of the batch whose log is valid)
//!                  [8] entries  [16] crc32c of the entries' offsets and lines (with the id)
//!                  [24] capacity in lines  [32] base page of the database image
//!                  [40] magic "NVMDBgcl"  [48] crc32c of bytes 24..48
//! pages 3 ..       offsets: capacity x u64 (image offset of each logged line)
//! then             lines: capacity x 64 bytes (their pre-batch contents)
//! base page ..     the database image (an `inplace`-format database)
//! ```
//!
//! **Batch persist**, four barriers whatever the batch's size: (1) copy the pre-batch contents
//! of every dirty line (still what NVRAM holds) into the log, persist; (2) state := batch id,
//! persist — the log is valid; (3) copy the staged lines into the image, persist; (4) state :=
//! 0, persist — the batch is durable. **Recovery invariant**: while the state names a batch, its
//! log holds the pre-batch contents of every line the batch may have changed, so copying the
//! log back restores the image of the previous batch.

use crate::Fault;
use pmem::dirty::DirtyLines;
use pmem::{Region, CACHE_LINE};
use storage::format::{get_u64, page_offset, PageId, PAGE_SIZE_U64};
use storage::{DbError, Result};

pub(crate) const CONTROL_PAGE: PageId = 2;
pub(crate) const FIRST_LOG_PAGE: PageId = 3;
const MAGIC: u64 = u64::from_le_bytes(*b"NVMDBgcl");

const C_STATE: u64 = 0;
const C_ENTRIES: u64 = 8;
const C_CRC: u64 = 16;
const C_CAPACITY: u64 = 24;
const C_BASE: u64 = 32;
const C_MAGIC: u64 = 40;
const C_PARAMS_CRC: u64 = 48;
const LINE: usize = CACHE_LINE as usize;

/// Largest log the format accepts (2^26 lines = 4 GiB of staged lines).
pub(crate) const MAX_CAPACITY_LINES: u64 = 1 << 26;

/// Test-only protocol violations of the batch persist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchFault {
    /// No barrier between writing the log and marking it valid.
    SkipLogBarrier,
    /// Copy the staged lines in place before the log is written.
    CopyBeforeLog,
    /// Report the batch durable before its last barrier.
    AckEarly,
}

impl BatchFault {
    pub(crate) fn of(fault: Option<Fault>) -> Option<BatchFault> {
        match fault? {
            Fault::BatchSkipLogBarrier => Some(BatchFault::SkipLogBarrier),
            Fault::BatchCopyBeforeLog => Some(BatchFault::CopyBeforeLog),
            Fault::BatchAckEarly => Some(BatchFault::AckEarly),
            _ => None,
        }
    }
}

/// Where the log lives, fixed at format time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogLayout {
    pub capacity_lines: u64,
    pub base_page: PageId,
}

impl LogLayout {
    pub fn for_capacity(capacity_lines: u64) -> LogLayout {
        let offsets_pages = (capacity_lines * 8).div_ceil(PAGE_SIZE_U64);
        let lines_pages = (capacity_lines * CACHE_LINE).div_ceil(PAGE_SIZE_U64);
        LogLayout { capacity_lines, base_page: FIRST_LOG_PAGE + offsets_pages + lines_pages }
    }

    fn offsets_at(&self) -> u64 {
        page_offset(FIRST_LOG_PAGE)
    }

    fn lines_at(&self) -> u64 {
        page_offset(FIRST_LOG_PAGE + (self.capacity_lines * 8).div_ceil(PAGE_SIZE_U64))
    }

    pub fn base(&self) -> u64 {
        page_offset(self.base_page)
    }
}

/// What recovery did with the log.
pub(crate) struct Restored {
    pub batch: u64,
    pub lines: u64,
}

pub(crate) struct BatchLog {
    nvram: Region,
    pub layout: LogLayout,
    fault: Option<BatchFault>,
}

fn control(field: u64) -> u64 {
    page_offset(CONTROL_PAGE) + field
}

fn params_crc(capacity_lines: u64, base_page: u64) -> u64 {
    crate::staging::params_crc(capacity_lines, base_page, MAGIC)
}

impl BatchLog {
    /// Writes an empty log's control line (persisted). Part of the region's format, before the
    /// superblock is published.
    pub fn format(nvram: &Region, layout: LogLayout) {
        let mut line = [0u8; 56];
        line[C_CAPACITY as usize..][..8].copy_from_slice(&layout.capacity_lines.to_le_bytes());
        line[C_BASE as usize..][..8].copy_from_slice(&layout.base_page.to_le_bytes());
        line[C_MAGIC as usize..][..8].copy_from_slice(&MAGIC.to_le_bytes());
        let crc = params_crc(layout.capacity_lines, layout.base_page);
        line[C_PARAMS_CRC as usize..][..8].copy_from_slice(&crc.to_le_bytes());
        nvram.write(control(0), &line);
        nvram.persist(control(0), line.len() as u64);
    }

    /// Reads and validates the control line of a formatted region of `pages` pages.
    pub fn open(nvram: &Region, pages: u64, fault: Option<Fault>) -> Result<BatchLog> {
        let c = nvram.read(control(0), 56);
        let bad = |why: &str| DbError::Corrupt(format!("group batch log control line: {why}"));
        if get_u64(c, C_MAGIC as usize) != MAGIC {
            return Err(bad("bad magic"));
        }
        let capacity = get_u64(c, C_CAPACITY as usize);
        let base = get_u64(c, C_BASE as usize);
        if get_u64(c, C_PARAMS_CRC as usize) != params_crc(capacity, base) {
            return Err(bad("checksum mismatch"));
        }
        if capacity == 0 || capacity > MAX_CAPACITY_LINES {
            return Err(bad(&format!("capacity of {capacity} lines")));
        }
        let layout = LogLayout::for_capacity(capacity);
        if layout.base_page != base || base >= pages {
            return Err(bad(&format!("base page {base} does not fit the log or the region")));
        }
        Ok(BatchLog { nvram: nvram.clone(), layout, fault: BatchFault::of(fault) })
    }

    /// Whether a batch's log is valid (a crash interrupted its persist).
    pub fn valid_batch(&self) -> u64 {
        self.nvram.read_u64(control(C_STATE))
    }

    /// Recovery: if a batch's log is valid, copies its lines back (the batch rolls back) and
    /// invalidates it. `image_bytes`: size of the database image (offsets are validated).
    pub fn restore(&self, image_bytes: u64) -> Result<Option<Restored>> {
        let batch = self.valid_batch();
        if batch == 0 {
            return Ok(None);
        }
        let entries = self.nvram.read_u64(control(C_ENTRIES));
        if entries > self.layout.capacity_lines {
            return Err(DbError::Corrupt(format!(
                "group batch log of batch {batch}: {entries} entries exceed its capacity of {}",
                self.layout.capacity_lines
            )));
        }
        let offsets = self.nvram.read(self.layout.offsets_at(), entries as usize * 8);
        let lines = self.nvram.read(self.layout.lines_at(), entries as usize * LINE);
        if self.nvram.read_u64(control(C_CRC)) != entries_crc(batch, offsets, lines) {
            return Err(DbError::Corrupt(format!(
                "group batch log of batch {batch}: checksum mismatch over {entries} entries"
            )));
        }
        let base = self.layout.base();
        for i in 0..entries as usize {
            let at = get_u64(offsets, i * 8);
            if !at.is_multiple_of(CACHE_LINE) || at >= image_bytes {
                return Err(DbError::Corrupt(format!(
                    "group batch log of batch {batch}: entry {i} names offset {at}"
                )));
            }
        }
        for i in 0..entries as usize {
            let at = base + get_u64(offsets, i * 8);
            self.nvram.write(at, &lines[i * LINE..(i + 1) * LINE]);
            self.nvram.flush(at, CACHE_LINE);
        }
        self.nvram.fence();
        self.nvram.write_u64(control(C_STATE), 0);
        self.nvram.persist(control(C_STATE), 8);
        Ok(Some(Restored { batch, lines: entries }))
    }

    /// Persists batch `batch`: the dirty lines of `staging` (a copy of the image) reach the
    /// image atomically, with `threads` threads sharing the copying. `durable` is called when
    /// the batch may be acknowledged. Clears `dirty` afterwards. The caller has quiesced every
    /// writer of `staging`.
    pub fn persist(
        &self,
        batch: u64,
        staging: &Region,
        dirty: &DirtyLines,
        threads: usize,
        durable: &dyn Fn(),
    ) -> Result<u64> {
        let lines = dirty.lines();
        let n = lines.len() as u64;
        if n == 0 {
            durable();
            return Ok(0);
        }
        if n > self.layout.capacity_lines {
            return Err(DbError::TxnTooLarge(format!(
                "batch {batch} dirtied {n} lines, more than the batch log's {} (staging_bytes)",
                self.layout.capacity_lines
            )));
        }
        debug_assert!(lines.last().is_some_and(|l| (l + 1) * CACHE_LINE <= staging.len()));
        let threads = threads.clamp(1, lines.len().div_ceil(64).max(1));
        if self.fault == Some(BatchFault::CopyBeforeLog) {
            self.parallel(&lines, threads, |part| self.copy_in_place(part, &lines, staging));
        }
        // (1) The log: pre-batch contents (what the image still holds) and their offsets.
        self.parallel(&lines, threads, |part| self.write_log(part, &lines));
        let mut offsets = Vec::with_capacity(lines.len() * 8);
        for l in &lines {
            offsets.extend_from_slice(&(l * CACHE_LINE).to_le_bytes());
        }
        let logged = self.nvram.read(self.layout.lines_at(), lines.len() * LINE);
        let crc = entries_crc(batch, &offsets, logged);
        self.nvram.write(self.layout.offsets_at(), &offsets);
        self.nvram.flush(self.layout.offsets_at(), offsets.len() as u64);
        self.nvram.write_u64(control(C_ENTRIES), n);
        self.nvram.write_u64(control(C_CRC), crc);
        self.nvram.flush(control(C_ENTRIES), 16);
        if self.fault != Some(BatchFault::SkipLogBarrier) {
            self.nvram.fence();
        }
        // (2) The log is valid.
        self.nvram.write_u64(control(C_STATE), batch);
        self.nvram.persist(control(C_STATE), 8);
        // (3) The staged lines, in place.
        if self.fault != Some(BatchFault::CopyBeforeLog) {
            self.parallel(&lines, threads, |part| self.copy_in_place(part, &lines, staging));
        }
        if self.fault == Some(BatchFault::AckEarly) {
            durable();
        }
        // (4) Invalidate: the batch is durable.
        self.nvram.write_u64(control(C_STATE), 0);
        self.nvram.persist(control(C_STATE), 8);
        if self.fault != Some(BatchFault::AckEarly) {
            durable();
        }
        dirty.clear();
        Ok(n)
    }

    /// Runs `work` over `threads` contiguous parts of `lines`, each part's flushes fenced by the
    /// thread that issued them (a fence orders only its own thread's flushes).
    fn parallel(
        &self,
        lines: &[u64],
        threads: usize,
        work: impl Fn(std::ops::Range<usize>) + Sync,
    ) {
        let per = lines.len().div_ceil(threads);
        if threads <= 1 {
            work(0..lines.len());
            self.nvram.fence();
            return;
        }
        std::thread::scope(|s| {
            for t in 0..threads {
                let range = (t * per).min(lines.len())..((t + 1) * per).min(lines.len());
                let work = &work;
                s.spawn(move || {
                    work(range);
                    self.nvram.fence();
                });
            }
        });
    }

    /// Log entries `part`: the image's current contents of those lines.
    fn write_log(&self, part: std::ops::Range<usize>, lines: &[u64]) {
        let base = self.layout.base();
        let at = self.layout.lines_at() + part.start as u64 * CACHE_LINE;
        for (k, l) in lines[part.clone()].iter().enumerate() {
            let before = self.nvram.read(base + l * CACHE_LINE, LINE);
            self.nvram.write(at + k as u64 * CACHE_LINE, before);
        }
        self.nvram.flush(at, part.len() as u64 * CACHE_LINE);
    }

    /// Copies the staged lines `part` into the image.
    fn copy_in_place(&self, part: std::ops::Range<usize>, lines: &[u64], staging: &Region) {
        let base = self.layout.base();
        for l in &lines[part] {
            let at = l * CACHE_LINE;
            self.nvram.write(base + at, staging.read(at, LINE));
            self.nvram.flush(base + at, CACHE_LINE);
        }
    }
}

/// Checksum of a log's entries, bound to the batch id (a stale log cannot pass for another).
fn entries_crc(batch: u64, offsets: &[u8], lines: &[u8]) -> u64 {
    let crc = storage::crc::crc32c(&batch.to_le_bytes());
    let crc = storage::crc::crc32c_append(crc, offsets);
    u64::from(storage::crc::crc32c_append(crc, lines))
}

#[cfg(test)]
#[path = "batch_boundary_tests.rs"]
mod boundary_tests;

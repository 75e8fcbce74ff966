//! What the VFS stores in a region: the database file (an area written in place, persisted at
//! its `xSync`) and NVWAL's log (Kim et al., ASPLOS 2016): SQLite's WAL frames as differential
//! records (§3.2) in a linked list of heap blocks with free / pending / in-use states (§3.3,
//! Algorithm 1), made durable at the commit frame's sync by lazy, eager or checksum commit (§4.1,
//! §4.2), and recovered by the cases of §4.3.
//!
//! SQLite's view of the WAL is a byte-exact file kept in DRAM (the *shadow*): its writes land
//! there and its reads are served from there. At the WAL's `xSync` the frames written since the
//! last sync become records in NVRAM. At open the shadow is rebuilt from the records, so SQLite's
//! own WAL recovery reads exactly the frames it wrote.
//!
//! Recovery invariant: a record belongs to the log iff it is reachable from the header through
//! in-use blocks, carries the current WAL header's salts and the next frame number, and is
//! followed (within its transaction) by a record whose commit word is set (and, in `cs` mode,
//! whose checksum matches every record of the transaction); nothing after the last such commit
//! record is part of the log, and no block outside the list stays allocated.

use crate::layout::*;
use crate::{DiffMode, Fault, HeapMode, NvwalOptions, SyncMode};
use parking_lot::Mutex;
use pmem::Region;
use std::collections::HashMap;
use storage::{DbError, Result};

mod db_file;
mod recovery;
mod wal;

/// Byte ranges flushed and persisted on their own: the WAL header line.
const LINE: u64 = 64;

/// One record of the log, by frame number.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// Region offset of the record.
    pos: u64,
    /// Index in `Log::blocks` of the block holding it.
    slot: usize,
    pgno: u32,
    bytes: u64,
}

/// What recovery found, for the engine's report and the tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFacts {
    pub frames_recovered: u64,
    pub commits_recovered: u64,
    /// Records after the last valid commit that were dropped.
    pub records_dropped: u64,
    /// Commit records whose checksum did not match their transaction (`cs` torn commits).
    pub torn_commits_by_checksum: u64,
    /// Linked blocks that were not in use (paper §4.3 case 2): the link was cut.
    pub links_cut: u64,
    /// Pending or unreachable in-use blocks returned to the free state (§4.3 case 1).
    pub blocks_reclaimed: u64,
    /// Blocks after the recovered log's end that were freed.
    pub tail_blocks_freed: u64,
}

/// Volatile state of the log.
struct Log {
    /// 0 until a valid WAL header is known.
    page_bytes: u32,
    shadow: Vec<u8>,
    records: Vec<Rec>,
    /// Frames covered by a persisted commit mark.
    committed: usize,
    last_of_page: HashMap<u32, u32>,
    /// Linked blocks, in list order.
    blocks: Vec<u32>,
    tail_slot: usize,
    tail_off: u64,
    /// Free blocks (popped from the end: lowest index first).
    free: Vec<u32>,
    header_dirty: bool,
    /// The current WAL generation's epoch ([`H_WAL_EPOCH`]).
    epoch: u32,
    /// `cs` mode: record ranges written but never flushed (made durable by `sync_all`).
    unflushed: Vec<(u64, u64)>,
    /// `cs` mode: crc32c of the records of the transaction being written.
    txn_crc: u32,
    commits: u64,
    durable_commits: u64,
}

/// Counters of what the log did (bytes stored into records, blocks allocated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounters {
    pub records: u64,
    pub record_bytes: u64,
    pub page_bytes_full: u64,
    pub blocks_allocated: u64,
    pub commits: u64,
}

struct Db {
    len: u64,
    persisted_len: u64,
    dirty: Vec<(u64, u64)>,
}

/// Most dirty ranges of the database file kept before they are flushed early (without a
/// fence: the sync still fences them).
const MAX_DIRTY_RANGES: usize = 1 << 16;

/// One region's database file and log.
pub struct Store {
    region: Region,
    layout: Layout,
    options: NvwalOptions,
    log: Mutex<Log>,
    db: Mutex<Db>,
    counters: Mutex<LogCounters>,
    facts: RecoveryFacts,
    formatted_now: bool,
}

fn corrupt(m: String) -> DbError {
    DbError::Corrupt(format!("sqlite-nvwal: {m}"))
}

impl Store {
    /// Opens the region: formats a blank one (or one whose format never finished), recovers
    /// the log of a formatted one.
    pub fn open(region: Region, options: &NvwalOptions) -> Result<Store> {
        options.validate()?;
        // The file's length, not the mapping's: a growable mapping (`bench` maps half the free
        // disk) is longer than the file, differs from one open to the next, and its tail is not
        // backed. The store never grows its file, so the geometry recorded in the header at
        // format time is what every later open reads, whatever the mapping.
        let len = region.backed_len();
        if len < HEADER_BYTES * 2 {
            // Too small to format is the size's fault; an existing file this short with
            // something in it was cut.
            if region.created() || region.read(0, len as usize).iter().all(|b| *b == 0) {
                return Err(DbError::RegionFull(format!("sqlite-nvwal: region of {len} bytes")));
            }
            return Err(corrupt(format!(
                "region file of {len} bytes is shorter than its header (truncated?)"
            )));
        }
        let magic = region.read_u64(H_MAGIC);
        let (layout, formatted_now) = if magic == MAGIC {
            let geometry = region.read(0, 64).to_vec();
            let layout = Layout::decode(&geometry, region.read_u64(H_GEOMETRY_CRC), len)?;
            match unseal(region.read_u64(H_FORMATTED), SEAL_CREATED, 0) {
                Some(1) => (layout, false),
                Some(0) => {
                    // A crash while the database was being created: start again.
                    format(&region, &layout);
                    (layout, true)
                }
                // Only a sealed 0 or 1 is ever written: anything else (a flipped bit, a zeroed
                // word) is damage, and taking it for "not created yet" would format over the
                // database (found by `nvmdb fuzz --engine sqlite-nvwal --seed 11 --case 423`).
                _ => {
                    return Err(corrupt(format!(
                        "the header's created flag is damaged (word {:#x}); refusing to format \
                         over the database",
                        region.read_u64(H_FORMATTED)
                    )))
                }
            }
        } else if magic == FORMATTING_MAGIC || blank_header_over_blank_region(&region)? {
            // Blank, or a format that a crash cut short (nothing but the header and the block
            // table was written, and no database exists yet): format it (again).
            let log_bytes = options.log_bytes.unwrap_or((len / 2).clamp(4 << 20, 64 << 20));
            let layout = Layout::plan(len, log_bytes, options.block_bytes)?;
            format(&region, &layout);
            (layout, true)
        } else {
            return Err(DbError::Format(
                "sqlite-nvwal: the region holds something else (no NVWAL header); use a blank \
                 region"
                    .into(),
            ));
        };
        let Some(db_len) = unseal_len(region.read_u64(H_DB_LEN)) else {
            return Err(corrupt(format!(
                "the header's database length word {:#x} is damaged",
                region.read_u64(H_DB_LEN)
            )));
        };
        if db_len > layout.db_cap {
            return Err(corrupt(format!("database length {db_len} > capacity {}", layout.db_cap)));
        }
        let mut store = Store {
            region,
            layout,
            options: options.clone(),
            log: Mutex::new(Log::empty()),
            db: Mutex::new(Db { len: db_len, persisted_len: db_len, dirty: Vec::new() }),
            counters: Mutex::new(LogCounters::default()),
            facts: RecoveryFacts::default(),
            formatted_now,
        };
        let (log, facts) = store.recover()?;
        store.log = Mutex::new(log);
        store.facts = facts;
        store.verify_db_chunks()?;
        Ok(store)
    }

    pub fn region(&self) -> &Region {
        &self.region
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn formatted_now(&self) -> bool {
        self.formatted_now
    }

    pub fn facts(&self) -> &RecoveryFacts {
        &self.facts
    }

    pub fn counters(&self) -> LogCounters {
        *self.counters.lock()
    }

    pub fn options(&self) -> &NvwalOptions {
        &self.options
    }

    /// Marks the database created (its WAL mode and schema are durable in the log).
    pub fn mark_formatted(&self) {
        self.region.write_u64(H_FORMATTED, seal(SEAL_CREATED, 0, 1));
        self.region.persist(H_FORMATTED, 8);
    }

    /// The shadow WAL (for tests: what SQLite reads).
    pub fn wal_image(&self) -> Vec<u8> {
        self.log.lock().shadow.clone()
    }

    /// Frames covered by a persisted commit mark.
    pub fn committed_frames(&self) -> usize {
        self.log.lock().committed
    }

    /// Blocks in the list, and blocks free (for tests).
    pub fn heap_census(&self) -> Result<(usize, usize, usize)> {
        let log = self.log.lock();
        let mut states = [0usize; 3];
        for b in 0..self.layout.block_count as u32 {
            states[self.state(b)? as usize] += 1;
        }
        if states[BLOCK_IN_USE as usize] != log.blocks.len() {
            return Err(corrupt(format!(
                "{} blocks in use, {} in the list",
                states[BLOCK_IN_USE as usize],
                log.blocks.len()
            )));
        }
        Ok((states[BLOCK_FREE as usize], states[BLOCK_PENDING as usize], log.blocks.len()))
    }
}

/// The sealed checksum word of a WAL header and its epoch.
pub(crate) fn wal_header_seal(header: &[u8], epoch: u32) -> u64 {
    seal(
        SEAL_WAL_HEADER,
        0,
        storage::crc::crc32c_append(storage::crc::crc32c(header), &epoch.to_le_bytes()),
    )
}

/// Tag of a `cs`-mode commit word (the checksum in its high half).
pub const COMMIT_TAG_CS: u64 = 0x4E57_4353;

impl Log {
    fn empty() -> Log {
        Log {
            page_bytes: 0,
            shadow: Vec::new(),
            records: Vec::new(),
            committed: 0,
            last_of_page: HashMap::new(),
            blocks: Vec::new(),
            tail_slot: 0,
            tail_off: 0,
            free: Vec::new(),
            header_dirty: false,
            epoch: 0,
            unflushed: Vec::new(),
            txn_crc: 0,
            commits: 0,
            durable_commits: 0,
        }
    }
}

/// Whether the header is all zero, and then whether the rest of the region is too (it is
/// formatted). A zero header over data is damage (the first 4 KiB overwritten): formatting it
/// would silently drop the database, so it is `Corrupt`. A region this open created is known
/// to be blank without a scan.
fn blank_header_over_blank_region(region: &Region) -> Result<bool> {
    if region.read(0, HEADER_BYTES as usize).iter().any(|b| *b != 0) {
        return Ok(false);
    }
    if region.created() || storage::format::region_is_blank(region) {
        return Ok(true);
    }
    Err(corrupt(
        "the header is zero but the region holds data (its first 4 KiB were overwritten?); \
         refusing to format over it"
            .into(),
    ))
}

/// Writes a fresh header (geometry, empty log, empty database) and a free block table. Order:
/// [`FORMATTING_MAGIC`] persisted first, then the rest persisted, then [`MAGIC`] persisted, so
/// a crash at any point leaves either a blank region, one marked as being formatted, or a
/// whole header (found by `crashtest` load crashes: the magic persisted without the geometry's
/// checksum, or header lines without the magic, and the region no longer opened).
fn format(region: &Region, layout: &Layout) {
    region.write_u64(H_MAGIC, FORMATTING_MAGIC);
    region.write_u64(H_FORMATTED, seal(SEAL_CREATED, 0, 0));
    region.flush(H_MAGIC, 8);
    region.flush(H_FORMATTED, 8);
    region.fence();
    let geometry = layout.geometry_bytes();
    region.write(8, &geometry[8..]);
    region.write_u64(H_GEOMETRY_CRC, u64::from(storage::crc::crc32c(&geometry)));
    region.write_u64(H_DB_LEN, seal_len(0));
    region.write_u64(H_FIRST_BLOCK, seal(SEAL_NEXT, HEADER_LINK, 0));
    region.write(H_WAL_HEADER, &[0u8; WAL_HEADER_BYTES]);
    region.write_u64(H_WAL_CRC, wal_header_seal(&[0u8; WAL_HEADER_BYTES], 0));
    region.write_u64(H_WAL_EPOCH, 0);
    // Every entry sealed free with no successor (the chunk table needs nothing: a chunk's entry
    // is written when the database file first reaches it).
    let mut table = vec![0u8; (layout.block_count * META_ENTRY_BYTES) as usize];
    for (b, entry) in table.chunks_exact_mut(META_ENTRY_BYTES as usize).enumerate() {
        entry[..8].copy_from_slice(&seal(SEAL_STATE, b as u32, BLOCK_FREE as u32).to_le_bytes());
        entry[8..].copy_from_slice(&seal(SEAL_NEXT, b as u32, 0).to_le_bytes());
    }
    region.write(layout.meta_off, &table);
    region.flush(0, HEADER_BYTES);
    region.flush(layout.meta_off, table.len() as u64);
    region.fence();
    region.write_u64(H_MAGIC, MAGIC);
    region.persist(H_MAGIC, 8);
}

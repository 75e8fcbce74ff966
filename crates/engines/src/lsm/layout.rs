//! `lsm`'s region layout: the control page (fixed at format), and the manifest (catalog, run
//! list, active memtable), double-buffered in two checksummed slots (byte layouts in
//! `docs/format.md`, section *lsm*).
//!
//! Invariant: the manifest slot with the highest generation whose checksum verifies is the
//! database's structure; a new manifest is written to the other slot and is published by its
//! own persist (a torn slot fails its checksum, so the previous generation stays current).

use storage::engine::{MAX_ROW_BYTES, MAX_TABLE_NAME};
use storage::format::{crc, get_u32, get_u64, page_offset, PageId, PAGE_SIZE_U64};
use storage::{DbError, Result, TableSpec};

/// The control page's magic: layout version 2 (tombstone runs, runs in pieces). Regions of
/// version 1 (`NVMDBlsm`: tombstones in row runs at a full row's stride) are refused with a
/// `Format` error.
pub(crate) const CONTROL_MAGIC: u64 = u64::from_le_bytes(*b"NVMDBls2");
const CONTROL_MAGIC_V1: u64 = u64::from_le_bytes(*b"NVMDBlsm");
pub(crate) const MANIFEST_MAGIC: u64 = u64::from_le_bytes(*b"LSMmanif");
/// Pages of one manifest slot.
pub(crate) const MANIFEST_PAGES: u64 = 4;
pub(crate) const MANIFEST_BYTES: usize = (MANIFEST_PAGES * PAGE_SIZE_U64) as usize;
pub(crate) const MAX_TABLES: usize = 63;
pub(crate) const MAX_RUNS: usize = 512;
const MANIFEST_HEADER: usize = 64;
const TABLE_BYTES: usize = 64;
const RUN_BYTES: usize = 32;
const _: () =
    assert!(MANIFEST_HEADER + MAX_TABLES * TABLE_BYTES + MAX_RUNS * RUN_BYTES <= MANIFEST_BYTES);
/// Bytes of one pointer-log slot (`io=nvm`): a commit's record of node pointers.
pub(crate) const LOG_SLOT_BYTES: u64 = 64 * 1024;

/// Offset of the `committed_seq` word in the control page (its own cache line).
pub(crate) const C_COMMITTED: u64 = 512;

/// Where everything is, fixed at format time and stored in the control page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Areas {
    pub control_page: PageId,
    /// `io`: 0 = nvm, 1 = fs.
    pub io_fs: bool,
    pub memtable_bytes: u64,
    pub log_bytes: u64,
    pub page_count: u64,
}

impl Areas {
    pub fn manifest_slot(&self, slot: u64) -> u64 {
        page_offset(self.control_page + 1 + slot * MANIFEST_PAGES)
    }
    pub fn log_base(&self) -> u64 {
        page_offset(self.control_page + 1 + 2 * MANIFEST_PAGES)
    }
    fn log_pages(&self) -> u64 {
        self.log_bytes.div_ceil(PAGE_SIZE_U64)
    }
    fn arena_pages(&self) -> u64 {
        if self.io_fs {
            0
        } else {
            self.memtable_bytes.div_ceil(PAGE_SIZE_U64)
        }
    }
    /// Base of memtable arena 0 or 1 (`io=nvm`).
    pub fn arena_base(&self, arena: u32) -> u64 {
        page_offset(self.control_page + 1 + 2 * MANIFEST_PAGES + self.log_pages())
            + arena as u64 * self.arena_pages() * PAGE_SIZE_U64
    }
    pub fn first_run_page(&self) -> PageId {
        self.control_page + 1 + 2 * MANIFEST_PAGES + self.log_pages() + 2 * self.arena_pages()
    }

    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&CONTROL_MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&(self.io_fs as u64).to_le_bytes());
        b[16..24].copy_from_slice(&self.memtable_bytes.to_le_bytes());
        b[24..32].copy_from_slice(&self.log_bytes.to_le_bytes());
        b[32..40].copy_from_slice(&self.page_count.to_le_bytes());
        b[40..48].copy_from_slice(&self.control_page.to_le_bytes());
        let c = crc(&b[..56]);
        b[56..60].copy_from_slice(&c.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8], control_page: PageId, page_count: u64) -> Result<Areas> {
        let bad = |why: &str| Err(DbError::Corrupt(format!("lsm control page: {why}")));
        if b.len() >= 64 && get_u64(b, 0) == CONTROL_MAGIC_V1 {
            return Err(DbError::Format(
                "lsm: this region has lsm layout version 1 (tombstones at a full row's size), \
                 this build reads version 2; load it again with this build"
                    .into(),
            ));
        }
        if b.len() < 64 || get_u64(b, 0) != CONTROL_MAGIC {
            return bad("bad magic");
        }
        if get_u32(b, 56) != crc(&b[..56]) {
            return bad("checksum mismatch");
        }
        let io = get_u64(b, 8);
        let a = Areas {
            control_page,
            io_fs: io == 1,
            memtable_bytes: get_u64(b, 16),
            log_bytes: get_u64(b, 24),
            page_count: get_u64(b, 32),
        };
        if io > 1 || get_u64(b, 40) != control_page || a.page_count != page_count {
            return bad("fields disagree with the superblock");
        }
        if a.memtable_bytes > 1 << 36 || a.log_bytes > 1 << 38 {
            return bad("area sizes out of range");
        }
        if a.first_run_page() >= page_count {
            return bad("areas overrun the region");
        }
        Ok(a)
    }
}

/// [`RunRef::flags`]: the run holds tombstones only (keys, no rows).
pub(crate) const RUN_TOMBSTONES: u32 = 1;
/// [`RunRef::flags`]: the run is a piece of the same merge or flush as the run before it in
/// its table's list (same age; the pieces of one output hold disjoint keys).
pub(crate) const RUN_JOINS_PREVIOUS: u32 = 2;
const RUN_FLAGS: u32 = RUN_TOMBSTONES | RUN_JOINS_PREVIOUS;

/// One sorted run of one table, as the manifest lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RunRef {
    pub table: u32,
    /// [`RUN_TOMBSTONES`], [`RUN_JOINS_PREVIOUS`].
    pub flags: u32,
    pub first_page: PageId,
    pub pages: u64,
    pub entries: u64,
}

impl RunRef {
    pub fn tombstones(&self) -> bool {
        self.flags & RUN_TOMBSTONES != 0
    }
    pub fn joins_previous(&self) -> bool {
        self.flags & RUN_JOINS_PREVIOUS != 0
    }
}

/// The database's structure: tables, runs (per table, oldest first), and the memtable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub generation: u64,
    /// Every commit with a sequence number up to this one is in the runs (the memtable and the
    /// log hold later ones only).
    pub flushed_seq: u64,
    /// `io=nvm`: which memtable arena is live.
    pub active_arena: u32,
    pub tables: Vec<TableSpec>,
    pub runs: Vec<RunRef>,
}

impl Manifest {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; MANIFEST_BYTES];
        let put64 =
            |b: &mut [u8], at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put64(&mut b, 0, MANIFEST_MAGIC);
        put64(&mut b, 8, self.generation);
        put64(&mut b, 16, self.flushed_seq);
        put32(&mut b, 24, self.active_arena);
        put32(&mut b, 28, self.tables.len() as u32);
        put32(&mut b, 32, self.runs.len() as u32);
        for (i, t) in self.tables.iter().enumerate() {
            let at = MANIFEST_HEADER + i * TABLE_BYTES;
            b[at..at + t.name.len()].copy_from_slice(t.name.as_bytes());
            put32(&mut b, at + 48, t.row_bytes);
            put64(&mut b, at + 56, t.expected_rows);
        }
        for (i, r) in self.runs.iter().enumerate() {
            let at = MANIFEST_HEADER + MAX_TABLES * TABLE_BYTES + i * RUN_BYTES;
            put32(&mut b, at, r.table);
            put32(&mut b, at + 4, r.flags);
            put64(&mut b, at + 8, r.first_page);
            put64(&mut b, at + 16, r.pages);
            put64(&mut b, at + 24, r.entries);
        }
        let c = crc(&b[8..]);
        put32(&mut b, 36, 0);
        b[40..44].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// `Ok(None)`: not a manifest (zero, torn or never written).
    pub fn decode(b: &[u8], areas: &Areas) -> Result<Option<Manifest>> {
        if b.len() < MANIFEST_BYTES || get_u64(b, 0) != MANIFEST_MAGIC {
            return Ok(None);
        }
        let mut body = b[..MANIFEST_BYTES].to_vec();
        body[40..44].fill(0);
        if get_u32(b, 40) != crc(&body[8..]) {
            return Ok(None);
        }
        let bad = |why: String| Err(DbError::Corrupt(format!("lsm manifest: {why}")));
        let tables_n = get_u32(b, 28) as usize;
        let runs_n = get_u32(b, 32) as usize;
        if tables_n > MAX_TABLES || runs_n > MAX_RUNS {
            return bad(format!("{tables_n} tables, {runs_n} runs"));
        }
        let mut m = Manifest {
            generation: get_u64(b, 8),
            flushed_seq: get_u64(b, 16),
            active_arena: get_u32(b, 24),
            ..Default::default()
        };
        if m.active_arena > 1 {
            return bad(format!("active arena {}", m.active_arena));
        }
        for i in 0..tables_n {
            let at = MANIFEST_HEADER + i * TABLE_BYTES;
            let raw = &b[at..at + MAX_TABLE_NAME];
            let end = raw.iter().position(|&c| c == 0).unwrap_or(MAX_TABLE_NAME);
            let Ok(name) = std::str::from_utf8(&raw[..end]) else {
                return bad(format!("table {i}: name is not UTF-8"));
            };
            let row_bytes = get_u32(b, at + 48);
            if name.is_empty() || row_bytes == 0 || row_bytes > MAX_ROW_BYTES {
                return bad(format!("table {i}: name {name:?}, row size {row_bytes}"));
            }
            let expected_rows = get_u64(b, at + 56);
            m.tables.push(TableSpec { name: name.to_string(), row_bytes, expected_rows });
        }
        let first = areas.first_run_page();
        for i in 0..runs_n {
            let at = MANIFEST_HEADER + MAX_TABLES * TABLE_BYTES + i * RUN_BYTES;
            let r = RunRef {
                table: get_u32(b, at),
                flags: get_u32(b, at + 4),
                first_page: get_u64(b, at + 8),
                pages: get_u64(b, at + 16),
                entries: get_u64(b, at + 24),
            };
            let end = r.first_page.checked_add(r.pages);
            if r.table as usize >= tables_n
                || r.first_page < first
                || r.pages == 0
                || end.is_none_or(|e| e > areas.page_count)
                || r.entries == 0
            {
                return bad(format!("run {i} {r:?} outside the run area or its table"));
            }
            let first_of_table = m.runs.last().is_none_or(|p: &RunRef| p.table != r.table);
            if r.flags & !RUN_FLAGS != 0 || (first_of_table && r.joins_previous()) {
                return bad(format!("run {i} {r:?}: flags"));
            }
            if m.runs.iter().any(|p| p.table == r.table) && first_of_table {
                return bad(format!("run {i} {r:?}: its table's runs are not listed together"));
            }
            m.runs.push(r);
        }
        let mut sorted: Vec<_> = m.runs.iter().map(|r| (r.first_page, r.pages)).collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].0 + w[0].1 > w[1].0) {
            return bad("two runs overlap".into());
        }
        Ok(Some(m))
    }
}

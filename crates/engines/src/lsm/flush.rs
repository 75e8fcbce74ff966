//! Flush and compaction of the `lsm` engine: run-space allocation, manifest publication,
//! memtable flushes into runs, and the merge of runs ([`MergeIter`]).
//!
//! **Space** (issue 39: a full region must still take deletes). A flush or merge writes a
//! table's rows and its tombstones as separate runs (a tombstone run holds keys only); each
//! takes one free extent if one is large enough, else several (*pieces*, at most
//! [`MAX_PIECES`], flagged in the manifest as one output: same age, disjoint keys). A merge
//! counts the entries that survive it before it allocates, so its output is sized by what it
//! keeps, not by its inputs. A transaction that inserts or updates rows outside a
//! `FreeingScope` is admitted only while the run area has room to flush the memtable with its
//! rows in it and [`Lsm::reserve_pages`] more ([`Lsm::make_room`]); one that only deletes (or
//! frees, inside the scope) is not checked, and its flushes, like every merge (which frees at
//! least what it takes once published), may use the reserve.

use super::*;
use layout::RUN_JOINS_PREVIOUS;

/// Most extents (pieces) one output of a flush or merge may take: bounds the runs that a
/// fragmented run area adds to the manifest.
pub(crate) const MAX_PIECES: usize = 16;
/// Pages the reserve holds beyond two memtables' worth, for the page rounding of pieces.
const RESERVE_SLACK_PAGES: u64 = 2 * MAX_PIECES as u64;

/// A table whose tombstones are at least 1/this of its run entries is merged whole.
pub(crate) const TOMBSTONE_SHARE: u64 = 4;

/// An extent taken for one piece of an output: where, how many pages, how many entries.
#[derive(Clone, Copy, Debug)]
struct Piece {
    first: u64,
    pages: u64,
    capacity: u64,
}

/// Writes the entries of one kind (rows, or tombstones) of one output into their pieces.
struct PieceWriter<'a> {
    device: &'a Device,
    table: u32,
    row_bytes: u32,
    flush: bool,
    pieces: Vec<Piece>,
    builder: Option<RunBuilder<'a>>,
    done: Vec<RunRef>,
    last_key: Option<u64>,
}

impl<'a> PieceWriter<'a> {
    fn new(lsm: &'a Lsm, table: u32, row_bytes: u32, pieces: Vec<Piece>) -> Self {
        PieceWriter {
            device: &lsm.device,
            table,
            row_bytes,
            flush: lsm.fault != Some(LsmFault::RunBeforePersist),
            pieces,
            builder: None,
            done: Vec::new(),
            last_key: None,
        }
    }

    fn push(&mut self, key: u64, value: Option<&[u8]>) -> Result<()> {
        // Inputs are checked entry by entry, not for order: a damaged run must be an error,
        // not the builder's assertion.
        if self.last_key.is_some_and(|k| k >= key) {
            return Err(DbError::Corrupt(format!(
                "lsm: table {}: a run's keys are out of order at {key}",
                self.table
            )));
        }
        self.last_key = Some(key);
        let piece = self.done.len() + self.builder.is_some() as usize;
        let full = match &self.builder {
            Some(b) => b.entries() == self.pieces[piece - 1].capacity,
            None => true,
        };
        if full {
            self.finish_piece();
            let Some(p) = self.pieces.get(piece) else {
                return Err(DbError::Corrupt(format!(
                    "lsm: table {}: a merge met more entries than it counted",
                    self.table
                )));
            };
            let (t, rb, flush) = (self.table, self.row_bytes, self.flush);
            self.builder = Some(RunBuilder::new(self.device, p.first, t, rb, p.capacity, flush));
        }
        if let Some(b) = self.builder.as_mut() {
            b.push(key, value);
        }
        Ok(())
    }

    fn finish_piece(&mut self) {
        if let Some(b) = self.builder.take() {
            let first = self.pieces[self.done.len()].first;
            self.done.push(b.finish(first));
        }
    }

    /// The runs written, and the extents (or their tails) left unused.
    fn finish(mut self) -> (Vec<RunRef>, Vec<(u64, u64)>) {
        self.finish_piece();
        let mut unused = Vec::new();
        for (i, p) in self.pieces.iter().enumerate() {
            match self.done.get(i) {
                Some(r) if r.pages < p.pages => unused.push((p.first + r.pages, p.pages - r.pages)),
                Some(_) => {}
                None => unused.push((p.first, p.pages)),
            }
        }
        (self.done, unused)
    }
}

/// Entries of a flush or merge, in key order (`None`: a tombstone).
type Entries<'i> = dyn Iterator<Item = Result<(u64, Option<Vec<u8>>)>> + 'i;

impl Lsm {
    /// Pages of the run area held back for the flushes and merges of deletes: a memtable's
    /// worth, two runs' page rounding per table, and [`RESERVE_SLACK_PAGES`]; at most a
    /// quarter of a small run area.
    pub(crate) fn reserve_pages(&self, st: &State) -> u64 {
        let memtable_pages = self.areas.memtable_bytes.div_ceil(PAGE_SIZE_U64);
        let tables = st.manifest.tables.len() as u64;
        let area = self.areas.page_count - self.areas.first_run_page();
        (memtable_pages + 2 * tables + RESERVE_SLACK_PAGES).min(area / 4)
    }

    /// Pages that flushing the memtable would take, with `more_bytes` added to it: at most its
    /// bytes (a node is larger than its run entry, index and filter share), plus two runs' page
    /// rounding per table.
    fn owed_pages(&self, st: &State, more_bytes: u64) -> u64 {
        let used = match &st.mem {
            Mem::Dram(d) => d.bytes,
            Mem::Nvm(m) => m.used(),
        };
        (used + more_bytes).div_ceil(PAGE_SIZE_U64) + 2 * st.manifest.tables.len() as u64
    }

    /// `Some((free, needed))` pages when the run area lacks room for `bytes` more of the
    /// memtable's flush and the reserve ([`Lsm::make_room`] then acts; a commit checks first,
    /// under its reader word only, and takes the state exclusively only to act).
    pub(super) fn room_lacking(&self, st: &State, bytes: u64) -> Option<(u64, u64)> {
        let free: u64 = st.free.values().sum();
        let need = self.owed_pages(st, bytes) + self.reserve_pages(st);
        (free < need).then_some((free, need))
    }

    /// Admits `bytes` more of inserted or updated rows (outside a `FreeingScope`) into the
    /// memtable only while the run area keeps the memtable's flush and the reserve free. Short
    /// of that, a memtable holding anything is flushed and the runs compacted first: what it
    /// holds was paid for when it was admitted, and its deletes may free space.
    pub(super) fn make_room(&self, st: &mut State, bytes: u64) -> Result<()> {
        let short = |st: &State| self.room_lacking(st, bytes);
        let Some(mut lack) = short(st) else { return Ok(()) };
        let empty = match &st.mem {
            Mem::Dram(d) => d.map.is_empty(),
            Mem::Nvm(m) => m.used() <= HEAD_BYTES,
        };
        if !empty {
            self.flush_memtable(st)?;
            match short(st) {
                None => return Ok(()),
                Some(l) => lack = l,
            }
        }
        let (free, need) = lack;
        Err(DbError::RegionFull(format!(
            "lsm: {free} pages of runs free, {need} needed to take these rows and keep {} for \
             deletes",
            self.reserve_pages(st)
        )))
    }

    /// Takes extents for `entries` entries of `row_bytes` (0: tombstones): the first extent
    /// that holds them all, else the largest ones (at most [`MAX_PIECES`]), growing the
    /// region's file if needed. Takes nothing on error.
    fn alloc_pieces(&self, st: &mut State, entries: u64, row_bytes: u32) -> Result<Vec<Piece>> {
        if entries == 0 {
            return Ok(Vec::new());
        }
        let need = run::pages_for(entries, row_bytes);
        let free: u64 = st.free.values().sum();
        let full = |why: String| {
            Err(DbError::RegionFull(format!("lsm: no room for a run of {need} pages ({why})")))
        };
        if free < need {
            return full(format!("{free} pages free"));
        }
        let pieces = match st.free.iter().find(|(_, &len)| len >= need) {
            Some((&first, _)) => vec![Piece { first, pages: need, capacity: entries }],
            None => {
                let mut extents: Vec<(u64, u64)> = st.free.iter().map(|(&f, &l)| (f, l)).collect();
                extents.sort_unstable_by_key(|&(f, len)| (std::cmp::Reverse(len), f));
                let mut pieces = Vec::new();
                let mut left = entries;
                for (first, len) in extents.into_iter().take(MAX_PIECES) {
                    let capacity = run::capacity_of(len, row_bytes).min(left);
                    if capacity == 0 {
                        break;
                    }
                    let pages = run::pages_for(capacity, row_bytes);
                    pieces.push(Piece { first, pages, capacity });
                    left -= capacity;
                    if left == 0 {
                        break;
                    }
                }
                if left > 0 {
                    return full(format!(
                        "{free} pages free in {} extents, too scattered",
                        st.free.len()
                    ));
                }
                pieces
            }
        };
        for (i, p) in pieces.iter().enumerate() {
            if let Err(e) = self.region.ensure_backed(page_offset(p.first + p.pages)) {
                for q in &pieces[..i] {
                    Self::release(st, q.first, q.pages);
                }
                return Err(e.into());
            }
            let len = st.free.remove(&p.first).unwrap_or(p.pages);
            if len > p.pages {
                st.free.insert(p.first + p.pages, len - p.pages);
            }
        }
        Ok(pieces)
    }

    pub(super) fn release(st: &mut State, first: u64, pages: u64) {
        let mut first = first;
        let mut pages = pages;
        if let Some((&p, &l)) = st.free.range(..first).next_back() {
            if p + l == first {
                st.free.remove(&p);
                first = p;
                pages += l;
            }
        }
        if let Some(&l) = st.free.get(&(first + pages)) {
            st.free.remove(&(first + pages));
            pages += l;
        }
        st.free.insert(first, pages);
    }

    /// Writes the manifest for `st`'s tables and runs to the other slot and persists it.
    pub(super) fn publish(&self, st: &mut State, runs: &[Vec<Run>]) -> Result<()> {
        let mut m = st.manifest.clone();
        m.generation += 1;
        m.runs = runs.iter().flatten().map(|r| r.r).collect();
        if m.runs.len() > layout::MAX_RUNS {
            return Err(DbError::RegionFull(format!(
                "lsm: {} runs exceed the manifest's {}",
                m.runs.len(),
                layout::MAX_RUNS
            )));
        }
        let slot = 1 - st.slot;
        let at = self.areas.manifest_slot(slot);
        let b = m.encode();
        self.device.write(at, &b);
        self.device.flush(at, b.len() as u64);
        self.device.fence();
        self.device.check()?;
        st.manifest = m;
        st.slot = slot;
        self.stats.manifests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The newest entry of each key in the memtable, per table, in key order.
    fn memtable_entries(&self, st: &State) -> Result<Vec<TableRows>> {
        let tables = &st.manifest.tables;
        let mut out: Vec<TableRows> = vec![Vec::new(); tables.len()];
        match &st.mem {
            Mem::Dram(d) => {
                for (&(t, k), v) in &d.map {
                    out[t as usize].push((k, v.as_ref().map(|v| v.to_vec())));
                }
            }
            Mem::Nvm(m) => {
                let mut cur = m.first(&self.region, tables)?;
                while let Some(n) = cur {
                    let v = m.value(&self.region, tables, &n)?.map(|v| v.to_vec());
                    out[n.table as usize].push((n.key, v));
                    cur = m.next_key(&self.region, tables, &n)?;
                }
            }
        }
        Ok(out)
    }

    /// Writes one output of `table` (a flush's or a merge's): `rows` rows and `tombstones`
    /// tombstones from `entries`, as a row run and a tombstone run, each in one or more pieces.
    /// Returns the runs opened, in manifest order; flushed, not fenced. Takes nothing on error.
    pub(super) fn write_output(
        &self,
        st: &mut State,
        table: u32,
        entries: &mut Entries<'_>,
        (rows, tombstones): (u64, u64),
    ) -> Result<Vec<Run>> {
        let row_bytes = st.manifest.tables[table as usize].row_bytes;
        let row_pieces = self.alloc_pieces(st, rows, row_bytes)?;
        let tomb_pieces = match self.alloc_pieces(st, tombstones, 0) {
            Ok(p) => p,
            Err(e) => {
                for p in row_pieces {
                    Self::release(st, p.first, p.pages);
                }
                return Err(e);
            }
        };
        let taken: Vec<(u64, u64)> =
            row_pieces.iter().chain(&tomb_pieces).map(|p| (p.first, p.pages)).collect();
        let mut row_writer = PieceWriter::new(self, table, row_bytes, row_pieces);
        let mut tomb_writer = PieceWriter::new(self, table, 0, tomb_pieces);
        let mut write_all = || -> Result<()> {
            for e in &mut *entries {
                match e? {
                    (k, Some(v)) => row_writer.push(k, Some(&v))?,
                    (k, None) => tomb_writer.push(k, None)?,
                }
            }
            Ok(())
        };
        let failed = write_all().err();
        let (mut refs, mut unused) = row_writer.finish();
        let (tomb_refs, tomb_unused) = tomb_writer.finish();
        refs.extend(tomb_refs);
        unused.extend(tomb_unused);
        let mut out = Vec::with_capacity(refs.len());
        let opened = failed.map_or(Ok(()), Err).and_then(|()| {
            for (i, mut r) in refs.into_iter().enumerate() {
                if i > 0 {
                    r.flags |= RUN_JOINS_PREVIOUS;
                }
                out.push(Run::open_for(&self.region, r, row_bytes, self.areas.io_fs)?);
            }
            Ok(())
        });
        if let Err(e) = opened {
            for (first, pages) in taken {
                Self::release(st, first, pages);
            }
            return Err(e);
        }
        for (first, pages) in unused {
            Self::release(st, first, pages);
        }
        let pages: u64 = out.iter().map(|r| r.r.pages).sum();
        self.stats.run_bytes_written.fetch_add(pages * PAGE_SIZE_U64, Ordering::Relaxed);
        Ok(out)
    }

    /// Flushes the memtable into runs (per table, its rows and its tombstones), publishes them
    /// with an empty memtable (`nvm`: the other arena; `fs`: the log truncated), then compacts.
    pub(super) fn flush_memtable(&self, st: &mut State) -> Result<()> {
        let per_table = self.memtable_entries(st)?;
        let mut runs = st.runs.clone();
        let mut new: Vec<Run> = Vec::new();
        for (t, entries) in per_table.into_iter().enumerate() {
            if entries.is_empty() {
                continue;
            }
            let tombstones = entries.iter().filter(|(_, v)| v.is_none()).count() as u64;
            let counts = (entries.len() as u64 - tombstones, tombstones);
            let mut it = entries.into_iter().map(Ok);
            match self.write_output(st, t as u32, &mut it, counts) {
                Ok(rs) => {
                    runs[t].extend(rs.iter().cloned());
                    new.extend(rs);
                }
                Err(e) => {
                    for r in new {
                        Self::release(st, r.r.first_page, r.r.pages);
                    }
                    return Err(e);
                }
            }
        }
        let other = 1 - st.manifest.active_arena;
        if let Mem::Nvm(_) = st.mem {
            NvmMem::format(&self.region, self.areas.arena_base(other));
        }
        if self.fault != Some(LsmFault::RunBeforePersist) {
            self.device.fence();
        }
        let saved = st.manifest.clone();
        st.manifest.flushed_seq = *st.committed_seq.get_mut();
        if let Mem::Nvm(_) = st.mem {
            st.manifest.active_arena = other;
        }
        if let Err(e) = self.publish(st, &runs) {
            st.manifest = saved;
            for r in new {
                Self::release(st, r.r.first_page, r.r.pages);
            }
            return Err(e);
        }
        st.runs = runs;
        self.persist_late(&new);
        st.mem = match st.mem {
            Mem::Dram(_) => Mem::Dram(DramMem::default()),
            Mem::Nvm(ref m) => Mem::Nvm(NvmMem::new(
                self.areas.arena_base(other),
                self.areas.memtable_bytes,
                HEAD_BYTES,
                m.checksums,
            )),
        };
        *st.log_end.get_mut() = 0;
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        let mut tables: Vec<u32> = new.iter().map(|r| r.r.table).collect();
        tables.dedup();
        for t in tables {
            // A compaction that cannot get space leaves the runs as they are: reads stay
            // correct, and the next flush tries again.
            if let Err(e) = self.compact(st, t) {
                if !matches!(e, DbError::RegionFull(_)) {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Fault `lsm-run-before-persist`: the runs' contents are persisted only now, after the
    /// manifest that names them.
    fn persist_late(&self, runs: &[Run]) {
        if self.fault == Some(LsmFault::RunBeforePersist) {
            for r in runs {
                self.device.flush(page_offset(r.r.first_page), r.r.pages * PAGE_SIZE_U64);
            }
            self.device.fence();
        }
    }

    /// Which newest outputs of a table the policy merges (index of the oldest one), if any;
    /// `entries` holds each output's entries, oldest first.
    pub(super) fn merge_from(entries: &[u64]) -> Option<usize> {
        let n = entries.len();
        if n < 2 {
            return None;
        }
        let mut k = n - 1;
        let mut acc = entries[k];
        while k > 0 && (entries[k - 1] <= MERGE_RATIO * acc || k + 1 > MAX_RUNS_PER_TABLE) {
            k -= 1;
            acc += entries[k];
        }
        (k < n - 1).then_some(k)
    }

    /// Index in `runs` of the first run of each output (a run and the pieces that join it).
    pub(super) fn outputs(runs: &[Run]) -> Vec<usize> {
        (0..runs.len()).filter(|&i| i == 0 || !runs[i].r.joins_previous()).collect()
    }

    /// Merges the table's newest outputs as the policy says, publishes the result, then frees
    /// the merged-away runs' space. A table whose tombstones are at least
    /// 1/[`TOMBSTONE_SHARE`] of its entries is first merged whole (which drops them and the
    /// rows they hide: the merge that gives a delete's space back). When the region has no
    /// room for a merge's survivors, a merge of fewer (newer) outputs is tried instead.
    pub(super) fn compact(&self, st: &mut State, table: u32) -> Result<()> {
        let runs = &st.runs[table as usize];
        let starts = Self::outputs(runs);
        let ends = starts.iter().skip(1).copied().chain([runs.len()]);
        let counts: Vec<u64> = starts
            .iter()
            .zip(ends)
            .map(|(&s, e)| runs[s..e].iter().map(|r| r.r.entries).sum())
            .collect();
        let total: u64 = counts.iter().sum();
        let tombstones: u64 = runs.iter().filter(|r| r.r.tombstones()).map(|r| r.r.entries).sum();
        let mut candidates = Vec::new();
        if tombstones > 0 && tombstones * TOMBSTONE_SHARE >= total {
            candidates.push(0);
        }
        if let Some(oldest) = Self::merge_from(&counts) {
            candidates.extend(&starts[oldest..starts.len() - 1]);
        }
        candidates.dedup();
        let mut last = None;
        for k in candidates {
            match self.merge(st, table, k) {
                Err(e @ DbError::RegionFull(_)) => last = Some(e),
                other => return other,
            }
        }
        last.map_or(Ok(()), Err)
    }

    /// Merges the runs of `table` from index `k` on into one output.
    pub(super) fn merge(&self, st: &mut State, table: u32, k: usize) -> Result<()> {
        let inputs: Vec<Run> = st.runs[table as usize][k..].to_vec();
        // Only a merge that reaches the oldest run may drop a tombstone: no older version of
        // its key is left for it to hide.
        let drop_tombstones = k == 0;
        let region = self.region.clone();
        let counts = MergeIter::count_survivors(&region, &inputs, drop_tombstones)?;
        let mut runs = st.runs.clone();
        runs[table as usize].truncate(k);
        if self.fault == Some(LsmFault::DropRunsBeforePublish) {
            self.publish(st, &runs)?;
        }
        let mut merge = MergeIter::new(&region, &inputs, drop_tombstones)?;
        let merged = self.write_output(st, table, &mut merge, counts)?;
        if self.fault != Some(LsmFault::RunBeforePersist) {
            self.device.fence();
        }
        runs[table as usize].extend(merged.iter().cloned());
        if let Err(e) = self.publish(st, &runs) {
            for r in merged {
                Self::release(st, r.r.first_page, r.r.pages);
            }
            return Err(e);
        }
        st.runs = runs;
        self.persist_late(&merged);
        for r in inputs {
            Self::release(st, r.r.first_page, r.r.pages);
        }
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Merges runs (oldest first in `inputs`): each key once, from the newest run that has it.
/// Each entry is read (and its checksum checked) once as it comes to the head of its run.
pub(super) struct MergeIter<'a> {
    region: &'a Region,
    runs: &'a [Run],
    pos: Vec<u64>,
    /// The key at each run's position (`None`: the run is done).
    heads: Vec<Option<u64>>,
    drop_tombstones: bool,
    checked: bool,
}

impl<'a> MergeIter<'a> {
    pub fn new(region: &'a Region, runs: &'a [Run], drop_tombstones: bool) -> Result<Self> {
        Self::with_check(region, runs, drop_tombstones, true)
    }

    /// `checked: false` reads keys without checking their entries (counting only: the merge
    /// that writes checks each entry it reads).
    fn with_check(
        region: &'a Region,
        runs: &'a [Run],
        drop_tombstones: bool,
        checked: bool,
    ) -> Result<Self> {
        let mut m = MergeIter {
            region,
            runs,
            pos: vec![0; runs.len()],
            heads: vec![None; runs.len()],
            drop_tombstones,
            checked,
        };
        for i in 0..runs.len() {
            m.load(i)?;
        }
        Ok(m)
    }

    fn load(&mut self, i: usize) -> Result<()> {
        let run = &self.runs[i];
        self.heads[i] = if self.pos[i] >= run.r.entries {
            None
        } else if self.checked {
            Some(run.entry(self.region, self.pos[i])?.0)
        } else {
            Some(run.key_at(self.region, self.pos[i]))
        };
        Ok(())
    }

    /// The rows and the tombstones a merge of `runs` keeps (a first pass over their keys, so
    /// that its output can be sized by them).
    pub fn count_survivors(
        region: &'a Region,
        runs: &'a [Run],
        drop_tombstones: bool,
    ) -> Result<(u64, u64)> {
        let mut m = Self::with_check(region, runs, drop_tombstones, false)?;
        let (mut rows, mut tombstones) = (0, 0);
        while let Some((_, run, _)) = m.next_key()? {
            if m.runs[run].r.tombstones() {
                tombstones += 1;
            } else {
                rows += 1;
            }
        }
        Ok((rows, tombstones))
    }

    /// The next key that survives: its newest run (the last one that has it), and the runs'
    /// positions moved past it.
    fn next_key(&mut self) -> Result<Option<(u64, usize, u64)>> {
        loop {
            let Some(key) = self.heads.iter().flatten().copied().min() else { return Ok(None) };
            let mut winner = (0, 0);
            for i in 0..self.runs.len() {
                if self.heads[i] == Some(key) {
                    // Later runs are newer: on equal keys the later one wins.
                    winner = (i, self.pos[i]);
                    self.pos[i] += 1;
                    self.load(i)?;
                }
            }
            if self.runs[winner.0].r.tombstones() && self.drop_tombstones {
                continue;
            }
            return Ok(Some((key, winner.0, winner.1)));
        }
    }

    fn step(&mut self) -> Result<Option<(u64, Option<Vec<u8>>)>> {
        let Some((key, run, i)) = self.next_key()? else { return Ok(None) };
        let (_, v) = self.runs[run].entry(self.region, i)?;
        Ok(Some((key, v.map(|v| v.to_vec()))))
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<(u64, Option<Vec<u8>>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

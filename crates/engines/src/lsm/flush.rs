//! Flush and compaction of the `lsm` engine: run-space allocation, manifest publication,
//! memtable flushes into runs, and the merge of runs ([`MergeIter`]).

use super::*;

impl Lsm {
    /// Allocates `pages` of the run area (first fit), growing the region's file if needed.
    fn alloc(&self, st: &mut State, pages: u64) -> Result<u64> {
        let Some((&first, &len)) = st.free.iter().find(|(_, &len)| len >= pages) else {
            let free: u64 = st.free.values().sum();
            return Err(DbError::RegionFull(format!(
                "lsm: no free extent of {pages} pages for a run ({free} pages free in all)"
            )));
        };
        self.region.ensure_backed(page_offset(first + pages))?;
        st.free.remove(&first);
        if len > pages {
            st.free.insert(first + pages, len - pages);
        }
        Ok(first)
    }

    fn release(st: &mut State, first: u64, pages: u64) {
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

    /// Writes one run of `entries` for `table`; returns it opened. Flushed, not fenced.
    fn write_run(
        &self,
        st: &mut State,
        table: u32,
        entries: &mut dyn Iterator<Item = Result<(u64, Option<Vec<u8>>)>>,
        capacity: u64,
    ) -> Result<Option<Run>> {
        let row_bytes = st.manifest.tables[table as usize].row_bytes;
        let pages = run::pages_for(capacity, row_bytes);
        let first = self.alloc(st, pages)?;
        let flush = self.fault != Some(LsmFault::RunBeforePersist);
        let mut b = RunBuilder::new(&self.device, first, table, row_bytes, capacity, flush);
        let mut failed = None;
        for e in entries {
            match e {
                Ok((k, v)) => b.push(k, v.as_deref()),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            Self::release(st, first, pages);
            return Err(e);
        }
        if b.entries() == 0 {
            Self::release(st, first, pages);
            return Ok(None);
        }
        let r = b.finish(first);
        if r.pages < pages {
            Self::release(st, first + r.pages, pages - r.pages);
        }
        self.stats.run_bytes_written.fetch_add(r.pages * PAGE_SIZE_U64, Ordering::Relaxed);
        Ok(Some(Run::open(&self.region, r, row_bytes)?))
    }

    /// Flushes the memtable into one run per table, publishes them with an empty memtable
    /// (`nvm`: the other arena; `fs`: the log truncated), then compacts.
    pub(super) fn flush_memtable(&self, st: &mut State) -> Result<()> {
        let per_table = self.memtable_entries(st)?;
        let mut runs = st.runs.clone();
        let mut new: Vec<Run> = Vec::new();
        for (t, entries) in per_table.into_iter().enumerate() {
            if entries.is_empty() {
                continue;
            }
            let cap = entries.len() as u64;
            let mut it = entries.into_iter().map(Ok);
            match self.write_run(st, t as u32, &mut it, cap) {
                Ok(Some(r)) => {
                    runs[t].push(r.clone());
                    new.push(r);
                }
                Ok(None) => {}
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
        st.manifest.flushed_seq = st.committed_seq;
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
        st.log_end = 0;
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        let tables: Vec<u32> = new.iter().map(|r| r.r.table).collect();
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

    /// Which newest runs of a table the policy merges (index of the oldest one), if any.
    fn merge_from(entries: &[u64]) -> Option<usize> {
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

    /// Merges the table's newest runs as the policy says, publishes the result, then frees the
    /// merged-away runs' space.
    fn compact(&self, st: &mut State, table: u32) -> Result<()> {
        let counts: Vec<u64> = st.runs[table as usize].iter().map(|r| r.r.entries).collect();
        let Some(k) = Self::merge_from(&counts) else { return Ok(()) };
        let inputs: Vec<Run> = st.runs[table as usize][k..].to_vec();
        let drop_tombstones = k == 0;
        let capacity: u64 = counts[k..].iter().sum();
        let mut runs = st.runs.clone();
        runs[table as usize].truncate(k);
        if self.fault == Some(LsmFault::DropRunsBeforePublish) {
            self.publish(st, &runs)?;
        }
        let region = self.region.clone();
        let mut merge = MergeIter::new(&region, &inputs, drop_tombstones);
        let merged = self.write_run(st, table, &mut merge, capacity)?;
        if self.fault != Some(LsmFault::RunBeforePersist) {
            self.device.fence();
        }
        if let Some(r) = merged.clone() {
            runs[table as usize].push(r);
        }
        if let Err(e) = self.publish(st, &runs) {
            if let Some(r) = merged {
                Self::release(st, r.r.first_page, r.r.pages);
            }
            return Err(e);
        }
        st.runs = runs;
        self.persist_late(merged.as_slice());
        for r in inputs {
            Self::release(st, r.r.first_page, r.r.pages);
        }
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Merges runs (oldest first in `inputs`): each key once, from the newest run that has it.
struct MergeIter<'a> {
    region: &'a Region,
    runs: &'a [Run],
    pos: Vec<u64>,
    drop_tombstones: bool,
}

impl<'a> MergeIter<'a> {
    fn new(region: &'a Region, runs: &'a [Run], drop_tombstones: bool) -> Self {
        MergeIter { region, runs, pos: vec![0; runs.len()], drop_tombstones }
    }

    fn step(&mut self) -> Result<Option<(u64, Option<Vec<u8>>)>> {
        loop {
            let mut best: Option<(u64, usize)> = None;
            for (i, run) in self.runs.iter().enumerate() {
                if self.pos[i] < run.r.entries {
                    let (k, _) = run.entry(self.region, self.pos[i])?;
                    // Later runs are newer: on equal keys the later one wins.
                    if best.is_none_or(|(bk, _)| k <= bk) {
                        best = Some((k, i));
                    }
                }
            }
            let Some((key, winner)) = best else { return Ok(None) };
            let (_, v) = self.runs[winner].entry(self.region, self.pos[winner])?;
            let v = v.map(|v| v.to_vec());
            for (i, run) in self.runs.iter().enumerate() {
                if self.pos[i] < run.r.entries && run.entry(self.region, self.pos[i])?.0 == key {
                    self.pos[i] += 1;
                }
            }
            if v.is_none() && self.drop_tombstones {
                continue;
            }
            return Ok(Some((key, v)));
        }
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<(u64, Option<Vec<u8>>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}

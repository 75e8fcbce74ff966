//! The access path: loads, stores, flushes and fences, the persist primitives of Pelley et al.,
//! VLDB 2014, §3.2 (a *persist barrier* is a [`Region::fence`] after the [`Region::flush`]es it
//! orders). Each access checks its range, hands its event to the region's observers (see
//! [`super::observe`]) and reaches the medium: the crash simulator on `sim`, `msync` with
//! `--sync msync`, nothing with durable caches, otherwise the CPU's flush instruction per line.
//!
//! Invariant: no byte outside `[0, len)` of the mapping is ever touched — every access asserts
//! its range before any observer sees it or any byte moves; with no observer attached a store
//! costs its range check, one branch, the copy and the statistics.

use super::observe::Events;
use super::options::SyncMode;
use super::Region;
use crate::flush::{flush_line, line_span, store_fence, FlushKind, LineSpan, CACHE_LINE};
use crate::stats::Counter;
use crate::trace::TraceKind;
use std::sync::atomic::{AtomicU64 as StdAtomicU64, Ordering};

/// What a flush does on this region's medium, decided once at open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WriteBack {
    /// The crash simulator snapshots the lines (`sim`).
    Sim,
    /// Nothing: durable caches (`eadr`), or no flush instruction (`dram`).
    Nothing,
    /// `msync(MS_SYNC)` of the pages (`--sync msync`).
    Msync,
    /// The flush instruction on each line.
    Lines(FlushKind),
}

impl WriteBack {
    pub(super) fn new(sim: bool, eadr: bool, sync: SyncMode, kind: FlushKind) -> WriteBack {
        match (sim, eadr, sync, kind) {
            (true, ..) => WriteBack::Sim,
            (false, true, ..) | (false, false, SyncMode::Cache, FlushKind::None) => {
                WriteBack::Nothing
            }
            (false, false, SyncMode::Msync, _) => WriteBack::Msync,
            (false, false, SyncMode::Cache, kind) => WriteBack::Lines(kind),
        }
    }
}

impl Region {
    /// Refuses an access outside the mapping before anything else happens: the unsafe pointer
    /// arithmetic of every access relies on it, so it stays on in release builds (one compare).
    #[inline(always)]
    fn check(&self, offset: u64, len: u64) {
        let map_len = self.inner.map.len;
        assert!(
            offset.checked_add(len).is_some_and(|end| end <= map_len),
            "region access [{offset}, +{len}) outside region of {map_len} bytes"
        );
        // Past the backed part a growable region's mapping faults (SIGBUS); checking costs an
        // atomic load per access, so only debug builds do.
        debug_assert!(
            offset + len <= self.backed_len(),
            "region access [{offset}, +{len}) beyond the {} backed bytes (ensure_backed first)",
            self.backed_len()
        );
    }

    /// Borrows `len` bytes at `offset`.
    #[inline]
    pub fn read(&self, offset: u64, len: usize) -> &[u8] {
        self.check(offset, len as u64);
        let observers = &self.inner.observers;
        if observers.wants(Events::LOAD) {
            observers.each(Events::LOAD, |o| o.on_load(offset, len as u64));
        }
        // SAFETY: bounds checked above; the mapping outlives `self`.
        unsafe { std::slice::from_raw_parts(self.inner.map.base.add(offset as usize), len) }
    }

    /// Borrows `len` bytes at `offset` of which the caller reads only some lines, and charges
    /// those itself with [`Region::load`]: a page an operation binary-searches. The CPU-cache
    /// read model does not charge the borrow (the lines a search skips are never loaded); every
    /// other observer of loads sees it as a read.
    #[inline]
    pub fn borrow(&self, offset: u64, len: usize) -> &[u8] {
        self.check(offset, len as u64);
        let observers = &self.inner.observers;
        if observers.wants(Events::BORROW) {
            observers.each(Events::BORROW, |o| o.on_load(offset, len as u64));
        }
        // SAFETY: bounds checked above; the mapping outlives `self`.
        unsafe { std::slice::from_raw_parts(self.inner.map.base.add(offset as usize), len) }
    }

    /// Asks the CPU to start loading the lines of `[offset, offset + len)` into its caches
    /// (`prefetcht0`), so that the misses of reads the caller is about to make overlap instead of
    /// following one another. A hint: it reads nothing, charges no model, is clamped to the
    /// region (never faults: a prefetch of an unbacked line is dropped), and does nothing off
    /// x86-64. At most 64 lines.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let map_len = self.inner.map.len;
            let end = offset.saturating_add(len.min(64 * crate::CACHE_LINE)).min(map_len);
            let mut line = offset - offset % crate::CACHE_LINE;
            while line < end {
                // SAFETY: `line < map_len`: the address is inside the mapping, and a prefetch
                // never faults nor changes memory.
                unsafe {
                    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                    _mm_prefetch::<_MM_HINT_T0>(self.inner.map.base.add(line as usize) as *const i8);
                }
                line += crate::CACHE_LINE;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (offset, len);
    }

    /// The lines of `[offset, offset + len)` of a [`Region::borrow`] are loaded: the CPU-cache
    /// read model charges those it misses (without the model, nothing happens).
    #[inline]
    pub fn load(&self, offset: u64, len: u64) {
        if let Some(timing) = &self.inner.timing {
            self.check(offset, len);
            timing.load(offset, len);
        } else if let Some(charged) = self.inner.charged_reads.get() {
            self.check(offset, len);
            charged.model.load(charged.base + offset, len);
        }
    }

    /// Whether reads go through the simulated CPU cache of N-Store's read model
    /// ([`crate::cpucache`]): then [`Region::borrow`]s must be followed by [`Region::load`]s.
    pub fn cpu_cache_on(&self) -> bool {
        self.inner.timing.as_ref().is_some_and(|t| t.cpu_cache_on())
            || self.inner.charged_reads.get().is_some()
    }

    /// Reads an aligned `u64` atomically.
    #[inline]
    pub fn read_u64(&self, offset: u64) -> u64 {
        self.check(offset, 8);
        assert!(offset.is_multiple_of(8), "read_u64 at unaligned offset {offset}");
        let observers = &self.inner.observers;
        if observers.wants(Events::LOAD) {
            observers.each(Events::LOAD, |o| o.on_load(offset, 8));
        }
        // SAFETY: in bounds, 8-aligned (the mapping is page-aligned), and AtomicU64 has the
        // layout of u64.
        let a = unsafe { &*(self.inner.map.base.add(offset as usize) as *const StdAtomicU64) };
        a.load(Ordering::Acquire)
    }

    /// Stores `bytes` at `offset` (into the cache: not yet durable).
    #[inline]
    pub fn write(&self, offset: u64, bytes: &[u8]) {
        self.check(offset, bytes.len() as u64);
        let inner = &*self.inner;
        if inner.observers.wants(Events::STORE | Events::STORED | Events::SIM_MEDIUM) {
            self.write_observed(offset, bytes);
            return;
        }
        // SAFETY: bounds checked; callers serialise writers of the same bytes.
        unsafe { self.copy_in(offset, bytes) };
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, bytes.len() as u64)));
    }

    /// [`Region::write`] with observers or the crash simulator: out of line, so that the plain
    /// store stays small enough to inline.
    #[inline(never)]
    fn write_observed(&self, offset: u64, bytes: &[u8]) {
        let inner = &*self.inner;
        let len = bytes.len() as u64;
        inner.observers.each(Events::STORE, |o| o.on_store(offset, bytes));
        // SAFETY: bounds checked by `write`; callers serialise writers of the same bytes.
        let copy = || unsafe { self.copy_in(offset, bytes) };
        match &inner.sim {
            Some(sim) => sim.store(offset as usize, bytes.len(), self.view(), copy),
            None => copy(),
        }
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, len)));
        inner.observers.each(Events::STORED, |o| o.on_stored(offset, len));
    }

    /// # Safety
    /// `[offset, offset + bytes.len())` is inside the mapping and no other thread stores to it
    /// concurrently.
    #[inline(always)]
    unsafe fn copy_in(&self, offset: u64, bytes: &[u8]) {
        // SAFETY: the caller's contract.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.inner.map.base.add(offset as usize),
                bytes.len(),
            )
        }
    }

    /// Stores an aligned `u64` atomically (8 aligned bytes are the unit of failure atomicity).
    #[inline]
    pub fn write_u64(&self, offset: u64, value: u64) {
        self.check(offset, 8);
        assert!(offset.is_multiple_of(8), "write_u64 at unaligned offset {offset}");
        let inner = &*self.inner;
        if inner.observers.wants(Events::STORE | Events::STORED | Events::SIM_MEDIUM) {
            self.write_u64_observed(offset, value);
            return;
        }
        self.word(offset).store(value, Ordering::Release);
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, 8)));
    }

    #[inline(never)]
    fn write_u64_observed(&self, offset: u64, value: u64) {
        let inner = &*self.inner;
        inner.observers.each(Events::STORE, |o| o.on_store(offset, &value.to_le_bytes()));
        let word = self.word(offset);
        match &inner.sim {
            Some(sim) => {
                sim.store(offset as usize, 8, self.view(), || word.store(value, Ordering::Release))
            }
            None => word.store(value, Ordering::Release),
        }
        inner.stats.add2(Counter::Stores, 1, Some((Counter::BytesWritten, 8)));
        inner.observers.each(Events::STORED, |o| o.on_stored(offset, 8));
    }

    /// The aligned word at `offset`, which the caller checked to be in range and aligned.
    #[inline(always)]
    fn word(&self, offset: u64) -> &StdAtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.inner.map.len);
        // SAFETY: in bounds and 8-aligned (the caller's checks; the mapping is page-aligned);
        // AtomicU64 has the layout of u64.
        unsafe { &*(self.inner.map.base.add(offset as usize) as *const StdAtomicU64) }
    }

    /// Starts writing back the cache lines covering `[offset, offset+len)`. Not durable until
    /// the next [`Region::fence`] of this thread.
    #[inline]
    pub fn flush(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        self.check(offset, len);
        let inner = &*self.inner;
        let span = line_span(offset, len);
        inner.stats.add(Counter::LinesFlushed, span.count);
        if inner.observers.wants(Events::FLUSH) {
            inner.observers.each(Events::FLUSH, |o| o.on_flush(offset, len, span));
        }
        match inner.write_back {
            WriteBack::Sim => {
                if let Some(sim) = &inner.sim {
                    sim.flush(span, self.view());
                }
            }
            WriteBack::Nothing => {}
            WriteBack::Msync => self.msync(offset, len),
            WriteBack::Lines(kind) => self.for_each_line(span, |line| {
                // SAFETY: `for_each_line` passes only lines of `span`, which `check` put inside
                // the mapping; `kind` was validated against CPUID at open.
                unsafe { flush_line(kind, line) }
            }),
        }
    }

    /// The hardware loop of [`Region::flush`]: calls `per_line` with the address of each line
    /// of `span`, in order. A function of its own so that a test can pass a recorder where
    /// `flush` passes the flush instruction, and check the very loop the hardware runs.
    #[inline(always)]
    fn for_each_line(&self, span: LineSpan, mut per_line: impl FnMut(*const u8)) {
        let base = self.inner.map.base;
        debug_assert!(
            (span.first + span.count) * CACHE_LINE
                <= self.inner.map.len.next_multiple_of(CACHE_LINE)
        );
        for line in span.lines() {
            per_line(base.wrapping_add((line * CACHE_LINE) as usize));
        }
    }

    fn msync(&self, offset: u64, len: u64) {
        const PAGE: u64 = 4096;
        let start = offset / PAGE * PAGE;
        let end = (offset + len).div_ceil(PAGE) * PAGE;
        let end = end.min(self.inner.map.len);
        // SAFETY: page-aligned range inside the live mapping.
        let rc = unsafe {
            libc::msync(
                self.inner.map.base.add(start as usize).cast(),
                (end - start) as usize,
                libc::MS_SYNC,
            )
        };
        // A failed msync means the device lost data under us: nothing an engine can repair, and
        // acknowledging later commits would be a lie.
        assert!(rc == 0, "msync failed: {}", std::io::Error::last_os_error());
    }

    /// The persist barrier (Pelley §3.2): completes this thread's earlier flushes before any
    /// later store. Charges the modelled barrier latency.
    #[inline]
    pub fn fence(&self) {
        let inner = &*self.inner;
        inner.stats.add(Counter::Fences, 1);
        let observed = inner.observers.wants(Events::FENCE | Events::FENCED);
        if observed {
            inner.observers.each(Events::FENCE, |o| o.on_fence());
        }
        if let Some(sim) = &inner.sim {
            sim.fence(self.view());
        }
        store_fence();
        if observed {
            inner.observers.each(Events::FENCED, |o| o.on_fenced());
        }
    }

    /// [`Region::flush`] of each `(offset, len)` range (not yet durable: fence after).
    #[inline]
    pub fn flush_ranges(&self, ranges: &[(u64, u64)]) {
        for (offset, len) in ranges {
            self.flush(*offset, *len);
        }
    }

    /// `flush` + `fence`.
    #[inline]
    pub fn persist(&self, offset: u64, len: u64) {
        self.flush(offset, len);
        self.fence();
    }

    /// Opens a store group on the calling thread until the guard drops: the observers that
    /// asked for [`Events::GROUP`] (a redo capture) may hold the group's stores and take them
    /// as one unit when the outermost group closes (`wal` logs them as one log insert). Costs
    /// one branch when no observer asked.
    ///
    /// The caller's promise: no other thread stores to any byte this thread stores to inside
    /// the group before the group closes (its private log, a page it holds latched until after
    /// the guard drops). A store to a word others write too (an allocator's bitmap) must not
    /// fall inside a group: its record could reach a log after another thread's later one.
    #[inline]
    pub fn store_group(&self) -> StoreGroup<'_> {
        let observers = &self.inner.observers;
        if !observers.wants(Events::GROUP) {
            return StoreGroup(None);
        }
        observers.each(Events::GROUP, |o| o.on_group(true));
        StoreGroup(Some(self))
    }

    /// Charges the modelled read latency for `lines` cache lines read from the device.
    #[inline]
    pub fn charge_read(&self, lines: u64) {
        if let Some(timing) = &self.inner.timing {
            timing.charge_read(lines);
        }
    }

    /// Strand persistency's NewStrand, recorded in the trace (no hardware effect today).
    pub fn new_strand(&self) {
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::NewStrand, 0, 0);
        }
    }

    /// An epoch/strand persist barrier recorded in the trace without a hardware fence.
    pub fn strand_barrier(&self) {
        if let Some(t) = &self.inner.tracer {
            t.record(TraceKind::StrandBarrier, 0, 0);
        }
    }

    /// Runs the volatile access `op` (a lock word's swap, a flag's load) and, when tracing,
    /// records it as `kind` (`VolatileLoad` or `VolatileStore`) at process address `addr` in
    /// one step under the trace mutex, so the trace's total order is the order the accesses
    /// took effect. Without a trace it only runs `op`.
    #[inline]
    pub fn trace_volatile<R>(
        &self,
        kind: TraceKind,
        addr: u64,
        len: u64,
        op: impl FnOnce() -> R,
    ) -> R {
        assert!(kind.is_volatile(), "trace_volatile records volatile accesses only, not {kind:?}");
        match &self.inner.tracer {
            Some(t) => t.record_with(kind, addr, len, op),
            None => op(),
        }
    }
}

/// An open store group ([`Region::store_group`]); closes when dropped.
#[must_use = "the group closes when the guard drops"]
pub struct StoreGroup<'r>(Option<&'r Region>);

impl Drop for StoreGroup<'_> {
    fn drop(&mut self) {
        if let Some(region) = self.0 {
            region.inner.observers.each(Events::GROUP, |o| o.on_group(false));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::{Medium, RegionOptions};
    use crate::sim::CrashPolicy;
    use crate::{Events, StoreObserver};
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::Arc;

    /// Bytes in the regions of the flush-line tests: 1024 lines.
    const FLUSH_REGION_BYTES: u64 = 64 << 10;

    /// `(offset, len)` ranges: one byte, exactly one line, straddling two lines, ending exactly
    /// on a line boundary, starting mid-line, large, at the region's ends, and a seeded sweep.
    fn flush_cases() -> Vec<(u64, u64)> {
        let end = FLUSH_REGION_BYTES;
        let mut cases = vec![
            (0, 1),
            (63, 1),
            (64, 1),
            (100, 1),
            (0, 64),
            (64, 64),
            (640, 64),
            (60, 8),
            (63, 2),
            (120, 16),
            (0, 128),
            (32, 96),
            (64, 192),
            (1, 63),
            (33, 31),
            (17, 64),
            (65, 127),
            (5, 4096),
            (0, 4096),
            (4095, 2),
            (100, 40_000),
            (end - 1, 1),
            (end - 64, 64),
            (end - 65, 65),
            (end - 100, 100),
            (0, end),
        ];
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0x5EED);
        for _ in 0..200 {
            let offset = rand::Rng::gen_range(&mut rng, 0..end);
            let max = (end - offset).min(3 * 4096);
            cases.push((offset, rand::Rng::gen_range(&mut rng, 1..=max)));
        }
        cases
    }

    /// The lines holding a byte of `[offset, offset+len)`, found byte by byte.
    fn lines_touched(offset: u64, len: u64) -> Vec<u64> {
        let mut lines: Vec<u64> = (offset..offset + len).map(|b| b / CACHE_LINE).collect();
        lines.dedup();
        lines
    }

    /// The lines `Region::flush`'s hardware loop visits for `[offset, offset+len)`.
    fn hardware_loop_lines(region: &Region, offset: u64, len: u64) -> Vec<u64> {
        let base = region.base_ptr() as usize;
        let mut visited = Vec::new();
        region.for_each_line(line_span(offset, len), |line| {
            let at = line as usize - base;
            assert_eq!(at % CACHE_LINE as usize, 0, "address {at:#x} is not a line start");
            visited.push(at as u64 / CACHE_LINE);
        });
        visited
    }

    /// The lines the crash simulator persists for a flush of `[offset, offset+len)` and a fence
    /// after every byte of the region was stored to.
    fn sim_flushed_lines(offset: u64, len: u64) -> Vec<u64> {
        let region = Region::open(&RegionOptions::new(Medium::Sim, FLUSH_REGION_BYTES)).unwrap();
        region.write(0, &vec![0xff; FLUSH_REGION_BYTES as usize]);
        region.flush(offset, len);
        region.fence();
        let image = region.crash_image(CrashPolicy::Persisted, 0).unwrap();
        let mut persisted = Vec::new();
        for (line, bytes) in image.chunks(CACHE_LINE as usize).enumerate() {
            if bytes.iter().all(|b| *b == 0xff) {
                persisted.push(line as u64);
            } else {
                assert!(bytes.iter().all(|b| *b == 0), "line {line} persisted in part");
            }
        }
        persisted
    }

    #[test]
    fn the_hardware_flush_loop_visits_exactly_the_lines_of_the_range() {
        let region = Region::open(&RegionOptions::new(Medium::Dram, FLUSH_REGION_BYTES)).unwrap();
        for (offset, len) in flush_cases() {
            let expected = lines_touched(offset, len);
            assert_eq!(hardware_loop_lines(&region, offset, len), expected, "[{offset}, +{len})");
            assert_eq!(sim_flushed_lines(offset, len), expected, "sim, [{offset}, +{len})");
        }
    }

    #[test]
    fn statistics_and_wear_count_the_lines_of_the_range() {
        let options = RegionOptions { wear: true, ..RegionOptions::new(Medium::Dram, 4096) };
        for (offset, len) in [(0, 1), (63, 2), (64, 64), (1, 128), (100, 3000), (4095, 1)] {
            let region = Region::open(&options).unwrap();
            region.flush(offset, len);
            let expected = lines_touched(offset, len);
            assert_eq!(region.stats().lines_flushed, expected.len() as u64, "[{offset}, +{len})");
            let worn: Vec<u64> = (region.wear().unwrap().iter().enumerate())
                .filter(|(_, count)| **count > 0)
                .map(|(line, count)| {
                    assert_eq!(*count, 1, "line {line} counted twice");
                    line as u64
                })
                .collect();
            assert_eq!(worn, expected, "[{offset}, +{len})");
        }
    }

    /// Counts every event it is called for.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicU64);

    impl StoreObserver for Count {
        fn events(&self) -> Events {
            Events::LOAD | Events::STORE | Events::STORED | Events::FLUSH
        }
        fn on_load(&self, _: u64, _: u64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn on_store(&self, _: u64, _: &[u8]) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn on_stored(&self, _: u64, _: u64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn on_flush(&self, _: u64, _: u64, _: LineSpan) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One access a test makes.
    type Access = fn(&Region);

    /// Guards the access path's range invariant: an access that ends past the mapping, or whose
    /// end overflows, is refused (a panic, never undefined behaviour) before an observer, the
    /// crash simulator or a byte of the region sees it.
    #[test]
    fn an_out_of_range_access_is_refused_before_anything_sees_it() {
        const LEN: u64 = 4096;
        for medium in [Medium::Dram, Medium::Sim, Medium::Shm] {
            let region = Region::open(&RegionOptions::new(medium, LEN)).unwrap();
            let seen = Arc::new(Count::default());
            assert!(region.add_observer(seen.clone()));
            let before = (region.snapshot(), region.stats());
            let events = region.sim().map(|s| s.events());
            let refused: [(&str, Access); 12] = [
                ("write past the end", |r| r.write(LEN - 4, &[1; 8])),
                ("write at the end", |r| r.write(LEN, &[1])),
                ("write overflowing", |r| r.write(u64::MAX - 2, &[1; 8])),
                ("write_u64 past the end", |r| r.write_u64(LEN, 1)),
                ("write_u64 unaligned", |r| r.write_u64(12, 1)),
                ("write_u64 overflowing", |r| r.write_u64(u64::MAX - 7, 1)),
                ("read past the end", |r| {
                    let _ = r.read(LEN - 1, 2);
                }),
                ("read overflowing", |r| {
                    let _ = r.read(u64::MAX, 1);
                }),
                ("read_u64 past the end", |r| {
                    let _ = r.read_u64(LEN);
                }),
                ("read_u64 unaligned", |r| {
                    let _ = r.read_u64(4);
                }),
                ("flush past the end", |r| r.flush(LEN - 64, 65)),
                ("flush overflowing", |r| r.flush(64, u64::MAX)),
            ];
            for (what, access) in &refused {
                let outcome = catch_unwind(AssertUnwindSafe(|| access(&region)));
                assert!(outcome.is_err(), "{medium}: {what} was not refused");
            }
            assert_eq!(
                seen.0.load(Ordering::Relaxed),
                0,
                "{medium}: an observer saw a refused access"
            );
            assert_eq!(
                (region.snapshot(), region.stats()),
                before,
                "{medium}: a refused access wrote"
            );
            assert_eq!(
                region.sim().map(|s| s.events()),
                events,
                "{medium}: the simulator counted it"
            );
            // The last byte and last word are in range.
            region.write(LEN - 1, &[7]);
            region.write_u64(LEN - 16, 9);
            assert_eq!((region.read(LEN - 1, 1), region.read_u64(LEN - 16)), (&[7u8][..], 9));
            region.persist(LEN - 64, 64);
            assert_eq!(seen.0.load(Ordering::Relaxed), 2 * 2 + 2 + 1);
        }
    }

    #[test]
    fn write_back_follows_the_medium_and_options() {
        use FlushKind::{Clflush, Clwb};
        assert_eq!(WriteBack::new(true, true, SyncMode::Cache, Clwb), WriteBack::Sim);
        assert_eq!(WriteBack::new(false, true, SyncMode::Cache, Clwb), WriteBack::Nothing);
        assert_eq!(
            WriteBack::new(false, false, SyncMode::Cache, FlushKind::None),
            WriteBack::Nothing
        );
        assert_eq!(WriteBack::new(false, false, SyncMode::Msync, Clwb), WriteBack::Msync);
        assert_eq!(
            WriteBack::new(false, false, SyncMode::Cache, Clflush),
            WriteBack::Lines(Clflush)
        );
    }
}

//! Counts of the structural events that crash tests need to reach (B+tree splits and merges,
//! heap growth, page frees, deletes, commits), so a crash campaign can say how many of them fell
//! inside its crash windows: a campaign that never cuts through a split has not tested one.
//!
//! Cheap: one add to the thread's own counter per event (events are per structure modification or per
//! transaction, never per byte). On a `sim` region whose armed crash point has been reached the
//! counters stop, so after a cut run they say what happened *before* the crash, not what the
//! workers finished afterwards (what runs after a cut cannot change the image); and each event
//! is also a [`pmem::Sim::mark`] (tag [`Event`]` as u8`), so a crash point can be aimed at the
//! few stores and fences after, say, the third merge of a run.

use pmem::Region;
use serde::{Deserialize, Serialize};

/// The events counted, in report order; `as u8` is the tag of their `Sim::mark`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Event {
    Split = 0,
    Merge = 1,
    HeapGrowth = 2,
    PageFree = 3,
    Delete = 4,
    Commit = 5,
}

impl Event {
    pub const ALL: [Event; 6] = [
        Event::Split,
        Event::Merge,
        Event::HeapGrowth,
        Event::PageFree,
        Event::Delete,
        Event::Commit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Event::Split => "split",
            Event::Merge => "merge",
            Event::HeapGrowth => "heap growth",
            Event::PageFree => "page free",
            Event::Delete => "delete",
            Event::Commit => "commit",
        }
    }
}

/// A snapshot of an engine's event counts since it opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineCounters {
    /// B+tree node splits (leaf or internal; a root split counts once).
    pub splits: u64,
    /// B+tree merges of two siblings into one node.
    pub merges: u64,
    /// Heap pages added to a table.
    pub heap_growths: u64,
    /// Pages freed by a structure modification (a merge, a root collapse).
    pub page_frees: u64,
    /// Rows deleted by user transactions.
    pub deletes: u64,
    /// User transactions committed.
    pub commits: u64,
}

impl EngineCounters {
    pub fn get(&self, event: Event) -> u64 {
        match event {
            Event::Split => self.splits,
            Event::Merge => self.merges,
            Event::HeapGrowth => self.heap_growths,
            Event::PageFree => self.page_frees,
            Event::Delete => self.deletes,
            Event::Commit => self.commits,
        }
    }

    /// Field names and values, in a fixed order (for reports).
    pub fn fields(&self) -> [(&'static str, u64); 6] {
        [
            ("splits", self.splits),
            ("merges", self.merges),
            ("heap_growths", self.heap_growths),
            ("page_frees", self.page_frees),
            ("deletes", self.deletes),
            ("commits", self.commits),
        ]
    }

    /// What happened between `earlier` and `self` (counters only grow; a smaller value, from
    /// another engine instance, counts as 0).
    pub fn since(&self, earlier: &EngineCounters) -> EngineCounters {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        EngineCounters {
            splits: d(self.splits, earlier.splits),
            merges: d(self.merges, earlier.merges),
            heap_growths: d(self.heap_growths, earlier.heap_growths),
            page_frees: d(self.page_frees, earlier.page_frees),
            deletes: d(self.deletes, earlier.deletes),
            commits: d(self.commits, earlier.commits),
        }
    }

    /// Field-wise sum (saturating).
    pub fn plus(&self, other: &EngineCounters) -> EngineCounters {
        let s = |a: u64, b: u64| a.saturating_add(b);
        EngineCounters {
            splits: s(self.splits, other.splits),
            merges: s(self.merges, other.merges),
            heap_growths: s(self.heap_growths, other.heap_growths),
            page_frees: s(self.page_frees, other.page_frees),
            deletes: s(self.deletes, other.deletes),
            commits: s(self.commits, other.commits),
        }
    }
}

/// The live counters of one engine instance: per thread, summed when read (a commit bumps one,
/// and a shared atomic there was a cache line every committing thread wrote).
pub struct Counters {
    /// Checked before each add: a `sim` region past its cut stops the counters.
    region: Region,
    cells: pmem::ThreadCounters<{ Event::ALL.len() }>,
}

impl Counters {
    pub fn new(region: &Region) -> Counters {
        Counters { region: region.clone(), cells: Default::default() }
    }

    #[inline]
    fn add(&self, event: Event) {
        if let Some(sim) = self.region.sim() {
            if sim.cut_taken() {
                return;
            }
            sim.mark(event as u8);
        }
        self.cells.add(event as usize, 1);
    }

    pub fn split(&self) {
        self.add(Event::Split)
    }
    pub fn merge(&self) {
        self.add(Event::Merge)
    }
    pub fn heap_growth(&self) {
        self.add(Event::HeapGrowth)
    }
    pub fn page_free(&self) {
        self.add(Event::PageFree)
    }
    pub fn delete(&self) {
        self.add(Event::Delete)
    }
    pub fn commit(&self) {
        self.add(Event::Commit)
    }

    pub fn snapshot(&self) -> EngineCounters {
        let get = |e: Event| self.cells.get(e as usize);
        EngineCounters {
            splits: get(Event::Split),
            merges: get(Event::Merge),
            heap_growths: get(Event::HeapGrowth),
            page_frees: get(Event::PageFree),
            deletes: get(Event::Delete),
            commits: get(Event::Commit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, RegionOptions};

    #[test]
    fn counters_stop_at_a_sim_cut() {
        let region = Region::open(&RegionOptions::new(Medium::Sim, 1 << 20)).unwrap();
        let c = Counters::new(&region);
        c.split();
        c.commit();
        let sim = region.sim().unwrap();
        sim.arm(CrashPoint { event: CrashEvent::Fence, count: 1 }, CrashPolicy::Persisted, 1);
        c.merge();
        region.fence();
        c.delete();
        c.commit();
        let s = c.snapshot();
        assert_eq!((s.splits, s.merges, s.deletes, s.commits), (1, 1, 0, 1), "{s:?}");
        let d = s.since(&EngineCounters { commits: 1, ..Default::default() });
        assert_eq!(d.commits, 0);
        assert_eq!(d.plus(&s).splits, 2);
    }

    #[test]
    fn a_crash_aimed_at_the_second_merge_cuts_after_it() {
        let region = Region::open(&RegionOptions::new(Medium::Sim, 1 << 20)).unwrap();
        let c = Counters::new(&region);
        let sim = region.sim().unwrap();
        let aim = pmem::MarkAim { tag: Event::Merge as u8, nth: 2 };
        let point = CrashPoint { event: CrashEvent::Fence, count: 2 };
        sim.arm_aimed(Some(aim), point, CrashPolicy::Persisted, 1);
        for _ in 0..3 {
            region.fence();
        }
        c.merge();
        c.split();
        region.fence();
        assert!(!sim.cut_taken(), "one merge is not the second");
        c.merge();
        region.fence();
        assert!(!sim.cut_taken());
        region.fence();
        assert!(sim.cut_taken(), "the second fence after the second merge");
        assert_eq!(sim.cut_point(), Some(CrashPoint { event: CrashEvent::Fence, count: 6 }));
        assert_eq!(c.snapshot().merges, 2);
    }
}

//! The persist critical-path analyser: thesis §8.1 ("Persist Timing Simulation") over the
//! persistency models of §7.2 (strict, epoch, strand), under sequential consistency.
//!
//! Input: a `pmem` trace in one total order (every traced access took the trace mutex). Every
//! access is split into aligned 8-byte words, in address order, as a word-by-word copy would
//! issue them; every word stored to the region is a *persist* (persists happen in place, §8.1).
//! Each persist gets the earliest time the model allows, in units of one persist latency,
//! assuming infinite bandwidth and banks: one more than the latest persist it depends on, or the
//! same time when it *coalesces* — when its latest dependence (greatest time, unique) is the
//! last persist to its own atomically persistable block, so merging into it violates nothing.
//!
//! Dependences flow through (§7.2): program order (strict: every access; epoch: accesses
//! separated by a persist barrier; strand: the same within a strand, cleared by NewStrand) and
//! conflicting accesses to persistent *and* volatile memory at the tracking granularity (a
//! store after a load or store, a load after a store, to the same tracking block). Each access
//! publishes what it depends on (and, for a persist, itself) to its block, so a later
//! conflicting access inherits "everything before the epoch of the earlier access" (§7.2.2).
//! Fences and strand barriers are persist barriers; flushes carry no ordering of their own.
//!
//! Invariant: a persist's time is at least the time of every persist it depends on, and
//! strictly greater unless it coalesced into the last persist of its own block.

use pmem::{TraceEvent, TraceKind};
use serde::Serialize;
use std::collections::HashMap;

/// A memory persistency model (thesis §7.2), all under SC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// §7.2.1: persists in the order SC makes stores visible (every access orders the next).
    Strict,
    /// §7.2.2: persist barriers split each thread into epochs; conflicts order across threads.
    Epoch,
    /// §7.2.3: epoch persistency within strands; NewStrand clears the thread's dependences.
    Strand,
}

impl Model {
    pub const ALL: [Model; 3] = [Model::Strict, Model::Epoch, Model::Strand];

    pub fn name(self) -> &'static str {
        match self {
            Model::Strict => "strict",
            Model::Epoch => "epoch",
            Model::Strand => "strand",
        }
    }

    pub fn parse(s: &str) -> Option<Model> {
        Model::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(s))
    }
}

/// What the analyser assumes about the memory system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Config {
    pub model: Model,
    /// Persists to one aligned block of this size may coalesce (8 … 4096, a power of two).
    pub atomic_persist_bytes: u64,
    /// Conflicts are detected per aligned block of this size (8 … 4096, a power of two).
    pub tracking_bytes: u64,
    /// Keep every persist's time in [`Analysis::times`] (for tests and inspection).
    pub keep_times: bool,
    /// Also record the critical path reached before this trace event
    /// ([`Analysis::critical_path_at_split`]), so that a caller can measure the path's growth
    /// over the rest of the trace (its steady state) rather than its total.
    pub split_event: Option<u64>,
}

/// Smallest and largest block sizes the analyser accepts.
pub const MIN_BLOCK_BYTES: u64 = 8;
pub const MAX_BLOCK_BYTES: u64 = 4096;

impl Config {
    /// The thesis's default: 8-byte atomic persists, 8-byte tracking.
    pub fn new(model: Model) -> Config {
        Config {
            model,
            atomic_persist_bytes: 8,
            tracking_bytes: 8,
            keep_times: false,
            split_event: None,
        }
    }

    pub fn validate(&self) -> crate::Result<()> {
        for (what, v) in [
            ("atomic persist size", self.atomic_persist_bytes),
            ("tracking granularity", self.tracking_bytes),
        ] {
            if !v.is_power_of_two() || !(MIN_BLOCK_BYTES..=MAX_BLOCK_BYTES).contains(&v) {
                return Err(crate::error::invalid(
                    what,
                    format!("{v} bytes (expected a power of two from 8 to 4096)"),
                ));
            }
        }
        Ok(())
    }
}

/// One persist (an 8-byte word stored to the region) and its earliest time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PersistTime {
    /// Index of the trace event that stored the word.
    pub event: u64,
    pub thread: u64,
    /// Region offset of the word (8-aligned).
    pub offset: u64,
    /// In persist latencies, from 1.
    pub time: u64,
    pub coalesced: bool,
}

/// The analyser's result for one trace and one configuration.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub config: Config,
    pub events: u64,
    /// Word persists, coalesced or not.
    pub persists: u64,
    /// Persists that coalesced into an earlier persist of their block.
    pub coalesced: u64,
    /// The latest persist time: the persist critical path, in persist latencies.
    pub critical_path: u64,
    /// The critical path of the events before `config.split_event` (the analysis is causal:
    /// no later event changes an earlier persist's time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical_path_at_split: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub times: Vec<PersistTime>,
}

impl Analysis {
    /// Steady-state persist critical path per unit of work (insert): the path's growth from
    /// `config.split_event` to the end, over the `units_after_split` units run in that part;
    /// without a split, the whole path over `units_total`.
    ///
    /// Why not the whole path over the whole trace: under §8.1's coalescing rule a path may stop
    /// growing (strand persistency's queue heads all coalesce, so the path is a constant), and
    /// then "path ÷ inserts" — and the persist-bound rate derived from it — depends only on how
    /// long the trace is. The growth over the second part is a property of the workload.
    pub fn path_per_unit(&self, units_total: u64, units_after_split: u64) -> f64 {
        match self.critical_path_at_split {
            Some(before) if units_after_split > 0 => {
                (self.critical_path - before) as f64 / units_after_split as f64
            }
            _ => self.critical_path as f64 / units_total.max(1) as f64,
        }
    }

    /// The finite-trace reading: the whole critical path ÷ the `units` (inserts) the trace
    /// ran — the thesis's own measure (§8.1: persist throughput is limited by the critical path
    /// "observed by execution"; Fig. 8.2: "average persist ordering critical path per insert").
    /// Unlike [`Analysis::path_per_unit`] it depends on the trace's length wherever the path
    /// stops growing (strand persistency's queues): a path of 2 over 100 inserts is 0.02.
    pub fn finite_path_per_unit(&self, units: u64) -> f64 {
        self.critical_path as f64 / units.max(1) as f64
    }

    /// Time of the persists of the word at `offset`, in trace order (needs `keep_times`).
    pub fn times_of(&self, offset: u64) -> Vec<u64> {
        self.times.iter().filter(|p| p.offset == offset).map(|p| p.time).collect()
    }
}

/// A dependence: the latest persist time an access must follow, and which atomic block that
/// latest persist was to (`NONE` before any persist, `MIXED` when two blocks tie), which is what
/// decides whether a persist may coalesce (§8.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Dep {
    time: u64,
    block: u64,
}

const NONE: u64 = 0;
const MIXED: u64 = u64::MAX;

impl Dep {
    const ZERO: Dep = Dep { time: 0, block: NONE };

    fn merge(self, other: Dep) -> Dep {
        match self.time.cmp(&other.time) {
            std::cmp::Ordering::Greater => self,
            std::cmp::Ordering::Less => other,
            std::cmp::Ordering::Equal if self.block == other.block => self,
            std::cmp::Ordering::Equal => Dep { time: self.time, block: MIXED },
        }
    }
}

/// What later conflicting accesses to one tracking block inherit.
#[derive(Clone, Copy, Default)]
struct Cell {
    /// The last store to the block (and all it depended on).
    store: Dep,
    /// The loads since that store.
    load: Dep,
}

/// One thread's (current strand's) dependences.
#[derive(Clone, Copy, Default)]
struct ThreadState {
    /// Everything before the last persist barrier: every later access depends on it.
    barrier: Dep,
    /// What the accesses of the current epoch depend on (becomes `barrier` at the next one).
    epoch: Dep,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Load,
    Store,
}

struct Analyser {
    config: Config,
    threads: HashMap<u64, ThreadState>,
    persistent: HashMap<u64, Cell>,
    volatile: HashMap<u64, Cell>,
    /// Time of the last persist to each atomic block.
    last_persist: HashMap<u64, u64>,
    result: Analysis,
}

/// Replays `trace` under `config` and returns every persist's earliest time and the critical
/// path.
pub fn analyse(trace: &[TraceEvent], config: Config) -> crate::Result<Analysis> {
    config.validate()?;
    let mut a = Analyser {
        config,
        threads: HashMap::new(),
        persistent: HashMap::new(),
        volatile: HashMap::new(),
        last_persist: HashMap::new(),
        result: Analysis {
            config,
            events: trace.len() as u64,
            persists: 0,
            coalesced: 0,
            critical_path: 0,
            critical_path_at_split: None,
            times: Vec::new(),
        },
    };
    for (index, e) in trace.iter().enumerate() {
        if config.split_event == Some(index as u64) {
            a.result.critical_path_at_split = Some(a.result.critical_path);
        }
        a.event(index as u64, e);
    }
    if config.split_event.is_some() && a.result.critical_path_at_split.is_none() {
        a.result.critical_path_at_split = Some(a.result.critical_path);
    }
    Ok(a.result)
}

impl Analyser {
    fn event(&mut self, index: u64, e: &TraceEvent) {
        match e.kind {
            TraceKind::Load => self.words(index, e, false, Access::Load),
            TraceKind::Store => self.words(index, e, false, Access::Store),
            TraceKind::VolatileLoad => self.words(index, e, true, Access::Load),
            TraceKind::VolatileStore => self.words(index, e, true, Access::Store),
            // A write-back request orders nothing by itself; the barrier that completes it does.
            TraceKind::Flush => {}
            TraceKind::Fence | TraceKind::StrandBarrier => {
                if self.config.model != Model::Strict {
                    let t = self.threads.entry(e.thread).or_default();
                    t.barrier = t.barrier.merge(t.epoch);
                    t.epoch = Dep::ZERO;
                }
            }
            TraceKind::NewStrand => {
                if self.config.model == Model::Strand {
                    self.threads.insert(e.thread, ThreadState::default());
                }
            }
        }
    }

    fn words(&mut self, index: u64, e: &TraceEvent, volatile: bool, access: Access) {
        if e.len == 0 {
            return;
        }
        let first = e.offset / 8 * 8;
        let end = e.offset.saturating_add(e.len).div_ceil(8) * 8;
        let mut word = first;
        while word < end {
            self.word(index, e.thread, word, volatile, access);
            word += 8;
        }
    }

    fn word(&mut self, index: u64, thread: u64, word: u64, volatile: bool, access: Access) {
        let state = *self.threads.entry(thread).or_default();
        let base = state.barrier;
        let tracking_block = word / self.config.tracking_bytes;
        let cells = if volatile { &mut self.volatile } else { &mut self.persistent };
        let cell = cells.entry(tracking_block).or_default();
        let published = match access {
            Access::Load => {
                let d = base.merge(cell.store);
                cell.load = cell.load.merge(d);
                d
            }
            Access::Store => {
                let d = base.merge(cell.store).merge(cell.load);
                let published = if volatile {
                    d
                } else {
                    let atomic_block = word / self.config.atomic_persist_bytes;
                    let last = self.last_persist.get(&atomic_block).copied();
                    let coalesced =
                        d.time > 0 && d.block == atomic_block + 1 && last == Some(d.time);
                    let time = if coalesced { d.time } else { d.time + 1 };
                    self.last_persist.insert(atomic_block, time);
                    let r = &mut self.result;
                    r.persists += 1;
                    r.coalesced += u64::from(coalesced);
                    r.critical_path = r.critical_path.max(time);
                    if self.config.keep_times {
                        r.times.push(PersistTime {
                            event: index,
                            thread,
                            offset: word,
                            time,
                            coalesced,
                        });
                    }
                    Dep { time, block: atomic_block + 1 }
                };
                cell.store = published;
                cell.load = Dep::ZERO;
                published
            }
        };
        let t = self.threads.get_mut(&thread).expect("inserted above");
        if self.config.model == Model::Strict {
            // Strict persistency under SC: every access is ordered before the next one.
            t.barrier = t.barrier.merge(published);
        } else {
            t.epoch = t.epoch.merge(published);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Hand-built traces whose critical paths are known, for each model.
    use super::*;

    /// A hand-built trace, in total order.
    #[derive(Default)]
    struct T(Vec<TraceEvent>);

    impl T {
        fn ev(&mut self, thread: u64, kind: TraceKind, offset: u64, len: u64) -> &mut T {
            let seq = self.0.len() as u64;
            self.0.push(TraceEvent { seq, thread, kind, offset, len });
            self
        }
        fn st(&mut self, th: u64, off: u64) -> &mut T {
            self.ev(th, TraceKind::Store, off, 8)
        }
        fn ld(&mut self, th: u64, off: u64) -> &mut T {
            self.ev(th, TraceKind::Load, off, 8)
        }
        fn vst(&mut self, th: u64, addr: u64) -> &mut T {
            self.ev(th, TraceKind::VolatileStore, addr, 8)
        }
        fn vld(&mut self, th: u64, addr: u64) -> &mut T {
            self.ev(th, TraceKind::VolatileLoad, addr, 8)
        }
        fn pb(&mut self, th: u64) -> &mut T {
            self.ev(th, TraceKind::Fence, 0, 0)
        }
        fn ns(&mut self, th: u64) -> &mut T {
            self.ev(th, TraceKind::NewStrand, 0, 0)
        }
        fn run(&self, model: Model) -> Analysis {
            self.run_with(Config { keep_times: true, ..Config::new(model) })
        }
        fn run_with(&self, config: Config) -> Analysis {
            analyse(&self.0, config).unwrap()
        }
        fn paths(&self) -> [u64; 3] {
            Model::ALL.map(|m| self.run(m).critical_path)
        }
    }

    #[test]
    fn chain_with_barriers_is_serial_under_every_model() {
        // A | B | C on one thread: each persist must follow the previous one.
        let mut t = T::default();
        t.st(1, 0).pb(1).st(1, 64).pb(1).st(1, 128);
        assert_eq!(t.paths(), [3, 3, 3]);
        let a = t.run(Model::Epoch);
        assert_eq!((a.times_of(0), a.times_of(64), a.times_of(128)), (vec![1], vec![2], vec![3]));
    }

    #[test]
    fn one_epoch_is_serial_only_under_strict() {
        // A B C D without barriers: program order serialises them under strict only.
        let mut t = T::default();
        t.st(1, 0).st(1, 64).st(1, 128).st(1, 192);
        assert_eq!(t.paths(), [4, 1, 1]);
    }

    #[test]
    fn a_multi_word_store_is_one_persist_per_word() {
        // One 100-byte copy at offset 8: words 8..112, 13 persists (the unaligned end counts).
        let mut t = T::default();
        t.ev(1, TraceKind::Store, 8, 100);
        let strict = t.run(Model::Strict);
        assert_eq!((strict.persists, strict.critical_path), (13, 13));
        assert_eq!(t.run(Model::Epoch).critical_path, 1);
    }

    #[test]
    fn two_independent_strands() {
        // A | B ; NewStrand ; C | D: strand persistency runs the two chains side by side; epoch
        // persistency puts B and C in one epoch (no barrier between them); strict serialises.
        let mut t = T::default();
        t.st(1, 0).pb(1).st(1, 64).ns(1).st(1, 128).pb(1).st(1, 192);
        assert_eq!(t.paths(), [4, 3, 2]);
        let strand = t.run(Model::Strand);
        assert_eq!(strand.times_of(128), vec![1]);
        assert_eq!(strand.times_of(192), vec![2]);
    }

    #[test]
    fn strands_still_order_through_a_load_and_a_barrier() {
        // The strand idiom (§7.2.3): a new strand reads what it must follow, then a barrier.
        let mut t = T::default();
        t.st(1, 0).ns(1).ld(1, 0).pb(1).st(1, 64);
        assert_eq!(t.paths(), [2, 2, 2]);
        // Without the load, the new strand's persist is independent.
        let mut u = T::default();
        u.st(1, 0).ns(1).pb(1).st(1, 64);
        assert_eq!(u.paths(), [2, 2, 1]);
    }

    /// Thread 1 persists X inside a volatile lock, then thread 2 persists Y inside it.
    fn locked_pair(barriers_around_lock: bool) -> T {
        const LOCK: u64 = 0x1000;
        let mut t = T::default();
        let b = barriers_around_lock;
        t.vst(1, LOCK);
        if b {
            t.pb(1);
        }
        t.st(1, 0);
        if b {
            t.pb(1);
        }
        t.vst(1, LOCK); // unlock
        t.vst(2, LOCK); // lock: a store conflicting with the unlock
        if b {
            t.pb(2);
        }
        t.st(2, 64);
        t
    }

    #[test]
    fn race_through_a_volatile_lock() {
        // Strict: the lock hand-off orders Y after X. Epoch without barriers around the lock
        // operations: the persist epochs race, so X and Y are concurrent (the intentional race
        // of §7.2.2). With barriers around lock and unlock (the conservative discipline), the
        // volatile conflict orders Y after X under epoch and strand persistency too.
        assert_eq!(locked_pair(false).paths(), [2, 1, 1]);
        assert_eq!(locked_pair(true).paths(), [2, 2, 2]);
        // A volatile load observing the unlock orders just as well as a store.
        let mut t = T::default();
        t.st(1, 0).pb(1).vst(1, 0x1000).vld(2, 0x1000).pb(2).st(2, 64);
        assert_eq!(t.paths(), [2, 2, 2]);
        // ... but a new strand after the acquire clears it.
        let mut t = T::default();
        t.st(1, 0).pb(1).vst(1, 0x1000).vld(2, 0x1000).ns(2).pb(2).st(2, 64);
        assert_eq!(t.paths(), [2, 2, 1]);
    }

    #[test]
    fn load_before_store_orders_under_sc() {
        // Thread 1 persists X then loads L; thread 2 stores L then persists Y: SC orders the
        // load before the store, so Y follows X (the load-before-store race of §7.2.1).
        let mut t = T::default();
        t.st(1, 0).pb(1).vld(1, 0x2000).vst(2, 0x2000).pb(2).st(2, 64);
        assert_eq!(t.paths(), [2, 2, 2]);
        // Two loads never conflict.
        let mut u = T::default();
        u.st(1, 0).pb(1).vld(1, 0x2000).vld(2, 0x2000).pb(2).st(2, 64);
        assert_eq!(u.paths(), [1, 1, 1]);
    }

    #[test]
    fn persists_to_one_address_follow_coherence() {
        // Two threads persist the same word, no other ordering: the second follows the first
        // (strong persist atomicity), whatever the model.
        let mut t = T::default();
        t.st(1, 0).st(2, 0);
        // The second persist's only dependence is the first, to its own block: it coalesces.
        assert_eq!(t.paths(), [1, 1, 1]);
        let a = t.run(Model::Epoch);
        assert_eq!(a.coalesced, 1);
        // With something later in between, it cannot.
        let mut u = T::default();
        u.st(1, 0).st(2, 64).pb(2).st(2, 0);
        assert_eq!(u.run(Model::Epoch).times_of(0), vec![1, 2]);
    }

    #[test]
    fn coalescing_needs_the_atomic_block() {
        // Strict, one thread, two neighbouring words: 8-byte atomic persists serialise them,
        // 16-byte ones let the second coalesce into the first.
        let mut t = T::default();
        t.st(1, 0).st(1, 8);
        let c8 = Config { atomic_persist_bytes: 8, ..Config::new(Model::Strict) };
        let c16 = Config { atomic_persist_bytes: 16, ..Config::new(Model::Strict) };
        assert_eq!(t.run_with(c8).critical_path, 2);
        let a = t.run_with(c16);
        assert_eq!((a.critical_path, a.coalesced), (1, 1));
        // Coalescing may not skip an intervening dependence: A(0) B(64) A'(8) under strict.
        let mut u = T::default();
        u.st(1, 0).st(1, 64).st(1, 8);
        assert_eq!(u.run_with(c16).critical_path, 3);
    }

    #[test]
    fn tracking_granularity_adds_false_sharing() {
        // Epoch, two threads touching neighbouring words of one line: with 8-byte tracking
        // they do not conflict; with 64-byte tracking the load "conflicts" with the persist.
        let mut t = T::default();
        t.st(1, 0).ld(2, 8).pb(2).st(2, 128);
        let fine = Config { tracking_bytes: 8, ..Config::new(Model::Epoch) };
        let coarse = Config { tracking_bytes: 64, ..Config::new(Model::Epoch) };
        assert_eq!(t.run_with(fine).critical_path, 1);
        assert_eq!(t.run_with(coarse).critical_path, 2);
    }

    #[test]
    fn thesis_figure_7_4() {
        // Fig. 7.4: T1: A | B C ; T2: C' D | E ; T3: E' | F, with C→C' and E→E' conflicts.
        // A is ordered before F by transitivity; B is concurrent with T2 and T3.
        let (a, b, c, d, e, f) = (0, 64, 128, 192, 256, 320);
        let mut t = T::default();
        t.st(1, a).pb(1).st(1, b).st(1, c);
        t.ld(2, c).st(2, d).pb(2).st(2, e);
        t.ld(3, e).pb(3).st(3, f);
        let r = t.run(Model::Epoch);
        assert_eq!(r.times_of(a), vec![1]);
        assert_eq!(r.times_of(b), vec![2]);
        assert_eq!(r.times_of(c), vec![2]);
        assert_eq!(r.times_of(d), vec![1], "D is concurrent with thread 1");
        assert_eq!(r.times_of(e), vec![3], "E follows C (C before C', C' | E)");
        assert_eq!(r.times_of(f), vec![4], "F follows A by transitivity");
    }

    /// A queue in miniature, counted by hand: `inserts` Copy-While-Locked inserts on one
    /// thread (NewStrand; the entry's word; barrier; read and write the head).
    fn mini_queue(inserts: u64) -> (T, u64) {
        const HEAD: u64 = 0;
        let mut t = T::default();
        let mut split = 0;
        for i in 0..inserts {
            if i == inserts / 2 {
                split = t.0.len() as u64;
            }
            t.ns(1).st(1, 64 * (i + 1)).pb(1).ld(1, HEAD).st(1, HEAD);
        }
        (t, split)
    }

    #[test]
    fn finite_trace_reading_is_the_whole_path_over_the_inserts() {
        // 4 inserts. Strand: each entry persists at 1 (a new strand depends on nothing) and
        // each head at 2 (after its entry; every later head coalesces into the previous one,
        // its latest dependence in its own block): path 2, so 2/4 = 0.5 per insert over the
        // trace, and no growth over the second half (steady state 0). Epoch: entry k at k, head
        // k at k+1 (the barrier puts each entry after the previous head): path 5, 1.25 per
        // insert over the trace, growth 5 - 3 = 2 over the last 2 inserts. Strict: every
        // access follows the previous one, 2 per insert: path 8, at the split 4.
        let (t, split) = mini_queue(4);
        let read = |model| {
            let a = t.run_with(Config { split_event: Some(split), ..Config::new(model) });
            (a.critical_path, a.finite_path_per_unit(4), a.path_per_unit(4, 2))
        };
        assert_eq!(read(Model::Strand), (2, 0.5, 0.0));
        assert_eq!(read(Model::Epoch), (5, 1.25, 1.0));
        assert_eq!(read(Model::Strict), (8, 2.0, 2.0));
        // The strand path does not grow, so the finite reading shrinks as the trace grows.
        let (long, _) = mini_queue(40);
        let a = long.run(Model::Strand);
        assert_eq!((a.critical_path, a.finite_path_per_unit(40)), (2, 0.05));
    }

    #[test]
    fn bad_config_is_an_error() {
        let t = T::default();
        for (a, g) in [(0, 8), (12, 8), (8, 4), (8, 8192)] {
            let c =
                Config { atomic_persist_bytes: a, tracking_bytes: g, ..Config::new(Model::Epoch) };
            assert!(analyse(&t.0, c).is_err(), "{a} {g}");
        }
    }
}

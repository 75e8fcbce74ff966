//! The `sim` medium: a crash simulator. It tracks, for every 64-byte line, whether it is clean
//! (equal to the persisted image), dirty (stored to since it last persisted) or pending (written
//! back by a flush that no fence has completed yet), and keeps a shadow *persisted image*.
//!
//! A flush snapshots the line as it is at that moment (a write-back carries the data of the time
//! it was issued); the issuing thread's next fence moves its snapshots into the persisted image.
//! Snapshots carry the line's write version, so a late fence never replaces newer persisted data
//! with older. Every store, flush and fence takes one mutex, so a crash image is a consistent cut
//! of all threads: it is the state just before the armed event (the N-th store or fence) runs.
//!
//! Crash images (what a power failure may leave):
//! * `persisted`: only lines completed by a fence;
//! * `evict`: additionally each unpersisted line, independently, at any version it held since it
//!   last persisted (a flushed snapshot or its current contents), because caches may write back
//!   any line at any time;
//! * `torn`: like `evict`, but each aligned 8-byte word of a line chooses independently; eight
//!   aligned bytes are the unit the hardware persists atomically.
//!
//! With durable caches (`eadr`) every completed store survives, so every policy's image is the
//! current contents. One `Region::write` call is one event: a cut never falls inside it.
//!
//! Known limitation: an unpersisted line's candidate versions are its persisted version, the
//! snapshots its flushes took and its current contents; a version that was overwritten before
//! any flush saw it is not offered (real caches could have evicted it), so images are a subset
//! of what hardware may leave, never a superset.

use crate::flush::{line_span, LineSpan, CACHE_LINE};
use crate::stats::thread_id;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const LINE: usize = CACHE_LINE as usize;

/// What a simulated power failure leaves of unpersisted lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrashPolicy {
    Persisted,
    Evict,
    Torn,
}

impl CrashPolicy {
    pub const ALL: [CrashPolicy; 3] =
        [CrashPolicy::Persisted, CrashPolicy::Evict, CrashPolicy::Torn];

    pub fn name(self) -> &'static str {
        match self {
            CrashPolicy::Persisted => "persisted",
            CrashPolicy::Evict => "evict",
            CrashPolicy::Torn => "torn",
        }
    }

    pub fn parse(s: &str) -> Option<CrashPolicy> {
        CrashPolicy::ALL.into_iter().find(|p| p.name() == s)
    }
}

impl std::str::FromStr for CrashPolicy {
    type Err = crate::PmemError;

    fn from_str(s: &str) -> Result<CrashPolicy, crate::PmemError> {
        CrashPolicy::parse(&s.to_ascii_lowercase()).ok_or_else(|| {
            crate::PmemError::InvalidOption(format!(
                "unknown crash policy `{s}` (expected persisted, evict or torn)"
            ))
        })
    }
}

impl std::fmt::Display for CrashPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kind of event a crash point counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrashEvent {
    Store,
    Fence,
}

/// "Crash just before the `count`-th event of kind `event`" (counted from 1, since arming).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrashPoint {
    pub event: CrashEvent,
    pub count: u64,
}

/// "Start counting a crash point's events at the `nth` [`Sim::mark`] with tag `tag`": aims a
/// crash at the few events after a rare structural change (a B+tree merge, a page free) that a
/// point drawn uniformly from a whole run almost never hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkAim {
    pub tag: u8,
    /// Counted from 1.
    pub nth: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LineState {
    Clean,
    Dirty,
    Pending,
}

struct Snapshot {
    line: usize,
    version: u64,
    bytes: [u8; LINE],
}

/// One thread's flushes that no fence of that thread has completed yet.
#[derive(Default)]
struct Pending {
    snaps: Vec<Snapshot>,
    /// Newest snapshot version per line, so that flushing an unchanged line twice records it once.
    newest: HashMap<usize, u64>,
}

/// The region's mapping as the simulator sees it. A raw view rather than a `&[u8]`, so that no
/// shared reference covers bytes while a store changes them: the bytes are stable only while
/// the simulator lock is held (every store on a `sim` region takes it).
#[derive(Clone, Copy)]
pub(crate) struct View {
    base: *const u8,
    len: usize,
}

impl View {
    /// # Safety
    /// `base` must point to `len` bytes that stay mapped for as long as the view is used, and
    /// every store to them must go through [`Sim::store`].
    pub(crate) unsafe fn new(base: *const u8, len: usize) -> View {
        View { base, len }
    }

    /// The bytes of `[start, end)`.
    ///
    /// # Safety
    /// The simulator lock must be held for as long as the slice lives (no store runs then).
    unsafe fn range(&self, start: usize, end: usize) -> &[u8] {
        debug_assert!(start <= end && end <= self.len);
        // SAFETY: in bounds of the live mapping (`View::new`), stable under the lock (caller).
        unsafe { std::slice::from_raw_parts(self.base.add(start), end - start) }
    }
}

struct Armed {
    point: CrashPoint,
    policy: CrashPolicy,
    seed: u64,
    seen: u64,
    /// Events of `point.event` since arming, aimed or not (the cut's absolute point).
    seen_total: u64,
    /// While set, `seen` does not count: the aimed mark and the marks of its tag seen so far.
    aim: Option<(MarkAim, u64)>,
}

struct SimInner {
    shadow: Vec<u8>,
    state: Vec<LineState>,
    /// Write version of each line's current contents, and of its persisted contents.
    version: Vec<u64>,
    persisted_version: Vec<u64>,
    /// Flushed snapshots not yet completed by a fence, per thread.
    pending: HashMap<u64, Pending>,
    stores: u64,
    fences: u64,
    armed: Option<Armed>,
    image: Option<Vec<u8>>,
    /// Where the last cut fell, counted from arming (what a plain [`Sim::arm`] replays).
    cut_point: Option<CrashPoint>,
}

/// Crash-simulation state of one `sim` region.
pub struct Sim {
    inner: Mutex<SimInner>,
    cut_taken: AtomicBool,
    /// Armed with an aim not yet reached: [`Sim::mark`] must look (otherwise it returns at once).
    aiming: AtomicBool,
    events: AtomicU64,
    /// Durable caches: every completed store survives a crash.
    eadr: bool,
}

impl Sim {
    pub(crate) fn new(initial: Vec<u8>, eadr: bool) -> Sim {
        let lines = initial.len().div_ceil(LINE);
        Sim {
            inner: Mutex::new(SimInner {
                shadow: initial,
                state: vec![LineState::Clean; lines],
                version: vec![0; lines],
                persisted_version: vec![0; lines],
                pending: HashMap::new(),
                stores: 0,
                fences: 0,
                armed: None,
                image: None,
                cut_point: None,
            }),
            cut_taken: AtomicBool::new(false),
            aiming: AtomicBool::new(false),
            events: AtomicU64::new(0),
            eadr,
        }
    }

    /// Performs a store under the simulator lock. `apply` does the actual copy into the mapping.
    pub(crate) fn store(&self, offset: usize, len: usize, current: View, apply: impl FnOnce()) {
        let mut g = self.inner.lock();
        g.stores += 1;
        self.events.fetch_add(1, Ordering::Relaxed);
        self.maybe_cut(&mut g, CrashEvent::Store, current);
        apply();
        for line in line_span(offset as u64, len as u64).lines() {
            let line = line as usize;
            g.state[line] = LineState::Dirty;
            g.version[line] += 1;
        }
    }

    /// Records a write-back of the lines of `span` by this thread.
    ///
    /// A line that another thread flushed but has not fenced is snapshotted again for this
    /// thread: this thread's fence must make it durable too (a flush of a line whose write-back
    /// is in flight completes only once the line is written back).
    pub(crate) fn flush(&self, span: LineSpan, current: View) {
        if span.count == 0 {
            return;
        }
        let mut guard = self.inner.lock();
        let g = &mut *guard;
        let mine = g.pending.entry(thread_id()).or_default();
        for line in span.lines() {
            let line = line as usize;
            let version = g.version[line];
            if g.state[line] == LineState::Clean || mine.newest.get(&line) == Some(&version) {
                continue;
            }
            let start = line * LINE;
            let end = (start + LINE).min(current.len);
            let mut bytes = [0u8; LINE];
            // SAFETY: the simulator lock is held (`guard`) for the life of the slice.
            bytes[..end - start].copy_from_slice(unsafe { current.range(start, end) });
            mine.newest.insert(line, version);
            mine.snaps.push(Snapshot { line, version, bytes });
            g.state[line] = LineState::Pending;
        }
    }

    /// Completes this thread's flushes: their snapshots become persisted.
    pub(crate) fn fence(&self, current: View) {
        let mut g = self.inner.lock();
        g.fences += 1;
        self.events.fetch_add(1, Ordering::Relaxed);
        self.maybe_cut(&mut g, CrashEvent::Fence, current);
        let Some(mine) = g.pending.remove(&thread_id()) else { return };
        for s in mine.snaps {
            if s.version <= g.persisted_version[s.line] {
                continue;
            }
            let start = s.line * LINE;
            let end = (start + LINE).min(g.shadow.len());
            g.shadow[start..end].copy_from_slice(&s.bytes[..end - start]);
            g.persisted_version[s.line] = s.version;
            if g.version[s.line] == s.version {
                g.state[s.line] = LineState::Clean;
            }
        }
    }

    fn maybe_cut(&self, g: &mut SimInner, event: CrashEvent, current: View) {
        let Some(armed) = g.armed.as_mut() else { return };
        if armed.point.event != event {
            return;
        }
        armed.seen_total += 1;
        if armed.aim.is_some() {
            return;
        }
        armed.seen += 1;
        if armed.seen < armed.point.count {
            return;
        }
        let (policy, seed) = (armed.policy, armed.seed);
        g.cut_point = Some(CrashPoint { event, count: armed.seen_total });
        g.armed = None;
        g.image = Some(self.image_of(g, current, policy, seed));
        self.cut_taken.store(true, Ordering::Release);
    }

    /// Arms a crash point; the image is cut just before that event and kept for
    /// [`Sim::take_image`]. Re-arming discards an earlier image. A count of 0 behaves as 1.
    pub fn arm(&self, point: CrashPoint, policy: CrashPolicy, seed: u64) {
        self.arm_aimed(None, point, policy, seed);
    }

    /// Like [`Sim::arm`], but `point.count` counts from the aimed mark on (the cut falls just
    /// before the `count`-th event of its kind after that mark); never reached if the mark never
    /// comes. [`Sim::cut_point`] then says where the cut fell, counted from arming.
    pub fn arm_aimed(
        &self,
        aim: Option<MarkAim>,
        point: CrashPoint,
        policy: CrashPolicy,
        seed: u64,
    ) {
        let mut g = self.inner.lock();
        g.image = None;
        g.cut_point = None;
        self.cut_taken.store(false, Ordering::Release);
        self.aiming.store(aim.is_some(), Ordering::Release);
        let aim = aim.map(|a| (a, 0));
        g.armed = Some(Armed { point, policy, seed, seen: 0, seen_total: 0, aim });
    }

    /// Records a structural change with an engine-chosen tag (storage's counters call it), for
    /// crash points aimed with [`Sim::arm_aimed`]. Free unless such a point is armed.
    pub fn mark(&self, tag: u8) {
        if !self.aiming.load(Ordering::Acquire) {
            return;
        }
        let mut g = self.inner.lock();
        let Some(armed) = g.armed.as_mut() else { return };
        let Some((aim, seen)) = armed.aim.as_mut() else { return };
        if aim.tag != tag {
            return;
        }
        *seen += 1;
        if *seen >= aim.nth {
            armed.aim = None;
            self.aiming.store(false, Ordering::Release);
        }
    }

    /// Where the last cut fell, counted from arming: `arm` at this point reruns it.
    pub fn cut_point(&self) -> Option<CrashPoint> {
        self.inner.lock().cut_point
    }

    /// Whether the armed crash point has been reached. A commit acknowledged while this is still
    /// false was durable before the cut.
    pub fn cut_taken(&self) -> bool {
        self.cut_taken.load(Ordering::Acquire)
    }

    /// The image cut at the armed crash point, if it was reached.
    pub fn take_image(&self) -> Option<Vec<u8>> {
        self.inner.lock().image.take()
    }

    /// Stores and fences since the region opened.
    pub fn event_counts(&self) -> (u64, u64) {
        let g = self.inner.lock();
        (g.stores, g.fences)
    }

    /// Total events (stores + fences) so far; cheap.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    pub(crate) fn crash_image(&self, current: View, policy: CrashPolicy, seed: u64) -> Vec<u8> {
        let g = self.inner.lock();
        self.image_of(&g, current, policy, seed)
    }

    /// Lines currently not persisted (dirty or pending).
    pub fn unpersisted_lines(&self) -> usize {
        self.inner.lock().state.iter().filter(|s| **s != LineState::Clean).count()
    }

    /// Called with the simulator lock held (`g` is its contents).
    fn image_of(&self, g: &SimInner, current: View, policy: CrashPolicy, seed: u64) -> Vec<u8> {
        if self.eadr {
            // SAFETY: the caller holds the simulator lock.
            return crate::region::sparse_clone(unsafe { current.range(0, current.len) });
        }
        let mut image = crate::region::sparse_clone(&g.shadow);
        if policy == CrashPolicy::Persisted {
            return image;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Candidate versions of each unpersisted line: the flushed snapshots newer than the
        // persisted one, and the current contents.
        let mut snaps: HashMap<usize, Vec<&[u8; LINE]>> = HashMap::new();
        for list in g.pending.values() {
            for s in &list.snaps {
                if s.version > g.persisted_version[s.line] {
                    snaps.entry(s.line).or_default().push(&s.bytes);
                }
            }
        }
        for (line, state) in g.state.iter().enumerate() {
            if *state == LineState::Clean {
                continue;
            }
            let start = line * LINE;
            let end = (start + LINE).min(image.len());
            let mut candidates: Vec<&[u8]> = vec![&g.shadow[start..end]];
            if let Some(list) = snaps.get(&line) {
                candidates.extend(list.iter().map(|b| &b[..end - start]));
            }
            // SAFETY: the caller holds the simulator lock.
            candidates.push(unsafe { current.range(start, end) });
            match policy {
                CrashPolicy::Persisted => unreachable!("returned above"),
                CrashPolicy::Evict => {
                    let pick = candidates[rng.gen_range(0..candidates.len())];
                    image[start..end].copy_from_slice(pick);
                }
                CrashPolicy::Torn => {
                    for word in (0..end - start).step_by(8) {
                        let w_end = (word + 8).min(end - start);
                        let pick = candidates[rng.gen_range(0..candidates.len())];
                        image[start + word..start + w_end].copy_from_slice(&pick[word..w_end]);
                    }
                }
            }
        }
        image
    }
}

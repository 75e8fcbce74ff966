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

use crate::stats::thread_id;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const LINE: usize = 64;

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

struct Armed {
    point: CrashPoint,
    policy: CrashPolicy,
    seed: u64,
    seen: u64,
}

struct SimInner {
    shadow: Vec<u8>,
    state: Vec<LineState>,
    /// Write version of each line's current contents, and of its persisted contents.
    version: Vec<u64>,
    persisted_version: Vec<u64>,
    /// Flushed snapshots not yet completed by a fence, per thread.
    pending: HashMap<u64, Vec<Snapshot>>,
    /// Snapshots completed by nobody yet but visible to an `evict` crash, per line.
    stores: u64,
    fences: u64,
    armed: Option<Armed>,
    image: Option<Vec<u8>>,
}

/// Crash-simulation state of one `sim` region.
pub struct Sim {
    inner: Mutex<SimInner>,
    cut_taken: AtomicBool,
    events: AtomicU64,
}

impl Sim {
    pub(crate) fn new(initial: &[u8]) -> Sim {
        let lines = initial.len().div_ceil(LINE);
        Sim {
            inner: Mutex::new(SimInner {
                shadow: initial.to_vec(),
                state: vec![LineState::Clean; lines],
                version: vec![0; lines],
                persisted_version: vec![0; lines],
                pending: HashMap::new(),
                stores: 0,
                fences: 0,
                armed: None,
                image: None,
            }),
            cut_taken: AtomicBool::new(false),
            events: AtomicU64::new(0),
        }
    }

    /// Performs a store under the simulator lock. `apply` does the actual copy into the mapping.
    pub(crate) fn store(&self, offset: usize, len: usize, current: &[u8], apply: impl FnOnce()) {
        let mut g = self.inner.lock();
        g.stores += 1;
        self.events.fetch_add(1, Ordering::Relaxed);
        self.maybe_cut(&mut g, CrashEvent::Store, current);
        apply();
        if len == 0 {
            return;
        }
        for line in offset / LINE..=(offset + len - 1) / LINE {
            g.state[line] = LineState::Dirty;
            g.version[line] += 1;
        }
    }

    /// Records a write-back of the lines covering `[offset, offset+len)`.
    pub(crate) fn flush(&self, offset: usize, len: usize, current: &[u8]) {
        if len == 0 {
            return;
        }
        let mut g = self.inner.lock();
        let tid = thread_id();
        for line in offset / LINE..=(offset + len - 1) / LINE {
            if g.state[line] != LineState::Dirty {
                continue;
            }
            g.state[line] = LineState::Pending;
            let start = line * LINE;
            let end = (start + LINE).min(current.len());
            let mut bytes = [0u8; LINE];
            bytes[..end - start].copy_from_slice(&current[start..end]);
            let version = g.version[line];
            g.pending.entry(tid).or_default().push(Snapshot { line, version, bytes });
        }
    }

    /// Completes this thread's flushes: their snapshots become persisted.
    pub(crate) fn fence(&self, current: &[u8]) {
        let mut g = self.inner.lock();
        g.fences += 1;
        self.events.fetch_add(1, Ordering::Relaxed);
        self.maybe_cut(&mut g, CrashEvent::Fence, current);
        let Some(snaps) = g.pending.remove(&thread_id()) else { return };
        for s in snaps {
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

    fn maybe_cut(&self, g: &mut SimInner, event: CrashEvent, current: &[u8]) {
        let Some(armed) = g.armed.as_mut() else { return };
        if armed.point.event != event {
            return;
        }
        armed.seen += 1;
        if armed.seen < armed.point.count {
            return;
        }
        let (policy, seed) = (armed.policy, armed.seed);
        g.armed = None;
        g.image = Some(Self::image_of(g, current, policy, seed));
        self.cut_taken.store(true, Ordering::Release);
    }

    /// Arms a crash point; the image is cut just before that event and kept for
    /// [`Sim::take_image`]. Re-arming discards an earlier image.
    pub fn arm(&self, point: CrashPoint, policy: CrashPolicy, seed: u64) {
        let mut g = self.inner.lock();
        g.image = None;
        self.cut_taken.store(false, Ordering::Release);
        g.armed = Some(Armed { point, policy, seed, seen: 0 });
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

    pub(crate) fn crash_image(&self, current: &[u8], policy: CrashPolicy, seed: u64) -> Vec<u8> {
        let g = self.inner.lock();
        Self::image_of(&g, current, policy, seed)
    }

    /// Lines currently not persisted (dirty or pending).
    pub fn unpersisted_lines(&self) -> usize {
        self.inner.lock().state.iter().filter(|s| **s != LineState::Clean).count()
    }

    fn image_of(g: &SimInner, current: &[u8], policy: CrashPolicy, seed: u64) -> Vec<u8> {
        let mut image = g.shadow.clone();
        if policy == CrashPolicy::Persisted {
            return image;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // Candidate versions of each unpersisted line: the flushed snapshots newer than the
        // persisted one, and the current contents.
        let mut snaps: HashMap<usize, Vec<&[u8; LINE]>> = HashMap::new();
        for list in g.pending.values() {
            for s in list {
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
            candidates.push(&current[start..end]);
            match policy {
                CrashPolicy::Persisted => unreachable!(),
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

//! Optional persist trace for the memory-persistency analyser (thesis Ch. VI–VIII): one totally
//! ordered (sequentially consistent) record of persistent loads, stores, flushes, fences and
//! strand barriers, with thread ids. Off by default; when on, every traced operation takes one
//! mutex, which is what makes the order total.

use parking_lot::Mutex;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceKind {
    Load,
    Store,
    Flush,
    Fence,
    /// Strand persistency's NewStrand: later persists of this thread are unordered with earlier.
    NewStrand,
    /// A persist barrier within a strand (epoch boundary) without a hardware fence.
    StrandBarrier,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TraceEvent {
    pub seq: u64,
    pub thread: u64,
    pub kind: TraceKind,
    pub offset: u64,
    pub len: u64,
}

/// Bound on recorded events, so a forgotten trace cannot eat the machine; further events are
/// counted as dropped.
pub const TRACE_LIMIT: usize = 50_000_000;

#[derive(Default)]
pub(crate) struct Tracer {
    events: Mutex<(Vec<TraceEvent>, u64)>,
}

impl Tracer {
    pub(crate) fn record(&self, kind: TraceKind, offset: u64, len: u64) {
        let mut g = self.events.lock();
        if g.0.len() >= TRACE_LIMIT {
            g.1 += 1;
            return;
        }
        let seq = g.0.len() as u64;
        g.0.push(TraceEvent { seq, thread: crate::stats::thread_id(), kind, offset, len });
    }

    /// Takes the recorded events and the number dropped over the limit.
    pub(crate) fn take(&self) -> (Vec<TraceEvent>, u64) {
        let mut g = self.events.lock();
        (std::mem::take(&mut g.0), std::mem::replace(&mut g.1, 0))
    }
}

//! Optional persist trace for the memory-persistency analyser (thesis Ch. VI–VIII): one totally
//! ordered (sequentially consistent) record of persistent loads, stores, flushes, fences and
//! strand barriers, with thread ids. Off by default; when on, every traced operation takes one
//! mutex, which is what makes the order total.
//!
//! Volatile accesses (lock words, volatile lists) are not stores to the region, but they order
//! persists under every persistency model (thesis §7.2.2, rule 2), so code that wants them
//! analysed records them with [`crate::Region::trace_volatile`], which runs the access itself
//! under the trace mutex: record and access are one atomic step, as the thesis's PIN tool made
//! them with its bank of locks (§8.1). Their `offset` is a process address (for instance the
//! address of the atomic), a space of its own, never a region offset.

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
    /// A load from volatile memory at a process address, recorded by `Region::trace_volatile`.
    VolatileLoad,
    /// A store (or read-modify-write) to volatile memory at a process address.
    VolatileStore,
}

impl TraceKind {
    /// Whether the event's `offset` is a volatile (process) address rather than a region offset.
    pub fn is_volatile(self) -> bool {
        matches!(self, TraceKind::VolatileLoad | TraceKind::VolatileStore)
    }
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

    /// Runs `op` and records it as one event, both under the trace mutex, so that no other
    /// traced event falls between the access and its record.
    pub(crate) fn record_with<R>(
        &self,
        kind: TraceKind,
        offset: u64,
        len: u64,
        op: impl FnOnce() -> R,
    ) -> R {
        let mut g = self.events.lock();
        let result = op();
        if g.0.len() >= TRACE_LIMIT {
            g.1 += 1;
            return result;
        }
        let seq = g.0.len() as u64;
        g.0.push(TraceEvent { seq, thread: crate::stats::thread_id(), kind, offset, len });
        result
    }

    /// Takes the recorded events and the number dropped over the limit.
    pub(crate) fn take(&self) -> (Vec<TraceEvent>, u64) {
        let mut g = self.events.lock();
        (std::mem::take(&mut g.0), std::mem::replace(&mut g.1, 0))
    }
}

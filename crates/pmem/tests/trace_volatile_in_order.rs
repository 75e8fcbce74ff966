//! `Region::trace_volatile` records a volatile access in the same total order as the region's
//! own traced events, atomically with the access itself: threads incrementing a shared counter
//! through it leave events whose trace order is the order of the values they saw.
//! Would catch: a record taken outside the access's critical section (the analyser would see
//! lock hand-offs in an order that never happened) or volatile events mistaken for region ones.

use pmem::{Medium, Region, RegionOptions, TraceKind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[test]
fn volatile_events_are_ordered_with_their_effects() {
    let opts = RegionOptions { trace: true, ..RegionOptions::new(Medium::Dram, 4096) };
    let region = Arc::new(Region::open(&opts).unwrap());
    assert!(region.tracing());
    let counter = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let (region, counter, seen) = (region.clone(), counter.clone(), seen.clone());
            std::thread::spawn(move || {
                for _ in 0..500 {
                    let addr = counter.as_ref() as *const AtomicU64 as u64;
                    let v = region.trace_volatile(TraceKind::VolatileStore, addr, 8, || {
                        let v = counter.fetch_add(1, Ordering::Relaxed);
                        seen.lock().push((v, pmem::thread_id()));
                        v
                    });
                    region.write_u64(8 * (v % 16), v);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (trace, dropped) = region.take_trace().unwrap();
    assert_eq!(dropped, 0);
    let volatile: Vec<_> = trace.iter().filter(|e| e.kind.is_volatile()).collect();
    assert_eq!(volatile.len(), 2000);
    assert_eq!(trace.iter().filter(|e| e.kind == TraceKind::Store).count(), 2000);
    // The n-th volatile event in trace order is the access that saw value n, on its thread.
    let mut seen = seen.lock().clone();
    seen.sort();
    for (n, e) in volatile.iter().enumerate() {
        assert_eq!(seen[n], (n as u64, e.thread));
    }
    // Without a trace, the access still runs.
    let plain = Region::open(&RegionOptions::new(Medium::Dram, 4096)).unwrap();
    assert_eq!(plain.trace_volatile(TraceKind::VolatileLoad, 0, 8, || 7), 7);
    assert!(plain.take_trace().is_none());
}

#[test]
#[should_panic(expected = "volatile accesses only")]
fn region_kinds_are_refused() {
    let region = Region::open(&RegionOptions::new(Medium::Dram, 4096)).unwrap();
    region.trace_volatile(TraceKind::Store, 0, 8, || ());
}

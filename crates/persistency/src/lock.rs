//! The MCS queue lock (Mellor-Crummey & Scott, TOCS 1991) that the thesis's queues use for their
//! critical sections (§8.1), in volatile memory. Every access to a lock word goes through
//! [`Region::trace_volatile`], so a traced run records the lock hand-offs that order persists
//! across threads (§7.2.2, rule 2) in the same total order as the persists. Spinning is not
//! traced: only the load that sees the hand-off is, as one atomic step with its record.
//!
//! Invariant: a waiter's node outlives every access to it, because a thread leaves `release`
//! only after its successor (if any) has been handed the lock, and a waiter is reachable from
//! its predecessor only between linking itself and being handed the lock.

use pmem::{Region, TraceKind};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// One waiter. Aligned to a cache line so that no two waiters share one (64-byte padding,
/// §8.1); `locked` and `next` are separate 8-byte words, tracked separately at 8-byte
/// granularity.
#[repr(align(64))]
struct Node {
    locked: AtomicU64,
    next: AtomicPtr<Node>,
}

/// An MCS lock; its tail word sits alone on a cache line.
#[repr(align(64))]
#[derive(Default)]
pub struct McsLock {
    tail: AtomicPtr<Node>,
}

/// Spins a while, then yields: with more runnable threads than cores (a shared machine), a
/// waiter that only spins can burn the time slice its lock holder needs.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < SPINS_BEFORE_YIELD {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

const SPINS_BEFORE_YIELD: u32 = 200;

fn addr<T>(x: &T) -> u64 {
    x as *const T as u64
}

impl McsLock {
    pub fn new() -> McsLock {
        McsLock::default()
    }

    /// Runs `f` holding the lock; `region` records the lock's volatile accesses when tracing.
    pub fn with<R>(&self, region: &Region, f: impl FnOnce() -> R) -> R {
        let node = Node { locked: AtomicU64::new(1), next: AtomicPtr::new(std::ptr::null_mut()) };
        self.acquire(region, &node);
        // Released by the guard even if `f` panics, so one failed test cannot hang the others.
        struct Release<'a>(&'a McsLock, &'a Region, &'a Node);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release(self.1, self.2);
            }
        }
        let _release = Release(self, region, &node);
        f()
    }

    fn acquire(&self, region: &Region, node: &Node) {
        // The waiter initialises its node (a store in the traced program, as in the thesis's).
        region.trace_volatile(TraceKind::VolatileStore, addr(node), 16, || {
            node.locked.store(1, Ordering::Relaxed);
            node.next.store(std::ptr::null_mut(), Ordering::Relaxed);
        });
        let me = node as *const Node as *mut Node;
        let pred = region.trace_volatile(TraceKind::VolatileStore, addr(&self.tail), 8, || {
            self.tail.swap(me, Ordering::AcqRel)
        });
        if pred.is_null() {
            return;
        }
        // SAFETY: `pred` is the node of a thread inside `with` that has not yet handed the lock
        // on: it cannot leave `release` before it sees this link and hands the lock to us.
        let pred = unsafe { &*pred };
        region.trace_volatile(TraceKind::VolatileStore, addr(&pred.next), 8, || {
            pred.next.store(me, Ordering::Release)
        });
        let mut spins = 0u32;
        while node.locked.load(Ordering::Acquire) != 0 {
            backoff(&mut spins);
        }
        let seen = region.trace_volatile(TraceKind::VolatileLoad, addr(&node.locked), 8, || {
            node.locked.load(Ordering::Acquire)
        });
        debug_assert_eq!(seen, 0, "a handed-over lock stays handed over");
    }

    fn release(&self, region: &Region, node: &Node) {
        let me = node as *const Node as *mut Node;
        let mut succ = region.trace_volatile(TraceKind::VolatileLoad, addr(&node.next), 8, || {
            node.next.load(Ordering::Acquire)
        });
        if succ.is_null() {
            let alone =
                region.trace_volatile(TraceKind::VolatileStore, addr(&self.tail), 8, || {
                    self.tail
                        .compare_exchange(
                            me,
                            std::ptr::null_mut(),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                });
            if alone {
                return;
            }
            // A waiter swapped itself in but has not linked yet: it will, shortly.
            let mut spins = 0u32;
            while node.next.load(Ordering::Acquire).is_null() {
                backoff(&mut spins);
            }
            succ = region.trace_volatile(TraceKind::VolatileLoad, addr(&node.next), 8, || {
                node.next.load(Ordering::Acquire)
            });
        }
        // SAFETY: `succ` linked itself to us and spins on its node until this store: its node
        // is alive (its `with` frame cannot return before it holds the lock).
        let succ = unsafe { &*succ };
        region.trace_volatile(TraceKind::VolatileStore, addr(&succ.locked), 8, || {
            succ.locked.store(0, Ordering::Release)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmem::{Medium, RegionOptions};
    use std::sync::Arc;

    #[test]
    fn mutual_exclusion_under_contention() {
        let region = Arc::new(Region::open(&RegionOptions::new(Medium::Dram, 4096)).unwrap());
        let lock = Arc::new(McsLock::new());
        let counter = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (region, lock, counter) = (region.clone(), lock.clone(), counter.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        lock.with(&region, || {
                            // A non-atomic read-modify-write: lost updates if exclusion failed.
                            let v = counter.load(Ordering::Relaxed);
                            counter.store(v + 1, Ordering::Relaxed);
                        });
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), 80_000);
    }
}

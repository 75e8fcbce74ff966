//! Aether's consolidation array — Johnson, Pandis, Stoica, Athanassoulis, Ailamaki, *Aether: A
//! Scalable Approach to Logging*, VLDB 2010, §4 ("consolidation-array-based backoff", Fig. 6)
//! and §5 (decoupled buffer fill, delegated release). `log_insert=consolidated`.
//!
//! Threads that insert a record at the same moment combine in a *slot*: the first to join is
//! the group's leader, which takes the log's insert point (the reservation lock of
//! [`super::log::Log`]) once for the whole group, closes the slot (no one joins after that),
//! reserves the group's bytes in one piece and publishes where they start. Every member then
//! copies its own record into its part of that piece in parallel with the others, without a
//! lock; the last member to finish releases the group's region (its one entry among the copies
//! in flight), whatever order the members finished in. A force writes only the filled prefix
//! (below the oldest group still copying), so release is ordered in LSN without anyone waiting
//! for a predecessor: a member whose predecessor still copies leaves the release to it
//! (delegated release).
//!
//! **Invariant**: a member's record lies wholly inside its group's reservation, at the offset it
//! joined at; a group's region is marked filled only after every member's copy is done.
//!
//! Slots live in rings, one per active position; a slot is reused only after its last member
//! released it, so a member never reads a later group's base. A slot is opened (state 0) only
//! after it is installed in its position, so an open slot is always the position's active one.

use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Positions where groups form at once (Aether §A.3 finds 3-4 enough for 64 contexts).
pub(crate) const ACTIVE_SLOTS: usize = 4;
/// Slots per position: groups of one position that may still be copying before its leader must
/// wait for one to be released. Bounded by the inserting threads (one group each at most).
const RING_SLOTS: usize = 64;
/// Most bytes one group reserves (a group is at least one record, which may be as large as
/// [`super::log`]'s largest record): bounds the pad a group may need at the end of the area.
pub(crate) const GROUP_LIMIT_BYTES: u64 = 64 << 10;
/// Most members a group counts (16 bits of the state word).
const MAX_MEMBERS: u64 = 0xffff;

/// Slot state: `members << 32 | bytes` while open (0: open, empty); these while not.
const FREE: u64 = u64::MAX;
const CLOSED: u64 = 1 << 63;
/// Being installed in its position: not open yet.
const INSTALLING: u64 = CLOSED | 1;
const MEMBER: u64 = 1 << 32;
const BYTES_MASK: u64 = MEMBER - 1;
/// `Slot::base` before the leader published it.
const NOT_READY: u64 = u64::MAX;
/// `Slot::base` when the log had no room for the group.
pub(crate) const NO_ROOM: u64 = u64::MAX - 1;

const _: () = assert!(GROUP_LIMIT_BYTES < BYTES_MASK);
const _: () = assert!(MAX_MEMBERS < 1 << 31);

struct Slot {
    state: AtomicU64,
    /// LSN where the group's records start (`NOT_READY`, or `NO_ROOM`).
    base: AtomicU64,
    /// The group's key among the copies in flight (its reservation's start) and the
    /// reservation's end.
    key: AtomicU64,
    end: AtomicU64,
    /// Members whose copies are not done (set by the leader before it publishes `base`).
    pending: AtomicU64,
}

/// A thread's place in a group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Joined {
    slot: usize,
    /// Bytes of the group before this member's record.
    pub offset: u64,
    pub leader: bool,
}

/// A closed group, as its leader found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub bytes: u64,
    pub members: u64,
}

/// See the module doc.
pub(crate) struct ConsolidationArray {
    /// Index of each position's open slot.
    active: [CachePadded<AtomicUsize>; ACTIVE_SLOTS],
    slots: Box<[CachePadded<Slot>]>,
}

impl Default for ConsolidationArray {
    fn default() -> Self {
        let slots: Box<[CachePadded<Slot>]> = (0..ACTIVE_SLOTS * RING_SLOTS)
            .map(|i| {
                let state = if i % RING_SLOTS == 0 { 0 } else { FREE };
                CachePadded::new(Slot {
                    state: AtomicU64::new(state),
                    base: AtomicU64::new(NOT_READY),
                    key: AtomicU64::new(0),
                    end: AtomicU64::new(0),
                    pending: AtomicU64::new(0),
                })
            })
            .collect();
        ConsolidationArray {
            active: std::array::from_fn(|p| CachePadded::new(AtomicUsize::new(p * RING_SLOTS))),
            slots,
        }
    }
}

impl ConsolidationArray {
    /// Joins an open group with a record of `bytes` (at most [`GROUP_LIMIT_BYTES`]); the first
    /// member of a group leads it. Never blocks on a lock: a full or closed position is skipped.
    pub fn join(&self, bytes: u64) -> Joined {
        debug_assert!(bytes <= GROUP_LIMIT_BYTES);
        // Every thread tries the first position first, so that few concurrent inserters still
        // meet; a lost race for a slot (many inserters) or a closed or full one moves on to the
        // next, which spreads the joins of many threads over the positions.
        let mut position = 0;
        let mut skipped = 0u32;
        loop {
            let slot = self.active[position].load(Ordering::Acquire);
            let state = &self.slots[slot].state;
            let s = state.load(Ordering::Acquire);
            let open = s & CLOSED == 0;
            if open && (s & BYTES_MASK) + bytes <= GROUP_LIMIT_BYTES && s >> 32 < MAX_MEMBERS {
                let joined = s + MEMBER + bytes;
                if state.compare_exchange(s, joined, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    return Joined { slot, offset: s & BYTES_MASK, leader: s == 0 };
                }
            }
            position = (position + 1) % ACTIVE_SLOTS;
            skipped += 1;
            // Every position closed, full or contended: their leaders are reserving (bounded:
            // a leader reopens its position right after its reservation).
            if skipped.is_multiple_of(ACTIVE_SLOTS as u32) {
                backoff(skipped / ACTIVE_SLOTS as u32);
            }
        }
    }

    /// Tests: members of the groups now open.
    #[cfg(test)]
    pub fn open_members(&self) -> u64 {
        let state = |p: &CachePadded<AtomicUsize>| {
            self.slots[p.load(Ordering::Acquire)].state.load(Ordering::Acquire)
        };
        self.active.iter().map(state).filter(|s| s & CLOSED == 0).map(|s| s >> 32).sum()
    }

    /// The leader, holding the log's insert point: closes its group (no member joins after
    /// this) and returns what the group reserves.
    pub fn close(&self, leader: &Joined) -> Group {
        debug_assert!(leader.leader);
        let s = self.slots[leader.slot].state.swap(CLOSED, Ordering::AcqRel);
        debug_assert!(s & CLOSED == 0 && s != 0, "a leader closes its own open group");
        Group { bytes: s & BYTES_MASK, members: (s >> 32) & MAX_MEMBERS }
    }

    /// The leader, after its reservation (`base`: where the group's records start, or
    /// [`NO_ROOM`]; `key..end`: the group's reservation, released when its copies are done):
    /// lets the members copy, and opens a fresh group in the leader's position. Takes no lock.
    pub fn publish(&self, leader: &Joined, group: Group, base: u64, key: u64, end: u64) {
        let slot = &self.slots[leader.slot];
        slot.key.store(key, Ordering::Relaxed);
        slot.end.store(end, Ordering::Relaxed);
        slot.pending.store(group.members, Ordering::Relaxed);
        slot.base.store(base, Ordering::Release);
        self.reopen(leader.slot / RING_SLOTS);
    }

    /// A fresh slot for `position`, whose active slot its caller closed. Waits (bounded by the
    /// copies in flight, which need no lock to finish) while every slot of the ring is in use.
    fn reopen(&self, position: usize) {
        let ring = position * RING_SLOTS..(position + 1) * RING_SLOTS;
        let mut rounds = 0u32;
        loop {
            for i in ring.clone() {
                let state = &self.slots[i].state;
                if state.load(Ordering::Relaxed) != FREE {
                    continue;
                }
                if state
                    .compare_exchange(FREE, INSTALLING, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    self.slots[i].base.store(NOT_READY, Ordering::Relaxed);
                    self.active[position].store(i, Ordering::Release);
                    // Open only once installed: an open slot is its position's active slot.
                    state.store(0, Ordering::Release);
                    return;
                }
            }
            rounds += 1;
            backoff(rounds);
        }
    }

    /// A member (the leader included) waits for its group's base: the LSN of its record, or
    /// [`NO_ROOM`].
    pub fn base(&self, joined: &Joined) -> u64 {
        let base = &self.slots[joined.slot].base;
        let mut rounds = 0u32;
        loop {
            let b = base.load(Ordering::Acquire);
            if b != NOT_READY {
                return if b == NO_ROOM { NO_ROOM } else { b + joined.offset };
            }
            rounds += 1;
            backoff(rounds);
        }
    }

    /// A member's copy is done (or, with no room, abandoned). Returns the group's reservation
    /// (`key..end`) when this member was the last: the caller releases it, then calls
    /// [`Self::recycle`].
    pub fn finish(&self, joined: &Joined) -> Option<(u64, u64)> {
        let slot = &self.slots[joined.slot];
        // AcqRel: the last member sees every member's copy (a release sequence on `pending`),
        // and hands them on with its release of the region.
        (slot.pending.fetch_sub(1, Ordering::AcqRel) == 1)
            .then(|| (slot.key.load(Ordering::Relaxed), slot.end.load(Ordering::Relaxed)))
    }

    /// The last member released its group: the slot may hold a new group.
    pub fn recycle(&self, joined: &Joined) {
        self.slots[joined.slot].state.store(FREE, Ordering::Release);
    }
}

/// Spin a little, then give the core away: on an oversubscribed machine the thread being waited
/// for may need this one's core.
fn backoff(rounds: u32) {
    if rounds < 32 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A lone thread leads a group of itself, and the slot comes back for the next group.
    #[test]
    fn a_lone_inserter_leads_a_group_of_one_and_its_slot_is_reused() {
        let c = ConsolidationArray::default();
        for round in 0..(RING_SLOTS as u64 * 3) {
            let j = c.join(100);
            assert!(j.leader && j.offset == 0);
            assert_eq!(c.close(&j), Group { bytes: 100, members: 1 });
            c.publish(&j, Group { bytes: 100, members: 1 }, round * 1000, round, round + 1);
            assert_eq!(c.base(&j), round * 1000);
            assert_eq!(c.finish(&j), Some((round, round + 1)));
            c.recycle(&j);
        }
    }

    /// Members that join before the close share the leader's reservation at disjoint offsets;
    /// one that would pass the group limit goes elsewhere; only the last to finish releases.
    #[test]
    fn members_share_one_reservation_and_the_last_to_finish_releases() {
        let c = ConsolidationArray::default();
        let a = c.join(40);
        let b = c.join(24);
        let big = c.join(GROUP_LIMIT_BYTES - 50);
        assert!(a.leader && !b.leader && big.leader, "{a:?} {b:?} {big:?}");
        assert_eq!(b.offset, 40);
        assert_eq!(c.open_members(), 3);
        let group = c.close(&a);
        assert_eq!(group, Group { bytes: 64, members: 2 });
        c.publish(&a, group, 4096, 7, 8);
        assert_eq!((c.base(&a), c.base(&b)), (4096, 4136));
        assert_eq!(c.finish(&b), None, "the leader still copies");
        assert_eq!(c.finish(&a), Some((7, 8)));
        c.recycle(&a);
        let g = c.close(&big);
        c.publish(&big, g, NO_ROOM, 0, 0);
        assert_eq!(c.base(&big), NO_ROOM);
    }

    /// Threads racing through join/close/publish/finish: every member gets a disjoint range
    /// inside its group's, and every group is released exactly once.
    #[test]
    fn racing_inserters_get_disjoint_ranges_and_each_group_is_released_once() {
        let c = Arc::new(ConsolidationArray::default());
        let insert = Arc::new(parking_lot::Mutex::new((0u64, Vec::<(u64, u64)>::new())));
        let released = Arc::new(parking_lot::Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (c, insert, released) = (c.clone(), insert.clone(), released.clone());
                s.spawn(move || {
                    for i in 0..2000u64 {
                        let size = 8 * (1 + (t + i) % 9);
                        let j = c.join(size);
                        if j.leader {
                            let mut g = insert.lock();
                            let group = c.close(&j);
                            let base = g.0;
                            g.0 += group.bytes;
                            c.publish(&j, group, base, base, g.0);
                        }
                        let at = c.base(&j);
                        insert.lock().1.push((at, at + size));
                        if let Some((key, _)) = c.finish(&j) {
                            released.lock().push(key);
                            c.recycle(&j);
                        }
                    }
                });
            }
        });
        let (end, mut ranges) = std::mem::take(&mut *insert.lock());
        ranges.sort_unstable();
        assert_eq!(ranges.len(), 8000);
        assert!(ranges.windows(2).all(|w| w[0].1 == w[1].0), "ranges tile the log");
        assert_eq!((ranges[0].0, ranges[7999].1), (0, end));
        let mut keys = std::mem::take(&mut *released.lock());
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n, "a group released twice");
    }
}

//! The central log's capture of the buffer pool's stores (`log=central`), and store groups:
//! the stores of one row update (its undo record and the row), or of one B+tree insert into a
//! leaf with room (its system undo record, the leaf, the free mark), inserted into the log as
//! one reservation instead of one each (issue 35: TPC-B made 18 reservations of the one log a
//! transaction, each a round trip through the consolidation array and the reservation lock).
//!
//! ARIES logs a record per update; our redo records are physical, one per store, so an update
//! was 4 of them (undo record, undo header, row, row checksum). A **store group** collects the
//! stores a thread makes while it holds a group of the buffer pool open
//! ([`pmem::Region::store_group`], which calls [`Capture`]'s `on_group`) in a thread-local
//! buffer and appends
//! them, in the order they were made, as consecutive records of one reservation when the last
//! guard drops ([`super::log::Log::append_batch`]); the log's format does not change, and a
//! crash keeps a prefix of them, as it keeps a prefix of single records.
//!
//! **Where a group may be opened** (the caller's obligation): only around stores to bytes no
//! other thread can store to before the group ends — this worker's own undo logs, a row it
//! holds exclusively under its page latch, a B+tree leaf it holds latched until after the
//! group closes (never around a split: its page allocation stores to the shared bitmap) — and
//! only inside one operation of the engine's gate. A group's records then reach the log after its stores land in the buffer pool but
//! before the operation ends, so everything that reads the log's end with operations
//! quiesced (the checkpoint, the Pelley flusher's recLSN, the WAL rule before a write-back)
//! sees them as before; and no store of another thread to the same bytes can be logged
//! between a store and its record. A store the group cannot hold (larger than one record, or
//! for another log) first appends what is buffered, so a thread's records stay in its order.
//! The distributed logs (`log=txn:N|page:N`) do not group: each of their stores takes a GSN.

use super::log::{record_bytes, Log, BATCH_LIMIT_BYTES, MAX_PAYLOAD};
use pmem::{Events, StoreObserver};
use std::cell::RefCell;
use std::sync::Arc;

/// The observer installed on the buffer pool: every store becomes a redo record (buffered
/// while the thread has a store group open).
pub(crate) struct Capture(pub Arc<Log>);

impl StoreObserver for Capture {
    fn events(&self) -> Events {
        Events::STORE | Events::GROUP
    }

    /// Groups nest: the outermost one's close appends what the thread buffered.
    fn on_group(&self, open: bool) {
        BUFFER.with(|b| {
            let mut b = b.borrow_mut();
            if open {
                b.depth += 1;
            } else if b.depth > 0 {
                b.depth -= 1;
                if b.depth == 0 {
                    b.flush();
                }
            }
        });
    }

    fn on_store(&self, offset: u64, bytes: &[u8]) {
        let grouped = BUFFER.with(|b| {
            let mut b = b.borrow_mut();
            if b.depth == 0 {
                return false;
            }
            let same_log = b.log.as_ref().is_none_or(|l| Arc::ptr_eq(l, &self.0));
            let size = record_bytes(bytes.len());
            if !same_log || b.bytes + size > BATCH_LIMIT_BYTES {
                b.flush();
            }
            if bytes.len() > MAX_PAYLOAD {
                return false;
            }
            b.log.get_or_insert_with(|| self.0.clone());
            let start = b.data.len();
            b.data.extend_from_slice(bytes);
            b.stores.push((offset, start, bytes.len()));
            b.bytes += size;
            true
        });
        if !grouped {
            self.0.append(offset, bytes);
        }
    }
}

/// A thread's open store group: the stores it buffered and the log they go to.
#[derive(Default)]
struct Buffer {
    /// Guards alive on this thread (groups nest; the outermost one appends).
    depth: u32,
    log: Option<Arc<Log>>,
    /// (region offset, start in `data`, length) of each buffered store, in order.
    stores: Vec<(u64, usize, usize)>,
    data: Vec<u8>,
    /// Record bytes the buffered stores will take.
    bytes: u64,
}

impl Buffer {
    /// Appends the buffered stores to their log as one batch; keeps the allocations.
    fn flush(&mut self) {
        if let Some(log) = self.log.take() {
            let records: Vec<(u64, &[u8])> = self
                .stores
                .iter()
                .map(|&(offset, start, len)| (offset, &self.data[start..start + len]))
                .collect();
            log.append_batch(&records);
        }
        self.stores.clear();
        self.data.clear();
        self.bytes = 0;
    }
}

thread_local! {
    static BUFFER: RefCell<Buffer> = RefCell::new(Buffer::default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::log::{scan, LogInsert};
    use pmem::{Medium, Region, RegionOptions};

    const AREA: u64 = 4096;
    const CAPACITY: u64 = 16 << 20;

    fn log(insert: LogInsert) -> (Region, Arc<Log>) {
        let region = Region::open(&RegionOptions::new(Medium::Dram, AREA + CAPACITY + 4096))
            .expect("a dram region");
        let device =
            Arc::new(crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap());
        (region, Arc::new(Log::new(device, AREA, CAPACITY, 0, 0, insert)))
    }

    /// A store group of `capture` on this thread, as `Region::store_group` opens one.
    struct Group<'c>(&'c Capture);

    impl<'c> Group<'c> {
        fn open(capture: &'c Capture) -> Group<'c> {
            capture.on_group(true);
            Group(capture)
        }
    }

    impl Drop for Group<'_> {
        fn drop(&mut self) {
            self.0.on_group(false);
        }
    }

    /// Store `i` of thread `t`: small ones, and every 9th past one record (appended alone).
    fn payload(t: u64, i: u64) -> Vec<u8> {
        let len = if i % 9 == 8 { MAX_PAYLOAD + 10 } else { (i % 5 * 40 + t + 1) as usize };
        (0..len).map(|j| (t * 13 + i * 5 + j as u64) as u8).collect()
    }

    /// Concurrent threads log stores in groups of 1-6 (a group holding a store larger than a
    /// record, nested guards), in every insertion mode; read back, each thread's stores are all
    /// there, whole and in its order, and a thread alone takes one reservation per group.
    /// Would catch a group appended out of order, a lost buffered store, a big store logged
    /// before the ones buffered ahead of it, or a group that still takes one insert per store.
    #[test]
    fn grouped_stores_are_read_back_in_each_threads_order_with_one_insert_per_group() {
        for insert in [LogInsert::Consolidated, LogInsert::Aether, LogInsert::Locked] {
            let (region, log) = log(insert);
            let (threads, per) = (3u64, 400u64);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let capture = Capture(log.clone());
                    s.spawn(move || {
                        let mut i = 0;
                        while i < per {
                            let _outer = Group::open(&capture);
                            for _ in 0..(i % 6 + 1).min(per - i) {
                                let _inner = (i % 2 == 0).then(|| Group::open(&capture));
                                capture.on_store((t << 40) | (i << 20), &payload(t, i));
                                i += 1;
                            }
                        }
                    });
                }
            });
            log.force(log.appended(), false).unwrap();
            let mut seen = vec![Vec::new(); threads as usize];
            scan(&region, AREA, CAPACITY, 0, u64::MAX, |r| {
                let (t, i) = (r.offset >> 40, (r.offset >> 20) & 0xfffff);
                seen[t as usize].push((i, r.offset & 0xfffff, r.bytes.to_vec()));
            })
            .unwrap();
            for (t, records) in seen.iter().enumerate() {
                let mut rebuilt: Vec<(u64, Vec<u8>)> = Vec::new();
                for (i, chunk_at, bytes) in records {
                    match rebuilt.last_mut() {
                        Some((last, b)) if last == i && *chunk_at == b.len() as u64 => {
                            b.extend_from_slice(bytes)
                        }
                        _ => rebuilt.push((*i, bytes.clone())),
                    }
                }
                let want: Vec<_> = (0..per).map(|i| (i, payload(t as u64, i))).collect();
                assert_eq!(rebuilt, want, "{insert:?}: thread {t}'s stores");
            }
        }
        // One thread, small stores: one reservation per group of 4.
        let (_region, log) = log(LogInsert::Aether);
        let capture = Capture(log.clone());
        let before = log.reservation_locks();
        for g in 0..10u64 {
            let _group = Group::open(&capture);
            for i in 0..4 {
                capture.on_store(g * 4096 + i * 64, &[g as u8; 48]);
            }
        }
        assert_eq!(log.reservation_locks() - before, 10, "one insert per group");
        assert!(log.thread_end() > 0 && log.thread_end() == log.appended());
    }

    /// A group's stores for two logs (two `wal` engines in one thread) go each to its own
    /// log, in order: the first log's buffer is appended when a store for the second comes.
    #[test]
    fn a_group_that_changes_log_appends_what_it_holds_first() {
        let (region_a, a) = log(LogInsert::Consolidated);
        let (region_b, b) = log(LogInsert::Consolidated);
        {
            let first = Capture(a.clone());
            let _group = Group::open(&first);
            first.on_store(8, &[1; 8]);
            Capture(b.clone()).on_store(16, &[2; 8]);
            first.on_store(24, &[3; 8]);
        }
        for (region, log, want) in
            [(&region_a, &a, vec![(8, 1u8), (24, 3)]), (&region_b, &b, vec![(16, 2)])]
        {
            log.force(log.appended(), false).unwrap();
            let mut got = Vec::new();
            scan(region, AREA, CAPACITY, 0, u64::MAX, |r| got.push((r.offset, r.bytes[0])))
                .unwrap();
            assert_eq!(got, want);
        }
    }
}

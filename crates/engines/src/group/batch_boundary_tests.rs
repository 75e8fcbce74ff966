//! Regression (issue 37, hole (a) for `group`'s batch log): the batch persist (writer) and
//! recovery's [`BatchLog::restore`] (reader) must agree on the log's extent when a batch fills
//! it to the last line, or one line short, and where its offsets end and its lines begin when
//! the capacity puts that boundary exactly on a page or one entry either side (1023, 1024 and
//! 1025 lines: 1024 offsets fill one 8 KiB page). A disagreement refuses or misreads the log
//! of a full batch, so a crash inside its persist tears the image. Pelley et al., VLDB 2014,
//! §3.2.
//!
//! Each case persists a stale full batch first (entries beyond the next batch's end, an older
//! id), then a batch of `n` lines cut before each of its fences (and at stores between), and
//! checks that recovery leaves exactly the image before the batch or after it.

use super::*;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, RegionOptions};

/// The image region's lines: room for the dirty lines spread two apart.
fn image_bytes(capacity: u64) -> u64 {
    (2 * (capacity + 1) * CACHE_LINE).next_multiple_of(PAGE_SIZE_U64)
}

/// Every line of the image filled with `tag` and its line number.
fn pattern(lines: &[u64], tag: u8) -> Vec<(u64, [u8; LINE])> {
    lines
        .iter()
        .map(|l| {
            let mut b = [tag; LINE];
            b[..8].copy_from_slice(&l.to_le_bytes());
            (*l, b)
        })
        .collect()
}

struct Setup {
    nvram: Region,
    log: BatchLog,
    image_bytes: u64,
}

fn setup(capacity: u64) -> Setup {
    let layout = LogLayout::for_capacity(capacity);
    let image_bytes = image_bytes(capacity);
    let size = layout.base() + image_bytes;
    let nvram = Region::open(&RegionOptions::new(Medium::Sim, size)).expect("a sim region");
    BatchLog::format(&nvram, layout);
    let log = BatchLog::open(&nvram, size / PAGE_SIZE_U64, None).expect("a formatted log");
    Setup { nvram, log, image_bytes }
}

/// Persists batch `batch` writing `lines` with `tag` (a copy of the image is the staging).
fn persist(s: &Setup, batch: u64, lines: &[u64], tag: u8, threads: usize) -> Result<u64> {
    let base = s.log.layout.base();
    let staging = Region::open(&RegionOptions::new(Medium::Dram, s.image_bytes)).expect("dram");
    staging.write(0, s.nvram.read(base, s.image_bytes as usize));
    let dirty = DirtyLines::new(s.image_bytes);
    for (l, bytes) in pattern(lines, tag) {
        staging.write(l * CACHE_LINE, &bytes);
        dirty.mark(l * CACHE_LINE, CACHE_LINE);
    }
    s.log.persist(batch, &staging, &dirty, threads, &|| {})
}

/// The tags the image's `lines` hold (one per line; 0 for a line that is neither).
fn tags(nvram: &Region, layout: LogLayout, lines: &[u64]) -> Vec<u8> {
    lines
        .iter()
        .map(|l| {
            let b = nvram.read(layout.base() + l * CACHE_LINE, LINE);
            let ok = b[..8] == l.to_le_bytes() && b[8..].iter().all(|x| *x == b[8]);
            if ok {
                b[8]
            } else {
                0
            }
        })
        .collect()
}

/// Batch 2 of `n` lines over a stale full batch 1, cut at `point`; recovery must leave every
/// line at its batch-1 tag or every line at batch 2's.
fn cut_batch(capacity: u64, n: u64, point: CrashPoint, policy: CrashPolicy, threads: usize) {
    let s = setup(capacity);
    let stale: Vec<u64> = (0..capacity).map(|i| 2 * i + 1).collect();
    persist(&s, 1, &stale, 1, threads).expect("a full batch fits");
    let lines: Vec<u64> = (0..n).map(|i| 2 * i).collect();
    persist(&s, 2, &lines, 2, threads).expect("batch 2 fits");
    let sim = s.nvram.sim().expect("sim");
    sim.arm(point, policy, n ^ point.count);
    persist(&s, 3, &lines, 3, threads).expect("batch 3 fits");
    let Some(image) = sim.take_image() else { return };
    let crashed = Region::from_image(&image, &RegionOptions::default()).expect("image");
    let pages = crashed.len() / PAGE_SIZE_U64;
    let what = format!("capacity {capacity}, batch of {n}, {threads} threads, {point:?} {policy}");
    let log = BatchLog::open(&crashed, pages, None).unwrap_or_else(|e| panic!("{what}: {e}"));
    log.restore(s.image_bytes).unwrap_or_else(|e| panic!("{what}: restore: {e}"));
    let got = tags(&crashed, log.layout, &lines);
    let all = |t: u8| got.iter().all(|g| *g == t);
    assert!(
        all(2) || all(3),
        "{what}: torn batch: {} lines of 3, {} of 2",
        count(&got, 3),
        count(&got, 2)
    );
    assert!(tags(&crashed, log.layout, &stale).iter().all(|t| *t == 1), "{what}: stale lines");
}

fn count(tags: &[u8], t: u8) -> usize {
    tags.iter().filter(|g| **g == t).count()
}

/// Fences and stores of one batch-3 persist of `n` lines (what `cut_batch` sweeps).
fn events(capacity: u64, n: u64, threads: usize) -> (u64, u64) {
    let s = setup(capacity);
    let lines: Vec<u64> = (0..n).map(|i| 2 * i).collect();
    persist(&s, 1, &lines, 1, threads).expect("fits");
    let (stores, fences) = s.nvram.sim().expect("sim").event_counts();
    persist(&s, 2, &lines, 2, threads).expect("fits");
    let (stores2, fences2) = s.nvram.sim().expect("sim").event_counts();
    (stores2 - stores, fences2 - fences)
}

#[test]
fn batch_log_filled_to_its_capacity_at_a_page_boundary_recovers_all_or_nothing() {
    for capacity in [1023, 1024, 1025] {
        for n in [capacity - 1, capacity] {
            for threads in [1, 3] {
                let (stores, fences) = events(capacity, n, threads);
                assert!(fences >= 4, "four barriers: {fences}");
                for count in 1..=fences + 1 {
                    let point = CrashPoint { event: CrashEvent::Fence, count };
                    cut_batch(capacity, n, point, CrashPolicy::Persisted, threads);
                }
                // Stores between the barriers, including each control word's.
                for count in (1..=stores + 1).step_by((stores as usize / 7).max(1)) {
                    let point = CrashPoint { event: CrashEvent::Store, count };
                    cut_batch(capacity, n, point, CrashPolicy::Evict, threads);
                }
                cut_batch(
                    capacity,
                    n,
                    CrashPoint { event: CrashEvent::Store, count: stores },
                    CrashPolicy::Torn,
                    threads,
                );
            }
        }
        // One line more than the log holds is refused before anything is written.
        let s = setup(capacity);
        let lines: Vec<u64> = (0..=capacity).map(|i| 2 * i).collect();
        let before = s.nvram.sim().expect("sim").event_counts();
        let refused = persist(&s, 1, &lines, 1, 1);
        assert!(matches!(refused, Err(DbError::TxnTooLarge(_))), "{refused:?}");
        // Writing the staging copy is the only store (it is DRAM, not this region).
        assert_eq!(s.nvram.sim().expect("sim").event_counts(), before, "a refused batch wrote");
    }
}

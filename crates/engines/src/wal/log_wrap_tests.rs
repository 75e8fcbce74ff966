//! Regression (issue 37, hole (a)): the circular log's writer ([`Log::reserve`]: skip the last
//! bytes, or pad them) and reader ([`scan`]) must agree where a lap ends for every space left at
//! the end of the area, in particular when it is exactly the pad record's size (32 bytes) or
//! one word either side; a disagreement loses every record after the wrap. Laps are built to
//! end 0..=64 bytes short of the area's end over a stale earlier lap, records are appended
//! across the wrap (one that fits the space exactly, and ones that do not), forced, and the
//! crash image is read back from a redo point before the wrap.

use super::*;
use pmem::{CrashPolicy, Medium, RegionOptions};
use std::sync::Arc;

const AREA: u64 = 4096;
const CAPACITY: u64 = 64 << 10;
/// Payload of the filler records.
const FILL: u64 = 200;

/// A store record of exactly `size` bytes (header, payload, trailer) carrying `id`.
fn record(log: &Log, id: u64, size: u64) -> u64 {
    assert!(size >= HEADER + TRAILER && size.is_multiple_of(8));
    let payload = vec![id as u8; (size - HEADER - TRAILER) as usize];
    log.append_one(KIND_STORE, id << 16, &payload).expect("room in the log")
}

/// Appends records with ids from `*next` until the log ends exactly at `target` (no wrap in
/// between: `target` lies in the lap the log is in).
fn fill_to(log: &Log, target: u64, next: &mut u64) {
    let filler = HEADER + FILL + TRAILER;
    while target - log.appended() >= 2 * filler + HEADER + TRAILER {
        record(log, *next, filler);
        *next += 1;
    }
    let rest = target - log.appended();
    if rest > 0 {
        record(log, *next, rest);
        *next += 1;
    }
    assert_eq!(log.appended(), target);
}

/// Records of `sizes` (ids from `first`) appended by one thread each while the insert point is
/// held, so that they join one group of the consolidation array in id order: the group, not
/// each record, is what must fit before the end of the area or be padded past it.
fn record_group(log: &Log, first: u64, sizes: &[u64]) {
    let carray = log.carray.as_ref().expect("consolidated");
    std::thread::scope(|s| {
        let insert_point = log.reserved.lock();
        for (i, size) in sizes.iter().enumerate() {
            s.spawn(move || record(log, first + i as u64, *size));
            while carray.open_members() < i as u64 + 1 {
                std::thread::yield_now();
            }
        }
        drop(insert_point);
    });
    assert_eq!(log.groups().1 - log.groups().0 + 1, sizes.len() as u64, "one group of all");
}

/// One lap ending `gap` bytes short of the area's end, then records of `sizes` across the wrap;
/// returns the ids read back from the redo point after a crash, and the ids expected.
fn lap_then_wrap(gap: u64, sizes: &[u64], insert: LogInsert) -> (Vec<u64>, Vec<u64>) {
    let options = RegionOptions::new(Medium::Sim, AREA + CAPACITY + 4096);
    let region = Region::open(&options).expect("a sim region");
    let device =
        Arc::new(crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap());
    let log = Log::new(device, AREA, CAPACITY, 0, 0, insert);
    let mut next = 1u64;
    // Lap 1 leaves stale records (valid headers and checksums, older LSNs) everywhere.
    fill_to(&log, CAPACITY - 8, &mut next);
    log.force(log.appended(), false).unwrap();
    log.truncate(CAPACITY - 8);
    // Lap 2 ends `gap` short of the end; the redo point is a few records before that.
    let lap_end = 2 * CAPACITY - gap;
    fill_to(&log, lap_end - 4 * (HEADER + FILL + TRAILER), &mut next);
    log.force(log.appended(), false).unwrap();
    let redo = log.appended();
    log.truncate(redo);
    let first = next;
    fill_to(&log, lap_end, &mut next);
    if insert == LogInsert::Consolidated {
        record_group(&log, next, sizes);
        next += sizes.len() as u64;
    } else {
        for size in sizes {
            record(&log, next, *size);
            next += 1;
        }
    }
    log.force(log.appended(), false).unwrap();
    let image = region.crash_image(CrashPolicy::Persisted, 7).expect("a sim region");
    let crashed = Region::from_image(&image, &RegionOptions::default()).unwrap();
    let mut got = Vec::new();
    let (end, _) = scan(&crashed, AREA, CAPACITY, redo, u64::MAX, |r| got.push(r.offset >> 16))
        .expect("the log reads back");
    assert_eq!(end, log.appended(), "gap {gap}, sizes {sizes:?}: the log ends where it did");
    (got, (first..next).collect())
}

#[test]
fn log_laps_ending_near_the_wrap_pad_size_read_back_across_the_wrap() {
    for insert in [LogInsert::Aether, LogInsert::Locked, LogInsert::Consolidated] {
        for gap in (0..=64).step_by(8) {
            let mut shapes: Vec<Vec<u64>> = vec![
                vec![HEADER + TRAILER + 64, 48, 4096],
                vec![HEADER + TRAILER; 3],
                vec![HEADER + TRAILER + MAX_PAYLOAD as u64, 40],
            ];
            // A first record exactly the size of the space left, and one word larger.
            if gap >= TAIL_SKIP {
                shapes.push(vec![gap, 64, 64]);
                shapes.push(vec![gap + 8, 64]);
            }
            for sizes in shapes {
                let (got, want) = lap_then_wrap(gap, &sizes, insert);
                assert_eq!(got, want, "{insert:?}, lap {gap} bytes short, then {sizes:?}");
            }
        }
    }
}

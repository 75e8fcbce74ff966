//! Regression (issue 37, hole (a)): the circular log's writer ([`Log::reserve`]: skip the last
//! bytes, or pad them) and reader ([`scan`]) must agree where a lap ends for every space left at
//! the end of the area, in particular when it is exactly the pad record's size (32 bytes) or
//! one word either side; a disagreement loses every record after the wrap. Laps are built to
//! end 0..=64 bytes short of the area's end over a stale earlier lap, records are appended
//! across the wrap (one that fits the space exactly, and ones that do not), forced, and the
//! crash image is read back from a redo point before the wrap. The distributed logs
//! (`log=txn:N|page:N`, [`super::super::dlog`]) are the same circular log over adjacent slices
//! of the area, with a GSN in each record: their case wraps the middle one of three slices and
//! also checks that recovery's erasing of its stale tail stays inside its slice.

use super::*;
use pmem::{CrashPolicy, Medium, RegionOptions};
use std::sync::Arc;

const AREA: u64 = 4096;
const CAPACITY: u64 = 64 << 10;
/// Payload of the filler records.
const FILL: u64 = 200;

/// Which record format a log writes: the central log's stores, or a distributed log's GSN
/// stores (whose GSN is the record's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Store,
    Gsn,
}

thread_local! {
    /// The format `record` writes on this thread (the group helper's threads inherit it).
    static FORMAT: std::cell::Cell<Format> = const { std::cell::Cell::new(Format::Store) };
}

/// A store record of exactly `size` bytes (header, payload, trailer) carrying `id`.
fn record(log: &Log, id: u64, size: u64) -> u64 {
    record_as(FORMAT.with(|f| f.get()), log, id, size)
}

fn record_as(format: Format, log: &Log, id: u64, size: u64) -> u64 {
    let prefix = if format == Format::Gsn { GSN_BYTES as u64 } else { 0 };
    assert!(size >= HEADER + TRAILER + prefix && size.is_multiple_of(8));
    let payload = vec![id as u8; (size - HEADER - TRAILER - prefix) as usize];
    match format {
        Format::Store => log.append_one(KIND_STORE, id << 16, &payload),
        Format::Gsn => log.append_gsn(id << 16, &payload, &mut || id).map(|(end, _)| end),
    }
    .expect("room in the log")
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
        let format = FORMAT.with(|f| f.get());
        for (i, size) in sizes.iter().enumerate() {
            s.spawn(move || record_as(format, log, first + i as u64, *size));
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
    let (got, want, _) = wrap_log(&region, &log, AREA, gap, sizes, insert, 1);
    (got, want)
}

/// Drives `log` (at `area`) through a first lap, a second ending `gap` bytes short of the end
/// and records of `sizes` across the wrap (ids from `next`), forces it and reads the persisted
/// crash image back from the redo point: the ids read, the ids expected, and the image.
fn wrap_log(
    region: &Region,
    log: &Log,
    area: u64,
    gap: u64,
    sizes: &[u64],
    insert: LogInsert,
    mut next: u64,
) -> (Vec<u64>, Vec<u64>, Region) {
    // Lap 1 leaves stale records (valid headers and checksums, older LSNs) everywhere.
    fill_to(log, CAPACITY - 8, &mut next);
    log.force(log.appended(), false).unwrap();
    log.truncate(CAPACITY - 8);
    // Lap 2 ends `gap` short of the end; the redo point is a few records before that.
    let lap_end = 2 * CAPACITY - gap;
    fill_to(log, lap_end - 4 * (HEADER + FILL + TRAILER), &mut next);
    log.force(log.appended(), false).unwrap();
    let redo = log.appended();
    log.truncate(redo);
    let first = next;
    fill_to(log, lap_end, &mut next);
    if insert == LogInsert::Consolidated {
        record_group(log, next, sizes);
        next += sizes.len() as u64;
    } else {
        for size in sizes {
            record(log, next, *size);
            next += 1;
        }
    }
    log.force(log.appended(), false).unwrap();
    let image = region.crash_image(CrashPolicy::Persisted, 7).expect("a sim region");
    let crashed = Region::from_image(&image, &RegionOptions::default()).unwrap();
    let mut got = Vec::new();
    let (end, _) = scan(&crashed, area, CAPACITY, redo, u64::MAX, |r| {
        if let Some(gsn) = r.gsn {
            assert_eq!(gsn, r.offset >> 16, "a GSN store reads back with its GSN");
        }
        got.push(r.offset >> 16)
    })
    .expect("the log reads back");
    assert_eq!(end, log.appended(), "gap {gap}, sizes {sizes:?}: the log ends where it did");
    // Recovery then erases the stale tail past the end (inside this log's slice only).
    erase_stale_tail(&crashed, area, CAPACITY, redo, end);
    (got, (first..next).collect(), crashed)
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

/// The distributed logs' case: three logs in adjacent slices (as `log=txn:3` lays them out),
/// GSN records; the middle one wraps at every gap; its neighbours must read back whole after
/// recovery erased the middle one's stale tail.
#[test]
fn distributed_log_slices_ending_near_the_wrap_pad_size_read_back_across_the_wrap() {
    FORMAT.with(|f| f.set(Format::Gsn));
    // GSN stores never join a consolidation group (their GSN is taken record by record under
    // the reservation lock), so `Consolidated` inserts them as `Aether` does.
    for insert in [LogInsert::Aether, LogInsert::Locked] {
        for gap in (0..=64).step_by(8) {
            let mut shapes: Vec<Vec<u64>> = vec![
                vec![HEADER + TRAILER + 64, 48, 4096],
                vec![HEADER + TRAILER + GSN_BYTES as u64; 3],
            ];
            if gap >= TAIL_SKIP + GSN_BYTES as u64 {
                shapes.push(vec![gap, 64, 64]);
                shapes.push(vec![gap + 8, 64]);
            }
            for sizes in shapes {
                let options = RegionOptions::new(Medium::Sim, AREA + 3 * CAPACITY + 4096);
                let region = Region::open(&options).expect("a sim region");
                let device = Arc::new(
                    crate::device::Device::open(&region, crate::device::Io::Nvm, "wal").unwrap(),
                );
                let at = |i: u64| AREA + i * CAPACITY;
                let logs: Vec<Log> = (0..3)
                    .map(|i| Log::new(device.clone(), at(i), CAPACITY, 0, 0, insert))
                    .collect();
                // Neighbours: one lap each, up to the last word before the middle slice and to
                // the last word of the area.
                let mut next = 1u64 << 20;
                let mut neighbours = Vec::new();
                for i in [0, 2] {
                    let first = next;
                    fill_to(&logs[i], CAPACITY - 8, &mut next);
                    logs[i].force(logs[i].appended(), false).unwrap();
                    neighbours.push((i, (first..next).collect::<Vec<u64>>()));
                }
                let (got, want, crashed) =
                    wrap_log(&region, &logs[1], at(1), gap, &sizes, insert, 1);
                assert_eq!(got, want, "{insert:?}, lap {gap} bytes short, then {sizes:?}");
                // Recovery of the middle log had it ended `gap` short of its slice's end (no
                // wrap yet): its stale-tail erase wraps too, never into the next slice.
                let unwrapped = Region::dram_copy(&crashed.snapshot(), &RegionOptions::default())
                    .expect("a copy");
                let lap_end = 2 * CAPACITY - gap;
                erase_stale_tail(&unwrapped, at(1), CAPACITY, lap_end - 4096, lap_end);
                for image in [&crashed, &unwrapped] {
                    for (i, ids) in &neighbours {
                        let mut read = Vec::new();
                        scan(image, at(*i as u64), CAPACITY, 0, u64::MAX, |r| {
                            read.push(r.offset >> 16)
                        })
                        .expect("a neighbour reads back");
                        assert_eq!(&read, ids, "{insert:?}, gap {gap}, {sizes:?}: log {i} damaged");
                    }
                }
            }
        }
    }
}

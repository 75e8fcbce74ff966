//! Crash test of the table layer's large values: a writer stores values of up to 1 MiB (each
//! spread over hundreds of engine rows) while the `sim` medium cuts a crash image at a fence;
//! reopened on the image, every value must be whole (one that was written, never a mix or a
//! prefix) or absent, and every acknowledged write must be there. It would catch a value whose
//! rows were written by more than one engine transaction, and an acknowledgement sent before
//! the commit was durable (shown with `LayerFault::AckBeforeDurable` on group commit), and a
//! table length (`len()`, kept in counter rows) that disagrees with the entries recovered.

use nvmdb::pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use nvmdb::{Db, EngineOptions, LayerFault};
use std::collections::HashMap;

const KEYS: u64 = 6;
const WRITES: u64 = 18;
/// In the acknowledged map: the key's removal was acknowledged.
const REMOVED: u64 = u64::MAX;

fn region_options() -> RegionOptions {
    RegionOptions::new(Medium::Sim, 64 << 20)
}

fn engine_options() -> EngineOptions {
    EngineOptions {
        workers: 2,
        undo_pages: 160,
        group: engines::group::Options { batch_period_ms: 5, ..Default::default() },
        wal: engines::wal::Options { log_bytes: 24 << 20, ..Default::default() },
        ..EngineOptions::default()
    }
}

/// Value of write `version`: a 16-byte header (version, length) then a pattern of both, so a
/// torn, truncated or mixed value is detected.
fn value(version: u64) -> Vec<u8> {
    let len = [300usize, 5000, 70_000, 1 << 20, 4096 * 3 + 17][(version % 5) as usize];
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&version.to_le_bytes());
    v.extend_from_slice(&(len as u64).to_le_bytes());
    v.extend((16..len).map(|i| (version.wrapping_mul(131) as usize + i * 7) as u8));
    v
}

fn whole(bytes: &[u8]) -> Option<u64> {
    let version = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    (value(version) == bytes).then_some(version)
}

fn open(engine: &str, region: Region) -> Db {
    let engine = nvmdb::engines::open(engine, region, &engine_options()).unwrap();
    Db::from_engine(engine, 2, Default::default())
}

/// Runs the writer, cutting at fence `cut` (none if 0). Returns acknowledged versions per key
/// (acknowledged before the cut), the image, and the fences the run took.
fn run(
    engine: &str,
    cut: u64,
    fault: Option<LayerFault>,
) -> (HashMap<u64, u64>, Option<Vec<u8>>, u64) {
    let mut db = open(engine, Region::open(&region_options()).unwrap());
    db.set_fault(fault);
    let sim = || db.region().and_then(|r| r.sim()).expect("sim medium");
    if cut > 0 {
        sim().arm(CrashPoint { event: CrashEvent::Fence, count: cut }, CrashPolicy::Torn, cut);
    }
    let mut acked = HashMap::new();
    for version in 1..=WRITES {
        let key = version % KEYS;
        db.write(|tx| tx.open_table::<u64>("blobs")?.insert(key, value(version)).map(|_| ()))
            .unwrap();
        if cut > 0 && sim().cut_taken() {
            break;
        }
        acked.insert(key, version);
    }
    // Remove a value too, so reclamation runs under the cut as well: while it is in flight,
    // key 0 may be present or absent; once acknowledged, it must be absent.
    let cut_before_remove = cut > 0 && sim().cut_taken();
    if !cut_before_remove {
        acked.remove(&0);
        db.write(|tx| tx.open_table::<u64>("blobs")?.remove(0).map(|_| ())).unwrap();
        if cut == 0 || !sim().cut_taken() {
            acked.insert(0, REMOVED);
        }
    }
    let fences = sim().event_counts().1;
    let image = sim().take_image();
    (acked, image, fences)
}

/// Reopens an image and checks it; returns the violations found.
fn check(engine: &str, image: &[u8], acked: &HashMap<u64, u64>) -> Vec<String> {
    let region = Region::from_image(image, &region_options()).unwrap();
    let db = open(engine, region);
    let mut bad = Vec::new();
    let found: Vec<(u64, Vec<u8>)> = db
        .read(|tx| match tx.open_table::<u64>("blobs")? {
            Some(t) => t.iter().collect(),
            None => Ok(Vec::new()),
        })
        .unwrap();
    // The counted length recovers with the entries it counts.
    let len = db.read(|tx| tx.open_table::<u64>("blobs")?.map_or(Ok(0), |t| t.len())).unwrap();
    if len != found.len() as u64 {
        bad.push(format!("len() says {len}, the table holds {} entries", found.len()));
    }
    let mut present = HashMap::new();
    for (key, bytes) in &found {
        match whole(bytes) {
            Some(v) if v % KEYS == *key => {
                present.insert(*key, v);
            }
            _ => bad.push(format!("key {key}: value of {} bytes is not whole", bytes.len())),
        }
    }
    for (key, version) in acked {
        match present.get(key) {
            None if *version == REMOVED => {}
            Some(v) if *version == REMOVED => {
                bad.push(format!("key {key}: removal acknowledged, found version {v}"))
            }
            Some(v) if v >= version => {}
            other => {
                bad.push(format!("key {key}: acknowledged version {version}, found {other:?}"))
            }
        }
    }
    if !db.check().unwrap().ok() {
        bad.push("engine integrity check failed".into());
    }
    bad
}

fn campaign(engine: &str, points: u64, fault: Option<LayerFault>) -> usize {
    let (_, _, fences) = run(engine, 0, fault);
    let mut violations = 0;
    for i in 1..=points {
        let cut = (fences * i / (points + 1)).max(1);
        let (acked, image, _) = run(engine, cut, fault);
        let Some(image) = image else { continue };
        let bad = check(engine, &image, &acked);
        if !bad.is_empty() && fault.is_none() {
            eprintln!("{engine} cut at fence {cut}: {bad:?}");
        }
        violations += bad.len();
    }
    violations
}

#[test]
fn large_values_are_whole_or_absent_after_a_crash() {
    for engine in ["inplace", "wal", "group"] {
        assert_eq!(campaign(engine, 5, None), 0, "{engine}");
    }
}

#[test]
fn crash_test_catches_acknowledging_before_durable() {
    // Group commit acknowledges at batch end; skipping the wait loses acknowledged writes.
    assert!(campaign("group", 5, Some(LayerFault::AckBeforeDurable)) > 0);
}

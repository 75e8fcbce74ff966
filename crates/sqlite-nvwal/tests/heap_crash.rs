//! The log and its heap across simulated crashes (Kim et al. §3.3, §4.3): a crash at any fence
//! or store of a script of commits, block allocations (one per frame) and WAL restarts leaves,
//! after recovery, no pending block, every in-use block in the list, every acknowledged commit
//! of the current generation, and a WAL that is byte-exact a frame prefix of what was written.
//! In `cs` mode a torn commit is dropped by its checksum, never accepted. Would catch: a block
//! leaked or lost in pending state, a link followed into a free block, a commit mark persisted
//! before its records, a stale record read as part of the log.

mod common;

use common::{frames, Script, PAGE};
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use sqlite_nvwal::store::Store;
use sqlite_nvwal::{HeapMode, NvwalOptions, SyncMode};

const REGION_BYTES: u64 = 12 << 20;

fn options(sync: SyncMode, heap: HeapMode) -> NvwalOptions {
    NvwalOptions { sync, heap, log_bytes: Some(4 << 20), ..NvwalOptions::default() }
}

/// What one crash left.
struct Trial {
    /// Frames the last acknowledged commit before the cut covered, with its generation.
    acked: Option<(u32, usize)>,
    /// Every generation's WAL as written, by generation number.
    models: Vec<Vec<u8>>,
    image: Option<Vec<u8>>,
}

/// Runs the script on a `sim` region armed to crash at `point`.
fn trial(o: &NvwalOptions, seed: u64, point: CrashPoint, policy: CrashPolicy) -> Trial {
    let region = Region::open(&RegionOptions::new(Medium::Sim, REGION_BYTES)).expect("sim");
    let store = Store::open(region, o).expect("format");
    store.mark_formatted();
    let sim = store.region().sim().expect("sim medium");
    sim.arm(point, policy, seed);
    let mut s = Script::new(seed);
    let mut models = vec![Vec::new()];
    let mut acked = None;
    for generation in 0..3 {
        // SQLite restarts the WAL only after a checkpoint put every frame in the database
        // file: from here on the old generation's frames need not survive.
        if !sim.cut_taken() {
            acked = None;
        }
        s.restart(&store);
        for _ in 0..6 {
            let n = 1 + (s.generation as usize + models.len()) % 3;
            let pages = s.pick(6, n);
            s.txn(&store, &pages);
            if !sim.cut_taken() {
                acked = Some((s.generation, frames(&s.model)));
            }
        }
        models.push(s.model.clone());
        if sim.cut_taken() || generation == 2 {
            break;
        }
    }
    Trial { acked, models, image: sim.take_image() }
}

/// Recovers a crash image and checks it; returns torn commits caught by checksum.
fn check(o: &NvwalOptions, t: &Trial, what: &str) -> u64 {
    let Some(image) = &t.image else { return 0 };
    let region =
        Region::from_image(image, &RegionOptions::new(Medium::Sim, REGION_BYTES)).expect("image");
    let store = Store::open(region, o).unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
    let (_, pending, _) = store.heap_census().unwrap_or_else(|e| panic!("{what}: heap: {e}"));
    assert_eq!(pending, 0, "{what}: pending blocks after recovery");
    let wal = store.wal_image();
    if frames(&wal) == 0 {
        // A header without frames (possibly torn: SQLite then ignores it) holds nothing.
        let durable = o.sync != SyncMode::Checksum;
        assert!(
            !durable || t.acked.is_none_or(|(_, n)| n == 0),
            "{what}: acknowledged frames lost"
        );
        return store.facts().torn_commits_by_checksum;
    }
    let generation = u32::from_be_bytes(wal[16..20].try_into().unwrap()) as usize;
    let model = t.models.get(generation).unwrap_or_else(|| panic!("{what}: generation?"));
    assert!(
        wal.len() <= model.len() && model[..wal.len()] == wal[..],
        "{what}: recovered WAL is not a prefix of generation {generation} as written"
    );
    assert_eq!((wal.len() - 32) % (PAGE + 24), 0, "{what}: partial frame");
    if o.sync != SyncMode::Checksum {
        if let Some((g, n)) = t.acked {
            if g as usize == generation {
                assert!(frames(&wal) >= n, "{what}: acknowledged frames {n} lost");
            }
        }
    }
    // Recovery itself is repeatable: reopening what it left gives the same WAL.
    let again = Store::open(store.region().clone(), o).expect("second recovery");
    assert!(again.wal_image() == wal, "{what}: second recovery differs");
    store.facts().torn_commits_by_checksum
}

fn sweep(o: &NvwalOptions, points: u64, step: u64) -> u64 {
    let mut torn = 0;
    for count in (1..points).step_by(step as usize) {
        for (i, policy) in CrashPolicy::ALL.into_iter().enumerate() {
            for event in [CrashEvent::Fence, CrashEvent::Store] {
                let point = CrashPoint { event, count };
                let seed = count * 7 + i as u64;
                let t = trial(o, seed, point, policy);
                torn += check(o, &t, &format!("{o:?} {point:?} {policy:?}"));
            }
        }
    }
    torn
}

#[test]
fn lazy_sync_with_per_frame_blocks_recovers_at_every_point() {
    sweep(&options(SyncMode::Lazy, HeapMode::PerFrame), 150, 7);
}

#[test]
fn eager_sync_with_the_user_heap_recovers_at_every_point() {
    sweep(&options(SyncMode::Eager, HeapMode::User), 150, 9);
}

#[test]
fn checksum_commit_never_accepts_a_torn_commit() {
    let torn = sweep(&options(SyncMode::Checksum, HeapMode::User), 120, 5);
    eprintln!("cs: torn commits caught by checksum: {torn}");
    assert!(torn > 0, "no crash point tore a commit: the sweep does not test the checksum");
}

/// The campaign behind the closing note's `cs` figures (slow): every point of the script.
#[test]
#[ignore]
fn checksum_commit_campaign() {
    let torn = sweep(&options(SyncMode::Checksum, HeapMode::User), 400, 1);
    eprintln!("cs: torn commits caught by checksum over 400 x 6 crash points: {torn}");
}

//! The Engine conformance suite on the In-Place Updates engine, on `dram` and on `sim`.
//! Would catch: any deviation from the trait's specified semantics (locks, abort, scans, errors).

use engines::{inplace::InPlace, EngineOptions};
use pmem::{Medium, Region, RegionOptions};
use storage::conformance::{run_all, Writers};
use storage::Engine;

fn make(medium: Medium) -> Box<dyn Engine> {
    let region = Region::open(&RegionOptions::new(medium, 16 << 20)).expect("region");
    let opts = EngineOptions { workers: 4, node_capacity: 8, ..Default::default() };
    Box::new(InPlace::open(region, &opts).expect("open"))
}

#[test]
fn conformance_on_dram() {
    run_all(&|| make(Medium::Dram), Writers::KeyLocks);
}

#[test]
fn conformance_on_sim() {
    run_all(&|| make(Medium::Sim), Writers::KeyLocks);
}

/// Pelley's protocol (`persist_wal` + `persist_page` under the page latch) keeps the trait's
/// semantics. Would catch: a page latch held into a lock wait or a second latch (deadlock), or a
/// page log left active between page updates.
#[test]
fn conformance_with_pelleys_protocol() {
    run_all(
        &|| {
            let region = Region::open(&RegionOptions::new(Medium::Sim, 16 << 20)).expect("region");
            let mut opts = EngineOptions { workers: 4, node_capacity: 8, ..Default::default() };
            opts.inplace.protocol = engines::inplace::Protocol::Pelley;
            Box::new(InPlace::open(region, &opts).expect("open")) as Box<dyn Engine>
        },
        Writers::KeyLocks,
    );
}

/// With slot hints (`index_hints=on`), every read first tries a slot a worker found before.
/// Would catch: a stale hint's row returned after a delete, re-insert, rollback or slot reuse.
#[test]
fn conformance_with_slot_hints() {
    for medium in [Medium::Dram, Medium::Sim] {
        run_all(
            &|| {
                let region = Region::open(&RegionOptions::new(medium, 16 << 20)).expect("region");
                let mut opts = EngineOptions { workers: 4, node_capacity: 8, ..Default::default() };
                opts.inplace.index_hints = true;
                Box::new(InPlace::open(region, &opts).expect("open")) as Box<dyn Engine>
            },
            Writers::KeyLocks,
        );
    }
}

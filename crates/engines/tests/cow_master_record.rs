//! Damage to `cow`'s master record and to the pages it reaches is `Corrupt` (or `Format` for a
//! region from an older layout), never a region that opens to other contents (issue 37).
//! Would catch: a zeroed or changed master word opening as an empty or older tree, a lost write
//! of the master naming a meta page or nodes reused since, a valid leaf copied over another one
//! returning its keys twice.

use engines::cow::{master_page, Cow, MASTER_MAGIC, MASTER_OFFSET};
use engines::EngineOptions;
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use std::collections::BTreeMap;
use storage::{DbError, Engine, TableSpec};

const ROW: u32 = 24;
const PAGE: usize = 8192;
const MASTER: usize = MASTER_OFFSET as usize;

type Model = BTreeMap<u64, Vec<u8>>;

fn options() -> EngineOptions {
    EngineOptions { workers: 2, node_capacity: 4, ..Default::default() }
}

fn row(key: u64, salt: u64) -> Vec<u8> {
    (0..ROW as u64).map(|i| (key * 31 + salt * 7 + i) as u8).collect()
}

fn reopen(image: &[u8]) -> Result<Cow, DbError> {
    let region =
        Region::from_image(image, &RegionOptions::new(Medium::Sim, 4 << 20)).expect("image region");
    Cow::open(region, &options())
}

/// Every row of table `t`, or the error a read returned.
fn contents(db: &dyn Engine) -> Result<Model, DbError> {
    let Some(t) = db.table("t") else { return Ok(Model::new()) };
    let mut tx = db.begin(0)?;
    let mut out = Model::new();
    tx.scan(t, 0, u64::MAX, usize::MAX, &mut |k, r| {
        out.insert(k, r.to_vec());
        true
    })?;
    tx.commit()?;
    Ok(out)
}

/// A region after `rounds` update commits over keys 0..40 step 2 (several levels at capacity
/// 4): its image after the load commit, its image at the end, and the final contents.
fn churned(rounds: u64) -> (Vec<u8>, Vec<u8>, Model) {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4 << 20)).expect("region");
    let db = Cow::open(region.clone(), &options()).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: ROW, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut model = Model::new();
    let mut tx = db.begin(0).expect("begin");
    for k in (0..40).step_by(2) {
        tx.insert(t, k, &row(k, 0)).expect("insert");
        model.insert(k, row(k, 0));
    }
    tx.commit().expect("commit");
    let loaded = region.crash_image(CrashPolicy::Persisted, 0).expect("sim");
    for round in 1..=rounds {
        let mut tx = db.begin(0).expect("begin");
        for k in (0..40).step_by(2) {
            assert!(tx.update(t, k, 0, &row(k, round)[..8]).expect("update"));
            model.get_mut(&k).expect("key")[..8].copy_from_slice(&row(k, round)[..8]);
        }
        tx.commit().expect("commit");
    }
    drop(db);
    let end = region.crash_image(CrashPolicy::Persisted, 0).expect("sim");
    (loaded, end, model)
}

/// Opening `image` fails as damage, or (damage that changed nothing) gives `model` back.
fn corrupt_or_same(image: &[u8], model: &Model, what: &str) -> bool {
    match reopen(image) {
        Err(DbError::Corrupt(_)) | Err(DbError::Format(_)) => true,
        Err(e) => panic!("{what}: unexpected error {e}"),
        Ok(db) => match contents(&db) {
            Err(DbError::Corrupt(_)) => true,
            Err(e) => panic!("{what}: unexpected error on scan {e}"),
            Ok(got) => {
                assert_eq!(&got, model, "{what}: opened to other contents");
                db.check_integrity().map_err(|e| panic!("{what}: integrity: {e}")).is_err()
            }
        },
    }
}

/// Regression (`nvmdb fuzz --engine cow --seed 12`: 313 of 5,000 cases, e.g. case 92 "page 2
/// zeroed -> table usertable is missing"): a damaged master record opened as an empty or older
/// tree. Zeroed, bit-flipped, overwritten and lost-write master records are all `Corrupt`.
#[test]
fn a_damaged_master_record_is_corrupt_not_an_older_tree() {
    let (loaded, end, model) = churned(30);
    let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
    let mut zeroed = end.clone();
    zeroed[MASTER..MASTER + PAGE].fill(0);
    damaged.push(("master page zeroed".into(), zeroed));
    for bit in 0..64 {
        let mut image = end.clone();
        image[MASTER + bit / 8] ^= 1 << (bit % 8);
        damaged.push((format!("master word bit {bit} flipped"), image));
    }
    // Every other page's first word over the master word (a stale or misdirected write).
    for page in 3..end.len() / PAGE {
        if end[page * PAGE..page * PAGE + 8] == [0; 8] {
            continue; // the zeroed master above covers a zero word
        }
        let mut image = end.clone();
        image.copy_within(page * PAGE..page * PAGE + 8, MASTER);
        if image[MASTER..MASTER + 8] != end[MASTER..MASTER + 8] {
            damaged.push((format!("page {page}'s first word over the master word"), image));
        }
    }
    // A lost write: the master page as it was after the load, 30 commits ago; its meta page
    // and nodes have been reused since.
    let mut lost = end.clone();
    lost[MASTER..MASTER + PAGE].copy_from_slice(&loaded[MASTER..MASTER + PAGE]);
    damaged.push(("master page as after the load (lost write)".into(), lost));
    for (what, image) in &damaged {
        match reopen(image) {
            Err(DbError::Corrupt(_)) => {}
            Err(e) => panic!("{what}: expected Corrupt, got {e}"),
            Ok(db) => panic!(
                "{what}: opened to {} rows, expected Corrupt",
                contents(&db).map_or(0, |m| m.len())
            ),
        }
    }
    assert_eq!(contents(&reopen(&end).expect("undamaged")).expect("scan"), model);
}

/// Regression (`nvmdb fuzz --engine cow --seed 12 --case 89`: "scan returned key ... twice"):
/// a valid leaf of the same table copied over another live leaf is `Corrupt` at the first scan
/// that crosses both, never duplicate or lost keys.
#[test]
fn a_leaf_copied_over_another_is_corrupt_not_keys_twice() {
    let (_, end, model) = churned(0);
    let leaves: Vec<usize> =
        (3..end.len() / PAGE).filter(|p| end[p * PAGE..p * PAGE + 2] == *b"CL").collect();
    assert!(leaves.len() >= 4, "the load spans several leaves: {leaves:?}");
    let mut caught = 0;
    for &from in &leaves {
        for &over in &leaves {
            if from == over {
                continue;
            }
            let mut image = end.clone();
            image.copy_within(from * PAGE..(from + 1) * PAGE, over * PAGE);
            caught += usize::from(corrupt_or_same(&image, &model, &format!("{from} over {over}")));
        }
    }
    assert!(caught > 0);
}

/// A region from the previous cow layout (a bare page id as the master word, no magic) is a
/// `Format` error that says what to do, not `Corrupt` and not an open.
#[test]
fn a_layout_1_region_is_refused_with_a_clear_message() {
    let (_, end, _) = churned(1);
    let word = u64::from_le_bytes(end[MASTER..MASTER + 8].try_into().expect("8"));
    assert_eq!(end[MASTER + 8..MASTER + 16], MASTER_MAGIC.to_le_bytes());
    let mut old = end.clone();
    old[MASTER..MASTER + 16].fill(0);
    old[MASTER..MASTER + 8].copy_from_slice(&master_page(word).to_le_bytes());
    match reopen(&old) {
        Err(DbError::Format(m)) => assert!(m.contains("load it again"), "{m}"),
        other => panic!("expected a Format error, got {:?}", other.err()),
    }
}

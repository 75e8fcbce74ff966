//! Pipelined commits (`pipeline=on`, the default): a commit hands the writer slot on before it
//! persists, so the next writer builds meanwhile, but master swaps stay in version order and a
//! version reaches readers only once its swap is persisted. A commit paused after the
//! hand-off (a test hook) holds back the next commit's swap and its return.
//! Would catch: a swap that does not wait for the older version's (a master naming pages not
//! yet persisted, or going back to an older version), a version published to readers before
//! it is durable, or a hand-off that never happens (the second writer could not build).
//! Also: a writer's page buffers are kept for its worker's next writer, after a commit or an
//! abort (would catch: buffers dropped, or taken from another worker's pool).

use super::*;
use std::sync::mpsc;
use storage::{Engine, TableSpec};

fn open(pipeline: bool) -> (Arc<Cow>, TableId) {
    let region = Region::open(&pmem::RegionOptions::new(pmem::Medium::Dram, 8 << 20)).unwrap();
    let mut opts = EngineOptions { workers: 3, node_capacity: 8, ..Default::default() };
    opts.cow.pipeline = pipeline;
    let db = Cow::open(region, &opts).expect("open");
    let spec = TableSpec { name: "t".into(), row_bytes: 8, expected_rows: 0 };
    let t = db.create_table(&spec).expect("table");
    let mut tx = db.begin(0).expect("begin");
    for k in 0..32 {
        tx.insert(t, k, &[0; 8]).expect("insert");
    }
    tx.commit().expect("commit");
    (Arc::new(db), t)
}

fn master_version(db: &Cow) -> u64 {
    let word = read_master(&db.region).expect("master");
    let meta = layout::master_page(word);
    let at = page_offset(meta) + layout::M_VERSION as u64;
    storage::format::get_u64(db.region.read(at, 8), 0)
}

fn read(db: &Cow, worker: usize, t: TableId, key: u64) -> u8 {
    let mut tx = db.begin(worker).expect("begin");
    let mut out = Vec::new();
    assert!(tx.read(t, key, &mut out).expect("read"));
    tx.commit().expect("commit");
    out[0]
}

#[test]
fn a_pipelined_commit_swaps_the_master_only_after_the_older_version() {
    let (db, t) = open(true);
    let base = db.current().number;
    assert_eq!(master_version(&db), base, "the meta page's version number is where we read it");
    // The first commit (version base + 1) stops after handing the slot on, until released.
    let (paused_tx, paused_rx) = mpsc::channel::<u64>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let first = base + 1;
    *db.before_persist.lock() = Some(Arc::new(move |number| {
        if number == first {
            paused_tx.send(number).unwrap();
            go_rx.lock().recv().unwrap();
        }
    }));
    let a = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut tx = db.begin(0).unwrap();
            tx.update(t, 1, 0, &[1]).unwrap();
            tx.commit().unwrap();
        })
    };
    assert_eq!(paused_rx.recv_timeout(Duration::from_secs(10)), Ok(first));
    // The slot was handed on: a second writer builds on the first one's version.
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let b = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut tx = db.begin(1).unwrap();
            tx.update(t, 2, 0, &[2]).unwrap();
            tx.commit().unwrap();
            done_tx.send(()).unwrap();
        })
    };
    let built = Instant::now() + Duration::from_secs(10);
    while db.current().number < first + 1 {
        assert!(Instant::now() < built, "the second writer never built its version");
        std::thread::yield_now();
    }
    // Its commit is written and its own pages persisted, but its swap waits for the first's.
    assert!(done_rx.recv_timeout(Duration::from_millis(200)).is_err(), "returned out of turn");
    assert_eq!(master_version(&db), base, "a master swapped before the older version's");
    assert_eq!(read(&db, 2, t, 1), 0, "a reader saw a version that is not durable");
    assert_eq!(read(&db, 2, t, 2), 0, "a reader saw a version that is not durable");
    go_tx.send(()).unwrap();
    a.join().unwrap();
    b.join().unwrap();
    assert_eq!(master_version(&db), first + 1);
    assert_eq!((read(&db, 2, t, 1), read(&db, 2, t, 2)), (1, 2));
    db.shutdown().unwrap();
}

#[test]
fn with_pipelining_off_the_writer_slot_is_held_until_the_commit_is_durable() {
    let (db, t) = open(false);
    *db.before_persist.lock() = Some(Arc::new(|_| panic!("pipeline=off never hands the slot on")));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..50u64 {
                    loop {
                        let mut tx = db.begin(w).unwrap();
                        let updated = tx.update(t, i % 32, 0, &[w as u8]);
                        match updated.and_then(|_| tx.commit()) {
                            Ok(_) => break,
                            Err(e) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    // The current version is always the master's (read in this order, a
                    // pipelined commit between the two reads would fail it).
                    let current = db.current().number;
                    assert!(master_version(&db) >= current);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    assert_eq!(master_version(&db), db.current().number);
}

#[test]
fn a_writers_page_buffers_are_kept_for_the_next_writer_of_its_worker() {
    let (db, t) = open(true);
    let kept = |w: usize| db.buffers[w].lock().len();
    let before = kept(1);
    let mut tx = db.begin(1).unwrap();
    tx.update(t, 3, 0, &[3]).unwrap();
    tx.commit().unwrap();
    let after_commit = kept(1);
    assert!(after_commit > before, "a commit kept no buffer ({before} -> {after_commit})");
    // The next writer on worker 1 copies into kept buffers; its abort keeps them again.
    let mut tx = db.begin(1).unwrap();
    tx.update(t, 4, 0, &[4]).unwrap();
    assert!(kept(1) < after_commit, "the copy took no kept buffer");
    tx.abort().unwrap();
    assert_eq!(kept(1), after_commit);
    assert_eq!(kept(2), 0, "another worker's buffers are its own");
    assert_eq!((read(&db, 2, t, 3), read(&db, 2, t, 4)), (3, 0));
}

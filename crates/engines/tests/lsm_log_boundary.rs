//! Regression (issue 37, hole (a) for `lsm`'s log): Log's (`io=fs`) writer (`commit_fs`: a
//! record that does not fit before the log's end flushes the memtable and starts the log again
//! at 0) and recovery's replay (`recover_fs`: a header that does not fit, or a record that runs
//! past the end, ends the log) must agree where a lap ends, for every space left at the end from
//! 0 to past a record header's size (24 bytes); a disagreement loses the commits at the end of
//! the log (Arulraj et al., SIGMOD 2015, §3.3). NVM-Log's pointer records must fill their slot
//! exactly when a transaction writes the most rows one may.
//!
//! Each case fills the log over a stale earlier lap until it ends `gap` bytes short of its end,
//! commits records of chosen sizes (one exactly the space left where one exists, one a byte
//! larger), then reopens the file (the process's crash: every commit was `fdatasync`ed) and
//! reads every row back.

use engines::lsm::Lsm;
use engines::wal::Io;
use engines::EngineOptions;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use std::collections::BTreeMap;
use storage::{Engine, TableSpec};

const MEMTABLE: u64 = 16 << 10;
/// `lsm::fs_log_bytes(MEMTABLE)`: the memtable twice over plus 64 KiB, in pages; checked below
/// by where the first lap ends.
const LOG: u64 = (2 * MEMTABLE + (1 << 16)).next_multiple_of(8192);
const REC_HEADER: u64 = 24;
/// A row of table `a` (8 bytes) and of `b` (1 byte) in a record, with its entry header.
const ENTRY_A: u64 = 16 + 8;
const ENTRY_B: u64 = 16 + 1;
/// Smallest record: one row of `b`.
const MIN_RECORD: u64 = REC_HEADER + ENTRY_B;
const FILLER: u64 = REC_HEADER + 40 * ENTRY_A;

/// Rows of `a` and `b` making a record of exactly `bytes`, if any do.
fn compose(bytes: u64) -> Option<(u64, u64)> {
    let body = bytes.checked_sub(REC_HEADER).filter(|b| *b > 0)?;
    (0..ENTRY_A).map(|b| (b, b * ENTRY_B)).find_map(|(b, used)| {
        let rest = body.checked_sub(used)?;
        rest.is_multiple_of(ENTRY_A).then_some((rest / ENTRY_A, b))
    })
}

struct Case {
    /// `None` only while the file is reopened (the region is locked by its holder).
    engine: Option<Lsm>,
    model: BTreeMap<(&'static str, u64), u64>,
    next: u64,
    /// Where the log ends, as the writer's rule says it must.
    log_end: u64,
    laps: u64,
}

impl Case {
    fn e(&self) -> &Lsm {
        self.engine.as_ref().expect("an open engine")
    }

    fn flushes(&self) -> u64 {
        self.e().activity().into_iter().find(|(k, _)| *k == "memtable_flushes").map_or(0, |x| x.1)
    }

    /// One transaction whose log record is exactly `bytes` long; checks where the log went.
    fn record(&mut self, bytes: u64) {
        let (a, b) = compose(bytes).unwrap_or_else(|| panic!("no record of {bytes} bytes"));
        let v = self.next;
        self.next += 1;
        let engine = self.engine.as_ref().expect("an open engine");
        let mut txn = engine.begin(0).expect("begin");
        for (table, rows, row) in [("a", a, v.to_le_bytes().to_vec()), ("b", b, vec![v as u8])] {
            let t = engine.table(table).expect("table");
            for key in 0..rows {
                if !txn.update(t, key, 0, &row).expect("update") {
                    txn.insert(t, key, &row).expect("insert");
                }
                self.model.insert((table, key), v);
            }
        }
        txn.commit().expect("commit");
        let laps = self.flushes();
        if self.log_end + bytes > LOG {
            assert_eq!(laps, self.laps + 1, "a record of {bytes} at {} starts a lap", self.log_end);
            self.log_end = 0;
        } else {
            assert_eq!(laps, self.laps, "a record of {bytes} at {} stays in its lap", self.log_end);
        }
        self.laps = laps;
        self.log_end += bytes;
    }

    /// Records until the log ends exactly at `target` (in the current lap).
    fn fill_to(&mut self, target: u64) {
        while target - self.log_end >= FILLER + 2 * ENTRY_A * ENTRY_B {
            self.record(FILLER);
        }
        let rest = target - self.log_end;
        if rest > 0 {
            self.record(rest);
        }
        assert_eq!(self.log_end, target);
    }
}

fn options() -> EngineOptions {
    let mut o = EngineOptions { workers: 1, io: Io::Fs, ..Default::default() };
    o.lsm.memtable_bytes = MEMTABLE;
    o
}

impl Case {
    /// The process's crash: the engine dropped and the file reopened; every row must read back
    /// as last committed, and the reopened engine goes on where recovery says the log ends.
    fn reopen_and_check(&mut self, path: &std::path::Path, what: &str) {
        let region_options = RegionOptions::new(Medium::File, REGION_BYTES).with_path(path);
        drop(self.engine.take());
        let region = Region::open(&region_options).expect("region");
        let engine =
            Lsm::open(region, &options()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        self.engine = Some(engine);
        self.laps = self.flushes();
        let mut txn = self.e().begin(0).expect("begin");
        let mut out = Vec::new();
        for (&(table, key), &v) in &self.model {
            let t = self.e().table(table).expect("table");
            assert!(txn.read(t, key, &mut out).expect("read"), "{what}: row {table}/{key} lost");
            let got = match table {
                "a" => u64::from_le_bytes(out[..8].try_into().expect("8 bytes")),
                _ => u64::from(out[0]),
            };
            let want = if table == "a" { v } else { v & 0xFF };
            assert_eq!(got, want, "{what}: row {table}/{key}");
        }
        txn.commit().expect("commit");
    }
}

const REGION_BYTES: u64 = 8 << 20;

/// A lap ending `gap` bytes short of the log's end, then records of `sizes`; after the lap and
/// after each record the file reopened must hold every row as last committed.
fn lap_then_boundary(path: &std::path::Path, gap: u64, sizes: &[u64]) {
    let _ = std::fs::remove_file(path);
    let region_options = RegionOptions::new(Medium::File, REGION_BYTES).with_path(path);
    let engine = Lsm::open(Region::open(&region_options).expect("region"), &options()).unwrap();
    for (name, row_bytes) in [("a", 8), ("b", 1)] {
        let spec = TableSpec { name: name.into(), row_bytes, expected_rows: 64 };
        engine.create_table(&spec).expect("table");
    }
    let mut case =
        Case { engine: Some(engine), model: BTreeMap::new(), next: 1, log_end: 0, laps: 0 };
    case.laps = case.flushes();
    // Lap 1 leaves stale records (valid lengths and checksums, older sequences) up to the end.
    case.fill_to(LOG - 8);
    case.record(FILLER);
    assert_eq!(case.log_end, FILLER, "the second lap starts at 0");
    case.fill_to(LOG - gap);
    case.reopen_and_check(path, &format!("lap {gap} bytes short"));
    for (i, &size) in sizes.iter().enumerate() {
        case.record(size);
        case.reopen_and_check(path, &format!("lap {gap} bytes short, then {:?}", &sizes[..=i]));
    }
}

#[test]
fn lsm_log_laps_ending_near_a_record_header_size_replay_across_the_lap() {
    // tmpfs where there is one: the test is about where records go, not about `fdatasync`.
    let shm = std::path::Path::new("/dev/shm");
    let tmp = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let dir = tmp.join(format!("nvmdb-lsm-boundary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("region");
    let gaps = (0..=REC_HEADER + 8).chain((40..=96).step_by(8));
    for gap in gaps {
        // The smallest record that does not fit the space left, and the largest that does
        // (exactly the space left where a record of that size exists: the lap ends full).
        let over = (gap + 1..).find(|b| compose(*b).is_some()).expect("records of every size");
        let fit = (MIN_RECORD..=gap).rev().find(|b| compose(*b).is_some());
        let mut shapes =
            vec![vec![over, MIN_RECORD], vec![FILLER, MIN_RECORD], vec![MIN_RECORD; 3]];
        if let Some(fit) = fit {
            shapes.push(vec![fit, over, MIN_RECORD]);
        }
        for sizes in shapes {
            lap_then_boundary(&path, gap, &sizes);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// NVM-Log: a transaction of the most rows one may writes a pointer record that fills its log
/// slot to the last byte; cut at each of its barriers it is all or nothing, and one row more is
/// refused before anything is written.
#[test]
fn nvm_log_pointer_record_filling_its_slot_is_all_or_nothing() {
    // (LOG_SLOT_BYTES - pointer header) / 8 pointers.
    const MAX_ROWS: u64 = (64 * 1024 - 32) / 8;
    let mut o = EngineOptions { workers: 1, ..Default::default() };
    o.lsm.memtable_bytes = 4 << 20;
    let put = |e: &Lsm, rows: u64, v: u8| -> storage::Result<()> {
        let t = e.table("b").expect("table");
        let mut txn = e.begin(0)?;
        for key in 0..rows {
            if !txn.update(t, key, 0, &[v])? {
                txn.insert(t, key, &[v])?;
            }
        }
        txn.commit().map(|_| ())
    };
    let values = |e: &Lsm| -> Vec<u8> {
        let t = e.table("b").expect("table");
        let mut txn = e.begin(0).expect("begin");
        let mut out = Vec::new();
        let v = (0..MAX_ROWS)
            .map(|k| if txn.read(t, k, &mut out).expect("read") { out[0] } else { 0 })
            .collect();
        txn.commit().expect("commit");
        v
    };
    for cut in 1..=3u64 {
        let region = Region::open(&RegionOptions::new(Medium::Sim, 32 << 20)).expect("region");
        let e = Lsm::open(region.clone(), &o).expect("open");
        let spec = TableSpec { name: "b".into(), row_bytes: 1, expected_rows: MAX_ROWS };
        e.create_table(&spec).expect("table");
        put(&e, MAX_ROWS, 1).expect("the most rows one transaction may write");
        let refused = put(&e, MAX_ROWS + 1, 9);
        assert!(matches!(refused, Err(storage::DbError::TxnTooLarge(_))), "{refused:?}");
        let sim = region.sim().expect("sim");
        sim.arm(CrashPoint { event: CrashEvent::Fence, count: cut }, CrashPolicy::Persisted, 1);
        put(&e, MAX_ROWS, 2).expect("commit");
        let image = sim.take_image().expect("the cut fell inside the commit");
        drop(e);
        let crashed = Region::from_image(&image, &RegionOptions::default()).expect("image");
        let e = Lsm::open(crashed, &o).expect("recovers");
        let got = values(&e);
        assert!(
            got.iter().all(|v| *v == 1) || got.iter().all(|v| *v == 2),
            "cut at fence {cut}: {} rows of the commit survived of {MAX_ROWS}",
            got.iter().filter(|v| **v == 2).count()
        );
    }
}

//! Mobibench-style SQLite transactions (the workload of NVWAL, Kim et al., ASPLOS 2016, §5:
//! Mobibench [1] with 100-byte records): each transaction inserts, updates or deletes `N`
//! single 100-byte records (`N` = 1 … 32 in the paper's Tables 1-2; option `ops_per_txn`), one
//! operation type per run (option `txn` = `insert`, `update` or `delete`).
//!
//! Keys: `records` rows are preloaded with keys `0..records` (none by default for `insert`,
//! as the paper inserts into an empty table). An insert transaction takes the next chunk of `N`
//! keys above `records`; a delete transaction deletes the next chunk `[c·N, c·N+N)` of the
//! preloaded keys; an update transaction rewrites `N` random preloaded keys of its worker's
//! partition (`key % 64 == worker % 64`, so one key has one writer and its tags only grow).
//!
//! Rows (little-endian): `key u64 @0 | tag u64 @8 | filler @16..100`, the filler derived from
//! `(key, tag)`; `tag` is the writing transaction's number (0 for loaded rows).
//!
//! Invariant: every row is intact (its key and filler agree with its tag); inserted and deleted
//! keys come and go in whole chunks of `N` (a transaction is all or nothing); an acknowledged
//! insert's row exists with its tag or a later one, an acknowledged update's row carries its
//! tag or a later one, an acknowledged delete's key is absent.

use crate::generators::WorkerRng;
use crate::util::Loader;
use crate::util::{create_table, get_u64, lookup_table, put_u64, scan_table, Outcome, Retrier};
use crate::{Ack, TxnDone, Worker, Workload};
use rand::Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use storage::{DbError, Engine, TableId};

pub const TABLE: &str = "mobibench";
/// Mobibench's record size in the paper's runs.
pub const ROW_BYTES: u32 = 100;
/// Update partitions: a key is updated only by workers with the same index modulo this.
const PARTITIONS: u64 = 64;
/// Largest `ops_per_txn`.
pub const MAX_OPS_PER_TXN: u32 = 1024;

/// Which operation the transactions run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MobiOp {
    Insert,
    Update,
    Delete,
}

impl MobiOp {
    pub fn parse(s: &str) -> Option<MobiOp> {
        match s {
            "insert" => Some(MobiOp::Insert),
            "update" => Some(MobiOp::Update),
            "delete" => Some(MobiOp::Delete),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MobiOp::Insert => "insert",
            MobiOp::Update => "update",
            MobiOp::Delete => "delete",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct MobibenchConfig {
    pub op: MobiOp,
    pub ops_per_txn: u32,
    /// Rows loaded before the run (keys `0..records`).
    pub records: u64,
    pub max_retries: u32,
}

impl MobibenchConfig {
    /// Defaults per operation: inserts start from an empty table, updates have 1,000 rows
    /// to choose from, deletes 100,000 rows to delete.
    pub fn new(op: MobiOp) -> Self {
        let records = match op {
            MobiOp::Insert => 0,
            MobiOp::Update => 1000,
            MobiOp::Delete => 100_000,
        };
        MobibenchConfig { op, ops_per_txn: 1, records, max_retries: 100 }
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.ops_per_txn == 0 || self.ops_per_txn > MAX_OPS_PER_TXN {
            return Err(format!(
                "mobibench: ops_per_txn must be 1..={MAX_OPS_PER_TXN}, not {}",
                self.ops_per_txn
            ));
        }
        if self.op == MobiOp::Update && self.records < PARTITIONS {
            return Err(format!("mobibench update needs records >= {PARTITIONS}"));
        }
        if self.op == MobiOp::Delete && self.records < u64::from(self.ops_per_txn) {
            return Err("mobibench delete needs records >= ops_per_txn".into());
        }
        if self.records > 1 << 40 {
            return Err("mobibench: records must be below 2^40".into());
        }
        Ok(())
    }
}

/// Counters the workers share, set by `load` or `attach`.
#[derive(Default)]
struct Cursors {
    next_insert_chunk: AtomicU64,
    next_delete_chunk: AtomicU64,
    next_tag: AtomicU64,
    table: AtomicU64,
}

pub struct Mobibench {
    cfg: MobibenchConfig,
    cursors: Arc<Cursors>,
}

fn filler_byte(key: u64, tag: u64, i: usize) -> u8 {
    let x = key
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(tag.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add(i as u64 * 0x94d0_49bb_1331_11eb);
    b'a' + ((x >> 32) % 26) as u8
}

/// The row of `key` written by transaction `tag`.
pub fn make_row(key: u64, tag: u64, row: &mut [u8]) {
    put_u64(row, 0, key);
    put_u64(row, 8, tag);
    for (i, b) in row[16..].iter_mut().enumerate() {
        *b = filler_byte(key, tag, i);
    }
}

fn check_row(key: u64, row: &[u8]) -> Result<u64, String> {
    if row.len() != ROW_BYTES as usize || get_u64(row, 0) != key {
        return Err(format!("mobibench: row {key} is damaged (wrong key or size)"));
    }
    let tag = get_u64(row, 8);
    if row[16..].iter().enumerate().any(|(i, b)| *b != filler_byte(key, tag, i)) {
        return Err(format!("mobibench: row {key} (tag {tag}) is torn"));
    }
    Ok(tag)
}

impl Mobibench {
    pub fn new(cfg: MobibenchConfig) -> Result<Mobibench, String> {
        cfg.validate()?;
        Ok(Mobibench { cfg, cursors: Arc::new(Cursors::default()) })
    }

    pub fn config(&self) -> &MobibenchConfig {
        &self.cfg
    }

    fn table(&self) -> TableId {
        self.cursors.table.load(Ordering::Acquire) as TableId
    }

    /// Every row (key -> tag), checked intact.
    fn rows(&self, engine: &dyn Engine) -> Result<Vec<(u64, u64)>, String> {
        let mut rows = Vec::new();
        scan_table(engine, self.table(), 0, u64::MAX, &mut |key, row| {
            rows.push((key, check_row(key, row)?));
            Ok(())
        })?;
        Ok(rows)
    }
}

impl Workload for Mobibench {
    fn name(&self) -> &'static str {
        "mobibench"
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        let table = create_table(engine, TABLE, ROW_BYTES, self.cfg.records.max(1024))?;
        self.cursors.table.store(u64::from(table), Ordering::Release);
        let mut loader = Loader::new(engine, progress, self.cfg.records);
        let mut row = vec![0u8; ROW_BYTES as usize];
        for key in 0..self.cfg.records {
            make_row(key, 0, &mut row);
            loader.insert(table, key, &row)?;
        }
        loader.finish()?;
        self.cursors.next_insert_chunk.store(0, Ordering::Release);
        self.cursors.next_delete_chunk.store(0, Ordering::Release);
        self.cursors.next_tag.store(1, Ordering::Release);
        Ok(())
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        let table = lookup_table(engine, TABLE, ROW_BYTES)?;
        self.cursors.table.store(u64::from(table), Ordering::Release);
        let rows = self.rows(engine).map_err(DbError::Corrupt)?;
        let n = u64::from(self.cfg.ops_per_txn);
        let records = self.cfg.records;
        let max_tag = rows.iter().map(|r| r.1).max().unwrap_or(0);
        let next_insert = rows
            .iter()
            .filter(|r| r.0 >= records)
            .map(|r| (r.0 - records) / n + 1)
            .max()
            .unwrap_or(0);
        let next_delete = rows.iter().find(|r| r.0 < records).map_or(records / n, |r| r.0 / n);
        self.cursors.next_insert_chunk.store(next_insert, Ordering::Release);
        self.cursors.next_delete_chunk.store(next_delete, Ordering::Release);
        self.cursors.next_tag.store(max_tag + 1, Ordering::Release);
        Ok(())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(MobiWorker {
            cfg: self.cfg.clone(),
            cursors: self.cursors.clone(),
            worker,
            rng: WorkerRng::for_worker(seed, worker, 0),
            retrier: Retrier::new(self.cfg.max_retries, seed, worker),
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        let rows = self.rows(engine)?;
        let n = u64::from(self.cfg.ops_per_txn);
        let records = self.cfg.records;
        // Chunk -> rows present; a chunk is one transaction's keys.
        let mut chunks: HashMap<(bool, u64), u64> = HashMap::new();
        for (key, _) in &rows {
            let chunk = if *key < records { (false, key / n) } else { (true, (key - records) / n) };
            *chunks.entry(chunk).or_insert(0) += 1;
        }
        for ((inserted, chunk), present) in chunks {
            let size = if inserted { n } else { n.min(records - chunk * n) };
            if present != size {
                let first = if inserted { records + chunk * n } else { chunk * n };
                return Err(format!(
                    "mobibench: {present} of the {size} keys from {first} exist: a transaction \
                     was half applied"
                ));
            }
        }
        Ok(())
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let rows: HashMap<u64, u64> = self.rows(engine)?.into_iter().collect();
        // The latest ack per key (acks of one key come from one worker, in commit order).
        let mut latest: HashMap<u64, &Ack> = HashMap::new();
        for a in acks {
            latest.insert(a.key, a);
        }
        for (key, ack) in latest {
            match (self.cfg.op, rows.get(&key)) {
                (MobiOp::Delete, None) => {}
                (MobiOp::Delete, Some(_)) => {
                    return Err(format!("mobibench: acknowledged delete of key {key} was lost"))
                }
                (_, Some(tag)) if *tag >= ack.value => {}
                (_, found) => {
                    return Err(format!(
                        "mobibench: acknowledged {} of key {key} (tag {}) lost; found {found:?}",
                        self.cfg.op.name(),
                        ack.value
                    ))
                }
            }
        }
        Ok(())
    }
}

struct MobiWorker {
    cfg: MobibenchConfig,
    cursors: Arc<Cursors>,
    worker: usize,
    rng: WorkerRng,
    retrier: Retrier,
}

impl MobiWorker {
    /// This transaction's keys and tag.
    fn inputs(&mut self) -> Result<(Vec<u64>, u64), DbError> {
        let n = u64::from(self.cfg.ops_per_txn);
        let records = self.cfg.records;
        let tag = self.cursors.next_tag.fetch_add(1, Ordering::AcqRel);
        let keys = match self.cfg.op {
            MobiOp::Insert => {
                let c = self.cursors.next_insert_chunk.fetch_add(1, Ordering::AcqRel);
                (0..n).map(|i| records + c * n + i).collect()
            }
            MobiOp::Delete => {
                let c = self.cursors.next_delete_chunk.fetch_add(1, Ordering::AcqRel);
                if c * n >= records {
                    return Err(DbError::Invalid(format!(
                        "mobibench: all {records} loaded records are deleted; load more \
                         (--records)"
                    )));
                }
                (c * n..(c * n + n).min(records)).collect()
            }
            MobiOp::Update => {
                let part = self.worker as u64 % PARTITIONS;
                let per = (records - part).div_ceil(PARTITIONS);
                (0..n).map(|_| part + self.rng.gen_range(0..per) * PARTITIONS).collect()
            }
        };
        Ok((keys, tag))
    }
}

impl Worker for MobiWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        let (keys, tag) = self.inputs()?;
        let table = self.cursors.table.load(Ordering::Acquire) as TableId;
        let op = self.cfg.op;
        let mut row = vec![0u8; ROW_BYTES as usize];
        let done = self.retrier.run(engine, self.worker, |txn| {
            for key in &keys {
                match op {
                    MobiOp::Insert => {
                        make_row(*key, tag, &mut row);
                        txn.insert(table, *key, &row)?;
                    }
                    MobiOp::Update => {
                        make_row(*key, tag, &mut row);
                        if !txn.update(table, *key, 0, &row)? {
                            return Err(DbError::Corrupt(format!(
                                "mobibench: loaded row {key} is missing"
                            )));
                        }
                    }
                    MobiOp::Delete => {
                        txn.delete(table, *key)?;
                    }
                }
            }
            Ok(Outcome::Commit(()))
        })?;
        let value = if op == MobiOp::Delete { 0 } else { tag };
        Ok(TxnDone {
            kind: op.name(),
            token: done.token,
            retries: done.retries,
            acks: keys.iter().map(|k| Ack { table, key: *k, value }).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemEngine;

    fn run(op: MobiOp, n: u32, txns: usize) -> (MemEngine, Mobibench, Vec<Ack>) {
        let mut cfg = MobibenchConfig::new(op);
        cfg.ops_per_txn = n;
        if op == MobiOp::Delete {
            cfg.records = 1000;
        }
        let w = Mobibench::new(cfg).unwrap();
        let e = MemEngine::new();
        w.load(&e, &|_, _| {}).unwrap();
        let mut worker = w.worker(0, 7);
        let mut acks = Vec::new();
        for _ in 0..txns {
            acks.extend(worker.run_one(&e).unwrap().acks);
        }
        (e, w, acks)
    }

    #[test]
    fn each_op_keeps_the_invariants_and_acks() {
        for op in [MobiOp::Insert, MobiOp::Update, MobiOp::Delete] {
            let (e, w, acks) = run(op, 4, 20);
            w.check(&e).unwrap();
            w.verify_acks(&e, &acks).unwrap();
            assert_eq!(acks.len(), 80);
        }
    }

    #[test]
    fn checker_catches_a_half_applied_insert_and_a_lost_delete() {
        let (e, w, acks) = run(MobiOp::Insert, 4, 3);
        let mut txn = e.begin(0).unwrap();
        txn.delete(w.table(), acks[1].key).unwrap();
        txn.commit().unwrap();
        assert!(w.check(&e).unwrap_err().contains("half applied"));
        let (e, w, acks) = run(MobiOp::Delete, 2, 3);
        let mut row = vec![0u8; 100];
        make_row(acks[0].key, 0, &mut row);
        let mut txn = e.begin(0).unwrap();
        txn.insert(w.table(), acks[0].key, &row).unwrap();
        txn.commit().unwrap();
        assert!(w.verify_acks(&e, &acks).unwrap_err().contains("lost"));
    }

    #[test]
    fn attach_resumes_after_the_rows_present() {
        let (e, w, _) = run(MobiOp::Insert, 2, 5);
        let again = Mobibench::new(w.config().clone()).unwrap();
        again.attach(&e).unwrap();
        let mut worker = again.worker(0, 9);
        worker.run_one(&e).unwrap();
        again.check(&e).unwrap();
    }
}

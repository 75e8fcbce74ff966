//! Test doubles for the driver's own tests, independent of the real engines and workloads:
//! `TinyEngine` (one global lock, optionally on a `pmem` region so device statistics move,
//! optionally acknowledging commits late like group commit, optionally injecting conflicts) and
//! `Bank` (transfers between accounts, one history row per transfer; the checker sums balances).

#![allow(dead_code)]

use parking_lot::{Mutex, MutexGuard};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use storage::{
    CommitToken, DbError, Engine, IntegrityResult, RecoveryReport, TableId, TableSpec, Txn,
};
use workloads::{Ack, TxnDone, Worker, Workload};

#[derive(Default)]
struct State {
    specs: Vec<TableSpec>,
    rows: Vec<BTreeMap<u64, Vec<u8>>>,
    commits: u64,
}

/// How late commits become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// `commit` returns `CommitToken::DURABLE`.
    Sync,
    /// Tokens are commit numbers; a token becomes durable once `lag` later commits happened,
    /// or when someone waits for it (a forced flush).
    Group { lag: u64 },
}

pub struct TinyEngine {
    state: Mutex<State>,
    durability: Durability,
    durable_upto: AtomicU64,
    /// Every n-th update fails with a conflict (0: never).
    conflict_every: u64,
    updates: AtomicU64,
    region: Option<pmem::Region>,
    /// Make every update fail with a non-retryable error.
    pub broken: AtomicBool,
}

impl TinyEngine {
    pub fn new(durability: Durability) -> TinyEngine {
        TinyEngine {
            state: Mutex::new(State::default()),
            durability,
            durable_upto: AtomicU64::new(0),
            conflict_every: 0,
            updates: AtomicU64::new(0),
            region: None,
            broken: AtomicBool::new(false),
        }
    }

    pub fn with_region(mut self) -> TinyEngine {
        let options = pmem::RegionOptions::new(pmem::Medium::Dram, 1 << 20);
        self.region = Some(pmem::Region::open(&options).expect("dram region"));
        self
    }

    pub fn with_conflicts(mut self, every: u64) -> TinyEngine {
        self.conflict_every = every;
        self
    }
}

struct TinyTxn<'a> {
    engine: &'a TinyEngine,
    state: MutexGuard<'a, State>,
    undo: Vec<(TableId, u64, Option<Vec<u8>>)>,
}

impl Engine for TinyEngine {
    fn name(&self) -> &str {
        "tiny"
    }

    fn create_table(&self, spec: &TableSpec) -> storage::Result<TableId> {
        let mut s = self.state.lock();
        if s.specs.iter().any(|t| t.name == spec.name) {
            return Err(DbError::Invalid(format!("table {} exists", spec.name)));
        }
        s.specs.push(spec.clone());
        s.rows.push(BTreeMap::new());
        Ok((s.specs.len() - 1) as TableId)
    }

    fn table(&self, name: &str) -> Option<TableId> {
        self.state.lock().specs.iter().position(|t| t.name == name).map(|i| i as TableId)
    }

    fn tables(&self) -> Vec<TableSpec> {
        self.state.lock().specs.clone()
    }

    fn begin(&self, _worker: usize) -> storage::Result<Box<dyn Txn + '_>> {
        Ok(Box::new(TinyTxn { engine: self, state: self.state.lock(), undo: Vec::new() }))
    }

    fn is_durable(&self, token: CommitToken) -> bool {
        token.0 <= self.durable_upto.load(Ordering::Acquire)
    }

    fn wait_durable(&self, token: CommitToken) -> storage::Result<()> {
        self.durable_upto.fetch_max(token.0, Ordering::AcqRel);
        Ok(())
    }

    fn recovery_report(&self) -> RecoveryReport {
        RecoveryReport { formatted: true, ..Default::default() }
    }

    fn region(&self) -> Option<&pmem::Region> {
        self.region.as_ref()
    }

    fn check_integrity(&self) -> IntegrityResult {
        Ok(Default::default())
    }

    fn shutdown(&self) -> storage::Result<()> {
        Ok(())
    }
}

impl TinyTxn<'_> {
    fn rows(&mut self, table: TableId) -> storage::Result<&mut BTreeMap<u64, Vec<u8>>> {
        self.state.rows.get_mut(table as usize).ok_or(DbError::NoSuchTable(table))
    }
}

impl Txn for TinyTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> storage::Result<bool> {
        out.clear();
        match self.rows(table)?.get(&key) {
            Some(row) => {
                out.extend_from_slice(row);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> storage::Result<()> {
        let rows = self.rows(table)?;
        if rows.contains_key(&key) {
            return Err(DbError::Duplicate { table, key });
        }
        rows.insert(key, row.to_vec());
        self.undo.push((table, key, None));
        Ok(())
    }

    fn update(
        &mut self,
        table: TableId,
        key: u64,
        offset: u32,
        bytes: &[u8],
    ) -> storage::Result<bool> {
        if self.engine.broken.load(Ordering::Relaxed) {
            return Err(DbError::Corrupt("injected failure".into()));
        }
        let n = self.engine.updates.fetch_add(1, Ordering::Relaxed) + 1;
        if self.engine.conflict_every > 0 && n.is_multiple_of(self.engine.conflict_every) {
            return Err(DbError::Conflict { table, key });
        }
        let rows = self.rows(table)?;
        let Some(row) = rows.get_mut(&key) else { return Ok(false) };
        let before = row.clone();
        row[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        self.undo.push((table, key, Some(before)));
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> storage::Result<bool> {
        let rows = self.rows(table)?;
        match rows.remove(&key) {
            Some(before) => {
                self.undo.push((table, key, Some(before)));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> storage::Result<usize> {
        let mut n = 0;
        for (k, v) in self.rows(table)?.range(low..=high).take(limit) {
            n += 1;
            if !visit(*k, v) {
                break;
            }
        }
        Ok(n)
    }

    fn commit(mut self: Box<Self>) -> storage::Result<CommitToken> {
        if let Some(region) = &self.engine.region {
            // One line and one fence per commit, so per-transaction statistics are exact.
            let line = (self.state.commits % 1024) * 64;
            region.write_u64(line, self.state.commits);
            region.persist(line, 8);
        }
        self.state.commits += 1;
        let n = self.state.commits;
        self.undo.clear();
        match self.engine.durability {
            Durability::Sync => Ok(CommitToken::DURABLE),
            Durability::Group { lag } => {
                if n > lag {
                    self.engine.durable_upto.fetch_max(n - lag, Ordering::AcqRel);
                }
                Ok(CommitToken(n))
            }
        }
    }

    fn abort(mut self: Box<Self>) -> storage::Result<()> {
        self.rollback();
        Ok(())
    }
}

impl TinyTxn<'_> {
    fn rollback(&mut self) {
        while let Some((table, key, before)) = self.undo.pop() {
            let rows = &mut self.state.rows[table as usize];
            match before {
                Some(row) => rows.insert(key, row),
                None => rows.remove(&key),
            };
        }
    }
}

impl Drop for TinyTxn<'_> {
    fn drop(&mut self) {
        self.rollback();
    }
}

/// Transfers between accounts; every transfer inserts a history row and acks it.
pub struct Bank {
    pub accounts: u64,
    pub initial: i64,
    pub tables: Mutex<Option<(TableId, TableId)>>,
    /// Make `check` fail, to test that the verdict is reported.
    pub corrupt_check: bool,
    /// Panic in worker 1's first transaction.
    pub panic_in_worker_1: bool,
}

impl Bank {
    pub fn new(accounts: u64) -> Bank {
        Bank {
            accounts,
            initial: 1000,
            tables: Mutex::new(None),
            corrupt_check: false,
            panic_in_worker_1: false,
        }
    }

    fn ids(&self) -> (TableId, TableId) {
        self.tables.lock().expect("loaded or attached before running")
    }
}

impl Workload for Bank {
    fn name(&self) -> &'static str {
        "bank"
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        let spec =
            |name: &str, rows| TableSpec { name: name.into(), row_bytes: 8, expected_rows: rows };
        let accounts = engine.create_table(&spec("accounts", self.accounts))?;
        let history = engine.create_table(&spec("history", 1 << 16))?;
        let mut txn = engine.begin(0)?;
        for key in 0..self.accounts {
            txn.insert(accounts, key, &self.initial.to_le_bytes())?;
        }
        let token = txn.commit()?;
        engine.wait_durable(token)?;
        progress(self.accounts, self.accounts);
        *self.tables.lock() = Some((accounts, history));
        Ok(())
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        let find = |n: &str| engine.table(n).ok_or_else(|| DbError::Invalid(format!("no {n}")));
        *self.tables.lock() = Some((find("accounts")?, find("history")?));
        Ok(())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        let (accounts, history) = self.ids();
        Box::new(BankWorker {
            worker,
            rng: seed | 1,
            accounts: self.accounts,
            tables: (accounts, history),
            next: 0,
            panic: self.panic_in_worker_1 && worker == 1,
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        let (accounts, _) = self.ids();
        let mut txn = engine.begin(0).map_err(|e| e.to_string())?;
        let mut sum = 0i64;
        txn.scan(accounts, 0, u64::MAX, usize::MAX, &mut |_, row| {
            sum += i64::from_le_bytes(row.try_into().unwrap_or([0; 8]));
            true
        })
        .map_err(|e| e.to_string())?;
        let expected = self.initial * self.accounts as i64;
        if sum != expected || self.corrupt_check {
            return Err(format!("balances sum to {sum}, expected {expected}"));
        }
        Ok(())
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let mut txn = engine.begin(0).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for ack in acks {
            if !txn.read(ack.table, ack.key, &mut row).map_err(|e| e.to_string())? {
                return Err(format!("history row {} lost", ack.key));
            }
        }
        Ok(())
    }
}

pub struct BankWorker {
    worker: usize,
    rng: u64,
    accounts: u64,
    tables: (TableId, TableId),
    next: u64,
    panic: bool,
}

impl BankWorker {
    fn next_rand(&mut self) -> u64 {
        // xorshift64*: tiny, deterministic from the seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn transfer(
        &self,
        engine: &dyn Engine,
        from: u64,
        to: u64,
        amount: i64,
        history_key: u64,
    ) -> Result<CommitToken, DbError> {
        let (accounts, history) = self.tables;
        let mut txn = engine.begin(self.worker)?;
        let mut row = Vec::new();
        for (key, delta) in [(from, -amount), (to, amount)] {
            txn.read(accounts, key, &mut row)?;
            let balance = i64::from_le_bytes(row.as_slice().try_into().unwrap_or([0; 8]));
            txn.update(accounts, key, 0, &(balance + delta).to_le_bytes())?;
        }
        txn.insert(history, history_key, &amount.to_le_bytes())?;
        txn.commit()
    }
}

impl Worker for BankWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        if self.panic {
            panic!("worker 1 was told to panic");
        }
        let from = self.next_rand() % self.accounts;
        let to = self.next_rand() % self.accounts;
        let amount = (self.next_rand() % 100) as i64;
        let history_key = ((self.worker as u64) << 40) | self.next;
        self.next += 1;
        let mut retries = 0;
        loop {
            match self.transfer(engine, from, to, amount, history_key) {
                Ok(token) => {
                    let ack = Ack { table: self.tables.1, key: history_key, value: amount as u64 };
                    return Ok(TxnDone {
                        kind: if amount % 2 == 0 { "even" } else { "odd" },
                        token: Some(token),
                        retries,
                        acks: vec![ack],
                    });
                }
                Err(e) if e.is_retryable() && retries < 100 => retries += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

//! TPC-B's account update runs clause 1.2's profile in its order — account, history, teller,
//! branch — so the branch row, the one every transaction of a branch writes, is locked last;
//! `history_last` moves the history insert after the branch (the order results before
//! 2026-11-29 ran). The order is read from the calls a recording engine sees.

mod common;

use std::sync::Mutex;
use storage::{CommitToken, Engine, IntegrityResult, Result, TableId, TableSpec, Txn};
use workloads::testing::MemEngine;
use workloads::tpcb::{Tpcb, TpcbConfig};
use workloads::Workload;

/// Delegates to a loaded `MemEngine` and records each transaction's calls as (call, table).
struct Recording {
    inner: MemEngine,
    calls: Mutex<Vec<Vec<(&'static str, TableId)>>>,
}

struct RecTxn<'a> {
    inner: Box<dyn Txn + 'a>,
    calls: Vec<(&'static str, TableId)>,
    into: &'a Mutex<Vec<Vec<(&'static str, TableId)>>>,
}

impl Engine for Recording {
    fn name(&self) -> &str {
        "recording"
    }
    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.inner.create_table(spec)
    }
    fn table(&self, name: &str) -> Option<TableId> {
        self.inner.table(name)
    }
    fn tables(&self) -> Vec<TableSpec> {
        self.inner.tables()
    }
    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let inner = self.inner.begin(worker)?;
        Ok(Box::new(RecTxn { inner, calls: Vec::new(), into: &self.calls }))
    }
    fn is_durable(&self, token: CommitToken) -> bool {
        self.inner.is_durable(token)
    }
    fn wait_durable(&self, token: CommitToken) -> Result<()> {
        self.inner.wait_durable(token)
    }
    fn recovery_report(&self) -> storage::engine::RecoveryReport {
        self.inner.recovery_report()
    }
    fn region(&self) -> Option<&pmem::Region> {
        None
    }
    fn check_integrity(&self) -> IntegrityResult {
        self.inner.check_integrity()
    }
    fn shutdown(&self) -> Result<()> {
        self.inner.shutdown()
    }
}

impl Txn for RecTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.calls.push(("read", table));
        self.inner.read(table, key, out)
    }
    fn read_for_update(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        self.calls.push(("read_for_update", table));
        self.inner.read_for_update(table, key, out)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.calls.push(("insert", table));
        self.inner.insert(table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        self.calls.push(("update", table));
        self.inner.update(table, key, offset, bytes)
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        self.calls.push(("delete", table));
        self.inner.delete(table, key)
    }
    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.calls.push(("scan", table));
        self.inner.scan(table, low, high, limit, visit)
    }
    fn commit(self: Box<Self>) -> Result<CommitToken> {
        let RecTxn { inner, calls, into } = *self;
        into.lock().unwrap().push(calls);
        inner.commit()
    }
    fn abort(self: Box<Self>) -> Result<()> {
        self.inner.abort()
    }
}

/// The calls of `n` committed account updates of one worker, by table name.
fn account_updates(history_last: Option<bool>, n: usize) -> Vec<Vec<(&'static str, String)>> {
    let mut cfg = TpcbConfig { branches: 2, accounts_per_branch: 100, ..TpcbConfig::default() };
    if let Some(h) = history_last {
        cfg.history_last = h;
    }
    let w = Tpcb::new(cfg).unwrap();
    let e = Recording { inner: common::loaded(&w), calls: Mutex::new(Vec::new()) };
    let name = |id: TableId| {
        let t = e.tables().into_iter().find(|t| e.table(&t.name) == Some(id)).unwrap();
        t.name.trim_start_matches("tpcb_").to_string()
    };
    e.calls.lock().unwrap().clear();
    let mut worker = w.worker(0, 7);
    for _ in 0..n {
        worker.run_one(&e).expect("account update");
    }
    let calls = std::mem::take(&mut *e.calls.lock().unwrap());
    w.check(&e).unwrap();
    // The first transaction finds the worker's next history number (a scan of the history).
    assert_eq!(calls.len(), n + 1, "{} commits recorded for {n} account updates", calls.len());
    calls[1..].iter().map(|txn| txn.iter().map(|&(call, t)| (call, name(t))).collect()).collect()
}

fn expected(tables: [&str; 4]) -> Vec<(&'static str, String)> {
    let mut calls = Vec::new();
    for t in tables {
        if t == "history" {
            calls.push(("insert", t.to_string()));
        } else {
            calls.push(("read_for_update", t.to_string()));
            calls.push(("update", t.to_string()));
        }
    }
    calls
}

#[test]
fn the_account_update_runs_clause_1_2s_order() {
    let spec = expected(["account", "history", "teller", "branch"]);
    for txn in account_updates(None, 20) {
        assert_eq!(txn, spec);
    }
    for txn in account_updates(Some(false), 5) {
        assert_eq!(txn, spec);
    }
}

#[test]
fn history_last_inserts_the_history_row_after_the_branch() {
    let last = expected(["account", "teller", "branch", "history"]);
    for txn in account_updates(Some(true), 20) {
        assert_eq!(txn, last);
    }
}

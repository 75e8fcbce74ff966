//! TPC-B (TPC Benchmark B, rev. 2.0, clauses 1-5): branches, tellers (10 per branch), accounts
//! (100,000 per branch) and history; one transaction, the account update ("TPCB" of Pelley et
//! al., VLDB 2014, §4 and Table 3, where scale = branches). Account balances start at 0
//! (clause 3.3), deltas are uniform in ±999,999 (clause 5.3.6), and 15% of the accounts are
//! drawn from a branch other than the teller's (clause 5.3.5).
//!
//! Keys: branch `b`, teller `t` (branch `t / 10`), account `a` (branch
//! `a / accounts_per_branch`), all 0-based; history rows are keyed
//! `(worker + 1) << 40 | seq` with `seq` counting each worker's commits from 0.
//!
//! Rows (little-endian): branch `b_id u64 @0 | balance i64 @8` (100 bytes); teller and account
//! `id u64 @0 | b_id u64 @8 | balance i64 @16` (100 bytes); history `t_id @0 | b_id @8 |
//! a_id @16 | delta i64 @24 | seq @32` (50 bytes).
//!
//! Invariant: sum(branch balances) = sum(teller balances) = sum(account balances − initial)
//! = sum(history deltas), also per branch, per teller and per account; and each worker's history
//! sequence numbers are contiguous from 0 (an acknowledged transaction's history row exists).

use crate::generators::WorkerRng;
use crate::util::{
    check_read, create_table, get_i64, get_u64, lookup_table, next_seq, put_i64, put_u64,
    read_existing_to_update, scan_table, seq_key, update_existing, Loader, Outcome, Retrier,
    SEQ_BITS, SEQ_MASK,
};
use crate::{Ack, TxnDone, Worker, Workload};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;
use storage::{DbError, Engine, TableId};

pub const BRANCH_TABLE: &str = "tpcb_branch";
pub const TELLER_TABLE: &str = "tpcb_teller";
pub const ACCOUNT_TABLE: &str = "tpcb_account";
pub const HISTORY_TABLE: &str = "tpcb_history";

/// Tellers per branch (clause 4.2).
pub const TELLERS_PER_BRANCH: u64 = 10;
/// Initial balance of every branch, teller and account (clause 3.3: zero).
pub const INITIAL_BALANCE: i64 = 0;
/// Deltas are uniform in `-MAX_DELTA ..= MAX_DELTA` (clause 5.3.6).
pub const MAX_DELTA: i64 = 999_999;

/// Row sizes: 100 bytes for branch, teller and account, 50 for history (clause 1.2).
const BRANCH_ROW: u32 = 100;
const TELLER_ROW: u32 = 100;
const ACCOUNT_ROW: u32 = 100;
const HISTORY_ROW: u32 = 50;

// branch: b_id @0, balance @8
const B_BALANCE: usize = 8;
// teller: t_id @0, b_id @8, balance @16; account: a_id @0, b_id @8, balance @16
const TA_BRANCH: usize = 8;
const TA_BALANCE: usize = 16;
// history: t_id @0, b_id @8, a_id @16, delta @24, seq @32
const H_TELLER: usize = 0;
const H_BRANCH: usize = 8;
const H_ACCOUNT: usize = 16;
const H_DELTA: usize = 24;
const H_SEQ: usize = 32;

/// Largest scale this key layout supports (accounts and tellers must fit below the history
/// prefixes; in practice memory runs out long before).
const MAX_BRANCHES: u64 = 1 << 20;

/// TPC-B's options. `Default`: 1 branch of the spec's sizes, 15% remote accounts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TpcbConfig {
    /// Scale factor.
    pub branches: u64,
    /// 100,000 in the spec; smaller for tests.
    pub accounts_per_branch: u64,
    /// Fraction of transactions whose account is in a branch other than the teller's (0.15 in
    /// the spec); only applies with more than one branch.
    pub remote_fraction: f64,
    pub max_retries: u32,
    /// Read each balance with `Txn::read_for_update` (its key locked exclusively first, as
    /// clause 1.2's `UPDATE ... SET balance = balance + delta` is executed) instead of a plain
    /// read followed by the update's lock upgrade. On by default since issue 35's 16-core run
    /// (16 threads, scale 16: aborted ÷ committed 0.31 → 0.012, throughput 1.22×);
    /// `--workload-opt for_update=false` is the plain read every result before it ran (rows
    /// record the setting in `workload_opts`; those without it ran with `false`).
    pub for_update: bool,
    /// Insert the history row last, after the branch's update (the order every result before
    /// 2026-11-29 20:17 UTC ran: rows record the setting in `workload_opts`, and those without
    /// it ran with `true`). Off by default: clause 1.2's profile, as DebitCredit (Anon et al., 1985)
    /// and Shore-kits' `xct_acct_update` (the TPC-B that Pelley et al. and Wang & Johnson ran
    /// on Shore-MT) run it, is account, history, teller, branch, so the branch, the hottest
    /// row, is locked last and held only through the commit, not through the history insert.
    pub history_last: bool,
}

impl Default for TpcbConfig {
    fn default() -> Self {
        TpcbConfig {
            branches: 1,
            accounts_per_branch: 100_000,
            remote_fraction: 0.15,
            max_retries: 1000,
            for_update: true,
            history_last: false,
        }
    }
}

impl TpcbConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.branches == 0 || self.branches > MAX_BRANCHES {
            return Err(format!(
                "branches (scale) must be 1..={MAX_BRANCHES}, got {}",
                self.branches
            ));
        }
        if self.accounts_per_branch == 0 || self.accounts_per_branch > 1 << 24 {
            return Err(format!(
                "accounts_per_branch must be 1..={}, got {}",
                1u64 << 24,
                self.accounts_per_branch
            ));
        }
        if !(0.0..=1.0).contains(&self.remote_fraction) {
            return Err(format!("remote_fraction must be in [0, 1], got {}", self.remote_fraction));
        }
        Ok(())
    }

    fn tellers(&self) -> u64 {
        self.branches * TELLERS_PER_BRANCH
    }

    fn accounts(&self) -> u64 {
        self.branches * self.accounts_per_branch
    }
}

/// The parameters of one account update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccountUpdate {
    pub teller: u64,
    /// The teller's branch (the one whose balance changes).
    pub branch: u64,
    pub account: u64,
    pub account_branch: u64,
    pub delta: i64,
}

impl AccountUpdate {
    pub fn is_remote(&self) -> bool {
        self.branch != self.account_branch
    }
}

/// The deterministic input stream of one TPC-B worker.
pub struct TpcbInputs {
    cfg: Arc<TpcbConfig>,
    rng: WorkerRng,
}

impl TpcbInputs {
    pub fn next_update(&mut self) -> AccountUpdate {
        let cfg = &self.cfg;
        let teller = self.rng.gen_range(0..cfg.tellers());
        let branch = teller / TELLERS_PER_BRANCH;
        let account_branch = if cfg.branches > 1 && self.rng.gen::<f64>() < cfg.remote_fraction {
            // Uniform over the other branches.
            let other = self.rng.gen_range(0..cfg.branches - 1);
            if other >= branch {
                other + 1
            } else {
                other
            }
        } else {
            branch
        };
        let account = account_branch * cfg.accounts_per_branch
            + self.rng.gen_range(0..cfg.accounts_per_branch);
        let delta = self.rng.gen_range(-MAX_DELTA..=MAX_DELTA);
        AccountUpdate { teller, branch, account, account_branch, delta }
    }
}

#[derive(Clone, Copy)]
struct Tables {
    branch: TableId,
    teller: TableId,
    account: TableId,
    history: TableId,
}

impl Tables {
    fn lookup(engine: &dyn Engine) -> Result<Tables, DbError> {
        Ok(Tables {
            branch: lookup_table(engine, BRANCH_TABLE, BRANCH_ROW)?,
            teller: lookup_table(engine, TELLER_TABLE, TELLER_ROW)?,
            account: lookup_table(engine, ACCOUNT_TABLE, ACCOUNT_ROW)?,
            history: lookup_table(engine, HISTORY_TABLE, HISTORY_ROW)?,
        })
    }
}

/// The TPC-B workload. Build with [`Tpcb::new`].
pub struct Tpcb {
    cfg: Arc<TpcbConfig>,
}

impl Tpcb {
    pub fn new(cfg: TpcbConfig) -> Result<Tpcb, String> {
        cfg.validate()?;
        Ok(Tpcb { cfg: Arc::new(cfg) })
    }

    pub fn config(&self) -> &TpcbConfig {
        &self.cfg
    }

    /// The input stream of one worker, without an engine (for tests and tools).
    pub fn inputs(&self, worker: usize, seed: u64) -> TpcbInputs {
        TpcbInputs { cfg: self.cfg.clone(), rng: WorkerRng::for_worker(seed, worker, 1) }
    }
}

impl Workload for Tpcb {
    /// The loaded branches, tellers and accounts, and as many history rows as accounts (the
    /// history table's own size hint): a run appends a history row per transaction, and an
    /// engine that lays its pages out once (`wal`, `group`) cannot grow into more.
    fn estimated_bytes(&self) -> Option<u64> {
        let cfg = &self.cfg;
        Some(crate::util::estimate_bytes([
            (BRANCH_ROW, cfg.branches),
            (TELLER_ROW, cfg.tellers()),
            (ACCOUNT_ROW, cfg.accounts()),
            (HISTORY_ROW, cfg.accounts()),
        ]))
    }

    fn resolved_config(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }

    fn name(&self) -> &'static str {
        "tpcb"
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        let cfg = &self.cfg;
        let t = Tables {
            branch: create_table(engine, BRANCH_TABLE, BRANCH_ROW, cfg.branches)?,
            teller: create_table(engine, TELLER_TABLE, TELLER_ROW, cfg.tellers())?,
            account: create_table(engine, ACCOUNT_TABLE, ACCOUNT_ROW, cfg.accounts())?,
            history: create_table(engine, HISTORY_TABLE, HISTORY_ROW, cfg.accounts())?,
        };
        let total = cfg.branches + cfg.tellers() + cfg.accounts();
        let mut loader = Loader::new(engine, progress, total);
        let mut row = vec![0u8; 100];
        for b in 0..cfg.branches {
            put_u64(&mut row, 0, b);
            put_i64(&mut row, B_BALANCE, INITIAL_BALANCE);
            loader.insert(t.branch, b, &row)?;
        }
        for teller in 0..cfg.tellers() {
            put_u64(&mut row, 0, teller);
            put_u64(&mut row, TA_BRANCH, teller / TELLERS_PER_BRANCH);
            put_i64(&mut row, TA_BALANCE, INITIAL_BALANCE);
            loader.insert(t.teller, teller, &row)?;
        }
        for a in 0..cfg.accounts() {
            put_u64(&mut row, 0, a);
            put_u64(&mut row, TA_BRANCH, a / cfg.accounts_per_branch);
            put_i64(&mut row, TA_BALANCE, INITIAL_BALANCE);
            loader.insert(t.account, a, &row)?;
        }
        loader.finish()
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        Tables::lookup(engine).map(|_| ())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(TpcbWorker {
            inputs: self.inputs(worker, seed),
            worker,
            retrier: Retrier::new(self.cfg.max_retries, seed, worker),
            tables: None,
            next_seq: 0,
            row: Vec::new(),
            for_update: self.cfg.for_update,
            history_last: self.cfg.history_last,
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
        let history = check_history(engine, &self.cfg, t.history)?;
        let branches = read_balances(engine, t.branch, "branch", self.cfg.branches)?;
        let tellers = read_balances(engine, t.teller, "teller", self.cfg.tellers())?;
        let mut account_sum = 0i128;
        let mut account_mismatch: Option<String> = None;
        let apb = self.cfg.accounts_per_branch;
        let mut count = 0u64;
        scan_table(engine, t.account, 0, u64::MAX, &mut |a, row| {
            if a != count {
                return Err(format!("account {count} is missing (next present: {a})"));
            }
            count += 1;
            if get_u64(row, 0) != a || get_u64(row, TA_BRANCH) != a / apb {
                return Err(format!("account {a}: id or branch fields do not match its key"));
            }
            let change = get_i64(row, TA_BALANCE) - INITIAL_BALANCE;
            account_sum += change as i128;
            let expected = history.by_account.get(&a).copied().unwrap_or(0);
            if change as i128 != expected && account_mismatch.is_none() {
                account_mismatch = Some(format!(
                    "account {a}: balance changed by {change}, its history deltas sum to {expected}"
                ));
            }
            Ok(())
        })?;
        if count != self.cfg.accounts() {
            return Err(format!("{count} accounts, expected {}", self.cfg.accounts()));
        }
        let branch_sum: i128 = branches.iter().map(|b| *b as i128).sum();
        let teller_sum: i128 = tellers.iter().map(|b| *b as i128).sum();
        if branch_sum != teller_sum || teller_sum != account_sum || account_sum != history.total {
            return Err(format!(
                "balances disagree: branches {branch_sum}, tellers {teller_sum}, accounts \
                 {account_sum} (change from initial), history deltas {}",
                history.total
            ));
        }
        for (b, balance) in branches.iter().enumerate() {
            if *balance as i128 != history.by_branch[b] {
                return Err(format!(
                    "branch {b}: balance {balance}, its history deltas sum to {}",
                    history.by_branch[b]
                ));
            }
        }
        for (teller, balance) in tellers.iter().enumerate() {
            if *balance as i128 != history.by_teller[teller] {
                return Err(format!(
                    "teller {teller}: balance {balance}, its history deltas sum to {}",
                    history.by_teller[teller]
                ));
            }
        }
        account_mismatch.map_or(Ok(()), Err)
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for ack in acks {
            if ack.table != t.history {
                return Err(format!("ack for table {}, which is not TPC-B's history", ack.table));
            }
            if !check_read(engine, t.history, ack.key, &mut row)? {
                return Err(format!(
                    "acknowledged transaction lost: history row {:#x} (worker {}, seq {}) is \
                     missing",
                    ack.key,
                    (ack.key >> SEQ_BITS).wrapping_sub(1),
                    ack.key & SEQ_MASK
                ));
            }
            if row.len() != HISTORY_ROW as usize || get_i64(&row, H_DELTA) != ack.value as i64 {
                return Err(format!(
                    "history row {:#x} does not hold the acknowledged delta {}",
                    ack.key, ack.value as i64
                ));
            }
        }
        Ok(())
    }
}

fn read_balances(
    engine: &dyn Engine,
    table: TableId,
    what: &str,
    expected: u64,
) -> Result<Vec<i64>, String> {
    let mut balances = Vec::with_capacity(expected as usize);
    scan_table(engine, table, 0, u64::MAX, &mut |key, row| {
        if key != balances.len() as u64 {
            return Err(format!("{what} {} is missing (next present: {key})", balances.len()));
        }
        if get_u64(row, 0) != key {
            return Err(format!("{what} {key}: id field {} does not match", get_u64(row, 0)));
        }
        let balance = if what == "branch" {
            get_i64(row, B_BALANCE)
        } else {
            if get_u64(row, TA_BRANCH) != key / TELLERS_PER_BRANCH {
                return Err(format!("teller {key}: branch field does not match"));
            }
            get_i64(row, TA_BALANCE)
        };
        balances.push(balance - INITIAL_BALANCE);
        Ok(())
    })?;
    if balances.len() as u64 != expected {
        return Err(format!("{} {what} rows, expected {expected}", balances.len()));
    }
    Ok(balances)
}

struct HistorySums {
    total: i128,
    by_branch: Vec<i128>,
    by_teller: Vec<i128>,
    by_account: HashMap<u64, i128>,
}

/// Sums history deltas and checks each worker's sequence numbers are contiguous from 0.
fn check_history(
    engine: &dyn Engine,
    cfg: &TpcbConfig,
    table: TableId,
) -> Result<HistorySums, String> {
    let mut sums = HistorySums {
        total: 0,
        by_branch: vec![0; cfg.branches as usize],
        by_teller: vec![0; cfg.tellers() as usize],
        by_account: HashMap::new(),
    };
    let mut prefix = 0u64;
    let mut next = 0u64;
    scan_table(engine, table, 0, u64::MAX, &mut |key, row| {
        let (p, seq) = (key >> SEQ_BITS, key & SEQ_MASK);
        if p != prefix {
            prefix = p;
            next = 0;
        }
        if seq != next {
            return Err(format!(
                "history of worker {} is not contiguous: seq {next} is missing (next present: \
                 {seq})",
                p.wrapping_sub(1)
            ));
        }
        next += 1;
        let (teller, branch, account) =
            (get_u64(row, H_TELLER), get_u64(row, H_BRANCH), get_u64(row, H_ACCOUNT));
        if teller >= cfg.tellers() || branch != teller / TELLERS_PER_BRANCH {
            return Err(format!("history {key:#x}: teller {teller} / branch {branch} invalid"));
        }
        if account >= cfg.accounts() || get_u64(row, H_SEQ) != seq {
            return Err(format!("history {key:#x}: account {account} or seq field invalid"));
        }
        let delta = get_i64(row, H_DELTA) as i128;
        sums.total += delta;
        sums.by_branch[branch as usize] += delta;
        sums.by_teller[teller as usize] += delta;
        *sums.by_account.entry(account).or_insert(0) += delta;
        Ok(())
    })?;
    Ok(sums)
}

struct TpcbWorker {
    inputs: TpcbInputs,
    worker: usize,
    retrier: Retrier,
    tables: Option<Tables>,
    /// This worker's next history sequence number (found on first use).
    next_seq: u64,
    row: Vec<u8>,
    for_update: bool,
    history_last: bool,
}

impl TpcbWorker {
    fn tables(&mut self, engine: &dyn Engine) -> Result<Tables, DbError> {
        if let Some(t) = self.tables {
            return Ok(t);
        }
        let t = Tables::lookup(engine)?;
        let prefix = self.prefix();
        self.next_seq = next_seq(engine, self.worker, &mut self.retrier, t.history, prefix)?;
        self.tables = Some(t);
        Ok(t)
    }

    fn prefix(&self) -> u64 {
        self.worker as u64 + 1
    }
}

impl Worker for TpcbWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        let t = self.tables(engine)?;
        let u = self.inputs.next_update();
        let seq = self.next_seq;
        let hkey = seq_key(self.prefix(), seq);
        let row = &mut self.row;
        let mut hist = [0u8; HISTORY_ROW as usize];
        put_u64(&mut hist, H_TELLER, u.teller);
        put_u64(&mut hist, H_BRANCH, u.branch);
        put_u64(&mut hist, H_ACCOUNT, u.account);
        put_i64(&mut hist, H_DELTA, u.delta);
        put_u64(&mut hist, H_SEQ, seq);
        let for_update = self.for_update;
        let history_last = self.history_last;
        let done = self.retrier.run(engine, self.worker, |txn| {
            // Clause 1.2's profile: account, history, teller, branch (`history_last`: the
            // history row after the branch).
            let fu = for_update;
            read_existing_to_update(
                txn,
                fu,
                t.account,
                u.account,
                row,
                ACCOUNT_ROW as usize,
                "account",
            )?;
            let balance = get_i64(row, TA_BALANCE).wrapping_add(u.delta);
            let bytes = balance.to_le_bytes();
            update_existing(txn, t.account, u.account, TA_BALANCE as u32, &bytes, "account")?;
            if !history_last {
                txn.insert(t.history, hkey, &hist)?;
            }
            read_existing_to_update(
                txn,
                fu,
                t.teller,
                u.teller,
                row,
                TELLER_ROW as usize,
                "teller",
            )?;
            let teller = get_i64(row, TA_BALANCE).wrapping_add(u.delta).to_le_bytes();
            update_existing(txn, t.teller, u.teller, TA_BALANCE as u32, &teller, "teller")?;
            read_existing_to_update(
                txn,
                fu,
                t.branch,
                u.branch,
                row,
                BRANCH_ROW as usize,
                "branch",
            )?;
            let branch = get_i64(row, B_BALANCE).wrapping_add(u.delta).to_le_bytes();
            update_existing(txn, t.branch, u.branch, B_BALANCE as u32, &branch, "branch")?;
            if history_last {
                txn.insert(t.history, hkey, &hist)?;
            }
            Ok(Outcome::Commit(()))
        })?;
        self.next_seq += 1;
        Ok(TxnDone {
            kind: "account-update",
            token: done.token,
            retries: done.retries,
            acks: vec![Ack { table: t.history, key: hkey, value: u.delta as u64 }],
        })
    }
}

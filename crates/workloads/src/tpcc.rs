//! TPC-C (TPC Benchmark C, rev. 5.11): nine tables scaled by warehouses, the five transactions
//! (New-Order §2.4, Payment §2.5, Order-Status §2.6, Delivery §2.7, Stock-Level §2.8) in the
//! 45/43/4/4/4 mix, NURand (§2.1.6) with fixed run-time constants, remote warehouses (1% of
//! order lines, 15% of payments) and customers by last name (60%) through an index table.
//! Pelley et al. (VLDB 2014, §4, Table 3) run the full mix and New-Order alone; Wang & Johnson
//! (VLDB 2014, §5) Payment alone; both through the `txn` option here. Arulraj et al.
//! (SIGMOD 2015, §5.1) run the full mix.
//!
//! Simplifications: rows hold every column a transaction reads or writes, with the spec's
//! widths where they matter (customer data, stock district info); dates are logical counters;
//! Delivery runs in one transaction (not deferred); terminals are workers, each with a home
//! warehouse (`worker % warehouses + 1`) and, for Stock-Level, a fixed district. Item and
//! customer counts can be scaled down for tests (new orders stay the last 30% of the initial
//! orders, as 900 of 3,000 in the spec).
//!
//! Invariant: the consistency conditions of §3.3.2.1-6 hold (checked by [`Tpcc::check`], with
//! the two index tables and each worker's history sequence), and acknowledged orders,
//! payments and deliveries survive.

mod check;
mod load;
pub mod schema;
mod txns;

use crate::generators::{nurand, WorkerRng};
use crate::util::{check_read, get_i64, get_u32, Retrier};
use crate::{Ack, TxnDone, Worker, Workload};
use rand::Rng;
use schema::{Tables, DISTRICTS, MAX_CUSTOMERS, MAX_ITEMS, MAX_ORDER_LINES, MAX_WAREHOUSES};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use storage::{DbError, Engine};

/// NURand's C for customer last names at load time and at run time (§2.1.6.1: the difference is
/// in 65..=119 and neither 96 nor 112), for customer ids, and for item ids.
pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 223;
pub const C_CUSTOMER_ID: u64 = 259;
pub const C_ITEM_ID: u64 = 7911;
const _: () = assert!(C_LAST_RUN - C_LAST_LOAD >= 65 && C_LAST_RUN - C_LAST_LOAD <= 119);
const _: () = assert!(C_LAST_RUN - C_LAST_LOAD != 96 && C_LAST_RUN - C_LAST_LOAD != 112);

/// Orders per district at load are the customers (one each); the last 30% of them are
/// undelivered and have new-order rows (900 of 3,000, §4.3.3.1).
pub fn new_orders_per_district(customers: u32) -> u32 {
    customers * 900 / 3000
}

/// The five transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TpccTxn {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl TpccTxn {
    pub const ALL: [TpccTxn; 5] = [
        TpccTxn::NewOrder,
        TpccTxn::Payment,
        TpccTxn::OrderStatus,
        TpccTxn::Delivery,
        TpccTxn::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TpccTxn::NewOrder => "new-order",
            TpccTxn::Payment => "payment",
            TpccTxn::OrderStatus => "order-status",
            TpccTxn::Delivery => "delivery",
            TpccTxn::StockLevel => "stock-level",
        }
    }

    pub fn parse(s: &str) -> Result<TpccTxn, String> {
        TpccTxn::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            format!(
                "unknown TPC-C transaction {s:?}: use new-order, payment, order-status, \
                 delivery or stock-level"
            )
        })
    }
}

/// TPC-C's options. `Default`: one warehouse at the spec's sizes, the spec's mix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TpccConfig {
    /// Scale factor.
    pub warehouses: u32,
    /// 100,000 in the spec; fewer for tests.
    pub items: u32,
    /// 3,000 in the spec; fewer for tests.
    pub customers_per_district: u32,
    /// Weights of new-order, payment, order-status, delivery, stock-level (45/43/4/4/4, the
    /// minimum percentages of §5.2.3 with New-Order taking the rest).
    pub mix: [u32; 5],
    /// Run this transaction alone (overrides `mix`).
    pub txn: Option<TpccTxn>,
    pub max_retries: u32,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig {
            warehouses: 1,
            items: MAX_ITEMS,
            customers_per_district: MAX_CUSTOMERS,
            mix: [45, 43, 4, 4, 4],
            txn: None,
            max_retries: 1000,
        }
    }
}

impl TpccConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses == 0 || self.warehouses > MAX_WAREHOUSES {
            return Err(format!(
                "warehouses (scale) must be 1..={MAX_WAREHOUSES}, got {}",
                self.warehouses
            ));
        }
        if self.items == 0 || self.items > MAX_ITEMS {
            return Err(format!("items must be 1..={MAX_ITEMS}, got {}", self.items));
        }
        if self.customers_per_district == 0 || self.customers_per_district > MAX_CUSTOMERS {
            return Err(format!(
                "customers_per_district must be 1..={MAX_CUSTOMERS}, got {}",
                self.customers_per_district
            ));
        }
        if self.txn.is_none() && self.mix.iter().map(|w| *w as u64).sum::<u64>() == 0 {
            return Err("every TPC-C mix weight is zero: nothing to run".to_string());
        }
        Ok(())
    }

    fn weights(&self) -> [u32; 5] {
        match self.txn {
            Some(t) => {
                let mut w = [0; 5];
                w[TpccTxn::ALL.iter().position(|x| *x == t).unwrap_or(0)] = 1;
                w
            }
            None => self.mix,
        }
    }
}

/// How a Payment or Order-Status names its customer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CustomerSelector {
    Id(u32),
    /// Last-name number (0..=999, see [`schema::last_name`]).
    LastName(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderLineInput {
    pub item: u32,
    pub supply_w: u32,
    pub quantity: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrderInput {
    pub w: u32,
    pub d: u32,
    pub c: u32,
    pub lines: Vec<OrderLineInput>,
    /// The last line names an unused item, so the transaction rolls back (1%, §2.4.1.4).
    pub rollback: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaymentInput {
    pub w: u32,
    pub d: u32,
    pub c_w: u32,
    pub c_d: u32,
    pub customer: CustomerSelector,
    pub amount_cents: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderStatusInput {
    pub w: u32,
    pub d: u32,
    pub customer: CustomerSelector,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryInput {
    pub w: u32,
    pub carrier: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StockLevelInput {
    pub w: u32,
    pub d: u32,
    pub threshold: u32,
}

/// One transaction with its parameters (the terminal inputs of §2.4.1-2.8.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TpccInput {
    NewOrder(NewOrderInput),
    Payment(PaymentInput),
    OrderStatus(OrderStatusInput),
    Delivery(DeliveryInput),
    StockLevel(StockLevelInput),
}

impl TpccInput {
    pub fn txn(&self) -> TpccTxn {
        match self {
            TpccInput::NewOrder(_) => TpccTxn::NewOrder,
            TpccInput::Payment(_) => TpccTxn::Payment,
            TpccInput::OrderStatus(_) => TpccTxn::OrderStatus,
            TpccInput::Delivery(_) => TpccTxn::Delivery,
            TpccInput::StockLevel(_) => TpccTxn::StockLevel,
        }
    }
}

/// The deterministic input stream of one TPC-C terminal (worker).
pub struct TpccInputs {
    cfg: Arc<TpccConfig>,
    rng: WorkerRng,
    home_w: u32,
    stock_level_d: u32,
    cumulative: [u64; 5],
}

impl TpccInputs {
    fn new(cfg: Arc<TpccConfig>, worker: usize, seed: u64) -> Self {
        let w = cfg.warehouses as usize;
        let home_w = (worker % w) as u32 + 1;
        let stock_level_d = ((worker / w) % DISTRICTS as usize) as u32 + 1;
        let mut cumulative = [0u64; 5];
        let mut sum = 0u64;
        for (c, weight) in cumulative.iter_mut().zip(cfg.weights()) {
            sum += weight as u64;
            *c = sum;
        }
        TpccInputs {
            cfg,
            rng: WorkerRng::for_worker(seed, worker, 1),
            home_w,
            stock_level_d,
            cumulative,
        }
    }

    pub fn home_warehouse(&self) -> u32 {
        self.home_w
    }

    /// The next transaction.
    pub fn next_input(&mut self) -> TpccInput {
        let r = self.rng.gen_range(0..self.cumulative[4]);
        match self.cumulative.iter().position(|c| r < *c).unwrap_or(0) {
            0 => TpccInput::NewOrder(self.new_order()),
            1 => TpccInput::Payment(self.payment()),
            2 => TpccInput::OrderStatus(self.order_status()),
            3 => TpccInput::Delivery(DeliveryInput {
                w: self.home_w,
                carrier: self.rng.gen_range(1..=10),
            }),
            _ => TpccInput::StockLevel(StockLevelInput {
                w: self.home_w,
                d: self.stock_level_d,
                threshold: self.rng.gen_range(10..=20),
            }),
        }
    }

    fn district(&mut self) -> u32 {
        self.rng.gen_range(1..=DISTRICTS)
    }

    fn other_warehouse(&mut self) -> u32 {
        let n = self.cfg.warehouses;
        let other = self.rng.gen_range(1..n);
        if other >= self.home_w {
            other + 1
        } else {
            other
        }
    }

    fn customer_id(&mut self) -> u32 {
        customer_id(&mut self.rng, self.cfg.customers_per_district)
    }

    fn customer(&mut self) -> CustomerSelector {
        // §2.5.1.2 / §2.6.1.2: 60% by last name.
        if self.rng.gen_range(1..=100) <= 60 {
            CustomerSelector::LastName(run_last_name_number(
                &mut self.rng,
                self.cfg.customers_per_district,
            ))
        } else {
            CustomerSelector::Id(self.customer_id())
        }
    }

    fn new_order(&mut self) -> NewOrderInput {
        let (w, d, c) = (self.home_w, self.district(), self.customer_id());
        let count = self.rng.gen_range(5..=MAX_ORDER_LINES);
        let rollback = self.rng.gen_range(1..=100) == 1;
        let mut lines = Vec::with_capacity(count as usize);
        for n in 0..count {
            let item = if rollback && n == count - 1 {
                self.cfg.items + 1
            } else {
                item_id(&mut self.rng, self.cfg.items)
            };
            // §2.4.1.5: 1% of the lines are supplied by a remote warehouse.
            let remote = self.cfg.warehouses > 1 && self.rng.gen_range(1..=100) == 1;
            let supply_w = if remote { self.other_warehouse() } else { w };
            let quantity = self.rng.gen_range(1..=10);
            lines.push(OrderLineInput { item, supply_w, quantity });
        }
        NewOrderInput { w, d, c, lines, rollback }
    }

    fn payment(&mut self) -> PaymentInput {
        let (w, d) = (self.home_w, self.district());
        // §2.5.1.2: 85% home, 15% a remote warehouse's customer.
        let (c_w, c_d) = if self.cfg.warehouses > 1 && self.rng.gen_range(1..=100) > 85 {
            (self.other_warehouse(), self.district())
        } else {
            (w, d)
        };
        let customer = self.customer();
        let amount_cents = self.rng.gen_range(100..=500_000);
        PaymentInput { w, d, c_w, c_d, customer, amount_cents }
    }

    fn order_status(&mut self) -> OrderStatusInput {
        let (w, d) = (self.home_w, self.district());
        OrderStatusInput { w, d, customer: self.customer() }
    }
}

/// A run-time customer id: NURand(1023, 1, customers).
pub fn customer_id(rng: &mut WorkerRng, customers: u32) -> u32 {
    nurand(rng, 1023, C_CUSTOMER_ID, 1, customers as u64) as u32
}

/// A run-time item id: NURand(8191, 1, items).
pub fn item_id(rng: &mut WorkerRng, items: u32) -> u32 {
    nurand(rng, 8191, C_ITEM_ID, 1, items as u64) as u32
}

/// A run-time last-name number: NURand(255, 0, 999); with fewer than 1,000 customers per
/// district, folded onto the names that exist.
pub fn run_last_name_number(rng: &mut WorkerRng, customers: u32) -> u32 {
    let n = nurand(rng, 255, C_LAST_RUN, 0, 999) as u32;
    if customers < 1000 {
        n % customers
    } else {
        n
    }
}

/// The TPC-C workload. Build with [`Tpcc::new`].
pub struct Tpcc {
    cfg: Arc<TpccConfig>,
}

impl Tpcc {
    pub fn new(cfg: TpccConfig) -> Result<Tpcc, String> {
        cfg.validate()?;
        Ok(Tpcc { cfg: Arc::new(cfg) })
    }

    pub fn config(&self) -> &TpccConfig {
        &self.cfg
    }

    /// The input stream of one worker, without an engine (for tests and tools).
    pub fn inputs(&self, worker: usize, seed: u64) -> TpccInputs {
        TpccInputs::new(self.cfg.clone(), worker, seed)
    }
}

impl Workload for Tpcc {
    fn resolved_config(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn estimated_bytes(&self) -> Option<u64> {
        Some(load::estimated_bytes(&self.cfg))
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        load::load(engine, &self.cfg, progress)
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        Tables::lookup(engine).map(|_| ())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(txns::TpccWorker::new(
            self.inputs(worker, seed),
            worker,
            Retrier::new(self.cfg.max_retries, seed, worker),
        ))
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        check::check(engine, &self.cfg)
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for ack in acks {
            verify_ack(engine, &t, ack, &mut row)?;
        }
        Ok(())
    }
}

/// Acks: `orders` (key, `o_ol_cnt`) = New-Order committed that order; `new_order` (key,
/// carrier) = Delivery delivered that order (its new-order row is gone and the carrier set);
/// `history` (key, amount) = Payment committed that history row.
fn verify_ack(engine: &dyn Engine, t: &Tables, ack: &Ack, row: &mut Vec<u8>) -> Result<(), String> {
    use schema::{history, order};
    if ack.table == t.orders {
        if !check_read(engine, t.orders, ack.key, row)? {
            return Err(format!("acknowledged New-Order lost: order {:#x} is missing", ack.key));
        }
        if row.len() != order::ROW as usize || get_u32(row, order::OL_CNT) as u64 != ack.value {
            return Err(format!("order {:#x} lost its acknowledged line count", ack.key));
        }
        let (w, d, o) = schema::split_order_key(ack.key);
        for ol in 1..=ack.value as u32 {
            let key = schema::order_line_key(w, d, o, ol);
            if !check_read(engine, t.order_line, key, row)? {
                return Err(format!(
                    "acknowledged order {:#x}: order line {ol} is missing",
                    ack.key
                ));
            }
        }
        Ok(())
    } else if ack.table == t.new_order {
        if check_read(engine, t.new_order, ack.key, row)? {
            return Err(format!(
                "acknowledged Delivery lost: order {:#x} is still undelivered",
                ack.key
            ));
        }
        let found = check_read(engine, t.orders, ack.key, row)?;
        if !found || row.len() != order::ROW as usize {
            return Err(format!("delivered order {:#x} is missing", ack.key));
        }
        if get_u32(row, order::CARRIER_ID) as u64 != ack.value {
            return Err(format!(
                "delivered order {:#x}: carrier {} instead of the acknowledged {}",
                ack.key,
                get_u32(row, order::CARRIER_ID),
                ack.value
            ));
        }
        Ok(())
    } else if ack.table == t.history {
        if !check_read(engine, t.history, ack.key, row)? {
            return Err(format!("acknowledged Payment lost: history {:#x} is missing", ack.key));
        }
        if row.len() != history::ROW as usize || get_i64(row, history::AMOUNT) != ack.value as i64 {
            return Err(format!("history {:#x} does not hold the acknowledged amount", ack.key));
        }
        Ok(())
    } else {
        Err(format!("ack for table {}, which TPC-C does not acknowledge", ack.table))
    }
}

/// Shared by the worker: turns a transaction's result into the driver's record.
fn done(
    txn: TpccTxn,
    token: Option<storage::CommitToken>,
    retries: u32,
    acks: Vec<Ack>,
) -> TxnDone {
    TxnDone { kind: txn.name(), token, retries, acks }
}

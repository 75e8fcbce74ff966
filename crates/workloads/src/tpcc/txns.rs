//! The five TPC-C transactions (§2.4-2.8) against the [`schema`](super::schema), and the worker
//! that runs them with conflict retries.

use super::schema::*;
use super::{
    done, DeliveryInput, NewOrderInput, OrderStatusInput, PaymentInput, StockLevelInput, TpccInput,
    TpccInputs,
};
use super::{load::LOAD_DATE, CustomerSelector};
use crate::util::{
    get_i64, get_u32, get_u64, next_seq, put_i64, put_u32, put_u64, read_existing, read_row,
    seq_key, update_existing, Outcome, Retrier,
};
use crate::{Ack, TxnDone, Worker};
use storage::{DbError, Engine, Txn};

/// Reusable buffers, so a transaction allocates nothing in the steady state.
#[derive(Default)]
struct Bufs {
    row: Vec<u8>,
    new: Vec<u8>,
    names: Vec<([u8; customer::NAME_LEN], u32)>,
    lines: Vec<(u64, i64)>,
    items: Vec<u32>,
}

pub(super) struct TpccWorker {
    inputs: TpccInputs,
    worker: usize,
    retrier: Retrier,
    tables: Option<Tables>,
    /// Next history sequence number of this worker (found on first use).
    next_seq: u64,
    /// Logical clock for O_ENTRY_D, OL_DELIVERY_D, H_DATE.
    date: u64,
    bufs: Bufs,
}

impl TpccWorker {
    pub(super) fn new(inputs: TpccInputs, worker: usize, retrier: Retrier) -> Self {
        TpccWorker {
            inputs,
            worker,
            retrier,
            tables: None,
            next_seq: 0,
            date: LOAD_DATE,
            bufs: Bufs::default(),
        }
    }

    fn tables(&mut self, engine: &dyn Engine) -> Result<Tables> {
        if let Some(t) = self.tables {
            return Ok(t);
        }
        let t = Tables::lookup(engine)?;
        let prefix = self.worker as u64 + 1;
        self.next_seq = next_seq(engine, self.worker, &mut self.retrier, t.history, prefix)?;
        self.tables = Some(t);
        Ok(t)
    }
}

impl Worker for TpccWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone> {
        let t = self.tables(engine)?;
        let input = self.inputs.next_input();
        self.date += 1;
        let date = self.date;
        let worker = self.worker;
        let hkey = seq_key(worker as u64 + 1, self.next_seq);
        let b = &mut self.bufs;
        let r = match &input {
            TpccInput::NewOrder(i) => {
                self.retrier.run(engine, worker, |txn| new_order(txn, &t, i, date, b))
            }
            TpccInput::Payment(i) => {
                self.retrier.run(engine, worker, |txn| payment(txn, &t, i, hkey, date, b))
            }
            TpccInput::OrderStatus(i) => {
                self.retrier.run(engine, worker, |txn| order_status(txn, &t, i, b))
            }
            TpccInput::Delivery(i) => {
                self.retrier.run(engine, worker, |txn| delivery(txn, &t, i, date, b))
            }
            TpccInput::StockLevel(i) => {
                self.retrier.run(engine, worker, |txn| stock_level(txn, &t, i, b))
            }
        }?;
        if matches!(input, TpccInput::Payment(_)) {
            self.next_seq += 1;
        }
        Ok(done(input.txn(), r.token, r.retries, r.value))
    }
}

type Result<T> = std::result::Result<T, DbError>;

/// New-Order (§2.4.2): allocate the district's next order id, insert the order, its new-order
/// row, its index entry and its lines, updating each line's stock.
fn new_order(
    txn: &mut dyn Txn,
    t: &Tables,
    inp: &NewOrderInput,
    date: u64,
    b: &mut Bufs,
) -> Result<Outcome<Vec<Ack>>> {
    let (w, d) = (inp.w, inp.d);
    read_existing(txn, t.warehouse, w as u64, &mut b.row, warehouse::ROW as usize, "warehouse")?;
    let dkey = district_key(w, d);
    read_existing(txn, t.district, dkey, &mut b.row, district::ROW as usize, "district")?;
    let o = get_u32(&b.row, district::NEXT_O_ID);
    let next = o.wrapping_add(1).to_le_bytes();
    update_existing(txn, t.district, dkey, district::NEXT_O_ID as u32, &next, "district")?;
    let ckey = customer_key(w, d, inp.c);
    read_existing(txn, t.customer, ckey, &mut b.row, customer::ROW as usize, "customer")?;

    let okey = order_key(w, d, o);
    let ol_cnt = inp.lines.len() as u32;
    let all_local = inp.lines.iter().all(|l| l.supply_w == w);
    b.new.clear();
    b.new.resize(order::ROW as usize, 0);
    put_u32(&mut b.new, order::ID, o);
    put_u32(&mut b.new, order::D_ID, d);
    put_u32(&mut b.new, order::W_ID, w);
    put_u32(&mut b.new, order::C_ID, inp.c);
    put_u64(&mut b.new, order::ENTRY_D, date);
    put_u32(&mut b.new, order::CARRIER_ID, 0);
    put_u32(&mut b.new, order::OL_CNT, ol_cnt);
    put_u32(&mut b.new, order::ALL_LOCAL, all_local as u32);
    txn.insert(t.orders, okey, &b.new)?;
    let mut no = [0u8; new_order::ROW as usize];
    put_u32(&mut no, new_order::O_ID, o);
    put_u32(&mut no, new_order::D_ID, d);
    put_u32(&mut no, new_order::W_ID, w);
    txn.insert(t.new_order, okey, &no)?;
    let mut oc = [0u8; order_customer::ROW as usize];
    put_u32(&mut oc, order_customer::O_ID, o);
    txn.insert(t.order_customer, order_customer_key(w, d, inp.c, o), &oc)?;

    let dist = stock::DIST + (d.clamp(1, DISTRICTS) as usize - 1) * stock::DIST_LEN;
    for (n, line) in inp.lines.iter().enumerate() {
        if !read_row(txn, t.item, line.item as u64, &mut b.row, item::ROW as usize)? {
            if inp.rollback {
                // §2.4.2.3: an unused item id; the whole transaction rolls back.
                return Ok(Outcome::Rollback(Vec::new()));
            }
            return Err(DbError::Corrupt(format!("TPC-C item {} is missing", line.item)));
        }
        let price = get_i64(&b.row, item::PRICE);
        let skey = stock_key(line.supply_w, line.item);
        read_existing(txn, t.stock, skey, &mut b.row, stock::ROW as usize, "stock")?;
        let q = get_u32(&b.row, stock::QUANTITY);
        let new_q = if q >= line.quantity + 10 {
            q - line.quantity
        } else {
            q.wrapping_add(91).wrapping_sub(line.quantity)
        };
        put_u32(&mut b.row, stock::QUANTITY, new_q);
        let ytd = get_u64(&b.row, stock::YTD).wrapping_add(line.quantity as u64);
        put_u64(&mut b.row, stock::YTD, ytd);
        let orders = get_u32(&b.row, stock::ORDER_CNT).wrapping_add(1);
        put_u32(&mut b.row, stock::ORDER_CNT, orders);
        let remote = get_u32(&b.row, stock::REMOTE_CNT).wrapping_add((line.supply_w != w) as u32);
        put_u32(&mut b.row, stock::REMOTE_CNT, remote);
        let counters = &b.row[stock::QUANTITY..stock::DIST];
        update_existing(txn, t.stock, skey, stock::QUANTITY as u32, counters, "stock")?;

        let ol = n as u32 + 1;
        b.new.clear();
        b.new.resize(order_line::ROW as usize, 0);
        put_u32(&mut b.new, order_line::O_ID, o);
        put_u32(&mut b.new, order_line::D_ID, d);
        put_u32(&mut b.new, order_line::W_ID, w);
        put_u32(&mut b.new, order_line::NUMBER, ol);
        put_u32(&mut b.new, order_line::I_ID, line.item);
        put_u32(&mut b.new, order_line::SUPPLY_W_ID, line.supply_w);
        put_u64(&mut b.new, order_line::DELIVERY_D, 0);
        put_u32(&mut b.new, order_line::QUANTITY, line.quantity);
        put_i64(&mut b.new, order_line::AMOUNT, line.quantity as i64 * price);
        let info = order_line::DIST_INFO..order_line::DIST_INFO + order_line::DIST_INFO_LEN;
        b.new[info].copy_from_slice(&b.row[dist..dist + stock::DIST_LEN]);
        txn.insert(t.order_line, order_line_key(w, d, o, ol), &b.new)?;
    }
    Ok(Outcome::Commit(vec![Ack { table: t.orders, key: okey, value: ol_cnt as u64 }]))
}

/// Resolves a customer by id, or by last name: the one at position ⌈n/2⌉ of those with the
/// name, sorted by first name (§2.5.2.2), found through the `customer_name` index.
fn resolve_customer(
    txn: &mut dyn Txn,
    t: &Tables,
    w: u32,
    d: u32,
    selector: CustomerSelector,
    b: &mut Bufs,
) -> Result<u32> {
    let last = match selector {
        CustomerSelector::Id(c) => return Ok(c),
        CustomerSelector::LastName(n) => n,
    };
    let names = &mut b.names;
    names.clear();
    let low = customer_name_key(w, d, last, 0);
    let high = customer_name_key(w, d, last, (1 << C_BITS) - 1);
    txn.scan(t.customer_name, low, high, usize::MAX, &mut |key, row| {
        let mut first = [0u8; customer::NAME_LEN];
        let n = row.len().min(first.len());
        first[..n].copy_from_slice(&row[..n]);
        names.push((first, customer_of_name_key(key)));
        true
    })?;
    if names.is_empty() {
        return Err(DbError::Corrupt(format!(
            "no customer named {} in warehouse {w} district {d}",
            last_name_string(last)
        )));
    }
    names.sort_unstable();
    Ok(names[(names.len() - 1) / 2].1)
}

/// Payment (§2.5.2): add the amount to warehouse and district year-to-date, charge the
/// customer (prepending to C_DATA for bad credit), and record a history row.
fn payment(
    txn: &mut dyn Txn,
    t: &Tables,
    p: &PaymentInput,
    hkey: u64,
    date: u64,
    b: &mut Bufs,
) -> Result<Outcome<Vec<Ack>>> {
    let mut hist = [0u8; history::ROW as usize];
    let amount = p.amount_cents;
    let wkey = p.w as u64;
    read_existing(txn, t.warehouse, wkey, &mut b.row, warehouse::ROW as usize, "warehouse")?;
    let ytd = get_i64(&b.row, warehouse::YTD).wrapping_add(amount).to_le_bytes();
    update_existing(txn, t.warehouse, wkey, warehouse::YTD as u32, &ytd, "warehouse")?;
    let name = warehouse::NAME..warehouse::NAME + warehouse::NAME_LEN;
    hist[history::DATA..history::DATA + 10].copy_from_slice(&b.row[name]);
    hist[history::DATA + 10..history::DATA + 14].copy_from_slice(b"    ");

    let dkey = district_key(p.w, p.d);
    read_existing(txn, t.district, dkey, &mut b.row, district::ROW as usize, "district")?;
    let ytd = get_i64(&b.row, district::YTD).wrapping_add(amount).to_le_bytes();
    update_existing(txn, t.district, dkey, district::YTD as u32, &ytd, "district")?;
    let name = district::NAME..district::NAME + district::NAME_LEN;
    hist[history::DATA + 14..history::DATA + 24].copy_from_slice(&b.row[name]);

    let c = resolve_customer(txn, t, p.c_w, p.c_d, p.customer, b)?;
    let ckey = customer_key(p.c_w, p.c_d, c);
    read_existing(txn, t.customer, ckey, &mut b.row, customer::ROW as usize, "customer")?;
    let balance = get_i64(&b.row, customer::BALANCE).wrapping_sub(amount);
    put_i64(&mut b.row, customer::BALANCE, balance);
    let paid = get_i64(&b.row, customer::YTD_PAYMENT).wrapping_add(amount);
    put_i64(&mut b.row, customer::YTD_PAYMENT, paid);
    let count = get_u32(&b.row, customer::PAYMENT_CNT).wrapping_add(1);
    put_u32(&mut b.row, customer::PAYMENT_CNT, count);
    let money = &b.row[customer::BALANCE..customer::DELIVERY_CNT];
    update_existing(txn, t.customer, ckey, customer::BALANCE as u32, money, "customer")?;
    if &b.row[customer::CREDIT..customer::CREDIT + 2] == b"BC" {
        // §2.5.2.2: prepend the payment to C_DATA, keeping 500 characters.
        let entry = format!(
            "{c} {} {} {} {} {}.{:02}|",
            p.c_d,
            p.c_w,
            p.d,
            p.w,
            amount / 100,
            amount % 100
        );
        let data = customer::DATA..customer::DATA + customer::DATA_LEN;
        b.new.clear();
        b.new.extend_from_slice(entry.as_bytes());
        b.new.extend_from_slice(&b.row[data]);
        b.new.truncate(customer::DATA_LEN);
        update_existing(txn, t.customer, ckey, customer::DATA as u32, &b.new, "customer")?;
    }

    put_u32(&mut hist, history::C_ID, c);
    put_u32(&mut hist, history::C_D_ID, p.c_d);
    put_u32(&mut hist, history::C_W_ID, p.c_w);
    put_u32(&mut hist, history::D_ID, p.d);
    put_u32(&mut hist, history::W_ID, p.w);
    put_u64(&mut hist, history::DATE, date);
    put_i64(&mut hist, history::AMOUNT, amount);
    txn.insert(t.history, hkey, &hist)?;
    Ok(Outcome::Commit(vec![Ack { table: t.history, key: hkey, value: amount as u64 }]))
}

/// Order-Status (§2.6.2): the customer, their newest order (first entry of their range in the
/// inverted `order_customer` index) and its lines. Read-only.
fn order_status(
    txn: &mut dyn Txn,
    t: &Tables,
    p: &OrderStatusInput,
    b: &mut Bufs,
) -> Result<Outcome<Vec<Ack>>> {
    let c = resolve_customer(txn, t, p.w, p.d, p.customer, b)?;
    let ckey = customer_key(p.w, p.d, c);
    read_existing(txn, t.customer, ckey, &mut b.row, customer::ROW as usize, "customer")?;
    let mut newest = None;
    let (low, high) =
        (order_customer_key(p.w, p.d, c, u32::MAX), order_customer_key(p.w, p.d, c, 0));
    txn.scan(t.order_customer, low, high, 1, &mut |key, _| {
        newest = Some(split_order_customer_key(key).1);
        false
    })?;
    if let Some(o) = newest {
        let okey = order_key(p.w, p.d, o);
        read_existing(txn, t.orders, okey, &mut b.row, order::ROW as usize, "order")?;
        let (low, high) = (order_line_key(p.w, p.d, o, 0), order_line_key(p.w, p.d, o, 15));
        let mut total = 0i64;
        txn.scan(t.order_line, low, high, MAX_ORDER_LINES as usize, &mut |_, row| {
            if row.len() == order_line::ROW as usize {
                total = total.wrapping_add(get_i64(row, order_line::AMOUNT));
            }
            true
        })?;
        std::hint::black_box(total);
    }
    Ok(Outcome::ReadOnly(Vec::new()))
}

/// Delivery (§2.7.4): for each district, the oldest undelivered order: delete its new-order
/// row, set its carrier and its lines' delivery date, and credit the customer.
fn delivery(
    txn: &mut dyn Txn,
    t: &Tables,
    p: &DeliveryInput,
    date: u64,
    b: &mut Bufs,
) -> Result<Outcome<Vec<Ack>>> {
    let w = p.w;
    let mut acks = Vec::new();
    for d in 1..=DISTRICTS {
        let mut oldest = None;
        txn.scan(t.new_order, order_key(w, d, 0), order_key(w, d, u32::MAX), 1, &mut |key, _| {
            oldest = Some(key);
            false
        })?;
        let Some(okey) = oldest else { continue };
        let (_, _, o) = split_order_key(okey);
        if !txn.delete(t.new_order, okey)? {
            return Err(DbError::Corrupt(format!("new-order {okey:#x} vanished under its lock")));
        }
        read_existing(txn, t.orders, okey, &mut b.row, order::ROW as usize, "order")?;
        let c = get_u32(&b.row, order::C_ID);
        let carrier = p.carrier.to_le_bytes();
        update_existing(txn, t.orders, okey, order::CARRIER_ID as u32, &carrier, "order")?;

        let lines = &mut b.lines;
        lines.clear();
        let (low, high) = (order_line_key(w, d, o, 0), order_line_key(w, d, o, 15));
        txn.scan(t.order_line, low, high, MAX_ORDER_LINES as usize + 1, &mut |key, row| {
            let amount = if row.len() == order_line::ROW as usize {
                get_i64(row, order_line::AMOUNT)
            } else {
                0
            };
            lines.push((key, amount));
            true
        })?;
        let mut total = 0i64;
        for (key, amount) in lines.iter() {
            let when = date.to_le_bytes();
            let at = order_line::DELIVERY_D as u32;
            update_existing(txn, t.order_line, *key, at, &when, "order line")?;
            total = total.wrapping_add(*amount);
        }

        let ckey = customer_key(w, d, c);
        read_existing(txn, t.customer, ckey, &mut b.row, customer::ROW as usize, "customer")?;
        let balance = get_i64(&b.row, customer::BALANCE).wrapping_add(total);
        put_i64(&mut b.row, customer::BALANCE, balance);
        let count = get_u32(&b.row, customer::DELIVERY_CNT).wrapping_add(1);
        put_u32(&mut b.row, customer::DELIVERY_CNT, count);
        let money = &b.row[customer::BALANCE..customer::DELIVERY_CNT + 4];
        update_existing(txn, t.customer, ckey, customer::BALANCE as u32, money, "customer")?;
        acks.push(Ack { table: t.new_order, key: okey, value: p.carrier as u64 });
    }
    if acks.is_empty() {
        Ok(Outcome::ReadOnly(acks))
    } else {
        Ok(Outcome::Commit(acks))
    }
}

/// Stock-Level (§2.8.2): distinct items of the district's last 20 orders whose stock is below
/// the threshold. Read-only.
fn stock_level(
    txn: &mut dyn Txn,
    t: &Tables,
    p: &StockLevelInput,
    b: &mut Bufs,
) -> Result<Outcome<Vec<Ack>>> {
    let dkey = district_key(p.w, p.d);
    read_existing(txn, t.district, dkey, &mut b.row, district::ROW as usize, "district")?;
    let next = get_u32(&b.row, district::NEXT_O_ID);
    if next <= 1 {
        return Ok(Outcome::ReadOnly(Vec::new()));
    }
    let (first, last) = (next.saturating_sub(20).max(1), next - 1);
    let items = &mut b.items;
    items.clear();
    let (low, high) = (order_line_key(p.w, p.d, first, 0), order_line_key(p.w, p.d, last, 15));
    txn.scan(t.order_line, low, high, usize::MAX, &mut |_, row| {
        if row.len() == order_line::ROW as usize {
            items.push(get_u32(row, order_line::I_ID));
        }
        true
    })?;
    items.sort_unstable();
    items.dedup();
    let mut low_stock = 0u32;
    for i in items.iter() {
        let skey = stock_key(p.w, *i);
        read_existing(txn, t.stock, skey, &mut b.row, stock::ROW as usize, "stock")?;
        if get_u32(&b.row, stock::QUANTITY) < p.threshold {
            low_stock += 1;
        }
    }
    // The result goes to the terminal; keep the work from being optimised away.
    std::hint::black_box(low_stock);
    Ok(Outcome::ReadOnly(Vec::new()))
}

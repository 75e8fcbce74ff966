//! TPC-C's initial database population (§4.3.3.1), in load transactions of at most 200 rows.
//! The population depends only on the configuration, never on the run seed.

use super::schema::{self, *};
use super::{new_orders_per_district, TpccConfig, C_LAST_LOAD};
use crate::generators::{nurand, WorkerRng};
use crate::util::{fill_digits, fill_letters, put_i64, put_u32, put_u64, seq_key, Loader};
use rand::Rng;
use storage::{DbError, Engine};

/// The logical date of everything the loader writes (run-time dates count up from 2).
pub(super) const LOAD_DATE: u64 = 1;
const LOAD_SEED: u64 = 0x7470_6363;
/// §4.3.3.1: W_YTD = 300,000.00 and D_YTD = 30,000.00, so condition 1 holds at load.
const WAREHOUSE_YTD_CENTS: i64 = 30_000_000;
const DISTRICT_YTD_CENTS: i64 = 3_000_000;

/// Fills `buf` with a random-length a-string of `min..=max` letters, zero-padded.
fn astring(rng: &mut WorkerRng, buf: &mut [u8], min: usize, max: usize) -> usize {
    let max = max.min(buf.len());
    let len = rng.gen_range(min.min(max)..=max);
    fill_letters(rng, &mut buf[..len]);
    buf[len..].fill(0);
    len
}

/// An a-string of which 10% contain "ORIGINAL" (I_DATA, S_DATA; §4.3.3.1).
fn data_string(rng: &mut WorkerRng, buf: &mut [u8], min: usize, max: usize) {
    let len = astring(rng, buf, min, max);
    const ORIGINAL: &[u8] = b"ORIGINAL";
    if len >= ORIGINAL.len() && rng.gen_range(0..10) == 0 {
        let at = rng.gen_range(0..=len - ORIGINAL.len());
        buf[at..at + ORIGINAL.len()].copy_from_slice(ORIGINAL);
    }
}

/// Street 1, street 2, city (10..20 letters each), state (2 letters), zip (4 digits + "11111").
fn address(rng: &mut WorkerRng, buf: &mut [u8]) {
    astring(rng, &mut buf[0..20], 10, 20);
    astring(rng, &mut buf[20..40], 10, 20);
    astring(rng, &mut buf[40..60], 10, 20);
    fill_letters(rng, &mut buf[60..62]);
    fill_digits(rng, &mut buf[62..66]);
    buf[66..71].copy_from_slice(b"11111");
}

fn expected_rows(cfg: &TpccConfig, name: &str) -> u64 {
    let w = cfg.warehouses as u64;
    let dist = w * DISTRICTS as u64;
    let cust = dist * cfg.customers_per_district as u64;
    match name {
        WAREHOUSE_TABLE => w,
        DISTRICT_TABLE => dist,
        ITEM_TABLE => cfg.items as u64,
        STOCK_TABLE => w * cfg.items as u64,
        NEW_ORDER_TABLE => dist * new_orders_per_district(cfg.customers_per_district) as u64,
        ORDER_LINE_TABLE => cust * 10,
        _ => cust,
    }
}

/// The loaded database's bytes in `inplace`, and half as much again for the orders, order
/// lines and history rows a run adds (New-Order and Payment insert; Delivery deletes only
/// new-order rows).
pub(super) fn estimated_bytes(cfg: &TpccConfig) -> u64 {
    let loaded = crate::util::estimate_bytes(
        schema::SPECS.iter().map(|(name, row)| (*row, expected_rows(cfg, name))),
    );
    loaded.saturating_mul(3) / 2
}

pub(super) fn load(
    engine: &dyn Engine,
    cfg: &TpccConfig,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<(), DbError> {
    let t = Tables::create(engine, |name| expected_rows(cfg, name))?;
    let total: u64 = [
        WAREHOUSE_TABLE,
        DISTRICT_TABLE,
        CUSTOMER_TABLE,
        CUSTOMER_NAME_TABLE,
        HISTORY_TABLE,
        NEW_ORDER_TABLE,
        ORDER_TABLE,
        ORDER_CUSTOMER_TABLE,
        ORDER_LINE_TABLE,
        ITEM_TABLE,
        STOCK_TABLE,
    ]
    .iter()
    .map(|name| expected_rows(cfg, name))
    .sum();
    let mut loader = Loader::new(engine, progress, total);
    let mut rng = WorkerRng::new(LOAD_SEED);
    let mut history_seq = 0u64;
    load_items(&mut loader, &t, cfg, &mut rng)?;
    for w in 1..=cfg.warehouses {
        load_warehouse(&mut loader, &t, cfg, w, &mut rng)?;
        for d in 1..=DISTRICTS {
            load_district(&mut loader, &t, cfg, w, d, &mut rng)?;
            load_customers(&mut loader, &t, cfg, w, d, &mut rng, &mut history_seq)?;
            load_orders(&mut loader, &t, cfg, w, d, &mut rng)?;
        }
    }
    loader.finish()
}

fn load_items(
    loader: &mut Loader,
    t: &Tables,
    cfg: &TpccConfig,
    rng: &mut WorkerRng,
) -> Result<(), DbError> {
    let mut row = vec![0u8; item::ROW as usize];
    for i in 1..=cfg.items {
        put_u32(&mut row, item::ID, i);
        put_u32(&mut row, item::IM_ID, rng.gen_range(1..=10_000));
        put_i64(&mut row, item::PRICE, rng.gen_range(100..=10_000));
        astring(rng, &mut row[item::NAME..item::NAME + item::NAME_LEN], 14, 24);
        data_string(rng, &mut row[item::DATA..item::DATA + item::DATA_LEN], 26, 50);
        loader.insert(t.item, i as u64, &row)?;
    }
    Ok(())
}

fn load_warehouse(
    loader: &mut Loader,
    t: &Tables,
    cfg: &TpccConfig,
    w: u32,
    rng: &mut WorkerRng,
) -> Result<(), DbError> {
    let mut row = vec![0u8; warehouse::ROW as usize];
    put_u32(&mut row, warehouse::ID, w);
    put_i64(&mut row, warehouse::YTD, WAREHOUSE_YTD_CENTS);
    put_u32(&mut row, warehouse::TAX, rng.gen_range(0..=2000));
    astring(rng, &mut row[warehouse::NAME..warehouse::NAME + warehouse::NAME_LEN], 6, 10);
    address(rng, &mut row[warehouse::ADDRESS..warehouse::ADDRESS + ADDRESS_LEN]);
    loader.insert(t.warehouse, w as u64, &row)?;

    let mut row = vec![0u8; stock::ROW as usize];
    for i in 1..=cfg.items {
        put_u32(&mut row, stock::I_ID, i);
        put_u32(&mut row, stock::W_ID, w);
        put_u32(&mut row, stock::QUANTITY, rng.gen_range(10..=100));
        put_u64(&mut row, stock::YTD, 0);
        put_u32(&mut row, stock::ORDER_CNT, 0);
        put_u32(&mut row, stock::REMOTE_CNT, 0);
        fill_letters(rng, &mut row[stock::DIST..stock::DIST + 10 * stock::DIST_LEN]);
        data_string(rng, &mut row[stock::DATA..stock::DATA + stock::DATA_LEN], 26, 50);
        loader.insert(t.stock, stock_key(w, i), &row)?;
    }
    Ok(())
}

fn load_district(
    loader: &mut Loader,
    t: &Tables,
    cfg: &TpccConfig,
    w: u32,
    d: u32,
    rng: &mut WorkerRng,
) -> Result<(), DbError> {
    let mut row = vec![0u8; district::ROW as usize];
    put_u32(&mut row, district::W_ID, w);
    put_u32(&mut row, district::ID, d);
    put_i64(&mut row, district::YTD, DISTRICT_YTD_CENTS);
    put_u32(&mut row, district::TAX, rng.gen_range(0..=2000));
    put_u32(&mut row, district::NEXT_O_ID, cfg.customers_per_district + 1);
    astring(rng, &mut row[district::NAME..district::NAME + district::NAME_LEN], 6, 10);
    address(rng, &mut row[district::ADDRESS..district::ADDRESS + ADDRESS_LEN]);
    loader.insert(t.district, district_key(w, d), &row)
}

fn load_customers(
    loader: &mut Loader,
    t: &Tables,
    cfg: &TpccConfig,
    w: u32,
    d: u32,
    rng: &mut WorkerRng,
    history_seq: &mut u64,
) -> Result<(), DbError> {
    use schema::customer as c;
    let mut row = vec![0u8; c::ROW as usize];
    let mut name_row = vec![0u8; customer_name::ROW as usize];
    let mut hist = vec![0u8; history::ROW as usize];
    for id in 1..=cfg.customers_per_district {
        // §4.3.2.3: the first 1,000 customers take each last name once, the rest NURand.
        let last = if id <= 1000 { id - 1 } else { nurand(rng, 255, C_LAST_LOAD, 0, 999) as u32 };
        put_u32(&mut row, c::W_ID, w);
        put_u32(&mut row, c::D_ID, d);
        put_u32(&mut row, c::ID, id);
        put_u32(&mut row, c::DISCOUNT, rng.gen_range(0..=5000));
        let credit: &[u8; 2] = if rng.gen_range(0..10) == 0 { b"BC" } else { b"GC" };
        row[c::CREDIT..c::CREDIT + 2].copy_from_slice(credit);
        row[c::MIDDLE..c::MIDDLE + 2].copy_from_slice(b"OE");
        row[c::LAST..c::LAST + c::NAME_LEN].copy_from_slice(&last_name(last));
        astring(rng, &mut row[c::FIRST..c::FIRST + c::NAME_LEN], 8, 16);
        put_i64(&mut row, c::CREDIT_LIM, 5_000_000);
        put_i64(&mut row, c::BALANCE, -1000);
        put_i64(&mut row, c::YTD_PAYMENT, 1000);
        put_u32(&mut row, c::PAYMENT_CNT, 1);
        put_u32(&mut row, c::DELIVERY_CNT, 0);
        put_u64(&mut row, c::SINCE, LOAD_DATE);
        fill_digits(rng, &mut row[c::PHONE..c::PHONE + 16]);
        address(rng, &mut row[c::ADDRESS..c::ADDRESS + ADDRESS_LEN]);
        astring(rng, &mut row[c::DATA..c::DATA + c::DATA_LEN], 300, 500);
        loader.insert(t.customer, customer_key(w, d, id), &row)?;

        name_row.copy_from_slice(&row[c::FIRST..c::FIRST + c::NAME_LEN]);
        loader.insert(t.customer_name, customer_name_key(w, d, last, id), &name_row)?;

        put_u32(&mut hist, history::C_ID, id);
        put_u32(&mut hist, history::C_D_ID, d);
        put_u32(&mut hist, history::C_W_ID, w);
        put_u32(&mut hist, history::D_ID, d);
        put_u32(&mut hist, history::W_ID, w);
        put_u64(&mut hist, history::DATE, LOAD_DATE);
        put_i64(&mut hist, history::AMOUNT, 1000);
        astring(rng, &mut hist[history::DATA..history::DATA + history::DATA_LEN], 12, 24);
        loader.insert(t.history, seq_key(0, *history_seq), &hist)?;
        *history_seq += 1;
    }
    Ok(())
}

fn load_orders(
    loader: &mut Loader,
    t: &Tables,
    cfg: &TpccConfig,
    w: u32,
    d: u32,
    rng: &mut WorkerRng,
) -> Result<(), DbError> {
    let customers = cfg.customers_per_district;
    let first_new = customers - new_orders_per_district(customers) + 1;
    // O_C_ID is a random permutation of the customers.
    let mut perm: Vec<u32> = (1..=customers).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.gen_range(0..=i));
    }
    let mut orow = vec![0u8; order::ROW as usize];
    let mut oc = vec![0u8; order_customer::ROW as usize];
    let mut no = vec![0u8; new_order::ROW as usize];
    let mut line = vec![0u8; order_line::ROW as usize];
    for o in 1..=customers {
        let c = perm[(o - 1) as usize];
        let delivered = o < first_new;
        let ol_cnt = rng.gen_range(5..=MAX_ORDER_LINES);
        put_u32(&mut orow, order::ID, o);
        put_u32(&mut orow, order::D_ID, d);
        put_u32(&mut orow, order::W_ID, w);
        put_u32(&mut orow, order::C_ID, c);
        put_u64(&mut orow, order::ENTRY_D, LOAD_DATE);
        put_u32(&mut orow, order::CARRIER_ID, if delivered { rng.gen_range(1..=10) } else { 0 });
        put_u32(&mut orow, order::OL_CNT, ol_cnt);
        put_u32(&mut orow, order::ALL_LOCAL, 1);
        loader.insert(t.orders, order_key(w, d, o), &orow)?;
        put_u32(&mut oc, order_customer::O_ID, o);
        loader.insert(t.order_customer, order_customer_key(w, d, c, o), &oc)?;
        if !delivered {
            put_u32(&mut no, new_order::O_ID, o);
            put_u32(&mut no, new_order::D_ID, d);
            put_u32(&mut no, new_order::W_ID, w);
            loader.insert(t.new_order, order_key(w, d, o), &no)?;
        }
        for ol in 1..=ol_cnt {
            put_u32(&mut line, order_line::O_ID, o);
            put_u32(&mut line, order_line::D_ID, d);
            put_u32(&mut line, order_line::W_ID, w);
            put_u32(&mut line, order_line::NUMBER, ol);
            put_u32(&mut line, order_line::I_ID, rng.gen_range(1..=cfg.items));
            put_u32(&mut line, order_line::SUPPLY_W_ID, w);
            put_u64(&mut line, order_line::DELIVERY_D, if delivered { LOAD_DATE } else { 0 });
            put_u32(&mut line, order_line::QUANTITY, 5);
            let amount = if delivered { 0 } else { rng.gen_range(1..=999_999) };
            put_i64(&mut line, order_line::AMOUNT, amount);
            let info = &mut line[order_line::DIST_INFO..order_line::DIST_INFO + 24];
            fill_letters(rng, info);
            loader.insert(t.order_line, order_line_key(w, d, o, ol), &line)?;
        }
    }
    Ok(())
}

//! TPC-C's consistency conditions (§3.3.2.1-6) over a quiesced database, plus what this
//! implementation adds: order ids contiguous from 1, both index tables agreeing with their
//! base tables, and each worker's history sequence contiguous.

use super::schema::*;
use super::TpccConfig;
use crate::util::{get_i64, get_u32, scan_table, SEQ_BITS, SEQ_MASK};
use storage::{Engine, TableId};

pub(super) fn check(engine: &dyn Engine, cfg: &TpccConfig) -> Result<(), String> {
    let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
    let w_ytd = warehouses(engine, &t, cfg)?;
    let districts = districts(engine, &t, cfg)?;
    for (i, ytd) in w_ytd.iter().enumerate() {
        let sum: i64 = districts[i * DISTRICTS as usize..(i + 1) * DISTRICTS as usize]
            .iter()
            .map(|(ytd, _)| *ytd)
            .sum();
        if *ytd != sum {
            return Err(format!(
                "condition 1: warehouse {}: W_YTD {ytd} != sum(D_YTD) {sum}",
                i + 1
            ));
        }
    }
    for w in 1..=cfg.warehouses {
        for d in 1..=DISTRICTS {
            let (_, next_o_id) = districts[((w - 1) * DISTRICTS + d - 1) as usize];
            check_district(engine, &t, w, d, next_o_id)?;
        }
    }
    check_customers(engine, &t, cfg)?;
    check_history(engine, t.history)
}

fn warehouses(engine: &dyn Engine, t: &Tables, cfg: &TpccConfig) -> Result<Vec<i64>, String> {
    let mut ytd = Vec::new();
    scan_table(engine, t.warehouse, 0, u64::MAX, &mut |key, row| {
        let expect = ytd.len() as u64 + 1;
        if key != expect || get_u32(row, warehouse::ID) as u64 != key {
            return Err(format!("warehouse {expect} is missing or misplaced (found key {key})"));
        }
        ytd.push(get_i64(row, warehouse::YTD));
        Ok(())
    })?;
    if ytd.len() != cfg.warehouses as usize {
        return Err(format!("{} warehouses, expected {}", ytd.len(), cfg.warehouses));
    }
    Ok(ytd)
}

/// `(D_YTD, D_NEXT_O_ID)` of every district, in key order.
fn districts(engine: &dyn Engine, t: &Tables, cfg: &TpccConfig) -> Result<Vec<(i64, u32)>, String> {
    let mut out = Vec::new();
    scan_table(engine, t.district, 0, u64::MAX, &mut |key, row| {
        let n = out.len() as u32;
        let (w, d) = (n / DISTRICTS + 1, n % DISTRICTS + 1);
        if key != district_key(w, d)
            || get_u32(row, district::W_ID) != w
            || get_u32(row, district::ID) != d
        {
            return Err(format!("district {w}/{d} is missing or misplaced (found key {key:#x})"));
        }
        out.push((get_i64(row, district::YTD), get_u32(row, district::NEXT_O_ID)));
        Ok(())
    })?;
    if out.len() != (cfg.warehouses * DISTRICTS) as usize {
        return Err(format!("{} districts, expected {}", out.len(), cfg.warehouses * DISTRICTS));
    }
    Ok(out)
}

#[derive(Clone, Copy)]
struct OrderInfo {
    ol_cnt: u32,
    carrier: u32,
    customer: u32,
}

fn check_district(
    engine: &dyn Engine,
    t: &Tables,
    w: u32,
    d: u32,
    next_o_id: u32,
) -> Result<(), String> {
    let at = format!("warehouse {w} district {d}");
    // Orders: ids 1..=n, contiguous (allocation is transactional).
    let mut orders: Vec<OrderInfo> = Vec::new();
    scan_table(
        engine,
        t.orders,
        order_key(w, d, 0),
        order_key(w, d, u32::MAX),
        &mut |key, row| {
            let o = split_order_key(key).2;
            if o as usize != orders.len() + 1 || get_u32(row, order::ID) != o {
                return Err(format!("{at}: order {} is missing (next: {o})", orders.len() + 1));
            }
            orders.push(OrderInfo {
                ol_cnt: get_u32(row, order::OL_CNT),
                carrier: get_u32(row, order::CARRIER_ID),
                customer: get_u32(row, order::C_ID),
            });
            Ok(())
        },
    )?;
    let max_o = orders.len() as u32;
    if next_o_id.wrapping_sub(1) != max_o {
        return Err(format!(
            "condition 2: {at}: D_NEXT_O_ID - 1 = {} but max(O_ID) = {max_o}",
            next_o_id.wrapping_sub(1)
        ));
    }
    // New orders: conditions 2 and 3.
    let (mut min_no, mut max_no, mut count_no) = (u32::MAX, 0u32, 0u32);
    let mut gaps: Vec<u32> = Vec::new();
    let (low, high) = (order_key(w, d, 0), order_key(w, d, u32::MAX));
    scan_table(engine, t.new_order, low, high, &mut |key, _| {
        let o = split_order_key(key).2;
        if count_no > 0 && o > max_no + 1 && gaps.len() < 8 {
            gaps.extend((max_no + 1..o).take(8));
        }
        min_no = min_no.min(o);
        max_no = max_no.max(o);
        count_no += 1;
        Ok(())
    })?;
    if count_no > 0 {
        if max_no != max_o {
            return Err(format!(
                "condition 2: {at}: max(NO_O_ID) = {max_no} but max(O_ID) = {max_o}"
            ));
        }
        if max_no - min_no + 1 != count_no {
            return Err(format!(
                "condition 3: {at}: new orders {min_no}..={max_no} but {count_no} rows \
                 (missing {})",
                gaps.iter()
                    .map(|o| match orders.get(*o as usize - 1) {
                        Some(info) => format!("{o}, carrier {}", info.carrier),
                        None => format!("{o}, no order"),
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    // Condition 5: carrier null iff a new-order row exists.
    for (i, info) in orders.iter().enumerate() {
        let o = i as u32 + 1;
        let undelivered = count_no > 0 && o >= min_no && o <= max_no;
        if (info.carrier == 0) != undelivered {
            return Err(format!(
                "condition 5: {at}: order {o} has carrier {} but {} new-order row",
                info.carrier,
                if undelivered { "a" } else { "no" }
            ));
        }
    }
    check_order_lines(engine, t, w, d, &orders, &at)?;
    check_order_index(engine, t, w, d, &orders, &at)
}

/// Conditions 4 (per district) and 6 (per order).
fn check_order_lines(
    engine: &dyn Engine,
    t: &Tables,
    w: u32,
    d: u32,
    orders: &[OrderInfo],
    at: &str,
) -> Result<(), String> {
    let mut lines = vec![0u32; orders.len() + 1];
    let (low, high) = (order_line_key(w, d, 0, 0), order_line_key(w, d, u32::MAX, 15));
    let total = scan_table(engine, t.order_line, low, high, &mut |key, row| {
        let (o, ol) = split_order_line_key(key);
        if o == 0 || o as usize > orders.len() {
            return Err(format!("{at}: order line {ol} of order {o}, which does not exist"));
        }
        if get_u32(row, order_line::O_ID) != o || get_u32(row, order_line::NUMBER) != ol {
            return Err(format!("{at}: order line {o}/{ol} holds another line's row"));
        }
        lines[o as usize] += 1;
        Ok(())
    })?;
    let sum_ol_cnt: u64 = orders.iter().map(|o| o.ol_cnt as u64).sum();
    if sum_ol_cnt != total {
        return Err(format!(
            "condition 4: {at}: sum(O_OL_CNT) = {sum_ol_cnt} but {total} order lines"
        ));
    }
    for (i, info) in orders.iter().enumerate() {
        if lines[i + 1] != info.ol_cnt {
            return Err(format!(
                "condition 6: {at}: order {} has O_OL_CNT {} but {} lines",
                i + 1,
                info.ol_cnt,
                lines[i + 1]
            ));
        }
    }
    Ok(())
}

/// Every order has exactly one `order_customer` entry, under its customer.
fn check_order_index(
    engine: &dyn Engine,
    t: &Tables,
    w: u32,
    d: u32,
    orders: &[OrderInfo],
    at: &str,
) -> Result<(), String> {
    let mut seen = vec![false; orders.len() + 1];
    let low = order_customer_key(w, d, 0, u32::MAX);
    let high = order_customer_key(w, d, (1 << C_BITS) - 1, 0);
    scan_table(engine, t.order_customer, low, high, &mut |key, row| {
        let (c, o) = split_order_customer_key(key);
        let info = match orders.get((o as usize).wrapping_sub(1)) {
            Some(info) if o > 0 => info,
            _ => return Err(format!("{at}: order index names order {o}, which does not exist")),
        };
        if info.customer != c || get_u32(row, order_customer::O_ID) != o {
            return Err(format!(
                "{at}: order index files order {o} under customer {c}, its O_C_ID is {}",
                info.customer
            ));
        }
        if std::mem::replace(&mut seen[o as usize], true) {
            return Err(format!("{at}: order {o} is indexed twice"));
        }
        Ok(())
    })?;
    match seen.iter().skip(1).position(|s| !s) {
        Some(i) => Err(format!("{at}: order {} is missing from the order index", i + 1)),
        None => Ok(()),
    }
}

/// Customers are all present, and the name index lists each exactly once under its last name.
fn check_customers(engine: &dyn Engine, t: &Tables, cfg: &TpccConfig) -> Result<(), String> {
    let per_district = cfg.customers_per_district as usize;
    let districts = (cfg.warehouses * DISTRICTS) as usize;
    let mut last_names = vec![[0u8; customer::NAME_LEN]; districts * per_district];
    let mut n = 0usize;
    scan_table(engine, t.customer, 0, u64::MAX, &mut |key, row| {
        let (dist, c) = (n / per_district, (n % per_district) as u32 + 1);
        let (w, d) = (dist as u32 / DISTRICTS + 1, dist as u32 % DISTRICTS + 1);
        if key != customer_key(w, d, c) || get_u32(row, customer::ID) != c {
            return Err(format!("customer {w}/{d}/{c} is missing or misplaced"));
        }
        if n >= last_names.len() {
            return Err(format!("more customers than the {} loaded", last_names.len()));
        }
        last_names[n].copy_from_slice(&row[customer::LAST..customer::LAST + customer::NAME_LEN]);
        n += 1;
        Ok(())
    })?;
    if n != last_names.len() {
        return Err(format!("{n} customers, expected {}", last_names.len()));
    }
    let mut indexed = vec![false; last_names.len()];
    scan_table(engine, t.customer_name, 0, u64::MAX, &mut |key, _| {
        let (w, d, last, c) = split_customer_name_key(key);
        let c = c as usize;
        let dist = (w as usize).wrapping_sub(1) * DISTRICTS as usize + (d as usize).wrapping_sub(1);
        let slot = dist.wrapping_mul(per_district).wrapping_add(c.wrapping_sub(1));
        if c == 0 || c > per_district || w == 0 || d == 0 || d > DISTRICTS || slot >= n {
            return Err(format!("name index entry {key:#x} names no customer"));
        }
        if last_names[slot] != last_name(last) {
            return Err(format!(
                "name index files customer {w}/{d}/{c} under {}, which is not their last name",
                last_name_string(last)
            ));
        }
        if std::mem::replace(&mut indexed[slot], true) {
            return Err(format!("customer {w}/{d}/{c} is in the name index twice"));
        }
        Ok(())
    })?;
    match indexed.iter().position(|x| !x) {
        Some(slot) => Err(format!(
            "customer {} of district {} is missing from the name index",
            slot % per_district + 1,
            slot / per_district
        )),
        None => Ok(()),
    }
}

/// Each worker's history rows are numbered contiguously from 0 (and the loader's too).
fn check_history(engine: &dyn Engine, table: TableId) -> Result<(), String> {
    let (mut prefix, mut next) = (0u64, 0u64);
    scan_table(engine, table, 0, u64::MAX, &mut |key, _| {
        let (p, seq) = (key >> SEQ_BITS, key & SEQ_MASK);
        if p != prefix {
            prefix = p;
            next = 0;
        }
        if seq != next {
            return Err(format!(
                "history of {} is not contiguous: seq {next} is missing (next present: {seq})",
                if p == 0 { "the loader".to_string() } else { format!("worker {}", p - 1) }
            ));
        }
        next += 1;
        Ok(())
    })?;
    Ok(())
}

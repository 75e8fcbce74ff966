//! TPC-C's nine tables (TPC-C 5.11 §1.3) plus two index tables, as fixed-size rows keyed by
//! packed `u64`s. Ids are 1-based, as in the spec.
//!
//! Key layouts (most significant field first):
//!
//! | table | key |
//! |---|---|
//! | warehouse | `w` |
//! | district | `w:16 d:4` |
//! | customer | `w:16 d:4 c:12` |
//! | customer_name (index) | `w:16 d:4 last:10 c:12` (row: `c_first`) |
//! | history | `(worker + 1):24 seq:40` (loader: prefix 0) |
//! | new_order, orders | `w:16 d:4 o:32` |
//! | order_customer (index) | `w:16 d:4 c:12 (u32::MAX − o):32` (newest order first) |
//! | order_line | `w:16 d:4 o:32 ol:4` |
//! | item | `i` |
//! | stock | `w:16 i:17` |
//!
//! `order_customer` inverts the order id because the API has no reverse scan: an ascending scan
//! of one customer's range meets their newest order first (Order-Status).
//!
//! Row layouts: the offsets below, little-endian; money is in cents (`i64`), rates in units of
//! 1/10,000 (`u32`), strings are fixed-width bytes padded with zeros.

use storage::{DbError, Engine, TableId};

use crate::util::{create_table, lookup_table};

pub const DISTRICTS: u32 = 10;
/// Largest warehouse id the key layout allows.
pub const MAX_WAREHOUSES: u32 = (1 << 16) - 1;
pub const MAX_ITEMS: u32 = 100_000;
pub const MAX_CUSTOMERS: u32 = 3_000;
pub const MAX_ORDER_LINES: u32 = 15;

pub const C_BITS: u32 = 12;
const D_BITS: u32 = 4;
const LAST_BITS: u32 = 10;
const O_BITS: u32 = 32;
const OL_BITS: u32 = 4;
const I_BITS: u32 = 17;

const _: () = assert!(MAX_CUSTOMERS < 1 << C_BITS);
const _: () = assert!(DISTRICTS < 1 << D_BITS);
const _: () = assert!(MAX_ORDER_LINES < 1 << OL_BITS);
const _: () = assert!(MAX_ITEMS < 1 << I_BITS);
const _: () = assert!(16 + D_BITS + C_BITS + O_BITS <= 64);

pub fn district_key(w: u32, d: u32) -> u64 {
    ((w as u64) << D_BITS) | d as u64
}

pub fn customer_key(w: u32, d: u32, c: u32) -> u64 {
    (district_key(w, d) << C_BITS) | c as u64
}

pub fn customer_name_key(w: u32, d: u32, last: u32, c: u32) -> u64 {
    (((district_key(w, d) << LAST_BITS) | last as u64) << C_BITS) | c as u64
}

/// The customer id of a `customer_name` key.
pub fn customer_of_name_key(key: u64) -> u32 {
    (key & ((1 << C_BITS) - 1)) as u32
}

/// `(w, d, last, c)` of a `customer_name` key.
pub fn split_customer_name_key(key: u64) -> (u32, u32, u32, u32) {
    let c = customer_of_name_key(key);
    let last = ((key >> C_BITS) & ((1 << LAST_BITS) - 1)) as u32;
    let district = key >> (C_BITS + LAST_BITS);
    ((district >> D_BITS) as u32, (district & ((1 << D_BITS) - 1)) as u32, last, c)
}

pub fn order_key(w: u32, d: u32, o: u32) -> u64 {
    (district_key(w, d) << O_BITS) | o as u64
}

/// `(w, d, o)` of an `orders` / `new_order` key.
pub fn split_order_key(key: u64) -> (u32, u32, u32) {
    let district = key >> O_BITS;
    ((district >> D_BITS) as u32, (district & ((1 << D_BITS) - 1)) as u32, key as u32)
}

pub fn order_customer_key(w: u32, d: u32, c: u32, o: u32) -> u64 {
    (customer_key(w, d, c) << O_BITS) | (u32::MAX - o) as u64
}

/// `(c, o)` of an `order_customer` key.
pub fn split_order_customer_key(key: u64) -> (u32, u32) {
    let c = ((key >> O_BITS) & ((1 << C_BITS) - 1)) as u32;
    (c, u32::MAX - key as u32)
}

pub fn order_line_key(w: u32, d: u32, o: u32, ol: u32) -> u64 {
    (order_key(w, d, o) << OL_BITS) | ol as u64
}

/// `(o, ol)` of an `order_line` key.
pub fn split_order_line_key(key: u64) -> (u32, u32) {
    ((key >> OL_BITS) as u32, (key & ((1 << OL_BITS) - 1)) as u32)
}

pub fn stock_key(w: u32, i: u32) -> u64 {
    ((w as u64) << I_BITS) | i as u64
}

/// Column offsets.
pub mod warehouse {
    pub const ID: usize = 0;
    pub const YTD: usize = 8;
    pub const TAX: usize = 16;
    pub const NAME: usize = 20;
    pub const NAME_LEN: usize = 10;
    /// street 1, street 2 (20 each), city (20), state (2), zip (9).
    pub const ADDRESS: usize = 30;
    pub const ROW: u32 = 104;
}

pub mod district {
    pub const W_ID: usize = 0;
    pub const ID: usize = 4;
    pub const YTD: usize = 8;
    pub const TAX: usize = 16;
    pub const NEXT_O_ID: usize = 20;
    pub const NAME: usize = 24;
    pub const NAME_LEN: usize = 10;
    pub const ADDRESS: usize = 34;
    pub const ROW: u32 = 112;
}

pub const ADDRESS_LEN: usize = 71;

pub mod customer {
    pub const W_ID: usize = 0;
    pub const D_ID: usize = 4;
    pub const ID: usize = 8;
    pub const DISCOUNT: usize = 12;
    pub const CREDIT: usize = 16;
    pub const MIDDLE: usize = 18;
    pub const LAST: usize = 20;
    pub const FIRST: usize = 36;
    pub const NAME_LEN: usize = 16;
    pub const CREDIT_LIM: usize = 52;
    /// `BALANCE`, `YTD_PAYMENT`, `PAYMENT_CNT`, `DELIVERY_CNT` are contiguous, so Payment and
    /// Delivery write them with one update.
    pub const BALANCE: usize = 60;
    pub const YTD_PAYMENT: usize = 68;
    pub const PAYMENT_CNT: usize = 76;
    pub const DELIVERY_CNT: usize = 80;
    pub const SINCE: usize = 84;
    pub const PHONE: usize = 92;
    pub const ADDRESS: usize = 108;
    pub const DATA: usize = 180;
    pub const DATA_LEN: usize = 500;
    pub const ROW: u32 = 680;
}

pub mod customer_name {
    pub const FIRST: usize = 0;
    pub const ROW: u32 = 16;
}

pub mod history {
    pub const C_ID: usize = 0;
    pub const C_D_ID: usize = 4;
    pub const C_W_ID: usize = 8;
    pub const D_ID: usize = 12;
    pub const W_ID: usize = 16;
    pub const DATE: usize = 20;
    pub const AMOUNT: usize = 28;
    pub const DATA: usize = 36;
    pub const DATA_LEN: usize = 24;
    pub const ROW: u32 = 64;
}

pub mod new_order {
    pub const O_ID: usize = 0;
    pub const D_ID: usize = 4;
    pub const W_ID: usize = 8;
    pub const ROW: u32 = 16;
}

pub mod order {
    pub const ID: usize = 0;
    pub const D_ID: usize = 4;
    pub const W_ID: usize = 8;
    pub const C_ID: usize = 12;
    pub const ENTRY_D: usize = 16;
    pub const CARRIER_ID: usize = 24;
    pub const OL_CNT: usize = 28;
    pub const ALL_LOCAL: usize = 32;
    pub const ROW: u32 = 40;
}

pub mod order_customer {
    pub const O_ID: usize = 0;
    pub const ROW: u32 = 8;
}

pub mod order_line {
    pub const O_ID: usize = 0;
    pub const D_ID: usize = 4;
    pub const W_ID: usize = 8;
    pub const NUMBER: usize = 12;
    pub const I_ID: usize = 16;
    pub const SUPPLY_W_ID: usize = 20;
    pub const DELIVERY_D: usize = 24;
    pub const QUANTITY: usize = 32;
    pub const AMOUNT: usize = 36;
    pub const DIST_INFO: usize = 44;
    pub const DIST_INFO_LEN: usize = 24;
    pub const ROW: u32 = 72;
}

pub mod item {
    pub const ID: usize = 0;
    pub const IM_ID: usize = 4;
    pub const PRICE: usize = 8;
    pub const NAME: usize = 16;
    pub const NAME_LEN: usize = 24;
    pub const DATA: usize = 40;
    pub const DATA_LEN: usize = 50;
    pub const ROW: u32 = 96;
}

pub mod stock {
    pub const I_ID: usize = 0;
    pub const W_ID: usize = 4;
    /// `QUANTITY`, `YTD`, `ORDER_CNT`, `REMOTE_CNT` are contiguous (one update in New-Order).
    pub const QUANTITY: usize = 8;
    pub const YTD: usize = 12;
    pub const ORDER_CNT: usize = 20;
    pub const REMOTE_CNT: usize = 24;
    pub const DIST: usize = 28;
    pub const DIST_LEN: usize = 24;
    pub const DATA: usize = 268;
    pub const DATA_LEN: usize = 50;
    pub const ROW: u32 = 320;
}

pub const WAREHOUSE_TABLE: &str = "tpcc_warehouse";
pub const DISTRICT_TABLE: &str = "tpcc_district";
pub const CUSTOMER_TABLE: &str = "tpcc_customer";
pub const CUSTOMER_NAME_TABLE: &str = "tpcc_customer_name";
pub const HISTORY_TABLE: &str = "tpcc_history";
pub const NEW_ORDER_TABLE: &str = "tpcc_new_order";
pub const ORDER_TABLE: &str = "tpcc_orders";
pub const ORDER_CUSTOMER_TABLE: &str = "tpcc_order_customer";
pub const ORDER_LINE_TABLE: &str = "tpcc_order_line";
pub const ITEM_TABLE: &str = "tpcc_item";
pub const STOCK_TABLE: &str = "tpcc_stock";

/// The ids of every table.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub customer_name: TableId,
    pub history: TableId,
    pub new_order: TableId,
    pub orders: TableId,
    pub order_customer: TableId,
    pub order_line: TableId,
    pub item: TableId,
    pub stock: TableId,
}

/// `(name, row bytes)` in creation order.
pub(crate) const SPECS: [(&str, u32); 11] = [
    (WAREHOUSE_TABLE, warehouse::ROW),
    (DISTRICT_TABLE, district::ROW),
    (CUSTOMER_TABLE, customer::ROW),
    (CUSTOMER_NAME_TABLE, customer_name::ROW),
    (HISTORY_TABLE, history::ROW),
    (NEW_ORDER_TABLE, new_order::ROW),
    (ORDER_TABLE, order::ROW),
    (ORDER_CUSTOMER_TABLE, order_customer::ROW),
    (ORDER_LINE_TABLE, order_line::ROW),
    (ITEM_TABLE, item::ROW),
    (STOCK_TABLE, stock::ROW),
];

impl Tables {
    fn from_ids(ids: [TableId; 11]) -> Tables {
        Tables {
            warehouse: ids[0],
            district: ids[1],
            customer: ids[2],
            customer_name: ids[3],
            history: ids[4],
            new_order: ids[5],
            orders: ids[6],
            order_customer: ids[7],
            order_line: ids[8],
            item: ids[9],
            stock: ids[10],
        }
    }

    /// Creates every table; `expected_rows(name)` sizes each.
    pub fn create(
        engine: &dyn Engine,
        expected_rows: impl Fn(&str) -> u64,
    ) -> Result<Tables, DbError> {
        let mut ids = [0; 11];
        for (id, (name, row)) in ids.iter_mut().zip(SPECS) {
            *id = create_table(engine, name, row, expected_rows(name))?;
        }
        Ok(Tables::from_ids(ids))
    }

    pub fn lookup(engine: &dyn Engine) -> Result<Tables, DbError> {
        let mut ids = [0; 11];
        for (id, (name, row)) in ids.iter_mut().zip(SPECS) {
            *id = lookup_table(engine, name, row)?;
        }
        Ok(Tables::from_ids(ids))
    }
}

/// The syllables of TPC-C's customer last names (§4.3.2.3).
const SYLLABLES: [&str; 10] =
    ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];

/// Customer last name number `n` (0..=999) as bytes, padded with zeros to 16 (§4.3.2.3).
pub fn last_name(n: u32) -> [u8; customer::NAME_LEN] {
    let mut out = [0u8; customer::NAME_LEN];
    let mut len = 0;
    for digit in [(n / 100) % 10, (n / 10) % 10, n % 10] {
        let s = SYLLABLES[digit as usize].as_bytes();
        out[len..len + s.len()].copy_from_slice(s);
        len += s.len();
    }
    out
}

/// [`last_name`] as a string.
pub fn last_name_string(n: u32) -> String {
    let bytes = last_name(n);
    bytes.iter().take_while(|b| **b != 0).map(|b| *b as char).collect()
}

//! The Wisconsin Benchmark relation (Bitton, DeWitt & Turbyfill 1983), as the thesis uses it
//! (§3.2: "uniformly distributed fields allow precise control over query selectivity"):
//! thirteen 4-byte integers and three 52-byte strings, 208 bytes, 19 tuples to a 4 KiB page
//! with no page header (§3.3). `unique1` is a random permutation of `0..rows` (so a range on
//! it selects a uniformly random set of tuples: the placement Yue et al. and Yao assume);
//! `unique2` is the row number (the clustering order). More than 19 tuples per page shortens
//! the strings, as TPC-H's narrower rows (lineitem 29, orders 30) would.
//!
//! A [`Table`] is pages `first_page..first_page + pages` of a device; its optional
//! [`Index`] on `unique1` is a leaf level of `(key, rowid)` entries in key order, 512 to a page.
//! Invariant: rowid = page-in-table * tuples_per_page + slot.

use crate::device::{BlockDevice, PageBuf, PAGE_SIZE};
use crate::error::{invalid, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

/// Bytes of a full Wisconsin tuple.
pub const TUPLE_BYTES: usize = 208;
/// Integer fields before the strings.
pub const INT_FIELDS: usize = 13;
/// Tuples of 208 bytes in a 4 KiB page (§3.3: "the Wisconsin Benchmark stores 19 tuples").
pub const WISCONSIN_TUPLES_PER_PAGE: usize = PAGE_SIZE / TUPLE_BYTES;
/// Most tuples per page: integers only, no strings.
pub const MAX_TUPLES_PER_PAGE: usize = PAGE_SIZE / (INT_FIELDS * 4);
/// Index entries (u32 key, u32 rowid) per leaf page.
pub const INDEX_ENTRIES_PER_PAGE: usize = PAGE_SIZE / 8;
/// Most rows a table may have: rowids are u32.
pub const MAX_ROWS: u64 = 100_000_000;
/// Pages written per request while loading.
const LOAD_EXTENT_PAGES: usize = 64;
const _: () = assert!(WISCONSIN_TUPLES_PER_PAGE == 19);

/// Field numbers of the integer fields.
pub mod field {
    pub const UNIQUE1: usize = 0;
    pub const UNIQUE2: usize = 1;
    pub const TEN: usize = 4;
}

/// How tuples sit in pages.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Layout {
    pub rows: u64,
    pub tuples_per_page: usize,
    pub tuple_bytes: usize,
}

impl Layout {
    /// `rows` tuples, `tuples_per_page` to a page (19 for the full Wisconsin tuple).
    pub fn new(rows: u64, tuples_per_page: usize) -> Result<Layout> {
        if rows == 0 || rows > MAX_ROWS {
            return Err(invalid("rows", rows, format!("1 to {MAX_ROWS}")));
        }
        if tuples_per_page == 0 || tuples_per_page > MAX_TUPLES_PER_PAGE {
            return Err(invalid(
                "tuples-per-page",
                tuples_per_page,
                format!("1 to {MAX_TUPLES_PER_PAGE} (19 is the 208-byte Wisconsin tuple)"),
            ));
        }
        let tuple_bytes = TUPLE_BYTES.min(PAGE_SIZE / tuples_per_page);
        Ok(Layout { rows, tuples_per_page, tuple_bytes })
    }

    pub fn pages(&self) -> u64 {
        self.rows.div_ceil(self.tuples_per_page as u64)
    }

    /// Page (within the table) and byte offset of `rowid`.
    pub fn locate(&self, rowid: u64) -> (u64, usize) {
        let tpp = self.tuples_per_page as u64;
        (rowid / tpp, (rowid % tpp) as usize * self.tuple_bytes)
    }
}

/// Integer field `f` of the tuple at `tuple`.
pub fn int_field(tuple: &[u8], f: usize) -> u32 {
    u32::from_le_bytes([tuple[4 * f], tuple[4 * f + 1], tuple[4 * f + 2], tuple[4 * f + 3]])
}

/// The unclustered index on `unique1`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Index {
    pub first_page: u64,
    pub pages: u64,
}

/// A loaded relation.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub layout: Layout,
    pub first_page: u64,
    pub index: Option<Index>,
}

impl Table {
    pub fn pages(&self) -> u64 {
        self.layout.pages()
    }

    /// First page after the table and its index: where the next allocation may start.
    pub fn end_page(&self) -> u64 {
        match self.index {
            Some(ix) => ix.first_page + ix.pages,
            None => self.first_page + self.pages(),
        }
    }
}

/// Writes tuple `unique2` with the given `unique1` into `out` (`layout.tuple_bytes` long).
pub fn write_tuple(out: &mut [u8], unique1: u32, unique2: u32) {
    let u = unique1;
    let ints = [
        u,
        unique2,
        u % 2,
        u % 4,
        u % 10,
        u % 20,
        u % 100,
        u % 10,
        u % 5,
        u % 2,
        u,
        (u % 100) * 2,
        (u % 100) * 2 + 1,
    ];
    let int_bytes = (INT_FIELDS * 4).min(out.len());
    for (i, v) in ints.iter().enumerate() {
        if 4 * i + 4 <= int_bytes {
            out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    let strings = &mut out[int_bytes..];
    let mut s = [b'x'; 3 * 52];
    unique_string(unique1, &mut s[0..52]);
    unique_string(unique2, &mut s[52..104]);
    let four = [b'A', b'H', b'O', b'V'][unique2 as usize % 4];
    s[104..108].fill(four);
    let n = strings.len().min(s.len());
    strings[..n].copy_from_slice(&s[..n]);
}

/// The Wisconsin string of a unique value: seven letters (base 26, most significant first),
/// then `x` padding.
fn unique_string(mut v: u32, out: &mut [u8]) {
    out.fill(b'x');
    for i in (0..7).rev() {
        out[i] = b'A' + (v % 26) as u8;
        v /= 26;
    }
}

/// Loads a table of `layout` at `first_page` of `dev` (with an index on `unique1` after it if
/// `with_index`). `seed` fixes the permutation of `unique1`.
pub fn load(
    dev: &mut dyn BlockDevice,
    layout: Layout,
    first_page: u64,
    with_index: bool,
    seed: u64,
) -> Result<Table> {
    let rows = layout.rows as usize;
    let mut unique1: Vec<u32> = (0..rows as u32).collect();
    unique1.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut buf = PageBuf::new(LOAD_EXTENT_PAGES);
    let pages = layout.pages();
    let mut page = 0u64;
    while page < pages {
        let count = (pages - page).min(LOAD_EXTENT_PAGES as u64) as usize;
        buf.bytes_mut(count).fill(0);
        for p in 0..count {
            let out = buf.page_mut(p);
            for slot in 0..layout.tuples_per_page {
                let rowid = (page + p as u64) as usize * layout.tuples_per_page + slot;
                if rowid >= rows {
                    break;
                }
                let at = slot * layout.tuple_bytes;
                write_tuple(&mut out[at..at + layout.tuple_bytes], unique1[rowid], rowid as u32);
            }
        }
        dev.write_pages(first_page + page, count, &buf)?;
        page += count as u64;
    }
    let index = if with_index {
        // Entry k of the leaf level is (k, rowid of the tuple whose unique1 is k).
        let mut rowid_of = vec![0u32; rows];
        for (rowid, &u) in unique1.iter().enumerate() {
            rowid_of[u as usize] = rowid as u32;
        }
        drop(unique1);
        let index_first = first_page + pages;
        let index_pages = (rows as u64).div_ceil(INDEX_ENTRIES_PER_PAGE as u64);
        let mut page = 0u64;
        while page < index_pages {
            let count = (index_pages - page).min(LOAD_EXTENT_PAGES as u64) as usize;
            buf.bytes_mut(count).fill(0);
            let bytes = buf.bytes_mut(count);
            let first_key = page as usize * INDEX_ENTRIES_PER_PAGE;
            for i in 0..count * INDEX_ENTRIES_PER_PAGE {
                let key = first_key + i;
                if key >= rows {
                    break;
                }
                bytes[8 * i..8 * i + 4].copy_from_slice(&(key as u32).to_le_bytes());
                bytes[8 * i + 4..8 * i + 8].copy_from_slice(&rowid_of[key].to_le_bytes());
            }
            dev.write_pages(index_first + page, count, &buf)?;
            page += count as u64;
        }
        Some(Index { first_page: index_first, pages: index_pages })
    } else {
        None
    };
    Ok(Table { layout, first_page, index })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemDevice;

    #[test]
    fn wisconsin_tuple_fields() {
        let mut t = [0u8; TUPLE_BYTES];
        write_tuple(&mut t, 1234, 7);
        assert_eq!(int_field(&t, field::UNIQUE1), 1234);
        assert_eq!(int_field(&t, field::UNIQUE2), 7);
        assert_eq!(int_field(&t, field::TEN), 4);
        assert_eq!(&t[52..59], b"AAAABVM"); // 1234 = 1*26^2 + 21*26 + 12
        assert_eq!(t[52 + 104], b'V');
    }

    #[test]
    fn load_places_rowids_and_a_permutation() {
        let mut dev = MemDevice::new();
        let layout = Layout::new(1000, 19).unwrap();
        let table = load(&mut dev, layout, 0, true, 5).unwrap();
        assert_eq!(table.pages(), 53);
        let mut seen = vec![false; 1000];
        let mut buf = PageBuf::new(1);
        for rowid in 0..1000u64 {
            let (page, at) = layout.locate(rowid);
            dev.read_pages(page, 1, &mut buf).unwrap();
            let tuple = &buf.page(0)[at..at + layout.tuple_bytes];
            assert_eq!(int_field(tuple, field::UNIQUE2) as u64, rowid);
            seen[int_field(tuple, field::UNIQUE1) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(table.index.unwrap().pages, 2);
        assert!(Layout::new(10, 0).is_err() && Layout::new(0, 19).is_err());
        assert_eq!(Layout::new(10, 29).unwrap().tuple_bytes, 141);
    }
}

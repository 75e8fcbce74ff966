//! NVM-CoW's tuple store — Arulraj, Pavlo, Dulloor, SIGMOD 2015 §4.2 ("the engine directly
//! persists the tuple copies and only records non-volatile tuple pointers in the dirty
//! directory"), over §2.3's allocator interface: with layout `pointers`, a table's tuples live
//! in *tuple pages* of fixed-size slots, apart from the copy-on-write B+tree, whose leaf
//! entries hold a non-volatile pointer (the slot's byte offset in the region) instead of the
//! row. An update writes a new tuple into a free slot and copies only the tree nodes on the
//! path to the pointer, not the neighbouring rows.
//!
//! **Recovery invariant**: the allocator's metadata (which slots are in use) is volatile and
//! rebuilt at open by the reachability scan: a slot is in use iff a leaf of the version the
//! master names points to it, so a tuple written by a commit that never reached its master
//! swap is free after a crash, and a replaced tuple's slot is reused only once the version that
//! replaced it is durable and no snapshot can reach it (the same rule as pages).

use super::layout::{entry_crc, Shape};
use storage::format::{get_u16, get_u32, get_u64, page_offset, PageId, PAGE_SIZE, PAGE_SIZE_U64};
use storage::{DbError, Result};

/// Tuple page header bytes; slots follow.
pub const HEADER: usize = 32;
/// "CT": a tuple page.
pub const KIND_TUPLES: u16 = u16::from_le_bytes(*b"CT");
/// Bytes of a slot before its row: key (8), version that wrote it (8), crc32c of key and row
/// (4; 0 with `checksums=off`), zero (4).
pub const SLOT_HEAD: usize = 24;
const P_KIND: usize = 0;
const P_SLOT_BYTES: usize = 4;
const P_OWNER: usize = 8;
const P_CRC: usize = 24;
const S_VERSION: usize = 8;
const S_CRC: usize = 16;

/// Bytes of one slot of a table with rows of `row_bytes` (8-byte aligned, so a slot's words
/// never straddle another's).
pub fn slot_bytes(shape: &Shape) -> usize {
    (SLOT_HEAD + shape.row_bytes as usize).next_multiple_of(8)
}

/// Slots one tuple page holds (at least 1: the largest row, 4,096 bytes, fits a page).
pub fn slots_per_page(slot_bytes: usize) -> usize {
    (PAGE_SIZE - HEADER) / slot_bytes
}

const _: () = assert!(SLOT_HEAD + storage::engine::MAX_ROW_BYTES as usize + HEADER <= PAGE_SIZE);

/// The pointer of slot `i` of tuple page `page`.
pub fn slot_ptr(page: PageId, i: usize, slot_bytes: usize) -> u64 {
    page_offset(page) + (HEADER + i * slot_bytes) as u64
}

/// The page and slot a pointer names, if it is aligned to a slot of `slot_bytes`.
pub fn locate(ptr: u64, slot_bytes: usize) -> Option<(PageId, usize)> {
    let within = (ptr % PAGE_SIZE_U64) as usize;
    let from_first = within.checked_sub(HEADER)?;
    let i = from_first / slot_bytes;
    (from_first % slot_bytes == 0 && i < slots_per_page(slot_bytes))
        .then_some((ptr / PAGE_SIZE_U64, i))
}

/// A tuple page's header for the table `owner` (its id + 1) with slots of `slot_bytes`.
pub fn page_header(owner: u32, slot_bytes: usize) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[P_KIND..P_KIND + 2].copy_from_slice(&KIND_TUPLES.to_le_bytes());
    h[P_SLOT_BYTES..P_SLOT_BYTES + 4].copy_from_slice(&(slot_bytes as u32).to_le_bytes());
    h[P_OWNER..P_OWNER + 4].copy_from_slice(&owner.to_le_bytes());
    let crc = storage::crc::crc32c(&h[..P_CRC]);
    h[P_CRC..P_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Checks that `bytes` (a whole page) is a tuple page of `shape`'s table.
pub fn check_page(bytes: &[u8], page: PageId, shape: &Shape) -> Result<()> {
    let h = &bytes[..HEADER];
    let ok = get_u16(h, P_KIND) == KIND_TUPLES
        && get_u32(h, P_SLOT_BYTES) as usize == slot_bytes(shape)
        && get_u32(h, P_OWNER) == shape.owner
        && get_u32(h, P_CRC) == storage::crc::crc32c(&h[..P_CRC]);
    if ok {
        Ok(())
    } else {
        Err(DbError::Corrupt(format!(
            "cow: page {page} is not a tuple page of table {} (kind {:#x}, owner {}, slot {} \
             bytes, or its header fails its checksum)",
            shape.owner - 1,
            get_u16(h, P_KIND),
            get_u32(h, P_OWNER),
            get_u32(h, P_SLOT_BYTES)
        )))
    }
}

/// A slot's bytes (head and row, unpadded) for `key` and `row`; the version is stamped by the
/// commit that writes it ([`stamp`]).
pub fn encode(key: u64, row: &[u8], checksums: bool) -> Vec<u8> {
    let mut t = vec![0u8; SLOT_HEAD + row.len()];
    t[..8].copy_from_slice(&key.to_le_bytes());
    t[SLOT_HEAD..].copy_from_slice(row);
    reseal(&mut t, checksums);
    t
}

/// Recomputes a slot's crc after its row changed.
pub fn reseal(t: &mut [u8], checksums: bool) {
    let crc = if checksums { entry_crc(get_u64(t, 0), &t[SLOT_HEAD..]) } else { 0 };
    t[S_CRC..S_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Stamps the version that writes the slot.
pub fn stamp(t: &mut [u8], version: u64) {
    t[S_VERSION..S_VERSION + 8].copy_from_slice(&version.to_le_bytes());
}

/// The row of the tuple at `within` of a tuple page (already checked by [`check_page`]), after
/// checking it holds `key`, was written by version `newest` or older, and (with checksums)
/// matches its crc.
pub fn row<'a>(
    page: &'a [u8],
    ptr: u64,
    shape: &Shape,
    key: u64,
    newest: u64,
    checksums: bool,
) -> Result<&'a [u8]> {
    let at = (ptr % PAGE_SIZE_U64) as usize;
    let t = &page[at..at + SLOT_HEAD + shape.row_bytes as usize];
    let row = &t[SLOT_HEAD..];
    let why = if get_u64(t, 0) != key {
        format!("holds key {}", get_u64(t, 0))
    } else if get_u64(t, S_VERSION) > newest {
        format!("was written by version {}, after version {newest}", get_u64(t, S_VERSION))
    } else if checksums && get_u32(t, S_CRC) != entry_crc(key, row) {
        "fails its checksum".to_string()
    } else {
        return Ok(row);
    };
    Err(DbError::Corrupt(format!(
        "cow: table {}: the tuple of key {key} at offset {ptr} {why}",
        shape.owner - 1
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_locate_and_tuples_validate() {
        let shape = Shape::new(2, 1000, 64, true);
        let sb = slot_bytes(&shape);
        assert_eq!((sb, slots_per_page(sb)), (1024, 7));
        assert_eq!(locate(slot_ptr(40, 6, sb), sb), Some((40, 6)));
        assert_eq!(locate(slot_ptr(40, 7, sb), sb), None, "past the last slot");
        assert_eq!(locate(slot_ptr(40, 1, sb) + 8, sb), None, "not a slot's start");
        assert_eq!(locate(page_offset(40), sb), None, "the header");
        let mut page = vec![0u8; PAGE_SIZE];
        page[..HEADER].copy_from_slice(&page_header(shape.owner, sb));
        check_page(&page, 40, &shape).expect("valid header");
        assert!(check_page(&page, 40, &Shape::new(3, 1000, 64, true)).is_err(), "owner");
        let mut t = encode(77, &[5u8; 1000], true);
        stamp(&mut t, 9);
        let ptr = slot_ptr(40, 2, sb);
        let at = (ptr % PAGE_SIZE_U64) as usize;
        page[at..at + t.len()].copy_from_slice(&t);
        assert_eq!(row(&page, ptr, &shape, 77, 9, true).expect("valid"), &[5u8; 1000][..]);
        assert!(row(&page, ptr, &shape, 78, 9, true).is_err(), "another key");
        assert!(row(&page, ptr, &shape, 77, 8, true).is_err(), "written after the snapshot");
        page[at + SLOT_HEAD + 500] ^= 1;
        assert!(row(&page, ptr, &shape, 77, 9, true).is_err(), "changed row byte");
        assert!(row(&page, ptr, &shape, 77, 9, false).is_ok(), "not checked without checksums");
    }
}

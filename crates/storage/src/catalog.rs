//! The catalog page: one 128-byte entry per table (name, row size, index root, heap head).
//! Entries change only inside system transactions, so a table exists entirely or not at all.
//! The immutable part of an entry (bytes 0..64) carries a CRC-32C at byte 80, verified when
//! read; the two mutable page pointers are validated where they are followed (range and page
//! kind), because they change under different latches and cannot share one checksum.

use crate::engine::{TableSpec, MAX_TABLE_NAME};
use crate::format::{get_u32, get_u64, page_offset, PageId, CATALOG_PAGE, PAGE_SIZE};

pub const CATALOG_HEADER: usize = 64;
pub const ENTRY_BYTES: usize = 128;
pub const MAX_TABLES: usize = (PAGE_SIZE - CATALOG_HEADER) / ENTRY_BYTES;
const _: () = assert!(MAX_TABLE_NAME <= 48);

pub const E_NAME: usize = 0;
pub const E_ROW_BYTES: usize = 48;
pub const E_SLOT_BYTES: usize = 52;
pub const E_EXPECTED_ROWS: usize = 56;
pub const E_ROOT: usize = 64;
pub const E_HEAP_HEAD: usize = 72;
pub const E_CRC: usize = 80;
/// Bytes of an entry covered by its checksum.
const E_FIXED: usize = 64;

/// Offset of entry `i` within the catalog page.
pub fn entry_offset(i: usize) -> usize {
    CATALOG_HEADER + i * ENTRY_BYTES
}

/// Region offset of entry `i`.
pub fn entry_region_offset(i: usize) -> u64 {
    page_offset(CATALOG_PAGE) + entry_offset(i) as u64
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogEntry {
    pub spec: TableSpec,
    pub slot_bytes: u32,
    pub root: PageId,
    pub heap_head: PageId,
}

pub fn encode(e: &CatalogEntry) -> [u8; ENTRY_BYTES] {
    let mut b = [0u8; ENTRY_BYTES];
    let name = e.spec.name.as_bytes();
    b[E_NAME..E_NAME + name.len()].copy_from_slice(name);
    b[E_ROW_BYTES..E_ROW_BYTES + 4].copy_from_slice(&e.spec.row_bytes.to_le_bytes());
    b[E_SLOT_BYTES..E_SLOT_BYTES + 4].copy_from_slice(&e.slot_bytes.to_le_bytes());
    b[E_EXPECTED_ROWS..E_EXPECTED_ROWS + 8].copy_from_slice(&e.spec.expected_rows.to_le_bytes());
    b[E_ROOT..E_ROOT + 8].copy_from_slice(&e.root.to_le_bytes());
    b[E_HEAP_HEAD..E_HEAP_HEAD + 8].copy_from_slice(&e.heap_head.to_le_bytes());
    let c = crate::format::crc(&b[..E_FIXED]);
    b[E_CRC..E_CRC + 4].copy_from_slice(&c.to_le_bytes());
    b
}

/// Decodes entry `i` of the catalog page; None if the slot is empty.
pub fn decode(page: &[u8], i: usize) -> Result<Option<CatalogEntry>, String> {
    let b = &page[entry_offset(i)..entry_offset(i) + ENTRY_BYTES];
    if b[E_NAME] == 0 {
        if b.iter().any(|&x| x != 0) {
            return Err(format!("catalog entry {i}: empty name but other bytes set"));
        }
        return Ok(None);
    }
    if get_u32(b, E_CRC) != crate::format::crc(&b[..E_FIXED]) {
        return Err(format!("catalog entry {i}: checksum mismatch"));
    }
    let name_end = b[..48].iter().position(|&c| c == 0).unwrap_or(48);
    let name = std::str::from_utf8(&b[..name_end])
        .map_err(|_| format!("catalog entry {i}: name is not UTF-8"))?
        .to_string();
    let row_bytes = get_u32(b, E_ROW_BYTES);
    let slot_bytes = get_u32(b, E_SLOT_BYTES);
    if row_bytes == 0
        || row_bytes > crate::engine::MAX_ROW_BYTES
        || slot_bytes != slot_size(row_bytes)
    {
        return Err(format!("catalog entry {i} ({name}): bad row size {row_bytes}/{slot_bytes}"));
    }
    Ok(Some(CatalogEntry {
        spec: TableSpec { name, row_bytes, expected_rows: get_u64(b, E_EXPECTED_ROWS) },
        slot_bytes,
        root: get_u64(b, E_ROOT),
        heap_head: get_u64(b, E_HEAP_HEAD),
    }))
}

/// Heap slot size for a row size: 16-byte slot header plus the row padded to 8 bytes.
pub fn slot_size(row_bytes: u32) -> u32 {
    16 + row_bytes.div_ceil(8) * 8
}

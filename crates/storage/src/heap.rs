//! Heap pages of fixed-size row slots. A row never moves, so its slot's region offset (the
//! *rid*) is a stable address: the B+tree maps key -> rid, and physical undo of a row update is
//! safe however the index reorganises.
//!
//! Page layout: 64-byte header `[u16 kind = 3][2 pad][u32 table][u64 next heap page][u32 slot
//! bytes][u32 slots]`, then slots of `[u32 state (0 free, 1 used)][u32 row crc][u64 key][row,
//! padded to 8]`.
//!
//! **Row checksums** (format version 4, issue 37): a used slot's state word carries, in its high
//! half, the CRC-32C of the row's rid, key and bytes ([`row_crc`]), so changed row bytes that
//! still parse are caught on every read and by the integrity check instead of being returned.
//! Invariant: the crc and the bytes it covers change together, under one undo record (or in a
//! slot no committed state reaches yet), so after recovery they agree again. CRC-32C because
//! the crate we already use for every other checksum runs it in hardware (SSE 4.2 / ARMv8 CRC):
//! a 100-byte row costs tens of nanoseconds, and 32 bits miss a random change 1 in 4·10^9.

use crate::engine::Result;
use crate::format::{get_u16, get_u32, get_u64, page_offset, PageId, PAGE_SIZE};
use crate::pages::PageWriter;

pub const HEAP_HEADER: usize = 64;
pub const HEAP_KIND: u16 = 3;
pub const SLOT_FREE: u64 = 0;
pub const SLOT_USED: u64 = 1;
/// Bytes before the row inside a slot.
pub const SLOT_HEADER: u64 = 16;

/// The slot state (`SLOT_FREE`, `SLOT_USED`) of a slot's first word.
#[inline]
pub fn slot_state(word: u64) -> u64 {
    word & u64::from(u32::MAX)
}

/// The row checksum a used slot's first word holds (0 in a region without row checksums).
#[inline]
pub fn stored_crc(word: u64) -> u32 {
    (word >> 32) as u32
}

/// A used slot's first word with row checksum `crc`.
#[inline]
pub fn used_word(crc: u32) -> u64 {
    SLOT_USED | u64::from(crc) << 32
}

/// Byte offset of the row checksum inside a slot (the high half of the state word).
pub const SLOT_CRC_OFFSET: u64 = 4;

/// The checksum of the row in slot `rid` holding `key`: the rid is in it so that a row's bytes
/// written into another slot do not verify there. `row` may come in pieces (an update checks
/// the new row without building it).
pub fn row_crc(rid: u64, key: u64, row: &[&[u8]]) -> u32 {
    let mut head = [0u8; 16];
    head[..8].copy_from_slice(&rid.to_le_bytes());
    head[8..].copy_from_slice(&key.to_le_bytes());
    row.iter().fold(crate::crc::crc32c(&head), |c, part| crate::crc::crc32c_append(c, part))
}

/// The checksum ([`row_crc`]) of a `row_len`-byte row once `new` replaces `old` at `offset`,
/// from the row's checksum before (`crc`), reading only the changed bytes. CRC-32C is affine
/// over GF(2): for messages of one length, crc(a) ^ crc(b) is the linear CRC (register
/// starting at 0, no final inversion) of a ^ b, which is zero but for `old ^ new` at `offset`.
/// Leading zeros leave that register at 0, and the `tail` zeros after the change multiply it by
/// x^(8·tail) modulo the polynomial ([`shift_zeros`], one table lookup and one carry-less
/// multiply), so the cost is the changed bytes' CRC, not the row's. A blind update of one YCSB
/// field (100 of 1,000 bytes) then reads 2 lines of the row instead of 16, each a cache miss.
/// Damage elsewhere in the row is not laundered: the result is the checksum of the row as it
/// should be, which damaged bytes still fail.
pub fn row_crc_updated(crc: u32, row_len: usize, offset: usize, old: &[u8], new: &[u8]) -> u32 {
    debug_assert_eq!(old.len(), new.len());
    debug_assert!(offset + old.len() <= row_len);
    let tail = row_len - offset - old.len();
    let mut delta = [0u8; 256];
    let mut reg = 0u32;
    for (o, n) in old.chunks(delta.len()).zip(new.chunks(delta.len())) {
        for ((x, a), b) in delta.iter_mut().zip(o).zip(n) {
            *x = a ^ b;
        }
        reg = linear_append(reg, &delta[..o.len()]);
    }
    crc ^ shift_zeros(reg, tail)
}

/// The linear CRC-32C register after `data`, from register `reg` (the crate's CRC inverts
/// the register before and after).
fn linear_append(reg: u32, data: &[u8]) -> u32 {
    !crate::crc::crc32c_append(!reg, data)
}

/// The reflected CRC-32C polynomial.
const POLY: u32 = 0x82F6_3B78;

/// a · b modulo the CRC-32C polynomial, both reflected (x^0 is the top bit): zlib's
/// `multmodp`, without branches on the data.
const fn mult_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    let mut i = 0;
    while i < 32 {
        p ^= b & 0u32.wrapping_sub((a >> (31 - i)) & 1);
        b = (b >> 1) ^ (POLY & 0u32.wrapping_sub(b & 1));
        i += 1;
    }
    p
}

/// Zero bytes [`shift_zeros`] applies by table: a row and the 16 bytes before it fit in a
/// page.
const SHIFT_TABLE_LEN: usize = PAGE_SIZE + 17;

/// `SHIFT[n]` = x^(8n) modulo the polynomial (reflected), built at compile time.
static SHIFT: [u32; SHIFT_TABLE_LEN] = {
    let mut t = [0u32; SHIFT_TABLE_LEN];
    t[0] = 1 << 31; // x^0
    let mut n = 1;
    while n < SHIFT_TABLE_LEN {
        t[n] = mult_mod_p(1 << 23, t[n - 1]); // · x^8
        n += 1;
    }
    t
};

/// The linear CRC-32C register `reg` after `n` zero bytes.
fn shift_zeros(reg: u32, n: usize) -> u32 {
    match SHIFT.get(n) {
        Some(&x) => mult_mod_p(x, reg),
        None => linear_append_zeros(reg, n),
    }
}

/// [`shift_zeros`] byte by byte (lengths past the table, and the tests' reference).
fn linear_append_zeros(mut reg: u32, mut n: usize) -> u32 {
    static ZEROS: [u8; 1024] = [0; 1024];
    while n > 0 {
        let k = n.min(ZEROS.len());
        reg = linear_append(reg, &ZEROS[..k]);
        n -= k;
    }
    reg
}

pub fn slots_per_page(slot_bytes: u32) -> usize {
    (PAGE_SIZE - HEAP_HEADER) / slot_bytes as usize
}

/// Writes a fresh heap page (all slots free) through the writer.
pub fn init_page(
    w: &mut dyn PageWriter,
    page: PageId,
    table: u32,
    next: PageId,
    slot_bytes: u32,
) -> Result<()> {
    let mut b = vec![0u8; PAGE_SIZE];
    b[0..2].copy_from_slice(&HEAP_KIND.to_le_bytes());
    b[4..8].copy_from_slice(&table.to_le_bytes());
    b[8..16].copy_from_slice(&next.to_le_bytes());
    b[16..20].copy_from_slice(&slot_bytes.to_le_bytes());
    b[20..24].copy_from_slice(&(slots_per_page(slot_bytes) as u32).to_le_bytes());
    w.write(page, &[(0, &b)])
}

/// Lines of a slot's row bytes `[offset, offset + len)` beyond the line(s) of its 16-byte slot
/// header (which [`check_rid`]'s caller reads first): what a row access adds for the
/// read-latency model.
pub fn row_lines(rid: u64, offset: u64, len: u64) -> u64 {
    let header_last_line = (rid + SLOT_HEADER - 1) / pmem::CACHE_LINE;
    let span = pmem::line_span(rid + SLOT_HEADER + offset, len);
    span.count - u64::from(span.count > 0 && span.first <= header_last_line)
}

/// The rid (region offset) of slot `i` of `page`.
pub fn rid(page: PageId, slot_bytes: u32, i: usize) -> u64 {
    page_offset(page) + HEAP_HEADER as u64 + i as u64 * slot_bytes as u64
}

/// A parsed heap page header.
#[derive(Clone, Copy, Debug)]
pub struct HeapPage {
    pub table: u32,
    pub next: PageId,
    pub slot_bytes: u32,
    pub slots: usize,
}

pub fn parse(page_bytes: &[u8]) -> std::result::Result<HeapPage, String> {
    if get_u16(page_bytes, 0) != HEAP_KIND {
        return Err(format!("not a heap page (kind {})", get_u16(page_bytes, 0)));
    }
    let slot_bytes = get_u32(page_bytes, 16);
    let slots = get_u32(page_bytes, 20) as usize;
    if slot_bytes < 24 || slots != slots_per_page(slot_bytes) {
        return Err(format!("heap page with bad slot geometry {slot_bytes}/{slots}"));
    }
    Ok(HeapPage { table: get_u32(page_bytes, 4), next: get_u64(page_bytes, 8), slot_bytes, slots })
}

/// Validates a rid read from the region (an index entry or an undo record) before anything is
/// read or written through it: it must be a slot boundary of a heap page of `table` with
/// `slot_bytes`-byte slots. Returns the slot's page.
pub fn check_rid(
    store: &crate::pages::PageStore,
    table: u32,
    slot_bytes: u32,
    rid: u64,
) -> Result<PageId> {
    let page = rid / crate::format::PAGE_SIZE_U64;
    let within = (rid % crate::format::PAGE_SIZE_U64) as usize;
    let bad = |why: String| {
        crate::engine::DbError::Corrupt(format!("table {table}: row address {rid}: {why}"))
    };
    if !store.is_data_page(page) {
        return Err(bad("outside the data pages".into()));
    }
    if within < HEAP_HEADER
        || !(within - HEAP_HEADER).is_multiple_of(slot_bytes as usize)
        || (within - HEAP_HEADER) / slot_bytes as usize >= slots_per_page(slot_bytes)
    {
        return Err(bad("not a slot boundary".into()));
    }
    // A row access is a latch event on its heap page; the header line is read here.
    store.touch(crate::pages::PageClass::Heap, page, 1);
    let hp = parse(store.page(page)).map_err(|e| bad(format!("page {page}: {e}")))?;
    if hp.table != table || hp.slot_bytes != slot_bytes {
        return Err(bad(format!("page {page} belongs to table {}", hp.table)));
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_crc_covers_rid_key_and_every_byte_and_pieces_agree() {
        let row: Vec<u8> = (0..100u8).collect();
        let whole = row_crc(4096 + 64, 7, &[&row]);
        assert_eq!(whole, row_crc(4096 + 64, 7, &[&row[..10], &row[10..60], &row[60..]]));
        assert_ne!(whole, row_crc(4096 + 64 + 120, 7, &[&row]), "another slot");
        assert_ne!(whole, row_crc(4096 + 64, 8, &[&row]), "another key");
        let mut changed = row.clone();
        changed[99] ^= 0x10;
        assert_ne!(whole, row_crc(4096 + 64, 7, &[&changed]));
        let word = used_word(whole);
        assert_eq!((slot_state(word), stored_crc(word)), (SLOT_USED, whole));
    }

    /// The checksum derived from the changed bytes is the one computed over the whole new row,
    /// for changes anywhere (first byte, last byte, across 256-byte chunks, empty), and it
    /// still fails a row damaged outside the change.
    #[test]
    fn row_crc_updated_equals_the_checksum_of_the_new_row() {
        let row: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        let (rid, key) = (8192 * 5 + 64, 99);
        let before = row_crc(rid, key, &[&row]);
        for (offset, len) in [(0, 1), (999, 1), (0, 1000), (100, 100), (250, 300), (17, 0)] {
            let new: Vec<u8> = (0..len).map(|i| (i * 31 + 5) as u8).collect();
            let mut changed = row.clone();
            changed[offset..offset + len].copy_from_slice(&new);
            let derived =
                row_crc_updated(before, row.len(), offset, &row[offset..offset + len], &new);
            assert_eq!(derived, row_crc(rid, key, &[&changed]), "offset {offset} len {len}");
            let mut damaged = changed.clone();
            damaged[(offset + len + 1) % 1000] ^= 0x40;
            if len < 1000 {
                assert_ne!(derived, row_crc(rid, key, &[&damaged]), "offset {offset} len {len}");
            }
        }
    }

    #[test]
    fn shifting_by_table_equals_appending_zero_bytes() {
        let mut reg = 0x1234_5678u32;
        for n in (0..40)
            .chain([63, 64, 65, 1000, 1023, 1024, 1025, 4097, 8192, 8208, 8209])
            .chain([SHIFT_TABLE_LEN - 1, SHIFT_TABLE_LEN, SHIFT_TABLE_LEN + 5, 20_000])
        {
            assert_eq!(shift_zeros(reg, n), linear_append_zeros(reg, n), "{n} zero bytes");
            assert_eq!(shift_zeros(0, n), 0);
            reg = reg.rotate_left(7) ^ 0x9E37_79B9 ^ n as u32;
        }
        // x^0 is the identity; the table's last entry is still the reference's.
        assert_eq!(mult_mod_p(1 << 31, 0xDEAD_BEEF), 0xDEAD_BEEF);
    }

    #[test]
    fn row_crc_updated_agrees_at_every_row_length_a_page_holds() {
        for row_len in [1usize, 8, 100, 1000, 4000, PAGE_SIZE - HEAP_HEADER - 16] {
            let row: Vec<u8> = (0..row_len).map(|i| (i * 13 + 1) as u8).collect();
            let (rid, key) = (8192 * 3 + 64, 7);
            let before = row_crc(rid, key, &[&row]);
            for (offset, len) in
                [(0, row_len), (row_len - 1, 1), (0, 1), (row_len / 2, row_len / 3)]
            {
                let new: Vec<u8> = (0..len).map(|i| (i * 29 + 11) as u8).collect();
                let mut changed = row.clone();
                changed[offset..offset + len].copy_from_slice(&new);
                let derived =
                    row_crc_updated(before, row_len, offset, &row[offset..offset + len], &new);
                assert_eq!(derived, row_crc(rid, key, &[&changed]), "{row_len} {offset} {len}");
            }
        }
    }

    #[test]
    fn row_lines_count_the_lines_beyond_the_slot_header() {
        // Slot 0 of a page: header at bytes 64..80 of the page (line 1), row from 80.
        let rid = HEAP_HEADER as u64;
        assert_eq!(row_lines(rid, 0, 48), 0, "bytes 80..128 share line 1 with the header");
        assert_eq!(row_lines(rid, 0, 49), 1);
        assert_eq!(row_lines(rid, 0, 100), 1, "TPC-B's 100-byte row: lines 1 and 2");
        assert_eq!(row_lines(rid, 60, 8), 1, "an update at offset 60 is on line 2 only");
        assert_eq!(row_lines(rid, 0, 0), 0);
    }
}

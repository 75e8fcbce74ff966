//! CRC-32C (Castagnoli, iSCSI), the checksum of every record, row, node and page nvmdb
//! stores. Computed by the `crc-fast` crate (carry-less-multiply folding where the CPU has it:
//! 1 KiB in ~0.7x and 8 KiB in ~0.4x the time of the `crc32c` crate's three-way CRC32
//! instruction loop that nvmdb used until 2026-11-29, measured on the 2-core VM). The values
//! are the same CRC-32C as before: the on-media format did not change, which
//! `tests::matches_a_bitwise_crc32c` pins.

/// CRC-32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// CRC-32C of the bytes `crc` was the checksum of, followed by `data`
/// (`crc32c_append(crc32c(a), b) == crc32c(a ++ b)`; `crc32c_append(0, b) == crc32c(b)`).
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let mut digest =
        crc_fast::Digest::new_with_init_state(crc_fast::CrcAlgorithm::Crc32Iscsi, u64::from(!crc));
    digest.update(data);
    digest.finalize() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reflected CRC-32C polynomial, bit at a time (the definition, not a fast path).
    fn bitwise(crc: u32, data: &[u8]) -> u32 {
        let mut reg = !crc;
        for &b in data {
            reg ^= u32::from(b);
            for _ in 0..8 {
                reg = (reg >> 1) ^ (0x82F6_3B78 & 0u32.wrapping_sub(reg & 1));
            }
        }
        !reg
    }

    #[test]
    fn matches_a_bitwise_crc32c() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283, "the CRC-32C check value");
        let data: Vec<u8> =
            (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        // Every length up to a few blocks, odd offsets, and the sizes nvmdb checksums (rows,
        // 8 KiB nodes and pages).
        let lens = (0..300).chain([511, 1000, 1024, 1032, 4096, 8191, 8192, 8200, 16_384]);
        for len in lens {
            for off in [0, 1, 7] {
                let bytes = &data[off..off + len];
                assert_eq!(crc32c(bytes), bitwise(0, bytes), "len {len} offset {off}");
            }
        }
    }

    #[test]
    fn append_continues_a_checksum() {
        let data: Vec<u8> = (0..9_000u32).map(|i| (i * 7 + 3) as u8).collect();
        for split in [0, 1, 16, 100, 1000, 4096, 8999, 9000] {
            let (a, b) = data.split_at(split);
            assert_eq!(crc32c_append(crc32c(a), b), crc32c(&data), "split at {split}");
            assert_eq!(crc32c_append(crc32c(a), b), bitwise(bitwise(0, a), b), "split {split}");
        }
        assert_eq!(crc32c_append(0, &data), crc32c(&data));
        assert_eq!(crc32c_append(12345, &[]), 12345);
    }
}

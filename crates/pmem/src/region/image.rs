//! Region images: a `sim` region opened on a crash image, a `dram` staging copy (NVRAM Group
//! Commit's "replicate to DRAM", Pelley thesis §4.3), a `dram` region loaded from a
//! region file or a saved image, and saving one. Zero pages are never copied and zero blocks
//! become holes, so a mostly empty region costs its data, not its size.
//!
//! Invariant: an image is written to `path.tmp` and renamed, so a reader never sees half of one.

use super::mapping::Opened;
use super::options::{dram_options, Medium, RegionOptions, SyncMode};
use super::Region;
use crate::error::{PmemError, Result};
use crate::flush::{CpuFlushSupport, FlushKind};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

impl Region {
    /// Opens a `sim` region whose contents (and persisted image) are `image`: how an engine is
    /// opened on a crash image. The options of the run that made the image may be passed as
    /// they are: medium, size, path and sync mode are replaced by the image's.
    pub fn from_image(image: &[u8], options: &RegionOptions) -> Result<Region> {
        if image.is_empty() {
            return Err(PmemError::InvalidOption("empty crash image".into()));
        }
        let options = RegionOptions {
            medium: Medium::Sim,
            size_bytes: image.len() as u64,
            path: None,
            sync: SyncMode::Cache,
            ..options.clone()
        };
        options.validate()?;
        let flush_kind = Self::flush_kind_for(&options, CpuFlushSupport::detect())?;
        let map = Self::map_anonymous(image.len() as u64)?;
        // SAFETY: the mapping is exactly `image.len()` bytes and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, image.len()) };
        // The fresh mapping and the zeroed shadow read zero already: a crash campaign's images
        // are mostly never-written pages, and copying those was most of an iteration's time.
        copy_nonzero_pages(dest, image);
        let opened = Opened::volatile(map);
        Ok(Self::assemble(&options, opened, flush_kind, Some(sparse_clone(image))))
    }

    /// A `dram` region holding a copy of `contents` (not marked dirty, not [`Region::created`]):
    /// the volatile staging copy of a persistent region (NVRAM Group Commit's "replicate to
    /// DRAM"). Only the size, statistics and dirty-tracking options apply.
    pub fn dram_copy(contents: &[u8], options: &RegionOptions) -> Result<Region> {
        if contents.is_empty() {
            return Err(PmemError::InvalidOption("empty staging copy".into()));
        }
        let options = dram_options(options, contents.len() as u64);
        options.validate()?;
        let map = Self::map_anonymous(contents.len() as u64)?;
        // SAFETY: the mapping is exactly `contents.len()` bytes and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, contents.len()) };
        // Zero pages are skipped: the fresh mapping reads zero there without a page of memory
        // (a mostly empty 4 GiB region copies in a fraction of the time and memory).
        copy_nonzero_pages(dest, contents);
        let opened = Opened::volatile(map);
        Ok(Self::assemble(&options, opened, FlushKind::None, None))
    }

    /// A `dram` region whose contents start as a copy of the file at `path`: a region file, or
    /// an image [`Region::save_image`] wrote. A loaded database is restored in the time a copy
    /// takes instead of the time a load takes (`nvmdb bench --image`). The file is only read,
    /// never locked or changed. Its holes (sparse zero ranges, found with `SEEK_DATA`) are not
    /// copied: the anonymous mapping is zero there already, so a mostly empty region costs its
    /// data, not its size. The size is the file's; medium, path, sync, flush and growth in
    /// `options` are replaced (`dram`, none, cache, none, none); timing, wear, trace and dirty
    /// tracking apply.
    pub fn dram_from_file(path: &Path, options: &RegionOptions) -> Result<Region> {
        let io = |cause| PmemError::Io { path: path.to_path_buf(), cause };
        let file = std::fs::File::open(path).map_err(|cause| match cause.kind() {
            std::io::ErrorKind::NotFound => PmemError::Missing { path: path.to_path_buf() },
            _ => io(cause),
        })?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            return Err(PmemError::EmptyFile { path: path.to_path_buf() });
        }
        let options = dram_options(options, len);
        options.validate()?;
        let map = Self::map_anonymous(len)?;
        // SAFETY: the mapping is exactly `len` bytes, freshly created and not yet shared.
        let dest = unsafe { std::slice::from_raw_parts_mut(map.base, len as usize) };
        for (start, end) in data_extents(&file, len).map_err(io)? {
            let slice = &mut dest[start as usize..end as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, slice, start).map_err(io)?;
        }
        let opened = Opened::volatile(map);
        Ok(Self::assemble(&options, opened, FlushKind::None, None))
    }

    /// Writes the region's contents (up to [`Region::backed_len`]) to `path` as a region file
    /// [`Region::dram_from_file`] and the file media can open: written to `path.tmp` and renamed,
    /// so a reader never sees half an image. Blocks of [`IMAGE_BLOCK`] bytes that are all zero
    /// become holes. Call it on a quiescent region (after a clean shutdown): it copies what is
    /// there, it does not persist anything. Returns the bytes of data written.
    pub fn save_image(&self, path: &Path) -> Result<u64> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let io = |cause| PmemError::Io { path: tmp.clone(), cause };
        let file = std::fs::File::create(&tmp).map_err(io)?;
        let contents = &self.whole()[..self.backed_len() as usize];
        let mut written = 0u64;
        for (i, block) in contents.chunks(IMAGE_BLOCK).enumerate() {
            if is_zero(block) {
                continue;
            }
            let at = (i * IMAGE_BLOCK) as u64;
            std::os::unix::fs::FileExt::write_all_at(&file, block, at).map_err(io)?;
            written += block.len() as u64;
        }
        file.set_len(contents.len() as u64).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, path)
            .map_err(|cause| PmemError::Io { path: path.to_path_buf(), cause })?;
        Ok(written)
    }
}

/// Copies every 4 KiB page of `src` that is not all zero to the same offset of `dest` (which
/// must read zero elsewhere already, e.g. a fresh mapping or a zeroed allocation, and be at
/// least as long). Zero pages are only read, so `dest` gets no memory behind them.
fn copy_nonzero_pages(dest: &mut [u8], src: &[u8]) {
    debug_assert!(dest.len() >= src.len());
    for (i, page) in src.chunks(4096).enumerate() {
        if !is_zero(page) {
            dest[i * 4096..i * 4096 + page.len()].copy_from_slice(page);
        }
    }
}

/// A copy of `src` in a zeroed allocation with only its nonzero pages written: the same bytes
/// as `src.to_vec()`, but a mostly zero image costs the memory (and page faults) of its data.
pub fn sparse_clone(src: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; src.len()];
    copy_nonzero_pages(&mut out, src);
    out
}

/// Whether every byte of `bytes` is zero (word at a time).
fn is_zero(bytes: &[u8]) -> bool {
    let (head, words, tail) = {
        // SAFETY: any bit pattern is a valid u64.
        unsafe { bytes.align_to::<u64>() }
    };
    // Eight words OR-ed per step (vectorised), stopping at the first nonzero block.
    head.iter().all(|&b| b == 0)
        && words.chunks(8).all(|block| block.iter().fold(0, |acc, &w| acc | w) == 0)
        && tail.iter().all(|&b| b == 0)
}

/// Granularity of the holes [`Region::save_image`] leaves for zero blocks.
pub const IMAGE_BLOCK: usize = 64 << 10;

/// The `[start, end)` ranges of `file` (of `len` bytes) that may hold data: its extents from
/// `SEEK_DATA`/`SEEK_HOLE`, or the whole file where the file system cannot say.
fn data_extents(file: &std::fs::File, len: u64) -> std::io::Result<Vec<(u64, u64)>> {
    let fd = file.as_raw_fd();
    let seek = |offset: u64, whence: libc::c_int| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on an open descriptor; the result is checked.
        let r = unsafe { libc::lseek(fd, offset as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        match std::io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
            e => Err(e),
        }
    };
    let mut extents = Vec::new();
    let mut at = 0;
    while at < len {
        let start = match seek(at, libc::SEEK_DATA) {
            Ok(Some(start)) => start.min(len),
            Ok(None) => break,
            // No SEEK_DATA here (EINVAL): read everything.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && extents.is_empty() => {
                return Ok(vec![(0, len)]);
            }
            Err(e) => return Err(e),
        };
        let end = seek(start, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        if end > start {
            extents.push((start, end));
        }
        at = end.max(start + 1);
    }
    Ok(extents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::scratch;
    use crate::sim::CrashPolicy;

    #[test]
    fn an_image_restores_the_contents_and_leaves_zero_blocks_as_holes() {
        let dir = scratch("image");
        let path = dir.join("db.img");
        let size = 16 * IMAGE_BLOCK as u64;
        let r = Region::open(&RegionOptions::new(Medium::Dram, size)).unwrap();
        r.write(100, b"first block");
        r.write(9 * IMAGE_BLOCK as u64 - 4, b"straddles two blocks");
        r.write(size - 8, &7u64.to_le_bytes());
        let written = r.save_image(&path).unwrap();
        assert_eq!(written, 4 * IMAGE_BLOCK as u64, "blocks 0, 8, 9 and 15 hold data");
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), size);
        assert!(!dir.join("db.img.tmp").exists());
        // tmpfs allocates only the data blocks.
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) * 512 <= 5 * IMAGE_BLOCK as u64);
        let opts = RegionOptions { wear: true, ..RegionOptions::new(Medium::Shm, 1) };
        let copy = Region::dram_from_file(&path, &opts).unwrap();
        assert_eq!(copy.medium(), Medium::Dram);
        assert!(!copy.created(), "an image is an existing database");
        assert!(copy.wear().is_some(), "the run's options apply");
        assert_eq!(copy.len(), size);
        assert_eq!(copy.snapshot(), r.snapshot());
        // The copy is private: writing it leaves the image alone.
        copy.write(0, b"changed");
        assert_eq!(Region::dram_from_file(&path, &opts).unwrap().snapshot(), r.snapshot());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dram_copy_holds_every_nonzero_byte_and_zero_elsewhere() {
        let mut contents = vec![0u8; 10 * 4096 + 100];
        for at in [0, 4095, 4096 * 3 + 17, 4096 * 7 + 4095, 10 * 4096 + 99] {
            contents[at] = (at % 251) as u8 + 1;
        }
        let copy = Region::dram_copy(&contents, &RegionOptions::default()).unwrap();
        assert_eq!(copy.snapshot(), contents);
        assert!(is_zero(&[0; 13]) && !is_zero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 1]));
        assert_eq!(sparse_clone(&contents), contents);
    }

    #[test]
    fn a_region_from_a_crash_image_reads_and_cuts_back_the_same_bytes() {
        let mut image = vec![0u8; 9 * 4096 + 64];
        for at in [1, 4096 * 2, 4096 * 5 + 4000, 9 * 4096 + 63] {
            image[at] = 0xA5;
        }
        let region = Region::from_image(&image, &RegionOptions::default()).unwrap();
        assert_eq!(region.snapshot(), image);
        for policy in [CrashPolicy::Persisted, CrashPolicy::Evict, CrashPolicy::Torn] {
            assert_eq!(region.crash_image(policy, 7).unwrap(), image, "{policy:?}");
        }
        // A store after opening is in the current contents, not yet in the persisted image.
        region.write(4096 * 3, &[7; 8]);
        assert_eq!(region.crash_image(CrashPolicy::Persisted, 0).unwrap(), image);
        let mut written = image.clone();
        written[4096 * 3..4096 * 3 + 8].copy_from_slice(&[7; 8]);
        assert_eq!(region.snapshot(), written);
    }

    #[test]
    fn a_missing_or_empty_image_is_an_error() {
        let dir = scratch("image-bad");
        let opts = RegionOptions::default();
        let missing = Region::dram_from_file(&dir.join("none.img"), &opts);
        assert!(matches!(missing, Err(PmemError::Missing { .. })), "{:?}", missing.err());
        std::fs::write(dir.join("empty.img"), b"").unwrap();
        let empty = Region::dram_from_file(&dir.join("empty.img"), &opts);
        assert!(matches!(empty, Err(PmemError::EmptyFile { .. })), "{:?}", empty.err());
        let unwritable = Region::open(&opts).unwrap().save_image(&dir.join("no/such/dir.img"));
        assert!(matches!(unwritable, Err(PmemError::Io { .. })), "{:?}", unwritable.err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn data_extents_cover_every_byte_that_is_not_a_hole() {
        let dir = scratch("extents");
        let path = dir.join("sparse");
        let file = std::fs::File::create(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, &[1; 10], 1 << 20).unwrap();
        file.set_len(4 << 20).unwrap();
        let extents = data_extents(&file, 4 << 20).unwrap();
        assert!(!extents.is_empty());
        assert!(extents.iter().any(|&(s, e)| s <= 1 << 20 && e >= (1 << 20) + 10), "{extents:?}");
        assert!(extents.iter().all(|&(s, e)| s < e && e <= 4 << 20), "{extents:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

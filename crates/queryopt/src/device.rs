//! The block interface every operator reads and spills through (thesis §3.2: the database
//! lives on one device, a disk or a Flash SSD, read in 4 KiB pages). Three devices:
//!
//! - [`FileDevice`]: a real file opened with `O_DIRECT`, so reads go to this machine's disk and
//!   not to the page cache; time is measured.
//! - [`Modelled`]: pages held by an inner device (in memory), with the time a device of a given
//!   [`DeviceProfile`] would take *accounted*, not slept: a request that starts at the page after
//!   the previous request's last page is sequential (transfer only); any other pays positioning
//!   (disk: seek + half a rotation, or the time the gap takes to pass under the head if that is
//!   less; SSD: a fixed access latency) and then the transfer.
//! - [`MemDevice`]: pages in memory, no time; for tests and as the store behind [`Modelled`].
//!
//! Every device counts pages and requests read and written. Invariant: a device never returns a
//! page it was not given; reads past the end are errors, not zeros.

use crate::error::{invalid, Error, Result};
use serde::Serialize;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes in a page, as in the thesis (§3.3: "a 4kb page size").
pub const PAGE_SIZE: usize = 4096;
/// Alignment `O_DIRECT` needs for buffers, offsets and lengths on every Linux file system.
pub const DIRECT_ALIGN: usize = 4096;
const _: () = assert!(PAGE_SIZE.is_multiple_of(DIRECT_ALIGN));

/// Pages and requests, read and written, and time spent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct IoStats {
    pub pages_read: u64,
    pub read_requests: u64,
    pub pages_written: u64,
    pub write_requests: u64,
    /// Requests that continued where the previous one ended (modelled devices only).
    pub sequential_requests: u64,
    /// Requests that paid positioning (modelled devices only).
    pub random_requests: u64,
    /// Device time a modelled device accounted; 0 on real devices.
    pub modelled_io_ns: u64,
    /// Wall time spent inside read and write calls of a real device.
    pub io_wall_ns: u64,
}

impl IoStats {
    /// `self - earlier`, field by field: the I/O of one operator on a shared device.
    pub fn since(&self, earlier: &IoStats) -> IoStats {
        IoStats {
            pages_read: self.pages_read - earlier.pages_read,
            read_requests: self.read_requests - earlier.read_requests,
            pages_written: self.pages_written - earlier.pages_written,
            write_requests: self.write_requests - earlier.write_requests,
            sequential_requests: self.sequential_requests - earlier.sequential_requests,
            random_requests: self.random_requests - earlier.random_requests,
            modelled_io_ns: self.modelled_io_ns - earlier.modelled_io_ns,
            io_wall_ns: self.io_wall_ns - earlier.io_wall_ns,
        }
    }
}

/// A buffer of whole pages aligned for `O_DIRECT`, made without `unsafe` by over-allocating a
/// `Vec` and starting at its first aligned byte.
pub struct PageBuf {
    storage: Vec<u8>,
    start: usize,
    pages: usize,
}

impl PageBuf {
    /// A zeroed buffer of `pages` pages.
    pub fn new(pages: usize) -> PageBuf {
        let storage = vec![0u8; pages * PAGE_SIZE + DIRECT_ALIGN];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN);
        PageBuf { storage, start, pages }
    }

    /// Capacity in pages.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// The first `count` pages as one slice.
    pub fn bytes(&self, count: usize) -> &[u8] {
        &self.storage[self.start..self.start + count * PAGE_SIZE]
    }

    /// The first `count` pages as one mutable slice.
    pub fn bytes_mut(&mut self, count: usize) -> &mut [u8] {
        &mut self.storage[self.start..self.start + count * PAGE_SIZE]
    }

    /// Page `i`.
    pub fn page(&self, i: usize) -> &[u8] {
        let at = self.start + i * PAGE_SIZE;
        &self.storage[at..at + PAGE_SIZE]
    }

    /// Page `i`, mutable.
    pub fn page_mut(&mut self, i: usize) -> &mut [u8] {
        let at = self.start + i * PAGE_SIZE;
        &mut self.storage[at..at + PAGE_SIZE]
    }
}

/// A device of 4 KiB pages addressed from 0. Writes may extend it (spill space).
pub trait BlockDevice {
    /// `ssd-model`, `disk-model`, `file`, `memory`.
    fn name(&self) -> &str;
    /// Pages the device holds now.
    fn pages(&self) -> u64;
    /// Reads pages `first..first + count` into the first `count` pages of `buf`, as one request.
    fn read_pages(&mut self, first: u64, count: usize, buf: &mut PageBuf) -> Result<()>;
    /// Writes the first `count` pages of `buf` at `first..first + count`, as one request.
    fn write_pages(&mut self, first: u64, count: usize, buf: &PageBuf) -> Result<()>;
    /// Counts since the device was made.
    fn stats(&self) -> IoStats;
    /// Whether time is accounted by a model (true) or measured (false).
    fn is_modelled(&self) -> bool;
    /// Drops what a real device may cache (nothing for `O_DIRECT`); a model forgets the head
    /// position, so that the next request is random, as after an unrelated query.
    fn forget_position(&mut self) {}
}

fn check_buf(count: usize, buf: &PageBuf) -> Result<()> {
    if count == 0 || count > buf.pages() {
        return Err(Error::OutOfRange(format!("{count} pages into a {}-page buffer", buf.pages())));
    }
    Ok(())
}

/// Pages in memory; grows on write.
#[derive(Default)]
pub struct MemDevice {
    data: Vec<u8>,
    stats: IoStats,
}

impl MemDevice {
    pub fn new() -> MemDevice {
        MemDevice::default()
    }
}

impl BlockDevice for MemDevice {
    fn name(&self) -> &str {
        "memory"
    }

    fn pages(&self) -> u64 {
        (self.data.len() / PAGE_SIZE) as u64
    }

    fn read_pages(&mut self, first: u64, count: usize, buf: &mut PageBuf) -> Result<()> {
        check_buf(count, buf)?;
        if first + count as u64 > self.pages() {
            return Err(Error::OutOfRange(format!(
                "read of pages {first}..{} on a {}-page device",
                first + count as u64,
                self.pages()
            )));
        }
        let at = first as usize * PAGE_SIZE;
        buf.bytes_mut(count).copy_from_slice(&self.data[at..at + count * PAGE_SIZE]);
        self.stats.pages_read += count as u64;
        self.stats.read_requests += 1;
        Ok(())
    }

    fn write_pages(&mut self, first: u64, count: usize, buf: &PageBuf) -> Result<()> {
        check_buf(count, buf)?;
        let at = first as usize * PAGE_SIZE;
        let end = at + count * PAGE_SIZE;
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[at..end].copy_from_slice(buf.bytes(count));
        self.stats.pages_written += count as u64;
        self.stats.write_requests += 1;
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn is_modelled(&self) -> bool {
        true
    }
}

/// The performance of a device: Table 2.1's random read and sequential bandwidth, with the
/// random read split into its parts (thesis §2.1.1: seek, then rotation, then transfer).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceProfile {
    pub name: String,
    /// Fixed cost of a request that does not continue the previous one (SSD access latency).
    pub access_ns: f64,
    /// Average seek over a third of the capacity (the mean distance of random requests).
    pub avg_seek_ns: f64,
    /// Seek to the adjacent track.
    pub track_to_track_ns: f64,
    /// Spindle speed; a positioned request waits half a rotation on average. 0: no rotation.
    pub rpm: f64,
    /// Sequential transfer rate.
    pub seq_bytes_per_s: f64,
    /// Device capacity: seek time grows with the square root of distance / (capacity / 3).
    pub capacity_bytes: f64,
}

/// Rows of the thesis's scan table (§3.3: "a table with 10 million rows, or roughly 2 GB").
pub const THESIS_SCAN_ROWS: f64 = 10e6;
/// Table 2.1's disk capacity (WD VelociRaptor, 300 GB).
pub const THESIS_DISK_BYTES: f64 = 300e9;

impl DeviceProfile {
    /// Table 2.1's Flash SSD (OCZ RevoDrive): 90 µs random read, 190 MB/s sequential.
    pub fn ssd() -> DeviceProfile {
        DeviceProfile {
            name: "ssd-model".into(),
            access_ns: 90_000.0,
            avg_seek_ns: 0.0,
            track_to_track_ns: 0.0,
            rpm: 0.0,
            seq_bytes_per_s: 190e6,
            capacity_bytes: 120e9,
        }
    }

    /// Table 2.1's disk (WD VelociRaptor, 10K rpm): 10 ms random read = 7 ms average seek + 3 ms
    /// half rotation; 120 MB/s sequential. `rows` scales the capacity so that a table of `rows`
    /// rows spans the same fraction of the platter as the thesis's 10M-row table did of 300 GB
    /// (seeks inside a table are short; scaling the table without the disk would shorten them
    /// further).
    pub fn disk(rows: u64) -> DeviceProfile {
        DeviceProfile {
            name: "disk-model".into(),
            access_ns: 0.0,
            avg_seek_ns: 7e6,
            track_to_track_ns: 0.6e6,
            rpm: 10_000.0,
            seq_bytes_per_s: 120e6,
            capacity_bytes: THESIS_DISK_BYTES * (rows as f64 / THESIS_SCAN_ROWS).min(1.0),
        }
    }

    /// A profile measured on a real device: `random_read_ns` for one 4 KiB page, `seq_bytes_per_s`.
    pub fn measured(name: &str, random_read_ns: f64, seq_bytes_per_s: f64) -> DeviceProfile {
        let transfer = PAGE_SIZE as f64 * 1e9 / seq_bytes_per_s;
        DeviceProfile {
            name: name.into(),
            access_ns: (random_read_ns - transfer).max(0.0),
            avg_seek_ns: 0.0,
            track_to_track_ns: 0.0,
            rpm: 0.0,
            seq_bytes_per_s,
            capacity_bytes: 1e12,
        }
    }

    /// Time to transfer `pages` pages at the sequential rate.
    pub fn transfer_ns(&self, pages: f64) -> f64 {
        pages * PAGE_SIZE as f64 * 1e9 / self.seq_bytes_per_s
    }

    /// Half a rotation, the mean rotational latency of a positioned request.
    pub fn half_rotation_ns(&self) -> f64 {
        if self.rpm > 0.0 {
            30e9 / self.rpm
        } else {
            0.0
        }
    }

    /// Seek time over `distance_pages` pages (0 for a device without a head).
    pub fn seek_ns(&self, distance_pages: f64) -> f64 {
        if self.avg_seek_ns == 0.0 || distance_pages == 0.0 {
            return 0.0;
        }
        let third = self.capacity_bytes / 3.0;
        let fraction = (distance_pages * PAGE_SIZE as f64 / third).min(3.0);
        self.track_to_track_ns + (self.avg_seek_ns - self.track_to_track_ns) * fraction.sqrt()
    }

    /// Whether the device has a rotating head (a forward gap may pass under it).
    pub fn rotating(&self) -> bool {
        self.rpm > 0.0
    }

    /// Positioning cost of a request starting at `first` when the head is after `head`
    /// (`None`: unknown, e.g. the first request). Forward gaps on a disk cost at most the time
    /// they take to pass under the head.
    pub fn position_ns(&self, head: Option<u64>, first: u64) -> f64 {
        let Some(head) = head else {
            return self.access_ns + self.avg_seek_ns + self.half_rotation_ns();
        };
        if first == head {
            return 0.0;
        }
        let distance = first.abs_diff(head) as f64;
        let random = self.access_ns + self.seek_ns(distance) + self.half_rotation_ns();
        if self.rotating() && first > head {
            random.min(self.transfer_ns(distance))
        } else {
            random
        }
    }

    /// Table 2.1's "random read": positioning at the mean distance plus one page.
    pub fn random_read_ns(&self) -> f64 {
        self.position_ns(None, 0) + self.transfer_ns(1.0)
    }
}

/// An inner device with the time of `profile` accounted per request.
pub struct Modelled<D: BlockDevice> {
    inner: D,
    profile: DeviceProfile,
    /// The page after the last page of the previous request.
    head: Option<u64>,
    modelled_ns: f64,
    sequential: u64,
    random: u64,
}

impl<D: BlockDevice> Modelled<D> {
    pub fn new(inner: D, profile: DeviceProfile) -> Modelled<D> {
        Modelled { inner, profile, head: None, modelled_ns: 0.0, sequential: 0, random: 0 }
    }

    pub fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    fn account(&mut self, first: u64, count: usize) {
        let position = self.profile.position_ns(self.head, first);
        if position == 0.0 && self.head.is_some() {
            self.sequential += 1;
        } else {
            self.random += 1;
        }
        self.modelled_ns += position + self.profile.transfer_ns(count as f64);
        self.head = Some(first + count as u64);
    }
}

impl<D: BlockDevice> BlockDevice for Modelled<D> {
    fn name(&self) -> &str {
        &self.profile.name
    }

    fn pages(&self) -> u64 {
        self.inner.pages()
    }

    fn read_pages(&mut self, first: u64, count: usize, buf: &mut PageBuf) -> Result<()> {
        self.inner.read_pages(first, count, buf)?;
        self.account(first, count);
        Ok(())
    }

    fn write_pages(&mut self, first: u64, count: usize, buf: &PageBuf) -> Result<()> {
        self.inner.write_pages(first, count, buf)?;
        self.account(first, count);
        Ok(())
    }

    fn stats(&self) -> IoStats {
        IoStats {
            sequential_requests: self.sequential,
            random_requests: self.random,
            modelled_io_ns: self.modelled_ns.round() as u64,
            ..self.inner.stats()
        }
    }

    fn is_modelled(&self) -> bool {
        true
    }

    fn forget_position(&mut self) {
        self.head = None;
    }
}

/// A real file read and written with `O_DIRECT` (or, if allowed and the file system refuses
/// it, through the page cache, which the report then says).
pub struct FileDevice {
    file: File,
    path: PathBuf,
    pages: u64,
    direct: bool,
    remove_on_drop: bool,
    stats: IoStats,
}

impl FileDevice {
    /// Creates (truncates) `path`. `allow_buffered`: if `O_DIRECT` is refused, fall back to
    /// buffered I/O instead of failing.
    pub fn create(path: &Path, allow_buffered: bool) -> Result<FileDevice> {
        let shown = path.display().to_string();
        let in_memory = memory_file_system(path);
        if let (Some(fs), false) = (in_memory, allow_buffered) {
            return Err(Error::MemoryFileSystem { path: shown, fs });
        }
        let open = |flags: i32| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let (file, direct) = match open(libc::O_DIRECT) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                if !allow_buffered {
                    let _ = std::fs::remove_file(path);
                    return Err(Error::NoDirectIo { path: shown, source: e });
                }
                let f = open(0).map_err(|source| Error::Io {
                    path: shown.clone(),
                    what: "open",
                    source,
                })?;
                (f, false)
            }
            Err(source) => return Err(Error::Io { path: shown, what: "open", source }),
        };
        Ok(FileDevice {
            file,
            path: path.to_path_buf(),
            pages: 0,
            // A memory file system may accept O_DIRECT (tmpfs does since Linux 6.6), but it
            // still bypasses no device.
            direct: direct && in_memory.is_none(),
            remove_on_drop: true,
            stats: IoStats::default(),
        })
    }

    /// Whether reads bypass the page cache.
    pub fn direct(&self) -> bool {
        self.direct
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io_error(&self, what: &'static str, source: std::io::Error) -> Error {
        Error::Io { path: self.path.display().to_string(), what, source }
    }
}

/// `Some(name)` if the directory holding `path` is on tmpfs or ramfs.
fn memory_file_system(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut c_path = dir.as_os_str().as_bytes().to_vec();
    c_path.push(0);
    // SAFETY: `c_path` is NUL-terminated and outlives the call; `stat` is a plain C struct
    // that statfs fills (zeroed is a valid value of it) and we read only after success.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statfs(c_path.as_ptr().cast(), &mut stat) };
    if rc != 0 {
        return None;
    }
    match stat.f_type as i64 {
        TMPFS_MAGIC => Some("tmpfs"),
        RAMFS_MAGIC => Some("ramfs"),
        _ => None,
    }
}

impl Drop for FileDevice {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl BlockDevice for FileDevice {
    fn name(&self) -> &str {
        "file"
    }

    fn pages(&self) -> u64 {
        self.pages
    }

    fn read_pages(&mut self, first: u64, count: usize, buf: &mut PageBuf) -> Result<()> {
        check_buf(count, buf)?;
        if first + count as u64 > self.pages {
            return Err(Error::OutOfRange(format!(
                "read of pages {first}..{} on a {}-page file",
                first + count as u64,
                self.pages
            )));
        }
        let t = Instant::now();
        let offset = first * PAGE_SIZE as u64;
        let result = self.file.read_exact_at(buf.bytes_mut(count), offset);
        result.map_err(|e| self.io_error("read", e))?;
        self.stats.io_wall_ns += t.elapsed().as_nanos() as u64;
        self.stats.pages_read += count as u64;
        self.stats.read_requests += 1;
        Ok(())
    }

    fn write_pages(&mut self, first: u64, count: usize, buf: &PageBuf) -> Result<()> {
        check_buf(count, buf)?;
        let t = Instant::now();
        let offset = first * PAGE_SIZE as u64;
        let result = self.file.write_all_at(buf.bytes(count), offset);
        result.map_err(|e| self.io_error("write", e))?;
        self.stats.io_wall_ns += t.elapsed().as_nanos() as u64;
        self.pages = self.pages.max(first + count as u64);
        self.stats.pages_written += count as u64;
        self.stats.write_requests += 1;
        Ok(())
    }

    fn stats(&self) -> IoStats {
        self.stats
    }

    fn is_modelled(&self) -> bool {
        false
    }
}

/// What [`probe`] measured on a real device.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeResult {
    pub direct: bool,
    pub random_reads: u64,
    pub random_read_us: f64,
    pub sequential_mb: f64,
    pub sequential_mb_per_s: f64,
}

/// Measures one-page random reads (`reads` of them, uniform over the device) and a sequential
/// read of the whole device in 256 KiB requests: the device's own Table 2.1 row.
pub fn probe(dev: &mut dyn BlockDevice, reads: u64, seed: u64) -> Result<ProbeResult> {
    use rand::{Rng, SeedableRng};
    let pages = dev.pages();
    if pages < 64 {
        return Err(invalid("probe device pages", pages, "at least 64"));
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut buf = PageBuf::new(64);
    let t = Instant::now();
    for _ in 0..reads {
        dev.read_pages(rng.gen_range(0..pages), 1, &mut buf)?;
    }
    let random_ns = t.elapsed().as_nanos() as f64 / reads.max(1) as f64;
    let t = Instant::now();
    let mut first = 0;
    while first < pages {
        let count = (pages - first).min(64) as usize;
        dev.read_pages(first, count, &mut buf)?;
        first += count as u64;
    }
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    let mb = (pages * PAGE_SIZE as u64) as f64 / 1e6;
    Ok(ProbeResult {
        direct: true,
        random_reads: reads,
        random_read_us: random_ns / 1e3,
        sequential_mb: mb,
        sequential_mb_per_s: mb / secs,
    })
}

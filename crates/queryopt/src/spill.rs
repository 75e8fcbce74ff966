//! Spill files on the same device as the tables (so their I/O is charged like any other) and
//! the memory budget joins obey.
//!
//! A spill file is a list of chunks, each a run of contiguous pages written in one request;
//! records are packed `PAGE_SIZE / record_bytes` to a page and never straddle pages, and only a
//! chunk's last page may be partly full. Invariant: a chunk's records fill its pages in order.

use crate::device::{BlockDevice, PageBuf, PAGE_SIZE};
use crate::error::{Error, Result};
use crate::wisconsin::Table;
use serde::Serialize;

/// Bump allocator for spill pages past the tables. Space is not reused within a query.
#[derive(Clone, Copy, Debug)]
pub struct TempSpace {
    pub next_page: u64,
}

impl TempSpace {
    pub fn alloc(&mut self, pages: u64) -> u64 {
        let first = self.next_page;
        self.next_page += pages;
        first
    }
}

/// Accounted memory of one operator: buffers, sort areas, hash tables.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Budget {
    pub limit_bytes: u64,
    pub used_bytes: u64,
    pub peak_bytes: u64,
}

impl Budget {
    pub fn new(limit_pages: usize) -> Budget {
        Budget { limit_bytes: (limit_pages * PAGE_SIZE) as u64, used_bytes: 0, peak_bytes: 0 }
    }

    pub fn limit_pages(&self) -> u64 {
        self.limit_bytes / PAGE_SIZE as u64
    }

    /// Whether `bytes` more fit.
    pub fn fits(&self, bytes: u64) -> bool {
        self.used_bytes + bytes <= self.limit_bytes
    }

    /// Takes `bytes`, or fails naming `stage` if they do not fit.
    pub fn take(&mut self, stage: &'static str, bytes: u64) -> Result<()> {
        if !self.fits(bytes) {
            return Err(Error::MemoryLimit {
                stage,
                limit_pages: self.limit_pages(),
                needed_pages: (self.used_bytes + bytes).div_ceil(PAGE_SIZE as u64),
            });
        }
        self.used_bytes += bytes;
        self.peak_bytes = self.peak_bytes.max(self.used_bytes);
        Ok(())
    }

    pub fn give(&mut self, bytes: u64) {
        assert!(bytes <= self.used_bytes, "gave back more than was taken");
        self.used_bytes -= bytes;
    }

    /// Takes a buffer of `pages` pages.
    pub fn buffer(&mut self, stage: &'static str, pages: usize) -> Result<PageBuf> {
        self.take(stage, (pages * PAGE_SIZE) as u64)?;
        Ok(PageBuf::new(pages))
    }

    pub fn give_buffer(&mut self, buf: PageBuf) {
        self.give((buf.pages() * PAGE_SIZE) as u64);
    }
}

/// Contiguous pages holding `records` records.
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    pub first_page: u64,
    pub pages: u64,
    pub records: u64,
}

/// A spilled run or partition.
#[derive(Clone, Debug, Default)]
pub struct SpillFile {
    pub chunks: Vec<Chunk>,
    pub records: u64,
}

impl SpillFile {
    pub fn pages(&self) -> u64 {
        self.chunks.iter().map(|c| c.pages).sum()
    }
}

/// Records per page for `record_bytes`-byte records.
pub fn records_per_page(record_bytes: usize) -> usize {
    PAGE_SIZE / record_bytes
}

/// Appends records to a spill file through a buffer of `buf.pages()` pages.
pub struct SpillWriter {
    pub file: SpillFile,
    buf: PageBuf,
    record_bytes: usize,
    in_buf: usize,
}

impl SpillWriter {
    pub fn new(buf: PageBuf, record_bytes: usize) -> SpillWriter {
        SpillWriter { file: SpillFile::default(), buf, record_bytes, in_buf: 0 }
    }

    pub fn buffer_pages(&self) -> usize {
        self.buf.pages()
    }

    fn capacity(&self) -> usize {
        self.buf.pages() * records_per_page(self.record_bytes)
    }

    pub fn push(
        &mut self,
        dev: &mut dyn BlockDevice,
        temp: &mut TempSpace,
        record: &[u8],
    ) -> Result<()> {
        let rpp = records_per_page(self.record_bytes);
        let (page, slot) = (self.in_buf / rpp, self.in_buf % rpp);
        let at = slot * self.record_bytes;
        self.buf.page_mut(page)[at..at + self.record_bytes].copy_from_slice(record);
        self.in_buf += 1;
        if self.in_buf == self.capacity() {
            self.flush(dev, temp)?;
        }
        Ok(())
    }

    fn flush(&mut self, dev: &mut dyn BlockDevice, temp: &mut TempSpace) -> Result<()> {
        if self.in_buf == 0 {
            return Ok(());
        }
        let pages = self.in_buf.div_ceil(records_per_page(self.record_bytes));
        let first_page = temp.alloc(pages as u64);
        dev.write_pages(first_page, pages, &self.buf)?;
        self.file.chunks.push(Chunk {
            first_page,
            pages: pages as u64,
            records: self.in_buf as u64,
        });
        self.file.records += self.in_buf as u64;
        self.in_buf = 0;
        Ok(())
    }

    /// Flushes and returns the file and the buffer (for the budget).
    pub fn finish(
        mut self,
        dev: &mut dyn BlockDevice,
        temp: &mut TempSpace,
    ) -> Result<(SpillFile, PageBuf)> {
        self.flush(dev, temp)?;
        Ok((self.file, self.buf))
    }
}

/// Where join input records come from: a base table (projected on the fly) or a spill file.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Table(&'a Table),
    Spill(&'a SpillFile),
}

impl Source<'_> {
    pub fn records(&self) -> u64 {
        match self {
            Source::Table(t) => t.layout.rows,
            Source::Spill(f) => f.records,
        }
    }
}

/// Reads every record of `source` in order through `buf`, handing the first `record_bytes`
/// bytes of each tuple (the projection) or each spilled record to `f`.
pub fn scan_records(
    dev: &mut dyn BlockDevice,
    source: Source<'_>,
    record_bytes: usize,
    buf: &mut PageBuf,
    mut f: impl FnMut(&mut dyn BlockDevice, &[u8]) -> Result<()>,
) -> Result<()> {
    let extent = buf.pages() as u64;
    match source {
        Source::Table(table) => {
            let layout = table.layout;
            let pages = table.pages();
            let mut page = 0;
            while page < pages {
                let count = (pages - page).min(extent) as usize;
                dev.read_pages(table.first_page + page, count, buf)?;
                for p in 0..count {
                    let first_rowid = (page + p as u64) * layout.tuples_per_page as u64;
                    let n = (layout.rows - first_rowid).min(layout.tuples_per_page as u64);
                    for slot in 0..n as usize {
                        let at = slot * layout.tuple_bytes;
                        f(dev, &buf.page(p)[at..at + record_bytes])?;
                    }
                }
                page += count as u64;
            }
        }
        Source::Spill(file) => {
            let rpp = records_per_page(record_bytes) as u64;
            for chunk in &file.chunks {
                let mut page = 0;
                while page < chunk.pages {
                    let count = (chunk.pages - page).min(extent) as usize;
                    dev.read_pages(chunk.first_page + page, count, buf)?;
                    for p in 0..count {
                        let before = (page + p as u64) * rpp;
                        let n = (chunk.records - before).min(rpp) as usize;
                        for slot in 0..n {
                            let at = slot * record_bytes;
                            f(dev, &buf.page(p)[at..at + record_bytes])?;
                        }
                    }
                    page += count as u64;
                }
            }
        }
    }
    Ok(())
}

/// Reads a spill file record by record through a buffer of a few pages (a merge input).
pub struct Cursor<'a> {
    file: &'a SpillFile,
    buf: PageBuf,
    record_bytes: usize,
    chunk: usize,
    /// Next page of the chunk to load.
    next_page: u64,
    /// Records loaded in the buffer and the position among them.
    loaded: usize,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor positioned on the first record (if any).
    pub fn open(
        dev: &mut dyn BlockDevice,
        file: &'a SpillFile,
        buf: PageBuf,
        record_bytes: usize,
    ) -> Result<Cursor<'a>> {
        let mut c = Cursor { file, buf, record_bytes, chunk: 0, next_page: 0, loaded: 0, pos: 0 };
        c.refill(dev)?;
        Ok(c)
    }

    fn refill(&mut self, dev: &mut dyn BlockDevice) -> Result<()> {
        self.pos = 0;
        self.loaded = 0;
        while self.chunk < self.file.chunks.len() {
            let chunk = self.file.chunks[self.chunk];
            if self.next_page == chunk.pages {
                self.chunk += 1;
                self.next_page = 0;
                continue;
            }
            let count = (chunk.pages - self.next_page).min(self.buf.pages() as u64) as usize;
            dev.read_pages(chunk.first_page + self.next_page, count, &mut self.buf)?;
            let rpp = records_per_page(self.record_bytes) as u64;
            let before = self.next_page * rpp;
            self.loaded = (chunk.records - before).min(count as u64 * rpp) as usize;
            self.next_page += count as u64;
            return Ok(());
        }
        Ok(())
    }

    /// The current record, `None` at the end.
    pub fn current(&self) -> Option<&[u8]> {
        if self.pos >= self.loaded {
            return None;
        }
        let rpp = records_per_page(self.record_bytes);
        let at = (self.pos % rpp) * self.record_bytes;
        Some(&self.buf.page(self.pos / rpp)[at..at + self.record_bytes])
    }

    pub fn advance(&mut self, dev: &mut dyn BlockDevice) -> Result<()> {
        self.pos += 1;
        if self.pos >= self.loaded {
            self.refill(dev)?;
        }
        Ok(())
    }

    pub fn into_buf(self) -> PageBuf {
        self.buf
    }
}

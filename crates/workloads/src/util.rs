//! What the workloads share: fixed-offset row codecs, table creation and lookup, the batched
//! loader, the conflict-retry loop every worker runs its transactions in, and the chunked scans
//! checkers read whole tables with (docs/design.md §5).
//!
//! Invariant: a transaction body is re-run with exactly the parameters it was first given, so a
//! retried conflict never changes the input stream of a worker.

use crate::generators::WorkerRng;
use rand::Rng;
use storage::{CommitToken, DbError, Engine, TableId, TableSpec, Txn};

pub(crate) fn get_u64(row: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&row[off..off + 8]);
    u64::from_le_bytes(a)
}

pub(crate) fn get_i64(row: &[u8], off: usize) -> i64 {
    get_u64(row, off) as i64
}

pub(crate) fn get_u32(row: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&row[off..off + 4]);
    u32::from_le_bytes(a)
}

pub(crate) fn put_u64(row: &mut [u8], off: usize, v: u64) {
    row[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_i64(row: &mut [u8], off: usize, v: i64) {
    put_u64(row, off, v as u64);
}

pub(crate) fn put_u32(row: &mut [u8], off: usize, v: u32) {
    row[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// Fills `buf` with random lower-case letters (TPC's a-strings; the slight modulo bias is
/// irrelevant for filler).
pub(crate) fn fill_letters(rng: &mut WorkerRng, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let r = rng.gen::<u64>().to_le_bytes();
        for (b, x) in chunk.iter_mut().zip(r) {
            *b = b'a' + x % 26;
        }
    }
}

/// Fills `buf` with random decimal digits (TPC's n-strings).
pub(crate) fn fill_digits(rng: &mut WorkerRng, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let r = rng.gen::<u64>().to_le_bytes();
        for (b, x) in chunk.iter_mut().zip(r) {
            *b = b'0' + x % 10;
        }
    }
}

/// The bytes an `inplace` database of these tables takes, `(row bytes, rows)` each: the rows
/// plus a quarter for slot headers, half-full heap pages and the indexes (YCSB's measured
/// 1.17x, rounded up), as [`crate::Workload::estimated_bytes`] reports it.
pub(crate) fn estimate_bytes(tables: impl IntoIterator<Item = (u32, u64)>) -> u64 {
    let rows: u64 = tables
        .into_iter()
        .map(|(row, n)| n.saturating_mul(u64::from(row) + 16))
        .fold(0, u64::saturating_add);
    rows.saturating_mul(5) / 4
}

/// Creates a table for a loader.
pub(crate) fn create_table(
    engine: &dyn Engine,
    name: &str,
    row_bytes: u32,
    expected_rows: u64,
) -> Result<TableId, DbError> {
    engine.create_table(&TableSpec { name: name.to_string(), row_bytes, expected_rows })
}

/// Looks a table up by name and checks its row size, so a database loaded by another workload
/// configuration is a clear error.
pub(crate) fn lookup_table(
    engine: &dyn Engine,
    name: &str,
    row_bytes: u32,
) -> Result<TableId, DbError> {
    let id = engine.table(name).ok_or_else(|| {
        DbError::Invalid(format!("table {name} does not exist: load the workload first"))
    })?;
    let specs = engine.tables();
    match specs.get(id as usize) {
        Some(spec) if spec.row_bytes == row_bytes => Ok(id),
        Some(spec) => Err(DbError::Format(format!(
            "table {name} has {}-byte rows, this workload configuration expects {row_bytes}: \
             it was loaded with different options",
            spec.row_bytes
        ))),
        None => Err(DbError::Corrupt(format!("engine lists no spec for table {name} (id {id})"))),
    }
}

/// Reads a row and checks its size, so fixed-offset decoding below cannot go out of bounds.
pub(crate) fn read_row(
    txn: &mut dyn Txn,
    table: TableId,
    key: u64,
    out: &mut Vec<u8>,
    row_bytes: usize,
) -> Result<bool, DbError> {
    checked_size(txn.read(table, key, out)?, table, key, out, row_bytes)
}

/// [`read_existing`], through [`Txn::read_for_update`] when `for_update` (the caller updates
/// the row next: an engine with key locks locks it exclusively before reading, as a DBMS
/// executes `UPDATE ... SET balance = balance + delta`).
pub(crate) fn read_existing_to_update(
    txn: &mut dyn Txn,
    for_update: bool,
    table: TableId,
    key: u64,
    out: &mut Vec<u8>,
    row_bytes: usize,
    what: &str,
) -> Result<(), DbError> {
    let found =
        if for_update { txn.read_for_update(table, key, out)? } else { txn.read(table, key, out)? };
    if checked_size(found, table, key, out, row_bytes)? {
        Ok(())
    } else {
        Err(DbError::Corrupt(format!("{what} (table {table} key {key}) is missing")))
    }
}

fn checked_size(
    found: bool,
    table: TableId,
    key: u64,
    out: &[u8],
    row_bytes: usize,
) -> Result<bool, DbError> {
    if !found {
        return Ok(false);
    }
    if out.len() != row_bytes {
        return Err(DbError::Corrupt(format!(
            "table {table} key {key}: read {} bytes, rows are {row_bytes}",
            out.len()
        )));
    }
    Ok(true)
}

/// Reads a row that a consistent database must hold.
pub(crate) fn read_existing(
    txn: &mut dyn Txn,
    table: TableId,
    key: u64,
    out: &mut Vec<u8>,
    row_bytes: usize,
    what: &str,
) -> Result<(), DbError> {
    read_existing_to_update(txn, false, table, key, out, row_bytes, what)
}

/// Updates a row that a consistent database must hold.
pub(crate) fn update_existing(
    txn: &mut dyn Txn,
    table: TableId,
    key: u64,
    offset: u32,
    bytes: &[u8],
    what: &str,
) -> Result<(), DbError> {
    if txn.update(table, key, offset, bytes)? {
        Ok(())
    } else {
        Err(DbError::Corrupt(format!("{what} (table {table} key {key}) vanished during update")))
    }
}

/// Rows per load transaction: engines bound their per-transaction undo logs.
pub(crate) const LOAD_BATCH_ROWS: usize = 200;
/// Attempts at one load batch before a conflict is reported (loading is single-threaded, so a
/// conflict means someone else is using the database).
const LOAD_MAX_ATTEMPTS: u32 = 100;
/// Batches between progress reports.
const PROGRESS_EVERY_BATCHES: u64 = 32;

/// Inserts rows in transactions of at most [`LOAD_BATCH_ROWS`] rows, reporting progress.
pub(crate) struct Loader<'a> {
    engine: &'a dyn Engine,
    progress: &'a (dyn Fn(u64, u64) + Sync),
    total: u64,
    done: u64,
    batches: u64,
    rows: Vec<(TableId, u64, Vec<u8>)>,
    len: usize,
    /// Latest commit token; `finish` waits for it once, rather than every batch waiting for its
    /// own (a group-commit engine would make each wait last a whole batch period).
    last_token: Option<CommitToken>,
}

impl<'a> Loader<'a> {
    pub fn new(
        engine: &'a dyn Engine,
        progress: &'a (dyn Fn(u64, u64) + Sync),
        total_rows: u64,
    ) -> Self {
        progress(0, total_rows);
        Loader {
            engine,
            progress,
            total: total_rows,
            done: 0,
            batches: 0,
            rows: Vec::with_capacity(LOAD_BATCH_ROWS),
            len: 0,
            last_token: None,
        }
    }

    pub fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<(), DbError> {
        if self.len == self.rows.len() {
            self.rows.push((table, key, Vec::with_capacity(row.len())));
        }
        let slot = &mut self.rows[self.len];
        slot.0 = table;
        slot.1 = key;
        slot.2.clear();
        slot.2.extend_from_slice(row);
        self.len += 1;
        if self.len >= LOAD_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), DbError> {
        if self.len == 0 {
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_flush() {
                Ok(()) => break,
                Err(e) if e.is_retryable() && attempt < LOAD_MAX_ATTEMPTS => {
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        }
        self.done += self.len as u64;
        self.len = 0;
        self.batches += 1;
        if self.batches.is_multiple_of(PROGRESS_EVERY_BATCHES) {
            // Totals of random populations (TPC-C's order lines) are estimates.
            self.total = self.total.max(self.done);
            (self.progress)(self.done, self.total);
        }
        Ok(())
    }

    fn try_flush(&mut self) -> Result<(), DbError> {
        let mut txn = self.engine.begin(0)?;
        for (table, key, row) in &self.rows[..self.len] {
            if let Err(e) = txn.insert(*table, *key, row) {
                let _ = txn.abort();
                return Err(e);
            }
        }
        let token = txn.commit()?;
        self.last_token = self.last_token.max(Some(token));
        Ok(())
    }

    /// Commits the last batch and waits until the whole load is durable, so "loaded" means
    /// "survives a crash" (commit tokens are ordered: the last one durable implies the rest).
    pub fn finish(mut self) -> Result<(), DbError> {
        self.flush()?;
        if let Some(token) = self.last_token {
            self.engine.wait_durable(token)?;
        }
        (self.progress)(self.done, self.total.max(self.done));
        Ok(())
    }
}

/// How a transaction body ended.
pub(crate) enum Outcome<T> {
    /// Wrote something: commit and hand the token to the driver.
    Commit(T),
    /// Wrote nothing: commit to release locks; there is nothing to make durable.
    ReadOnly(T),
    /// Rolled back by design (TPC-C's invalid item, TATP's missing rows).
    Rollback(T),
}

/// What [`Retrier::run`] returns.
pub(crate) struct Finished<T> {
    pub token: Option<CommitToken>,
    pub retries: u32,
    pub value: T,
}

/// Runs transaction bodies, retrying retryable errors with randomized exponential back-off.
pub(crate) struct Retrier {
    max_retries: u32,
    rng: WorkerRng,
}

/// Back-off units are this many spin-loop hints; the window doubles per attempt up to 2^10.
const BACKOFF_SPINS_PER_UNIT: u64 = 32;
const BACKOFF_MAX_SHIFT: u32 = 10;

impl Retrier {
    pub fn new(max_retries: u32, seed: u64, worker: usize) -> Self {
        // A separate stream from the parameters: back-off draws depend on how many conflicts
        // happened, and must not shift the worker's transaction inputs.
        Retrier { max_retries, rng: WorkerRng::for_worker(seed, worker, 0xbac0ff) }
    }

    pub fn run<T>(
        &mut self,
        engine: &dyn Engine,
        worker: usize,
        mut body: impl FnMut(&mut dyn Txn) -> Result<Outcome<T>, DbError>,
    ) -> Result<Finished<T>, DbError> {
        let mut retries = 0;
        loop {
            let result = self.attempt(engine, worker, &mut body);
            match result {
                Ok((token, value)) => return Ok(Finished { token, retries, value }),
                Err(e) if e.is_retryable() && retries < self.max_retries => {
                    retries += 1;
                    self.backoff(retries);
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn attempt<T>(
        &mut self,
        engine: &dyn Engine,
        worker: usize,
        body: &mut impl FnMut(&mut dyn Txn) -> Result<Outcome<T>, DbError>,
    ) -> Result<(Option<CommitToken>, T), DbError> {
        let mut txn = engine.begin(worker)?;
        match body(&mut *txn) {
            Ok(Outcome::Commit(v)) => Ok((Some(txn.commit()?), v)),
            Ok(Outcome::ReadOnly(v)) => {
                txn.commit()?;
                Ok((None, v))
            }
            Ok(Outcome::Rollback(v)) => {
                txn.abort()?;
                Ok((None, v))
            }
            Err(e) => {
                // The body's error is the one worth reporting; an abort failure after it adds
                // nothing the caller can act on.
                let _ = txn.abort();
                Err(e)
            }
        }
    }

    fn backoff(&mut self, attempt: u32) {
        let window = 1u64 << attempt.min(BACKOFF_MAX_SHIFT);
        let spins = self.rng.gen_range(0..window) * BACKOFF_SPINS_PER_UNIT;
        for _ in 0..spins {
            std::hint::spin_loop();
        }
        if attempt > 2 {
            std::thread::yield_now();
        }
    }
}

/// Rows per read-only transaction in [`scan_table`]: checkers read whole tables, and one
/// transaction locking millions of keys would be unkind to any engine.
const SCAN_CHUNK_ROWS: usize = 1024;
const SCAN_MAX_ATTEMPTS: u32 = 1000;

/// A checker's per-row callback: `Err` stops the scan with that violation.
pub(crate) type RowCheck<'a> = dyn FnMut(u64, &[u8]) -> Result<(), String> + 'a;

/// Visits every row with `low <= key <= high` in key order, in chunks of short read-only
/// transactions (checkers run on a quiesced database, so chunks see one state). `visit` may stop
/// the scan with an error, which is returned.
pub(crate) fn scan_table(
    engine: &dyn Engine,
    table: TableId,
    low: u64,
    high: u64,
    visit: &mut RowCheck<'_>,
) -> Result<u64, String> {
    let mut cursor = low;
    let mut keys: Vec<u64> = Vec::with_capacity(SCAN_CHUNK_ROWS);
    let mut data: Vec<u8> = Vec::new();
    let mut row_bytes = 0usize;
    let mut total = 0u64;
    loop {
        if cursor > high {
            return Ok(total);
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            keys.clear();
            data.clear();
            let r = scan_chunk(engine, table, cursor, high, &mut keys, &mut data, &mut row_bytes);
            match r {
                Ok(()) => break,
                Err(e) if e.is_retryable() && attempt < SCAN_MAX_ATTEMPTS => {
                    std::thread::yield_now();
                }
                Err(e) => return Err(format!("scanning table {table}: {e}")),
            }
        }
        for (i, key) in keys.iter().enumerate() {
            visit(*key, &data[i * row_bytes..(i + 1) * row_bytes])?;
        }
        total += keys.len() as u64;
        match keys.last() {
            Some(&last) if keys.len() == SCAN_CHUNK_ROWS && last < high => cursor = last + 1,
            _ => return Ok(total),
        }
    }
}

fn scan_chunk(
    engine: &dyn Engine,
    table: TableId,
    low: u64,
    high: u64,
    keys: &mut Vec<u64>,
    data: &mut Vec<u8>,
    row_bytes: &mut usize,
) -> Result<(), DbError> {
    let mut txn = engine.begin(0)?;
    let mut bad: Option<(u64, usize)> = None;
    let r = txn.scan(table, low, high, SCAN_CHUNK_ROWS, &mut |key, row| {
        if keys.is_empty() && *row_bytes == 0 {
            *row_bytes = row.len();
        }
        if row.len() != *row_bytes {
            bad = Some((key, row.len()));
            return false;
        }
        keys.push(key);
        data.extend_from_slice(row);
        true
    });
    if let Err(e) = r {
        let _ = txn.abort();
        return Err(e);
    }
    txn.commit()?;
    match bad {
        Some((key, len)) => Err(DbError::Corrupt(format!(
            "table {table} key {key}: scan returned {len} bytes, other rows have {row_bytes}"
        ))),
        None => Ok(()),
    }
}

/// Reads one row for a checker, in its own transaction.
pub(crate) fn check_read(
    engine: &dyn Engine,
    table: TableId,
    key: u64,
    out: &mut Vec<u8>,
) -> Result<bool, String> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let r = (|| -> Result<bool, DbError> {
            let mut txn = engine.begin(0)?;
            let found = match txn.read(table, key, out) {
                Ok(f) => f,
                Err(e) => {
                    let _ = txn.abort();
                    return Err(e);
                }
            };
            txn.commit()?;
            Ok(found)
        })();
        match r {
            Ok(found) => return Ok(found),
            Err(e) if e.is_retryable() && attempt < SCAN_MAX_ATTEMPTS => std::thread::yield_now(),
            Err(e) => return Err(format!("reading table {table} key {key}: {e}")),
        }
    }
}

/// Bits of a per-worker sequence key below the worker prefix (history tables of TPC-B/TPC-C):
/// key = `(worker + 1) << SEQ_BITS | seq`, with prefix 0 for rows the loader wrote.
pub(crate) const SEQ_BITS: u32 = 40;
pub(crate) const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

pub(crate) fn seq_key(prefix: u64, seq: u64) -> u64 {
    (prefix << SEQ_BITS) | (seq & SEQ_MASK)
}

/// The first unused sequence number of `prefix` in `table`: sequences are contiguous from 0
/// (the checkers verify it), so a galloping search with point reads finds the end in
/// O(log n) reads without a reverse scan.
pub(crate) fn next_seq(
    engine: &dyn Engine,
    worker: usize,
    retrier: &mut Retrier,
    table: TableId,
    prefix: u64,
) -> Result<u64, DbError> {
    let mut buf = Vec::new();
    let found = retrier.run(engine, worker, |txn| {
        let mut exists = |seq: u64| txn.read(table, seq_key(prefix, seq), &mut buf);
        if !exists(0)? {
            return Ok(Outcome::ReadOnly(0));
        }
        let (mut lo, mut hi) = (0u64, 1u64);
        while hi < SEQ_MASK && exists(hi)? {
            lo = hi;
            hi = (hi * 2).min(SEQ_MASK);
        }
        // Invariant: lo exists, hi does not.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if exists(mid)? {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(Outcome::ReadOnly(hi))
    })?;
    Ok(found.value)
}

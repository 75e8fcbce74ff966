//! SQLite peer: stock SQLite with its WAL journal, the baseline of NVWAL (Kim et al., ASPLOS
//! 2016, §2). Each nvmdb table is an SQL table `(k INTEGER PRIMARY KEY, row BLOB)`; every
//! worker has its own connection with cached prepared statements. Connections are opened in one
//! place, [`open_connection`], which takes a VFS name: the seam for an NVRAM WAL VFS later.
//!
//! **One writer.** Writers are serialised by the engine's writer gate (not by SQLite's busy
//! handler, whose sleeps are coarse): a transaction begins lazily, with `BEGIN IMMEDIATE` if its
//! first operation writes, else `BEGIN DEFERRED` (a WAL read snapshot); its first write takes the
//! gate, failing retryably if another writer committed since its snapshot (SQLite would report
//! `SQLITE_BUSY_SNAPSHOT` there). Readers never wait. A partial update is a read-modify-write of
//! the row's blob.
//!
//! Keys: `u64` keys are stored as `i64` with the top bit flipped, which keeps their order.
//!
//! Recovery invariant (SQLite's): a commit is in the database once its commit frame is in the
//! WAL; on open SQLite rebuilds the WAL index and ignores frames after the last valid commit.

use parking_lot::Mutex;
use peer_common::{
    claim_dir, peer_error, Catalog, CommitClock, DirClaim, TableRef, WriterGate, WriterGuard,
};
use peer_common::{PeerDurability, PeerOptions};
use rusqlite::{params, Connection, ErrorCode, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage::{
    CommitToken, DbError, Engine, IntegrityReport, IntegrityResult, RecoveryReport, Result,
    TableId, TableSpec, Txn,
};

const ENGINE: &str = "sqlite";
const DB_FILE: &str = "sqlite.db";
/// Prepared statements kept per connection: a handful per table plus the fixed ones.
const STATEMENT_CACHE: usize = 512;

/// Maps a `u64` key to the `i64` SQLite stores, preserving order.
fn to_sql(key: u64) -> i64 {
    (key ^ (1 << 63)) as i64
}

fn from_sql(key: i64) -> u64 {
    (key as u64) ^ (1 << 63)
}

fn err(e: rusqlite::Error) -> DbError {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => peer_error(ENGINE, e, true),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            DbError::Corrupt(format!("sqlite: {e}"))
        }
        Some(ErrorCode::DiskFull) => DbError::RegionFull(format!("sqlite: {e}")),
        _ => peer_error(ENGINE, e, false),
    }
}

/// Opens one connection to the database at `path`, through `vfs` (`None`: SQLite's default),
/// in WAL mode with the synchronous level of `durability` and cache of `cache_bytes`.
pub fn open_connection(
    path: &Path,
    vfs: Option<&str>,
    durability: PeerDurability,
    busy_wait: Duration,
    cache_bytes: u64,
) -> Result<Connection> {
    let flags = OpenFlags::default();
    let conn = match vfs {
        Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
        None => Connection::open_with_flags(path, flags),
    }
    .map_err(err)?;
    conn.busy_timeout(busy_wait).map_err(err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(DbError::Invalid(format!(
            "sqlite: journal_mode=WAL was refused (mode is {mode}); the VFS must support WAL"
        )));
    }
    let synchronous = match durability {
        PeerDurability::Durable => "FULL",
        PeerDurability::Relaxed => "NORMAL",
    };
    // Negative cache_size is in KiB.
    let cache_kib = (cache_bytes / 1024).max(64);
    conn.execute_batch(&format!(
        "PRAGMA synchronous={synchronous}; PRAGMA cache_size=-{cache_kib};"
    ))
    .map_err(err)?;
    Ok(conn)
}

/// SQL text of one table's statements (prepared and cached per connection on first use).
struct TableSql {
    name: String,
    select: String,
    insert: String,
    update: String,
    delete: String,
    scan: String,
}

impl TableSql {
    fn new(id: TableId) -> Self {
        let t = format!("t{id}");
        TableSql {
            select: format!("SELECT row FROM {t} WHERE k = ?1"),
            insert: format!("INSERT INTO {t} (k, row) VALUES (?1, ?2)"),
            update: format!("UPDATE {t} SET row = ?2 WHERE k = ?1"),
            delete: format!("DELETE FROM {t} WHERE k = ?1"),
            scan: format!("SELECT k, row FROM {t} WHERE k BETWEEN ?1 AND ?2 ORDER BY k LIMIT ?3"),
            name: t,
        }
    }
}

pub struct SqliteEngine {
    path: PathBuf,
    /// For table creation, syncs and checks; always `synchronous=FULL`.
    admin: Mutex<Connection>,
    workers: Vec<Mutex<Connection>>,
    catalog: Catalog<TableSql>,
    gate: WriterGate,
    clock: CommitClock,
    report: RecoveryReport,
    /// The engine's name: `sqlite`, or the name of an engine built on this one through a VFS.
    name: &'static str,
    /// Held while the engine is open; after the fields above, so released after they close.
    /// `None` for a database that lives behind a VFS rather than in a directory.
    _claim: Option<DirClaim>,
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS nvmdb_catalog (id INTEGER PRIMARY KEY, spec BLOB NOT NULL);
    CREATE TABLE IF NOT EXISTS nvmdb_sync (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
    INSERT OR IGNORE INTO nvmdb_sync (id, n) VALUES (0, 0);
";

impl SqliteEngine {
    /// Opens or creates the database in `dir`.
    pub fn open(dir: &Path, options: &PeerOptions) -> Result<Self> {
        let claim = claim_dir(dir, ENGINE)?;
        let path = dir.join(DB_FILE);
        let formatted = !path.exists();
        let wal_bytes =
            std::fs::metadata(dir.join(format!("{DB_FILE}-wal"))).map_or(0, |m| m.len());
        Self::open_at(path, Some(claim), formatted, wal_bytes, ENGINE, options)
    }

    /// Opens or creates the database `path` names inside the VFS `options.sqlite_vfs` (which
    /// must be set), as engine `name`: no directory is claimed (the VFS owns the storage and
    /// its exclusion). `formatted`: the VFS made the storage now; `leftover_wal_bytes`: the WAL
    /// the VFS recovered, for the report.
    pub fn open_on_vfs(
        path: &Path,
        name: &'static str,
        formatted: bool,
        leftover_wal_bytes: u64,
        options: &PeerOptions,
    ) -> Result<Self> {
        if options.sqlite_vfs.is_none() {
            return Err(DbError::Invalid(format!("{name}: open_on_vfs needs a VFS name")));
        }
        Self::open_at(path.to_path_buf(), None, formatted, leftover_wal_bytes, name, options)
    }

    fn open_at(
        path: PathBuf,
        claim: Option<DirClaim>,
        formatted: bool,
        wal_bytes: u64,
        name: &'static str,
        options: &PeerOptions,
    ) -> Result<Self> {
        let started = Instant::now();
        let vfs = options.sqlite_vfs.as_deref();
        let per_conn_cache = options.cache_bytes / (options.workers as u64 + 1);
        let connect = |durability| {
            open_connection(&path, vfs, durability, options.writer_wait, per_conn_cache)
        };
        // The admin connection opens first: its first read runs WAL recovery, timed here.
        let admin = connect(PeerDurability::Durable)?;
        admin.execute_batch(SCHEMA).map_err(err)?;
        let tables = load_catalog(&admin)?;
        let workers = (0..options.workers)
            .map(|_| connect(options.durability).map(Mutex::new))
            .collect::<Result<_>>()?;
        let mut notes = vec![format!("{} tables", tables.len())];
        if wal_bytes > 0 {
            // A clean close checkpoints and deletes the WAL: one left over means a crash.
            notes.push(format!(
                "found a {wal_bytes}-byte WAL from an unclean shutdown; SQLite rebuilt its index \
                 on the first read"
            ));
        }
        let report = RecoveryReport {
            formatted,
            duration: started.elapsed(),
            notes,
            ..RecoveryReport::default()
        };
        Ok(SqliteEngine {
            path,
            admin: Mutex::new(admin),
            workers,
            catalog: Catalog::new(tables),
            gate: WriterGate::new(ENGINE, options.writer_wait),
            clock: CommitClock::new(options.durability == PeerDurability::Relaxed),
            report,
            name,
            _claim: claim,
        })
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes every commit so far durable: a commit on the `synchronous=FULL` admin connection
    /// fsyncs the WAL file, and with it every frame before it.
    fn sync(&self) -> Result<()> {
        let writer = self.gate.acquire(None)?;
        let admin = self.admin.lock();
        if let Err(e) = admin.execute_batch("BEGIN IMMEDIATE; UPDATE nvmdb_sync SET n = n + 1;") {
            rollback_if_open(&admin);
            return Err(err(e));
        }
        end(&admin, "COMMIT")?;
        writer.committed();
        Ok(())
    }
}

fn load_catalog(conn: &Connection) -> Result<Vec<(TableSpec, TableSql)>> {
    let mut stmt = conn.prepare("SELECT id, spec FROM nvmdb_catalog ORDER BY id").map_err(err)?;
    let rows =
        stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))).map_err(err)?;
    let mut tables = Vec::new();
    for row in rows {
        let (id, spec) = row.map_err(err)?;
        if id != tables.len() as i64 {
            return Err(DbError::Corrupt(format!("sqlite: catalog ids not dense at {id}")));
        }
        let spec = peer_common::decode_spec(&spec)?;
        tables.push((spec, TableSql::new(id as TableId)));
    }
    Ok(tables)
}

impl Engine for SqliteEngine {
    fn name(&self) -> &str {
        self.name
    }

    peer_common::peer_engine_methods!(durable_by: sync);

    fn create_table(&self, spec: &TableSpec) -> Result<TableId> {
        self.catalog.create(spec, |id| {
            let sql = TableSql::new(id);
            let encoded = peer_common::encode_spec(spec)?;
            let writer = self.gate.acquire(None)?;
            let admin = self.admin.lock();
            let create = || -> rusqlite::Result<()> {
                admin.execute_batch("BEGIN IMMEDIATE")?;
                admin.execute(
                    &format!(
                        "CREATE TABLE {} (k INTEGER PRIMARY KEY, row BLOB NOT NULL)",
                        sql.name
                    ),
                    [],
                )?;
                admin.execute(
                    "INSERT INTO nvmdb_catalog (id, spec) VALUES (?1, ?2)",
                    params![id as i64, encoded],
                )?;
                Ok(())
            };
            if let Err(e) = create() {
                rollback_if_open(&admin);
                return Err(err(e));
            }
            end(&admin, "COMMIT")?;
            writer.committed();
            Ok(sql)
        })
    }

    fn begin(&self, worker: usize) -> Result<Box<dyn Txn + '_>> {
        let Some(conn) = self.workers.get(worker) else {
            return Err(DbError::Invalid(format!(
                "worker {worker} out of range: the engine was opened for {} workers",
                self.workers.len()
            )));
        };
        let Some(conn) = conn.try_lock() else {
            return Err(DbError::Invalid(format!(
                "worker {worker} already has an open transaction"
            )));
        };
        Ok(Box::new(SqliteTxn { engine: self, conn, state: State::Idle }))
    }

    fn check_integrity(&self) -> IntegrityResult {
        let admin = self.admin.lock();
        let problems: Vec<String> = admin
            .prepare("PRAGMA integrity_check")
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| format!("sqlite: integrity_check: {e}"))?;
        if problems.first().map(String::as_str) != Some("ok") {
            return Err(format!("sqlite: integrity_check: {}", problems.join("; ")));
        }
        let mut report = IntegrityReport::default();
        let count = |sql: &str| -> std::result::Result<u64, String> {
            admin
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(|e| format!("sqlite: {sql}: {e}"))
        };
        for (id, spec) in self.catalog.specs().iter().enumerate() {
            let t = format!("t{id}");
            let wrong = count(&format!(
                "SELECT count(*) FROM {t} WHERE typeof(row) != 'blob' OR length(row) != {}",
                spec.row_bytes
            ))?;
            if wrong > 0 {
                return Err(format!("sqlite: table {}: {wrong} rows of the wrong size", spec.name));
            }
            report.rows += count(&format!("SELECT count(*) FROM {t}"))?;
            report.tables += 1;
        }
        let pages = count("PRAGMA page_count")?;
        report.pages_free = count("PRAGMA freelist_count")?;
        report.pages_in_use = pages.saturating_sub(report.pages_free);
        Ok(report)
    }

    fn shutdown(&self) -> Result<()> {
        let writer = self.gate.acquire(None)?;
        let admin = self.admin.lock();
        // TRUNCATE checkpoints the whole WAL into the database file, fsyncs it, and empties the
        // WAL; `busy` = 1 means open read transactions kept it from finishing.
        let (busy, _, _): (i64, i64, i64) = admin
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(err)?;
        drop(writer);
        if busy != 0 {
            return Err(peer_error(
                ENGINE,
                "shutdown: open transactions blocked the final checkpoint; end them first",
                true,
            ));
        }
        self.clock.all_durable();
        Ok(())
    }
}

enum State<'a> {
    /// No statement run yet (SQLite is in autocommit mode).
    Idle,
    /// `BEGIN DEFERRED` run: reading a snapshot; `stamp` is the writer gate's count before it.
    Reading { stamp: u64 },
    /// Holding the writer gate inside a write transaction.
    Writing(WriterGuard<'a>),
}

struct SqliteTxn<'a> {
    engine: &'a SqliteEngine,
    conn: parking_lot::MutexGuard<'a, Connection>,
    state: State<'a>,
}

impl<'a> SqliteTxn<'a> {
    fn run(&self, sql: &str) -> Result<()> {
        self.conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map(drop).map_err(err)
    }

    fn before_read(&mut self) -> Result<()> {
        if let State::Idle = self.state {
            let stamp = self.engine.gate.stamp();
            self.run("BEGIN DEFERRED")?;
            self.state = State::Reading { stamp };
        }
        Ok(())
    }

    fn before_write(&mut self) -> Result<()> {
        match self.state {
            State::Idle => {
                let guard = self.engine.gate.acquire(None)?;
                self.run("BEGIN IMMEDIATE")?;
                self.state = State::Writing(guard);
            }
            State::Reading { stamp } => {
                self.state = State::Writing(self.engine.gate.acquire(Some(stamp))?);
            }
            State::Writing(_) => {}
        }
        Ok(())
    }

    fn table(&self, table: TableId) -> Result<TableRef<'a, TableSql>> {
        self.engine.catalog.get(table)
    }

    /// Reads the row of `key` into `out`; false if absent.
    fn fetch(&self, sql: &TableSql, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let mut stmt = self.conn.prepare_cached(&sql.select).map_err(err)?;
        let mut rows = stmt.query([to_sql(key)]).map_err(err)?;
        match rows.next().map_err(err)? {
            Some(row) => {
                let blob = row.get_ref(0).map_err(err)?.as_blob().map_err(|e| {
                    DbError::Corrupt(format!("sqlite: {} key {key}: {e}", sql.name))
                })?;
                out.extend_from_slice(blob);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Commits (`commit`) or rolls back the SQLite transaction if one is open, and releases the
    /// writer gate after it. Returns whether the transaction wrote.
    fn finish(&mut self, commit: bool) -> Result<bool> {
        let sql = if commit { "COMMIT" } else { "ROLLBACK" };
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle => Ok(false),
            State::Reading { .. } => end(&self.conn, sql).map(|()| false),
            State::Writing(guard) => {
                end(&self.conn, sql)?;
                if commit {
                    guard.committed();
                }
                Ok(true)
            }
        }
    }
}

/// Runs `COMMIT` or `ROLLBACK`; if that fails and leaves the transaction open, rolls it back so
/// the connection (and the writer gate, released after) is clean for the next transaction.
fn end(conn: &Connection, sql: &str) -> Result<()> {
    let result = conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map(drop).map_err(err);
    if result.is_err() {
        rollback_if_open(conn);
    }
    result
}

/// Rolls back the connection's transaction if one is still open after an error.
fn rollback_if_open(conn: &Connection) {
    if !conn.is_autocommit() {
        // Best effort: the rollback's own failure would hide the error that matters.
        let _ = conn.execute_batch("ROLLBACK");
    }
}

impl Txn for SqliteTxn<'_> {
    fn read(&mut self, table: TableId, key: u64, out: &mut Vec<u8>) -> Result<bool> {
        out.clear();
        let t = self.table(table)?;
        self.before_read()?;
        self.fetch(t.handle(), key, out)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        t.check_row(row)?;
        self.before_write()?;
        let mut stmt = self.conn.prepare_cached(&t.handle().insert).map_err(err)?;
        match stmt.execute(params![to_sql(key), row]) {
            Ok(_) => Ok(()),
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                Err(DbError::Duplicate { table, key })
            }
            Err(e) => Err(err(e)),
        }
    }

    fn update(&mut self, table: TableId, key: u64, offset: u32, bytes: &[u8]) -> Result<bool> {
        let t = self.table(table)?;
        t.check_update(offset, bytes.len())?;
        self.before_write()?;
        let mut row = Vec::with_capacity(t.spec().row_bytes as usize);
        if !self.fetch(t.handle(), key, &mut row)? {
            return Ok(false);
        }
        let start = offset as usize;
        let Some(target) = row.get_mut(start..start + bytes.len()) else {
            return Err(DbError::Corrupt(format!(
                "sqlite: table {table} key {key}: stored row has {} bytes",
                row.len()
            )));
        };
        target.copy_from_slice(bytes);
        let mut stmt = self.conn.prepare_cached(&t.handle().update).map_err(err)?;
        stmt.execute(params![to_sql(key), row]).map_err(err)?;
        Ok(true)
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<bool> {
        let t = self.table(table)?;
        self.before_write()?;
        let mut stmt = self.conn.prepare_cached(&t.handle().delete).map_err(err)?;
        Ok(stmt.execute([to_sql(key)]).map_err(err)? > 0)
    }

    fn scan(
        &mut self,
        table: TableId,
        low: u64,
        high: u64,
        limit: usize,
        visit: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.table(table)?;
        if low > high || limit == 0 {
            return Ok(0);
        }
        self.before_read()?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(&t.handle().scan).map_err(err)?;
        let mut rows = stmt.query(params![to_sql(low), to_sql(high), limit]).map_err(err)?;
        let mut visited = 0;
        while let Some(row) = rows.next().map_err(err)? {
            let key = from_sql(row.get(0).map_err(err)?);
            let blob =
                row.get_ref(1).map_err(err)?.as_blob().map_err(|e| {
                    DbError::Corrupt(format!("sqlite: table {table} key {key}: {e}"))
                })?;
            visited += 1;
            if !visit(key, blob) {
                break;
            }
        }
        Ok(visited)
    }

    fn commit(mut self: Box<Self>) -> Result<CommitToken> {
        let wrote = self.finish(true)?;
        Ok(if wrote { self.engine.clock.token() } else { CommitToken::DURABLE })
    }

    fn abort(mut self: Box<Self>) -> Result<()> {
        self.finish(false).map(drop)
    }
}

impl Drop for SqliteTxn<'_> {
    fn drop(&mut self) {
        // Dropped without commit or abort: roll back; nothing to report to.
        let _ = self.finish(false);
    }
}

impl std::fmt::Debug for SqliteEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteEngine").field("path", &self.path).finish_non_exhaustive()
    }
}

//! `Db`: the embedded entry point. Opens (formatting or recovering) a region with one of
//! nvmdb's engines; hands out closures' transactions over named tables (`crate::kv`) and,
//! for benchmark-level code, the engine itself through the [`storage::Engine`] trait.

use crate::handle::{Ending, TxKind};
use crate::kv::{self, Durability, ReadTx, RetryOptions, SlotPool, Tables, TxCore, WriteTx};
use engines::registry::Growth;
use engines::EngineOptions;
use pmem::{Medium, RegionOptions};
use serde::Serialize;
use std::ops::Deref;
use std::sync::{Mutex, OnceLock};
use storage::{DbError, Engine, IntegrityReport, RecoveryReport, Result};

/// Worker slots the table layer uses at most: its ids carry the slot in 8 bits.
const MAX_LAYER_SLOTS: usize = 256;
/// Reclamation transactions one commit runs at most; the rest waits for the next commit or
/// the next open.
const MAX_RECLAIM_STEPS: usize = 4096;

/// Everything needed to open a database. `Default` is an in-place engine on a 64 MiB private
/// `shm` region with 4 workers whose undo logs hold a 1 MiB value each; set `region.path` for
/// a database that outlives the process. How large one transaction may be is the engine's
/// limit (`DbError::TxnTooLarge` beyond it): raise `engine_options.undo_pages` (in-place),
/// `log_bytes` (WAL) or `staging_bytes` (group commit) for larger ones.
///
/// ```
/// let mut options = nvmdb::DbOptions::default();
/// options.engine = "wal".into();
/// options.region.size_bytes = 128 << 20;
/// let db = nvmdb::Db::open(&options)?;
/// assert_eq!(db.name(), "wal");
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DbOptions {
    /// One of [`engines::ENGINES`].
    pub engine: String,
    /// Medium, size and path of the region.
    pub region: RegionOptions,
    /// Engine parameters; `workers` is also the number of transactions that run at once.
    pub engine_options: EngineOptions,
    /// How [`Db::write`] and [`Db::read`] retry lock conflicts.
    pub retry: RetryOptions,
    /// How large a file-backed database (`region.medium` `File`, `Shm` or `Dax`) may grow:
    /// it starts at `region.size_bytes` and its file grows by itself as data needs pages.
    /// `None` (the default): up to [`UNLIMITED_SIZE_BYTES`], which is as far as the file
    /// system lets it; `Some(n)`: up to `n` bytes (`Some(0)`, or `n` at most
    /// `region.size_bytes`: the size stays fixed). A region in memory (`Dram`) never grows.
    /// This decides `region.max_size_bytes`, whatever that was set to.
    pub max_size_bytes: Option<u64>,
}

/// The size a database with no growth limit (`DbOptions::max_size_bytes: None`) is laid out
/// for: 1 TiB. Only what is in use is in the file; the layout's allocator bitmap (32 MiB per
/// TiB) is written when the database is created.
///
/// ```
/// assert_eq!(nvmdb::UNLIMITED_SIZE_BYTES, 1 << 40);
/// ```
pub const UNLIMITED_SIZE_BYTES: u64 = 1 << 40;

/// Undo log pages per worker of an embedded database: 1.25 MiB, so one transaction can write
/// a 1 MiB value (the in-place engine logs about a row's size per row written).
const EMBEDDED_UNDO_PAGES: u32 = 160;
/// Concurrent transactions of an embedded database (each worker has its own undo log).
const EMBEDDED_WORKERS: u32 = 4;

/// The engine options of [`DbOptions::default`]: 4 workers with 1.25 MiB undo logs, and a
/// `wal` log that fits a 64 MiB region with them (the CLI's 64 MiB default log does not).
fn embedded_engine_options() -> EngineOptions {
    let mut o = EngineOptions {
        workers: EMBEDDED_WORKERS,
        undo_pages: EMBEDDED_UNDO_PAGES,
        ..EngineOptions::default()
    };
    o.wal.log_bytes = engines::wal::min_log_bytes(&o).max(16 << 20);
    o
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            engine: "inplace".into(),
            region: RegionOptions::new(pmem::Medium::Shm, 64 << 20),
            engine_options: embedded_engine_options(),
            retry: RetryOptions::default(),
            max_size_bytes: None,
        }
    }
}

impl DbOptions {
    /// The region options `Db::open` opens: `region` with its growth limit set from
    /// [`DbOptions::max_size_bytes`].
    fn region_options(&self) -> RegionOptions {
        let mut region = self.region.clone();
        let grows = matches!(region.medium, Medium::File | Medium::Shm | Medium::Dax);
        region.max_size_bytes = match self.max_size_bytes {
            _ if !grows || region.private => 0,
            None => UNLIMITED_SIZE_BYTES.max(region.size_bytes),
            Some(n) if n <= region.size_bytes => 0,
            Some(n) => n,
        };
        region
    }
}

/// An open database. [`Db::write`] and [`Db::read`] run transactions over named tables;
/// `Db` also dereferences to the [`Engine`] for benchmark-level code (fixed-size rows keyed
/// by `u64`, caller-chosen worker slots).
///
/// ```
/// let mut options = nvmdb::DbOptions::default();
/// let dir = std::env::temp_dir().join(format!("nvmdb-doc-{}", std::process::id()));
/// options.region.medium = nvmdb::pmem::Medium::File;
/// options.region.path = Some(dir.clone());
/// {
///     let db = nvmdb::Db::open(&options)?;
///     db.write(|tx| tx.open_table::<str>("greetings")?.insert("hello", b"world"))?;
/// } // closed; the data is durable
/// let db = nvmdb::Db::open(&options)?;
/// let v = db.read(|tx| match tx.open_table::<str>("greetings")? {
///     Some(t) => t.get("hello"),
///     None => Ok(None),
/// })?;
/// assert_eq!(v.as_deref(), Some(&b"world"[..]));
/// # drop(db);
/// # std::fs::remove_file(&dir).ok();
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub struct Db {
    engine: Box<dyn Engine>,
    slots: SlotPool,
    slot_count: usize,
    retry: RetryOptions,
    layer: OnceLock<Tables>,
    layer_init: Mutex<()>,
    /// Test-only: acknowledge writes without waiting for durability (see [`Db::set_fault`]).
    skip_durable_wait: bool,
    /// What a `RegionFull` error adds for a library user (it names `DbOptions` fields).
    full_hint: String,
    /// The latest commit of a [`Durability::Eventual`] transaction, which [`Db::flush`] waits
    /// for (tokens of one engine grow with time).
    eventual: Mutex<storage::CommitToken>,
    /// What it was opened with (`None` from [`Db::from_engine`]): a backup is made alike.
    pub(crate) options: Option<DbOptions>,
    /// One backup at a time (two would each hold some slots and wait for the rest).
    pub(crate) backup_lock: Mutex<()>,
}

/// Deliberate bugs in the table layer, to show its crash test catches them. Never set
/// outside tests.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerFault {
    /// `Db::write` returns once the commit is visible, without waiting for it to be durable.
    AckBeforeDurable,
}

impl Db {
    /// Opens the region and the engine on it; a region with data is recovered first (see
    /// [`Db::recovery_report`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// assert!(db.recovery_report().formatted);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn open(options: &DbOptions) -> Result<Db> {
        Self::open_inner(options).map_err(kv::in_library_terms)
    }

    fn open_inner(options: &DbOptions) -> Result<Db> {
        if !engines::ENGINES.contains(&options.engine.as_str()) {
            return Err(DbError::Invalid(format!(
                "unknown engine `{}`; embedded engines are: {}",
                options.engine,
                engines::ENGINES.join(", ")
            )));
        }
        let region_options = options.region_options();
        let region = storage::format::open_region(&region_options)?;
        if growth(options) == Growth::PageCount && !region_options.private {
            // Reopened larger (a larger size or limit than it was created with): the layout
            // takes in the new pages as far as its allocator bitmap reaches.
            let wanted = region_options.max_size_bytes.max(region_options.size_bytes);
            let pages = wanted / storage::format::PAGE_SIZE_U64;
            storage::format::extend_page_count(&region, &options.engine, pages)?;
        }
        let engine = engines::open(&options.engine, region, &options.engine_options).map_err(
            |e| match e {
                DbError::RegionFull(what) => DbError::RegionFull(format!(
                    "{what}; raise DbOptions::region.size_bytes or lower engine_options"
                )),
                e => e,
            },
        )?;
        let slots = options.engine_options.workers as usize;
        let mut db = Db::from_engine(engine, slots, options.retry.clone());
        db.full_hint = full_hint(options, &region_options);
        db.options = Some(options.clone());
        Ok(db)
    }

    /// Wraps an engine opened some other way (a peer from the registry, say) so the table
    /// layer runs on it; `slots` is how many of its worker slots transactions may use.
    ///
    /// ```
    /// let region = nvmdb::pmem::Region::open(&nvmdb::pmem::RegionOptions::new(
    ///     nvmdb::pmem::Medium::Dram, 64 << 20))?;
    /// let engine = nvmdb::engines::open("group", region, &Default::default())?;
    /// let db = nvmdb::Db::from_engine(engine, 4, Default::default());
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x"))?;
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn from_engine(engine: Box<dyn Engine>, slots: usize, retry: RetryOptions) -> Db {
        let slot_count = slots.clamp(1, MAX_LAYER_SLOTS);
        Db {
            engine,
            slots: SlotPool::new(slot_count),
            slot_count,
            retry,
            layer: OnceLock::new(),
            layer_init: Mutex::new(()),
            skip_durable_wait: false,
            full_hint: "delete data, or open the engine on a larger region".into(),
            eventual: Mutex::new(storage::CommitToken::DURABLE),
            options: None,
            backup_lock: Mutex::new(()),
        }
    }

    pub(crate) fn slot_pool(&self) -> &SlotPool {
        &self.slots
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// Test-only: injects a layer bug (see [`LayerFault`]).
    #[doc(hidden)]
    pub fn set_fault(&mut self, fault: Option<LayerFault>) {
        self.skip_durable_wait = fault == Some(LayerFault::AckBeforeDurable);
    }

    fn commit_durably(&self, txn: Box<dyn storage::Txn + '_>) -> Result<()> {
        self.commit_with(txn, Durability::Immediate)
    }

    fn commit_with(&self, txn: Box<dyn storage::Txn + '_>, durability: Durability) -> Result<()> {
        let token = txn.commit()?;
        if self.skip_durable_wait {
            return Ok(());
        }
        match durability {
            Durability::Immediate => self.engine.wait_durable(token),
            Durability::Eventual => {
                let mut latest = self.eventual.lock().unwrap_or_else(|e| e.into_inner());
                *latest = (*latest).max(token);
                Ok(())
            }
        }
    }

    /// A commit's error as a library user should read it: a full region says how to make
    /// room (an engine may need pages at commit: `lsm` flushes its memtable then).
    fn explain(&self, e: DbError) -> DbError {
        match e {
            DbError::RegionFull(what) => {
                kv::in_library_terms(DbError::RegionFull(format!("{what}; {}", self.full_hint)))
            }
            e => kv::in_library_terms(e),
        }
    }

    /// Waits until every commit made so far is durable, those of [`Durability::Eventual`]
    /// transactions included (immediate ones already are).
    ///
    /// ```
    /// use nvmdb::Durability;
    /// let mut options = nvmdb::DbOptions::default();
    /// options.engine = "group".into();
    /// let db = nvmdb::Db::open(&options)?;
    /// for k in 0..100u64 {
    ///     db.write(|tx| {
    ///         tx.set_durability(Durability::Eventual); // returns without waiting for the batch
    ///         tx.open_table::<u64>("log")?.insert(k, b"entry")
    ///     })?;
    /// }
    /// db.flush()?; // all 100 are durable now
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn flush(&self) -> Result<()> {
        let latest = *self.eventual.lock().unwrap_or_else(|e| e.into_inner());
        self.engine.wait_durable(latest)
    }

    /// Runs `f` in a read-write transaction and commits it; returns once the commit is
    /// durable. A lock conflict with a concurrent transaction rolls `f`'s work back and runs it
    /// again after a random backoff (see [`RetryOptions`]), so `f` may run more than once and
    /// should have no effects outside the transaction. `Err` from `f` rolls back and is
    /// returned.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"kept"))?;
    /// let failed: nvmdb::storage::Result<()> = db.write(|tx| {
    ///     tx.open_table::<u64>("t")?.insert(1, b"rolled back")?;
    ///     Err(nvmdb::DbError::Invalid("changed my mind".into()))
    /// });
    /// assert!(failed.is_err());
    /// let v = db.write(|tx| tx.open_table::<u64>("t")?.get(1))?;
    /// assert_eq!(v.as_deref(), Some(&b"kept"[..]));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn write<T>(&self, f: impl FnMut(&WriteTx<'_>) -> Result<T>) -> Result<T> {
        self.try_write(f)
    }

    /// [`Db::write`] for a closure with its own error type `E` (which must hold a
    /// [`DbError`]): `Err` from `f` rolls back and comes back unchanged.
    ///
    /// ```
    /// #[derive(Debug)]
    /// enum AppError { Db(nvmdb::DbError), Overdrawn }
    /// impl From<nvmdb::DbError> for AppError {
    ///     fn from(e: nvmdb::DbError) -> Self { AppError::Db(e) }
    /// }
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default()).unwrap();
    /// let r: Result<(), AppError> = db.try_write(|tx| {
    ///     tx.open_table::<u64>("t")?.insert(1, b"x")?;
    ///     Err(AppError::Overdrawn)
    /// });
    /// assert!(matches!(r, Err(AppError::Overdrawn)));
    /// ```
    pub fn try_write<T, E: From<DbError>>(
        &self,
        f: impl FnMut(&WriteTx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run_retrying(f)
    }

    /// Runs `f` in a read-only transaction. Lock conflicts are retried as in [`Db::write`].
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<str>("t")?.insert("k", b"v"))?;
    /// let v = db.read(|tx| tx.open_table::<str>("t")?.map_or(Ok(None), |t| t.get("k")))?;
    /// assert_eq!(v.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn read<T>(&self, f: impl FnMut(&ReadTx<'_>) -> Result<T>) -> Result<T> {
        self.try_read(f)
    }

    /// [`Db::read`] for a closure with its own error type (see [`Db::try_write`]).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default()).unwrap();
    /// #[derive(Debug, PartialEq)]
    /// struct AppError(String);
    /// impl From<nvmdb::DbError> for AppError {
    ///     fn from(e: nvmdb::DbError) -> Self { AppError(e.to_string()) }
    /// }
    /// let r: Result<usize, AppError> = db.try_read(|tx| Ok(tx.table_names()?.len()));
    /// assert_eq!(r, Ok(0));
    /// ```
    pub fn try_read<T, E: From<DbError>>(
        &self,
        f: impl FnMut(&ReadTx<'_>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.run_retrying(f)
    }

    /// The one retry loop of [`Db::try_write`] and [`Db::try_read`]: runs `f` in a fresh
    /// transaction until it ends without a conflict, or the attempts run out.
    fn run_retrying<'db, X: TxKind<'db>, T, E: From<DbError>>(
        &'db self,
        mut f: impl FnMut(&X) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let tables = self.layer()?;
        let slot = self.slots.take();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let tx: X = self.begin_on(tables, slot.slot)?;
            let result = f(&tx);
            let ended = self.end(tx.core(), result.is_ok(), tx.ending());
            match ended {
                Ok(()) => return result,
                // Still retryable, so a caller's own loop may go on.
                Err(e) if e.is_retryable() && attempt >= self.retry.max_attempts => {
                    return Err(conflict_persisted(attempt, tx.core().conflict_table()).into())
                }
                Err(e) if e.is_retryable() => std::thread::sleep(self.retry.backoff(attempt)),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// A transaction of kind `X` on worker slot `slot`.
    pub(crate) fn begin_on<'db, X: TxKind<'db>>(
        &'db self,
        tables: Tables,
        slot: usize,
    ) -> Result<X> {
        let txn = self.engine.begin(slot)?;
        Ok(X::wrap(TxCore::new(txn, tables, slot, &self.full_hint)))
    }

    /// Ends a transaction, the one commit path of closures and held handles: commits it when
    /// `commit` and nothing doomed it, else rolls it back. A retryable `Err` means a conflict
    /// doomed it (rolled back: run it again).
    pub(crate) fn end(&self, core: &TxCore<'_>, commit: bool, ending: Ending) -> Result<()> {
        let Some((txn, doom)) = core.take() else {
            return Err(DbError::Invalid("the transaction has already ended".into()));
        };
        match doom {
            Some(e) if commit || e.is_retryable() => {
                txn.abort()?;
                return Err(e);
            }
            _ if !commit => return txn.abort(),
            _ => {}
        }
        let committed = match ending {
            Ending::Read => txn.commit().map(drop),
            Ending::Write(durability) => self.commit_with(txn, durability),
        };
        committed.map_err(|e| {
            if e.is_retryable() {
                kv::conflict_in_library_terms(e, None)
            } else {
                self.explain(e)
            }
        })?;
        if core.trashed.get() {
            self.reclaim(core.tables, core.slot);
        }
        Ok(())
    }

    /// The table layer's engine tables, created (and the catalog made) on first use; the
    /// first use also finishes reclamation a crash interrupted.
    pub(crate) fn layer(&self) -> Result<Tables> {
        if let Some(t) = self.layer.get() {
            return Ok(*t);
        }
        let _init = self.layer_init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = self.layer.get() {
            return Ok(*t);
        }
        let tables = Tables::open_or_create(&*self.engine, self.slot_count)?;
        let slot = self.slots.take();
        let mut txn = self.engine.begin(slot.slot)?;
        match kv::init_catalog(&mut *txn, tables, slot.slot) {
            Ok(()) => self.engine.wait_durable(txn.commit()?)?,
            Err(e) => {
                txn.abort()?;
                return Err(e);
            }
        }
        self.reclaim(tables, slot.slot);
        Ok(*self.layer.get_or_init(|| tables))
    }

    /// Frees trashed rows in small transactions until the trash is empty, a bound is hit or
    /// a step fails (a conflict means another thread is at it; leftovers wait for the next
    /// commit that trashes something, or the next open).
    fn reclaim(&self, tables: Tables, slot: usize) {
        for _ in 0..MAX_RECLAIM_STEPS {
            let Ok(mut txn) = self.engine.begin(slot) else { return };
            // Reclaiming frees space: it may take what engines keep for freeing work.
            let step = {
                let _freeing = storage::alloc::FreeingScope::enter();
                kv::reclaim_step(&mut *txn, tables, slot)
            };
            match step {
                Ok(more) => {
                    let durable = {
                        let _freeing = storage::alloc::FreeingScope::enter();
                        self.commit_durably(txn)
                    };
                    if !more || durable.is_err() {
                        return;
                    }
                }
                Err(_) => {
                    let _ = txn.abort();
                    return;
                }
            }
        }
    }

    /// What opening recovered: whether the region was new, and how many interrupted
    /// transactions recovery rolled back or completed.
    ///
    /// ```
    /// let mut options = nvmdb::DbOptions::default();
    /// let path = std::env::temp_dir().join(format!("nvmdb-doc-rr-{}", std::process::id()));
    /// options.region.medium = nvmdb::pmem::Medium::File;
    /// options.region.path = Some(path.clone());
    /// drop(nvmdb::Db::open(&options)?);
    /// let report = nvmdb::Db::open(&options)?.recovery_report();
    /// assert!(!report.formatted); // reopened, not formatted again
    /// assert_eq!(report.txns_rolled_back, 0); // closed cleanly: nothing in flight
    /// # std::fs::remove_file(&path).ok();
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn recovery_report(&self) -> RecoveryReport {
        self.engine.recovery_report()
    }

    /// Checks the open database: the engine's structural integrity (indexes, heap and
    /// allocator agree) and every engine table's row count (a full scan of each).
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// assert!(db.check()?.ok());
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn check(&self) -> Result<CheckReport> {
        check_engine(&*self.engine)
    }

    /// The engine tables of benchmark-level code: [`Engine::tables`] without the tables the
    /// named-table layer keeps its trees and values in (`nvmdb.` names). Named tables are
    /// listed by [`Db::table_names`].
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x"))?;
    /// assert!(db.tables().is_empty());
    /// assert!(!db.engine().tables().is_empty()); // the layer's own
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn tables(&self) -> Vec<storage::TableSpec> {
        let mut specs = self.engine.tables();
        specs.retain(|s| !kv::is_internal(&s.name));
        specs
    }

    /// Names of the named tables ([`crate::WriteTx::open_table`]), in byte order.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// db.write(|tx| tx.open_table::<str>("users").map(|_| ()))?;
    /// assert_eq!(db.table_names()?, ["users"]);
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn table_names(&self) -> Result<Vec<String>> {
        self.read(|tx| tx.table_names())
    }

    /// The engine, for code that takes `&dyn Engine`.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// assert_eq!(db.engine().name(), "inplace");
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn engine(&self) -> &dyn Engine {
        &*self.engine
    }
}

impl Deref for Db {
    type Target = dyn Engine;
    fn deref(&self) -> &Self::Target {
        &*self.engine
    }
}

/// How the engine's layout follows a growing file (its registry entry says).
pub(crate) fn growth(options: &DbOptions) -> Growth {
    engines::registry::lookup(&options.engine).map_or(Growth::Fixed, |e| e.growth)
}

/// What to do about a full database, in terms of `DbOptions`.
fn full_hint(options: &DbOptions, region: &RegionOptions) -> String {
    if !growth(options).grows() {
        return format!(
            "engine `{}` keeps the size it was created with: delete data, or create the \
             database with a larger DbOptions::region.size_bytes",
            options.engine
        );
    }
    if region.max_size_bytes == 0 {
        return "delete data, or let the database grow (DbOptions::max_size_bytes with a file \
                medium)"
            .into();
    }
    format!(
        "the database may grow to {} bytes (DbOptions::max_size_bytes) or the file system is \
         full: delete data or raise that limit",
        region.max_size_bytes
    )
}

/// The error of a transaction whose every attempt conflicted, naming the user's `table`
/// whose operation met the first conflict of the last attempt (the engine's error names
/// internal table ids and node keys).
fn conflict_persisted(attempts: u32, table: Option<String>) -> DbError {
    let on = table.map(|t| format!("table `{t}`: ")).unwrap_or_default();
    DbError::Peer {
        engine: kv::LIBRARY,
        message: format!(
            "{on}the transaction still conflicted after {attempts} attempts; \
             raise DbOptions::retry.max_attempts or reduce contention"
        ),
        retryable: true,
    }
}

/// What [`Db::check`] found.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<u64>("t")?.insert(1, b"x"))?;
/// let report = db.check()?;
/// assert!(report.ok());
/// let named = report.named_tables.expect("a database with named tables");
/// assert_eq!((named[0].name.as_str(), named[0].key, named[0].entries), ("t", "u64", 1));
/// assert!(report.tables.is_empty()); // no benchmark-level tables
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    /// `Ok` with page and row totals, or the first inconsistency found.
    pub integrity: std::result::Result<IntegrityReport, String>,
    /// Every benchmark-level engine table and its row count, in table order (the named-table
    /// layer's own tables are left out).
    pub tables: Vec<TableRows>,
    /// The named tables ([`crate::WriteTx::open_table`]) and their entries; `None` when the
    /// region was never used through them (a benchmark region).
    pub named_tables: Option<Vec<NamedTableRows>>,
}

/// One named table in a [`CheckReport`].
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// db.write(|tx| tx.open_table::<str>("users")?.insert("ada", b"x"))?;
/// let named = db.check()?.named_tables.unwrap_or_default();
/// assert_eq!(named[0], nvmdb::NamedTableRows { name: "users".into(), key: "str", entries: 1 });
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NamedTableRows {
    /// The table's name.
    pub name: String,
    /// Its key type: `u64`, `i64`, `str` or `[u8]`.
    pub key: &'static str,
    /// Entries a full read found.
    pub entries: u64,
}

/// One engine table in a [`CheckReport`].
///
/// ```
/// use nvmdb::TableSpec;
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let t = db.create_table(&TableSpec { name: "rows".into(), row_bytes: 8, expected_rows: 1 })?;
/// let mut txn = db.begin(0)?;
/// txn.insert(t, 1, &[0; 8])?;
/// db.wait_durable(txn.commit()?)?;
/// let rows = &db.check()?.tables[0];
/// assert_eq!((rows.name.as_str(), rows.row_bytes, rows.rows), ("rows", 8, 1));
/// # Ok::<(), nvmdb::DbError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableRows {
    /// The engine table's name ([`TableSpec::name`](crate::TableSpec::name)).
    pub name: String,
    /// Bytes of each of its rows.
    pub row_bytes: u32,
    /// Rows a full scan visited.
    pub rows: u64,
}

impl CheckReport {
    /// Whether the integrity check passed.
    ///
    /// ```
    /// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
    /// let report = db.check()?;
    /// assert!(report.ok() && report.integrity.is_ok());
    /// # Ok::<(), nvmdb::DbError>(())
    /// ```
    pub fn ok(&self) -> bool {
        self.integrity.is_ok()
    }
}

/// [`Db::check`] for any engine (the `nvmdb check` command uses it too). A damaged table is an
/// `Err` from its scan.
///
/// ```
/// let db = nvmdb::Db::open(&nvmdb::DbOptions::default())?;
/// let report = nvmdb::check_engine(db.engine())?;
/// assert!(report.tables.is_empty() && report.named_tables.is_none()); // nothing used yet
/// # Ok::<(), nvmdb::DbError>(())
/// ```
pub fn check_engine(engine: &dyn Engine) -> Result<CheckReport> {
    let integrity = engine.check_integrity();
    let mut tables = Vec::new();
    for (id, spec) in engine.tables().into_iter().enumerate() {
        if kv::is_internal(&spec.name) {
            continue;
        }
        let mut txn = engine.begin(0)?;
        let rows = txn.scan(id as u32, 0, u64::MAX, usize::MAX, &mut |_, _| true)?;
        txn.commit()?;
        tables.push(TableRows { name: spec.name, row_bytes: spec.row_bytes, rows: rows as u64 });
    }
    let named_tables = kv::named_tables(engine)?.map(|named| {
        named
            .into_iter()
            .map(|(name, key, entries)| NamedTableRows { name, key, entries })
            .collect()
    });
    Ok(CheckReport { integrity, tables, named_tables })
}

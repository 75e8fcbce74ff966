//! `Db`: the embedded entry point. Opens (formatting or recovering) a region with one of
//! nvmdb's engines and hands out transactions through the [`storage::Engine`] trait.

use engines::EngineOptions;
use pmem::RegionOptions;
use serde::Serialize;
use std::ops::Deref;
use storage::{DbError, Engine, IntegrityReport, RecoveryReport, Result};

/// Everything needed to open a database. `Default` is an in-place engine on a 64 MiB private
/// `shm` region; set `region.path` for a database that outlives the process.
#[derive(Clone, Debug, PartialEq)]
pub struct DbOptions {
    pub engine: String,
    pub region: RegionOptions,
    pub engine_options: EngineOptions,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            engine: "inplace".into(),
            region: RegionOptions::new(pmem::Medium::Shm, 64 << 20),
            engine_options: EngineOptions::default(),
        }
    }
}

/// An open database. Dereferences to the engine.
pub struct Db {
    engine: Box<dyn Engine>,
}

impl Db {
    /// Opens the region and the engine on it; a region with data is recovered first (see
    /// [`Db::recovery_report`]).
    pub fn open(options: &DbOptions) -> Result<Db> {
        if !engines::ENGINES.contains(&options.engine.as_str()) {
            return Err(DbError::Invalid(format!(
                "unknown engine `{}`; embedded engines are: {}",
                options.engine,
                engines::ENGINES.join(", ")
            )));
        }
        let region = storage::format::open_region(&options.region)?;
        let engine = engines::open(&options.engine, region, &options.engine_options)?;
        Ok(Db { engine })
    }

    /// What opening recovered.
    pub fn recovery_report(&self) -> RecoveryReport {
        self.engine.recovery_report()
    }

    /// Checks the open database: the engine's structural integrity (indexes, heap and
    /// allocator agree) and every table's row count (a full scan of each).
    pub fn check(&self) -> Result<CheckReport> {
        check_engine(&*self.engine)
    }

    /// The engine, for code that takes `&dyn Engine`.
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

/// What [`Db::check`] found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckReport {
    /// `Ok` with page and row totals, or the first inconsistency found.
    pub integrity: std::result::Result<IntegrityReport, String>,
    /// Every table and its row count, in table order.
    pub tables: Vec<TableRows>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TableRows {
    pub name: String,
    pub row_bytes: u32,
    pub rows: u64,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.integrity.is_ok()
    }
}

/// [`Db::check`] for any engine (the `nvmdb check` command uses it too). A damaged table is an
/// `Err` from its scan.
pub fn check_engine(engine: &dyn Engine) -> Result<CheckReport> {
    let integrity = engine.check_integrity();
    let mut tables = Vec::new();
    for (id, spec) in engine.tables().into_iter().enumerate() {
        let mut txn = engine.begin(0)?;
        let rows = txn.scan(id as u32, 0, u64::MAX, usize::MAX, &mut |_, _| true)?;
        txn.commit()?;
        tables.push(TableRows { name: spec.name, row_bytes: spec.row_bytes, rows: rows as u64 });
    }
    Ok(CheckReport { integrity, tables })
}

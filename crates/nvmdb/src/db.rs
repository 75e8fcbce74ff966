//! `Db`: the embedded entry point. Opens (formatting or recovering) a region with one of
//! nvmdb's engines and hands out transactions through the [`storage::Engine`] trait.

use engines::EngineOptions;
use pmem::{Region, RegionOptions};
use std::ops::Deref;
use storage::{DbError, Engine, RecoveryReport, Result};

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
        let region = Region::open(&options.region)?;
        let engine = engines::open(&options.engine, region, &options.engine_options)?;
        Ok(Db { engine })
    }

    /// What opening recovered.
    pub fn recovery_report(&self) -> RecoveryReport {
        self.engine.recovery_report()
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

//! Opening an engine by name on a region (or, for peers, a directory): the one place that knows
//! every engine nvmdb can run, so the CLI, sweeps and the crash tester accept the same names.
//!
//! Three kinds of engine:
//! - **testing** (`noop`, `mem`, from `workloads::testing`): no region; `noop` measures the
//!   driver's own overhead, `mem` is a correct volatile reference;
//! - **region** engines (`engines::registry`'s table: `inplace`, `wal`, `group`, `cow`, `lsm`;
//!   and `sqlite-nvwal`, registered here): opened on a `pmem::Region`, formatting a blank one and
//!   recovering otherwise; their options, parsing and help live with each engine
//!   (`docs/design.md` §4, "Options");
//! - **peers** (`crates/peers`: `sqlite`, `lmdb`, `redb`, `pmemobj`, `rocksdb`): opened in a directory
//!   (`RegionOptions::path`).
//!
//! Invariant: every name in [`engines()`] opens through [`open_engine`]; an unknown name is an
//! error that lists the known ones.

use pmem::{Region, RegionOptions};
use serde::Serialize;
use std::collections::BTreeMap;
use storage::options::OptionSet;
use storage::{DbError, Engine};

/// What an engine runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// In-process test engines without persistent state.
    Testing,
    /// nvmdb's own engines, on a `pmem` region.
    Region,
    /// Established engines in a directory, for comparison.
    Peer,
}

/// One engine the registry can open.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EngineInfo {
    pub name: &'static str,
    pub kind: EngineKind,
    pub about: &'static str,
    /// Whether the engine keeps what is written (false for `noop`: checkers cannot pass on it,
    /// so runs skip them).
    pub stores_data: bool,
    /// `Some(factor)`: the engine is as large as the region it is given (`--size`, or the
    /// bench's default), needing `factor` bytes per byte of an `inplace` database; `None`: it
    /// sizes itself (a peer's files, a testing engine's memory) and `--size` is refused.
    pub room_factor: Option<u64>,
}

/// The testing engines, before the region engines in `--help` and `--list`.
const TESTING: &[EngineInfo] = &[
    EngineInfo {
        name: "noop",
        kind: EngineKind::Testing,
        about: "does nothing; measures the benchmark driver's own overhead",
        stores_data: false,
        room_factor: None,
    },
    EngineInfo {
        name: "mem",
        kind: EngineKind::Testing,
        about: "volatile in-memory reference engine (key locks, undo), nothing persistent",
        stores_data: true,
        room_factor: None,
    },
];

/// The peers, after the region engines.
const PEERS: &[EngineInfo] = &[
    EngineInfo {
        name: "sqlite",
        kind: EngineKind::Peer,
        about: "SQLite, WAL journal, synchronous=FULL: one writer, readers never wait",
        stores_data: true,
        room_factor: None,
    },
    EngineInfo {
        name: "lmdb",
        kind: EngineKind::Peer,
        about: "LMDB (heed), synchronous commits: one writer, readers never wait",
        stores_data: true,
        room_factor: None,
    },
    EngineInfo {
        name: "redb",
        kind: EngineKind::Peer,
        about: "redb, Durability::Immediate: one writer, readers never wait",
        stores_data: true,
        room_factor: None,
    },
    #[cfg(feature = "pmemobj")]
    EngineInfo {
        name: "pmemobj",
        kind: EngineKind::Peer,
        about: "PMDK libpmemobj undo-log transactions on a B+tree: one writer, readers never wait",
        stores_data: true,
        // Its pool is as large as the region (`open_peer`), fixed once made; PMDK's allocator
        // keeps a header and rounds every object up: YCSB's 1M rows (1.2 GiB estimated)
        // overflowed the 1 GiB default pool and ran in 2 GiB.
        room_factor: Some(2),
    },
    #[cfg(feature = "rocksdb")]
    EngineInfo {
        name: "rocksdb",
        kind: EngineKind::Peer,
        about:
            "RocksDB TransactionDB (system librocksdb), WAL sync=true: key locks without waiting",
        stores_data: true,
        room_factor: None,
    },
];

/// A region engine: one of `engines`' table, or `sqlite-nvwal` (its own crate, which `engines`
/// cannot see: it is registered here, where both are visible).
#[derive(Clone, Copy, Debug)]
pub enum RegionEngine {
    Engines(&'static engines::registry::RegionEngine),
    Nvwal,
}

/// Every region engine, in the order `--help` and `--list` show them.
fn region_engines() -> impl Iterator<Item = RegionEngine> {
    let own = engines::registry::REGION_ENGINES.iter().map(RegionEngine::Engines);
    own.chain(std::iter::once(RegionEngine::Nvwal))
}

impl RegionEngine {
    pub fn lookup(name: &str) -> Option<RegionEngine> {
        region_engines().find(|e| e.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            RegionEngine::Engines(e) => e.name,
            RegionEngine::Nvwal => sqlite_nvwal::ENGINE_NAME,
        }
    }

    fn info(self) -> EngineInfo {
        let about = match self {
            RegionEngine::Engines(e) => e.about,
            RegionEngine::Nvwal => sqlite_nvwal::ABOUT,
        };
        EngineInfo {
            name: self.name(),
            kind: EngineKind::Region,
            about,
            stores_data: true,
            room_factor: Some(self.room_factor()),
        }
    }

    /// The `--engine-opt` keys it takes.
    pub fn keys(self) -> Vec<&'static str> {
        match self {
            RegionEngine::Engines(e) => e.keys(),
            RegionEngine::Nvwal => sqlite_nvwal::option_keys(),
        }
    }

    /// One line per key: `key=<values> (default D): help`.
    pub fn help(self) -> Vec<String> {
        match self {
            RegionEngine::Engines(e) => e.help(),
            RegionEngine::Nvwal => {
                let mut out = Vec::new();
                storage::options::help_lines(&sqlite_nvwal::NvwalOptions::default(), &[], &mut out);
                out
            }
        }
    }

    /// Every key with the value `config` gives it, defaults included (unset ones left out).
    pub fn resolved(self, config: &EngineConfig) -> Result<Vec<(String, String)>, RegistryError> {
        let pairs = match self {
            RegionEngine::Engines(e) => e.resolved(&engine_options(e, config)?),
            RegionEngine::Nvwal => nvwal_options(config)?.resolved(),
        };
        Ok(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Region bytes a workload needs per byte it needs on `inplace` (how densely it stores
    /// rows).
    pub fn room_factor(self) -> u64 {
        match self {
            RegionEngine::Engines(e) => e.room_factor,
            RegionEngine::Nvwal => sqlite_nvwal::ROOM_FACTOR,
        }
    }
}

/// Every engine, in the order `--help` and `--list` show them.
pub fn engines() -> &'static [EngineInfo] {
    static ALL: std::sync::OnceLock<Vec<EngineInfo>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let region = region_engines().map(RegionEngine::info);
        TESTING.iter().copied().chain(region).chain(PEERS.iter().copied()).collect()
    })
}

/// Names of every engine.
pub fn names() -> Vec<&'static str> {
    engines().iter().map(|e| e.name).collect()
}

/// The engine called `name`.
pub fn lookup(name: &str) -> Option<&'static EngineInfo> {
    engines().iter().find(|e| e.name == name)
}

/// Every engine's `--engine-opt` keys, one block per engine (`--help`, `--engine-opt help`).
pub fn options_help(only: Option<&str>) -> String {
    let mut out = String::new();
    for engine in region_engines().filter(|e| only.is_none_or(|n| n == e.name())) {
        out += &format!("{}:\n", engine.name());
        for line in engine.help() {
            out += &format!("  {line}\n");
        }
    }
    if only.is_none_or(|n| lookup(n).is_some_and(|e| e.kind == EngineKind::Peer)) {
        out += &format!("peers ({}): {}\n", peer_names().join(", "), PEER_OPTS.join(", "));
    }
    if only.is_none() {
        out += "noop, mem: none\n";
        out += &format!("test faults (fault=, tests only): {}\n", engines::Fault::names());
    }
    out
}

fn peer_names() -> Vec<&'static str> {
    PEERS.iter().map(|e| e.name).collect()
}

/// Engine options that are not region options. Defaults live in `Default`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EngineConfig {
    /// Worker threads that will use the engine (`begin(worker)` takes `0..workers`); engines
    /// with per-worker state (undo logs) size it from this.
    pub workers: usize,
    /// Simulated page-cache capacity, in 8 KiB pages, for the read-latency model (`None`:
    /// unlimited, every read hits).
    pub cache_pages: Option<u64>,
    /// Replacement policy of that cache (`--cache-policy`; default: fully associative LRU).
    pub cache_policy: storage::pages::CachePolicy,
    /// Engine-specific `key=value` options (`--engine-opt`), interpreted by the engine; an engine
    /// rejects keys it does not know.
    pub extra: BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("unknown engine `{name}` (known: {known})")]
    UnknownEngine { name: String, known: String },
    #[error("engine `{engine}` has no option `{key}`{hint}")]
    UnknownOption { engine: &'static str, key: String, hint: String },
    #[error(transparent)]
    Pmem(#[from] pmem::PmemError),
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Opens engine `name`. Region engines open (or create) the region `region` describes and
/// format or recover it; peers use `region.path` as their directory; testing engines ignore
/// `region`.
pub fn open_engine(
    name: &str,
    region: &RegionOptions,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    let Some(info) = lookup(name) else {
        return Err(RegistryError::UnknownEngine {
            name: name.to_string(),
            known: names().join(", "),
        });
    };
    match info.kind {
        EngineKind::Testing => {
            reject_extra(info.name, config, &[])?;
            Ok(match info.name {
                "noop" => Box::new(workloads::testing::NoopEngine::new()),
                _ => Box::new(workloads::testing::MemEngine::new()),
            })
        }
        EngineKind::Region => {
            let region = storage::format::open_region(region)?;
            open_region_engine(info, region, config)
        }
        EngineKind::Peer => match region.path.as_deref() {
            Some(dir) => open_peer(info, dir, config, region.size_bytes),
            None => open_peer_private(info, config, region.size_bytes),
        },
    }
}

/// [`open_engine`] for a region engine on a region the caller opened (`nvmdb bench --image`:
/// a dram copy of a saved database).
pub fn open_engine_on(
    name: &str,
    region: pmem::Region,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    match lookup(name) {
        Some(info) if info.kind == EngineKind::Region => open_region_engine(info, region, config),
        _ => {
            Err(RegistryError::UnknownEngine { name: name.to_string(), known: names().join(", ") })
        }
    }
}

/// The options engine `name` takes through `--engine-opt` (none for a name it does not know).
pub fn accepted_options(name: &str) -> Vec<&'static str> {
    match RegionEngine::lookup(name) {
        Some(engine) => engine.keys(),
        None if lookup(name).is_some_and(|e| e.kind == EngineKind::Peer) => PEER_OPTS.to_vec(),
        None => Vec::new(),
    }
}

/// The smallest region engine `name` formats with `config` (`None`: an engine that sizes
/// itself to its region, or keeps none); see `engines::registry::min_region_bytes`.
pub fn min_region_bytes(name: &str, config: &EngineConfig) -> Result<Option<u64>, RegistryError> {
    let Some(RegionEngine::Engines(engine)) = RegionEngine::lookup(name) else {
        return Ok(None);
    };
    let options = engine_options(engine, config)?;
    Ok(Some(engines::registry::min_region_bytes(engine.name, &options)?))
}

/// The region size a command uses without `--size`: `base`, the size it chose for the workload
/// (what `inplace` needs for it), plus the engine's own areas (a `wal` log, a `group` batch
/// log, `lsm`'s areas), so every engine runs with its defaults.
pub fn default_region_bytes(
    name: &str,
    config: &EngineConfig,
    base: u64,
) -> Result<u64, RegistryError> {
    match RegionEngine::lookup(name) {
        Some(RegionEngine::Engines(engine)) => {
            let options = engine_options(engine, config)?;
            Ok(base + engines::registry::area_bytes(engine.name, &options)?)
        }
        Some(RegionEngine::Nvwal) => {
            // Its log is half the region, at least 4 MiB (unless log_bytes says otherwise),
            // next to a database of at least 1 MiB: a region under 8 MiB gets the log on top.
            let log_bytes = nvwal_options(config).ok().and_then(|o| o.log_bytes).unwrap_or(4 << 20);
            Ok(if base < 8 << 20 { base + log_bytes + (1 << 20) } else { base })
        }
        None => Ok(base),
    }
}

/// Bytes a default region leaves for a workload the workload estimates at `estimate` bytes of
/// an `inplace` database: as much again for each time the engine stores rows less densely
/// (its registry entry's room factor).
pub fn workload_room(name: &str, estimate: u64) -> u64 {
    let factor = lookup(name).and_then(|e| e.room_factor).unwrap_or(1);
    estimate.saturating_mul(factor)
}

/// Refuses a region size the engine cannot format with `config`, in one line naming the least
/// it needs.
pub fn check_region_bytes(name: &str, config: &EngineConfig, size: u64) -> Result<(), String> {
    match min_region_bytes(name, config).map_err(|e| e.to_string())? {
        Some(min) if size < min => Err(format!(
            "a region of {} is too small for engine {name} with these options: it needs at \
             least {} (its logs and metadata) and room for the workload; use a larger --size \
             or leave it out",
            bench::units::format_bytes(size),
            bench::units::format_bytes(min.next_multiple_of(1 << 20))
        )),
        _ => Ok(()),
    }
}

/// Maps the CLI's engine configuration to `engines::EngineOptions` for one of `engines`'
/// engines (its registry entry parses the `--engine-opt`s and fills the defaults).
pub fn region_engine_options(
    engine: &str,
    config: &EngineConfig,
) -> Result<engines::EngineOptions, RegistryError> {
    engine_options(engines::registry::get(engine)?, config)
}

fn engine_options(
    engine: &engines::registry::RegionEngine,
    config: &EngineConfig,
) -> Result<engines::EngineOptions, RegistryError> {
    let base = engines::EngineOptions {
        workers: (config.workers.max(1)) as u32,
        cache_pages: config.cache_pages,
        cache_policy: config.cache_policy,
        ..Default::default()
    };
    Ok(engine.options(base, &config.extra)?)
}

fn nvwal_options(config: &EngineConfig) -> Result<sqlite_nvwal::NvwalOptions, RegistryError> {
    let mut o = sqlite_nvwal::NvwalOptions::default();
    for (k, v) in &config.extra {
        o.set(k, v)?;
    }
    Ok(o)
}

fn open_region_engine(
    info: &'static EngineInfo,
    region: Region,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    match RegionEngine::lookup(info.name) {
        Some(RegionEngine::Engines(engine)) => {
            let options = engine_options(engine, config)?;
            Ok((engine.open)(region, &options)?)
        }
        Some(RegionEngine::Nvwal) => {
            let engine = sqlite_nvwal::engine::open_with(region, config.workers, &config.extra)?;
            Ok(Box::new(engine))
        }
        None => Err(RegistryError::UnknownEngine {
            name: info.name.to_string(),
            known: names().join(", "),
        }),
    }
}

/// Options a peer accepts through `--engine-opt` (`pool_bytes`: size of a new PMDK pool, used by
/// `pmemobj` only).
const PEER_OPTS: &[&str] = &["durability", "cache_bytes", "writer_wait_ms", "pool_bytes"];

fn parse_opt<T: std::str::FromStr>(
    engine: &'static str,
    key: &str,
    value: &str,
) -> Result<T, RegistryError> {
    value.parse().map_err(|_| {
        RegistryError::Db(DbError::Invalid(format!(
            "engine `{engine}`: option {key}={value} is not a valid number"
        )))
    })
}

/// `region_bytes` is the size the caller asked of a region (`--size`, or the bench's default
/// for the workload; 0: none): a new `pmemobj` pool is that large, or its default if larger,
/// unless `pool_bytes` says otherwise.
fn open_peer(
    info: &'static EngineInfo,
    dir: &std::path::Path,
    config: &EngineConfig,
    region_bytes: u64,
) -> Result<Box<dyn Engine>, RegistryError> {
    reject_extra(info.name, config, PEER_OPTS)?;
    let mut o = peers::PeerOptions { workers: config.workers.max(1), ..Default::default() };
    o.pmemobj_pool_bytes = o.pmemobj_pool_bytes.max(region_bytes);
    for (k, v) in &config.extra {
        match k.as_str() {
            "durability" => {
                o.durability = match v.as_str() {
                    "durable" => peers::PeerDurability::Durable,
                    "relaxed" => peers::PeerDurability::Relaxed,
                    _ => {
                        return Err(RegistryError::Db(DbError::Invalid(format!(
                            "durability must be durable or relaxed, not `{v}`"
                        ))))
                    }
                }
            }
            "cache_bytes" => o.cache_bytes = parse_opt(info.name, k, v)?,
            "pool_bytes" => o.pmemobj_pool_bytes = parse_opt(info.name, k, v)?,
            "writer_wait_ms" => {
                o.writer_wait = std::time::Duration::from_millis(parse_opt(info.name, k, v)?)
            }
            _ => unreachable!("rejected above"),
        }
    }
    // The directory must exist: the peer checks it is empty or its own (`claim_dir`).
    Ok(peers::open_with(info.name, dir, &o)?)
}

/// A peer opened in a private directory (no `--path`): the directory is removed when the engine
/// is dropped, as a private `shm` region is.
struct PrivateDir {
    engine: Option<Box<dyn Engine>>,
    dir: std::path::PathBuf,
}

impl PrivateDir {
    fn get(&self) -> &dyn Engine {
        self.engine.as_deref().expect("engine present until drop")
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        drop(self.engine.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Engine for PrivateDir {
    fn name(&self) -> &str {
        self.get().name()
    }
    fn create_table(&self, spec: &storage::TableSpec) -> storage::Result<storage::TableId> {
        self.get().create_table(spec)
    }
    fn table(&self, name: &str) -> Option<storage::TableId> {
        self.get().table(name)
    }
    fn tables(&self) -> Vec<storage::TableSpec> {
        self.get().tables()
    }
    fn begin(&self, worker: usize) -> storage::Result<Box<dyn storage::Txn + '_>> {
        self.get().begin(worker)
    }
    fn is_durable(&self, token: storage::CommitToken) -> bool {
        self.get().is_durable(token)
    }
    fn wait_durable(&self, token: storage::CommitToken) -> storage::Result<()> {
        self.get().wait_durable(token)
    }
    fn recovery_report(&self) -> storage::RecoveryReport {
        self.get().recovery_report()
    }
    fn region(&self) -> Option<&Region> {
        self.get().region()
    }
    fn check_integrity(&self) -> storage::IntegrityResult {
        self.get().check_integrity()
    }
    fn shutdown(&self) -> storage::Result<()> {
        self.get().shutdown()
    }
}

static PRIVATE_DIR_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn open_peer_private(
    info: &'static EngineInfo,
    config: &EngineConfig,
    region_bytes: u64,
) -> Result<Box<dyn Engine>, RegistryError> {
    let n = PRIVATE_DIR_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // tmpfs, as the papers put Shore-MT's files on tmpfs.
    let dir = std::path::PathBuf::from(format!(
        "/dev/shm/nvmdb-{}-{}-{n}",
        info.name,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).map_err(|e| {
        RegistryError::Db(DbError::Peer {
            engine: info.name,
            message: format!("cannot create the private directory {}: {e}", dir.display()),
            retryable: false,
        })
    })?;
    match open_peer(info, &dir, config, region_bytes) {
        Ok(engine) => Ok(Box::new(PrivateDir { engine: Some(engine), dir })),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}

/// Opens region engine `name` on an already-open region (e.g. a `sim` region made from a crash
/// image): formats a blank region, recovers otherwise.
pub fn open_on_region(
    name: &str,
    region: Region,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    match lookup(name) {
        Some(info) if info.kind == EngineKind::Region => open_region_engine(info, region, config),
        Some(info) => Err(RegistryError::Db(DbError::Invalid(format!(
            "engine `{}` does not run on a pmem region (crash images need a region engine)",
            info.name
        )))),
        None => {
            Err(RegistryError::UnknownEngine { name: name.to_string(), known: names().join(", ") })
        }
    }
}

/// Fails on any `--engine-opt` key outside `known`.
pub fn reject_extra(
    engine: &'static str,
    config: &EngineConfig,
    known: &[&str],
) -> Result<(), RegistryError> {
    match config.extra.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(RegistryError::UnknownOption {
            engine,
            key: key.clone(),
            hint: if known.is_empty() {
                " (it takes none)".to_string()
            } else {
                format!(" (it takes: {})", known.join(", "))
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testing_engines_open() {
        let region = RegionOptions::default();
        let config = EngineConfig { workers: 2, ..Default::default() };
        for name in ["noop", "mem"] {
            let engine = open_engine(name, &region, &config).unwrap();
            assert_eq!(engine.name(), name);
            assert!(engine.region().is_none());
        }
    }

    #[test]
    fn the_default_log_bytes_fits_n_logs_and_an_explicit_one_is_kept() {
        let wal = |pairs: &[(&str, &str)]| {
            let mut config = EngineConfig { workers: 16, ..Default::default() };
            for (k, v) in pairs {
                config.extra.insert(k.to_string(), v.to_string());
            }
            region_engine_options("wal", &config).unwrap()
        };
        assert_eq!(wal(&[]).wal.log_bytes, 64 << 20, "a central log keeps 64 MiB");
        let o = wal(&[("log", "txn:4")]);
        assert!(o.wal.log_bytes > 64 << 20, "{}", o.wal.log_bytes);
        // It opens (64 MiB for 4 logs of 16 workers' margin did not).
        let size = o.wal.log_bytes + (48 << 20);
        let region = pmem::Region::open(&RegionOptions::new(pmem::Medium::Dram, size)).unwrap();
        drop(engines::wal::Wal::open(region, &o).unwrap());
        // An explicit log_bytes is kept, and too small says what would fit.
        let o = wal(&[("log", "txn:4"), ("log_bytes", "64MiB")]);
        assert_eq!(o.wal.log_bytes, 64 << 20);
        let region = pmem::Region::open(&RegionOptions::new(pmem::Medium::Dram, size)).unwrap();
        match engines::wal::Wal::open(region, &o) {
            Err(DbError::Invalid(m)) => assert!(m.contains("leave log_bytes unset"), "{m}"),
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("4 logs of 16 MiB opened for 16 workers"),
        }
    }

    /// Regression: a too-small `log_bytes` was told to use "at least" the default (64 MiB),
    /// while much less opens (2 workers, `txn:2`: 8 MiB was refused with "use at least 64 MiB",
    /// 16 MiB opened). The minimum the error names now opens, and 1 MiB less does not.
    #[test]
    fn a_too_small_log_bytes_names_the_minimum_that_opens() {
        for (workers, log) in [(2usize, "txn:2"), (2, "page:4"), (16, "txn:4"), (3, "page:3")] {
            let open = |log_bytes: u64| {
                let mut config = EngineConfig { workers, ..Default::default() };
                config.extra.insert("log".into(), log.into());
                config.extra.insert("log_bytes".into(), format!("{}MiB", log_bytes >> 20));
                let o = region_engine_options("wal", &config).unwrap();
                let size = log_bytes + (48 << 20);
                let region = pmem::Region::open(&RegionOptions::new(pmem::Medium::Dram, size));
                engines::wal::Wal::open(region.unwrap(), &o).map(drop)
            };
            let said = match open(1 << 20) {
                Err(DbError::Invalid(m)) => {
                    let at = m.find("use at least ").expect("names a minimum") + 13;
                    let mib: u64 = m[at..].split(' ').next().unwrap().parse().expect("MiB");
                    mib << 20
                }
                other => panic!("{workers} workers, {log}: 1 MiB gave {:?}", other.err()),
            };
            assert!(said < 64 << 20 || workers > 8, "{workers} workers, {log}: {said}");
            open(said).unwrap_or_else(|e| panic!("{workers} workers, {log}: the minimum {e}"));
            assert!(open(said - (1 << 20)).is_err(), "{workers} workers, {log}: below the minimum");
        }
    }

    #[test]
    fn unknown_names_and_options_are_errors() {
        let region = RegionOptions::default();
        let err = open_engine("nope", &region, &EngineConfig::default()).err().unwrap();
        assert!(err.to_string().contains("known: noop, mem"), "{err}");
        let mut config = EngineConfig::default();
        config.extra.insert("x".into(), "1".into());
        let err = open_engine("mem", &region, &config).err().unwrap();
        assert!(err.to_string().contains("has no option `x`"), "{err}");
    }
}

//! Opening an engine by name on a region (or, for peers, a directory): the one place that knows
//! every engine nvmdb can run, so the CLI, sweeps and the crash tester accept the same names.
//!
//! Three kinds of engine:
//! - **testing** (`noop`, `mem`, from `workloads::testing`): no region; `noop` measures the
//!   driver's own overhead, `mem` is a correct volatile reference;
//! - **region** engines (`crates/engines`: `inplace`, later `wal`, `group`, `cow`, `lsm`): opened
//!   on a `pmem::Region`, formatting a blank one and recovering otherwise;
//! - **peers** (`crates/peers`: `sqlite`, `lmdb`, `redb`, `pmemobj`, `rocksdb`): opened in a directory
//!   (`RegionOptions::path`).
//!
//! Invariant: every name in [`ENGINES`] opens through [`open_engine`]; an unknown name is an
//! error that lists the known ones.

use pmem::{Region, RegionOptions};
use serde::Serialize;
use std::collections::BTreeMap;
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
}

/// Every engine, in the order `--help` and `--list` show them.
pub const ENGINES: &[EngineInfo] = &[
    EngineInfo {
        name: "noop",
        kind: EngineKind::Testing,
        about: "does nothing; measures the benchmark driver's own overhead",
        stores_data: false,
    },
    EngineInfo {
        name: "mem",
        kind: EngineKind::Testing,
        about: "volatile in-memory reference engine (key locks, undo), nothing persistent",
        stores_data: true,
    },
    EngineInfo {
        name: "inplace",
        kind: EngineKind::Region,
        about: "In-Place Updates (Pelley et al. VLDB 2014 §3.2): per-txn undo logs, data in NVRAM",
        stores_data: true,
    },
    EngineInfo {
        name: "wal",
        kind: EngineKind::Region,
        about:
            "NVRAM Disk-Replacement (Pelley et al. VLDB 2014 §3.2): write-ahead log, buffer pool",
        stores_data: true,
    },
    EngineInfo {
        name: "group",
        kind: EngineKind::Region,
        about: "NVRAM Group Commit (Pelley et al. VLDB 2014 §3.2): batches persisted atomically",
        stores_data: true,
    },
    EngineInfo {
        name: "cow",
        kind: EngineKind::Region,
        about: "CoW / NVM-CoW (Arulraj et al. SIGMOD 2015 §3.2, §4.2): copy-on-write B+tree, \
                master record swap; io=fs|nvm, group_commit_ms",
        stores_data: true,
    },
    EngineInfo {
        name: "sqlite-nvwal",
        kind: EngineKind::Region,
        about: "NVWAL (Kim et al. ASPLOS 2016): SQLite with its WAL as differential records in \
                NVRAM (VFS on the region); --engine-opt nvwal=ls|e|cs diff=on|range|off \
                heap=user|per-frame",
        stores_data: true,
    },
    EngineInfo {
        name: "lsm",
        kind: EngineKind::Region,
        about: "Log-structured (Arulraj et al. SIGMOD 2015 §3.3/§4.3): memtable, log, sorted runs",
        stores_data: true,
    },
    EngineInfo {
        name: "sqlite",
        kind: EngineKind::Peer,
        about: "SQLite, WAL journal, synchronous=FULL: one writer, readers never wait",
        stores_data: true,
    },
    EngineInfo {
        name: "lmdb",
        kind: EngineKind::Peer,
        about: "LMDB (heed), synchronous commits: one writer, readers never wait",
        stores_data: true,
    },
    EngineInfo {
        name: "redb",
        kind: EngineKind::Peer,
        about: "redb, Durability::Immediate: one writer, readers never wait",
        stores_data: true,
    },
    #[cfg(feature = "pmemobj")]
    EngineInfo {
        name: "pmemobj",
        kind: EngineKind::Peer,
        about: "PMDK libpmemobj undo-log transactions on a B+tree: one writer, readers never wait",
        stores_data: true,
    },
    #[cfg(feature = "rocksdb")]
    EngineInfo {
        name: "rocksdb",
        kind: EngineKind::Peer,
        about:
            "RocksDB TransactionDB (system librocksdb), WAL sync=true: key locks without waiting",
        stores_data: true,
    },
];

/// Names of every engine.
pub fn names() -> Vec<&'static str> {
    ENGINES.iter().map(|e| e.name).collect()
}

/// The engine called `name`.
pub fn lookup(name: &str) -> Option<&'static EngineInfo> {
    ENGINES.iter().find(|e| e.name == name)
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
            Some(dir) => open_peer(info, dir, config),
            None => open_peer_private(info, config),
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

const REGION_OPTS: &[&str] = &["undo_pages", "sys_undo_pages", "node_capacity", "fault"];
/// What `inplace` accepts beyond [`REGION_OPTS`].
const INPLACE_OPTS: &[&str] =
    &["undo_pages", "sys_undo_pages", "node_capacity", "fault", "protocol", "checksums"];
/// What `group` accepts beyond [`REGION_OPTS`].
const GROUP_OPTS: &[&str] = &[
    "undo_pages",
    "sys_undo_pages",
    "node_capacity",
    "fault",
    "batch_period_ms",
    "persist_threads",
    "staging_bytes",
    "batch_txns",
    "checksums",
];
/// What `cow` accepts (no undo logs).
const COW_OPTS: &[&str] = &["node_capacity", "fault", "io", "group_commit_ms", "checksums"];
/// What `wal` accepts beyond [`REGION_OPTS`].
const WAL_OPTS: &[&str] = &[
    "undo_pages",
    "sys_undo_pages",
    "node_capacity",
    "fault",
    "log_bytes",
    "max_dirty_pages",
    "page_flush",
    "flusher",
    "log_insert",
    "log_force",
    "io",
    "log",
    "cache",
    "checksums",
];

/// What `lsm` accepts.
const LSM_OPTS: &[&str] = &["fault", "io", "memtable_bytes", "checksums"];

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

/// The options engine `name` takes through `--engine-opt` (none for a name it does not know).
pub fn accepted_options(name: &str) -> &'static [&'static str] {
    match name {
        "group" => GROUP_OPTS,
        "wal" => WAL_OPTS,
        "inplace" => INPLACE_OPTS,
        "cow" => COW_OPTS,
        "lsm" => LSM_OPTS,
        n if n == sqlite_nvwal::ENGINE_NAME => sqlite_nvwal::OPTION_KEYS,
        _ => &[],
    }
}

/// The smallest region engine `name` formats with `config` (`None`: an engine that sizes
/// itself to its region, or keeps none); see `engines::min_region_bytes`.
pub fn min_region_bytes(name: &str, config: &EngineConfig) -> Result<Option<u64>, RegistryError> {
    let Some(info) = lookup(name).filter(|i| engines::ENGINES.contains(&i.name)) else {
        return Ok(None);
    };
    let options = region_engine_options(info.name, config)?;
    Ok(Some(engines::min_region_bytes(info.name, &options)?))
}

/// The region size a command uses without `--size`: `base`, the size it chose for the workload
/// (what `inplace` needs for it), plus the engine's own areas (a `wal` log, a `group` batch
/// log, `lsm`'s areas), so every engine runs with its defaults.
pub fn default_region_bytes(
    name: &str,
    config: &EngineConfig,
    base: u64,
) -> Result<u64, RegistryError> {
    if name == sqlite_nvwal::ENGINE_NAME {
        // Its log is half the region, at least 4 MiB (unless log_bytes says otherwise), next to
        // a database of at least 1 MiB: a region under 8 MiB gets the log on top.
        let log_bytes = match config.extra.get("log_bytes") {
            Some(v) => bench::units::parse_bytes(v).unwrap_or(4 << 20),
            None => 4 << 20,
        };
        return Ok(if base < 8 << 20 { base + log_bytes + (1 << 20) } else { base });
    }
    let Some(info) = lookup(name).filter(|i| engines::ENGINES.contains(&i.name)) else {
        return Ok(base);
    };
    let options = region_engine_options(info.name, config)?;
    Ok(base + engines::area_bytes(info.name, &options)?)
}

/// Bytes a default region leaves for a workload the workload estimates at `estimate` bytes of
/// an `inplace` database: SQLite's pages hold rows less densely (B-tree cells with 4 KiB pages
/// held 1,000,000 rows of 1,016 bytes in more than 1.2 GiB).
pub fn workload_room(name: &str, estimate: u64) -> u64 {
    if name == sqlite_nvwal::ENGINE_NAME {
        estimate.saturating_mul(2)
    } else {
        estimate
    }
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

/// Maps the CLI's engine configuration to `engines::EngineOptions` (defaults from there).
pub fn region_engine_options(
    engine: &'static str,
    config: &EngineConfig,
) -> Result<engines::EngineOptions, RegistryError> {
    let accepted = match engine {
        "group" | "wal" | "inplace" | "cow" | "lsm" => accepted_options(engine),
        _ => REGION_OPTS,
    };
    reject_extra(engine, config, accepted)?;
    let mut o = engines::EngineOptions {
        workers: (config.workers.max(1)) as u32,
        cache_pages: config.cache_pages,
        cache_policy: config.cache_policy,
        ..Default::default()
    };
    for (k, v) in &config.extra {
        match k.as_str() {
            "undo_pages" => o.undo_pages = parse_opt(engine, k, v)?,
            "sys_undo_pages" => o.sys_undo_pages = parse_opt(engine, k, v)?,
            "node_capacity" => o.node_capacity = parse_opt(engine, k, v)?,
            "batch_period_ms" => o.batch_period_ms = parse_opt(engine, k, v)?,
            "persist_threads" => o.persist_threads = parse_opt(engine, k, v)?,
            "staging_bytes" => {
                o.staging_bytes = bench::units::parse_bytes(v).map_err(|e| {
                    RegistryError::Db(DbError::Invalid(format!("staging_bytes={v}: {e}")))
                })?
            }
            "batch_txns" => o.batch_txns = parse_opt(engine, k, v)?,
            "log_bytes" => {
                o.log_bytes = bench::units::parse_bytes(v).map_err(|e| {
                    RegistryError::Db(DbError::Invalid(format!("log_bytes={v}: {e}")))
                })?
            }
            "memtable_bytes" => {
                o.memtable_bytes = bench::units::parse_bytes(v).map_err(|e| {
                    RegistryError::Db(DbError::Invalid(format!("memtable_bytes={v}: {e}")))
                })?
            }
            "max_dirty_pages" => o.max_dirty_pages = parse_opt(engine, k, v)?,
            "group_commit_ms" => o.group_commit_ms = parse_opt(engine, k, v)?,
            "io" => {
                o.io = engines::wal::Io::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!("io must be nvm or fs, not `{v}`")))
                })?
            }
            "log_insert" => {
                o.log_insert = engines::wal::LogInsert::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "log_insert must be consolidated, aether or locked, not `{v}`"
                    )))
                })?
            }
            "log_force" => {
                o.log_force = engines::wal::LogForce::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "log_force must be pipelined or inline, not `{v}`"
                    )))
                })?
            }
            "log" => {
                o.log = engines::wal::LogLayout::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "log must be central, txn:N or page:N (N from 1 to 64), not `{v}`"
                    )))
                })?
            }
            "cache" => {
                o.cache = engines::wal::Cache::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "cache must be volatile or durable, not `{v}`"
                    )))
                })?
            }
            "checksums" => {
                // `true`/`false` too: a run's JSON config records the resolved option so.
                o.checksums = match v.as_str() {
                    "on" | "true" => true,
                    "off" | "false" => false,
                    _ => {
                        return Err(RegistryError::Db(DbError::Invalid(format!(
                            "checksums must be on or off, not `{v}`"
                        ))))
                    }
                }
            }
            "protocol" => {
                o.protocol = engines::inplace::Protocol::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "protocol must be lean or pelley, not `{v}`"
                    )))
                })?
            }
            "page_flush" => {
                o.page_flush = engines::wal::PageFlush::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "page_flush must be paper or direct, not `{v}`"
                    )))
                })?
            }
            "flusher" => {
                o.flusher = engines::wal::Flusher::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "flusher must be checkpoint or pelley, not `{v}`"
                    )))
                })?
            }
            "fault" => {
                o.fault = Some(engines::Fault::parse(v).ok_or_else(|| {
                    RegistryError::Db(DbError::Invalid(format!(
                        "unknown fault `{v}` ({})",
                        engines::Fault::NAMES
                    )))
                })?)
            }
            _ => unreachable!("rejected above"),
        }
    }
    if engine == "wal" && !config.extra.contains_key("log_bytes") {
        // The default grows with the number of logs (and workers): see its doc.
        o.log_bytes = engines::wal::default_log_bytes(&o);
    }
    Ok(o)
}

fn open_region_engine(
    info: &'static EngineInfo,
    region: Region,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    if info.name == sqlite_nvwal::ENGINE_NAME {
        reject_extra(info.name, config, sqlite_nvwal::OPTION_KEYS)?;
        let engine = sqlite_nvwal::engine::open_with(region, config.workers, &config.extra)?;
        return Ok(Box::new(engine));
    }
    let options = region_engine_options(info.name, config)?;
    Ok(engines::open(info.name, region, &options)?)
}

/// Options a peer accepts through `--engine-opt` (`pool_bytes`: size of a new PMDK pool, used by
/// `pmemobj` only).
const PEER_OPTS: &[&str] = &["durability", "cache_bytes", "writer_wait_ms", "pool_bytes"];

fn open_peer(
    info: &'static EngineInfo,
    dir: &std::path::Path,
    config: &EngineConfig,
) -> Result<Box<dyn Engine>, RegistryError> {
    reject_extra(info.name, config, PEER_OPTS)?;
    let mut o = peers::PeerOptions { workers: config.workers.max(1), ..Default::default() };
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
    match open_peer(info, &dir, config) {
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
        assert_eq!(wal(&[]).log_bytes, 64 << 20, "a central log keeps 64 MiB");
        let o = wal(&[("log", "txn:4")]);
        assert!(o.log_bytes > 64 << 20, "{}", o.log_bytes);
        // It opens (64 MiB for 4 logs of 16 workers' margin did not).
        let size = o.log_bytes + (48 << 20);
        let region = pmem::Region::open(&RegionOptions::new(pmem::Medium::Dram, size)).unwrap();
        drop(engines::wal::Wal::open(region, &o).unwrap());
        // An explicit log_bytes is kept, and too small says what would fit.
        let o = wal(&[("log", "txn:4"), ("log_bytes", "64MiB")]);
        assert_eq!(o.log_bytes, 64 << 20);
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

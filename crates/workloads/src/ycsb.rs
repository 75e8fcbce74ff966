//! YCSB: the core workloads A-F (Cooper et al., "Benchmarking Cloud Serving Systems with YCSB",
//! SoCC 2010, §4.1 and YCSB's `CoreWorkload`) and the four mixes of N-Store (Arulraj, Pavlo,
//! Dulloor, SIGMOD 2015, §5.1: read-only, read-heavy, balanced, write-heavy, under low or high
//! skew).
//!
//! N-Store's YCSB as its code defines it: 2 M keys (scale to the machine), an integer key and 10
//! fields of 100 bytes, one operation per transaction, updates rewriting all 10 fields, write
//! fractions 0 / 0.1 / 0.5 / 0.9, and `--distribution nstore-skew --workload-opt skew=0.1`
//! (low) or `skew=0.5` (high), see [`crate::generators::NstoreSkew`]. `--skew low|high` without
//! that distribution keeps the hotspot guess (50% → 20%, 90% → 10%) of earlier versions.
//!
//! One table, `usertable`, of `field_count × field_length`-byte records keyed by `u64`. Key
//! number `n` (0-based, loaded `0 .. record_count`, inserted after) lives at key
//! `fnvhash64(n)` (YCSB's default hashed insert order) or at `n` with `ordered_inserts`.
//!
//! Row layout (little-endian): `keynum u64 @0 | version u64 @8 | checksum u64 @16 | fields @24`.
//! The checksum is `"YCSB" << 32 | crc32c(bytes 0..16 ++ bytes 24..)`, so a torn, zeroed or
//! misplaced row is detected. Updates read the row, bump its version under the row lock, and
//! rewrite version, checksum and the new field(s).
//!
//! Invariant: every row is whole (checksum holds), sits at the key of its key number, and an
//! acknowledged write of version `v` leaves the row at a version `>= v`.

use crate::generators::{
    check_theta, fnvhash64, Hotspot, InsertCounter, NstoreSkew, ScrambledZipfian, SkewedLatest,
    WorkerRng, Zipfian,
};
use crate::util::{
    create_table, get_u64, lookup_table, put_u64, read_row, scan_table, Loader, Outcome, Retrier,
};
use crate::{Ack, TxnDone, Worker, Workload};
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use storage::{DbError, Engine, TableId, Txn};

/// Table name.
pub const TABLE: &str = "usertable";

const OFF_KEYNUM: usize = 0;
const OFF_VERSION: usize = 8;
const OFF_CHECKSUM: usize = 16;
const OFF_FIELDS: usize = 24;
const CHECK_TAG: u64 = 0x5943_5342;
/// Upper bound on record counts (key numbers must stay far from the hash range's edge).
const MAX_RECORDS: u64 = 1 << 40;

/// Where requests go (YCSB's `requestdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestDistribution {
    Uniform,
    /// Plain zipfian over key numbers (popular = smallest key numbers).
    Zipfian,
    /// YCSB's "zipfian": popular key numbers scattered by FNV (what A-C, E, F use).
    ScrambledZipfian,
    /// YCSB's skewed-latest: recently inserted keys are popular (D).
    Latest,
    /// YCSB's hotspot: `hot_ops_fraction` of requests to the first `hot_set_fraction` of the
    /// key numbers, the rest uniform over the others (the `--skew low|high` presets).
    Hotspot,
    /// N-Store's skew (its code, not the paper's words): `nstore_skew` (α) of requests to the
    /// first ⌈10α⌉ key numbers, the rest uniform over the top (1 − α) of them.
    NstoreSkew,
}

/// Scan lengths (YCSB's `scanlengthdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScanLengthDistribution {
    Uniform,
    Zipfian,
}

/// The hotspot skew settings of the `--skew low|high` presets: a reading of Arulraj et al.
/// §5.1's "low" and "high" skew. N-Store's code skews differently: see
/// [`RequestDistribution::NstoreSkew`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Skew {
    /// 50% of the accesses go to 20% of the records.
    Low,
    /// 90% of the accesses go to 10% of the records.
    High,
}

impl Skew {
    /// `(hot_set_fraction, hot_ops_fraction)`.
    pub fn fractions(self) -> (f64, f64) {
        match self {
            Skew::Low => (0.2, 0.5),
            Skew::High => (0.1, 0.9),
        }
    }

    pub fn parse(s: &str) -> Result<Skew, String> {
        match s {
            "low" => Ok(Skew::Low),
            "high" => Ok(Skew::High),
            _ => Err(format!("unknown skew {s:?}: use low or high")),
        }
    }
}

/// YCSB's options. `Default` is YCSB `CoreWorkload`'s defaults (95% reads, 5% updates, uniform,
/// 10 fields of 100 bytes, θ = 0.99, scans up to 1000, hashed inserts) with 1,000,000 records
/// (YCSB's property files say 1000, too small to measure anything; N-Store used 2M).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct YcsbConfig {
    pub record_count: u64,
    pub field_count: u32,
    pub field_length: u32,
    /// Operation weights (normalised, as YCSB's discrete generator does).
    pub read_proportion: f64,
    pub update_proportion: f64,
    pub insert_proportion: f64,
    pub scan_proportion: f64,
    pub read_modify_write_proportion: f64,
    pub request_distribution: RequestDistribution,
    /// Zipfian constant θ, in (0, 1).
    pub zipfian_theta: f64,
    /// Hotspot: fraction of the records that are hot, in (0, 1].
    pub hot_set_fraction: f64,
    /// Hotspot: fraction of the requests that go to the hot set, in [0, 1].
    pub hot_ops_fraction: f64,
    /// N-Store skew α, in (0, 1): 0.1 is N-Store's "low", 0.5 its "high".
    pub nstore_skew: f64,
    pub max_scan_length: u32,
    pub scan_length_distribution: ScanLengthDistribution,
    /// Updates rewrite every field (YCSB `writeallfields`) instead of one random field.
    pub write_all_fields: bool,
    /// Key number `n` at key `n` instead of `fnvhash64(n)`.
    pub ordered_inserts: bool,
    /// Conflict retries per transaction before the conflict is returned.
    pub max_retries: u32,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            record_count: 1_000_000,
            field_count: 10,
            field_length: 100,
            read_proportion: 0.95,
            update_proportion: 0.05,
            insert_proportion: 0.0,
            scan_proportion: 0.0,
            read_modify_write_proportion: 0.0,
            request_distribution: RequestDistribution::Uniform,
            zipfian_theta: ScrambledZipfian::DEFAULT_THETA,
            hot_set_fraction: 0.2,
            hot_ops_fraction: 0.8,
            nstore_skew: 0.1,
            max_scan_length: 1000,
            scan_length_distribution: ScanLengthDistribution::Uniform,
            write_all_fields: false,
            ordered_inserts: false,
            max_retries: 1000,
        }
    }
}

/// Names [`YcsbConfig::preset`] accepts.
pub const PRESETS: &[&str] =
    &["a", "b", "c", "d", "e", "f", "read-only", "read-heavy", "balanced", "write-heavy"];

impl YcsbConfig {
    /// A core workload (`a`..`f`, YCSB's `workloads/workloada`..`f`) or an N-Store mix
    /// (`read-only`, `read-heavy`, `balanced`, `write-heavy`, with [`Skew::High`]; see
    /// [`YcsbConfig::nstore`]).
    pub fn preset(name: &str) -> Result<YcsbConfig, String> {
        let name = name.to_ascii_lowercase();
        let zipf = RequestDistribution::ScrambledZipfian;
        let base = YcsbConfig { request_distribution: zipf, ..YcsbConfig::default() };
        let mix = |read, update, insert, scan, rmw| YcsbConfig {
            read_proportion: read,
            update_proportion: update,
            insert_proportion: insert,
            scan_proportion: scan,
            read_modify_write_proportion: rmw,
            ..base.clone()
        };
        Ok(match name.as_str() {
            "a" => mix(0.5, 0.5, 0.0, 0.0, 0.0),
            "b" => mix(0.95, 0.05, 0.0, 0.0, 0.0),
            "c" => mix(1.0, 0.0, 0.0, 0.0, 0.0),
            "d" => YcsbConfig {
                request_distribution: RequestDistribution::Latest,
                ..mix(0.95, 0.0, 0.05, 0.0, 0.0)
            },
            "e" => YcsbConfig { max_scan_length: 100, ..mix(0.0, 0.0, 0.05, 0.95, 0.0) },
            "f" => mix(0.5, 0.0, 0.0, 0.0, 0.5),
            "read-only" | "read-heavy" | "balanced" | "write-heavy" => {
                Self::nstore(&name, Skew::High)?
            }
            _ => {
                return Err(format!("unknown YCSB mix {name:?}: use one of {}", PRESETS.join(", ")))
            }
        })
    }

    /// An N-Store mix: `read-only` (100% reads), `read-heavy` (90/10 reads/updates),
    /// `balanced` (50/50), `write-heavy` (10/90), all under the hotspot distribution of `skew`.
    pub fn nstore(mix: &str, skew: Skew) -> Result<YcsbConfig, String> {
        let updates = match mix {
            "read-only" => 0.0,
            "read-heavy" => 0.1,
            "balanced" => 0.5,
            "write-heavy" => 0.9,
            _ => {
                return Err(format!(
                    "unknown N-Store mix {mix:?}: use read-only, read-heavy, balanced, write-heavy"
                ))
            }
        };
        let (hot_set_fraction, hot_ops_fraction) = skew.fractions();
        Ok(YcsbConfig {
            read_proportion: 1.0 - updates,
            update_proportion: updates,
            request_distribution: RequestDistribution::Hotspot,
            hot_set_fraction,
            hot_ops_fraction,
            // N-Store's update rewrites all ten fields of the tuple.
            write_all_fields: true,
            ..YcsbConfig::default()
        })
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> u64 {
        OFF_FIELDS as u64 + self.field_count as u64 * self.field_length as u64
    }

    fn proportions(&self) -> [f64; 5] {
        [
            self.read_proportion,
            self.update_proportion,
            self.insert_proportion,
            self.scan_proportion,
            self.read_modify_write_proportion,
        ]
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.record_count == 0 || self.record_count > MAX_RECORDS {
            return Err(format!(
                "record_count must be 1..={MAX_RECORDS}, got {}",
                self.record_count
            ));
        }
        if self.field_count == 0 || self.field_length == 0 {
            return Err("field_count and field_length must be at least 1".to_string());
        }
        if self.row_bytes() > storage::engine::MAX_ROW_BYTES as u64 {
            return Err(format!(
                "rows of {} fields × {} bytes (+{OFF_FIELDS} header) exceed the engines' \
                 {}-byte row limit",
                self.field_count,
                self.field_length,
                storage::engine::MAX_ROW_BYTES
            ));
        }
        let names = ["read", "update", "insert", "scan", "read_modify_write"];
        for (p, name) in self.proportions().iter().zip(names) {
            if !p.is_finite() || *p < 0.0 {
                return Err(format!("{name}_proportion must be a non-negative number, got {p}"));
            }
        }
        if self.proportions().iter().sum::<f64>() <= 0.0 {
            return Err("all operation proportions are zero: nothing to run".to_string());
        }
        let uses_zipf = matches!(
            self.request_distribution,
            RequestDistribution::Zipfian
                | RequestDistribution::ScrambledZipfian
                | RequestDistribution::Latest
        ) || (self.scan_proportion > 0.0
            && self.scan_length_distribution == ScanLengthDistribution::Zipfian);
        if uses_zipf {
            check_theta(self.zipfian_theta)?;
        }
        if self.request_distribution == RequestDistribution::Hotspot {
            Hotspot::new(0, 0, self.hot_set_fraction, self.hot_ops_fraction)?;
        }
        if self.request_distribution == RequestDistribution::NstoreSkew {
            NstoreSkew::new(self.record_count, self.nstore_skew)?;
        }
        if self.scan_proportion > 0.0 && self.max_scan_length == 0 {
            return Err("max_scan_length must be at least 1 when scans are in the mix".to_string());
        }
        Ok(())
    }

    /// The table key of key number `keynum`.
    pub fn key_of(&self, keynum: u64) -> u64 {
        if self.ordered_inserts {
            keynum
        } else {
            fnvhash64(keynum)
        }
    }
}

/// One YCSB operation with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOp {
    Read { keynum: u64 },
    Update { keynum: u64, field: u32 },
    Insert { keynum: u64 },
    Scan { keynum: u64, len: u32 },
    ReadModifyWrite { keynum: u64, field: u32 },
}

impl YcsbOp {
    pub fn kind(&self) -> &'static str {
        match self {
            YcsbOp::Read { .. } => "read",
            YcsbOp::Update { .. } => "update",
            YcsbOp::Insert { .. } => "insert",
            YcsbOp::Scan { .. } => "scan",
            YcsbOp::ReadModifyWrite { .. } => "read-modify-write",
        }
    }
}

struct Shared {
    cfg: YcsbConfig,
    counter: InsertCounter,
    /// Prototypes whose zeta is computed once.
    zipfian: Option<Zipfian>,
    scrambled: Option<ScrambledZipfian>,
    hotspot: Option<Hotspot>,
    nstore: Option<NstoreSkew>,
    scan_zipfian: Option<Zipfian>,
}

/// The YCSB workload. Build with [`Ycsb::new`].
pub struct Ycsb {
    shared: Arc<Shared>,
}

impl Ycsb {
    pub fn new(cfg: YcsbConfig) -> Result<Ycsb, String> {
        cfg.validate()?;
        let n = cfg.record_count;
        let theta = cfg.zipfian_theta;
        let zipfian = match cfg.request_distribution {
            RequestDistribution::Zipfian => Some(Zipfian::new(0, n - 1, theta)?),
            _ => None,
        };
        let scrambled = match cfg.request_distribution {
            RequestDistribution::ScrambledZipfian => Some(ScrambledZipfian::new(0, n - 1, theta)?),
            _ => None,
        };
        let hotspot = match cfg.request_distribution {
            RequestDistribution::Hotspot => {
                Some(Hotspot::new(0, n - 1, cfg.hot_set_fraction, cfg.hot_ops_fraction)?)
            }
            _ => None,
        };
        let nstore = match cfg.request_distribution {
            RequestDistribution::NstoreSkew => Some(NstoreSkew::new(n, cfg.nstore_skew)?),
            _ => None,
        };
        let scan_zipfian = if cfg.scan_proportion > 0.0
            && cfg.scan_length_distribution == ScanLengthDistribution::Zipfian
        {
            Some(Zipfian::new(1, cfg.max_scan_length.max(1) as u64, theta)?)
        } else {
            None
        };
        let counter = InsertCounter::new(n);
        Ok(Ycsb {
            shared: Arc::new(Shared {
                cfg,
                counter,
                zipfian,
                scrambled,
                hotspot,
                nstore,
                scan_zipfian,
            }),
        })
    }

    pub fn config(&self) -> &YcsbConfig {
        &self.shared.cfg
    }

    /// The operation stream of one worker, without an engine (for tests and tools). Inserts
    /// draw from the workload's shared insert counter.
    pub fn inputs(&self, worker: usize, seed: u64) -> YcsbInputs {
        YcsbInputs::new(self.shared.clone(), worker, seed)
    }

    fn table(&self, engine: &dyn Engine) -> Result<TableId, DbError> {
        lookup_table(engine, TABLE, self.shared.cfg.row_bytes() as u32)
    }
}

/// Checks a row read during a run. An all-zero row passes: that is what [`NoopEngine`] returns,
/// and the checker (which does reject it) is the authority on stored data.
///
/// [`NoopEngine`]: crate::testing::NoopEngine
fn verify_run(cfg: &YcsbConfig, key: u64, row: &[u8]) -> Result<(), DbError> {
    // A stored row's checksum word is never 0 (it carries `CHECK_TAG`), so only a row whose
    // word is 0 is looked at whole, a word at a time (a byte loop cost the driver 0.3 µs a read).
    let zero_word = row.get(OFF_CHECKSUM..OFF_CHECKSUM + 8).is_some_and(|w| w == [0; 8]);
    if zero_word && row.chunks(8).all(|w| w.iter().fold(0, |a, b| a | b) == 0) {
        return Ok(());
    }
    verify_row(cfg, key, row).map(|_| ()).map_err(DbError::Corrupt)
}

fn checksum(row: &[u8]) -> u64 {
    let c = storage::crc::crc32c(&row[..OFF_CHECKSUM]);
    let c = storage::crc::crc32c_append(c, &row[OFF_FIELDS..]);
    (CHECK_TAG << 32) | c as u64
}

/// Checks a row's checksum and placement; returns `(keynum, version)`.
fn verify_row(cfg: &YcsbConfig, key: u64, row: &[u8]) -> Result<(u64, u64), String> {
    if row.len() as u64 != cfg.row_bytes() {
        return Err(format!(
            "key {key}: row has {} bytes, expected {}",
            row.len(),
            cfg.row_bytes()
        ));
    }
    let stored = get_u64(row, OFF_CHECKSUM);
    let computed = checksum(row);
    if stored != computed {
        return Err(format!(
            "key {key}: checksum {stored:#x} does not match contents ({computed:#x}): torn or \
             corrupted row"
        ));
    }
    let keynum = get_u64(row, OFF_KEYNUM);
    if cfg.key_of(keynum) != key {
        return Err(format!(
            "key {key}: holds the row of key number {keynum}, which belongs at key {}",
            cfg.key_of(keynum)
        ));
    }
    let version = get_u64(row, OFF_VERSION);
    if version == 0 {
        return Err(format!("key {key}: version 0 (rows start at version 1)"));
    }
    Ok((keynum, version))
}

/// Fills a fresh row for `keynum` at version 1.
fn fill_new_row(row: &mut [u8], keynum: u64, rng: &mut WorkerRng) {
    put_u64(row, OFF_KEYNUM, keynum);
    put_u64(row, OFF_VERSION, 1);
    rng.fill_bytes(&mut row[OFF_FIELDS..]);
    let c = checksum(row);
    put_u64(row, OFF_CHECKSUM, c);
}

impl Workload for Ycsb {
    fn resolved_config(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }

    /// Rows plus a quarter for slot headers, half-full heap pages and the index (`inplace` held
    /// the default 1,000,000 rows of 1,016 bytes in 1.19 GB, 1.17x the row bytes).
    fn estimated_bytes(&self) -> Option<u64> {
        let cfg = self.config();
        Some(cfg.record_count.saturating_mul(cfg.row_bytes()).saturating_mul(5) / 4)
    }

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        let cfg = &self.shared.cfg;
        let table = create_table(engine, TABLE, cfg.row_bytes() as u32, cfg.record_count)?;
        let mut loader = Loader::new(engine, progress, cfg.record_count);
        let mut rng = WorkerRng::new(0x4c4f_4144); // the load is the same for every run seed
        let mut row = vec![0u8; cfg.row_bytes() as usize];
        for keynum in 0..cfg.record_count {
            fill_new_row(&mut row, keynum, &mut rng);
            loader.insert(table, cfg.key_of(keynum), &row)?;
        }
        loader.finish()?;
        self.shared.counter.reset(cfg.record_count);
        Ok(())
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        let table = self.table(engine)?;
        let cfg = &self.shared.cfg;
        let mut next = cfg.record_count;
        if cfg.insert_proportion > 0.0 || cfg.request_distribution == RequestDistribution::Latest {
            // Resume the insert sequence after the highest key number present.
            scan_table(engine, table, 0, u64::MAX, &mut |_, row| {
                if row.len() > OFF_KEYNUM + 8 {
                    let keynum = get_u64(row, OFF_KEYNUM);
                    if keynum < MAX_RECORDS * 2 {
                        next = next.max(keynum + 1);
                    }
                }
                Ok(())
            })
            .map_err(DbError::Corrupt)?;
        }
        self.shared.counter.reset(next);
        Ok(())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(YcsbWorker {
            inputs: YcsbInputs::new(self.shared.clone(), worker, seed),
            worker,
            retrier: Retrier::new(self.shared.cfg.max_retries, seed, worker),
            table: None,
            row: Vec::new(),
            data: Vec::new(),
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        let cfg = &self.shared.cfg;
        let table = self.table(engine).map_err(|e| e.to_string())?;
        let n = cfg.record_count as usize;
        let mut seen = vec![0u64; n.div_ceil(64)];
        scan_table(engine, table, 0, u64::MAX, &mut |key, row| {
            let (keynum, _) = verify_row(cfg, key, row)?;
            if keynum < cfg.record_count {
                seen[(keynum / 64) as usize] |= 1 << (keynum % 64);
            }
            Ok(())
        })?;
        for (i, word) in seen.iter().enumerate() {
            if *word != u64::MAX {
                for bit in 0..64 {
                    let keynum = i as u64 * 64 + bit;
                    if keynum < cfg.record_count && word & (1 << bit) == 0 {
                        return Err(format!(
                            "loaded record {keynum} (key {}) is missing",
                            cfg.key_of(keynum)
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let cfg = &self.shared.cfg;
        let table = self.table(engine).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for ack in acks {
            if ack.table != table {
                return Err(format!("ack for table {} which YCSB does not own", ack.table));
            }
            if !crate::util::check_read(engine, table, ack.key, &mut row)? {
                return Err(format!(
                    "acknowledged write of key {} (version {}) is lost: the row is missing",
                    ack.key, ack.value
                ));
            }
            let (_, version) = verify_row(cfg, ack.key, &row)?;
            if version < ack.value {
                return Err(format!(
                    "acknowledged write of key {} is lost: version {version} < acked {}",
                    ack.key, ack.value
                ));
            }
        }
        Ok(())
    }
}

enum Chooser {
    Uniform,
    Zipfian(Zipfian),
    Scrambled(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
    Nstore(NstoreSkew),
}

/// The deterministic operation stream of one YCSB worker.
pub struct YcsbInputs {
    shared: Arc<Shared>,
    rng: WorkerRng,
    chooser: Chooser,
    scan_zipfian: Option<Zipfian>,
    cumulative: [f64; 5],
}

impl YcsbInputs {
    fn new(shared: Arc<Shared>, worker: usize, seed: u64) -> Self {
        let cfg = &shared.cfg;
        let chooser = match cfg.request_distribution {
            RequestDistribution::Uniform => Chooser::Uniform,
            RequestDistribution::Zipfian => {
                shared.zipfian.clone().map_or(Chooser::Uniform, Chooser::Zipfian)
            }
            RequestDistribution::ScrambledZipfian => {
                shared.scrambled.clone().map_or(Chooser::Uniform, Chooser::Scrambled)
            }
            RequestDistribution::Hotspot => {
                shared.hotspot.clone().map_or(Chooser::Uniform, Chooser::Hotspot)
            }
            RequestDistribution::NstoreSkew => {
                shared.nstore.clone().map_or(Chooser::Uniform, Chooser::Nstore)
            }
            RequestDistribution::Latest => {
                // Validated θ: construction cannot fail; fall back to uniform if it ever does.
                SkewedLatest::new(shared.counter.last(), cfg.zipfian_theta)
                    .map_or(Chooser::Uniform, Chooser::Latest)
            }
        };
        let mut cumulative = [0.0; 5];
        let mut sum = 0.0;
        for (c, p) in cumulative.iter_mut().zip(cfg.proportions()) {
            sum += p;
            *c = sum;
        }
        let scan_zipfian = shared.scan_zipfian.clone();
        YcsbInputs {
            rng: WorkerRng::for_worker(seed, worker, 1),
            shared,
            chooser,
            scan_zipfian,
            cumulative,
        }
    }

    fn next_keynum(&mut self) -> u64 {
        let n = self.shared.cfg.record_count;
        let rng: &mut dyn RngCore = &mut self.rng;
        match &mut self.chooser {
            Chooser::Uniform => rng.gen_range(0..n),
            Chooser::Zipfian(z) => z.next(rng),
            Chooser::Scrambled(z) => z.next(rng),
            Chooser::Hotspot(h) => h.next(rng),
            Chooser::Nstore(s) => s.next(rng),
            Chooser::Latest(l) => l.next(rng, self.shared.counter.last()),
        }
    }

    fn next_field(&mut self) -> u32 {
        self.rng.gen_range(0..self.shared.cfg.field_count)
    }

    /// The next operation. Inserts take the next number of the shared insert counter; the
    /// caller acknowledges it when the insert is done ([`YcsbInputs::acknowledge`]).
    pub fn next_op(&mut self) -> YcsbOp {
        let total = self.cumulative[4];
        let r = self.rng.gen::<f64>() * total;
        let which = self.cumulative.iter().position(|c| r < *c).unwrap_or(0);
        match which {
            1 => YcsbOp::Update { keynum: self.next_keynum(), field: self.next_field() },
            2 => YcsbOp::Insert { keynum: self.shared.counter.next() },
            3 => {
                let keynum = self.next_keynum();
                let max = self.shared.cfg.max_scan_length.max(1);
                let len = match &mut self.scan_zipfian {
                    Some(z) => z.next(&mut self.rng) as u32,
                    None => self.rng.gen_range(1..=max),
                };
                YcsbOp::Scan { keynum, len }
            }
            4 => YcsbOp::ReadModifyWrite { keynum: self.next_keynum(), field: self.next_field() },
            _ => YcsbOp::Read { keynum: self.next_keynum() },
        }
    }

    /// Marks an insert's key number finished (so "latest" may return it).
    pub fn acknowledge(&self, keynum: u64) {
        self.shared.counter.acknowledge(keynum);
    }
}

struct YcsbWorker {
    inputs: YcsbInputs,
    worker: usize,
    retrier: Retrier,
    table: Option<TableId>,
    row: Vec<u8>,
    /// New field contents of the current operation (drawn before the first attempt).
    data: Vec<u8>,
}

impl YcsbWorker {
    fn write(
        &mut self,
        engine: &dyn Engine,
        table: TableId,
        keynum: u64,
        field: u32,
    ) -> Result<(Option<storage::CommitToken>, u32, Option<u64>), DbError> {
        let cfg = &self.inputs.shared.cfg;
        let len = cfg.field_length as usize;
        let (offset, n) = if cfg.write_all_fields {
            (OFF_FIELDS, cfg.field_count as usize * len)
        } else {
            (OFF_FIELDS + field as usize * len, len)
        };
        self.data.resize(n, 0);
        self.inputs.rng.fill_bytes(&mut self.data);
        let key = cfg.key_of(keynum);
        let row_bytes = cfg.row_bytes() as usize;
        let (row, data) = (&mut self.row, &self.data);
        let done = self.retrier.run(engine, self.worker, |txn| {
            if !read_row(txn, table, key, row, row_bytes)? {
                return missing(cfg, keynum, key);
            }
            verify_run(cfg, key, row)?;
            let version = get_u64(row, OFF_VERSION).wrapping_add(1);
            put_u64(row, OFF_VERSION, version);
            row[offset..offset + n].copy_from_slice(data);
            let c = checksum(row);
            put_u64(row, OFF_CHECKSUM, c);
            if offset == OFF_FIELDS {
                // The version, the checksum and the fields are one contiguous range: one write
                // of the row, as N-Store's update of a whole tuple is.
                txn.update(table, key, OFF_VERSION as u32, &row[OFF_VERSION..offset + n])?;
            } else {
                txn.update(table, key, OFF_VERSION as u32, &row[OFF_VERSION..OFF_FIELDS])?;
                txn.update(table, key, offset as u32, data)?;
            }
            Ok(Outcome::Commit(Some(version)))
        })?;
        Ok((done.token, done.retries, done.value))
    }

    fn insert(
        &mut self,
        engine: &dyn Engine,
        table: TableId,
        keynum: u64,
    ) -> Result<(Option<storage::CommitToken>, u32, Option<u64>), DbError> {
        let cfg = &self.inputs.shared.cfg;
        self.row.resize(cfg.row_bytes() as usize, 0);
        fill_new_row(&mut self.row, keynum, &mut self.inputs.rng);
        let key = cfg.key_of(keynum);
        let row = &self.row;
        let result = self.retrier.run(engine, self.worker, |txn| {
            txn.insert(table, key, row)?;
            Ok(Outcome::Commit(Some(1)))
        });
        // Finished either way: a failed insert leaves a hole that reads find absent.
        self.inputs.acknowledge(keynum);
        let done = result?;
        Ok((done.token, done.retries, done.value))
    }

    fn read(
        &mut self,
        engine: &dyn Engine,
        table: TableId,
        keynum: u64,
    ) -> Result<(Option<storage::CommitToken>, u32, Option<u64>), DbError> {
        let cfg = &self.inputs.shared.cfg;
        let key = cfg.key_of(keynum);
        let row_bytes = cfg.row_bytes() as usize;
        let row = &mut self.row;
        let done = self.retrier.run(engine, self.worker, |txn| {
            if read_row(txn, table, key, row, row_bytes)? {
                verify_run(cfg, key, row)?;
                Ok(Outcome::ReadOnly(None::<u64>))
            } else {
                missing(cfg, keynum, key)
            }
        })?;
        Ok((done.token, done.retries, None))
    }

    fn scan(
        &mut self,
        engine: &dyn Engine,
        table: TableId,
        keynum: u64,
        len: u32,
    ) -> Result<(Option<storage::CommitToken>, u32, Option<u64>), DbError> {
        let cfg = &self.inputs.shared.cfg;
        let start = cfg.key_of(keynum);
        let done = self.retrier.run(engine, self.worker, |txn| {
            scan_verified(txn, cfg, table, start, len as usize)?;
            Ok(Outcome::ReadOnly(()))
        })?;
        Ok((done.token, done.retries, None))
    }
}

fn scan_verified(
    txn: &mut dyn Txn,
    cfg: &YcsbConfig,
    table: TableId,
    start: u64,
    len: usize,
) -> Result<(), DbError> {
    let mut bad = None;
    txn.scan(table, start, u64::MAX, len, &mut |key, row| match verify_run(cfg, key, row) {
        Ok(()) => true,
        Err(e) => {
            bad = Some(e);
            false
        }
    })?;
    bad.map_or(Ok(()), Err)
}

/// A key the operation expected is absent: corruption for a loaded record, a hole left by a
/// failed insert otherwise (YCSB's NOT_FOUND).
fn missing<T>(cfg: &YcsbConfig, keynum: u64, key: u64) -> Result<Outcome<Option<T>>, DbError> {
    if keynum < cfg.record_count {
        Err(DbError::Corrupt(format!("YCSB record {keynum} (key {key}) is missing")))
    } else {
        Ok(Outcome::ReadOnly(None))
    }
}

impl Worker for YcsbWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        let table = match self.table {
            Some(t) => t,
            None => {
                let t = lookup_table(engine, TABLE, self.inputs.shared.cfg.row_bytes() as u32)?;
                self.table = Some(t);
                t
            }
        };
        let op = self.inputs.next_op();
        let (token, retries, version) = match op {
            YcsbOp::Read { keynum } => self.read(engine, table, keynum)?,
            YcsbOp::Update { keynum, field } | YcsbOp::ReadModifyWrite { keynum, field } => {
                self.write(engine, table, keynum, field)?
            }
            YcsbOp::Insert { keynum } => self.insert(engine, table, keynum)?,
            YcsbOp::Scan { keynum, len } => self.scan(engine, table, keynum, len)?,
        };
        let acks = match (op, version) {
            (
                YcsbOp::Update { keynum, .. }
                | YcsbOp::ReadModifyWrite { keynum, .. }
                | YcsbOp::Insert { keynum },
                Some(v),
            ) => vec![Ack { table, key: self.inputs.shared.cfg.key_of(keynum), value: v }],
            _ => Vec::new(),
        };
        Ok(TxnDone { kind: op.kind(), token, retries, acks })
    }
}

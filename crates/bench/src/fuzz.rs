//! The damaged-region fuzzer (docs/design.md §7: "corrupt or truncated regions are fuzzed"): damage
//! a populated region in one of its structures, open the engine on it, use it, check it, and
//! classify what happened.
//!
//! Would catch: a panic, an endless loop or a reformat on a damaged region, and (counted, not
//! failed) damage that is silently accepted as different contents.
//!
//! One run builds a few populated base images once, on the `sim` medium: TPC-B and YCSB loads
//! churned by inserts and deletes (small B+tree nodes, so trees have several levels, merges
//! and free slots), and images cut while transactions are in flight (active user and system
//! undo logs). The engine opened on each undamaged image gives the reference contents and,
//! through [`Engine::describe_offset`], what lives in each page. Case `k` then derives from
//! `(seed, k)` a base, a target (superblock, its copy, catalog, allocator bitmap or mirror, user
//! or system undo log, B+tree root, inner node or leaf, heap page, free page, or truncation),
//! a page of that target and a damage (bit flips, overwritten words, a zeroed page, a stale
//! copy of another page, or the page as an older image held it: a lost write), and runs these
//! steps, each under `catch_unwind` and a watchdog:
//! open; scan every table (compared with the reference); a short workload of transactions
//! checked against a model of the contents; `check_integrity`; a final scan against the model;
//! a reopen with another integrity check.
//!
//! Classes, best first: `rejected` (open returned `Corrupt` / `Format`), `detected` (a later
//! step returned `Corrupt` or integrity failed), `accepted-same` (the damage changed nothing
//! visible), `accepted-different` (opened and checked fine, but contents differ from the
//! reference or the model: wrongly accepted), `error` (another typed error, e.g. region full),
//! and the failures: `panic`, `hang` (a step took longer than the step timeout), `reformatted`
//! (a populated region came back freshly formatted).
//!
//! Determinism: a case depends only on `(seed, case)` and the base images (themselves built
//! from the seed), so `--case K` reruns exactly case K.

use crate::seed::splitmix64;
use pmem::{CrashEvent, CrashPoint, CrashPolicy, Medium, Region, RegionOptions};
use serde::Serialize;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::{Duration, Instant};
use storage::{DbError, Engine, TableId};
use workloads::WorkloadOptions;

/// Opens (formats or recovers) the engine under test on a region. Shared with case threads
/// that may outlive a hung step, hence `Arc` and `'static`.
pub type OpenEngine = Arc<dyn Fn(Region) -> storage::Result<Box<dyn Engine>> + Send + Sync>;

/// Most cases one run takes.
pub const MAX_CASES: u64 = 1_000_000_000;
/// Most cases run at once.
pub const MAX_JOBS: usize = 256;
/// Hung case threads cannot be stopped (they keep a core busy): after this many the run ends.
pub const MAX_HANGS: u64 = 8;
/// Cases kept with their details per class; later ones are only counted.
pub const MAX_KEPT_PER_CLASS: usize = 20;
/// Size of every base region: small, so a case copies little.
pub const REGION_BYTES: u64 = 2 << 20;
/// Worker slots the base regions are formatted for (the workload uses 0 and 1).
pub const WORKERS: usize = 2;
/// B+tree node capacity of the base regions: small, so trees have several levels.
pub const NODE_CAPACITY: u32 = 8;

// Salts of the independent random streams of a case.
const SALT_PLAN: u64 = 1;
const SALT_WORKLOAD: u64 = 2;
const SALT_BASE: u64 = 3;

/// What a case ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    Rejected,
    Detected,
    AcceptedSame,
    AcceptedDifferent,
    Error,
    Panic,
    Hang,
    Reformatted,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Rejected,
        Class::Detected,
        Class::AcceptedSame,
        Class::AcceptedDifferent,
        Class::Error,
        Class::Panic,
        Class::Hang,
        Class::Reformatted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Rejected => "rejected",
            Class::Detected => "detected",
            Class::AcceptedSame => "accepted-same",
            Class::AcceptedDifferent => "accepted-different",
            Class::Error => "error",
            Class::Panic => "panic",
            Class::Hang => "hang",
            Class::Reformatted => "reformatted",
        }
    }

    /// Whether the class is a bug the run fails on.
    pub fn is_failure(self) -> bool {
        matches!(self, Class::Panic | Class::Hang | Class::Reformatted)
    }
}

/// What a damaged page held in the undamaged image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Superblock,
    SuperblockCopy,
    Catalog,
    Bitmap,
    BitmapMirror,
    UserUndo,
    SystemUndo,
    BtreeRoot,
    BtreeInner,
    BtreeLeaf,
    Heap,
    FreePage,
    Truncation,
    // Each engine's own structures (named by its `describe_offset`).
    WalControl,
    WalPageLog,
    WalLog,
    GroupBatchControl,
    GroupBatchLog,
    CowMaster,
    CowPage,
    LsmControl,
    LsmManifest,
    LsmLog,
    LsmMemtable,
    LsmRun,
    NvwalHeader,
    NvwalBlockTable,
    NvwalLogBlock,
    NvwalDatabase,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Superblock => "superblock",
            Target::SuperblockCopy => "superblock-copy",
            Target::Catalog => "catalog",
            Target::Bitmap => "bitmap",
            Target::BitmapMirror => "bitmap-mirror",
            Target::UserUndo => "user-undo",
            Target::SystemUndo => "system-undo",
            Target::BtreeRoot => "btree-root",
            Target::BtreeInner => "btree-inner",
            Target::BtreeLeaf => "btree-leaf",
            Target::Heap => "heap",
            Target::FreePage => "free-page",
            Target::Truncation => "truncation",
            Target::WalControl => "wal-control",
            Target::WalPageLog => "wal-page-log",
            Target::WalLog => "wal-log",
            Target::GroupBatchControl => "group-batch-control",
            Target::GroupBatchLog => "group-batch-log",
            Target::CowMaster => "cow-master-record",
            Target::CowPage => "cow-page",
            Target::LsmControl => "lsm-control",
            Target::LsmManifest => "lsm-manifest",
            Target::LsmLog => "lsm-log",
            Target::LsmMemtable => "lsm-memtable",
            Target::LsmRun => "lsm-run",
            Target::NvwalHeader => "nvwal-header",
            Target::NvwalBlockTable => "nvwal-block-table",
            Target::NvwalLogBlock => "nvwal-log-block",
            Target::NvwalDatabase => "nvwal-database",
        }
    }
}

/// How a page is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DamageKind {
    BitFlips,
    Words,
    ZeroPage,
    StalePage,
    Truncate,
}

impl DamageKind {
    pub fn name(self) -> &'static str {
        match self {
            DamageKind::BitFlips => "bit-flips",
            DamageKind::Words => "words",
            DamageKind::ZeroPage => "zero-page",
            DamageKind::StalePage => "stale-page",
            DamageKind::Truncate => "truncate",
        }
    }
}

/// A small deterministic generator (SplitMix64 stream): the bench crate has no `rand`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(splitmix64(seed))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(self.0)
    }

    /// Uniform in `0..n` (`n > 0`; the modulo bias is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

fn derive(seed: u64, case: u64, salt: u64) -> u64 {
    splitmix64(splitmix64(seed ^ salt.wrapping_mul(0xA24B_AED4_963E_E407)) ^ case)
}

/// Table name -> key -> row.
type Contents = BTreeMap<String, BTreeMap<u64, Vec<u8>>>;

/// A populated image and what the fuzzer knows about it.
pub struct Base {
    pub name: String,
    pub image: Vec<u8>,
    /// Contents after recovery of the undamaged image.
    contents: Contents,
    /// Pages of each target (truncation has none).
    pages: BTreeMap<Target, Vec<u64>>,
    /// Offsets of undo log header words (the first page of each log).
    undo_headers: Vec<u64>,
    /// An older image of the same region (before the churn, or before the cut): where a page
    /// differs, copying it back is a lost write.
    older: Vec<u8>,
    /// Cache lines written since the older image, per page: damage there hits live records.
    recent: BTreeMap<u64, Vec<u64>>,
}

impl Base {
    /// Rows over all tables of the reference contents.
    pub fn rows(&self) -> usize {
        self.contents.values().map(|t| t.len()).sum()
    }

    /// Pages per target, for reports.
    pub fn target_pages(&self) -> BTreeMap<&'static str, usize> {
        self.pages.iter().map(|(t, p)| (t.name(), p.len())).collect()
    }

    /// A 64-bit fingerprint of the image (to compare runs).
    pub fn checksum(&self) -> u64 {
        fingerprint(&self.image)
    }
}

fn fingerprint(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = splitmix64(h ^ u64::from_le_bytes(w));
    }
    h
}

/// How a fuzzing run goes.
#[derive(Clone, Debug)]
pub struct FuzzOptions {
    pub cases: u64,
    pub seed: u64,
    pub jobs: usize,
    /// Run only this case.
    pub only: Option<u64>,
    /// A step taking longer is a hang.
    pub step_timeout: Duration,
    /// Transactions of each case's workload.
    pub txns: u32,
    /// Size of the regions the base images are loaded on ([`REGION_BYTES`] suits `inplace`;
    /// an engine with its own logs needs them on top).
    pub region_bytes: u64,
}

impl Default for FuzzOptions {
    fn default() -> Self {
        FuzzOptions {
            cases: 1000,
            seed: 42,
            jobs: 1,
            only: None,
            step_timeout: Duration::from_secs(5),
            txns: 200,
            region_bytes: REGION_BYTES,
        }
    }
}

impl FuzzOptions {
    pub fn validate(&self) -> Result<(), String> {
        if self.only.is_none() && (self.cases == 0 || self.cases > MAX_CASES) {
            return Err(format!("cases must be 1..={MAX_CASES}, got {}", self.cases));
        }
        if self.jobs == 0 || self.jobs > MAX_JOBS {
            return Err(format!("jobs must be 1..={MAX_JOBS}, got {}", self.jobs));
        }
        if self.txns > 100_000 {
            return Err(format!("transactions per case must be at most 100000, got {}", self.txns));
        }
        if !(64 << 10..=1 << 30).contains(&self.region_bytes) {
            return Err(format!("region size must be 64 KiB..=1 GiB, got {}", self.region_bytes));
        }
        Ok(())
    }
}

/// One case's damage.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub case: u64,
    pub base: String,
    pub target: Target,
    pub damage: DamageKind,
    /// The damaged page (or the truncated length, for truncation).
    pub page: u64,
    /// In words: what was changed where.
    pub what: String,
}

/// What one case found.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub plan: Plan,
    pub class: Class,
    /// The step that decided the class.
    pub step: &'static str,
    pub message: String,
}

/// Counts of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub cases: u64,
    pub classes: BTreeMap<&'static str, u64>,
    /// Target -> class -> cases.
    pub by_target: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// Damage kind -> class -> cases.
    pub by_damage: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    /// The first cases of each class other than rejected, detected and accepted-same.
    pub kept: Vec<Outcome>,
    /// Order-independent fingerprint of every case's class (equal runs, equal fingerprints).
    pub fingerprint: u64,
    /// Set when the run ended early (too many hangs).
    pub stopped: Option<String>,
    pub elapsed_s: f64,
}

impl Summary {
    fn add(&mut self, o: &Outcome) {
        self.cases += 1;
        *self.classes.entry(o.class.name()).or_default() += 1;
        let t = self.by_target.entry(o.plan.target.name()).or_default();
        *t.entry(o.class.name()).or_default() += 1;
        let d = self.by_damage.entry(o.plan.damage.name()).or_default();
        *d.entry(o.class.name()).or_default() += 1;
        self.fingerprint = self
            .fingerprint
            .wrapping_add(splitmix64(o.plan.case.wrapping_mul(31).wrapping_add(o.class as u64)));
        let boring = matches!(o.class, Class::Rejected | Class::Detected | Class::AcceptedSame);
        let kept = self.kept.iter().filter(|k| k.class == o.class).count();
        if !boring && kept < MAX_KEPT_PER_CLASS {
            self.kept.push(o.clone());
        }
    }

    pub fn count(&self, class: Class) -> u64 {
        self.classes.get(class.name()).copied().unwrap_or(0)
    }

    pub fn failures(&self) -> u64 {
        Class::ALL.iter().filter(|c| c.is_failure()).map(|c| self.count(*c)).sum()
    }
}

// ---------------------------------------------------------------------------------------------
// Base images.

/// A base image's region options: from an image, only the non-size options matter.
fn region_options() -> RegionOptions {
    RegionOptions::new(Medium::Sim, REGION_BYTES)
}

fn setup_err(what: &str) -> impl Fn(DbError) -> String + '_ {
    move |e| format!("building base images: {what}: {e}")
}

/// Builds the base images (deterministic in `seed`).
pub fn build_bases(open: &OpenEngine, seed: u64, region_bytes: u64) -> Result<Vec<Base>, String> {
    let tpcb = WorkloadOptions {
        scale: Some(1),
        accounts_per_branch: Some(400),
        ..WorkloadOptions::default()
    };
    let ycsb = WorkloadOptions {
        records: Some(400),
        field_count: Some(4),
        field_length: Some(24),
        ..WorkloadOptions::default()
    };
    let (tpcb_loaded, tpcb_image) =
        loaded_image(open, "tpcb", &tpcb, region_bytes, derive(seed, 0, SALT_BASE))?;
    let (ycsb_loaded, ycsb_image) =
        loaded_image(open, "ycsb", &ycsb, region_bytes, derive(seed, 1, SALT_BASE))?;
    let inflight_tpcb = inflight_image(open, &tpcb_image, derive(seed, 2, SALT_BASE))?;
    let inflight_ycsb = inflight_image(open, &ycsb_image, derive(seed, 3, SALT_BASE))?;
    let bases = [
        ("tpcb-inflight", inflight_tpcb, tpcb_image.clone()),
        ("ycsb-inflight", inflight_ycsb, ycsb_image.clone()),
        ("tpcb", tpcb_image, tpcb_loaded),
        ("ycsb", ycsb_image, ycsb_loaded),
    ];
    let mut out: Vec<Base> = bases
        .into_iter()
        .map(|(name, image, older)| describe_base(open, name, image, older))
        .collect::<Result<_, _>>()?;
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Loads a workload on a fresh region, churns it with inserts and deletes, shuts down, and
/// returns the persisted images after the load and after the churn.
fn loaded_image(
    open: &OpenEngine,
    workload: &str,
    options: &WorkloadOptions,
    region_bytes: u64,
    seed: u64,
) -> Result<(Vec<u8>, Vec<u8>), String> {
    let fresh = RegionOptions::new(Medium::Sim, region_bytes);
    let region = Region::open(&fresh).map_err(|e| format!("sim region: {e}"))?;
    let engine = open(region.clone()).map_err(setup_err("formatting"))?;
    let w = workloads::by_name(workload, options)?;
    w.load(&*engine, &|_, _| {}).map_err(setup_err("loading"))?;
    let loaded = region.crash_image(CrashPolicy::Persisted, 0).ok_or("not a sim region")?;
    let mut model = scan_contents(&*engine).map_err(setup_err("scanning"))?;
    let mut rng = Rng::new(seed);
    let mut churn = Churn { engine: &*engine, model: &mut model, rng: &mut rng, different: None };
    churn.run(300, 0).map_err(setup_err("churning"))?;
    if let Some(d) = churn.different {
        return Err(format!("building base images: the engine disagrees with the model: {d}"));
    }
    engine.check_integrity().map_err(|e| format!("building base images: integrity: {e}"))?;
    engine.shutdown().map_err(setup_err("shutdown"))?;
    drop(engine);
    let churned = region.crash_image(CrashPolicy::Persisted, 0).ok_or("not a sim region")?;
    Ok((loaded, churned))
}

/// A crash image of `base` cut while worker 1 has an open transaction and worker 0 runs
/// inserts and deletes: its recovery rolls back a user transaction and, where the cut falls
/// inside a structure modification, a system transaction. An engine with one writer (`cow`,
/// `sqlite-nvwal`) or that persists only whole batches (`group`) gets no cut that way (the open
/// transaction blocks the churn, or nothing reaches NVRAM while it is open): after a try without
/// a cut, worker 0's own transaction is the one in flight ("solo"). An engine that never
/// persists uncommitted work has nothing to roll back: its first cut image is its in-flight base.
fn inflight_image(open: &OpenEngine, base: &[u8], seed: u64) -> Result<Vec<u8>, String> {
    let mut rng = Rng::new(seed);
    let mut fallback = None;
    let mut first_cut = None;
    let mut solo = false;
    for attempt in 0..32 {
        let Some(image) = inflight_cut(open, base, &mut rng, solo)? else {
            solo = true;
            continue;
        };
        let check = Region::from_image(&image, &region_options()).map_err(|e| e.to_string())?;
        let recovered = open(check).map_err(setup_err("recovering an in-flight image"))?;
        let report = recovered.recovery_report();
        if report.txns_rolled_back >= 1 && report.system_txns_rolled_back >= 1 {
            return Ok(image);
        }
        if report.txns_rolled_back >= 1 {
            fallback.get_or_insert(image);
        } else if !report.formatted {
            first_cut.get_or_insert(image);
        }
        // An engine that rolled nothing back in four tries never will.
        if attempt >= 3 && fallback.is_none() && first_cut.is_some() {
            break;
        }
    }
    fallback
        .or(first_cut)
        .ok_or_else(|| "building base images: no crash point fell inside the churn".into())
}

/// One try of [`inflight_image`]: the image of a cut during worker 0's churn, with worker 1's
/// transaction open unless `solo`; `None` when no cut was taken (or, not solo, the churn could
/// not run beside the open transaction).
fn inflight_cut(
    open: &OpenEngine,
    base: &[u8],
    rng: &mut Rng,
    solo: bool,
) -> Result<Option<Vec<u8>>, String> {
    let region = Region::from_image(base, &region_options()).map_err(|e| e.to_string())?;
    let engine = open(region.clone()).map_err(setup_err("opening"))?;
    let mut model = scan_contents(&*engine).map_err(setup_err("scanning"))?;
    let mut open_txn = None;
    if !solo {
        let mut txn = engine.begin(1).map_err(setup_err("begin"))?;
        let tables = table_ids(&*engine);
        for _ in 0..4 {
            let (name, id) = rng.pick(&tables).clone();
            let rows = model.entry(name).or_default();
            let key = new_key(rng, rows);
            let len = engine
                .tables()
                .into_iter()
                .find(|s| engine.table(&s.name) == Some(id))
                .map_or(8, |s| s.row_bytes as usize);
            let row: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            txn.insert(id, key, &row).map_err(setup_err("in-flight insert"))?;
            // Never committed: the model keeps it only so that later keys differ.
            rows.insert(key, row);
        }
        open_txn = Some(txn);
    }
    let Some(sim) = region.sim() else { return Err("not a sim region".into()) };
    let point = CrashPoint { event: CrashEvent::Store, count: 20 + rng.below(400) };
    sim.arm(point, CrashPolicy::Persisted, rng.next());
    let mut churn = Churn { engine: &*engine, model: &mut model, rng, different: None };
    for _ in 0..200 {
        if sim.cut_taken() {
            break;
        }
        match churn.run(1, 0) {
            Ok(()) => {}
            Err(_) if !solo => break,
            Err(e) => return Err(setup_err("churning")(e)),
        }
    }
    let image = sim.take_image();
    drop(open_txn);
    drop(engine);
    Ok(image)
}

/// Opens the undamaged image: its contents and what lives in each page.
fn describe_base(
    open: &OpenEngine,
    name: &str,
    image: Vec<u8>,
    older: Vec<u8>,
) -> Result<Base, String> {
    let region = Region::from_image(&image, &region_options()).map_err(|e| e.to_string())?;
    let engine = open(region).map_err(setup_err("opening a base image"))?;
    let contents = scan_contents(&*engine).map_err(setup_err("scanning a base image"))?;
    engine.check_integrity().map_err(|e| format!("base image {name}: integrity: {e}"))?;
    let page_count = image.len() as u64 / storage::format::PAGE_SIZE_U64;
    let mut pages: BTreeMap<Target, Vec<u64>> = BTreeMap::new();
    let mut nodes: Vec<(u64, String, u16)> = Vec::new();
    let mut undo_headers = Vec::new();
    for page in 0..page_count {
        let offset = page * storage::format::PAGE_SIZE_U64;
        let described = engine.describe_offset(offset).unwrap_or_default();
        // `group` and `wal` hold an `inplace` image after their own log: its pages are the
        // same structures, named with this prefix.
        let what = described.strip_prefix("image: ").unwrap_or(&described);
        let target = if what == "superblock" {
            Target::Superblock
        } else if what == "superblock copy" {
            Target::SuperblockCopy
        } else if what == "catalog" {
            Target::Catalog
        } else if what == "allocator bitmap" {
            Target::Bitmap
        } else if what == "allocator bitmap mirror" {
            Target::BitmapMirror
        } else if what.starts_with("user undo log") || what.starts_with("system undo log") {
            if what.contains("header slot") {
                undo_headers.extend((0..storage::undo::HEADER_SLOTS).map(|s| offset + s * 64));
            }
            if what.starts_with("user") {
                Target::UserUndo
            } else {
                Target::SystemUndo
            }
        } else if let Some(rest) = what.strip_prefix("B+tree node of ") {
            let (table, level) = rest.rsplit_once(" (level ").unwrap_or((rest, "0)"));
            let level = level.trim_end_matches(')').parse().unwrap_or(0);
            nodes.push((page, table.to_string(), level));
            continue;
        } else if what.starts_with("heap page") {
            Target::Heap
        } else if what == "free page" {
            Target::FreePage
        } else if let Some(target) = engine_target(what) {
            // A blank page of a log or arena past its end is never read: damage there tests
            // nothing (the engines' logs are mostly blank in a small base).
            let bytes = &image[offset as usize..(offset + storage::format::PAGE_SIZE_U64) as usize];
            if bytes.iter().all(|b| *b == 0) {
                continue;
            }
            target
        } else {
            continue;
        };
        pages.entry(target).or_default().push(page);
    }
    // The highest node of each tree is its root.
    let mut top: BTreeMap<&str, u16> = BTreeMap::new();
    for (_, table, level) in &nodes {
        let e = top.entry(table.as_str()).or_insert(0);
        *e = (*e).max(*level);
    }
    for (page, table, level) in &nodes {
        let target = if Some(level) == top.get(table.as_str()) {
            Target::BtreeRoot
        } else if *level == 0 {
            Target::BtreeLeaf
        } else {
            Target::BtreeInner
        };
        pages.entry(target).or_default().push(*page);
    }
    let mut recent: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (i, (a, b)) in image.chunks(64).zip(older.chunks(64)).enumerate() {
        if a != b {
            let line = i as u64 * 64;
            recent.entry(line / storage::format::PAGE_SIZE_U64).or_default().push(line);
        }
    }
    Ok(Base { name: name.to_string(), image, contents, pages, undo_headers, older, recent })
}

/// The target of a page of an engine's own structures, from its `describe_offset`: the logs,
/// control lines, CoW meta pages, LSM runs and memtable, NVWAL frames the engines add to (or
/// keep instead of) `inplace`'s pages.
fn engine_target(what: &str) -> Option<Target> {
    const PREFIXES: [(&str, Target); 16] = [
        ("wal control line", Target::WalControl),
        ("wal page log", Target::WalPageLog),
        ("wal log area", Target::WalLog),
        ("group batch log control", Target::GroupBatchControl),
        ("group batch log entries", Target::GroupBatchLog),
        ("master record", Target::CowMaster),
        ("B+tree node or meta page", Target::CowPage),
        ("lsm control page", Target::LsmControl),
        ("lsm manifest", Target::LsmManifest),
        ("lsm log", Target::LsmLog),
        ("lsm memtable arena", Target::LsmMemtable),
        ("lsm run", Target::LsmRun),
        ("sqlite-nvwal header", Target::NvwalHeader),
        ("sqlite-nvwal block table", Target::NvwalBlockTable),
        ("sqlite-nvwal log block", Target::NvwalLogBlock),
        ("sqlite-nvwal database file", Target::NvwalDatabase),
    ];
    PREFIXES.iter().find(|(p, _)| what.starts_with(p)).map(|(_, t)| *t)
}

fn table_ids(engine: &dyn Engine) -> Vec<(String, TableId)> {
    engine
        .tables()
        .into_iter()
        .filter_map(|s| engine.table(&s.name).map(|id| (s.name, id)))
        .collect()
}

fn scan_table(engine: &dyn Engine, id: TableId) -> storage::Result<BTreeMap<u64, Vec<u8>>> {
    let mut txn = engine.begin(0)?;
    let mut rows = BTreeMap::new();
    let mut repeated = None;
    txn.scan(id, 0, u64::MAX, usize::MAX, &mut |k, row| {
        if rows.insert(k, row.to_vec()).is_some() {
            repeated = Some(k);
        }
        true
    })?;
    txn.commit()?;
    match repeated {
        // A scan that returns a key twice is damage the engine did not notice: a difference.
        Some(k) => Err(DbError::Invalid(format!("scan returned key {k} twice"))),
        None => Ok(rows),
    }
}

fn scan_contents(engine: &dyn Engine) -> storage::Result<Contents> {
    let mut out = Contents::new();
    for (name, id) in table_ids(engine) {
        out.insert(name, scan_table(engine, id)?);
    }
    Ok(out)
}

/// First difference between two contents, in words.
fn difference(expected: &Contents, got: &Contents) -> Option<String> {
    for (name, rows) in expected {
        let Some(other) = got.get(name) else { return Some(format!("table {name} is missing")) };
        if rows != other {
            let only_expected = rows.keys().find(|k| other.get(k) != rows.get(k));
            let only_got = other.keys().find(|k| !rows.contains_key(k));
            return Some(format!(
                "table {name}: {} rows, expected {} (first differing key {:?}, unexpected key \
                 {:?})",
                other.len(),
                rows.len(),
                only_expected,
                only_got
            ));
        }
    }
    got.keys().find(|n| !expected.contains_key(*n)).map(|n| format!("unexpected table {n}"))
}

/// Random transactions against a model of the contents.
struct Churn<'a> {
    engine: &'a dyn Engine,
    model: &'a mut Contents,
    rng: &'a mut Rng,
    /// The first disagreement between the engine and the model.
    different: Option<String>,
}

impl Churn<'_> {
    /// Runs `txns` transactions on `worker`; a typed error ends the run and is returned.
    fn run(&mut self, txns: u32, worker: usize) -> storage::Result<()> {
        let tables: Vec<(String, TableId, usize)> = self
            .engine
            .tables()
            .into_iter()
            .filter_map(|s| self.engine.table(&s.name).map(|id| (s.name, id, s.row_bytes as usize)))
            .collect();
        if tables.is_empty() {
            return Ok(());
        }
        for _ in 0..txns {
            self.one(&tables, worker)?;
        }
        Ok(())
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if self.different.is_none() {
            self.different = Some(what());
        }
    }

    /// Changes the model, remembering the row's previous state for an abort.
    fn set(&mut self, undo: &mut Undo, name: &str, key: u64, row: Option<Vec<u8>>) {
        let rows = self.model.entry(name.to_string()).or_default();
        let before = match row {
            Some(r) => rows.insert(key, r),
            None => rows.remove(&key),
        };
        undo.push((name.to_string(), key, before));
    }

    fn one(&mut self, tables: &[(String, TableId, usize)], worker: usize) -> storage::Result<()> {
        let mut txn = self.engine.begin(worker)?;
        let mut undo = Undo::new();
        let result = self.ops(&mut *txn, &mut undo, tables);
        let abort = match result {
            // Another worker's open transaction holds the key (the in-flight images).
            Err(DbError::Conflict { .. }) => true,
            Err(e) => return Err(e),
            Ok(()) => self.rng.chance(10),
        };
        if abort {
            txn.abort()?;
            for (name, key, before) in undo.into_iter().rev() {
                let rows = self.model.entry(name).or_default();
                match before {
                    Some(r) => rows.insert(key, r),
                    None => rows.remove(&key),
                };
            }
            return Ok(());
        }
        txn.commit()?;
        Ok(())
    }

    fn ops(
        &mut self,
        txn: &mut dyn storage::Txn,
        undo: &mut Undo,
        tables: &[(String, TableId, usize)],
    ) -> storage::Result<()> {
        let ops = 1 + self.rng.below(4);
        for _ in 0..ops {
            let (name, id, row_len) = self.rng.pick(tables).clone();
            let rows = self.model.entry(name.clone()).or_default();
            let existing = pick_key(self.rng, rows);
            let fresh = new_key(self.rng, rows);
            let current = existing.and_then(|k| rows.get(&k).cloned());
            match self.rng.below(10) {
                0..=2 => {
                    // A quarter of the time a run of ascending keys (splits at the same place).
                    let run = if self.rng.chance(25) { 1 + self.rng.below(8) } else { 1 };
                    for key in fresh..fresh.saturating_add(run) {
                        if self.model[&name].contains_key(&key) {
                            break;
                        }
                        let row: Vec<u8> = (0..row_len).map(|_| self.rng.next() as u8).collect();
                        match txn.insert(id, key, &row) {
                            Ok(()) => self.set(undo, &name, key, Some(row)),
                            Err(DbError::Duplicate { .. }) => self
                                .note(|| format!("table {name}: absent key {key} is a duplicate")),
                            Err(e) => return Err(e),
                        }
                    }
                }
                3..=4 => {
                    let Some(key) = existing else { continue };
                    // A quarter of the time a run of neighbours: empties leaves, so nodes merge.
                    let run = if self.rng.chance(25) { 1 + self.rng.below(8) as usize } else { 1 };
                    let keys: Vec<u64> =
                        self.model[&name].range(key..).take(run).map(|e| *e.0).collect();
                    for key in keys {
                        if txn.delete(id, key)? {
                            self.set(undo, &name, key, None);
                        } else {
                            self.note(|| {
                                format!("table {name}: delete of present key {key}: absent")
                            });
                        }
                    }
                }
                5..=6 => {
                    let (Some(key), Some(mut row)) = (existing, current) else { continue };
                    let off = self.rng.below(row_len as u64) as usize;
                    let len = 1 + self.rng.below((row_len - off) as u64) as usize;
                    let bytes: Vec<u8> = (0..len).map(|_| self.rng.next() as u8).collect();
                    if txn.update(id, key, off as u32, &bytes)? {
                        if row.len() >= off + len {
                            row[off..off + len].copy_from_slice(&bytes);
                        }
                        self.set(undo, &name, key, Some(row));
                    } else {
                        self.note(|| format!("table {name}: update of present key {key}: absent"));
                    }
                }
                7 => {
                    let Some(key) = existing else { continue };
                    let mut out = Vec::new();
                    let found = txn.read(id, key, &mut out)?;
                    if !found || current.as_ref() != Some(&out) {
                        self.note(|| format!("table {name}: read of key {key} differs"));
                    }
                }
                _ => {
                    let low = existing.unwrap_or(0);
                    let high = low.saturating_add(1 + self.rng.below(64));
                    let mut got = Vec::new();
                    txn.scan(id, low, high, 16, &mut |k, r| {
                        got.push((k, r.to_vec()));
                        true
                    })?;
                    let want: Vec<(u64, Vec<u8>)> = self.model[&name]
                        .range(low..=high)
                        .take(16)
                        .map(|(k, r)| (*k, r.clone()))
                        .collect();
                    if got != want {
                        self.note(|| format!("table {name}: scan of {low}..={high} differs"));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Previous states of the rows a transaction changed: (table, key, row before).
type Undo = Vec<(String, u64, Option<Vec<u8>>)>;

fn pick_key(rng: &mut Rng, rows: &BTreeMap<u64, Vec<u8>>) -> Option<u64> {
    let (first, last) = (*rows.keys().next()?, *rows.keys().next_back()?);
    let at = first + rng.below((last - first).saturating_add(1));
    rows.range(at..).next().map(|(k, _)| *k)
}

fn new_key(rng: &mut Rng, rows: &BTreeMap<u64, Vec<u8>>) -> u64 {
    let last = rows.keys().next_back().copied().unwrap_or(0);
    loop {
        let key = if rng.chance(50) {
            // Between existing keys: splits in the middle of the tree.
            rng.below(last.saturating_add(2))
        } else {
            last.saturating_add(1 + rng.below(64))
        };
        if !rows.contains_key(&key) {
            return key;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Damage.

/// A value an overwritten word takes: the kinds of values that break readers (zero, all ones,
/// a valid-looking page id, one past the end, a power of two, random bits).
fn nasty_value(rng: &mut Rng, page_count: u64, page: u64, near: &[u64]) -> u64 {
    match rng.below(11) {
        // Pointers that make cycles: the page itself, or another page of the same kind (its
        // parent, child or sibling, for a B+tree node).
        8 => page,
        9 | 10 if !near.is_empty() => *rng.pick(near),
        0 => 0,
        1 => u64::MAX,
        2 => rng.below(page_count),
        3 => page_count + rng.below(3),
        4 => 1 << rng.below(64),
        5 => rng.below(16),
        6 => rng.next() & 0xFFFF_FFFF,
        _ => rng.next(),
    }
}

/// An offset inside a page of `target`, biased towards the bytes that address things: page
/// headers, undo log header words, superblock fields, catalog entries.
fn offset_in_page(rng: &mut Rng, base: &Base, target: Target, page_start: u64) -> u64 {
    let page = storage::format::PAGE_SIZE_U64;
    let header_page = base.undo_headers.contains(&page_start);
    if let Some(lines) = base.recent.get(&(page_start / page)) {
        if rng.chance(40) {
            return rng.pick(lines) - page_start + rng.below(64);
        }
    }
    match target {
        Target::Superblock | Target::SuperblockCopy if rng.chance(90) => rng.below(256),
        Target::Catalog if rng.chance(80) => rng.below(64 + 8 * 128),
        // The words that describe the region's pages (the rest of the bitmap is unused).
        Target::Bitmap | Target::BitmapMirror if rng.chance(80) => {
            rng.below((base.image.len() as u64 / page).div_ceil(8))
        }
        Target::UserUndo | Target::SystemUndo if header_page && rng.chance(50) => {
            rng.below(storage::undo::HEADER_SLOTS) * 64 + rng.below(8)
        }
        _ if rng.chance(50) => rng.below(64),
        _ => rng.below(page),
    }
}

/// A damaged image as its base plus replaced pages (copying whole images per case cost more
/// than running the case).
#[derive(Clone, Debug)]
pub struct Patch {
    /// The image's length (shorter than the base when truncated).
    pub len: usize,
    /// Pages whose contents replace the base's.
    pub pages: BTreeMap<u64, Vec<u8>>,
}

impl Patch {
    /// The damaged image in full.
    pub fn apply(&self, base: &[u8]) -> Vec<u8> {
        let mut image = base[..self.len].to_vec();
        for (page, bytes) in &self.pages {
            let at = (page * storage::format::PAGE_SIZE_U64) as usize;
            image[at..at + bytes.len()].copy_from_slice(bytes);
        }
        image
    }

    /// The bytes of `page` as damaged so far, copied from `base` on first change.
    fn page_mut(&mut self, base: &[u8], page: u64) -> &mut Vec<u8> {
        let size = storage::format::PAGE_SIZE;
        self.pages.entry(page).or_insert_with(|| {
            let at = page as usize * size;
            base[at..at + size].to_vec()
        })
    }
}

/// Derives case `case`'s damage to its base image.
pub fn damage(bases: &[Base], seed: u64, case: u64) -> (usize, Plan, Patch) {
    let mut rng = Rng::new(derive(seed, case, SALT_PLAN));
    let b = rng.below(bases.len() as u64) as usize;
    let base = &bases[b];
    let mut targets: Vec<Target> = base.pages.keys().copied().collect();
    targets.push(Target::Truncation);
    let target = *rng.pick(&targets);
    let image = &base.image;
    let len = image.len() as u64;
    let mut patch = Patch { len: image.len(), pages: BTreeMap::new() };
    let page_bytes = storage::format::PAGE_SIZE_U64;
    let page_count = len / page_bytes;
    let plan =
        |damage, page, what| Plan { case, base: base.name.clone(), target, damage, page, what };
    let Some(pages) = base.pages.get(&target) else {
        // Truncation: half the time at a page boundary.
        let cut = if rng.chance(50) { rng.below(page_count) * page_bytes } else { rng.below(len) };
        let cut = cut.max(1);
        patch.len = cut as usize;
        let what = format!("image truncated to {cut} of {len} bytes");
        return (b, plan(DamageKind::Truncate, cut, what), patch);
    };
    let page = *rng.pick(pages);
    let start = page * page_bytes;
    let kinds =
        [DamageKind::BitFlips, DamageKind::Words, DamageKind::ZeroPage, DamageKind::StalePage];
    let kind = *rng.pick(&kinds);
    let mut what = Vec::new();
    let near: Vec<u64> = [Target::BtreeRoot, Target::BtreeInner, Target::BtreeLeaf, Target::Heap]
        .iter()
        .filter(|t| **t == target || rng.chance(50))
        .filter_map(|t| base.pages.get(t))
        .flatten()
        .copied()
        .collect();
    let ps = page_bytes as usize;
    match kind {
        DamageKind::BitFlips => {
            // Sometimes the same bits of both allocator copies: damage the mirror cannot reveal.
            let twin =
                match (base.pages.get(&Target::Bitmap), base.pages.get(&Target::BitmapMirror)) {
                    (Some(b), Some(m)) if rng.chance(30) => match target {
                        Target::Bitmap => Some(m[0]),
                        Target::BitmapMirror => Some(b[0]),
                        _ => None,
                    },
                    _ => None,
                };
            for _ in 0..1 + rng.below(4) {
                let within = offset_in_page(&mut rng, base, target, start) as usize;
                let bit = rng.below(8);
                patch.page_mut(image, page)[within] ^= 1 << bit;
                what.push(format!("bit {bit} of byte {}", start as usize + within));
                if let Some(other) = twin {
                    patch.page_mut(image, other)[within] ^= 1 << bit;
                    what.push(format!("and of page {other}"));
                }
            }
        }
        DamageKind::Words => {
            for _ in 0..1 + rng.below(3) {
                let within = offset_in_page(&mut rng, base, target, start) as usize / 8 * 8;
                let bytes = patch.page_mut(image, page);
                let value = if rng.chance(30) {
                    // Another word of the same page at the same position in its 16-byte entry
                    // (for a B+tree node: a duplicated child pointer or key).
                    let from = within % 16 + 16 * rng.below(16) as usize;
                    u64::from_le_bytes(bytes[from..from + 8].try_into().unwrap_or([0; 8]))
                } else {
                    nasty_value(&mut rng, page_count, page, &near)
                };
                bytes[within..within + 8].copy_from_slice(&value.to_le_bytes());
                what.push(format!("word at {} = {value:#x}", start as usize + within));
            }
        }
        DamageKind::ZeroPage => {
            patch.page_mut(image, page).fill(0);
            what.push(format!("page {page} zeroed"));
        }
        DamageKind::StalePage | DamageKind::Truncate => {
            let at = start as usize;
            let from_older = &base.older[at..at + ps];
            let source = if rng.chance(40) && from_older != &image[at..at + ps] {
                // A lost write: the page as it was in the older image.
                what.push(format!("page {page} as in the older image"));
                from_older
            } else {
                // Another page of the same kind most of the time (a stale node over a live one).
                let same: Vec<u64> = pages.iter().copied().filter(|p| *p != page).collect();
                let source = if !same.is_empty() && rng.chance(70) {
                    *rng.pick(&same)
                } else {
                    let other = rng.below(page_count - 1);
                    if other >= page {
                        other + 1
                    } else {
                        other
                    }
                };
                what.push(format!("page {source} copied over page {page}"));
                &image[source as usize * ps..(source as usize + 1) * ps]
            };
            patch.pages.insert(page, source.to_vec());
        }
    }
    let what = format!("{} page {page}: {}", target.name(), what.join(", "));
    (b, plan(kind, page, what), patch)
}

// ---------------------------------------------------------------------------------------------
// Cases.

/// The step a case thread is in and since when (read by the watchdog).
struct Progress(Mutex<(&'static str, Instant)>);

impl Progress {
    fn enter(&self, step: &'static str) {
        if let Ok(mut g) = self.0.lock() {
            *g = (step, Instant::now());
        }
    }

    fn current(&self) -> (&'static str, Duration) {
        match self.0.lock() {
            Ok(g) => (g.0, g.1.elapsed()),
            Err(_) => ("?", Duration::ZERO),
        }
    }
}

/// How a case ended: class, step, message.
type Verdict = (Class, &'static str, String);

thread_local! {
    /// The message and location of the last panic on this thread (set by the quiet hook).
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

static QUIET_HOOK: Once = Once::new();

/// Case threads' panics are results, not noise: record them instead of printing them.
fn install_quiet_hook() {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let ours = std::thread::current().name().is_some_and(|n| n.starts_with("fuzz-case"));
            if !ours {
                return previous(info);
            }
            let message = crate::crash::panic_message(info.payload());
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line()));
            LAST_PANIC
                .with(|p| *p.borrow_mut() = Some(format!("{message}{}", at.unwrap_or_default())));
        }));
    });
}

/// Runs `f` as step `name`: a panic is the case's verdict.
fn step<T>(progress: &Progress, name: &'static str, f: impl FnOnce() -> T) -> Result<T, Verdict> {
    progress.enter(name);
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| crate::crash::panic_message(&*payload));
        (Class::Panic, name, message)
    })
}

/// The verdict of a typed error: damage noticed (rejected at open, detected later) or another
/// error.
fn on_error(e: &DbError, name: &'static str, at_open: bool) -> Verdict {
    let class = match e {
        DbError::Corrupt(_) | DbError::Format(_) if at_open => Class::Rejected,
        DbError::Corrupt(_) | DbError::Format(_) => Class::Detected,
        _ => Class::Error,
    };
    (class, name, e.to_string())
}

/// What a case needs, shareable with a case thread that may outlive the run's scope.
struct CaseInput {
    open: OpenEngine,
    bases: Arc<Vec<Base>>,
    base: usize,
    patch: Patch,
    seed: u64,
    case: u64,
    txns: u32,
}

fn execute(input: &CaseInput, progress: &Progress) -> Verdict {
    match execute_steps(input, progress) {
        Ok(v) | Err(v) => v,
    }
}

fn execute_steps(input: &CaseInput, progress: &Progress) -> Result<Verdict, Verdict> {
    let base = &input.bases[input.base];
    let open = &input.open;
    let region = match Region::from_image(&base.image[..input.patch.len], &region_options()) {
        Ok(r) => r,
        Err(e) => return Ok((Class::Rejected, "map", e.to_string())),
    };
    // The damage is written through the region (on `sim` the lines count as written, not
    // persisted, which nothing here looks at).
    for (page, bytes) in &input.patch.pages {
        region.write(page * storage::format::PAGE_SIZE_U64, bytes);
    }
    let engine = match step(progress, "open", || open(region.clone()))? {
        Ok(engine) => engine,
        Err(e) => return Ok(on_error(&e, "open", true)),
    };
    if engine.recovery_report().formatted {
        return Ok((Class::Reformatted, "open", "the populated region was formatted".into()));
    }
    let mut different: Option<String>;
    let mut model = match step(progress, "scan", || scan_contents(&*engine))? {
        Ok(c) => {
            different = difference(&base.contents, &c).map(|d| format!("after open: {d}"));
            c
        }
        Err(DbError::Invalid(m)) if m.starts_with("scan returned") => {
            return Ok((Class::AcceptedDifferent, "scan", m));
        }
        Err(e) => return Ok(on_error(&e, "scan", false)),
    };
    let mut rng = Rng::new(derive(input.seed, input.case, SALT_WORKLOAD));
    let (result, note) = step(progress, "workload", || {
        let mut churn =
            Churn { engine: &*engine, model: &mut model, rng: &mut rng, different: None };
        let r = churn.run(input.txns, 0);
        (r, churn.different)
    })?;
    if let Err(e) = result {
        return Ok(on_error(&e, "workload", false));
    }
    different = different.or(note.map(|d| format!("workload: {d}")));
    if let Err(e) = step(progress, "integrity", || engine.check_integrity())? {
        return Ok((Class::Detected, "integrity", e));
    }
    match step(progress, "final scan", || scan_contents(&*engine))? {
        Ok(c) => {
            let d = difference(&model, &c).map(|d| format!("final scan: {d}"));
            different = different.or(d);
        }
        Err(e) => return Ok(on_error(&e, "final scan", false)),
    }
    step(progress, "close", || drop(engine))?;
    let engine = match step(progress, "reopen", || open(region.clone()))? {
        Ok(engine) => engine,
        Err(e) => return Ok(on_error(&e, "reopen", false)),
    };
    if engine.recovery_report().formatted {
        return Ok((Class::Reformatted, "reopen", "the region was formatted on reopen".into()));
    }
    if let Err(e) = step(progress, "reopen integrity", || engine.check_integrity())? {
        return Ok((Class::Detected, "reopen integrity", e));
    }
    match step(progress, "reopen scan", || scan_contents(&*engine))? {
        Ok(c) => {
            let d = difference(&model, &c).map(|d| format!("after reopen: {d}"));
            different = different.or(d);
        }
        Err(e) => return Ok(on_error(&e, "reopen scan", false)),
    }
    step(progress, "close", || drop(engine))?;
    Ok(match different {
        Some(d) => (Class::AcceptedDifferent, "compare", d),
        None => (Class::AcceptedSame, "compare", String::new()),
    })
}

/// Runs one case in its own thread under the watchdog.
fn run_case(
    open: &OpenEngine,
    bases: &Arc<Vec<Base>>,
    options: &FuzzOptions,
    case: u64,
) -> Outcome {
    let (base, plan, patch) = damage(bases, options.seed, case);
    let input = CaseInput {
        open: open.clone(),
        bases: bases.clone(),
        base,
        patch,
        seed: options.seed,
        case,
        txns: options.txns,
    };
    let progress = Arc::new(Progress(Mutex::new(("start", Instant::now()))));
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new().name(format!("fuzz-case-{case}")).spawn({
        let progress = progress.clone();
        move || {
            let verdict = execute(&input, &progress);
            let _ = tx.send(verdict);
        }
    });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => {
            let message = format!("spawning the case thread: {e}");
            return Outcome { plan, class: Class::Error, step: "spawn", message };
        }
    };
    let poll = (options.step_timeout / 4).max(Duration::from_millis(10));
    loop {
        match rx.recv_timeout(poll) {
            Ok((class, step, message)) => {
                let _ = handle.join();
                return Outcome { plan, class, step, message };
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let (step, took) = progress.current();
                if took > options.step_timeout {
                    // The thread cannot be stopped: it is left running (and counted).
                    let message = format!("step `{step}` still running after {took:?}");
                    return Outcome { plan, class: Class::Hang, step, message };
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let message = "the case thread ended without a verdict".to_string();
                return Outcome { plan, class: Class::Panic, step: "?", message };
            }
        }
    }
}

/// Facts about a base image, for reports.
#[derive(Clone, Debug, Serialize)]
pub struct BaseInfo {
    pub name: String,
    pub bytes: usize,
    pub rows: usize,
    pub checksum: String,
    pub pages: BTreeMap<&'static str, usize>,
}

/// Runs a fuzzing campaign. `on_case` sees every outcome as it is classified (with the number
/// done and the total).
pub fn run(
    open: OpenEngine,
    options: &FuzzOptions,
    on_case: &(dyn Fn(&Outcome, u64, u64) + Sync),
) -> Result<(Vec<BaseInfo>, Summary), String> {
    options.validate()?;
    let started = Instant::now();
    let bases = Arc::new(build_bases(&open, options.seed, options.region_bytes)?);
    let info = bases
        .iter()
        .map(|b| BaseInfo {
            name: b.name.clone(),
            bytes: b.image.len(),
            rows: b.rows(),
            checksum: format!("{:016x}", b.checksum()),
            pages: b.target_pages(),
        })
        .collect();
    let cases: Vec<u64> = match options.only {
        Some(k) => vec![k],
        None => (0..options.cases).collect(),
    };
    if options.only.is_none() {
        install_quiet_hook();
    }
    let total = cases.len() as u64;
    let next = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let hangs = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let summary = Mutex::new(Summary::default());
    std::thread::scope(|s| {
        for _ in 0..options.jobs.min(cases.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= cases.len() || stop.load(Ordering::Relaxed) {
                    break;
                }
                let outcome = run_case(&open, &bases, options, cases[i]);
                if outcome.class == Class::Hang
                    && hangs.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_HANGS
                {
                    stop.store(true, Ordering::Relaxed);
                }
                if let Ok(mut s) = summary.lock() {
                    s.add(&outcome);
                }
                on_case(&outcome, done.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    let mut summary = summary.into_inner().map_err(|_| "a job panicked".to_string())?;
    if stop.load(Ordering::Relaxed) {
        summary.stopped =
            Some(format!("stopped after {MAX_HANGS} hangs (their threads still run)"));
    }
    summary.elapsed_s = started.elapsed().as_secs_f64();
    Ok((info, summary))
}

//! The fuzzer's base images: TPC-B and YCSB loads churned by inserts and deletes, images cut
//! while transactions are in flight, and what the engine says lives in each of their pages
//! (the targets, each engine's own structures included).

use super::*;

/// A base image's region options: from an image, only the non-size options matter.
pub(super) fn region_options() -> RegionOptions {
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

pub(super) fn table_ids(engine: &dyn Engine) -> Vec<(String, TableId)> {
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

pub(super) fn scan_contents(engine: &dyn Engine) -> storage::Result<Contents> {
    let mut out = Contents::new();
    for (name, id) in table_ids(engine) {
        out.insert(name, scan_table(engine, id)?);
    }
    Ok(out)
}

/// First difference between two contents, in words.
pub(super) fn difference(expected: &Contents, got: &Contents) -> Option<String> {
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
pub(super) struct Churn<'a> {
    pub(super) engine: &'a dyn Engine,
    pub(super) model: &'a mut Contents,
    pub(super) rng: &'a mut Rng,
    /// The first disagreement between the engine and the model.
    pub(super) different: Option<String>,
}

impl Churn<'_> {
    /// Runs `txns` transactions on `worker`; a typed error ends the run and is returned.
    pub(super) fn run(&mut self, txns: u32, worker: usize) -> storage::Result<()> {
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

//! The results store: `DIR/results.jsonl`, one JSON object per run, and `DIR/specs/`, a copy of
//! every spec that wrote into it (so a report needs nothing but the directory).
//!
//! A row is the bench's `--json` object with the sweep's keys added (`spec`, `point`, `rep`,
//! `hash`, `grid`, `flags`, `status`, `exit_code`, `error`, `wall_s`, ...; see [`keys`]).
//!
//! Invariants: a row is appended with one `write` of the whole line, flushed and synced before
//! the next run starts, so a sweep killed at any moment leaves at most one torn last line,
//! which readers skip and the next append terminates; a run counts as done only once its line
//! is in the file.

use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The results file inside an output directory.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The directory of spec copies inside an output directory.
pub const SPECS_DIR: &str = "specs";

/// Keys the sweep adds to each bench row.
pub mod keys {
    pub const SPEC: &str = "spec";
    pub const POINT: &str = "point";
    pub const REP: &str = "rep";
    pub const HASH: &str = "hash";
    pub const QUICK: &str = "quick";
    pub const GRID: &str = "grid";
    pub const FLAGS: &str = "flags";
    pub const ARGS: &str = "args";
    pub const STATUS: &str = "status";
    pub const EXIT_CODE: &str = "exit_code";
    pub const ERROR: &str = "error";
    pub const UNSUPPORTED: &str = "unsupported";
    pub const WALL_S: &str = "wall_s";
    pub const STARTED_UNIX_S: &str = "started_unix_s";
    pub const HOST: &str = "host";
    pub const CRASH_AFTER_S: &str = "crash_after_s";
    /// The commit of the code a run used (`provenance::code_commit`).
    pub const CODE_COMMIT: &str = "code_commit";
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Status {
    /// The bench printed its row and exited 0.
    Ok,
    /// The bench printed its row and its consistency checker failed (exit 1).
    CheckFailed,
    /// Exit 2 for a bad or unknown option: an engine, a workload or a flag the bench does not
    /// have yet. Not done: a later sweep tries again.
    Unsupported,
    /// Any other failure (a crash, a signal, no row printed).
    Error,
    /// Killed after the run's time limit.
    Timeout,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::CheckFailed => "check_failed",
            Status::Unsupported => "unsupported",
            Status::Error => "error",
            Status::Timeout => "timeout",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [Status::Ok, Status::CheckFailed, Status::Unsupported, Status::Error, Status::Timeout]
            .into_iter()
            .find(|st| st.name() == s)
    }

    /// Which row to keep when two describe the same run: lower is better.
    fn rank(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::CheckFailed => 1,
            Status::Error => 2,
            Status::Timeout => 3,
            Status::Unsupported => 4,
        }
    }

    /// Whether a resumed sweep skips a run with this status.
    pub fn is_done(self, retry_failed: bool) -> bool {
        match self {
            Status::Ok | Status::CheckFailed => true,
            Status::Error | Status::Timeout => !retry_failed,
            Status::Unsupported => false,
        }
    }
}

/// One line of `results.jsonl`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row(pub Map<String, Value>);

/// What identifies a run: spec, point, repetition and the hash of its settings.
pub type RunKey = (String, String, u32, String);

impl Row {
    pub fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    pub fn spec(&self) -> &str {
        self.str(keys::SPEC).unwrap_or("")
    }

    pub fn point(&self) -> &str {
        self.str(keys::POINT).unwrap_or("")
    }

    pub fn rep(&self) -> u32 {
        self.0.get(keys::REP).and_then(Value::as_u64).map_or(0, |r| r.min(u32::MAX as u64) as u32)
    }

    pub fn hash(&self) -> &str {
        self.str(keys::HASH).unwrap_or("")
    }

    pub fn status(&self) -> Status {
        self.str(keys::STATUS).and_then(Status::parse).unwrap_or(Status::Error)
    }

    pub fn started(&self) -> f64 {
        self.0.get(keys::STARTED_UNIX_S).and_then(Value::as_f64).unwrap_or(0.0)
    }

    pub fn key(&self) -> RunKey {
        (self.spec().into(), self.point().into(), self.rep(), self.hash().into())
    }

    /// A field by dotted path (`latency_us.p95`), as a number.
    pub fn number(&self, path: &str) -> Option<f64> {
        let mut parts = path.split('.');
        let mut v = self.0.get(parts.next()?)?;
        for p in parts {
            v = match v {
                Value::Object(m) => m.get(p)?,
                Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        match v {
            Value::Number(n) => n.as_f64(),
            Value::Bool(b) => Some(f64::from(u8::from(*b))),
            _ => None,
        }
    }

    /// The grid label of `axis`, else the flag's text.
    pub fn value(&self, key: &str) -> Option<String> {
        let text = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        };
        let from = |section: &str| self.0.get(section)?.as_object()?.get(key).and_then(text);
        from(keys::GRID).or_else(|| from(keys::FLAGS))
    }
}

/// A store error, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {error}")]
pub struct StoreError {
    pub path: PathBuf,
    pub error: std::io::Error,
}

fn store_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |error| StoreError { path: path.to_path_buf(), error }
}

/// Rows read from a results file.
#[derive(Debug, Default)]
pub struct Loaded {
    pub rows: Vec<Row>,
    /// Lines that are not JSON objects (a torn last line after a kill).
    pub skipped_lines: usize,
}

/// Reads `path`; a missing file is empty.
pub fn read_rows(path: &Path) -> Result<Loaded, StoreError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
        Err(e) => return Err(store_err(path)(e)),
    };
    let mut loaded = Loaded::default();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(store_err(path))?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(&line) {
            Ok(Value::Object(map)) => loaded.rows.push(Row(map)),
            _ => loaded.skipped_lines += 1,
        }
    }
    Ok(loaded)
}

/// Runs already in the file, by key, that a sweep skips.
pub fn done_runs(rows: &[Row], retry_failed: bool) -> HashSet<RunKey> {
    rows.iter().filter(|r| r.status().is_done(retry_failed)).map(Row::key).collect()
}

/// Appends rows to `DIR/results.jsonl`, one synced line at a time.
pub struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    /// Opens (creating) the results file of `dir`; terminates a torn last line first.
    pub fn open(dir: &Path) -> Result<Appender, StoreError> {
        std::fs::create_dir_all(dir).map_err(store_err(dir))?;
        let path = dir.join(RESULTS_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(store_err(&path))?;
        let len = file.metadata().map_err(store_err(&path))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1)).map_err(store_err(&path))?;
            file.read_exact(&mut last).map_err(store_err(&path))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(store_err(&path))?;
            }
        }
        Ok(Appender { file, path })
    }

    /// Appends `row` as one line: one `write` call, then flush and fsync.
    pub fn append(&mut self, row: &Row) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(&row.0)
            .map_err(|e| store_err(&self.path)(std::io::Error::other(e)))?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(store_err(&self.path))?;
        self.file.flush().map_err(store_err(&self.path))?;
        self.file.sync_data().map_err(store_err(&self.path))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Copies a spec's text to `DIR/specs/<name>.toml` (replacing an older copy).
pub fn save_spec(dir: &Path, name: &str, text: &str) -> Result<PathBuf, StoreError> {
    let specs = dir.join(SPECS_DIR);
    std::fs::create_dir_all(&specs).map_err(store_err(&specs))?;
    let path = specs.join(format!("{name}.toml"));
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text) {
        return Ok(path);
    }
    write_atomically(&path, text.as_bytes())?;
    Ok(path)
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        store_err(path)(e)
    })
}

/// What [`merge`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeStats {
    pub inputs: usize,
    pub rows_read: usize,
    pub rows_written: usize,
    pub duplicates: usize,
    /// Rows of `out` dropped because the inputs rerun their spec ([`merge_replacing`]).
    pub replaced: usize,
    pub skipped_lines: usize,
    pub specs: usize,
}

/// Joins the results of several output directories (shards) into `out`: one row per run key
/// (the best status wins, then the earliest), and every spec copy. Rows already in `out` take
/// part, so merging twice changes nothing.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<MergeStats, StoreError> {
    merge_rows(inputs, out, Replace::Nothing)
}

/// [`merge`] for a rerun: every row `out` holds of a spec that the inputs hold rows of is dropped
/// first, so the spec's verdicts come from the inputs' sitting alone (compared configurations run
/// side by side in one sitting). Plain [`merge`] keeps `out`'s copy of a run it already holds, so a
/// rerun merged into a directory that has the spec's points would add only its new points.
pub fn merge_replacing(inputs: &[PathBuf], out: &Path) -> Result<MergeStats, StoreError> {
    merge_rows(inputs, out, Replace::Specs)
}

/// [`merge_replacing`] for a partial rerun: only the rows `out` holds of the *points* the inputs
/// hold rows of (every repetition of each) are dropped, and the spec's other points are kept
/// (`nvmdb merge --replace-points`). The spec's verdicts then mix two sittings, which a claim
/// comparing a rerun point with a kept one must allow for; the report's provenance check still
/// names rows of another build.
pub fn merge_replacing_points(inputs: &[PathBuf], out: &Path) -> Result<MergeStats, StoreError> {
    merge_rows(inputs, out, Replace::Points)
}

/// Which rows of `out` a merge's inputs replace.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replace {
    Nothing,
    /// Every row of a spec the inputs hold rows of.
    Specs,
    /// Every row of a (spec, point) the inputs hold rows of.
    Points,
}

fn row_spec(row: &Row) -> Option<&str> {
    row.0.get("spec").and_then(|v| v.as_str())
}

/// What a row is replaced by: its spec, or its spec and point.
fn replaced_unit(row: &Row, replace: Replace) -> Option<(String, String)> {
    let spec = row_spec(row)?.to_owned();
    match replace {
        Replace::Nothing => None,
        Replace::Specs => Some((spec, String::new())),
        Replace::Points => Some((spec, row.0.get("point")?.as_str()?.to_owned())),
    }
}

fn merge_rows(inputs: &[PathBuf], out: &Path, replace: Replace) -> Result<MergeStats, StoreError> {
    let mut stats = MergeStats { inputs: inputs.len(), ..MergeStats::default() };
    let mut rerun: std::collections::HashSet<(String, String)> = std::collections::HashSet::new();
    if replace != Replace::Nothing {
        // The input (not `out`) each run came from. A run in two inputs is two sittings of it,
        // and which one replaces `out`'s is ambiguous: refused before anything is written (a
        // rerun merged into a fresh `--out` beside the older directory as an input kept the
        // older rows and dropped the rerun's as duplicates).
        let mut from_input: HashMap<RunKey, &PathBuf> = HashMap::new();
        for dir in inputs.iter().filter(|d| !same_dir(d, out)) {
            let loaded = read_rows(&dir.join(RESULTS_FILE))?;
            rerun.extend(loaded.rows.iter().filter_map(|r| replaced_unit(r, replace)));
            for row in &loaded.rows {
                // One input may hold a run twice (a failed run and its `--retry-failed`).
                let Some(first) = from_input.insert(row.key(), dir).filter(|f| *f != dir) else {
                    continue;
                };
                let point = row.0.get("point").and_then(|v| v.as_str()).unwrap_or("?");
                return Err(StoreError {
                    path: dir.clone(),
                    error: std::io::Error::other(format!(
                        "--replace: point {point} (this repetition) is also in {}: two sittings \
                         of one run, so which replaces the other is ambiguous; merge the rerun \
                         into the directory it replaces (--out OLD OLD RERUN)",
                        first.display()
                    )),
                });
            }
        }
    }
    let mut order: Vec<RunKey> = Vec::new();
    let mut best: HashMap<RunKey, Row> = HashMap::new();
    let out_file = out.join(RESULTS_FILE);
    let mut sources: Vec<PathBuf> = vec![out.to_path_buf()];
    sources.extend(inputs.iter().filter(|d| !same_dir(d, out)).cloned());
    for dir in &sources {
        let loaded = read_rows(&dir.join(RESULTS_FILE))?;
        stats.skipped_lines += loaded.skipped_lines;
        if dir != out {
            stats.rows_read += loaded.rows.len();
        }
        for row in loaded.rows {
            if dir == out && replaced_unit(&row, replace).is_some_and(|u| rerun.contains(&u)) {
                stats.replaced += 1;
                continue;
            }
            let key = row.key();
            match best.get(&key) {
                None => {
                    order.push(key.clone());
                    best.insert(key, row);
                }
                Some(kept) => {
                    stats.duplicates += 1;
                    if row.status().rank() < kept.status().rank() {
                        best.insert(key, row);
                    }
                }
            }
        }
        stats.specs += copy_specs(dir, out)?;
    }
    let mut text = Vec::new();
    for key in &order {
        if let Some(row) = best.get(key) {
            serde_json::to_writer(&mut text, &row.0)
                .map_err(|e| store_err(&out_file)(std::io::Error::other(e)))?;
            text.push(b'\n');
        }
    }
    std::fs::create_dir_all(out).map_err(store_err(out))?;
    write_atomically(&out_file, &text)?;
    stats.rows_written = order.len();
    Ok(stats)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Copies `from/specs/*.toml` into `to/specs/`; returns how many were copied.
fn copy_specs(from: &Path, to: &Path) -> Result<usize, StoreError> {
    if same_dir(from, to) {
        return Ok(0);
    }
    let dir = from.join(SPECS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(store_err(&dir)(e)),
    };
    let mut copied = 0;
    for entry in entries {
        let path = entry.map_err(store_err(&dir))?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).map_err(store_err(&path))?;
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("spec");
            save_spec(to, name, &text)?;
            copied += 1;
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(point: &str, rep: u32, status: &str) -> Row {
        let v = json!({"spec": "s", "point": point, "rep": rep, "hash": "h", "status": status,
                       "tps": 10.0, "latency_us": {"p95": 3.5}, "grid": {"engine": "inplace"},
                       "flags": {"engine": "inplace", "threads": "2"}});
        match v {
            Value::Object(m) => Row(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn fields_and_values() {
        let r = row("p", 1, "ok");
        assert_eq!(r.number("latency_us.p95"), Some(3.5));
        assert_eq!(r.number("tps"), Some(10.0));
        assert_eq!(r.number("nope.x"), None);
        assert_eq!(r.value("engine").as_deref(), Some("inplace"));
        assert_eq!(r.value("threads").as_deref(), Some("2"));
        assert_eq!(r.status(), Status::Ok);
    }

    #[test]
    fn append_survives_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = Appender::open(dir.path()).unwrap();
        a.append(&row("p1", 0, "ok")).unwrap();
        drop(a);
        // A kill mid-write leaves half a line.
        let path = dir.path().join(RESULTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"spec": "s", "poi"#).unwrap();
        drop(f);
        let mut a = Appender::open(dir.path()).unwrap();
        a.append(&row("p2", 0, "ok")).unwrap();
        let loaded = read_rows(&path).unwrap();
        assert_eq!(loaded.rows.len(), 2);
        assert_eq!(loaded.skipped_lines, 1);
        assert_eq!(loaded.rows[1].point(), "p2");
    }

    #[test]
    fn done_means_finished() {
        let rows = vec![row("a", 0, "ok"), row("b", 0, "unsupported"), row("c", 0, "error")];
        let done = done_runs(&rows, false);
        assert!(done.contains(&rows[0].key()));
        assert!(!done.contains(&rows[1].key()));
        assert!(done.contains(&rows[2].key()));
        assert!(!done_runs(&rows, true).contains(&rows[2].key()));
    }

    #[test]
    fn merge_dedupes_and_prefers_ok() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let mut wa = Appender::open(a.path()).unwrap();
        wa.append(&row("p1", 0, "unsupported")).unwrap();
        wa.append(&row("p2", 0, "ok")).unwrap();
        let mut wb = Appender::open(b.path()).unwrap();
        wb.append(&row("p1", 0, "ok")).unwrap();
        wb.append(&row("p3", 0, "ok")).unwrap();
        save_spec(b.path(), "s", "[spec]\n").unwrap();
        let inputs = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        let stats = merge(&inputs, out.path()).unwrap();
        assert_eq!(stats.rows_written, 3);
        assert_eq!(stats.duplicates, 1);
        assert_eq!(stats.specs, 1);
        let rows = read_rows(&out.path().join(RESULTS_FILE)).unwrap().rows;
        assert!(rows.iter().all(|r| r.status() == Status::Ok));
        // Merging again is idempotent.
        merge(&inputs, out.path()).unwrap();
        assert_eq!(read_rows(&out.path().join(RESULTS_FILE)).unwrap().rows.len(), 3);
        assert!(out.path().join("specs/s.toml").exists());
    }

    /// Guards `nvmdb merge --replace`: a rerun's rows replace every row `out` holds of the spec,
    /// not only the new points (plain merge kept `out`'s copy and dropped the rerun's).
    #[test]
    fn merge_replacing_takes_a_reruns_rows_of_its_spec_and_keeps_other_specs() {
        let out = tempfile::tempdir().unwrap();
        let rerun = tempfile::tempdir().unwrap();
        let mut old = row("p1", 0, "ok");
        old.0.insert("tps".into(), json!(1.0));
        let mut other = row("q1", 0, "ok");
        other.0.insert("spec".into(), json!("t"));
        let mut wo = Appender::open(out.path()).unwrap();
        wo.append(&old).unwrap();
        wo.append(&row("p9", 0, "ok")).unwrap();
        wo.append(&other).unwrap();
        let mut wr = Appender::open(rerun.path()).unwrap();
        wr.append(&row("p1", 0, "ok")).unwrap();
        let inputs = vec![rerun.path().to_path_buf()];
        // Plain merge keeps the old copy of p1.
        let plain = tempfile::tempdir().unwrap();
        std::fs::copy(out.path().join(RESULTS_FILE), plain.path().join(RESULTS_FILE)).unwrap();
        merge(&inputs, plain.path()).unwrap();
        let kept = read_rows(&plain.path().join(RESULTS_FILE)).unwrap().rows;
        let p1 = kept.iter().find(|r| r.0["point"] == "p1").unwrap();
        assert_eq!(p1.0["tps"], json!(1.0));
        let stats = merge_replacing(&inputs, out.path()).unwrap();
        assert_eq!(stats.replaced, 2, "p1 and p9 of spec s are dropped");
        let rows = read_rows(&out.path().join(RESULTS_FILE)).unwrap().rows;
        let points: Vec<&str> = rows.iter().map(|r| r.0["point"].as_str().unwrap()).collect();
        assert_eq!(points, vec!["q1", "p1"], "spec t kept, spec s only from the rerun");
        let p1 = rows.iter().find(|r| r.0["point"] == "p1").unwrap();
        assert_eq!(p1.0["tps"], json!(10.0));
    }

    /// `nvmdb merge --replace-points`: a partial rerun's rows replace every repetition `out`
    /// holds of the points it ran, and only those: the spec's other points stay.
    #[test]
    fn merge_replacing_points_takes_a_reruns_points_and_keeps_the_specs_other_points() {
        let out = tempfile::tempdir().unwrap();
        let rerun = tempfile::tempdir().unwrap();
        let mut wo = Appender::open(out.path()).unwrap();
        for rep in 0..3 {
            let mut old = row("p1", rep, "ok");
            old.0.insert("tps".into(), json!(1.0));
            wo.append(&old).unwrap();
            wo.append(&row("p9", rep, "ok")).unwrap();
        }
        let mut wr = Appender::open(rerun.path()).unwrap();
        wr.append(&row("p1", 0, "ok")).unwrap();
        wr.append(&row("p1", 1, "ok")).unwrap();
        let stats = merge_replacing_points(&[rerun.path().to_path_buf()], out.path()).unwrap();
        assert_eq!(stats.replaced, 3, "the three repetitions of p1, not p9's");
        let rows = read_rows(&out.path().join(RESULTS_FILE)).unwrap().rows;
        let p1: Vec<&Row> = rows.iter().filter(|r| r.0["point"] == "p1").collect();
        assert_eq!(p1.len(), 2, "only the rerun's repetitions of p1");
        assert!(p1.iter().all(|r| r.0["tps"] == json!(10.0)));
        assert_eq!(rows.iter().filter(|r| r.0["point"] == "p9").count(), 3);
    }

    /// `nvmdb merge --replace --out FRESH OLD RERUN` kept OLD's rows and dropped RERUN's as
    /// duplicates (replacing only drops `--out`'s rows): a run that two inputs hold is refused
    /// with `--replace`, naming both; shards of one sweep (disjoint runs) still merge.
    #[test]
    fn regression_merge_replacing_refuses_a_run_in_two_inputs() {
        let (old, rerun, fresh) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let mut stale = row("p1", 0, "ok");
        stale.0.insert("tps".into(), json!(1.0));
        Appender::open(old.path()).unwrap().append(&stale).unwrap();
        Appender::open(rerun.path()).unwrap().append(&row("p1", 0, "ok")).unwrap();
        let inputs = vec![old.path().to_path_buf(), rerun.path().to_path_buf()];
        let err = merge_replacing(&inputs, fresh.path()).unwrap_err().to_string();
        assert!(err.contains("p1") && err.contains("ambiguous"), "{err}");
        // Shards: disjoint runs of one spec in two inputs merge.
        let (a, b, out) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        Appender::open(a.path()).unwrap().append(&row("p1", 0, "ok")).unwrap();
        Appender::open(b.path()).unwrap().append(&row("p2", 0, "ok")).unwrap();
        let shards = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        assert_eq!(merge_replacing(&shards, out.path()).unwrap().rows_written, 2);
        // One input holding a run twice (a failed run and its retry) is not two sittings.
        let retried = tempfile::tempdir().unwrap();
        let mut w = Appender::open(retried.path()).unwrap();
        w.append(&row("p3", 0, "error")).unwrap();
        w.append(&row("p3", 0, "ok")).unwrap();
        let into = tempfile::tempdir().unwrap();
        assert_eq!(
            merge_replacing(&[retried.path().to_path_buf()], into.path()).unwrap().rows_written,
            1
        );
        // The intended form: the rerun into the directory it replaces.
        let stats =
            merge_replacing(&[old.path().to_path_buf(), rerun.path().to_path_buf()], old.path())
                .unwrap();
        assert_eq!((stats.replaced, stats.rows_written), (1, 1));
    }
}

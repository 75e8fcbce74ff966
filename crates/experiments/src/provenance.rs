//! What a report's numbers were measured on: hosts, nvmdb versions and commits, and when, read
//! from the bench rows themselves (`config.host_cpu`, `config.git_commit`, `started_unix_s`),
//! so a figure copied out of the report still says where it came from.
//!
//! Invariant: every value shown is one some row carries; nothing is taken from the machine
//! that writes the report, except the time the report was written.

use crate::results::Row;
use serde::Serialize;
use std::collections::BTreeSet;

/// Distinct facts over a set of rows.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Provenance {
    /// `vm: AMD EPYC, 2 cores, flush clwb`.
    pub hosts: Vec<String>,
    /// `0.1.0`.
    pub versions: Vec<String>,
    /// Short git commits (12 hex digits).
    pub commits: Vec<String>,
    /// Start of the first and the last run, Unix seconds.
    pub first_run_unix_s: Option<f64>,
    pub last_run_unix_s: Option<f64>,
    /// Whether any row is from a `--quick` sweep.
    pub quick: bool,
    /// Highest 1-minute load average any run saw before it started (`config.host_load_before`):
    /// above the host's cores, runs competed for the CPU.
    pub max_load_before: Option<f64>,
    /// The commits `commits` lists in place of what the binaries say, as [`CORRECTIONS_FILE`]
    /// gives them: `405 row(s) labelled 2d8bf738fea4-dirty ran d7b15ab54964`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub corrected: Vec<String>,
}

/// Most distinct values listed before "and N more": a merged sweep of many machines should
/// not turn a figure's subtitle into a paragraph.
const MAX_LISTED: usize = 3;

fn config_str(row: &Row, key: &str) -> Option<String> {
    let v = row.0.get("config")?.get(key)?;
    match v {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl Provenance {
    /// The facts of `rows` as they record them.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a Row>) -> Provenance {
        Provenance::of_corrected(rows, &Corrections::default())
    }

    /// The facts of `rows`, each row's commit being the one whose code it ran: its binary's
    /// (`config.git_commit`) unless `corrections` say otherwise ([`Corrections::ran`]), as the
    /// report's notes on those rows say.
    pub fn of_corrected<'a>(
        rows: impl IntoIterator<Item = &'a Row>,
        corrections: &Corrections,
    ) -> Provenance {
        let (mut hosts, mut versions, mut commits) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut corrected: std::collections::BTreeMap<(String, String), usize> = Default::default();
        let mut p = Provenance::default();
        for r in rows {
            p.quick |= r.0.get(crate::results::keys::QUICK).and_then(|q| q.as_bool()) == Some(true);
            let started = r.started();
            if started > 0.0 {
                p.first_run_unix_s = Some(p.first_run_unix_s.map_or(started, |f| f.min(started)));
                p.last_run_unix_s = Some(p.last_run_unix_s.map_or(started, |l| l.max(started)));
            }
            // Rows of runs the bench rejected carry no config; their host is still known.
            let Some(name) = r.str(crate::results::keys::HOST) else { continue };
            let mut facts = Vec::new();
            if let Some(cpu) = config_str(r, "host_cpu") {
                facts.push(cpu);
            }
            if let Some(cores) = config_str(r, "host_cores") {
                facts.push(format!("{cores} cores"));
            }
            if let Some(flush) = config_str(r, "host_flush") {
                facts.push(format!("flush {flush}"));
            }
            if facts.is_empty() {
                hosts.insert(name.to_string());
            } else {
                hosts.insert(format!("{name}: {}", facts.join(", ")));
            }
            let load = r.0.get("config").and_then(|c| c.get("host_load_before"));
            if let Some(load) = load.and_then(serde_json::Value::as_f64) {
                p.max_load_before = Some(p.max_load_before.map_or(load, |m| m.max(load)));
            }
            versions.extend(config_str(r, "nvmdb_version"));
            let built = config_str(r, "git_commit");
            match (corrections.ran(r), &built) {
                (Some(ran), Some(b)) if !same_commit(ran, b) => {
                    let (ran, b) = (short_commit(ran), short_commit(b));
                    commits.insert(ran.clone());
                    *corrected.entry((b, ran)).or_default() += 1;
                }
                _ => commits.extend(built.map(|c| short_commit(&c))),
            }
        }
        p.hosts = hosts.into_iter().collect();
        p.versions = versions.into_iter().collect();
        p.commits = commits.into_iter().collect();
        p.corrected = corrected
            .into_iter()
            .map(|((built, ran), n)| format!("{n} row(s) labelled {built} ran {ran}"))
            .collect();
        p
    }

    /// `2026-11-25 15:28–15:31 UTC`, or the two dates when the runs span days.
    pub fn run_dates(&self) -> Option<String> {
        let (first, last) = (self.first_run_unix_s?, self.last_run_unix_s?);
        let (a, b) = (utc_minute(first), utc_minute(last));
        Some(if a == b {
            format!("{a} UTC")
        } else if a[..10] == b[..10] {
            format!("{a}–{} UTC", &b[11..])
        } else {
            format!("{a} – {b} UTC")
        })
    }

    /// One line for a figure's subtitle and the page footer: `host vm: AMD EPYC, 2 cores,
    /// flush clwb · runs 2026-11-25 15:28 UTC · nvmdb 0.1.0 (commit 829029a3c36b)`, with what
    /// a correction changed: `(commit d7b15ab54964; corrections.toml: 405 row(s) labelled
    /// 2d8bf738fea4-dirty ran d7b15ab54964)`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if !self.hosts.is_empty() {
            parts.push(format!("host {}", listed(&self.hosts)));
        }
        if let Some(d) = self.run_dates() {
            parts.push(format!("runs {d}"));
        }
        if let Some(load) = self.max_load_before {
            parts.push(format!("load average ≤ {load:.1} before each run"));
        }
        let version = listed(&self.versions);
        let mut commit = listed(&self.commits);
        if !self.corrected.is_empty() {
            commit = format!("{commit}; {CORRECTIONS_FILE}: {}", listed(&self.corrected));
        }
        match (version.is_empty(), commit.is_empty()) {
            (false, false) => parts.push(format!("nvmdb {version} (commit {commit})")),
            (false, true) => parts.push(format!("nvmdb {version}")),
            (true, false) => parts.push(format!("commit {commit}")),
            (true, true) => {}
        }
        if parts.is_empty() {
            return "no runs".into();
        }
        parts.join(" · ")
    }
}

fn listed(items: &[String]) -> String {
    if items.len() <= MAX_LISTED {
        return items.join("; ");
    }
    format!("{}; and {} more", items[..MAX_LISTED].join("; "), items.len() - MAX_LISTED)
}

/// `2026-11-25 15:28` for Unix seconds, in UTC (civil-from-days, H. Hinnant's algorithm: the
/// crate has no date library and needs only this).
pub fn utc_minute(unix_s: f64) -> String {
    let secs = unix_s.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}

/// Now, as [`utc_minute`].
pub fn now_utc_minute() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    utc_minute(now)
}

/// Whether two commit names, either of them possibly abbreviated, name the same commit, and
/// both a clean build of it or both a `-dirty` one.
fn same_commit(a: &str, b: &str) -> bool {
    let (sha_a, sha_b) = (a.trim_end_matches("-dirty"), b.trim_end_matches("-dirty"));
    !sha_a.is_empty()
        && !sha_b.is_empty()
        && (sha_a.starts_with(sha_b) || sha_b.starts_with(sha_a))
        && a.ends_with("-dirty") == b.ends_with("-dirty")
}

/// The first 12 hex digits of a commit, keeping a build's `-dirty` mark.
fn short_commit(c: &str) -> String {
    let sha: String = c.chars().take(12).collect();
    if c.ends_with("-dirty") && !sha.ends_with("-dirty") {
        format!("{sha}-dirty")
    } else {
        sha
    }
}

/// The commit of the code a run used, as the sweep sees it: the bench binary's build commit
/// `built` when the checkout's code (`crates/`, `Cargo.toml`, `Cargo.lock`) is the same as at
/// that commit (later commits changed only results or docs), else the checkout's own commit
/// (`<commit>-dirty` with uncommitted code changes: the rule of the CLI's build.rs). Recorded in
/// every row as `code_commit`; a row whose binary commit differs from it ran other code than
/// the commit it names (issue 38: rows labelled 24ef3e8 ran 5595ad7's code). `None` outside a
/// git checkout.
pub fn code_commit(built: Option<&str>) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<Option<String>, Option<String>>>> = OnceLock::new();
    let key = built.map(str::to_string);
    let seen = SEEN.get_or_init(Default::default);
    if let Some(known) = seen.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return known;
    }
    let found = find_code_commit(built);
    if let Ok(mut m) = seen.lock() {
        m.insert(key, found.clone());
    }
    found
}

const CODE: [&str; 3] = ["crates", "Cargo.toml", "Cargo.lock"];

fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn find_code_commit(built: Option<&str>) -> Option<String> {
    let head = git(&["rev-parse", "HEAD"]).filter(|c| !c.is_empty())?;
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let mut status =
        vec!["-C", top.as_str(), "status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(CODE);
    if git(&status).is_some_and(|s| !s.is_empty()) {
        return Some(format!("{head}-dirty"));
    }
    let Some(built) = built.filter(|b| !b.ends_with("-dirty")) else { return Some(head) };
    let mut diff = vec!["-C", top.as_str(), "diff", "--quiet", built, head.as_str(), "--"];
    diff.extend(CODE);
    // `git diff --quiet` exits 0 when the code is the same, 1 when it differs.
    let same = std::process::Command::new("git").args(&diff).output().ok()?.status.success();
    Some(if same { built.to_string() } else { head })
}

/// The bench binary's build commit of a row (`config.git_commit`).
pub fn build_commit(row: &Row) -> Option<String> {
    config_str(row, "git_commit")
}

/// Whether a row's binary was built from another commit than the code its sweep ran:
/// its numbers cannot be attributed to the commit it names. Rows without both say nothing.
pub fn commit_mismatch(row: &Row) -> Option<(String, String)> {
    let named = row.str(crate::results::keys::CODE_COMMIT)?.to_string();
    let built = build_commit(row)?;
    (named != built).then_some((named, built))
}

/// The rows (by index) of builds older than the newest: the build commit of the latest-started
/// row is the spec's newest; rows of any other commit are flagged with theirs.
pub fn older_builds(rows: &[&Row]) -> Option<(String, Vec<(String, usize)>)> {
    let newest = rows
        .iter()
        .filter(|r| build_commit(r).is_some())
        .max_by(|a, b| a.started().total_cmp(&b.started()))
        .and_then(|r| build_commit(r))?;
    let mut older: std::collections::BTreeMap<String, usize> = Default::default();
    for r in rows {
        match build_commit(r) {
            Some(c) if c != newest => *older.entry(short_commit(&c)).or_default() += 1,
            _ => {}
        }
    }
    (!older.is_empty()).then(|| (short_commit(&newest), older.into_iter().collect()))
}

/// The file of a results directory that corrects what its rows record wrongly.
pub const CORRECTIONS_FILE: &str = "corrections.toml";

/// A fact about rows that they record wrongly, kept beside them and never written into them:
/// rows whose binary says `labelled` (`config.git_commit`) and that started at or after
/// `started_from_unix_s` ran the code of commit `ran` (review 5, problem 8).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeCommitCorrection {
    pub labelled: String,
    pub ran: String,
    pub started_from_unix_s: f64,
    pub reason: String,
}

/// Everything [`CORRECTIONS_FILE`] says.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corrections {
    #[serde(default)]
    pub code_commit: Vec<CodeCommitCorrection>,
    #[serde(default)]
    pub checkout_moved: Vec<CheckoutMoved>,
}

/// Rows whose binary and checkout disagree (the checkout moved on while a binary built earlier
/// ran, or the binary was built from uncommitted code that was then committed), and which of
/// the two they ran: rows whose binary says `built` (`config.git_commit`, as recorded), that
/// name `labelled` as their `code_commit` (as recorded) and that started in
/// `[started_from_unix_s, started_to_unix_s]` ran the code of commit `ran`, which is `built` or
/// `labelled`. [`commit_mismatch`] refuses them; this vouches for them, the report says so on
/// every spec it covers, and figures credit `ran` (issue 38: one entry's rows ran `built`'s
/// code, the other's `labelled`'s, and the field said neither).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckoutMoved {
    pub built: String,
    pub labelled: String,
    pub ran: String,
    pub started_from_unix_s: f64,
    pub started_to_unix_s: f64,
    pub reason: String,
}

impl CheckoutMoved {
    pub fn covers(&self, row: &Row) -> bool {
        let named = row.str(crate::results::keys::CODE_COMMIT);
        !self.built.is_empty()
            && !self.labelled.is_empty()
            && build_commit(row).is_some_and(|b| b.starts_with(&self.built))
            && named.is_some_and(|n| n.starts_with(&self.labelled))
            && (self.started_from_unix_s..=self.started_to_unix_s).contains(&row.started())
    }
}

impl CodeCommitCorrection {
    pub fn covers(&self, row: &Row) -> bool {
        !self.labelled.is_empty()
            && build_commit(row).is_some_and(|b| b.starts_with(&self.labelled))
            && row.started() >= self.started_from_unix_s
    }
}

impl Corrections {
    /// `dir`'s corrections; none when the file is absent, an error naming the file when it
    /// cannot be read or parsed.
    pub fn load(dir: &std::path::Path) -> Result<Corrections, String> {
        let path = dir.join(CORRECTIONS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Corrections::default()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let corrections: Corrections =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        // The rows ran their binary's code or their checkout's; a third commit is what they
        // record nowhere, a `[[code_commit]]` correction.
        let stray = corrections
            .checkout_moved
            .iter()
            .find(|c| !same_commit(&c.ran, &c.built) && !same_commit(&c.ran, &c.labelled));
        if let Some(c) = stray {
            return Err(format!(
                "{}: checkout_moved with built = \"{}\": `ran` (\"{}\") must be its `built` or its \
                 `labelled` commit",
                path.display(),
                c.built,
                c.ran
            ));
        }
        Ok(corrections)
    }

    /// The commit whose code `row` ran, where a correction gives it: the `ran` of the first
    /// `[[code_commit]]`, else `[[checkout_moved]]`, correction that covers the row.
    pub fn ran(&self, row: &Row) -> Option<&str> {
        let code = self.code_commit.iter().find(|c| c.covers(row)).map(|c| c.ran.as_str());
        code.or_else(|| self.checkout_moved.iter().find(|c| c.covers(row)).map(|c| c.ran.as_str()))
    }

    /// Whether a correction says this row, refused by [`commit_mismatch`], ran its binary's code.
    pub fn vouches_for(&self, row: &Row) -> bool {
        self.checkout_moved.iter().any(|c| c.covers(row))
    }

    /// One note per correction that covers some of `rows`.
    pub fn notes(&self, rows: &[&Row]) -> Vec<String> {
        let moved = self.checkout_moved.iter().filter_map(|c| {
            let n = rows.iter().filter(|r| c.covers(r)).count();
            (n > 0).then(|| {
                format!(
                    "provenance correction ({CORRECTIONS_FILE}): {n} row(s) name code_commit {} \
                     and binary {}; they ran commit {}'s code, so they are judged: {}",
                    short_commit(&c.labelled),
                    short_commit(&c.built),
                    short_commit(&c.ran),
                    c.reason
                )
            })
        });
        self.code_commit
            .iter()
            .filter_map(|c| {
                let n = rows.iter().filter(|r| c.covers(r)).count();
                (n > 0).then(|| {
                    format!(
                        "provenance correction ({CORRECTIONS_FILE}): {n} row(s) labelled commit \
                         {} ran commit {}'s code: {}",
                        short_commit(&c.labelled),
                        short_commit(&c.ran),
                        c.reason
                    )
                })
            })
            .chain(moved)
            .collect()
    }
}

/// Rows that carry no `code_commit`: whether their binary was built from the code they name
/// cannot be checked ([`commit_mismatch`] says nothing about them).
pub fn unverifiable(rows: &[&Row]) -> usize {
    rows.iter().filter(|r| r.str(crate::results::keys::CODE_COMMIT).is_none()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(v: serde_json::Value) -> Row {
        match v {
            serde_json::Value::Object(m) => Row(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_dirty_build_keeps_its_mark_in_the_short_commit() {
        assert_eq!(short_commit("829029a3c36b7b961f48cdfa50a8a71020d2110b"), "829029a3c36b");
        assert_eq!(
            short_commit("829029a3c36b7b961f48cdfa50a8a71020d2110b-dirty"),
            "829029a3c36b-dirty"
        );
        assert_eq!(short_commit("unknown"), "unknown");
    }

    /// Guards the provenance rule: a binary is attributed its own commit only when the code is
    /// the checkout's; an unknown or other build gets the checkout's commit, so the report sees
    /// the mismatch.
    #[test]
    fn a_binary_is_credited_only_with_the_code_of_its_checkout() {
        let Some(head) = git(&["rev-parse", "HEAD"]) else { return };
        let named = code_commit(Some("not-a-commit")).unwrap();
        assert!(named.starts_with(&head), "{named}");
        let same = code_commit(Some(&head)).unwrap();
        assert!(same == head || same == format!("{head}-dirty"), "{same}");
    }

    #[test]
    fn commits_are_the_same_when_one_abbreviates_the_other_and_both_are_clean_or_dirty() {
        assert!(same_commit("d7b15ab", "d7b15ab549649a9ecd3ec65f748b3dd9812eeee7"));
        assert!(same_commit("2d8bf738fea4a18-dirty", "2d8bf73-dirty"));
        assert!(!same_commit("2d8bf73", "2d8bf738fea4a18-dirty"));
        assert!(!same_commit("d7b15ab", "77fa322") && !same_commit("", "77fa322"));
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(utc_minute(0.0), "1970-01-01 00:00");
        assert_eq!(utc_minute(1_795_620_488.0), "2026-11-25 15:28");
        assert_eq!(utc_minute(951_782_400.0), "2000-02-29 00:00");
    }

    #[test]
    fn the_line_names_host_version_commit_and_dates() {
        let r = |t: f64| {
            row(json!({"host": "vm", "started_unix_s": t, "quick": true, "config": {
                "host_cpu": "AMD EPYC", "host_cores": 2, "host_flush": "clwb",
                "nvmdb_version": "0.1.0",
                "git_commit": "829029a3c36b7b961f48cdfa50a8a71020d2110b"}}))
        };
        let rows = [r(1_795_620_488.0), r(1_795_620_680.0)];
        let p = Provenance::of(&rows);
        assert!(p.quick);
        assert_eq!(
            p.line(),
            "host vm: AMD EPYC, 2 cores, flush clwb · runs 2026-11-25 15:28–15:31 UTC · \
             nvmdb 0.1.0 (commit 829029a3c36b)"
        );
        assert_eq!(Provenance::of(&[]).line(), "no runs");
    }

    #[test]
    fn the_line_says_the_highest_load_a_run_started_at() {
        let r = |load: f64| {
            row(json!({"host": "vm", "started_unix_s": 1_795_620_488.0,
                "config": {"host_load_before": load}}))
        };
        let p = Provenance::of(&[r(0.4), r(2.26), r(1.0)]);
        assert_eq!(p.max_load_before, Some(2.26));
        assert!(p.line().ends_with("load average ≤ 2.3 before each run"), "{}", p.line());
    }
}

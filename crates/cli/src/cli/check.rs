//! `nvmdb check --path R`: what a region holds and what opening it would do, without changing
//! it. The file is mapped privately (copy-on-write), so recovery runs on a copy; `--repair`
//! maps it shared, so recovery's writes (and superblock repairs) reach the file. Reports the
//! superblock's state, the in-flight work recovery would undo or finish, integrity, tables and
//! row counts, and used/free pages. Exit 0: consistent; 1: damaged or inconsistent; 2: bad
//! arguments or not an nvmdb region.

use anyhow::Context;
use pmem::{Medium, RegionOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The region file.
    #[arg(long)]
    pub path: PathBuf,
    /// Expected engine (default: whatever formatted the region).
    #[arg(long)]
    pub engine: Option<String>,
    /// Let recovery write to the file (roll back in-flight work, repair the superblock).
    #[arg(long)]
    pub repair: bool,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Output {
    path: PathBuf,
    size_bytes: u64,
    repair: bool,
    inspection: Option<engines::Inspection>,
    /// Why the region cannot be opened, if it cannot.
    error: Option<String>,
    recovery: Option<storage::RecoveryReport>,
    /// `complete` (with the workload), `incomplete` (a load was interrupted) or `empty`; absent
    /// for a library database (named tables).
    load: Option<String>,
    check: Option<nvmdb::CheckReport>,
    ok: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = RegionOptions {
        medium: Medium::File,
        path: Some(args.path.clone()),
        size_bytes: 0,
        create: false,
        private: !args.repair,
        ..RegionOptions::default()
    };
    let region = storage::format::open_region(&options)
        .with_context(|| format!("opening {}", args.path.display()))?;
    let mut out = Output {
        path: args.path.clone(),
        size_bytes: region.len(),
        repair: args.repair,
        inspection: None,
        error: None,
        recovery: None,
        load: None,
        check: None,
        ok: false,
    };
    if is_nvwal(&region) {
        check_nvwal(region, &args, &mut out)?;
        return finish(&args, &out);
    }
    match engines::inspect(&region) {
        Ok(i) => out.inspection = Some(i),
        Err(e @ storage::DbError::Format(_)) => return Err(e.into()),
        Err(e) => out.error = Some(e.to_string()),
    }
    let formatted_by = out.inspection.as_ref().and_then(|i| i.engine.clone());
    if let (Some(expected), Some(found)) = (&args.engine, &formatted_by) {
        anyhow::ensure!(
            expected == found,
            "{} was formatted by engine `{found}`, not `{expected}`",
            args.path.display()
        );
    }
    let blank = out.inspection.as_ref().is_some_and(|i| i.engine.is_none());
    if let (Some(engine), None) = (formatted_by, &out.error) {
        // A region fixes some options at format time (a `wal` log's layout, cache mode and
        // size): open it with those, or opening refuses it.
        let mut options = engines::EngineOptions::default();
        if let Some(i) = &out.inspection {
            if let Some(log) = &i.log {
                // `wal` sizes its log margin by the workers: the region's, not the default 16.
                options.workers = i.workers.max(1);
                log.apply_to(&mut options);
            }
        }
        match engines::open(&engine, region, &options) {
            Ok(db) => {
                out.recovery = Some(db.recovery_report());
                match nvmdb::check_engine(&*db) {
                    Ok(report) => {
                        out.ok = report.ok();
                        out.check = Some(report);
                    }
                    Err(e) => {
                        // Reading stops at the first damaged row; the integrity walk goes on
                        // and names every one (row checksums, issue 37).
                        let walk = db.check_integrity().err().map(|w| format!("; integrity: {w}"));
                        out.error =
                            Some(format!("reading the tables: {e}{}", walk.unwrap_or_default()))
                    }
                }
                // A library database (named tables) was never loaded by a workload.
                let library = out.check.as_ref().is_some_and(|c| c.named_tables.is_some());
                out.load = (!library).then(|| match bench::loaded::load_state(&*db) {
                    bench::loaded::LoadState::Empty => "empty".into(),
                    bench::loaded::LoadState::Complete(w) => format!("complete ({w})"),
                    bench::loaded::LoadState::Incomplete => {
                        "incomplete: a load was interrupted; its data is not a whole workload"
                            .into()
                    }
                });
            }
            Err(e) => out.error = Some(format!("recovery: {e}")),
        }
    } else if blank {
        out.ok = true;
    }
    finish(&args, &out)
}

fn finish(args: &Args, out: &Output) -> anyhow::Result<ExitCode> {
    if args.json {
        println!("{}", serde_json::to_string(out)?);
    } else {
        print!("{}", human(out));
    }
    Ok(if out.ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Whether the region is (or was being formatted as) a `sqlite-nvwal` region: it has no nvmdb
/// superblock, its own header (docs/nvwal.md).
fn is_nvwal(region: &pmem::Region) -> bool {
    if region.backed_len() < 8 {
        return false;
    }
    let magic = region.read_u64(0);
    magic == sqlite_nvwal::layout::MAGIC || magic == sqlite_nvwal::layout::FORMATTING_MAGIC
}

/// `check` of a `sqlite-nvwal` region: its own open validates the header against the file and
/// recovers the log (on the private copy unless `--repair`), then the tables are read.
fn check_nvwal(region: pmem::Region, args: &Args, out: &mut Output) -> anyhow::Result<()> {
    let name = sqlite_nvwal::ENGINE_NAME;
    if let Some(expected) = args.engine.as_deref().filter(|e| *e != name) {
        anyhow::bail!("{} was formatted by engine `{name}`, not `{expected}`", args.path.display());
    }
    let config = crate::registry::EngineConfig { workers: 1, ..Default::default() };
    out.inspection = Some(engines::Inspection {
        verdict: "valid sqlite-nvwal header magic".into(),
        engine: Some(name.into()),
        ..Default::default()
    });
    let db = match crate::registry::open_on_region(name, region, &config) {
        Ok(db) => db,
        Err(e) => {
            out.error = Some(format!("recovery: {e}"));
            return Ok(());
        }
    };
    out.recovery = Some(db.recovery_report());
    match nvmdb::check_engine(&*db) {
        Ok(report) => {
            out.ok = report.ok();
            out.check = Some(report);
        }
        Err(e) => out.error = Some(format!("reading the tables: {e}")),
    }
    Ok(())
}

fn human(o: &Output) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("  {k:<14}{v}\n"));
    line("region", format!("{} ({} bytes)", o.path.display(), o.size_bytes));
    if let Some(i) = &o.inspection {
        line("superblock", i.verdict.clone());
        if let Some(e) = i.engine.as_deref().filter(|e| *e == sqlite_nvwal::ENGINE_NAME) {
            line("engine", format!("{e} (its recovery runs on open, below)"));
        } else if let Some(e) = &i.engine {
            line("engine", format!("{e}, {} pages, {} workers", i.page_count, i.workers));
            line(
                "recovery",
                format!(
                    "would roll back {} transaction(s) and {} structure change(s), finish {} \
                     commit(s) ({} undo records){}",
                    i.txns_to_roll_back,
                    i.system_txns_to_roll_back,
                    i.txns_to_complete,
                    i.undo_records,
                    if o.repair { "; done (--repair)" } else { "; run on a private copy" }
                ),
            );
        }
        if let Some(l) = &i.log {
            line("log", log_line(l));
        }
    }
    if let Some(r) = &o.recovery {
        line("recovered in", format!("{:.3} ms", r.duration.as_secs_f64() * 1e3));
    }
    if let Some(l) = &o.load {
        line("load", l.clone());
    }
    if let Some(c) = &o.check {
        match &c.integrity {
            Ok(r) => {
                line("integrity", "ok".into());
                line("pages", format!("{} in use, {} free", r.pages_in_use, r.pages_free));
            }
            Err(e) => line("integrity", format!("FAILED: {e}")),
        }
        for t in &c.tables {
            line("table", format!("{} ({}-byte rows): {} rows", t.name, t.row_bytes, t.rows));
        }
        for t in c.named_tables.iter().flatten() {
            line("table", format!("{} ({} keys): {} entries", t.name, t.key, t.entries));
        }
    }
    if let Some(e) = &o.error {
        line("error", e.clone());
    }
    line("verdict", if o.ok { "ok".into() } else { "DAMAGED".into() });
    s
}

/// `txn:2 (2 logs of 32.0 MiB, cache volatile); GSN horizon 812; redo points [..], ends [..];
/// 40 records to redo, 3 above the horizon`.
fn log_line(l: &engines::LogInspection) -> String {
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let mut s = format!(
        "{} ({} log{} of {:.1} MiB, cache {})",
        l.layout,
        l.logs,
        if l.logs == 1 { "" } else { "s" },
        mib(l.per_log_bytes),
        l.cache
    );
    if let Some(h) = l.horizon {
        s += &format!("; GSN horizon {h}");
    }
    s += &format!(
        "; redo points {:?}, ends {:?}; {} records to redo",
        l.redo_points, l.ends, l.records_to_redo
    );
    if l.horizon.is_some() {
        s += &format!(", {} above the horizon", l.records_above_horizon);
    }
    s
}

//! Beyond the thesis: the analyser on traces of nvmdb's own engines (`inplace`, `wal`, `group`,
//! docs/design.md §4) running one transaction type, to ask what epoch or strand persistency would
//! allow each. The engines run on a traced `dram` region; their fences are the persist
//! barriers, their stores the persists.
//!
//! Limits, stated where they bite: the engines carry no NewStrand annotations (strand equals
//! epoch here), and their volatile synchronisation (latches, the lock manager, the batch and
//! flusher hand-offs) is not traced, so dependences that flow only through volatile memory
//! between threads are missing; with one worker thread that leaves the hand-offs to the
//! engines' background threads (group's batch persist, wal's flusher) unordered, which can
//! only make the relaxed models look better than they would be.

use crate::analyse::{analyse, Config, Model};
use crate::error::invalid;
use crate::report::{human_ns, human_rate, model_result, two_digits, ModelResult};
use crate::spec::parse_latency_ns;
use crate::Error;
use pmem::{Medium, Region, RegionOptions, TraceKind};
use serde::Serialize;
use std::process::ExitCode;
use std::time::Instant;
use storage::Engine;
use workloads::WorkloadOptions;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// inplace, wal, group, or all; comma-separated.
    #[arg(long, default_value = "all")]
    pub engine: String,
    /// Workload (tpcb, tatp, tpcc, ycsb-a …).
    #[arg(long, default_value = "tpcb")]
    pub workload: String,
    /// Transaction type, for workloads with several (tatp: update-location; tpcc: new-order).
    #[arg(long)]
    pub txn: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub scale: u64,
    /// Transactions in the traced run (and in the native-rate run).
    #[arg(long, default_value_t = 2000)]
    pub txns: u64,
    #[arg(long, default_value = "500ns")]
    pub persist_latency: String,
    #[arg(long, default_value_t = 8)]
    pub atomic_persist: u64,
    #[arg(long, default_value_t = 8)]
    pub tracking: u64,
    #[arg(long)]
    pub json: bool,
}

/// The analyser's view of one engine.
#[derive(Clone, Debug, Serialize)]
pub struct EngineRow {
    pub engine: String,
    pub workload: String,
    pub txns: u64,
    pub native_txn_per_s: f64,
    pub trace_events: u64,
    pub fences_per_txn: f64,
    pub models: Vec<ModelResult>,
}

/// Engine regions: room for the workload, the undo logs, wal's log and group's staging.
const REGION_BYTES: u64 = 512 << 20;
const MAX_TXNS: u64 = 1_000_000;

fn engine_error(e: impl std::fmt::Display) -> Error {
    Error::Engine(e.to_string())
}

/// Runs `txns` transactions of `workload` on a fresh `engine` region; returns the time they
/// took (until the last is durable) and, if `trace`, the trace of just those transactions.
fn run(
    engine: &str,
    workload: &dyn workloads::Workload,
    txns: u64,
    trace: bool,
) -> crate::Result<(f64, Option<Vec<pmem::TraceEvent>>)> {
    let region =
        Region::open(&RegionOptions { trace, ..RegionOptions::new(Medium::Dram, REGION_BYTES) })?;
    let options = engines::EngineOptions::default();
    let db: Box<dyn Engine> =
        engines::open(engine, region.clone(), &options).map_err(engine_error)?;
    workload.load(db.as_ref(), &|_, _| {}).map_err(engine_error)?;
    let mut worker = workload.worker(0, 1);
    region.take_trace();
    let began = Instant::now();
    let mut last = None;
    for _ in 0..txns {
        let done = worker.run_one(db.as_ref()).map_err(engine_error)?;
        last = done.token.or(last);
    }
    if let Some(token) = last {
        db.wait_durable(token).map_err(engine_error)?;
    }
    let seconds = began.elapsed().as_secs_f64();
    let events = region.take_trace().map(|(events, _)| events);
    db.shutdown().map_err(engine_error)?;
    Ok((seconds, events))
}

/// Measures one engine: native rate, one traced run, the three models.
pub fn engine_row(engine: &str, a: &Args) -> crate::Result<EngineRow> {
    if a.txns == 0 || a.txns > MAX_TXNS {
        return Err(invalid("txns", format!("{} (expected 1 to {MAX_TXNS})", a.txns)));
    }
    let latency = parse_latency_ns(&a.persist_latency)?;
    let wo = WorkloadOptions { scale: Some(a.scale), txn: a.txn.clone(), ..Default::default() };
    let workload = workloads::by_name(&a.workload, &wo).map_err(|e| invalid("workload", e))?;
    let (seconds, _) = run(engine, workload.as_ref(), a.txns, false)?;
    let native = a.txns as f64 / seconds.max(1e-9);
    let (_, events) = run(engine, workload.as_ref(), a.txns, true)?;
    let events = events.expect("a traced region");
    let fences = events.iter().filter(|e| e.kind == TraceKind::Fence).count();
    let mut models = Vec::new();
    for model in Model::ALL {
        let config = Config {
            atomic_persist_bytes: a.atomic_persist,
            tracking_bytes: a.tracking,
            ..Config::new(model)
        };
        let r = analyse(&events, config)?;
        // Whole-run path per transaction: the engines' paths grow with every barrier.
        let path = r.path_per_unit(a.txns, 0);
        models.push(model_result(model, &r, path, native, latency));
    }
    Ok(EngineRow {
        engine: engine.to_string(),
        workload: a.workload.clone(),
        txns: a.txns,
        native_txn_per_s: native,
        trace_events: events.len() as u64,
        fences_per_txn: fences as f64 / a.txns as f64,
        models,
    })
}

pub fn run_cli(a: Args) -> anyhow::Result<ExitCode> {
    let names: Vec<&str> = if a.engine.eq_ignore_ascii_case("all") {
        engines::ENGINES.to_vec()
    } else {
        a.engine.split(',').map(str::trim).collect()
    };
    for n in &names {
        if !engines::ENGINES.contains(n) {
            return Err(invalid("engine", format!("`{n}` (inplace, wal, group, all)")).into());
        }
    }
    parse_latency_ns(&a.persist_latency)?;
    Config {
        atomic_persist_bytes: a.atomic_persist,
        tracking_bytes: a.tracking,
        ..Config::new(Model::Strict)
    }
    .validate()?;
    let mut rows = Vec::new();
    for n in names {
        let row = engine_row(n, &a)?;
        if a.json {
            println!("{}", serde_json::to_string(&row)?);
        }
        rows.push(row);
    }
    if !a.json {
        println!(
            "{} on {}: persist critical path per transaction and persist-bound rate ÷ native rate \
             at {} persists (no strand annotations in the engines: strand = epoch)",
            a.workload,
            rows.iter().map(|r| r.engine.as_str()).collect::<Vec<_>>().join(", "),
            human_ns(parse_latency_ns(&a.persist_latency)?)
        );
        println!(
            "{:<8} {:>12} {:>10} {:>24} {:>24} {:>24}",
            "engine",
            "native",
            "fences/txn",
            "strict path, norm",
            "epoch path, norm",
            "strand path, norm"
        );
        for r in &rows {
            let cell =
                |m: &ModelResult| format!("{:.1}, {}", m.path_per_insert, two_digits(m.normalized));
            println!(
                "{:<8} {:>12} {:>10.1} {:>24} {:>24} {:>24}",
                r.engine,
                human_rate(r.native_txn_per_s),
                r.fences_per_txn,
                cell(&r.models[0]),
                cell(&r.models[1]),
                cell(&r.models[2])
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

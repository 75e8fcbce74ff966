//! `nvmdb bench`'s output (docs/design.md §6): the run's configuration as JSON, the report as a
//! table, JSON or CSV row, and the ack log file.

use super::*;

/// What the run had that the flags alone do not say.
#[derive(Default)]
pub(super) struct Ran<'a> {
    /// The engine's live region (its flush instruction is the one that ran).
    pub(super) region: Option<&'a pmem::Region>,
    /// Most commits the run held waiting for durability (`None`: not run yet).
    pub(super) pending_high_water: Option<usize>,
}

/// The flush that runs: `none` on `dram` without `--flush` (the region flushes nothing there)
/// and under eADR (caches are persistent: `Region::flush` issues no instruction), `msync` with
/// `--sync msync`, else the instruction the region chose (issue 39: dram rows said `clwb`).
fn flush_in_effect(r: &RegionOptions, live: Option<&pmem::Region>) -> &'static str {
    if r.eadr {
        return FlushKind::None.name();
    }
    if r.sync == SyncMode::Msync && matches!(r.medium, Medium::Shm | Medium::File | Medium::Dax) {
        return "msync";
    }
    match (live, r.medium, r.flush) {
        (Some(region), _, _) => region.flush_kind().name(),
        (None, Medium::Dram, None) => FlushKind::None.name(),
        (None, _, requested) => requested.unwrap_or(pmem::CpuFlushSupport::detect().best()).name(),
    }
}

/// The options the engine ran with, defaults included, keyed as `--engine-opt` takes them
/// (issue 39: rows recorded only the options given). Peers report what was given.
fn engine_opts_in_effect(plan: &Plan) -> BTreeMap<String, String> {
    let mut opts = plan.engine_config.extra.clone();
    let Some(engine) = registry::RegionEngine::lookup(&plan.engine) else {
        return opts;
    };
    if let Ok(resolved) = engine.resolved(&plan.engine_config) {
        for (key, value) in resolved {
            opts.entry(key).or_insert(value);
        }
    }
    opts
}

/// Every option of the run, for the `config` object of the JSON and the CSV's config columns.
pub(super) fn config_json(
    plan: &Plan,
    workload: &dyn Workload,
    ran: &Ran<'_>,
) -> serde_json::Value {
    let (warmup_s, duration_s, txns) = match plan.run.length {
        RunLength::Timed { warmup, duration } => {
            (Some(warmup.as_secs_f64()), Some(duration.as_secs_f64()), None)
        }
        RunLength::Transactions { per_thread } => (None, None, Some(per_thread)),
    };
    let r = &plan.region;
    let w = &plan.workload;
    let on_region =
        registry::lookup(&plan.engine).is_some_and(|e| e.kind == registry::EngineKind::Region);
    // The workload's parameters as it runs (defaults filled in); the flags' values where the
    // workload reports none.
    let resolved = workload.resolved_config();
    let pick = |keys: &[&str], given: serde_json::Value| -> serde_json::Value {
        keys.iter().find_map(|k| resolved.get(k).cloned().filter(|v| !v.is_null())).unwrap_or(given)
    };
    let cpu = pmem::CpuFlushSupport::detect();
    let engine_opts = engine_opts_in_effect(plan);
    // Whether this run's fdatasyncs were charged by the file-system sync model (issue 36): an
    // io=fs engine on a file whose sync is free (tmpfs); `null` for an io=nvm engine.
    let io_fs = engine_opts.get("io").is_some_and(|io| io == "fs");
    let fs_sync_charged =
        (on_region && io_fs).then(|| ran.region.is_some_and(|r| r.fs_sync_modelled()));
    let mut config = serde_json::json!({
        "nvmdb_version": env!("CARGO_PKG_VERSION"),
        "git_commit": env!("NVMDB_GIT_COMMIT"),
        "host_cpu": host_cpu_model(),
        "host_cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        // A busy machine slows a run: its load before the run and after it (1-minute averages,
        // this run's own threads included in the second).
        "host_load_before": plan.load_before,
        "host_load_after": load_average(),
        "host_flush": r.flush.unwrap_or(cpu.best()).name(),
        "engine": plan.engine,
        "workload": w.name,
        "mix": pick(&["mix"], serde_json::json!(w.options.mix)),
        "txn": pick(&["txn"], serde_json::json!(w.options.txn)),
        // TPC-B scales by branches, TPC-C by warehouses; YCSB and TATP size by rows.
        "scale": pick(&["branches", "warehouses"], serde_json::json!(w.options.scale)),
        "records": pick(&["record_count", "subscribers"], serde_json::json!(w.options.records)),
        "workload_opts": if resolved.is_null() { serde_json::json!(w.options) } else { resolved.clone() },
        "threads": plan.run.threads,
        "warmup_s": warmup_s,
        "duration_s": duration_s,
        "txns": txns,
        "seed": plan.run.seed,
        // A peer or testing engine runs on no region: no medium, size or device model.
        "medium": on_region.then(|| r.medium.name()),
        "path": r.path.as_ref().map(|p| p.display().to_string()),
        "size_bytes": on_region.then_some(r.size_bytes),
        "max_size_bytes": on_region.then_some(r.max_size_bytes),
        "keep": plan.keep,
        "image": plan.image.as_ref().map(|p| p.display().to_string()),
        "image_built": plan.image.as_ref().map(|_| plan.image_built),
        "sync": on_region.then_some(r.sync),
        "persist_latency_ns": on_region.then_some(r.timing.persist_barrier_ns),
        "write_latency_ns": on_region.then_some(r.timing.write_line_ns),
        "write_bandwidth_bytes_per_s": on_region.then_some(r.timing.write_bandwidth_bytes_per_s),
        "read_latency_ns": on_region.then_some(r.timing.read_ns),
        "reservation": on_region.then(|| r.timing.reservation.name()),
        "cache_pages": plan.engine_config.cache_pages,
        "cpu_cache_bytes": on_region.then_some(r.timing.cpu_cache_bytes),
        "cache_policy": on_region.then(|| plan.engine_config.cache_policy.name()),
        "flush": on_region.then(|| flush_in_effect(r, ran.region)),
        "eadr": on_region.then_some(r.eadr),
        "engine_opts": engine_opts,
        // Only where a commit ever waited for durability: an engine whose commits are durable
        // on return (the peers, `inplace`) never consults it.
        "max_pending": (ran.pending_high_water != Some(0)).then_some(plan.run.max_pending),
        "target_tps": plan.run.target_tps,
        "check": plan.run.check,
    });
    // Apart from the object above: one `json!` of every key exceeds the macro's recursion limit.
    config["fs_sync_ns"] = serde_json::json!(on_region.then_some(r.timing.fs_sync_ns));
    config["fs_write_bandwidth_bytes_per_s"] =
        serde_json::json!(on_region.then_some(r.timing.fs_write_bytes_per_s));
    config["fs_sync_charged"] = serde_json::json!(fs_sync_charged);
    config
}

/// The 1-minute load average from /proc/loadavg (`None` where there is none).
pub(super) fn load_average() -> Option<f64> {
    crate::cli::load_averages().map(|[one, _, _]| one)
}

/// The CPU's model name from /proc/cpuinfo ("unknown" where there is none).
fn host_cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

pub(super) fn print_report(report: &Report, output: Output) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match output {
        Output::Json => writeln!(out, "{}", report.to_json())?,
        Output::Csv { header } => {
            if header {
                writeln!(out, "{}", report.csv_header())?;
            }
            writeln!(out, "{}", report.csv_row())?;
        }
        Output::Human => {
            writeln!(out, "nvmdb bench")?;
            write!(out, "{}", report.human())?;
        }
    }
    out.flush()?;
    Ok(())
}

pub(super) fn write_acks(path: &std::path::Path, log: &AckLog) -> anyhow::Result<()> {
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating the acks file {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for txn in log.take() {
        serde_json::to_writer(&mut out, &txn)?;
        out.write_all(b"\n")?;
    }
    out.flush().with_context(|| format!("writing {}", path.display()))?;
    if log.dropped() > 0 {
        eprintln!(
            "warning: {} durable transactions beyond the first {ACK_LOG_LIMIT} were not written \
             to {}",
            log.dropped(),
            path.display()
        );
    }
    Ok(())
}

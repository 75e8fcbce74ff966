//! `nvmdb bench`'s flags turned into region, timing and run options, each validated before
//! anything is created (docs/design.md §6).

use super::*;

/// Flags only a region engine can honour are errors on the others (a peer keeps its files in
/// `--path`; a testing engine keeps nothing), so a row never claims a medium or a device model
/// the run did not have.
pub(super) fn reject_unhonoured(
    args: &Args,
    engine: &str,
    region: &RegionOptions,
) -> Result<(), OptionError> {
    let Some(info) = registry::lookup(engine) else { return Ok(()) };
    if info.kind == registry::EngineKind::Region {
        return Ok(());
    }
    let t = &region.timing;
    let given: [(&'static str, bool); 16] = [
        ("medium", args.medium.is_some()),
        // An engine sized by its region (`pmemobj`'s pool) takes `--size`, never `--max-size`.
        ("size", args.size.is_some() && info.room_factor.is_none()),
        ("max-size", args.max_size.is_some()),
        ("sync", args.sync != "cache"),
        ("persist-latency", t.persist_barrier_ns != 0),
        ("write-latency", t.write_line_ns != 0),
        ("write-bandwidth", t.write_bandwidth_bytes_per_s != 0),
        ("read-latency", t.read_ns != 0),
        ("fs-sync-latency", args.fs_sync_latency != DEFAULT_FS_SYNC_LATENCY),
        ("fs-write-bandwidth", args.fs_write_bandwidth != DEFAULT_FS_WRITE_BANDWIDTH),
        ("cache-pages", args.cache_pages.is_some()),
        ("cpu-cache", t.cpu_cache_bytes != 0),
        ("flush", args.flush.is_some()),
        ("eadr", args.eadr),
        ("wear", args.wear),
        ("path", args.path.is_some() && info.kind == registry::EngineKind::Testing),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => {
            let why = if *flag == "size" {
                let sized: Vec<&str> = registry::engines()
                    .iter()
                    .filter(|e| e.room_factor.is_some())
                    .map(|e| e.name)
                    .collect();
                format!("it sizes itself (only {} take a size)", sized.join(", "))
            } else {
                format!(
                    "it does not run on an nvmdb region (only {} do)",
                    region_engines().join(", ")
                )
            };
            Err(invalid(flag, format!("engine {engine} cannot honour it: {why}")))
        }
        None => Ok(()),
    }
}

fn region_engines() -> Vec<&'static str> {
    registry::engines()
        .iter()
        .filter(|e| e.kind == registry::EngineKind::Region)
        .map(|e| e.name)
        .collect()
}

pub(super) fn run_options(args: &Args) -> Result<RunOptions, OptionError> {
    if args.threads == 0 || args.threads > bench::driver::MAX_THREADS {
        return Err(invalid(
            "threads",
            format!("must be 1..={}, got {}", bench::driver::MAX_THREADS, args.threads),
        ));
    }
    if args.max_pending == 0 || args.max_pending > bench::driver::MAX_PENDING_LIMIT {
        return Err(invalid(
            "max-pending",
            format!("must be 1..={}", bench::driver::MAX_PENDING_LIMIT),
        ));
    }
    let length = match args.txns {
        Some(0) => return Err(invalid("txns", "must be at least 1")),
        Some(per_thread) => RunLength::Transactions { per_thread },
        None => {
            let time = |flag, s: &str| {
                units::parse_duration(s, TimeUnit::Seconds)
                    .map_err(|e| invalid(flag, e.to_string()))
            };
            let warmup = time("warmup", &args.warmup)?;
            let duration = time("duration", &args.duration)?;
            if duration < MIN_DURATION {
                return Err(invalid(
                    "duration",
                    format!(
                        "`{}` is shorter than {} ms, too short to measure a throughput",
                        args.duration,
                        MIN_DURATION.as_millis()
                    ),
                ));
            }
            RunLength::Timed { warmup, duration }
        }
    };
    Ok(RunOptions {
        threads: args.threads,
        length,
        seed: args.seed,
        setup: Setup::Load,
        max_pending: args.max_pending,
        check: !args.no_check,
        target_tps: match args.target_tps {
            Some(tps) if !(tps.is_finite() && tps >= 1.0) => {
                return Err(invalid("target-tps", format!("must be at least 1, got {tps}")))
            }
            t => t,
        },
    })
}

/// How far the region may grow: `--max-size`, else half the free space of the medium (so a long
/// run keeps going as its history grows, as LMDB's map size or redb's file do), never less than
/// what the existing file's superblock says it spans. Fixed-size for dram and sim, and with
/// `--wear` (the wear map has an entry per line of the whole mapping).
fn max_size_bytes(args: &Args, medium: Medium, size_bytes: u64) -> Result<u64, OptionError> {
    if !matches!(medium, Medium::Shm | Medium::File | Medium::Dax) {
        if args.max_size.is_some() {
            return Err(invalid("max-size", "only a file medium (shm, file, dax) can grow"));
        }
        return Ok(0);
    }
    let existing = args.path.as_ref().and_then(|p| {
        let mut first = vec![0u8; 2 * storage::format::PAGE_SIZE];
        let mut f = std::fs::File::open(p).ok()?;
        std::io::Read::read_exact(&mut f, &mut first).ok()?;
        storage::format::region_bytes_in(&first)
    });
    let wanted = match &args.max_size {
        Some(s) => units::parse_bytes(s).map_err(|e| invalid("max-size", e.to_string()))?,
        None if args.wear => 0,
        None => {
            let dir = match &args.path {
                Some(p) => {
                    p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
                }
                None => Path::new("/dev/shm"),
            };
            pmem::free_bytes(dir).map_or(0, |free| free / 2 / (1 << 20) * (1 << 20))
        }
    };
    if args.max_size.is_some() && wanted < size_bytes {
        return Err(invalid("max-size", "must be at least --size"));
    }
    let max = wanted.max(existing.unwrap_or(0));
    Ok(if max > size_bytes { max } else { 0 })
}

/// The region options, and whether the region file exists already. Without `--size` a new
/// region is [`DEFAULT_SIZE`], or larger when the engine's own areas or the workload
/// (`workload_bytes`, its estimate; 0 for none) need it; a given size too small for a new region
/// of the engine is refused in one line.
pub(super) fn region_options(
    args: &Args,
    engine: &str,
    config: &EngineConfig,
    workload_bytes: u64,
) -> Result<(RegionOptions, bool), OptionError> {
    let name = args.medium.as_deref().unwrap_or(DEFAULT_MEDIUM);
    let medium = Medium::parse(name).ok_or_else(|| {
        let known: Vec<&str> = Medium::ALL.iter().map(|m| m.name()).collect();
        invalid("medium", format!("unknown medium `{name}` (known: {})", known.join(", ")))
    })?;
    let path_existed = args.path.as_ref().is_some_and(|p| p.exists());
    let size_bytes = match (&args.size, path_existed) {
        (Some(s), _) => units::parse_bytes(s).map_err(|e| invalid("size", e.to_string()))?,
        // Open the existing file at its own size.
        (None, true) => 0,
        (None, false) => {
            let base = units::parse_bytes(DEFAULT_SIZE).map_err(|e| invalid("size", e.reason))?;
            // The default leaves the workload at least 64 MiB (or its estimate) next to the
            // engine's own areas.
            let room = registry::workload_room(engine, workload_bytes).max(64 << 20);
            match registry::min_region_bytes(engine, config) {
                Ok(Some(min)) => base.max(min.saturating_add(room)),
                _ => base.max(room),
            }
        }
    };
    if size_bytes == 0 && !path_existed {
        return Err(invalid("size", "must be larger than zero"));
    }
    if args.size.is_some() && !path_existed {
        registry::check_region_bytes(engine, config, size_bytes).map_err(|e| invalid("size", e))?;
    }
    let sync = match args.sync.as_str() {
        "cache" => SyncMode::Cache,
        "msync" => SyncMode::Msync,
        other => return Err(invalid("sync", format!("`{other}` is not cache or msync"))),
    };
    let flush = match &args.flush {
        None => None,
        Some(f) => Some(FlushKind::parse(f).ok_or_else(|| {
            invalid("flush", format!("`{f}` is not clwb, clflushopt, clflush or none"))
        })?),
    };
    let region = RegionOptions {
        medium,
        path: args.path.clone(),
        size_bytes,
        create: true,
        sync,
        flush,
        eadr: args.eadr,
        wear: args.wear,
        wear_granularity: pmem::WearGranularity::parse(&args.wear_granularity).ok_or_else(
            || {
                invalid(
                    "wear-granularity",
                    format!("`{}` is not line or byte", args.wear_granularity),
                )
            },
        )?,
        max_size_bytes: max_size_bytes(args, medium, size_bytes)?,
        timing: timing_options(args)?,
        ..RegionOptions::default()
    };
    Ok((region, path_existed))
}

fn timing_options(args: &Args) -> Result<TimingOptions, OptionError> {
    let latency = |flag: &'static str, s: &str| -> Result<u64, OptionError> {
        let ns =
            units::parse_time_ns(s, TimeUnit::Nanos).map_err(|e| invalid(flag, e.to_string()))?;
        if ns > MAX_LATENCY_NS {
            return Err(invalid(flag, format!("`{s}` is above 1 s, which no memory device has")));
        }
        Ok(ns)
    };
    let bandwidth = |flag: &'static str, s: &str| -> Result<u64, OptionError> {
        let bytes_per_s = units::parse_bandwidth(s).map_err(|e| invalid(flag, e.to_string()))?;
        if bytes_per_s != 0 && bytes_per_s < MIN_BANDWIDTH {
            return Err(invalid(
                flag,
                format!(
                    "below {MIN_BANDWIDTH} bytes/s (one cache line per second); 0 means unlimited"
                ),
            ));
        }
        Ok(bytes_per_s)
    };
    let reservation = pmem::timing::Reservation::parse(&args.reservation).ok_or_else(|| {
        invalid("reservation", format!("`{}` is not lines4, epoch or flush", args.reservation))
    })?;
    Ok(TimingOptions {
        persist_barrier_ns: latency("persist-latency", &args.persist_latency)?,
        write_bandwidth_bytes_per_s: bandwidth("write-bandwidth", &args.write_bandwidth)?,
        read_ns: latency("read-latency", &args.read_latency)?,
        reservation,
        write_line_ns: latency("write-latency", &args.write_latency)?,
        fs_sync_ns: latency("fs-sync-latency", &args.fs_sync_latency)?,
        fs_write_bytes_per_s: bandwidth("fs-write-bandwidth", &args.fs_write_bandwidth)?,
        cpu_cache_bytes: cpu_cache_bytes(args)?,
    })
}

/// `--cpu-cache`'s capacity in bytes (0: off), within what the model simulates.
fn cpu_cache_bytes(args: &Args) -> Result<u64, OptionError> {
    use pmem::cpucache::{CPU_CACHE_MAX_BYTES, CPU_CACHE_MIN_BYTES};
    let Some(text) = &args.cpu_cache else { return Ok(0) };
    let bytes = units::parse_bytes(text).map_err(|e| invalid("cpu-cache", e.to_string()))?;
    if !(CPU_CACHE_MIN_BYTES..=CPU_CACHE_MAX_BYTES).contains(&bytes) {
        return Err(invalid(
            "cpu-cache",
            format!(
                "`{text}` is outside {CPU_CACHE_MIN_BYTES} bytes (one 16-way set) ..= {} MiB",
                CPU_CACHE_MAX_BYTES >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// `KEY=VALUE` pairs of `flag` (see `workload_flags::key_values`).
pub(super) fn key_values(
    flag: &'static str,
    pairs: &[String],
) -> Result<BTreeMap<String, String>, OptionError> {
    super::super::workload_flags::key_values(pairs).map_err(|reason| invalid(flag, reason))
}

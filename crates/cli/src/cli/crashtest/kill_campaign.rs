//! `nvmdb crashtest --kill` (docs/design.md §6, §7): the campaign's region files, the clean base,
//! and the child process that runs the benchmark until it is killed.

use super::*;

/// The files of a `--kill` campaign: the working region (or directory) and the loaded base.
struct KillPaths {
    work: PathBuf,
    base: PathBuf,
    /// A copy of the working region as the kill left it, before recovery touched it.
    crashed: PathBuf,
}

/// Where a kill campaign's working region (or peer directory) lives: `given`, or a fresh name
/// in /dev/shm for shm and in the temporary directory for file. A peer's directory on shm is on
/// tmpfs too, as `bench` puts it: in the temporary directory (a disk) PMDK's msync and RocksDB's
/// fsync cost milliseconds each, and a child could be killed before it acknowledged anything.
pub(super) fn work_path(medium: Medium, given: Option<&Path>) -> PathBuf {
    match given {
        Some(p) => p.to_path_buf(),
        None => {
            let dir = match medium {
                Medium::Shm => PathBuf::from("/dev/shm"),
                _ => std::env::temp_dir(),
            };
            dir.join(format!("nvmdb-crashtest-{}", std::process::id()))
        }
    }
}

impl KillPaths {
    fn new(plan: &Plan, medium: Medium, given: Option<&Path>) -> anyhow::Result<KillPaths> {
        let work = work_path(medium, given);
        let with = |suffix: &str| {
            let mut name = work.clone().into_os_string();
            name.push(suffix);
            PathBuf::from(name)
        };
        let paths = KillPaths { base: with(".base"), crashed: with(".crashed"), work };
        for p in [&paths.work, &paths.base] {
            if p.exists() {
                return Err(invalid(
                    "path",
                    format!("{} exists; crashtest --kill creates it, give a new path", p.display()),
                )
                .into());
            }
        }
        if plan.engine.kind == EngineKind::Peer {
            // A peer opens only an existing directory; this campaign owns fresh ones.
            for p in [&paths.work, &paths.base] {
                std::fs::create_dir(p)
                    .with_context(|| format!("creating the peer directory {}", p.display()))?;
            }
        }
        Ok(paths)
    }

    fn remove_all(&self) {
        for p in [&self.work, &self.base, &self.crashed] {
            let _ = remove_path(p);
        }
    }
}

fn remove_path(p: &Path) -> std::io::Result<()> {
    if p.is_dir() {
        std::fs::remove_dir_all(p)
    } else if p.exists() {
        std::fs::remove_file(p)
    } else {
        Ok(())
    }
}

/// Copies a region file, or a peer's directory tree, replacing `target`.
fn copy_path(source: &Path, target: &Path) -> std::io::Result<()> {
    remove_path(target)?;
    if source.is_dir() {
        std::fs::create_dir_all(target)?;
        for entry in std::fs::read_dir(source)? {
            let entry = entry?;
            copy_path(&entry.path(), &target.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        // Region files are mostly holes; a plain copy would allocate them all.
        pmem::copy_sparse(source, target)
    }
}

pub(super) fn run_kill(plan: &Plan) -> anyhow::Result<Summary> {
    let Mode::Kill { options, medium, path, threads, max_pending } = &plan.mode else {
        unreachable!("run_kill runs the kill mode");
    };
    let paths = KillPaths::new(plan, *medium, path.as_deref())?;
    let region_at = |path: &Path, size_bytes: u64| RegionOptions {
        medium: *medium,
        path: Some(path.to_path_buf()),
        size_bytes,
        create: size_bytes > 0,
        ..RegionOptions::default()
    };
    let result = (|| -> anyhow::Result<Summary> {
        load_base(plan, &region_at(&paths.base, plan.size_bytes))?;
        let workload = make_workload(plan);
        let child = ChildPlan {
            engine: plan.engine.name.to_string(),
            workload: plan.workload.clone(),
            workload_options: plan.workload_options.clone(),
            region: region_at(&paths.work, 0),
            engine_opts: plan.config.extra.clone(),
            threads: *threads,
            max_pending: *max_pending,
        };
        let child_json = serde_json::to_string(&child)?;
        let exe = std::env::current_exe().context("locating the nvmdb executable")?;
        let reset = || copy_path(&paths.base, &paths.work).map_err(|e| e.to_string());
        let preserve = || copy_path(&paths.work, &paths.crashed).map_err(|e| e.to_string());
        let open = || {
            registry::open_engine(plan.engine.name, &region_at(&paths.work, 0), &plan.config)
                .map_err(|e| e.to_string())
        };
        let spawn = |seed: u64| {
            Command::new(&exe)
                .args(["crashtest", "--kill-child", &child_json, "--seed", &seed.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        };
        let target = KillTarget {
            reset: &reset,
            after_kill: Some(&preserve),
            open: &open,
            workload: &*workload,
            spawn: &spawn,
        };
        let observer = Display::new(options.crashes).keeping(&paths.crashed);
        let summary = kill::run_kill(&target, options, &observer);
        observer.finish();
        Ok(summary?)
    })();
    match &result {
        Ok(summary) if summary.violations > 0 => {
            let _ = remove_path(&paths.crashed);
            eprintln!(
                "kept {} (the loaded base) and the crashed regions of failed kills beside it",
                paths.base.display()
            );
        }
        _ => paths.remove_all(),
    }
    result
}

/// Creates the base region (or directory) and loads the workload into it.
fn load_base(plan: &Plan, region: &RegionOptions) -> anyhow::Result<()> {
    let engine =
        registry::open_engine(plan.engine.name, region, &plan.config).with_context(|| {
            format!("creating {}", region.path.as_deref().unwrap_or(Path::new("")).display())
        })?;
    let workload = make_workload(plan);
    let loaded = workload
        .load(&*engine, &|_, _| {})
        .and_then(|()| bench::loaded::mark_loaded(&*engine, workload.name()));
    loaded.map_err(|e| {
        let hint = match e {
            storage::DbError::RegionFull(_) => "; use a larger --size or a smaller database",
            _ => "",
        };
        anyhow::anyhow!("loading the workload: {e}{hint}")
    })?;
    engine.shutdown().context("shutting down after loading")?;
    Ok(())
}

/// The child of a `--kill` campaign: opens (recovers) the working region and runs the workload
/// until killed, streaming acks on stdout.
pub(super) fn run_child(plan: &str, seed: u64) -> anyhow::Result<ExitCode> {
    let plan: ChildPlan = serde_json::from_str(plan).context("reading the child plan")?;
    let engine = registry::open_engine(&plan.engine, &plan.region, &plan.config())?;
    let workload = workloads::by_name(&plan.workload, &plan.workload_options)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let options = RunOptions {
        threads: plan.threads,
        length: RunLength::Timed { warmup: Duration::ZERO, duration: CHILD_RUN },
        seed,
        setup: Setup::Attach,
        max_pending: plan.max_pending,
        check: false,
        target_tps: None,
    };
    kill::serve_child(&*engine, &*workload, &options, Box::new(std::io::stdout()))?;
    engine.shutdown()?;
    Ok(ExitCode::SUCCESS)
}

//! `nvmdb crashtest`'s output (docs/design.md §6, §7): progress and violations as they are found,
//! the summary table and its JSON form.

use super::*;

/// Progress on a terminal's stderr, and violations on stderr as they are found.
pub(super) struct Display<'a> {
    bar: Option<indicatif::ProgressBar>,
    /// Violations found so far.
    found: AtomicU64,
    /// `--kill`: where the crashed copy of the region is, to keep it when a kill fails.
    crashed: Option<&'a Path>,
    kept: AtomicU64,
}

impl<'a> Display<'a> {
    pub(super) fn new(total: u64) -> Display<'a> {
        let bar = std::io::stderr()
            .is_terminal()
            .then(|| {
                let style = indicatif::ProgressStyle::with_template(
                    "{prefix:>9} [{bar:32}] {pos}/{len} {msg} ({eta})",
                )
                .ok()?
                .progress_chars("=> ");
                let bar = indicatif::ProgressBar::new(total).with_style(style);
                bar.set_prefix("crashtest");
                bar.enable_steady_tick(Duration::from_millis(200));
                Some(bar)
            })
            .flatten();
        Display { bar, found: AtomicU64::new(0), crashed: None, kept: AtomicU64::new(0) }
    }

    pub(super) fn keeping(mut self, crashed: &'a Path) -> Display<'a> {
        self.crashed = Some(crashed);
        self
    }

    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn keep_crashed(&self, index: u64) {
        let Some(crashed) = self.crashed else { return };
        if self.kept.fetch_add(1, Ordering::Relaxed) >= MAX_KEPT_REGIONS {
            return;
        }
        let mut name = crashed.as_os_str().to_os_string();
        name.push(format!("-{index}"));
        if std::fs::rename(crashed, &name).is_ok() {
            self.say(&format!("  crashed region kept: {}", Path::new(&name).display()));
        }
    }
}

impl Observer for Display<'_> {
    fn setup(&self, what: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(what.to_string());
        }
    }

    fn finished(&self, outcome: &Outcome, done: u64, _total: u64) {
        let new = outcome.violations.len() as u64;
        let found = self.found.fetch_add(new, Ordering::Relaxed) + new;
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            bar.set_message(if found == 0 { String::new() } else { format!("{found} violations") });
        }
        if new == 0 {
            return;
        }
        for (i, v) in outcome.violations.iter().enumerate() {
            if found - new + i as u64 >= MAX_PRINTED_VIOLATIONS {
                break;
            }
            self.say(&format!("violation ({}): {}: {}", v.kind.name(), v.crash, v.message));
            if let Some(replay) = &v.replay {
                self.say(&format!("  rerun: {}", rerun_command(replay)));
            }
        }
        self.keep_crashed(outcome.index);
    }
}

/// This process's command line with the iteration-selecting flags replaced by `replay`
/// (`--seed` stays: with `--history` it fixes the aged base the case crashed on).
fn rerun_command(replay: &str) -> String {
    const DROP: &[&str] = &["--crashes", "--policy", "--replay", "--jobs", "--json"];
    let mut words = vec!["nvmdb".to_string()];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let flag = arg.split('=').next().unwrap_or("");
        if DROP.contains(&flag) {
            if !arg.contains('=') && flag != "--json" {
                args.next();
            }
            continue;
        }
        words.push(arg);
    }
    words.push(replay.to_string());
    words.join(" ")
}

pub(super) fn print_summary(plan: &Plan, s: &Summary) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if plan.json {
        writeln!(out, "{}", summary_json(plan, s))?;
        return Ok(out.flush()?);
    }
    let what = match &plan.mode {
        Mode::Sim { options, .. } => format!(
            "simulated power failures (policy {}, event {}, {} thread(s), {} txns each)",
            options.policies.iter().map(|p| p.name()).collect::<Vec<_>>().join("/"),
            options.event.name(),
            options.threads,
            options.txns_per_thread,
        ),
        Mode::Kill { medium, options, .. } => format!(
            "process kills (SIGKILL on {}, within {} ms of the start)",
            medium.name(),
            options.window.as_millis()
        ),
    };
    writeln!(out, "nvmdb crashtest: {} on {}, {what}", plan.engine.name, plan.workload)?;
    writeln!(out, "  iterations       {}", s.iterations)?;
    if let Mode::Sim { options, .. } = &plan.mode {
        writeln!(
            out,
            "  crashes verified {} ({} crash points past the end of their run)",
            s.crashes, s.unreached
        )?;
        if options.recovery_crashes > 0 {
            writeln!(out, "  crashes in recovery {}", s.recovery_crashes)?;
        }
        if let Some(span) = s.span {
            writeln!(out, "  run span         {} stores, {} fences", span.stores, span.fences)?;
        }
        if s.images_checked > 0 {
            writeln!(
                out,
                "  images checked   {} against the engine's own invariant",
                s.images_checked
            )?;
        }
        let ages: Vec<String> = s.ages.iter().map(u64::to_string).collect();
        writeln!(
            out,
            "  crash windows    {} in runs on bases aged by {} txns/thread ({} aimed just after \
             a structural change), {} in format/load",
            s.crashes - s.load_crashes,
            ages.join("/"),
            s.aimed_crashes,
            s.load_crashes
        )?;
        if s.windows > 0 {
            let events: Vec<String> = s
                .coverage
                .fields()
                .iter()
                .zip(s.windows_with.fields())
                .map(|((name, n), (_, w))| format!("{} {n} (in {w})", name.replace('_', " ")))
                .collect();
            writeln!(out, "  in the windows   {}", events.join(", "))?;
        }
    }
    writeln!(out, "  acks verified    {}", s.acks_verified)?;
    writeln!(
        out,
        "  recovery         p50 {:.3} ms, max {:.3} ms ({} recoveries)",
        s.recovery_ms_p50(),
        s.recovery_ms_max(),
        s.recovery_ms.len()
    )?;
    let kinds: Vec<String> =
        s.violations_by_kind.iter().map(|(k, n)| format!("{} {n}", k.name())).collect();
    if s.violations == 0 {
        writeln!(out, "  violations       0")?;
    } else {
        writeln!(
            out,
            "  violations       {} ({}) in {} iterations",
            s.violations,
            kinds.join(", "),
            s.failed_iterations
        )?;
    }
    writeln!(out, "  seed             {}", seed_of(plan))?;
    writeln!(out, "  elapsed          {:.1} s", s.elapsed.as_secs_f64())?;
    if !s.kept.is_empty() {
        writeln!(out, "first violations:")?;
        for v in s.kept.iter().take(MAX_PRINTED_VIOLATIONS as usize) {
            writeln!(out, "  {}: {}: {}", v.kind.name(), v.crash, v.message)?;
            if let Some(replay) = &v.replay {
                writeln!(out, "    rerun: {}", rerun_command(replay))?;
            }
        }
    }
    Ok(out.flush()?)
}

fn seed_of(plan: &Plan) -> u64 {
    match &plan.mode {
        Mode::Sim { options, .. } => options.seed,
        Mode::Kill { options, .. } => options.seed,
    }
}

fn summary_json(plan: &Plan, s: &Summary) -> serde_json::Value {
    let kinds = [
        ViolationKind::Durability,
        ViolationKind::Consistency,
        ViolationKind::Integrity,
        ViolationKind::Recovery,
        ViolationKind::Run,
        ViolationKind::Panic,
        ViolationKind::Invariant,
    ];
    let by_kind: serde_json::Map<String, serde_json::Value> = kinds
        .iter()
        .map(|k| (k.name().to_string(), s.violations_by_kind.get(k).copied().unwrap_or(0).into()))
        .collect();
    let mut json = serde_json::json!({
        "engine": plan.engine.name,
        "workload": plan.workload,
        "mode": match plan.mode { Mode::Sim { .. } => "sim", Mode::Kill { .. } => "kill" },
        "iterations": s.iterations,
        "crashes": s.crashes,
        "unreached": s.unreached,
        "recovery_crashes": s.recovery_crashes,
        "acks_verified": s.acks_verified,
        "violations": s.violations,
        "failed_iterations": s.failed_iterations,
        "violations_by_kind": by_kind,
        "recovery_ms": {
            "p50": s.recovery_ms_p50(),
            "max": s.recovery_ms_max(),
            "count": s.recovery_ms.len(),
        },
        "seed": seed_of(plan),
        "elapsed_s": s.elapsed.as_secs_f64(),
        "first_violations": s.kept,
        "workload_opts": plan.workload_options,
        "engine_opts": plan.config.extra,
        "size_bytes": plan.size_bytes,
    });
    match &plan.mode {
        Mode::Sim { options, eadr } => {
            json["policies"] = options.policies.iter().map(|p| p.name()).collect();
            json["event"] = options.event.name().into();
            json["threads"] = options.threads.into();
            json["txns"] = options.txns_per_thread.into();
            json["eadr"] = (*eadr).into();
            json["span"] = serde_json::to_value(s.span).unwrap_or_default();
            json["load_span"] = serde_json::to_value(s.load_span).unwrap_or_default();
            json["history"] = options.history.into();
            json["ages"] = s.ages.clone().into();
            json["load_every"] = options.load_every.into();
            json["load_crashes"] = s.load_crashes.into();
            json["aim_percent"] = options.aim_percent.into();
            json["aimed_crashes"] = s.aimed_crashes.into();
            json["images_checked"] = s.images_checked.into();
            json["coverage"] = serde_json::json!({
                "windows": s.windows,
                "events": s.coverage,
                "windows_with": s.windows_with,
            });
        }
        Mode::Kill { options, medium, threads, path, .. } => {
            json["medium"] = medium.name().into();
            let work = super::kill_campaign::work_path(*medium, path.as_deref());
            json["path"] = work.display().to_string().into();
            json["threads"] = (*threads).into();
            json["kill_window_ms"] = (options.window.as_millis() as u64).into();
        }
    }
    json
}

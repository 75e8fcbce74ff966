//! One iteration's crash and check (docs/design.md §2, §7): load and age the bases, run to a
//! cut, recover the image (and cut again in recovery), and verify acks, invariants and integrity.

use super::*;

pub(super) struct Ctx<'a> {
    pub(super) target: &'a SimTarget<'a>,
    pub(super) region: RegionOptions,
    pub(super) options: &'a CrashOptions,
}

/// The result of recovering one image and verifying it.
pub(super) struct Checked {
    pub(super) recovery_ms: Option<f64>,
    /// Events the recovery issued (where a crash inside it may fall).
    pub(super) span: Span,
    pub(super) failures: Vec<(ViolationKind, String)>,
    /// The recovered region cut once more right after recovery returned (when asked for).
    pub(super) after: Option<Vec<u8>>,
}

impl Ctx<'_> {
    pub(super) fn open(&self, region: Region) -> Result<Box<dyn Engine>, String> {
        (self.target.open)(region)
    }

    pub(super) fn image_region(&self, image: &[u8]) -> Result<Region, String> {
        Region::from_image(image, &self.region).map_err(|e| format!("mapping a crash image: {e}"))
    }

    /// Loads the workload on a blank `sim` region, shuts down cleanly, and returns the
    /// persisted image, after checking that it verifies, and the span of formatting and loading.
    pub(super) fn load_base(&self) -> Result<(Vec<u8>, Span), CrashError> {
        let setup = |what: &str, e: String| CrashError::Setup(format!("{what}: {e}"));
        let region =
            Region::open(&self.region).map_err(|e| setup("opening a sim region", e.to_string()))?;
        let Some(sim) = region.sim() else {
            return Err(CrashError::Setup("the region is not a sim region".into()));
        };
        let engine = self.open(region.clone()).map_err(|e| setup("opening the engine", e))?;
        let workload = (self.target.workload)();
        let loaded = workload
            .load(&*engine, &|_, _| {})
            .and_then(|()| crate::loaded::mark_loaded(&*engine, workload.name()));
        loaded.map_err(|e| {
            let hint = match e {
                DbError::RegionFull(_) => "; use a larger --size or a smaller database",
                _ => "",
            };
            setup("loading the workload", format!("{e}{hint}"))
        })?;
        let load_span = Span::since(sim, (0, 0));
        engine.shutdown().map_err(|e| setup("shutting down after loading", e.to_string()))?;
        drop(engine);
        let Some(image) = region.crash_image(CrashPolicy::Persisted, 0) else {
            return Err(CrashError::Setup("the region is not a sim region".into()));
        };
        let checked = self.verify(&*workload, &image, &[], None);
        if let Some((kind, message)) = checked.failures.first() {
            return Err(CrashError::Setup(format!(
                "the loaded database fails verification after a clean shutdown, before any \
                 crash ({}): {message}",
                kind.name()
            )));
        }
        Ok((image, load_span))
    }

    /// The bases crash windows start from: the loaded image aged by each of `ages`
    /// transactions per thread (incrementally: each base continues the previous one's history).
    pub(super) fn age_bases(
        &self,
        loaded: Vec<u8>,
        ages: &[u64],
    ) -> Result<Vec<Vec<u8>>, CrashError> {
        let mut bases = Vec::with_capacity(ages.len());
        let (mut image, mut done) = (loaded, 0u64);
        for (j, &age) in ages.iter().enumerate() {
            if age > done {
                let txns = (age - done).saturating_mul(self.options.threads as u64);
                let seed = derive(self.options.seed, SALT_AGING_RUN + j as u64);
                image = self.age(&image, txns, seed)?;
                done = age;
            }
            bases.push(image.clone());
        }
        Ok(bases)
    }

    /// Runs `txns` transactions on `image` without a crash and shuts down cleanly.
    fn age(&self, image: &[u8], txns: u64, seed: u64) -> Result<Vec<u8>, CrashError> {
        let setup = |e: String| CrashError::Setup(format!("ageing the base: {e}"));
        let region = self.image_region(image).map_err(setup)?;
        let engine = self.open(region.clone()).map_err(setup)?;
        let workload = (self.target.workload)();
        // One thread: the aged image is then the same on every run of the campaign, so a
        // replay finds the base its case crashed on.
        let options = RunOptions { threads: 1, ..self.options.run_options(seed, txns, false) };
        crate::run(&*engine, &*workload, &options, &Hooks::default()).map_err(|e| {
            if e.is_region_full() {
                setup(format!("{e}; use a larger --size or a shorter --history"))
            } else {
                CrashError::Bench(e)
            }
        })?;
        engine.shutdown().map_err(|e| setup(e.to_string()))?;
        drop(engine);
        region
            .crash_image(CrashPolicy::Persisted, 0)
            .ok_or_else(|| setup("not a sim region".into()))
    }

    /// Runs the workload once on the base without a crash: its span and what the engine did,
    /// and a sanity check that the workload passes its checker on this engine at all.
    pub(super) fn dry_run(
        &self,
        base: &[u8],
    ) -> Result<(Span, Option<EngineCounters>), CrashError> {
        let setup = |e: String| CrashError::Setup(format!("dry run: {e}"));
        let region = self.image_region(base).map_err(setup)?;
        let engine = self.open(region.clone()).map_err(setup)?;
        let Some(sim) = region.sim() else {
            return Err(setup("the region is not a sim region".into()));
        };
        let workload = (self.target.workload)();
        let before = sim.event_counts();
        let counters_before = engine.counters();
        let seed = derive(self.options.seed, SALT_DRY_RUN);
        let result = crate::run(
            &*engine,
            &*workload,
            &self.options.run_options(seed, self.options.txns_per_thread, true),
            &Hooks::default(),
        )?;
        let span = Span::since(sim, before);
        let counters = engine.counters().zip(counters_before).map(|(a, b)| a.since(&b));
        if !result.checker.passed() {
            return Err(setup(format!(
                "the workload's checker fails on a run without any crash: {}",
                result.checker
            )));
        }
        Ok((span, counters))
    }

    pub(super) fn iteration(
        &self,
        base: &[u8],
        workload: &dyn Workload,
        index: u64,
        case: &Replay,
    ) -> Outcome {
        let mut outcome = Outcome { index, phase: Some(Phase::Run), ..Outcome::default() };
        let run = catch_unwind(AssertUnwindSafe(|| self.crash_run(base, workload, case)));
        let cut = match run {
            Ok(cut) => cut,
            Err(payload) => {
                let message = format!("during the run: {}", panic_message(&*payload));
                let v = describe_violation(case, ViolationKind::Panic, &[], message);
                outcome.violations.push(v);
                return outcome;
            }
        };
        // An aimed point is reported (and replays) as the plain point it fell on.
        let aimed = case.aim.is_some();
        let case = &match (case.aim, cut.point) {
            (Some(_), Some(point)) => Replay { point, aim: None, ..*case },
            _ => *case,
        };
        let violation = |kind, cuts: &[CrashPoint], message: String| {
            describe_violation(case, kind, cuts, message)
        };
        if let Some(e) = cut.run_error {
            outcome.violations.push(violation(ViolationKind::Run, &[], e));
        }
        match cut.image_check {
            Some(Ok(checked)) => outcome.image_checked = checked,
            Some(Err(message)) => {
                outcome.image_checked = true;
                outcome.violations.push(violation(ViolationKind::Invariant, &[], message));
            }
            None => {}
        }
        let Some(mut image) = cut.image else { return outcome };
        let acks = cut.acks;
        outcome.reached = true;
        outcome.window = cut.window;
        outcome.aimed = aimed;
        outcome.acks = acks.len() as u64;
        let mut cuts: Vec<CrashPoint> = Vec::new();
        let after = Some((case.policy, derive(case.seed, SALT_AFTER_RECOVERY)));
        let mut checked = self.verify(workload, &image, &acks, after);
        // Recovery's own writes must be durable when it returns: cut right after it and verify.
        if let Some(cut) = checked.after.take() {
            for (kind, message) in self.verify(workload, &cut, &acks, None).failures {
                let message = format!("crash right after recovery: {message}");
                outcome.violations.push(violation(kind, &[], message));
            }
        }
        for k in 0..=self.options.recovery_crashes {
            outcome.recovery_ms.extend(checked.recovery_ms);
            let failed = !checked.failures.is_empty();
            for (kind, message) in checked.failures.drain(..) {
                outcome.violations.push(violation(kind, &cuts, message));
            }
            // A broken image says all there is to say; crashing its recovery adds nothing.
            if failed || k == self.options.recovery_crashes {
                break;
            }
            let seed = derive(case.seed, SALT_RECOVERY + u64::from(k));
            let Some(point) = pick_point(self.options.event, checked.span, seed) else {
                break;
            };
            let image_seed = derive(seed, SALT_IMAGE);
            let next = catch_unwind(AssertUnwindSafe(|| {
                self.crash_recovery(&image, point, case.policy, image_seed)
            }));
            cuts.push(point);
            match next {
                Ok(Some(next)) => image = next,
                Ok(None) => break,
                Err(payload) => {
                    let message = format!("during recovery: {}", panic_message(&*payload));
                    outcome.violations.push(violation(ViolationKind::Panic, &cuts, message));
                    break;
                }
            }
            outcome.recovery_crashes += 1;
            checked = self.verify(workload, &image, &acks, None);
        }
        outcome
    }

    /// Runs the workload on a copy of `base` with `case` armed; returns the cut image and the
    /// acks recorded before the cut.
    fn crash_run(&self, base: &[u8], workload: &dyn Workload, case: &Replay) -> CutRun {
        let failed = |e: String| CutRun {
            image: None,
            acks: Vec::new(),
            run_error: Some(e),
            window: None,
            point: None,
            image_check: None,
        };
        let region = match self.image_region(base) {
            Ok(region) => region,
            Err(e) => return failed(e),
        };
        let engine = match self.open(region.clone()) {
            Ok(engine) => engine,
            Err(e) => return failed(format!("opening the base image: {e}")),
        };
        let Some(sim) = region.sim() else { return failed("not a sim region".into()) };
        sim.arm_aimed(case.aim, case.point, case.policy, derive(case.seed, SALT_IMAGE));
        let stop = AtomicBool::new(false);
        let slack = if case.aim.is_some() { AIM_RUN_SLACK } else { RUN_SLACK };
        let per_thread = self.options.txns_per_thread.saturating_mul(slack);
        let limit = (self.options.threads as u64).saturating_mul(per_thread);
        let limit = usize::try_from(limit).unwrap_or(usize::MAX).saturating_add(1024);
        let sink = CutSink { sim, log: AckLog::new(limit), stop: &stop };
        let halting = Halting { inner: workload, region: region.clone() };
        let hooks = Hooks { progress: None, sink: Some(&sink), stop: Some(&stop) };
        let options = self.options.run_options(case.seed, per_thread, false);
        let before = engine.counters();
        let result = crate::run(&*engine, &halting, &options, &hooks);
        // The counters stopped at the cut: this is what the crash window held.
        let window = engine.counters().zip(before).map(|(after, before)| after.since(&before));
        let image = sim.take_image();
        let image_check = match (self.target.image_check, &image) {
            (Some(check), Some(image)) => Some(image_check::run(check, &*engine, &region, image)),
            _ => None,
        };
        drop(engine);
        CutRun {
            image,
            acks: sink.log.acks(),
            run_error: result.err().map(|e| e.to_string()),
            window,
            point: sim.cut_point(),
            image_check,
        }
    }

    /// Recovers `image` with a crash armed at `point` inside the recovery; the cut image.
    fn crash_recovery(
        &self,
        image: &[u8],
        point: CrashPoint,
        policy: CrashPolicy,
        seed: u64,
    ) -> Option<Vec<u8>> {
        let region = self.image_region(image).ok()?;
        let sim = region.sim()?;
        sim.arm(point, policy, seed);
        // Recovery may fail after the cut; the image taken before that is what is tested.
        let _ = self.open(region.clone());
        sim.take_image()
    }

    /// Recovers `image` (timed) and runs every check against it. `after`: also cut the
    /// recovered region right after recovery under this policy and seed (`Checked::after`).
    fn verify(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acks: &[Ack],
        after: Option<(CrashPolicy, u64)>,
    ) -> Checked {
        let mut checked =
            Checked { recovery_ms: None, span: Span::default(), failures: Vec::new(), after: None };
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.verify_into(workload, image, acks, after, &mut checked)
        }));
        if let Err(payload) = result {
            let message = format!("during recovery or verification: {}", panic_message(&*payload));
            checked.failures.push((ViolationKind::Panic, message));
        }
        checked
    }

    fn verify_into(
        &self,
        workload: &dyn Workload,
        image: &[u8],
        acks: &[Ack],
        after: Option<(CrashPolicy, u64)>,
        out: &mut Checked,
    ) {
        let region = match self.image_region(image) {
            Ok(region) => region,
            Err(e) => return out.failures.push((ViolationKind::Recovery, e)),
        };
        let Some(sim) = region.sim() else {
            return out.failures.push((ViolationKind::Recovery, "not a sim region".into()));
        };
        let started = Instant::now();
        let opened = self.open(region.clone());
        out.recovery_ms = Some(started.elapsed().as_secs_f64() * 1e3);
        out.span = Span::since(sim, (0, 0));
        let engine = match opened {
            Ok(engine) => engine,
            Err(e) => {
                return out
                    .failures
                    .push((ViolationKind::Recovery, format!("recovery failed: {e}")))
            }
        };
        if let Some((policy, seed)) = after {
            out.after = region.crash_image(policy, seed);
        }
        out.failures.extend(check_recovered(&*engine, workload, acks));
    }
}

/// Runs every check on a recovered engine: the workload reattaches, the acks hold, the
/// workload's invariants hold, the engine's structures agree.
pub(crate) fn check_recovered(
    engine: &dyn Engine,
    workload: &dyn Workload,
    acks: &[Ack],
) -> Vec<(ViolationKind, String)> {
    let mut failures = Vec::new();
    if let Err(e) = workload.attach(engine) {
        let message = format!("the workload's tables after recovery: {e}");
        failures.push((ViolationKind::Recovery, message));
        return failures;
    }
    if let Err(e) = workload.verify_acks(engine, acks) {
        failures.push((ViolationKind::Durability, e));
    }
    if let Err(e) = workload.check(engine) {
        failures.push((ViolationKind::Consistency, e));
    }
    if let Err(e) = engine.check_integrity() {
        failures.push((ViolationKind::Integrity, e));
    }
    failures
}

/// What a cut run left.
struct CutRun {
    /// The image cut at the crash point; `None` if the run ended before it.
    image: Option<Vec<u8>>,
    /// Acks of the transactions observed durable before the cut.
    acks: Vec<Ack>,
    /// The driver's error, if the run failed.
    run_error: Option<String>,
    /// The engine's counters from the start of the run to the cut.
    window: Option<EngineCounters>,
    /// Where the cut fell, counted from arming.
    point: Option<CrashPoint>,
    /// What [`SimTarget::image_check`] said of the image (`None`: no check or no image).
    image_check: Option<Result<bool, String>>,
}

/// Records durable transactions while the cut has not been taken; after it, asks the run to
/// stop. Called after the worker observed durability, so "not taken yet" here implies "not
/// taken at the observation" (the flag only goes from false to true while armed).
struct CutSink<'a> {
    sim: &'a Sim,
    log: AckLog,
    stop: &'a AtomicBool,
}

impl DurableSink for CutSink<'_> {
    fn on_durable(&self, txns: &[DurableTxn]) {
        if self.sim.cut_taken() {
            self.stop.store(true, Ordering::Relaxed);
            return;
        }
        self.log.on_durable(txns);
    }
}

/// The workload under test, whose workers stop touching the engine once the cut is taken:
/// what runs after the cut cannot change the image, so it is skipped rather than run to the
/// end of the iteration's transaction count.
struct Halting<'a> {
    inner: &'a dyn Workload,
    region: Region,
}

impl Workload for Halting<'_> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        self.inner.load(engine, progress)
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        self.inner.attach(engine)
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(HaltingWorker {
            inner: self.inner.worker(worker, seed),
            region: self.region.clone(),
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        self.inner.check(engine)
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        self.inner.verify_acks(engine, acks)
    }
}

struct HaltingWorker {
    inner: Box<dyn Worker>,
    region: Region,
}

impl Worker for HaltingWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> Result<TxnDone, DbError> {
        if self.region.sim().is_some_and(Sim::cut_taken) {
            return Ok(TxnDone { kind: "after-cut", token: None, retries: 0, acks: Vec::new() });
        }
        self.inner.run_one(engine)
    }
}

pub(super) fn describe_violation(
    case: &Replay,
    kind: ViolationKind,
    cuts: &[CrashPoint],
    message: String,
) -> Violation {
    let mut crash = case.describe();
    if !cuts.is_empty() {
        let points: Vec<String> =
            cuts.iter().map(|p| format!("{}:{}", event_name(p.event), p.count)).collect();
        crash.push_str(&format!(" then in recovery at {}", points.join(", ")));
    }
    // An aimed case that was not turned into a plain point (it failed before any cut) has no
    // `--replay` form.
    let replay = case.aim.is_none().then(|| case.args());
    Violation { kind, crash, replay, message }
}

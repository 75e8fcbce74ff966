//! Validation of a parsed spec ([`super`]): every key checked, so that a bad spec is one line
//! naming the file and the key before anything runs. Apart from the schema because it is the
//! larger half and changes for other reasons (a new rule, not a new key).

use super::*;

pub(super) fn toml_error(text: &str, path: &Path, e: &toml::de::Error) -> SpecError {
    let (line, column) = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (line, column)
        }
        None => (0, 0),
    };
    let message = e.message().lines().next().unwrap_or("invalid TOML").to_string();
    SpecError::Toml { path: path.to_path_buf(), line, column, message }
}

pub(super) struct Validator<'a> {
    pub(super) path: &'a Path,
}

impl Validator<'_> {
    fn err(&self, key: impl Into<String>, reason: impl Into<String>) -> SpecError {
        SpecError::Invalid { path: self.path.to_path_buf(), key: key.into(), reason: reason.into() }
    }

    pub(super) fn spec(&self, raw: RawSpec, text: &str) -> Result<Spec, SpecError> {
        let meta = raw.spec;
        let name = match meta.name {
            Some(n) => n,
            None => self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("spec").to_string(),
        };
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        {
            return Err(self.err("spec.name", format!("`{name}`: use letters, digits, - _ .")));
        }
        let new_flags: Vec<String> = meta.new_flags.iter().map(|f| normalize_key(f)).collect();
        let reps = self.reps("spec.reps", meta.reps.unwrap_or(MIN_REPS))?;
        let runs = match meta.runs.as_deref() {
            None => Runs::Fastest,
            Some(r) => Runs::parse(r).ok_or_else(|| {
                self.err(
                    "spec.runs",
                    format!("`{r}`: every spec uses one rule for the VM's two speeds, `fastest`"),
                )
            })?,
        };
        let mode = match meta.mode.as_deref().unwrap_or("run") {
            "run" => Mode::Run,
            "crash_recover" | "crash-recover" => {
                let Some(after) = &meta.crash_after else {
                    return Err(self.err("spec.crash_after", "mode crash_recover needs it"));
                };
                Mode::CrashRecover { crash_after: self.duration("spec.crash_after", after)? }
            }
            other => {
                return Err(self.err("spec.mode", format!("`{other}` is not run or crash_recover")))
            }
        };
        let timeout =
            meta.timeout.as_deref().map(|t| self.duration("spec.timeout", t)).transpose()?;
        let base = self.flags("base", &raw.base, &new_flags)?;
        let axes = self.axes("grid", &raw.grid, &new_flags)?;
        let quick = self.quick(raw.quick, &axes, &new_flags)?;
        let spec = Spec {
            name,
            title: meta.title,
            source: meta.source,
            description: meta.description,
            reps,
            runs,
            mode,
            timeout,
            needs: meta.needs,
            new_flags,
            base,
            axes,
            quick,
            plots: raw.plot,
            claims: raw.claim,
            path: self.path.to_path_buf(),
            text: text.to_string(),
        };
        self.crash_medium(&spec)?;
        if spec.point_count() > MAX_POINTS {
            return Err(self
                .err("grid", format!("{} points is more than {MAX_POINTS}", spec.point_count())));
        }
        for (i, plot) in spec.plots.iter().enumerate() {
            self.plot(&spec, i, plot)?;
        }
        let reproduces = spec.claims.iter().any(|c| c.role == Role::Reproduction);
        if reproduces && spec.reps < MIN_REPS {
            return Err(self.err(
                "spec.reps",
                format!(
                    "{} repetition(s): a spec with reproduction claims needs at least {MIN_REPS} \
                     (quick runs set quick.reps)",
                    spec.reps
                ),
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for claim in &spec.claims {
            if !ids.insert(claim.id.as_str()) {
                return Err(self.err(format!("claim `{}`", claim.id), "id used twice"));
            }
            self.claim(&spec, claim)?;
        }
        Ok(spec)
    }

    fn reps(&self, key: &str, reps: u32) -> Result<u32, SpecError> {
        if reps == 0 || reps > MAX_REPS {
            return Err(self.err(key, format!("must be 1..={MAX_REPS}, got {reps}")));
        }
        Ok(reps)
    }

    fn duration(&self, key: &str, text: &str) -> Result<Duration, SpecError> {
        units::parse_duration(text, BareTime::Seconds)
            .ok_or_else(|| self.err(key, format!("`{text}` is not a duration (10s, 500ms)")))
    }

    fn crash_medium(&self, spec: &Spec) -> Result<(), SpecError> {
        if spec.mode == Mode::Run {
            return Ok(());
        }
        let mut media = vec![spec.base.get("medium")];
        for axis in &spec.axes {
            media.extend(axis.values.iter().map(|v| v.flags.get("medium")));
        }
        for m in media.into_iter().flatten() {
            if !matches!(m, FlagValue::Text(t) if t == "shm" || t == "file" || t == "dax") {
                return Err(self.err("medium", "crash_recover needs a file medium: shm, file, dax"));
            }
        }
        if !matches!(spec.base.get("medium"), Some(FlagValue::Text(_))) {
            return Err(
                self.err("base.medium", "crash_recover needs a file medium: shm, file, dax")
            );
        }
        if spec.base.contains_key("path") {
            return Err(self.err("base.path", "crash_recover manages the region file itself"));
        }
        Ok(())
    }

    fn flag_key(&self, ctx: &str, key: &str, new_flags: &[String]) -> Result<String, SpecError> {
        let k = normalize_key(key);
        if MANAGED_FLAGS.contains(&k.as_str()) {
            return Err(self.err(format!("{ctx}.{key}"), "the sweep sets this flag itself"));
        }
        if !BENCH_FLAGS.contains(&k.as_str()) && !new_flags.contains(&k) {
            return Err(self.err(
                format!("{ctx}.{key}"),
                "not an `nvmdb bench` flag (list flags the bench does not have yet in \
                 spec.new_flags)",
            ));
        }
        Ok(k)
    }

    fn flag_value(&self, key: &str, v: &toml::Value) -> Result<FlagValue, SpecError> {
        match v {
            toml::Value::Boolean(b) => Ok(FlagValue::Switch(*b)),
            toml::Value::Array(items) => {
                let texts = items.iter().map(scalar_text).collect::<Option<Vec<_>>>();
                texts.map(FlagValue::List).ok_or_else(|| {
                    self.err(key, "a list flag holds strings or numbers (`[\"a=1\", \"b=2\"]`)")
                })
            }
            other => scalar_text(other)
                .map(FlagValue::Text)
                .ok_or_else(|| self.err(key, "a flag is a string, number, boolean or list")),
        }
    }

    fn flags(&self, ctx: &str, t: &toml::Table, new_flags: &[String]) -> Result<Flags, SpecError> {
        let mut flags = Flags::new();
        for (key, value) in t {
            let k = self.flag_key(ctx, key, new_flags)?;
            let v = self.flag_value(&format!("{ctx}.{key}"), value)?;
            if flags.insert(k, v).is_some() {
                return Err(self.err(format!("{ctx}.{key}"), "given twice (- and _ are the same)"));
            }
        }
        Ok(flags)
    }

    fn axes(
        &self,
        ctx: &str,
        t: &toml::Table,
        new_flags: &[String],
    ) -> Result<Vec<Axis>, SpecError> {
        let mut axes: Vec<Axis> = Vec::new();
        for (name, values) in t {
            let key = format!("{ctx}.{name}");
            let axis_name = normalize_key(name);
            if axes.iter().any(|a| a.name == axis_name) {
                return Err(self.err(key, "axis given twice (- and _ are the same)"));
            }
            let toml::Value::Array(items) = values else {
                return Err(self.err(key, "an axis is a list of values"));
            };
            if items.is_empty() {
                return Err(self.err(key, "an axis needs at least one value"));
            }
            let mut out: Vec<AxisValue> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let value = self.axis_value(&format!("{key}[{i}]"), &axis_name, item, new_flags)?;
                if out.iter().any(|v| v.label == value.label) {
                    return Err(self.err(key, format!("value `{}` listed twice", value.label)));
                }
                out.push(value);
            }
            axes.push(Axis { name: axis_name, values: out });
        }
        Ok(axes)
    }

    /// A scalar sets the flag named like the axis; a table sets several flags, and its `name`
    /// (or the axis flag's value) is the label.
    fn axis_value(
        &self,
        key: &str,
        axis: &str,
        item: &toml::Value,
        new_flags: &[String],
    ) -> Result<AxisValue, SpecError> {
        let toml::Value::Table(table) = item else {
            self.flag_key("grid", axis, new_flags)?;
            let value = self.flag_value(key, item)?;
            let label = value.to_string();
            return Ok(AxisValue { label, flags: Flags::from([(axis.to_string(), value)]) });
        };
        let mut rest = table.clone();
        let name = rest.remove("name");
        let flags = self.flags(key, &rest, new_flags)?;
        let label = match (&name, flags.get(axis)) {
            (Some(n), _) => scalar_text(n).ok_or_else(|| self.err(key, "`name` is a string"))?,
            (None, Some(v)) => v.to_string(),
            (None, None) => {
                return Err(self.err(key, format!("a table value needs `name` or `{axis}`")))
            }
        };
        if label.is_empty() || label.contains([',', '=']) {
            return Err(self.err(key, format!("label `{label}` must be non-empty, without , or =")));
        }
        Ok(AxisValue { label, flags })
    }

    fn quick(
        &self,
        raw: RawQuick,
        axes: &[Axis],
        new_flags: &[String],
    ) -> Result<Quick, SpecError> {
        let reps = raw.reps.map(|r| self.reps("quick.reps", r)).transpose()?;
        let base = self.flags("quick.base", &raw.base, new_flags)?;
        let quick_axes = self.axes("quick.grid", &raw.grid, new_flags)?;
        for a in &quick_axes {
            if !axes.iter().any(|full| full.name == a.name) {
                return Err(self.err(
                    format!("quick.grid.{}", a.name),
                    "not an axis of [grid] (quick runs may only shorten axes)",
                ));
            }
        }
        let crash_after = raw
            .crash_after
            .as_deref()
            .map(|t| self.duration("quick.crash_after", t))
            .transpose()?;
        let timeout =
            raw.timeout.as_deref().map(|t| self.duration("quick.timeout", t)).transpose()?;
        Ok(Quick { reps, base, axes: quick_axes, crash_after, timeout })
    }

    fn known(&self, spec: &Spec, ctx: &str, key: &str) -> Result<(), SpecError> {
        if spec.is_known_key(key) {
            return Ok(());
        }
        Err(self.err(ctx, format!("`{key}` is neither a grid axis nor a bench flag")))
    }

    fn conditions(&self, spec: &Spec, ctx: &str, c: &Conditions) -> Result<(), SpecError> {
        c.keys().try_for_each(|k| self.known(spec, ctx, k))
    }

    fn plot(&self, spec: &Spec, i: usize, plot: &PlotSpec) -> Result<(), SpecError> {
        let ctx = format!("plot[{i}]");
        for key in plot.series.iter().chain(&plot.panels) {
            self.known(spec, &ctx, key)?;
        }
        self.conditions(spec, &format!("{ctx}.where"), &plot.filter)?;
        let references = [("normalize", &plot.normalize), ("x_per_txn_time", &plot.x_per_txn_time)];
        for (name, n) in references {
            let Some(n) = n else { continue };
            self.conditions(spec, &format!("{ctx}.{name}.where"), &n.reference)?;
            for key in n.same.iter().flatten() {
                self.known(spec, &format!("{ctx}.{name}.match"), key)?;
            }
        }
        if plot.x_per_txn_time.is_some() {
            // A time divided by a time: x must be an axis of durations, not a count or a size.
            let times = spec.axis(&plot.x).is_some_and(|a| {
                a.values.iter().all(|v| units::parse_duration(&v.label, BareTime::Nanos).is_some())
            });
            if !times {
                return Err(self.err(
                    format!("{ctx}.x_per_txn_time"),
                    format!("x (`{}`) must be a grid axis of times (`0`, `500ns`, `2us`)", plot.x),
                ));
            }
        }
        for (name, scale) in [("x_scale", plot.x_scale), ("y_scale", plot.y_scale)] {
            if !scale.is_finite() || scale <= 0.0 {
                return Err(self.err(format!("{ctx}.{name}"), "must be a positive number"));
            }
        }
        Ok(())
    }

    fn claim(&self, spec: &Spec, c: &ClaimSpec) -> Result<(), SpecError> {
        let ctx = format!("claim `{}`", c.id);
        let need = |field: &str, present: bool| -> Result<(), SpecError> {
            if present {
                Ok(())
            } else {
                Err(self.err(&ctx, format!("a {:?} claim needs `{field}`", c.kind)))
            }
        };
        match c.kind {
            ClaimKind::Ratio => {
                need("numerator", c.numerator.is_some())?;
                need("denominator", c.denominator.is_some())?;
            }
            ClaimKind::Breakeven => {
                need("x", c.x.is_some())?;
                need("a", c.a.is_some())?;
                need("b", c.b.is_some())?;
            }
            ClaimKind::Threshold => {
                need("x", c.x.is_some())?;
                need("reference", c.reference.is_some())?;
                need("fraction", c.fraction.is_some())?;
            }
            ClaimKind::Value => {}
        }
        need("expected or range", c.expected.is_some() || c.range.is_some())?;
        let has_reason = c.bound_reason.as_deref().is_some_and(|r| !r.trim().is_empty());
        match (c.bound, has_reason) {
            (Bound::Ours, false) => {
                return Err(self.err(
                    format!("{ctx}.bound_reason"),
                    "a bound = \"ours\" claim says why (what the paper states instead)",
                ))
            }
            (Bound::Paper, true) => {
                return Err(self.err(
                    format!("{ctx}.bound_reason"),
                    "only a bound = \"ours\" claim has a bound_reason",
                ))
            }
            _ => {}
        }
        if let Some([lo, hi]) = c.range {
            if lo.is_nan() || hi.is_nan() || lo > hi {
                return Err(
                    self.err(format!("{ctx}.range"), "must be [low, high] with low <= high")
                );
            }
        }
        for t in [c.tolerance, c.tolerance_abs].into_iter().flatten() {
            if !(t.is_finite() && t >= 0.0) {
                return Err(self.err(format!("{ctx}.tolerance"), "must be a number >= 0"));
            }
        }
        for key in &c.per {
            self.known(spec, &format!("{ctx}.per"), key)?;
        }
        let all = [&Some(c.filter.clone()), &c.numerator, &c.denominator, &c.a, &c.b, &c.reference];
        for cond in all.into_iter().flatten() {
            self.conditions(spec, &ctx, cond)?;
        }
        Ok(())
    }
}

//! Grid expansion and sharding: a spec's axes become points (the cartesian product, first axis
//! outermost), each with a readable id (`engine=inplace,persist_latency=1us`), its bench
//! arguments and a hash of them.
//!
//! Invariants: expansion is deterministic (the same spec and options give the same points in
//! the same order on every machine), so `--shard i/n` on n machines partitions the points;
//! the hash changes whenever anything a run depends on changes, so a resumed sweep never takes
//! a result of other settings for its own.

use crate::spec::{Axis, FlagValue, Flags, Mode, Spec};
use crate::units;
use std::fmt;
use std::time::Duration;

/// Measured period of a `--quick` run unless the spec's `[quick.base]` says otherwise.
pub const QUICK_DURATION: &str = "1s";
/// Warm-up of a `--quick` run unless the spec's `[quick.base]` says otherwise.
pub const QUICK_WARMUP: &str = "200ms";
/// Crash point of a `--quick` crash_recover run unless the spec says otherwise.
pub const QUICK_CRASH_AFTER: Duration = Duration::from_secs(1);

/// Full runs or `--quick` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Full,
    Quick,
}

/// One point of the grid: a complete set of bench flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Position in the expansion (what sharding uses).
    pub index: usize,
    /// `axis=label` pairs joined by `,`; `base` for a spec without axes.
    pub id: String,
    /// Axis name and the label of its value, in axis order.
    pub axes: Vec<(String, String)>,
    /// Every flag of the run (base, then the axis values, then `--set` overrides).
    pub flags: Flags,
    pub mode: Mode,
    /// Hash of everything the run depends on (arguments and mode), 16 hex digits.
    pub hash: String,
}

impl Point {
    /// `nvmdb bench` arguments, without `--json` (the runner adds what it manages).
    pub fn args(&self) -> Vec<String> {
        flags_to_args(&self.flags)
    }

    /// The value of `key`: an axis label, else a flag's text.
    pub fn value(&self, key: &str) -> Option<String> {
        self.axes
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, label)| label.clone())
            .or_else(|| self.flags.get(key).map(|v| v.to_string()))
    }
}

/// `{"persist_latency": "1us", "eadr": true}` -> `--eadr --persist-latency 1us`.
pub fn flags_to_args(flags: &Flags) -> Vec<String> {
    let mut args = Vec::new();
    for (key, value) in flags {
        let flag = format!("--{}", key.replace('_', "-"));
        match value {
            FlagValue::Text(t) => {
                args.push(flag);
                args.push(t.clone());
            }
            FlagValue::Switch(true) => args.push(flag),
            FlagValue::Switch(false) => {}
            FlagValue::List(items) => {
                for item in items {
                    args.push(flag.clone());
                    args.push(item.clone());
                }
            }
        }
    }
    args
}

/// A `--set KEY=VALUE` that cannot be applied.
#[derive(Debug, thiserror::Error)]
#[error("--set {key}: {reason}")]
pub struct OverrideError {
    pub key: String,
    pub reason: String,
}

/// Parses `--set` options (`threads=12`, `eadr=true`, `engine_opt=a=1`).
pub fn parse_overrides(items: &[String]) -> Result<Flags, OverrideError> {
    let mut flags = Flags::new();
    for item in items {
        let Some((key, value)) = item.split_once('=') else {
            let reason = "expected KEY=VALUE".to_string();
            return Err(OverrideError { key: item.clone(), reason });
        };
        let key = crate::spec::normalize_key(key);
        if crate::spec::MANAGED_FLAGS.contains(&key.as_str()) {
            let reason = "the sweep sets this flag itself".to_string();
            return Err(OverrideError { key, reason });
        }
        let value = match value {
            "true" => FlagValue::Switch(true),
            "false" => FlagValue::Switch(false),
            v => FlagValue::Text(v.to_string()),
        };
        match (flags.get_mut(&key), value) {
            (Some(FlagValue::Text(first)), FlagValue::Text(second)) => {
                // Repeating a key makes a list, as repeating the bench flag would.
                let list = vec![first.clone(), second];
                flags.insert(key, FlagValue::List(list));
            }
            (Some(FlagValue::List(list)), FlagValue::Text(next)) => list.push(next),
            (_, value) => {
                flags.insert(key, value);
            }
        }
    }
    Ok(flags)
}

/// Everything that shapes an expansion besides the spec.
#[derive(Clone, Debug, Default)]
pub struct ExpandOptions {
    pub quick: bool,
    /// `--set` overrides of base flags.
    pub overrides: Flags,
}

impl ExpandOptions {
    pub fn scale(&self) -> Scale {
        if self.quick {
            Scale::Quick
        } else {
            Scale::Full
        }
    }
}

/// The points of `spec` and the repetitions of each.
pub fn expand(spec: &Spec, options: &ExpandOptions) -> Result<(Vec<Point>, u32), OverrideError> {
    let (base, axes, reps, mode) = effective(spec, options)?;
    let mut points = Vec::new();
    let total: usize = axes.iter().map(|a| a.values.len()).product();
    for index in 0..total {
        // Mixed-radix digits of `index`, last axis fastest.
        let mut rest = index;
        let mut picks = vec![0; axes.len()];
        for (i, axis) in axes.iter().enumerate().rev() {
            picks[i] = rest % axis.values.len();
            rest /= axis.values.len();
        }
        let mut flags = base.clone();
        let mut labels = Vec::new();
        for (axis, &pick) in axes.iter().zip(&picks) {
            let value = &axis.values[pick];
            flags.extend(value.flags.clone());
            labels.push((axis.name.clone(), value.label.clone()));
        }
        let id = if labels.is_empty() {
            "base".to_string()
        } else {
            labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
        };
        let hash = point_hash(&flags, mode);
        points.push(Point { index, id, axes: labels, flags, mode, hash });
    }
    Ok((points, reps))
}

type Effective = (Flags, Vec<Axis>, u32, Mode);

/// Base flags, axes, repetitions and mode after `--quick` and `--set`.
fn effective(spec: &Spec, options: &ExpandOptions) -> Result<Effective, OverrideError> {
    let mut base = spec.base.clone();
    let mut axes = spec.axes.clone();
    let mut reps = spec.reps;
    let mut mode = spec.mode;
    if options.quick {
        let timed = !base.contains_key("txns");
        if timed {
            base.insert("duration".into(), FlagValue::Text(QUICK_DURATION.into()));
            base.insert("warmup".into(), FlagValue::Text(QUICK_WARMUP.into()));
        }
        base.extend(spec.quick.base.clone());
        for quick_axis in &spec.quick.axes {
            if let Some(axis) = axes.iter_mut().find(|a| a.name == quick_axis.name) {
                *axis = quick_axis.clone();
            }
        }
        reps = spec.quick.reps.unwrap_or(1);
        if let Mode::CrashRecover { crash_after } = mode {
            let quick = spec.quick.crash_after.unwrap_or(crash_after.min(QUICK_CRASH_AFTER));
            mode = Mode::CrashRecover { crash_after: quick };
        }
    }
    for (key, value) in &options.overrides {
        if axes.iter().any(|a| a.name == *key || a.values.iter().any(|v| v.flags.contains_key(key)))
        {
            let reason = format!("`{key}` is set by the grid of spec `{}`", spec.name);
            return Err(OverrideError { key: key.clone(), reason });
        }
        if !spec.is_known_key(key) {
            let reason = "not an `nvmdb bench` flag".to_string();
            return Err(OverrideError { key: key.clone(), reason });
        }
        base.insert(key.clone(), value.clone());
    }
    Ok((base, axes, reps, mode))
}

/// The run timeout of a point: the spec's, else generous for loading plus the timed run.
pub fn timeout(spec: &Spec, point: &Point, scale: Scale) -> Duration {
    let configured = match scale {
        Scale::Quick => spec.quick.timeout.or(spec.timeout),
        Scale::Full => spec.timeout,
    };
    if let Some(t) = configured {
        return t;
    }
    let secs = |key: &str| {
        point
            .flags
            .get(key)
            .and_then(|v| units::parse_duration(&v.to_string(), units::BareTime::Seconds))
            .unwrap_or(Duration::from_secs(5))
    };
    let run = secs("duration") + secs("warmup");
    let crash = match point.mode {
        Mode::CrashRecover { crash_after } => crash_after,
        Mode::Run => Duration::ZERO,
    };
    // Loading a large TPC-C can take minutes; a hung run should still end.
    Duration::from_secs(300) + 4 * (run + crash)
}

/// FNV-1a over `parts` (each followed by a separator), 16 hex digits: stable across platforms
/// and compiler versions.
pub fn fnv_hex<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// FNV-1a over the arguments and the mode: stable across platforms and compiler versions.
fn point_hash(flags: &Flags, mode: Mode) -> String {
    let args = flags_to_args(flags);
    let mode: Vec<Vec<u8>> = match mode {
        Mode::Run => vec![b"run".to_vec()],
        Mode::CrashRecover { crash_after } => {
            vec![b"crash_recover".to_vec(), crash_after.as_nanos().to_le_bytes().to_vec()]
        }
    };
    fnv_hex(args.iter().map(String::as_bytes).chain(mode.iter().map(Vec::as_slice)))
}

/// `--shard i/n`: machine `i` of `n` (numbered from 1) runs every point whose index is
/// `i - 1` modulo `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 1.
    pub index: usize,
    pub count: usize,
}

/// Most shards: more than this is surely a typo.
pub const MAX_SHARDS: usize = 100_000;

impl Shard {
    pub fn parse(text: &str) -> Result<Shard, String> {
        let (i, n) = text.split_once('/').ok_or_else(|| format!("`{text}` is not i/n"))?;
        let i: usize = i.trim().parse().map_err(|_| format!("`{i}` is not a shard number"))?;
        let n: usize = n.trim().parse().map_err(|_| format!("`{n}` is not a shard count"))?;
        if n == 0 || n > MAX_SHARDS {
            return Err(format!("the shard count must be 1..={MAX_SHARDS}"));
        }
        if i == 0 || i > n {
            return Err(format!("shards are numbered 1..={n}, got {i}"));
        }
        Ok(Shard { index: i, count: n })
    }

    pub fn contains(&self, point: &Point) -> bool {
        point.index % self.count == self.index - 1
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn spec(extra: &str) -> Spec {
        let text = format!(
            r#"
            [spec]
            title = "t"
            source = "s"
            reps = 3
            [base]
            engine = "inplace"
            duration = "10s"
            [grid]
            workload = ["tpcb", "tpcc", "tatp"]
            persist_latency = ["0", "1us", "2us", "5us"]
            {extra}
            "#
        );
        Spec::parse(&text, Path::new("t.toml")).unwrap()
    }

    #[test]
    fn point_hashes_are_pinned() {
        // Results files key their runs by these: a changed hash would re-run every sweep.
        let text = |t: &str| FlagValue::Text(t.into());
        let flags: Flags =
            [("engine".into(), text("inplace")), ("persist_latency".into(), text("1us"))]
                .into_iter()
                .collect();
        assert_eq!(point_hash(&flags, Mode::Run), "fa8d444ab872f349");
        let flags: Flags = [("engine".into(), text("inplace"))].into_iter().collect();
        let crash = Mode::CrashRecover { crash_after: std::time::Duration::from_secs(2) };
        assert_eq!(point_hash(&flags, crash), "c023e8cc9176a8c1");
    }

    #[test]
    fn cartesian_product_in_order() {
        let (points, reps) = expand(&spec(""), &ExpandOptions::default()).unwrap();
        assert_eq!(reps, 3);
        assert_eq!(points.len(), 12);
        assert_eq!(points[0].id, "workload=tpcb,persist_latency=0");
        assert_eq!(points[1].id, "workload=tpcb,persist_latency=1us");
        assert_eq!(points[11].id, "workload=tatp,persist_latency=5us");
        let ids: std::collections::HashSet<_> = points.iter().map(|p| &p.id).collect();
        assert_eq!(ids.len(), 12);
        let hashes: std::collections::HashSet<_> = points.iter().map(|p| &p.hash).collect();
        assert_eq!(hashes.len(), 12);
        assert_eq!(
            points[5].args(),
            ["--duration", "10s", "--engine", "inplace", "--persist-latency", "1us"]
                .iter()
                .chain(&["--workload", "tpcc"])
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        );
        // Same spec, same expansion.
        assert_eq!(points, expand(&spec(""), &ExpandOptions::default()).unwrap().0);
    }

    #[test]
    fn quick_shortens() {
        let s =
            spec("[quick]\nbase = { scale = 1 }\ngrid = { persist_latency = [\"0\", \"5us\"] }");
        let opts = ExpandOptions { quick: true, ..Default::default() };
        let (points, reps) = expand(&s, &opts).unwrap();
        assert_eq!(reps, 1);
        assert_eq!(points.len(), 6);
        assert_eq!(points[0].flags["duration"], FlagValue::Text(QUICK_DURATION.into()));
        assert_eq!(points[0].flags["scale"], FlagValue::Text("1".into()));
        let full = expand(&s, &ExpandOptions::default()).unwrap().0;
        assert_ne!(points[0].hash, full[0].hash);
        assert_eq!(points[0].id, full[0].id);
    }

    #[test]
    fn overrides() {
        let s = spec("");
        let set = parse_overrides(&["threads=4".into()]).unwrap();
        let (points, _) = expand(&s, &ExpandOptions { quick: false, overrides: set }).unwrap();
        assert_eq!(points[0].flags["threads"], FlagValue::Text("4".into()));
        let set = parse_overrides(&["workload=ycsb".into()]).unwrap();
        assert!(expand(&s, &ExpandOptions { quick: false, overrides: set }).is_err());
        assert!(parse_overrides(&["json=true".into()]).is_err());
        let list = parse_overrides(&["engine_opt=a=1".into(), "engine_opt=b=2".into()]).unwrap();
        assert_eq!(list["engine_opt"], FlagValue::List(vec!["a=1".into(), "b=2".into()]));
    }

    #[test]
    fn shards_partition_the_points() {
        let (points, _) = expand(&spec(""), &ExpandOptions::default()).unwrap();
        for n in 1..=15 {
            let mut seen = vec![0; points.len()];
            for i in 1..=n {
                let shard = Shard::parse(&format!("{i}/{n}")).unwrap();
                for p in points.iter().filter(|p| shard.contains(p)) {
                    seen[p.index] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n = {n}: {seen:?}");
        }
        assert!(Shard::parse("0/4").is_err());
        assert!(Shard::parse("5/4").is_err());
        assert!(Shard::parse("1/0").is_err());
        assert!(Shard::parse("x").is_err());
    }
}

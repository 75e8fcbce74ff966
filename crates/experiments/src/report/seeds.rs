//! The seeds that run apart from `nvmdb sweep` (issue 36) in the report: persistency (Pelley's
//! thesis ch. VI–VIII, `nvmdb persistency sweep`), SSD query optimisation (ch. III, the
//! `queryopt-results` example) and data-centre power (app. A–B, the `dcpower-results` example).
//! Their models are not bench runs, so each command writes its claims and figures into its own
//! directory with a [`Manifest`] beside them; `nvmdb report --seed DIR` reads those and judges
//! every claim again from its numbers (ours as a range, the accepted interval) with
//! [`crate::verdict::judge`], the rule the specs' claims follow. Nothing a seed's file says in
//! words is taken as the verdict: only its numbers, its role (output, input, fitted) and whose
//! bound it is.
//!
//! Invariant: an input or a fitted constant is never counted as reproduced, and a differs or
//! inconclusive claim always prints a cause (the file's, else [`CAUSE_UNKNOWN`]).

use super::*;
use crate::analysis::CAUSE_UNKNOWN;
use crate::spec::Bound;
use crate::verdict::{self, Verdict as Rule};
use serde::Deserialize;
use serde_json::Value;

/// A manifest's file name ends so: `NAME.experiment.json` or `experiment.json`.
pub const MANIFEST_SUFFIX: &str = "experiment.json";

/// What a seed's command writes beside its claims so that `nvmdb report --seed DIR` can list
/// the experiment: where it comes from, how to run it again, its claims and figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// The seed it belongs to: the report's section (`persistency`, `query optimisation`).
    pub seed: String,
    pub name: String,
    pub title: String,
    pub source: String,
    #[serde(default)]
    pub description: String,
    /// The command that writes this directory again.
    pub command: String,
    /// The claims file, in the manifest's directory: an array of claims, each with ours as
    /// `ours_lo`/`ours_hi` and the accepted interval as `accept_lo`/`accept_hi` or `min`/`max`.
    pub claims: String,
    /// Figures (SVG) in the manifest's directory; a PNG of the same stem is linked beside.
    #[serde(default)]
    pub figures: Vec<String>,
    /// What ours ranges over where it is a range (`3 runs of the grid`, `trace seeds 1–3`);
    /// a claim's own `ours_range` replaces it for that claim.
    #[serde(default = "default_range")]
    pub ours_range: String,
    /// Written by a `--quick` run: its verdicts are not reproductions.
    #[serde(default)]
    pub quick: bool,
    /// What a reader must know before the numbers (an accounted model, a synthetic trace).
    #[serde(default)]
    pub notes: Vec<String>,
}

fn default_range() -> String {
    "repetitions".into()
}

impl Manifest {
    /// Writes the manifest as `dir/file`.
    pub fn write(&self, dir: &Path, file: &str) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(file), text + "\n")
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |error| ReportError::Io { path: path.to_path_buf(), error }
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> ReportError {
    let error = std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    ReportError::Io { path: path.to_path_buf(), error }
}

/// The experiments of the seed directory `dir`, in manifest-name order, with figure paths
/// relative to `out` (the report's directory).
pub fn load(dir: &Path, out: &Path) -> Result<Vec<SpecReport>, ReportError> {
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(is_manifest))
        .collect();
    manifests.sort();
    if manifests.is_empty() {
        return Err(corrupt(
            dir,
            format!(
                "no *{MANIFEST_SUFFIX}: not a seed's result directory (see docs/experiments.md)"
            ),
        ));
    }
    let mut out_specs = Vec::new();
    for path in manifests {
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| corrupt(&path, e))?;
        out_specs.push(experiment(dir, out, &m)?);
    }
    Ok(out_specs)
}

fn is_manifest(name: &str) -> bool {
    name == MANIFEST_SUFFIX || name.ends_with(&format!(".{MANIFEST_SUFFIX}"))
}

fn experiment(dir: &Path, out: &Path, m: &Manifest) -> Result<SpecReport, ReportError> {
    let path = dir.join(&m.claims);
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let raw: Vec<Value> = serde_json::from_str(&text).map_err(|e| corrupt(&path, e))?;
    let mut claims = Vec::new();
    for (i, v) in raw.iter().enumerate() {
        let c = claim(v, &m.ours_range)
            .ok_or_else(|| corrupt(&path, format!("claim {i} is not a claim")))?;
        claims.push(if m.quick {
            ClaimResult { verdict: c.verdict.clone().for_quick(), ..c }
        } else {
            c
        });
    }
    let mut notes = m.notes.clone();
    notes.push(format!("run apart from `nvmdb sweep`: `{}`", m.command));
    let mut figures = Vec::new();
    for svg in &m.figures {
        let svg_path = dir.join(svg);
        let dims = svg_size(&svg_path).unwrap_or((800, 600));
        let png_path = svg_path.with_extension("png");
        let png = if png_path.exists() { &png_path } else { &svg_path };
        figures.push((relative(out, &svg_path), relative(out, png), dims));
    }
    let status = if m.quick {
        format!("{QUICK_VERDICT}: written by its command with --quick")
    } else {
        "judged from the claims its command wrote".to_string()
    };
    Ok(SpecReport {
        name: m.name.clone(),
        title: m.title.clone(),
        source: m.source.clone(),
        description: m.description.clone(),
        needs: Vec::new(),
        status,
        points: PointCounts::default(),
        figures,
        claims,
        notes,
        quick: m.quick,
        provenance: Provenance::default(),
        seed: Some(m.seed.clone()),
    })
}

/// A number of a claims file. JSON has no infinity: serde writes a non-finite `f64` as null, so
/// a null where a number belongs is read by what the writer's verdict implies: "inconclusive"
/// (the rule's verdict on a NaN, and the writers' on any non-finite value) reads NaN, anything
/// else an unbounded value (persistency's path of 0: an infinite persist-bound rate).
fn number(v: &Value, key: &str, inconclusive: bool) -> Option<f64> {
    match v.get(key)? {
        Value::Null if inconclusive => Some(f64::NAN),
        Value::Null => Some(f64::INFINITY),
        x => x.as_f64(),
    }
}

/// An end of the accepted interval: absent or null is open.
fn end(v: &Value, keys: [&str; 2]) -> Option<f64> {
    keys.iter().find_map(|k| v.get(*k).and_then(Value::as_f64))
}

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn num_text(x: f64) -> String {
    if x.is_nan() {
        "not a number".into()
    } else if x.is_infinite() {
        "unbounded".into()
    } else {
        crate::units::format_number(x)
    }
}

/// The accepted interval in words: `0.017–0.068`, `≥ 1`, `≤ 1`.
fn accepted(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) if a == b => num_text(a),
        (Some(a), Some(b)) => format!("{}–{}", num_text(a), num_text(b)),
        (Some(a), None) => format!("≥ {}", num_text(a)),
        (None, Some(b)) => format!("≤ {}", num_text(b)),
        (None, None) => "any".into(),
    }
}

/// One claim of a seed's file, judged again from its numbers; `range` says what ours ranges
/// over (unless the claim's is over configurations, or the claim names its own `ours_range`).
pub fn claim(v: &Value, range: &str) -> Option<ClaimResult> {
    let own_range = text(v, "ours_range");
    let range = own_range.as_deref().unwrap_or(range);
    let file_verdict = text(v, "verdict").unwrap_or_default();
    let role = text(v, "role").unwrap_or_else(|| "output".into());
    let bound = match text(v, "bound").as_deref() {
        Some("ours") => Bound::Ours,
        _ => Bound::Paper,
    };
    let what = text(v, "text").or_else(|| text(v, "what"))?;
    let id = text(v, "id").unwrap_or_else(|| what.clone());
    let source = text(v, "source").unwrap_or_default();
    let paper = match v.get("paper") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.as_f64().map(num_text).unwrap_or_default(),
        _ => "–".into(),
    };
    let paper = if source.is_empty() { paper } else { format!("{paper} ({source})") };
    let (min, max) = (end(v, ["accept_lo", "min"]), end(v, ["accept_hi", "max"]));
    let inconclusive = file_verdict == "inconclusive";
    let ours = match (number(v, "ours_lo", inconclusive), number(v, "ours_hi", inconclusive)) {
        (Some(lo), Some(hi)) if file_verdict != "not_measured" => Some((lo, hi)),
        _ => None,
    };
    let file_cause = text(v, "cause").filter(|c| !c.trim().is_empty());
    let groups = text(v, "over").as_deref() == Some("groups");
    let class = match (role.as_str(), bound) {
        ("input" | "fitted", _) => Class::Input,
        (_, Bound::Ours) => Class::OurTolerance,
        (_, Bound::Paper) => Class::Paper,
    };
    let measured = match ours {
        Some((lo, hi)) if lo == hi || (lo.is_nan() && hi.is_nan()) => num_text(lo),
        Some((lo, hi)) => format!("{}–{}", num_text(lo), num_text(hi)),
        None => "–".into(),
    };
    let (verdict, cause) = match (class, ours) {
        (Class::Input, _) => {
            let name = if role == "fitted" { "fitted constant" } else { "input" };
            (Verdict::NotJudged(name.into()), file_cause)
        }
        (_, None) => (Verdict::NoData("the seed's run has no value for it".into()), file_cause),
        (_, Some((lo, hi))) => {
            let rule = verdict::judge(lo, hi, min, max);
            let rule = match rule {
                Rule::Inconclusive if groups && lo.is_finite() && hi.is_finite() => Rule::Differs,
                r => r,
            };
            match rule {
                Rule::Reproduced => (Verdict::Reproduced, None),
                Rule::Differs => {
                    (Verdict::Differs, Some(file_cause.unwrap_or_else(|| CAUSE_UNKNOWN.into())))
                }
                Rule::Inconclusive | Rule::NotJudged => {
                    let why = if lo.is_nan() || hi.is_nan() {
                        "ours is not a number".to_string()
                    } else {
                        format!("ours {measured} straddles the accepted {}", accepted(min, max))
                    };
                    let cause = file_cause.unwrap_or_else(|| format!("{why}; {CAUSE_UNKNOWN}"));
                    (Verdict::Inconclusive(why), Some(cause))
                }
            }
        }
    };
    let value = ours.map(|(lo, _)| lo).filter(|x| x.is_finite());
    let repetitions = ours.filter(|(lo, hi)| lo != hi).map(|_| {
        let over = if groups { "configurations (each must agree)" } else { range };
        format!("range over {over}")
    });
    Some(ClaimResult {
        id,
        text: what,
        source,
        paper,
        measured,
        value,
        verdict,
        bound,
        bound_reason: None,
        class,
        accepted: accepted(min, max),
        cause,
        repetitions,
        normalized: Vec::new(),
        normalized_text: None,
    })
}

/// The `width` and `height` of an SVG's root element, to show the figure at its native size.
fn svg_size(path: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(path).ok()?;
    let root = &text[text.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let attr = |name: &str| -> Option<u32> {
        let at = root.find(&format!(" {name}=\""))? + name.len() + 3;
        let rest = &root[at..];
        rest[..rest.find('"')?].trim_end_matches("px").parse::<f64>().ok().map(|v| v as u32)
    };
    Some((attr("width")?, attr("height")?))
}

/// `target` relative to the directory `from` (`../persistency/x.svg`), with `/` separators so
/// that a Markdown or HTML link works; the absolute path when they share no root.
pub fn relative(from: &Path, target: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, target) = (abs(from), abs(target));
    let a: Vec<_> = from.components().collect();
    let b: Vec<_> = target.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return target.display().to_string();
    }
    let mut parts: Vec<String> = vec!["..".into(); a.len() - common];
    parts.extend(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    parts.join("/")
}

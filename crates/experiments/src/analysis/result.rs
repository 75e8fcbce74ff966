//! What a claim's evaluation says ([`super::evaluate`]): the verdict, the class a claim is
//! reported under (the paper's bound, ours, an implementation check), and the words every page
//! prints for them. Apart from the evaluation so that the pages and `verdicts.json` read one
//! small type.

use super::*;

/// The verdict on one claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    Reproduced,
    Differs,
    /// The measurements do not settle the claim; the reason says why (the repetitions straddle
    /// the bound, or the crossing lies outside the measured range where the bound partly lies).
    Inconclusive(String),
    NotRunnable(String),
    NoData(String),
    /// Judged on `--quick` runs (short, reduced grid, one repetition): never a reproduction,
    /// whatever the numbers say. The reason says which way they point.
    Quick(String),
    /// An input or a fitted constant of a seed's model ([`crate::verdict::Role`]): what we put
    /// in, never judged; the reason names which.
    NotJudged(String),
}

/// The verdict text of every claim judged on `--quick` runs.
pub const QUICK_VERDICT: &str = "quick: not a reproduction";

/// The cause printed beside a "differs" that neither the spec's `why` nor the measurement
/// explains: said plainly rather than left blank.
pub const CAUSE_UNKNOWN: &str = "cause not established";

impl Verdict {
    /// The verdict of a claim whose numbers come from `--quick` runs: agreeing or not, it is
    /// not a reproduction. Claims that could not be computed keep saying why.
    pub fn for_quick(self) -> Verdict {
        match self {
            Verdict::Reproduced => Verdict::Quick("in the paper's range".into()),
            Verdict::Differs => Verdict::Quick("outside the paper's range".into()),
            Verdict::Inconclusive(r) => Verdict::Quick(format!("inconclusive: {r}")),
            other => other,
        }
    }

    pub fn label(&self) -> String {
        match self {
            Verdict::Reproduced => "reproduced".into(),
            Verdict::Differs => "differs".into(),
            Verdict::Inconclusive(_) => "inconclusive".into(),
            Verdict::Quick(r) => format!("{QUICK_VERDICT} ({r})"),
            Verdict::NotRunnable(r) => format!("not yet runnable: {r}"),
            Verdict::NoData(r) => format!("no data: {r}"),
            Verdict::NotJudged(r) => format!("not judged: {r}"),
        }
    }

    pub(super) fn from_missing(m: Missing) -> Verdict {
        match m {
            Missing::NotRunnable(r) => Verdict::NotRunnable(r),
            Missing::NoData(r) => Verdict::NoData(r),
        }
    }

    /// Whether the numbers were judged against the bound (agreeing or not).
    pub(super) fn judged(&self) -> bool {
        matches!(self, Verdict::Reproduced | Verdict::Differs)
    }
}

/// Where a claim is reported: only a paper claim with the paper's bound can be a reproduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The paper's claim against the paper's number.
    Paper,
    /// The paper's claim against an interval we chose (`bound = "ours"`): reported apart.
    OurTolerance,
    /// Not a paper claim (`role = "check"`): an implementation check.
    Check,
    /// An input or fitted constant of a seed's model, beside the paper's number it restates or
    /// was fitted to: listed apart, never a reproduction.
    Input,
}

impl Class {
    pub fn of(claim: &ClaimSpec) -> Class {
        match (claim.role, claim.bound) {
            (Role::Check, _) => Class::Check,
            (Role::Reproduction, Bound::Ours) => Class::OurTolerance,
            (Role::Reproduction, Bound::Paper) => Class::Paper,
        }
    }
}

/// A claim with the paper's value, ours, and the verdict.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimResult {
    pub id: String,
    pub text: String,
    pub source: String,
    pub paper: String,
    pub measured: String,
    /// The number judged (the aggregate), if there is one.
    pub value: Option<f64>,
    pub verdict: Verdict,
    /// Whether the accepted interval is the paper's number or ours, and why ours.
    pub bound: Bound,
    pub bound_reason: Option<String>,
    /// Paper claim, our tolerance, or implementation check.
    pub class: Class,
    /// The interval a value must fall in to agree (`1.13–1.88×`, `≥ 5 µs`).
    pub accepted: String,
    /// Why the claim differs or is inconclusive: the measured reason, else the spec's `why`.
    pub cause: Option<String>,
    /// The claim's statistic computed on each repetition alone (`0.48–1.26× over 3
    /// repetitions`), when there are several.
    pub repetitions: Option<String>,
    /// A break-even on a latency axis divided by the time a transaction takes
    /// ([`crate::latency_axis`]), each group's.
    pub normalized: Vec<crate::latency_axis::Normalized>,
    /// The same in words, shown beside the measured value.
    pub normalized_text: Option<String>,
}

impl ClaimResult {
    /// The paper's value, with "bound ours: why" when the interval judged is ours.
    pub fn paper_with_bound(&self) -> String {
        match (self.bound, &self.bound_reason) {
            (Bound::Ours, Some(why)) => format!("{} [bound ours: {why}]", self.paper),
            (Bound::Ours, None) => format!("{} [bound ours]", self.paper),
            (Bound::Paper, _) => self.paper.clone(),
        }
    }

    /// The measured value, with the normalised break-evens beside it where there are some.
    pub fn measured_text(&self) -> String {
        match &self.normalized_text {
            Some(n) => format!("{}; {n}", self.measured),
            None => self.measured.clone(),
        }
    }

    /// The verdict in the words of the claim's class: only a paper claim "reproduces"; ours
    /// is "within our tolerance", a check "passes".
    pub fn verdict_label(&self) -> String {
        match (self.class, &self.verdict) {
            (Class::OurTolerance, Verdict::Reproduced) => "within our tolerance".into(),
            (Class::OurTolerance, Verdict::Differs) => "outside our tolerance".into(),
            (Class::Check, Verdict::Reproduced) => "check passes".into(),
            (Class::Check, Verdict::Differs) => "check fails".into(),
            (_, v) => v.label(),
        }
    }

    /// The verdict, the accepted interval and, for a "differs" or "inconclusive", the cause:
    /// `differs (accepted 1.13–1.88×) — cause: ...`.
    pub fn verdict_text(&self) -> String {
        let mut t = self.verdict_label();
        if matches!(self.verdict, Verdict::Reproduced | Verdict::Differs | Verdict::Inconclusive(_))
        {
            t.push_str(&format!(" (accepted {})", self.accepted));
        }
        if let Some(c) = &self.cause {
            t.push_str(&format!(" — cause: {c}"));
        }
        t
    }
}

//! The verdict rules of issue 38, in one place: the report's claims ([`crate::analysis`]), the
//! appendices' numbers (`dcpower`, thesis app. A §A.4 and app. B §B.5), thesis ch. III
//! (`queryopt`, §3.3–§3.4) and the persistency specs (`persistency`, thesis §8.2) are judged by
//! these functions. A claim is an *output* (something the model, the simulator or the operators
//! compute), an *input* (a constant we took from the paper, or a property of a trace we
//! generated to match it) or a *fitted* constant (chosen so that an output matches the paper).
//! Only outputs get a verdict: an input or a fitted constant that "matches" the paper restates
//! what we put in, so it is listed apart and never counted as reproduced. A bound is the
//! paper's (its own threshold, or the precision it prints a number with) or ours (a tolerance
//! we chose, reported apart). Ours is a range (over repetitions, seeds or configurations); a
//! range inside the bound is reproduced, one wholly outside differs, one straddling it is
//! inconclusive ([`judge`], [`of_repetitions`]), and every "differs" or "inconclusive" must
//! carry its cause ([`check`]).

use serde::Serialize;

/// A claim set that breaks the rules (a "differs" without its cause).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RuleError(pub String);

/// The one rule: ours, the range `[lo, hi]`, against the accepted `[min, max]` (an absent end
/// is open). All of it inside is reproduced, all of it outside differs, a range across an end
/// is inconclusive. Infinite values are judged like any other (an unbounded break-even is
/// above every finite maximum); a NaN, in ours or in the bound, settles nothing.
pub fn judge(lo: f64, hi: f64, min: Option<f64>, max: Option<f64>) -> Verdict {
    let nan = |x: Option<f64>| x.is_some_and(f64::is_nan);
    if lo.is_nan() || hi.is_nan() || nan(min) || nan(max) {
        return Verdict::Inconclusive;
    }
    let below = |x: f64| min.is_some_and(|m| x < m);
    let above = |x: f64| max.is_some_and(|m| x > m);
    if !below(lo) && !above(hi) {
        Verdict::Reproduced
    } else if below(hi) || above(lo) {
        Verdict::Differs
    } else {
        Verdict::Inconclusive
    }
}

/// The same rule on a claim judged one repetition at a time, where a repetition's statistic
/// is not always a number (a crossing outside the measured range): `agree` of `n` repetitions
/// fall inside the bound. All of them is reproduced, none differs, some is inconclusive (the
/// repetitions straddle the bound); no repetition judged is inconclusive. (Repetitions below
/// and above the bound, none inside, differ here; as a range [`judge`] calls them inconclusive.)
pub fn of_repetitions(agree: usize, n: usize) -> Verdict {
    if n == 0 || (agree > 0 && agree < n) {
        Verdict::Inconclusive
    } else if agree == n {
        Verdict::Reproduced
    } else {
        Verdict::Differs
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Output,
    Input,
    Fitted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    Paper,
    Ours,
}

/// What ours ranges over, so that a reader re-judging a claims file ([`crate::report`]) applies
/// the rule its writer did: a range over repetitions (or trace seeds) of one configuration
/// straddling the bound is inconclusive; over groups (configurations that must each agree) it
/// differs ([`Claim::groups`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Over {
    Repetitions,
    Groups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Reproduced,
    Differs,
    Inconclusive,
    /// Inputs and fitted constants: not judged.
    NotJudged,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Differs => "differs",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// One number the paper states, and ours.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    pub what: &'static str,
    pub source: &'static str,
    pub role: Role,
    pub bound: Bound,
    pub paper: f64,
    /// Ours: the lowest and highest value over the repetitions (equal for the model).
    pub ours_lo: f64,
    pub ours_hi: f64,
    /// The accepted interval [lo, hi].
    pub accept_lo: f64,
    pub accept_hi: f64,
    pub over: Over,
    pub verdict: Verdict,
    /// Why it differs or is inconclusive (empty when reproduced); what an input restates.
    pub cause: String,
}

impl Claim {
    /// A claim judged on `ours` (a range over repetitions) against [lo, hi].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        what: &'static str,
        source: &'static str,
        role: Role,
        bound: Bound,
        paper: f64,
        ours: &[f64],
        accept: (f64, f64),
        cause: impl Into<String>,
    ) -> Claim {
        let lo = ours.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = ours.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let verdict = if role != Role::Output {
            Verdict::NotJudged
        } else if ours.is_empty() || ours.iter().any(|v| !v.is_finite()) {
            Verdict::Inconclusive
        } else {
            judge(lo, hi, Some(accept.0), Some(accept.1))
        };
        let cause = if verdict == Verdict::Reproduced { String::new() } else { cause.into() };
        Claim {
            what,
            source,
            role,
            bound,
            paper,
            ours_lo: lo,
            ours_hi: hi,
            accept_lo: accept.0,
            accept_hi: accept.1,
            over: Over::Repetitions,
            verdict,
            cause,
        }
    }

    /// A claim over groups (configurations, not repetitions): every group must agree, so one
    /// group outside the bound makes it differ, whatever the others do.
    #[allow(clippy::too_many_arguments)]
    pub fn groups(
        what: &'static str,
        source: &'static str,
        role: Role,
        bound: Bound,
        paper: f64,
        ours: &[f64],
        accept: (f64, f64),
        cause: impl Into<String>,
    ) -> Claim {
        let mut c = Claim::new(what, source, role, bound, paper, ours, accept, cause);
        c.over = Over::Groups;
        if c.verdict == Verdict::Inconclusive
            && !ours.is_empty()
            && ours.iter().all(|v| v.is_finite())
        {
            c.verdict = Verdict::Differs;
        }
        c
    }

    /// Counted among the reproduced results: an output, inside the paper's own bound.
    pub fn counts_as_reproduced(&self) -> bool {
        self.role == Role::Output
            && self.bound == Bound::Paper
            && self.verdict == Verdict::Reproduced
    }
}

/// The paper prints `paper` to `digits` decimals (of the fraction): its precision is its bound.
pub fn printed(paper: f64, digits: i32) -> (f64, f64) {
    let half = 0.5 * 10f64.powi(-digits);
    (paper - half, paper + half)
}

/// Rejects a claim set that breaks the rules: a differs / inconclusive without its cause, an
/// input without what it restates.
pub fn check(claims: &[Claim]) -> Result<(), RuleError> {
    for c in claims {
        let needs_cause =
            matches!(c.verdict, Verdict::Differs | Verdict::Inconclusive) || c.role != Role::Output;
        if needs_cause && c.cause.trim().is_empty() {
            return Err(RuleError(format!(
                "claim \"{}\" is {} without a cause",
                c.what,
                c.verdict.name()
            )));
        }
    }
    Ok(())
}

/// Counts: reproduced (paper bound), differs, inconclusive, within our tolerance, inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub reproduced: usize,
    pub differs: usize,
    pub inconclusive: usize,
    pub ours_reproduced: usize,
    pub ours_differs_or_inconclusive: usize,
    pub inputs_and_fitted: usize,
}

pub fn summary(claims: &[Claim]) -> Summary {
    let mut s = Summary::default();
    for c in claims {
        match (c.role, c.bound, c.verdict) {
            (Role::Input | Role::Fitted, _, _) => s.inputs_and_fitted += 1,
            (_, Bound::Ours, Verdict::Reproduced) => s.ours_reproduced += 1,
            (_, Bound::Ours, _) => s.ours_differs_or_inconclusive += 1,
            (_, _, Verdict::Reproduced) => s.reproduced += 1,
            (_, _, Verdict::Inconclusive | Verdict::NotJudged) => s.inconclusive += 1,
            (_, _, Verdict::Differs) => s.differs += 1,
        }
    }
    s
}

fn num(v: f64) -> String {
    if !v.is_finite() {
        format!("{v}")
    } else if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn ours(c: &Claim) -> String {
    if (c.ours_hi - c.ours_lo).abs() <= 1e-12 * c.ours_hi.abs().max(1.0) {
        num(c.ours_lo)
    } else {
        format!("{}–{}", num(c.ours_lo), num(c.ours_hi))
    }
}

/// The claims as text: outputs on the paper's bound (the only ones counted), outputs on our
/// tolerance, then inputs and fitted constants, each line with the accepted interval and cause.
pub fn text(claims: &[Claim]) -> String {
    let mut s = String::new();
    let s_ = summary(claims);
    s += &format!(
        "Summary: {} reproduced, {} differ, {} inconclusive (outputs, paper's bound); \
         our tolerance: {} within, {} not; {} inputs / fitted constants (never counted)\n",
        s_.reproduced,
        s_.differs,
        s_.inconclusive,
        s_.ours_reproduced,
        s_.ours_differs_or_inconclusive,
        s_.inputs_and_fitted
    );
    type Keep = fn(&Claim) -> bool;
    let sections: [(&str, Keep); 3] = [
        ("Outputs, judged on the paper's bound", |c| {
            c.role == Role::Output && c.bound == Bound::Paper
        }),
        ("Outputs, judged on our tolerance (reported apart, not counted)", |c| {
            c.role == Role::Output && c.bound == Bound::Ours
        }),
        ("Inputs and fitted constants (what we put in; not outputs, never reproduced)", |c| {
            c.role != Role::Output
        }),
    ];
    for (title, keep) in sections {
        let group: Vec<&Claim> = claims.iter().filter(|c| keep(c)).collect();
        if group.is_empty() {
            continue;
        }
        s += &format!("\n{title}:\n");
        for c in group {
            let tag = match c.role {
                Role::Output => c.verdict.name(),
                Role::Input => "input",
                Role::Fitted => "fitted",
            };
            s += &format!(
                "  [{tag}] {} ({}): paper {}, ours {}, accepted [{}, {}]\n",
                c.what,
                c.source,
                num(c.paper),
                ours(c),
                num(c.accept_lo),
                num(c.accept_hi)
            );
            if !c.cause.is_empty() {
                s += &format!("      cause: {}\n", c.cause);
            }
        }
    }
    s
}

/// Merges the claims of repeated runs (the same grid): ours becomes the range over the
/// repetitions, and a claim whose repetitions reach different verdicts is inconclusive, its
/// cause naming the split and `noise`, what moves it across the bound (queryopt: "this
/// machine's CPU time, added to the modelled I/O").
pub fn merge(reps: &[Vec<Claim>], noise: &str) -> Vec<Claim> {
    let Some(first) = reps.first() else { return Vec::new() };
    first
        .iter()
        .map(|c| {
            let same: Vec<&Claim> =
                reps.iter().filter_map(|r| r.iter().find(|x| x.what == c.what)).collect();
            let mut m = c.clone();
            m.ours_lo = same.iter().map(|x| x.ours_lo).fold(f64::INFINITY, f64::min);
            m.ours_hi = same.iter().map(|x| x.ours_hi).fold(f64::NEG_INFINITY, f64::max);
            if same.len() != reps.len() {
                m.verdict = Verdict::Inconclusive;
                m.cause = format!(
                    "judged in only {} of {} repetitions; {}",
                    same.len(),
                    reps.len(),
                    c.cause
                );
            } else if same.iter().any(|x| x.verdict != c.verdict) {
                let names: Vec<&str> = same.iter().map(|x| x.verdict.name()).collect();
                let cause = same.iter().map(|x| x.cause.as_str()).find(|s| !s.is_empty());
                m.verdict = Verdict::Inconclusive;
                m.cause = format!(
                    "the {} repetitions disagree ({}): {noise} moves it across the bound; {}",
                    reps.len(),
                    names.join(", "),
                    cause.unwrap_or("")
                );
            } else if m.verdict != Verdict::Reproduced {
                m.cause = same.iter().map(|x| x.cause.as_str()).collect::<Vec<_>>().join(" | ");
                if same.iter().all(|x| x.cause == c.cause) {
                    m.cause = c.cause.clone();
                }
            }
            m
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! The rule on hand-made ranges; its users' tests (dcpower, queryopt, persistency, the
    //! report's `tests/verdicts.rs`) check it on their own claims.
    use super::*;

    /// Guards the two forms of the rule drifting apart: judging a range of numbers at once
    /// and counting the repetitions inside one by one must give one verdict (except for a
    /// range across both ends, see [`of_repetitions`]).
    #[test]
    fn a_range_and_its_repetitions_one_by_one_get_one_verdict() {
        let bound = (Some(1.0), Some(2.0));
        for ours in [[1.2, 1.8], [2.5, 3.0], [0.1, 0.2], [0.5, 1.5], [1.5, 2.5]] {
            let inside = ours
                .iter()
                .filter(|v| judge(**v, **v, bound.0, bound.1) == Verdict::Reproduced)
                .count();
            assert_eq!(judge(ours[0], ours[1], bound.0, bound.1), of_repetitions(inside, 2));
        }
        assert_eq!(of_repetitions(0, 0), Verdict::Inconclusive);
    }

    #[test]
    fn open_ends_infinities_and_nan() {
        assert_eq!(judge(f64::INFINITY, f64::INFINITY, Some(1.0), None), Verdict::Reproduced);
        assert_eq!(judge(f64::INFINITY, f64::INFINITY, None, Some(24.0)), Verdict::Differs);
        assert_eq!(judge(f64::NAN, 1.0, Some(0.0), None), Verdict::Inconclusive);
        assert_eq!(judge(1.0, 1.0, None, Some(f64::NAN)), Verdict::Inconclusive);
    }
}

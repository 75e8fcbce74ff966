//! What a crash campaign found: one iteration's [`Outcome`] and the campaign's [`Summary`]
//! (violations by kind, recovery times, crash-window coverage; docs/design.md §2, §7).

use super::*;

/// What one iteration found.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub index: u64,
    /// The crash point was reached (an image was cut).
    pub reached: bool,
    /// Acks recorded before the cut (all verified).
    pub acks: u64,
    /// Wall time of each recovery that was verified, in milliseconds.
    pub recovery_ms: Vec<f64>,
    /// Crashes taken inside recovery.
    pub recovery_crashes: u32,
    pub violations: Vec<Violation>,
    pub phase: Option<Phase>,
    /// The crash point was aimed at a structural event of the run.
    pub aimed: bool,
    /// What the engine did between the start of the run that was cut and the cut.
    pub window: Option<EngineCounters>,
    /// The cut image was checked by [`SimTarget::image_check`] (it applied and could run).
    pub image_checked: bool,
}

/// A campaign's totals.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub iterations: u64,
    /// Iterations whose crash point was reached and verified.
    pub crashes: u64,
    /// Iterations whose crash point lay past the end of their run.
    pub unreached: u64,
    pub recovery_crashes: u64,
    pub acks_verified: u64,
    /// Failed checks (an iteration may fail several).
    pub violations: u64,
    /// Iterations with at least one violation.
    pub failed_iterations: u64,
    pub violations_by_kind: BTreeMap<ViolationKind, u64>,
    /// The first [`MAX_KEPT_VIOLATIONS`] violations, in iteration order.
    pub kept: Vec<Violation>,
    /// Every verified recovery's wall time in milliseconds, sorted (after [`Summary::finish`]).
    pub recovery_ms: Vec<f64>,
    /// The dry run's span on the first base (simulated crashes).
    pub span: Option<Span>,
    /// The format-and-load span that load crashes are drawn from.
    pub load_span: Option<Span>,
    /// Transactions per thread that aged each base before its crash windows.
    pub ages: Vec<u64>,
    /// Crash points reached while formatting and loading.
    pub load_crashes: u64,
    /// Crash points reached that were aimed at a structural event.
    pub aimed_crashes: u64,
    /// Cut images [`SimTarget::image_check`] checked.
    pub images_checked: u64,
    /// Reached crash windows whose engine reported counters.
    pub windows: u64,
    /// Events inside the crash windows, summed.
    pub coverage: EngineCounters,
    /// Per kind of event, the crash windows that held at least one.
    pub windows_with: EngineCounters,
    pub elapsed: Duration,
    pub(super) kept_order: Vec<(u64, Violation)>,
}

impl Summary {
    pub fn add(&mut self, outcome: &Outcome) {
        self.iterations += 1;
        if outcome.reached {
            self.crashes += 1;
            if outcome.phase == Some(Phase::Load) {
                self.load_crashes += 1;
            }
            self.aimed_crashes += u64::from(outcome.aimed);
            self.images_checked += u64::from(outcome.image_checked);
            if let Some(w) = &outcome.window {
                self.windows += 1;
                self.coverage = self.coverage.plus(w);
                let any = |n: u64| u64::from(n > 0);
                let hit = EngineCounters {
                    splits: any(w.splits),
                    merges: any(w.merges),
                    heap_growths: any(w.heap_growths),
                    page_frees: any(w.page_frees),
                    deletes: any(w.deletes),
                    commits: any(w.commits),
                };
                self.windows_with = self.windows_with.plus(&hit);
            }
        } else if outcome.violations.is_empty() {
            self.unreached += 1;
        }
        self.recovery_crashes += u64::from(outcome.recovery_crashes);
        self.acks_verified += outcome.acks * (outcome.recovery_ms.len() as u64).min(1);
        self.recovery_ms.extend_from_slice(&outcome.recovery_ms);
        if !outcome.violations.is_empty() {
            self.failed_iterations += 1;
        }
        for v in &outcome.violations {
            self.violations += 1;
            *self.violations_by_kind.entry(v.kind).or_insert(0) += 1;
            self.kept_order.push((outcome.index, v.clone()));
        }
        // Keep the earliest iterations' violations, whatever order the jobs finish in.
        if self.kept_order.len() > 2 * MAX_KEPT_VIOLATIONS {
            self.kept_order.sort_by_key(|(i, _)| *i);
            self.kept_order.truncate(MAX_KEPT_VIOLATIONS);
        }
    }

    /// Sorts what needs sorting; call once all outcomes are in.
    pub fn finish(&mut self) {
        self.kept_order.sort_by_key(|(i, _)| *i);
        self.kept_order.truncate(MAX_KEPT_VIOLATIONS);
        self.kept = self.kept_order.iter().map(|(_, v)| v.clone()).collect();
        self.recovery_ms.sort_by(f64::total_cmp);
    }

    /// Median recovery time (nearest rank), 0 if nothing recovered.
    pub fn recovery_ms_p50(&self) -> f64 {
        match self.recovery_ms.len() {
            0 => 0.0,
            n => self.recovery_ms[(n - 1) / 2],
        }
    }

    pub fn recovery_ms_max(&self) -> f64 {
        self.recovery_ms.last().copied().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_counts_and_percentiles() {
        let mut s = Summary::default();
        let violation = Violation {
            kind: ViolationKind::Durability,
            crash: "c".into(),
            replay: None,
            message: "m".into(),
        };
        s.add(&Outcome {
            index: 1,
            reached: true,
            acks: 3,
            recovery_ms: vec![2.0, 1.0],
            window: Some(EngineCounters { splits: 2, commits: 3, ..Default::default() }),
            ..Default::default()
        });
        s.add(&Outcome { index: 0, reached: false, ..Default::default() });
        s.add(&Outcome {
            index: 2,
            reached: true,
            recovery_ms: vec![3.0],
            violations: vec![
                violation.clone(),
                Violation { kind: ViolationKind::Integrity, ..violation },
            ],
            ..Default::default()
        });
        s.finish();
        assert_eq!((s.iterations, s.crashes, s.unreached), (3, 2, 1));
        assert_eq!((s.violations, s.failed_iterations, s.acks_verified), (2, 1, 3));
        assert_eq!(s.violations_by_kind[&ViolationKind::Durability], 1);
        assert_eq!((s.recovery_ms_p50(), s.recovery_ms_max()), (2.0, 3.0));
        assert_eq!(s.kept.len(), 2);
        assert_eq!((s.windows, s.coverage.splits, s.coverage.commits), (1, 2, 3));
        assert_eq!((s.windows_with.splits, s.windows_with.merges), (1, 0));
    }
}

//! TATP's inputs over 100,000 draws: the 35/10/35/2/14/2/2 mix within 1 point, subscriber ids
//! non-uniform (NURand with the spec's A) and in range, and `txn` running one type alone.

use workloads::tatp::{SubscriberDistribution, Tatp, TatpConfig, TatpInput, TatpTxn};

const DRAWS: usize = 100_000;

#[test]
fn standard_mix() {
    let w = Tatp::new(TatpConfig::default()).unwrap();
    let mut inputs = w.inputs(0, 5);
    let mut kinds = [0usize; 7];
    for _ in 0..DRAWS {
        let input = inputs.next_input();
        kinds[TatpTxn::ALL.iter().position(|t| *t == input.txn()).unwrap()] += 1;
        if let TatpInput::GetNewDestination { start_time, end_time, sf_type, .. } = input {
            assert!([0, 8, 16].contains(&start_time));
            assert!((1..=24).contains(&end_time) && (1..=4).contains(&sf_type));
        }
    }
    let expected = [0.35, 0.10, 0.35, 0.02, 0.14, 0.02, 0.02];
    for ((t, n), p) in TatpTxn::ALL.iter().zip(kinds).zip(expected) {
        let share = n as f64 / DRAWS as f64;
        assert!((share - p).abs() < 0.01, "{}: {share:.4}, expected {p}", t.name());
    }
}

/// Pearson's chi-square of counts (index 1..) against `pmf` (index 0..), and its critical value
/// at p ~ 1e-4 (Wilson-Hilferty).
fn chi_square(counts: &[u64], pmf: &[f64]) -> (f64, f64) {
    let total: u64 = counts.iter().sum();
    let stat: f64 = counts
        .iter()
        .zip(pmf)
        .map(|(c, p)| (*c as f64 - p * total as f64).powi(2) / (p * total as f64))
        .sum();
    let k = (pmf.len() - 1) as f64;
    (stat, k * (1.0 - 2.0 / (9.0 * k) + 3.72 * (2.0 / (9.0 * k)).sqrt()).powi(3))
}

#[test]
fn subscriber_ids_follow_nurand() {
    // NURand(65535, 1, P) for P = 1000, exactly: every (r1, r2) pair is equally likely.
    let p = 1_000u64;
    let mut pmf = vec![0.0; p as usize];
    for r1 in 0..=65_535u64 {
        for r2 in 1..=p {
            pmf[((r1 | r2) % p) as usize] += 1.0;
        }
    }
    let pairs = 65_536.0 * p as f64;
    pmf.iter_mut().for_each(|x| *x /= pairs);
    let cfg = TatpConfig { subscribers: p, ..TatpConfig::default() };
    let mut inputs = Tatp::new(cfg).unwrap().inputs(0, 9);
    let mut counts = vec![0u64; p as usize];
    for _ in 0..DRAWS {
        let s = inputs.subscriber();
        assert!((1..=p).contains(&s));
        counts[(s - 1) as usize] += 1;
    }
    let (stat, critical) = chi_square(&counts, &pmf);
    assert!(stat < critical, "non-uniform ids: chi-square {stat:.0} > {critical:.0}");
    // ... and they are far from uniform.
    let uniform = vec![1.0 / p as f64; p as usize];
    let (stat, critical) = chi_square(&counts, &uniform);
    assert!(stat > 10.0 * critical, "NURand ids look uniform: chi-square {stat:.0}");

    let cfg = TatpConfig {
        subscribers: p,
        distribution: SubscriberDistribution::Uniform,
        ..TatpConfig::default()
    };
    let mut inputs = Tatp::new(cfg).unwrap().inputs(0, 9);
    let mut counts = vec![0u64; p as usize];
    for _ in 0..DRAWS {
        counts[(inputs.subscriber() - 1) as usize] += 1;
    }
    let (stat, critical) = chi_square(&counts, &uniform);
    assert!(stat < critical, "uniform ids: chi-square {stat:.0} > {critical:.0}");
}

#[test]
fn nurand_a_scales_with_population() {
    let a = |subscribers| TatpConfig { subscribers, ..TatpConfig::default() }.nurand_a();
    assert_eq!(a(1_000_000), 65_535);
    assert_eq!(a(1_000_001), 1_048_575);
    assert_eq!(a(10_000_001), 2_097_151);
}

#[test]
fn update_location_alone() {
    let cfg = TatpConfig { txn: Some(TatpTxn::UpdateLocation), ..TatpConfig::default() };
    let mut inputs = Tatp::new(cfg).unwrap().inputs(0, 1);
    assert!((0..1_000).all(|_| inputs.next_input().txn() == TatpTxn::UpdateLocation));
    assert_eq!(TatpTxn::parse("update-location"), Ok(TatpTxn::UpdateLocation));
    assert!(TatpTxn::parse("update_location").is_err());
}

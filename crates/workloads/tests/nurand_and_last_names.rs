//! TPC-C's NURand (§2.1.6) draws with its exact distribution (computed by enumerating every
//! pair of uniform draws), its proportions over deciles are within 1 point over 100,000 draws,
//! and the last-name generator (§4.3.2.3) builds names from the spec's syllables.

use workloads::generators::{nurand, WorkerRng};
use workloads::tpcc::schema::{last_name, last_name_string};
use workloads::tpcc::{customer_id, run_last_name_number, C_CUSTOMER_ID, C_LAST_RUN};

const DRAWS: usize = 100_000;

/// The exact pmf of NURand(a, c, x, y): every (r1, r2) pair is equally likely.
fn exact(a: u64, c: u64, x: u64, y: u64) -> Vec<f64> {
    let n = (y - x + 1) as usize;
    let mut pmf = vec![0.0; n];
    let pairs = ((a + 1) * (y - x + 1)) as f64;
    for r1 in 0..=a {
        for r2 in x..=y {
            pmf[((((r1 | r2) + c) % (y - x + 1)) + x - x) as usize] += 1.0 / pairs;
        }
    }
    pmf
}

fn chi_square(counts: &[u64], pmf: &[f64]) -> (f64, usize) {
    let total: u64 = counts.iter().sum();
    let mut stat = 0.0;
    let mut bins = 0;
    for (c, p) in counts.iter().zip(pmf) {
        let e = p * total as f64;
        if e > 0.0 {
            stat += (*c as f64 - e).powi(2) / e;
            bins += 1;
        } else {
            assert_eq!(*c, 0, "drew a value of probability zero");
        }
    }
    (stat, bins - 1)
}

/// Critical value at p ~ 1e-4 (Wilson-Hilferty).
fn critical(df: usize) -> f64 {
    let k = df as f64;
    k * (1.0 - 2.0 / (9.0 * k) + 3.72 * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Each decile's share of the draws is within 1 point of its exact probability.
fn deciles_within_one_point(counts: &[u64], pmf: &[f64]) {
    let total: u64 = counts.iter().sum();
    let n = counts.len();
    for d in 0..10 {
        let range = d * n / 10..(d + 1) * n / 10;
        let observed: u64 = counts[range.clone()].iter().sum();
        let expected: f64 = pmf[range].iter().sum();
        let share = observed as f64 / total as f64;
        assert!((share - expected).abs() < 0.01, "decile {d}: {share:.4} vs {expected:.4}");
    }
}

#[test]
fn last_name_numbers_follow_nurand_255() {
    let pmf = exact(255, C_LAST_RUN, 0, 999);
    let mut rng = WorkerRng::new(1);
    let mut counts = vec![0u64; 1000];
    for _ in 0..DRAWS {
        counts[run_last_name_number(&mut rng, 3000) as usize] += 1;
    }
    let (stat, df) = chi_square(&counts, &pmf);
    assert!(stat < critical(df), "chi-square {stat:.0} on {df} df");
    deciles_within_one_point(&counts, &pmf);
    // It is non-uniform: the most likely name is far more likely than the least.
    let (lo, hi) = pmf.iter().fold((1.0f64, 0.0f64), |(lo, hi), p| (lo.min(*p), hi.max(*p)));
    assert!(hi > 3.0 * lo);
}

#[test]
fn customer_ids_follow_nurand_1023() {
    let pmf = exact(1023, C_CUSTOMER_ID, 1, 3000);
    let mut rng = WorkerRng::new(2);
    let mut counts = vec![0u64; 3000];
    for _ in 0..DRAWS {
        let c = customer_id(&mut rng, 3000);
        assert!((1..=3000).contains(&c));
        counts[c as usize - 1] += 1;
    }
    let (stat, df) = chi_square(&counts, &pmf);
    assert!(stat < critical(df), "chi-square {stat:.0} on {df} df");
    deciles_within_one_point(&counts, &pmf);
}

#[test]
fn nurand_stays_in_range() {
    let mut rng = WorkerRng::new(3);
    for _ in 0..DRAWS {
        let v = nurand(&mut rng, 8191, 7911, 1, 100_000);
        assert!((1..=100_000).contains(&v));
    }
}

#[test]
fn last_names_are_built_from_syllables() {
    assert_eq!(last_name_string(0), "BARBARBAR");
    assert_eq!(last_name_string(371), "PRICALLYOUGHT");
    assert_eq!(last_name_string(999), "EINGEINGEING");
    assert_eq!(last_name_string(40), "BARPRESBAR");
    let longest = (0..1000).map(|n| last_name_string(n).len()).max().unwrap();
    assert!(longest <= 16, "a last name is longer than C_LAST's 16 characters");
    assert_eq!(&last_name(371)[..13], b"PRICALLYOUGHT");
    assert!(last_name(371)[13..].iter().all(|b| *b == 0));
    // Distinct numbers, distinct names.
    let names: std::collections::HashSet<_> = (0..1000).map(last_name_string).collect();
    assert_eq!(names.len(), 1000);
}

#[test]
fn scaled_down_districts_only_name_existing_customers() {
    let mut rng = WorkerRng::new(4);
    for _ in 0..10_000 {
        assert!(run_last_name_number(&mut rng, 120) < 120);
    }
}

//! YCSB's key generators draw with the frequencies their closed forms give: zipfian (Gray et
//! al.'s method), skewed-latest, scrambled zipfian and hotspot. Catches a wrong zeta, eta or
//! alpha, an off-by-one in the item range, or a latest generator that ignores the counter.

use workloads::generators::{
    zeta, Hotspot, InsertCounter, ScrambledZipfian, SkewedLatest, WorkerRng, Zipfian,
};

const DRAWS: usize = 1_000_000;

/// Exact zipfian probabilities of ranks 0..n.
fn closed_form(n: u64, theta: f64) -> Vec<f64> {
    let z = zeta(n, theta);
    (0..n).map(|i| 1.0 / ((i + 1) as f64).powf(theta) / z).collect()
}

/// Kolmogorov-Smirnov distance between observed counts and expected probabilities.
fn ks_distance(counts: &[u64], expected: &[f64]) -> f64 {
    let total: u64 = counts.iter().sum();
    let (mut cdf_obs, mut cdf_exp, mut worst) = (0.0, 0.0, 0.0f64);
    for (c, p) in counts.iter().zip(expected) {
        cdf_obs += *c as f64 / total as f64;
        cdf_exp += p;
        worst = worst.max((cdf_obs - cdf_exp).abs());
    }
    worst
}

/// The exact probabilities Gray et al.'s method (as YCSB implements it) gives ranks 0..n: rank
/// 0 and 1 exactly as the closed form, the rest by the inverse of its continuous CDF.
fn gray_pmf(n: u64, theta: f64) -> Vec<f64> {
    let zn = zeta(n, theta);
    let z2 = zeta(2, theta);
    let alpha = 1.0 / (1.0 - theta);
    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - z2 / zn);
    let (u1, u2) = (1.0 / zn, (1.0 + 0.5f64.powf(theta)) / zn);
    let mut pmf = vec![0.0; n as usize];
    pmf[0] = u1;
    pmf[1] = u2 - u1;
    let mut prev = u2;
    for (k, p) in pmf.iter_mut().enumerate() {
        // Draws u >= u2 give floor(n * (eta*u - eta + 1)^alpha) <= k while u < bound.
        let bound = ((((k + 1) as f64 / n as f64).powf(1.0 / alpha)) - 1.0 + eta) / eta;
        let bound = bound.clamp(u2, 1.0);
        if bound > prev {
            *p += bound - prev;
            prev = bound;
        }
    }
    pmf
}

/// Pearson's chi-square of counts against probabilities, merging bins expected below 5 into
/// one; returns `(statistic, degrees of freedom)`.
fn chi_square(counts: &[u64], expected: &[f64]) -> (f64, usize) {
    let total: u64 = counts.iter().sum();
    let (mut stat, mut bins) = (0.0, 0usize);
    let (mut small_obs, mut small_exp) = (0.0, 0.0);
    for (c, p) in counts.iter().zip(expected) {
        let e = p * total as f64;
        if e < 5.0 {
            small_obs += *c as f64;
            small_exp += e;
        } else {
            stat += (*c as f64 - e).powi(2) / e;
            bins += 1;
        }
    }
    if small_exp > 0.0 {
        stat += (small_obs - small_exp).powi(2) / small_exp;
        bins += 1;
    }
    (stat, bins - 1)
}

/// Chi-square critical value at p ~ 1e-4 (Wilson-Hilferty), so a correct generator fails
/// about once in 10,000 runs (the seeds are fixed, so in practice never).
fn chi_square_critical(df: usize) -> f64 {
    let k = df as f64;
    let z = 3.72;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

/// Relative error of rank `i`'s frequency, in standard errors.
fn z_score(count: u64, p: f64, draws: usize) -> f64 {
    let expected = p * draws as f64;
    (count as f64 - expected) / (expected * (1.0 - p)).sqrt()
}

#[test]
fn zipfian_matches_closed_form() {
    for (n, theta) in [(1000u64, 0.99), (1000, 0.5), (100_000, 0.99), (50, 0.8)] {
        let mut z = Zipfian::new(0, n - 1, theta).unwrap();
        let mut rng = WorkerRng::new(7);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..DRAWS {
            counts[z.next(&mut rng) as usize] += 1;
        }
        let expected = closed_form(n, theta);
        let ks = ks_distance(&counts, &expected);
        eprintln!("n={n} theta={theta}: KS {ks:.4}");
        // Ranks 0 and 1 are exact in Gray's method: within 4 standard errors.
        for i in 0..2 {
            let z = z_score(counts[i], expected[i], DRAWS);
            assert!(z.abs() < 4.0, "n={n} theta={theta}: rank {i} is {z:.1} s.e. off");
        }
        // The rest follow Gray's continuous approximation, which is itself up to ~1.6 points
        // off the closed form's CDF (0.0161 for n = 1000, theta = 0.99, computed exactly).
        assert!(ks < 0.02, "n={n} theta={theta}: KS distance {ks:.4}");
        // Against the method's own exact distribution, the draws are indistinguishable.
        let (stat, df) = chi_square(&counts, &gray_pmf(n, theta));
        eprintln!("n={n} theta={theta}: chi-square {stat:.0} on {df} df");
        assert!(stat < chi_square_critical(df), "n={n} theta={theta}: chi2 {stat:.0} on {df}");
    }
}

#[test]
fn latest_follows_the_counter() {
    let last = 1000u64;
    let counter = InsertCounter::new(last + 1);
    assert_eq!(counter.last(), last);
    let mut gen = SkewedLatest::new(counter.last(), 0.99).unwrap();
    let mut rng = WorkerRng::new(11);
    let mut counts = vec![0u64; last as usize];
    for _ in 0..DRAWS {
        let v = gen.next(&mut rng, counter.last());
        assert!((1..=last).contains(&v), "latest drew {v} outside 1..={last}");
        counts[(last - v) as usize] += 1;
    }
    let expected = closed_form(last, 0.99);
    let ks = ks_distance(&counts, &expected);
    eprintln!("latest: KS {ks:.4}");
    assert!(ks < 0.02, "latest: KS distance {ks:.4}");
    let (stat, df) = chi_square(&counts, &gray_pmf(last, 0.99));
    assert!(stat < chi_square_critical(df), "latest: chi2 {stat:.0} on {df} df");
    assert!(z_score(counts[0], expected[0], DRAWS).abs() < 4.0, "newest key frequency off");

    // Acknowledged inserts move the window; an unacknowledged gap holds it back.
    let a = counter.next();
    let b = counter.next();
    counter.acknowledge(b);
    assert_eq!(counter.last(), last, "a gap below an ack must hold `last` back");
    counter.acknowledge(a);
    assert_eq!(counter.last(), last + 2);
    let newest = (0..10_000).map(|_| gen.next(&mut rng, counter.last())).max().unwrap();
    assert_eq!(newest, last + 2, "latest never returned the newest key");
}

#[test]
fn scrambled_zipfian_spreads_the_head() {
    let n = 10_000u64;
    let mut z = ScrambledZipfian::new(0, n - 1, 0.99).unwrap();
    let mut rng = WorkerRng::new(3);
    let mut counts = vec![0u64; n as usize];
    for _ in 0..DRAWS {
        counts[z.next(&mut rng) as usize] += 1;
    }
    // The most popular item of the underlying 10^10-item zipfian is item 0, which the FNV
    // hash places at fnvhash64(0) % n with probability 1 / zeta(10^10, 0.99).
    let top = workloads::generators::fnvhash64(0) % n;
    let p0 = 1.0 / ScrambledZipfian::DEFAULT_ZETAN;
    let share = counts[top as usize] as f64 / DRAWS as f64;
    assert!((share - p0).abs() < 0.003, "top item share {share:.4}, expected >= {p0:.4}");
    // Popular items are scattered: the hottest 10 are not adjacent.
    let mut order: Vec<usize> = (0..n as usize).collect();
    order.sort_by_key(|i| std::cmp::Reverse(counts[*i]));
    let spread = order[..10].iter().max().unwrap() - order[..10].iter().min().unwrap();
    assert!(spread > n as usize / 10, "hottest items are clustered: spread {spread}");
}

#[test]
fn hotspot_sends_the_hot_fraction_to_the_hot_set() {
    for (set, ops) in [(0.2, 0.5), (0.1, 0.9), (0.001, 0.3)] {
        let n = 100_000u64;
        let mut h = Hotspot::new(0, n - 1, set, ops).unwrap();
        let hot = h.hot_items();
        assert_eq!(hot, (n as f64 * set) as u64);
        let mut rng = WorkerRng::new(5);
        let mut in_hot = 0u64;
        for _ in 0..DRAWS {
            let v = h.next(&mut rng);
            assert!(v < n);
            in_hot += (v < hot) as u64;
        }
        let share = in_hot as f64 / DRAWS as f64;
        assert!((share - ops).abs() < 0.005, "hot share {share:.4}, expected {ops}");
    }
}

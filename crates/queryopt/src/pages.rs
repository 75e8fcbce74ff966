//! Expected pages touched when `k` of `n` tuples, stored `p` to a page on `m = n / p` pages,
//! are selected at random (thesis §3.3, Fig. 3.3, after Yue & Wong 1975 [121]).
//!
//! The thesis does not print the formula. Yue & Wong's expectation, for tuples placed at random
//! with exactly `p` per page and `k` distinct tuples selected, is the one Yao (CACM 1977) later
//! published in closed form, which we use:
//!
//! `E[pages] = m · (1 − C(n − p, k) / C(n, k)) = m · (1 − Π_{i=0}^{k−1} (n − p − i) / (n − i))`.
//!
//! Cardenas's (1975) approximation `m · (1 − (1 − 1/m)^k)` (selection with replacement) and the
//! large-table limit `m · (1 − (1 − s)^p)` for selectivity `s = k / n` (what Fig. 3.3 plots
//! against selectivity) are given beside it. All three agree to a fraction of a percent at the
//! table sizes we run.

use serde::Serialize;

/// Yao's exact expectation of pages touched (see the module doc). `k > n - p` touches every page.
pub fn yao(n: u64, p: u64, k: u64) -> f64 {
    assert!(p >= 1 && n >= p, "yao needs 1 <= p <= n");
    let m = n as f64 / p as f64;
    if k == 0 {
        return 0.0;
    }
    if k > n - p {
        return m;
    }
    // log of the product; each factor is in (0, 1].
    let mut log_miss = 0.0f64;
    for i in 0..k {
        let f = (n - p - i) as f64 / (n - i) as f64;
        log_miss += f.ln();
        if log_miss < -50.0 {
            return m;
        }
    }
    m * (1.0 - log_miss.exp())
}

/// Cardenas's approximation: `k` draws with replacement over `m` pages.
pub fn cardenas(m: f64, k: f64) -> f64 {
    m * (1.0 - (1.0 - 1.0 / m).powf(k))
}

/// The fraction of pages touched at selectivity `s` with `p` tuples per page, for a large table
/// (each page misses all of its `p` tuples with probability `(1 − s)^p`): Fig. 3.3's curves.
pub fn page_fraction(s: f64, p: f64) -> f64 {
    1.0 - (1.0 - s).powf(p)
}

/// One row of a measured-vs-expected comparison.
#[derive(Clone, Debug, Serialize)]
pub struct PagesRow {
    pub tuples_per_page: usize,
    pub selectivity: f64,
    pub tuples_selected: u64,
    pub table_pages: u64,
    pub measured_pages: u64,
    pub expected_pages_yao: f64,
    pub expected_pages_cardenas: f64,
    pub expected_fraction_large_table: f64,
    /// measured / expected (Yao) − 1.
    pub error_vs_yao: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // One tuple per page: pages = tuples.
        assert!((yao(1000, 1, 37) - 37.0).abs() < 1e-9);
        // n = 4, p = 2 (two pages), k = 2: P(both on one page) = 2 / C(4,2) = 1/3;
        // E = 1·1/3 + 2·2/3 = 5/3.
        assert!((yao(4, 2, 2) - 5.0 / 3.0).abs() < 1e-12);
        // Every page once k > n - p.
        assert_eq!(yao(100, 10, 91), 10.0);
        assert_eq!(yao(100, 10, 0), 0.0);
        // Fig. 3.3's point: 19 tuples per page at 4% selectivity touch over half the pages.
        assert!((page_fraction(0.04, 19.0) - 0.5395).abs() < 1e-3);
        let (n, p) = (1_000_000u64, 19u64);
        let k = n / 100;
        let m = n as f64 / p as f64;
        let y = yao(n, p, k) / m;
        assert!((y - page_fraction(0.01, 19.0)).abs() < 1e-3, "{y}");
        assert!((cardenas(m, k as f64) / m - y).abs() < 1e-2);
        // Cardenas never exceeds Yao (with replacement repeats tuples).
        assert!(cardenas(m, k as f64) <= yao(n, p, k) + 1e-9);
    }
}

//! Random generators the workloads draw from: YCSB's reference key distributions (Cooper et al.,
//! "Benchmarking Cloud Serving Systems with YCSB", SoCC 2010, §3.2 and YCSB's `generator`
//! package), the zipfian method of Gray et al. ("Quickly Generating Billion-Record Synthetic
//! Databases", SIGMOD 1994, §5), YCSB's hot-spot generator (the "simple skew" of Arulraj et al.,
//! SIGMOD 2015, §5.1), and the TPC non-uniform random function NURand (TPC-C 5.11, §2.1.6).
//!
//! Invariant: every generator is a pure function of its parameters and the random stream it is
//! handed, so a worker's inputs are reproducible from `(seed, worker)` alone. The one exception
//! is the insert counter behind [`SkewedLatest`], which all workers of a workload share, as in
//! YCSB.

use parking_lot::Mutex;
use rand::{Rng, RngCore};
use std::sync::atomic::{AtomicU64, Ordering};

/// A small, fast, portable generator (xoshiro256**, Blackman & Vigna), seeded through SplitMix64.
/// Chosen over `rand`'s `SmallRng` because its output is fixed forever, so a `(seed, worker)` pair
/// names the same transaction stream on every machine and every release.
#[derive(Clone, Debug)]
pub struct WorkerRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl WorkerRng {
    pub fn new(seed: u64) -> Self {
        let mut state = seed;
        let s = [
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
            splitmix64(&mut state),
        ];
        WorkerRng { s }
    }

    /// The stream for one worker of a run: distinct workers (and distinct `stream` purposes, such
    /// as parameters vs. back-off) get unrelated sequences from the same run seed.
    pub fn for_worker(seed: u64, worker: usize, stream: u64) -> Self {
        let mut state = seed ^ 0x6a09_e667_f3bc_c909;
        let a = splitmix64(&mut state);
        let mut mix = a ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let b = splitmix64(&mut mix);
        WorkerRng::new(b ^ stream.wrapping_mul(0xd1b5_4a32_d192_ed03))
    }
}

impl RngCore for WorkerRng {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        let mut chunks = dest.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let bytes = self.next_u64().to_le_bytes();
            rest.copy_from_slice(&bytes[..rest.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

const FNV_OFFSET_BASIS_64: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight little-endian bytes of `value`, then Java's
/// `Math.abs` of the result read as a signed 64-bit number.
pub fn fnvhash64(value: u64) -> u64 {
    let mut v = value;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    (hash as i64).wrapping_abs() as u64
}

/// Terms summed exactly before [`zeta`] switches to the Euler-Maclaurin tail; beyond this the
/// tail's error is below 1e-15 relative.
const ZETA_EXACT_TERMS: u64 = 1 << 16;

/// `sum_{i=start+1}^{end} 1/i^theta + initial`: YCSB's `zetastatic`, the incremental form used
/// when the item count grows.
pub fn zeta_range(start: u64, end: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in start..end {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// The generalised harmonic number `zeta(n, theta) = sum_{i=1}^{n} 1/i^theta`, exact for small
/// `n`, and for large `n` (YCSB's scrambled zipfian uses `n = 10^10`) the first 2^16 terms plus
/// the Euler-Maclaurin expansion of the rest, so any theta costs milliseconds.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= 4 * ZETA_EXACT_TERMS {
        return zeta_range(0, n, theta, 0.0);
    }
    let m = ZETA_EXACT_TERMS as f64;
    let nf = n as f64;
    let head = zeta_range(0, ZETA_EXACT_TERMS, theta, 0.0);
    let f = |x: f64| x.powf(-theta);
    let f1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let f3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * x.powf(-theta - 3.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (nf / m).ln()
    } else {
        (nf.powf(1.0 - theta) - m.powf(1.0 - theta)) / (1.0 - theta)
    };
    // sum_{i=m}^{n} f(i), then drop f(m), which the exact head already counted.
    let tail = integral + (f(m) + f(nf)) / 2.0 + (f1(nf) - f1(m)) / 12.0 - (f3(nf) - f3(m)) / 720.0;
    head + tail - f(m)
}

/// Checks a zipfian constant: Gray's method needs `0 < theta < 1`.
pub fn check_theta(theta: f64) -> Result<(), String> {
    if theta.is_finite() && theta > 0.0 && theta < 1.0 {
        Ok(())
    } else {
        Err(format!("zipfian theta must be strictly between 0 and 1, got {theta}"))
    }
}

/// YCSB's `ZipfianGenerator`: item `base + i` is drawn with probability proportional to
/// `1/(i+1)^theta`, by the method of Gray et al. Items 0 and 1 are exact; the rest follow
/// Gray's continuous approximation, as in YCSB.
///
/// One deliberate difference from YCSB: when the item count grows, `eta` is recomputed with the
/// new count (YCSB keeps the original count there, which skews the tail of "latest").
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2theta: f64,
    zetan: f64,
    eta: f64,
}

impl Zipfian {
    /// Items `min ..= max` (YCSB's constructor), `theta` in (0, 1).
    pub fn new(min: u64, max: u64, theta: f64) -> Result<Self, String> {
        Self::build(min, max, theta, None)
    }

    /// As [`Zipfian::new`] with a precomputed `zeta(max - min + 1, theta)`.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Result<Self, String> {
        Self::build(min, max, theta, Some(zetan))
    }

    fn build(min: u64, max: u64, theta: f64, zetan: Option<f64>) -> Result<Self, String> {
        check_theta(theta)?;
        if max < min {
            return Err(format!("zipfian range is empty: {min}..={max}"));
        }
        let items = max - min + 1;
        let zetan = zetan.unwrap_or_else(|| zeta(items, theta));
        let zeta2theta = zeta(2, theta);
        let mut z = Zipfian {
            base: min,
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2theta,
            zetan,
            eta: 0.0,
        };
        z.eta = z.eta_for(items);
        Ok(z)
    }

    fn eta_for(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn theta(&self) -> f64 {
        self.theta
    }

    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// A draw from `base .. base + items`.
    pub fn next(&mut self, rng: &mut dyn RngCore) -> u64 {
        self.draw(rng, self.items)
    }

    /// A draw from `base .. base + item_count`, first growing (or shrinking) the item count; a
    /// growth is folded into zeta incrementally, as YCSB does.
    pub fn next_with_count(&mut self, rng: &mut dyn RngCore, item_count: u64) -> u64 {
        let item_count = item_count.max(1);
        if item_count != self.items {
            if item_count > self.items && item_count - self.items <= ZETA_EXACT_TERMS {
                self.zetan = zeta_range(self.items, item_count, self.theta, self.zetan);
            } else {
                self.zetan = zeta(item_count, self.theta);
            }
            self.items = item_count;
            self.eta = self.eta_for(item_count);
        }
        self.draw(rng, item_count)
    }

    fn draw(&self, rng: &mut dyn RngCore, item_count: u64) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 || item_count == 1 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let offset = (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        self.base + offset.min(item_count - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a zipfian draw over 10^10 items, hashed with FNV and
/// folded into `min ..= max`, so popular items are scattered over the key space. With the
/// default theta (0.99) YCSB's precomputed zeta is used, as YCSB does.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    inner: Zipfian,
    min: u64,
    items: u64,
}

impl ScrambledZipfian {
    /// YCSB's `ITEM_COUNT`.
    pub const ITEM_COUNT: u64 = 10_000_000_000;
    /// YCSB's `USED_ZIPFIAN_CONSTANT` and its `ZETAN` = zeta(ITEM_COUNT, 0.99).
    pub const DEFAULT_THETA: f64 = 0.99;
    pub const DEFAULT_ZETAN: f64 = 26.469_028_201_783_02;

    pub fn new(min: u64, max: u64, theta: f64) -> Result<Self, String> {
        check_theta(theta)?;
        if max < min {
            return Err(format!("scrambled zipfian range is empty: {min}..={max}"));
        }
        let inner = if theta == Self::DEFAULT_THETA {
            Zipfian::with_zetan(0, Self::ITEM_COUNT, theta, Self::DEFAULT_ZETAN)?
        } else {
            Zipfian::new(0, Self::ITEM_COUNT, theta)?
        };
        Ok(ScrambledZipfian { inner, min, items: max - min + 1 })
    }

    pub fn next(&mut self, rng: &mut dyn RngCore) -> u64 {
        let v = self.inner.next(rng);
        self.min + fnvhash64(v) % self.items
    }
}

/// YCSB's `HotspotIntegerGenerator`: `hot_ops_fraction` of the draws fall uniformly in the first
/// `hot_set_fraction` of `min ..= max`, the rest uniformly in the remainder. The `--skew
/// low|high` presets use it (50% of accesses to 20% of the records, 90% to 10%): a guess at
/// N-Store's skew from the paper's words, not what N-Store's code does (that is [`NstoreSkew`]).
#[derive(Clone, Debug)]
pub struct Hotspot {
    min: u64,
    hot: u64,
    cold: u64,
    hot_ops_fraction: f64,
}

impl Hotspot {
    pub fn new(
        min: u64,
        max: u64,
        hot_set_fraction: f64,
        hot_ops_fraction: f64,
    ) -> Result<Self, String> {
        if max < min {
            return Err(format!("hotspot range is empty: {min}..={max}"));
        }
        if !(hot_set_fraction > 0.0 && hot_set_fraction <= 1.0) {
            return Err(format!("hot set fraction must be in (0, 1], got {hot_set_fraction}"));
        }
        if !(0.0..=1.0).contains(&hot_ops_fraction) {
            return Err(format!(
                "hot operation fraction must be in [0, 1], got {hot_ops_fraction}"
            ));
        }
        let items = max - min + 1;
        let hot = ((items as f64 * hot_set_fraction) as u64).clamp(1, items);
        Ok(Hotspot { min, hot, cold: items - hot, hot_ops_fraction })
    }

    /// Number of items in the hot set (the first ones of the range).
    pub fn hot_items(&self) -> u64 {
        self.hot
    }

    pub fn next(&mut self, rng: &mut dyn RngCore) -> u64 {
        let p: f64 = rng.gen();
        if p < self.hot_ops_fraction || self.cold == 0 {
            self.min + rng.gen_range(0..self.hot)
        } else {
            self.min + self.hot + rng.gen_range(0..self.cold)
        }
    }
}

/// N-Store's YCSB skew as its benchmark code (paper-era commit a6fe701) draws keys: with
/// probability `skew` (α) a key among the first ⌈10α⌉ key numbers, otherwise a key uniformly in
/// the top (1 − α) of the range `[⌊α·n⌋, n)`. α = 0.1 is the paper's "low" skew, 0.5 "high".
///
/// N-Store draws the read/write choice and the key from one random stream, so its reads and its
/// writes never touch the same keys; we draw the operation and the key independently (each
/// worker's [`WorkerRng`]), so they do. Noted, not copied: that correlation is an artefact.
#[derive(Clone, Debug)]
pub struct NstoreSkew {
    skew: f64,
    hot: u64,
    cold_first: u64,
    items: u64,
}

impl NstoreSkew {
    /// Keys `0 .. items`, skew α in (0, 1).
    pub fn new(items: u64, skew: f64) -> Result<Self, String> {
        if !(skew > 0.0 && skew < 1.0) {
            return Err(format!("nstore-skew needs skew in (0, 1), got {skew}"));
        }
        if items == 0 {
            return Err("nstore-skew needs at least one key".to_string());
        }
        let hot = ((10.0 * skew).ceil() as u64).clamp(1, items);
        let cold_first = ((skew * items as f64) as u64).min(items - 1);
        Ok(NstoreSkew { skew, hot, cold_first, items })
    }

    /// Number of keys in the hot set (the first ones).
    pub fn hot_items(&self) -> u64 {
        self.hot
    }

    pub fn next(&mut self, rng: &mut dyn RngCore) -> u64 {
        if rng.gen::<f64>() < self.skew {
            rng.gen_range(0..self.hot)
        } else {
            rng.gen_range(self.cold_first..self.items)
        }
    }
}

/// The insert sequence shared by all workers of a YCSB run: YCSB's
/// `AcknowledgedCounterGenerator`. `next` hands out key numbers; `last` is the highest number
/// below which every handed-out number has been acknowledged (its insert finished), which is
/// what "latest" reads from, so readers never chase a row that is still being inserted.
#[derive(Debug)]
pub struct InsertCounter {
    next: AtomicU64,
    limit: AtomicU64,
    window: Mutex<AckWindow>,
}

#[derive(Debug)]
struct AckWindow {
    /// `done[v % WINDOW]` for acknowledged `v` above the limit.
    done: Vec<bool>,
}

impl InsertCounter {
    /// How far acknowledgements may run ahead of the contiguous prefix (YCSB uses 2^20).
    pub const WINDOW: u64 = 1 << 20;

    /// Numbers from `start` on; `last()` starts at `start - 1`.
    pub fn new(start: u64) -> Self {
        InsertCounter {
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start.wrapping_sub(1)),
            window: Mutex::new(AckWindow { done: vec![false; Self::WINDOW as usize] }),
        }
    }

    /// Restarts the sequence at `start` (after reattaching to a database whose highest inserted
    /// key number is `start - 1`).
    pub fn reset(&self, start: u64) {
        let mut w = self.window.lock();
        w.done.iter_mut().for_each(|d| *d = false);
        self.next.store(start, Ordering::SeqCst);
        self.limit.store(start.wrapping_sub(1), Ordering::SeqCst);
    }

    pub fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Highest acknowledged number with every number below it acknowledged too.
    pub fn last(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// Marks `value` finished (committed, or given up: a hole is then a key that reads find
    /// absent, as in YCSB).
    pub fn acknowledge(&self, value: u64) {
        let mut w = self.window.lock();
        let limit = self.limit.load(Ordering::Acquire);
        if value <= limit && limit != u64::MAX {
            return;
        }
        if value.wrapping_sub(limit) > Self::WINDOW {
            // Too far ahead to track (a stalled insert below it): drop it, as YCSB would fail;
            // "latest" then simply stops advancing past the stall.
            return;
        }
        w.done[(value % Self::WINDOW) as usize] = true;
        let mut l = limit;
        loop {
            let slot = (l.wrapping_add(1) % Self::WINDOW) as usize;
            if !w.done[slot] {
                break;
            }
            w.done[slot] = false;
            l = l.wrapping_add(1);
        }
        self.limit.store(l, Ordering::Release);
    }
}

/// YCSB's `SkewedLatestGenerator`: `last - zipfian(last)`, so the most recently inserted keys
/// are the most popular. Each worker owns one (its zeta grows with the insert counter).
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// `last` is the counter's current `last()`; `theta` YCSB's 0.99 by default.
    pub fn new(last: u64, theta: f64) -> Result<Self, String> {
        Ok(SkewedLatest { zipf: Zipfian::new(0, last.max(1) - 1, theta)? })
    }

    /// A draw relative to the counter's current `last` value: in `1 ..= last` (YCSB never picks
    /// key 0 here), or 0 if nothing is there yet.
    pub fn next(&mut self, rng: &mut dyn RngCore, last: u64) -> u64 {
        if last == 0 || last == u64::MAX {
            return 0;
        }
        last - self.zipf.next_with_count(rng, last)
    }
}

/// TPC's non-uniform random function (TPC-C 5.11 §2.1.6; TATP uses it with `c = 0`):
/// `(((random(0, a) | random(x, y)) + c) % (y - x + 1)) + x`.
pub fn nurand(rng: &mut dyn RngCore, a: u64, c: u64, x: u64, y: u64) -> u64 {
    debug_assert!(x <= y);
    let r1 = rng.gen_range(0..=a);
    let r2 = rng.gen_range(x..=y);
    (((r1 | r2) + c) % (y - x + 1)) + x
}

/// A uniform draw in `lo ..= hi`.
pub fn uniform(rng: &mut dyn RngCore, lo: u64, hi: u64) -> u64 {
    rng.gen_range(lo..=hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_matches_ycsb_constant() {
        let z = zeta(ScrambledZipfian::ITEM_COUNT + 1, 0.99);
        assert!((z - ScrambledZipfian::DEFAULT_ZETAN).abs() < 1e-6, "{z}");
    }

    #[test]
    fn zeta_tail_matches_exact_sum() {
        for theta in [0.5, 0.8, 0.99] {
            let n = 1_000_000;
            let exact = zeta_range(0, n, theta, 0.0);
            let fast = zeta(n, theta);
            assert!(((exact - fast) / exact).abs() < 1e-12, "{theta}: {exact} vs {fast}");
        }
    }

    #[test]
    fn fnv_matches_ycsb() {
        // Values of YCSB's Utils.fnvhash64 (FNV-1a 64 over 8 bytes, then Math.abs).
        assert_eq!(fnvhash64(0), 0x5738_07cd_d7e5_c63b);
        assert_eq!(fnvhash64(1), 0x7632_ced6_e2d5_105c);
        assert_eq!(fnvhash64(12345), 0x18e1_4e7a_1d12_33b4);
    }

    #[test]
    fn nstore_skew_sends_alpha_to_the_first_keys_and_the_rest_to_the_top() {
        let mut rng = WorkerRng::for_worker(7, 0, 1);
        for (alpha, hot) in [(0.1, 1), (0.5, 5)] {
            let n = 100_000u64;
            let mut g = NstoreSkew::new(n, alpha).expect("valid");
            assert_eq!(g.hot_items(), hot);
            let draws = 200_000;
            let (mut in_hot, mut in_gap) = (0u64, 0u64);
            for _ in 0..draws {
                let k = g.next(&mut rng);
                assert!(k < n);
                in_hot += (k < hot) as u64;
                // Between the hot keys and the top (1 - α) of the range: never drawn.
                in_gap += (k >= hot && k < (alpha * n as f64) as u64) as u64;
            }
            let frac = in_hot as f64 / draws as f64;
            assert!((frac - alpha).abs() < 0.01, "α {alpha}: {frac} of draws hot");
            assert_eq!(in_gap, 0, "α {alpha}");
        }
        assert!(NstoreSkew::new(10, 1.0).is_err() && NstoreSkew::new(10, 0.0).is_err());
    }
}

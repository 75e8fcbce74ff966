//! Synthetic per-server power traces standing in for the production traces of thesis app. B
//! §B.5.1, which are not available. The mix follows the paper's hypothetical facility: 40%
//! medical-centre servers (lightly loaded, one nightly spike "which we believe to be daily backup
//! processing"), 30% HPC nodes (pegged near peak, with gaps between batch jobs) and 30% web-search
//! servers (one diurnal trace shared by all: they "rise and fall together").
//!
//! Generator, per server s of cluster c, per minute t (seeded ChaCha8, so a seed fixes the trace):
//! u_s(t) = clamp(level_c + swing_c·diurnal(t) + √ρ_c·shared_c(t) + √(1 − ρ_c)·own_s(t) + event,
//! 0, 1), where diurnal(t) = ½ − ½cos(2π(t − 02:00)/24 h) peaks at 14:00, shared_c and own_s are
//! AR(1) noises (φ = 0.9) of standard deviation σ_c, ρ_c is the within-cluster correlation, and
//! the event is the medical backup spike (+0.8 for 45–75 min from about 02:00) or an HPC job gap
//! (u drops to 0.05 for 10–40 min, starting with probability 1/240 a minute). Power is (A.3):
//! idle + (peak − idle)·u. Invariant: every sample lies in [idle, peak] of its server.

use crate::error::{invalid, Result};
use crate::model::server_power;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Longest trace we generate: 7 days of minutes (memory: servers × minutes f64s).
pub const MAX_MINUTES: usize = 7 * 1440;
/// Most servers we generate.
pub const MAX_SERVERS: usize = 20_000;
const MINUTES_PER_DAY: f64 = 1440.0;
const AR_PHI: f64 = 0.9;
/// Utilisation the nightly backup adds on a medical-centre server.
const BACKUP_SPIKE: f64 = 0.8;

/// The workload classes of §B.5.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cluster {
    Medical,
    Hpc,
    WebSearch,
}

/// Per-cluster generator parameters.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ClusterShape {
    pub cluster: Cluster,
    /// Share of the servers.
    pub share: f64,
    pub peak_kw: f64,
    pub level: f64,
    pub swing: f64,
    /// ρ: correlation of a server's noise with its cluster's.
    pub correlation: f64,
    /// σ of the AR(1) noises.
    pub noise_sd: f64,
}

/// The three clusters' shapes (ours; chosen to give ≈ 180 W per server on average, near the
/// paper's 180.5 kW for 1000 servers).
pub const CLUSTERS: [ClusterShape; 3] = [
    ClusterShape {
        cluster: Cluster::Medical,
        share: 0.4,
        peak_kw: 0.22,
        level: 0.08,
        swing: 0.12,
        correlation: 0.5,
        noise_sd: 0.05,
    },
    ClusterShape {
        cluster: Cluster::Hpc,
        share: 0.3,
        peak_kw: 0.25,
        level: 0.88,
        swing: 0.0,
        correlation: 0.2,
        noise_sd: 0.04,
    },
    ClusterShape {
        cluster: Cluster::WebSearch,
        share: 0.3,
        peak_kw: 0.22,
        level: 0.05,
        swing: 0.9,
        correlation: 0.9,
        noise_sd: 0.05,
    },
];

/// What to generate.
#[derive(Clone, Debug, Serialize)]
pub struct TraceSpec {
    pub servers: usize,
    pub minutes: usize,
    /// Server idle power as a fraction of peak (0.6 typical; §B.5.5 uses 0.1).
    pub idle_fraction: f64,
    pub seed: u64,
}

impl Default for TraceSpec {
    fn default() -> Self {
        Self { servers: 1000, minutes: 1440, idle_fraction: 0.6, seed: 1 }
    }
}

/// A generated trace: servers in cluster order (medical, HPC, web), one power sample per
/// server per minute.
#[derive(Clone, Debug)]
pub struct Trace {
    pub clusters: Vec<Cluster>,
    pub peak_kw: Vec<f64>,
    pub idle_kw: Vec<f64>,
    /// `demand_kw[t][s]`: server s's power in minute t.
    pub demand_kw: Vec<Vec<f64>>,
}

/// Aggregate statistics of a trace (the paper quotes mean, max and standard deviation).
#[derive(Clone, Debug, Serialize)]
pub struct TraceStats {
    pub mean_kw: f64,
    pub max_kw: f64,
    pub sd_kw: f64,
}

struct Ar1 {
    value: f64,
    sd: f64,
}

impl Ar1 {
    fn new(sd: f64, rng: &mut ChaCha8Rng) -> Self {
        Self { value: sd * normal(rng), sd }
    }
    /// Stationary AR(1): keeps standard deviation `sd`.
    fn step(&mut self, rng: &mut ChaCha8Rng) -> f64 {
        let innovation = self.sd * (1.0 - AR_PHI * AR_PHI).sqrt();
        self.value = AR_PHI * self.value + innovation * normal(rng);
        self.value
    }
}

/// Standard normal by Box–Muller.
fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn diurnal(minute: usize) -> f64 {
    let phase = (minute as f64 - 120.0) / MINUTES_PER_DAY;
    0.5 - 0.5 * (std::f64::consts::TAU * phase).cos()
}

impl TraceSpec {
    pub fn validate(&self) -> Result<()> {
        if self.servers < 3 || self.servers > MAX_SERVERS {
            return Err(invalid("servers", self.servers, "must be in 3..=20000"));
        }
        if self.minutes < 2 || self.minutes > MAX_MINUTES {
            return Err(invalid("minutes", self.minutes, "must be in 2..=10080 (7 days)"));
        }
        if !(0.0..=1.0).contains(&self.idle_fraction) {
            return Err(invalid("idle fraction", self.idle_fraction, "must be in [0, 1]"));
        }
        Ok(())
    }

    /// Generates the trace (deterministic in `seed`).
    pub fn generate(&self) -> Result<Trace> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut shapes = Vec::with_capacity(self.servers);
        let mut assigned = 0;
        for (i, shape) in CLUSTERS.iter().enumerate() {
            let count = if i + 1 == CLUSTERS.len() {
                self.servers - assigned
            } else {
                (shape.share * self.servers as f64).round() as usize
            };
            shapes.extend(std::iter::repeat_n(*shape, count));
            assigned += count;
        }
        let mut shared: Vec<Ar1> =
            CLUSTERS.iter().map(|c| Ar1::new(c.noise_sd, &mut rng)).collect();
        let mut own: Vec<Ar1> = shapes.iter().map(|c| Ar1::new(c.noise_sd, &mut rng)).collect();
        let backup_start: Vec<f64> =
            shapes.iter().map(|_| 120.0 + 30.0 * normal(&mut rng)).collect();
        let backup_len: Vec<f64> = shapes.iter().map(|_| rng.gen_range(45.0..75.0)).collect();
        let mut gap_left = vec![0u32; shapes.len()];
        let mut demand_kw = Vec::with_capacity(self.minutes);
        for t in 0..self.minutes {
            let cluster_noise: Vec<f64> = shared.iter_mut().map(|a| a.step(&mut rng)).collect();
            let minute_of_day = (t % 1440) as f64;
            let row = shapes
                .iter()
                .enumerate()
                .map(|(s, shape)| {
                    let k = CLUSTERS.iter().position(|c| c.cluster == shape.cluster).unwrap_or(0);
                    let rho = shape.correlation;
                    let mut u = shape.level
                        + shape.swing * diurnal(t)
                        + rho.sqrt() * cluster_noise[k]
                        + (1.0 - rho).sqrt() * own[s].step(&mut rng);
                    match shape.cluster {
                        Cluster::Medical => {
                            let since = minute_of_day - backup_start[s];
                            if (0.0..backup_len[s]).contains(&since) {
                                u += BACKUP_SPIKE;
                            }
                        }
                        Cluster::Hpc => {
                            if gap_left[s] == 0 && rng.gen_bool(1.0 / 240.0) {
                                gap_left[s] = rng.gen_range(10..=40);
                            }
                            if gap_left[s] > 0 {
                                gap_left[s] -= 1;
                                u = 0.05;
                            }
                        }
                        Cluster::WebSearch => {}
                    }
                    server_power(shape.peak_kw, self.idle_fraction, u.clamp(0.0, 1.0))
                })
                .collect();
            demand_kw.push(row);
        }
        Ok(Trace {
            clusters: shapes.iter().map(|c| c.cluster).collect(),
            peak_kw: shapes.iter().map(|c| c.peak_kw).collect(),
            idle_kw: shapes.iter().map(|c| c.peak_kw * self.idle_fraction).collect(),
            demand_kw,
        })
    }
}

impl Trace {
    pub fn servers(&self) -> usize {
        self.peak_kw.len()
    }

    pub fn stats(&self) -> TraceStats {
        let totals: Vec<f64> = self.demand_kw.iter().map(|row| row.iter().sum()).collect();
        let n = totals.len() as f64;
        let mean = totals.iter().sum::<f64>() / n;
        let var = totals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let max = totals.iter().copied().fold(0.0, f64::max);
        TraceStats { mean_kw: mean, max_kw: max, sd_kw: var.sqrt() }
    }
}

//! Builds any workload by name from one flat set of options (docs/design.md §6: `nvmdb bench
//! --workload W [options]`), so the CLI and experiment specs need not know each workload's
//! configuration type. Options a workload does not understand are an error, not ignored.

use crate::mobibench::{MobiOp, Mobibench, MobibenchConfig};
use crate::tatp::{SubscriberDistribution, Tatp, TatpConfig, TatpTxn, SUBSCRIBERS_PER_SCALE};
use crate::tpcb::{Tpcb, TpcbConfig};
use crate::tpcc::{Tpcc, TpccConfig, TpccTxn};
use crate::ycsb::{RequestDistribution, Skew, Ycsb, YcsbConfig};
use crate::Workload;
use serde::{Deserialize, Serialize};

/// Workload names [`by_name`] accepts (plus `ycsb-a` .. `ycsb-f`, `tpc-b`, `tpc-c`).
pub const WORKLOAD_NAMES: &[&str] = &["ycsb", "tpcb", "tpcc", "tatp", "mobibench"];

/// Options common to the CLI and experiment specs; `None` means the workload's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkloadOptions {
    /// TPC-B: branches; TPC-C: warehouses; TATP: units of 10,000 subscribers; YCSB: records
    /// (when `records` is not given).
    pub scale: Option<u64>,
    /// YCSB: record count; TATP: subscriber count.
    pub records: Option<u64>,
    /// YCSB: `a`..`f`, `read-only`, `read-heavy`, `balanced`, `write-heavy` (default `a`);
    /// TPC-C, TATP: `standard` (the default).
    pub mix: Option<String>,
    /// Run one transaction type alone: TPC-B `account-update`; TPC-C `new-order`, `payment`,
    /// `order-status`, `delivery`, `stock-level`; TATP `update-location`, ...; YCSB `read`,
    /// `update`, `insert`, `scan`, `read-modify-write`.
    pub txn: Option<String>,
    /// YCSB: `uniform`, `zipfian`, `scrambled-zipfian`, `latest`, `hotspot`; TATP: `nurand`,
    /// `uniform`.
    pub distribution: Option<String>,
    /// YCSB: zipfian constant θ in (0, 1).
    pub theta: Option<f64>,
    /// YCSB: with `distribution = nstore-skew`, N-Store's skew α as a number in (0, 1) (or `low`
    /// = 0.1, `high` = 0.5, as N-Store's runs); otherwise the hotspot presets `low` (50% of
    /// requests to 20% of records) or `high` (90% to 10%), implying the hotspot distribution.
    #[serde(deserialize_with = "string_or_number")]
    pub skew: Option<String>,
    /// YCSB hotspot: fraction of the records that are hot.
    pub hot_set_fraction: Option<f64>,
    /// YCSB hotspot: fraction of the requests that go to them.
    pub hot_ops_fraction: Option<f64>,
    /// YCSB record shape.
    pub field_count: Option<u32>,
    pub field_length: Option<u32>,
    /// TPC-B: accounts per branch (100,000 in the spec).
    pub accounts_per_branch: Option<u64>,
    /// TPC-C: items (100,000 in the spec).
    pub items: Option<u32>,
    /// TPC-C: customers per district (3,000 in the spec).
    pub customers_per_district: Option<u32>,
    /// Conflict retries per transaction.
    pub max_retries: Option<u32>,
    /// Mobibench: operations (single-record inserts, updates or deletes) per transaction.
    pub ops_per_txn: Option<u32>,
    /// TPC-B: read each balance with `Txn::read_for_update` (locked exclusively, then read).
    #[serde(deserialize_with = "bool_or_string")]
    pub for_update: Option<bool>,
    /// TPC-B: insert the history row after the branch's update instead of second (clause 1.2).
    #[serde(deserialize_with = "bool_or_string")]
    pub history_last: Option<bool>,
}

/// Accepts `skew = 0.1` as well as `skew = "low"` (command lines turn numbers into numbers).
fn string_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        S(String),
        N(f64),
    }
    Ok(Option::<Either>::deserialize(d)?.map(|e| match e {
        Either::S(s) => s,
        Either::N(n) => n.to_string(),
    }))
}

/// Accepts `for_update = true` as well as `for_update = "true"` (command lines pass strings).
fn bool_or_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        B(bool),
        S(String),
    }
    match Option::<Either>::deserialize(d)? {
        None => Ok(None),
        Some(Either::B(b)) => Ok(Some(b)),
        Some(Either::S(s)) => match s.as_str() {
            "true" | "on" | "1" => Ok(Some(true)),
            "false" | "off" | "0" => Ok(Some(false)),
            other => Err(serde::de::Error::custom(format!("`{other}` is not true or false"))),
        },
    }
}

impl WorkloadOptions {
    /// The names of the options that are set.
    fn set(&self) -> Vec<&'static str> {
        let flags = [
            ("scale", self.scale.is_some()),
            ("records", self.records.is_some()),
            ("mix", self.mix.is_some()),
            ("txn", self.txn.is_some()),
            ("distribution", self.distribution.is_some()),
            ("theta", self.theta.is_some()),
            ("skew", self.skew.is_some()),
            ("hot_set_fraction", self.hot_set_fraction.is_some()),
            ("hot_ops_fraction", self.hot_ops_fraction.is_some()),
            ("field_count", self.field_count.is_some()),
            ("field_length", self.field_length.is_some()),
            ("accounts_per_branch", self.accounts_per_branch.is_some()),
            ("items", self.items.is_some()),
            ("customers_per_district", self.customers_per_district.is_some()),
            ("max_retries", self.max_retries.is_some()),
            ("ops_per_txn", self.ops_per_txn.is_some()),
            ("for_update", self.for_update.is_some()),
            ("history_last", self.history_last.is_some()),
        ];
        flags.iter().filter(|(_, set)| *set).map(|(name, _)| *name).collect()
    }

    fn only(&self, workload: &str, allowed: &[&str]) -> Result<(), String> {
        match self.set().into_iter().find(|o| !allowed.contains(o)) {
            Some(o) => Err(format!("option {o} does not apply to {workload}")),
            None => Ok(()),
        }
    }
}

/// Builds workload `name` (`ycsb`, `ycsb-a`..`ycsb-f`, `tpcb`, `tpcc`, `tatp`) from `options`.
/// Unknown names, options the workload does not take, and invalid values are a one-line `Err`.
pub fn by_name(name: &str, options: &WorkloadOptions) -> Result<Box<dyn Workload>, String> {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "ycsb" => Ok(Box::new(ycsb(options, None)?)),
        "tpcb" | "tpc-b" => Ok(Box::new(tpcb(options)?)),
        "tpcc" | "tpc-c" => Ok(Box::new(tpcc(options)?)),
        "tatp" => Ok(Box::new(tatp(options)?)),
        "mobibench" => Ok(Box::new(mobibench(options)?)),
        other => match other.strip_prefix("ycsb-") {
            Some(mix) if mix.len() == 1 && ("a"..="f").contains(&mix) => {
                Ok(Box::new(ycsb(options, Some(mix))?))
            }
            _ => Err(format!(
                "unknown workload {name:?}: use one of {} (or ycsb-a .. ycsb-f)",
                WORKLOAD_NAMES.join(", ")
            )),
        },
    }
}

fn ycsb(o: &WorkloadOptions, named_mix: Option<&str>) -> Result<Ycsb, String> {
    o.only(
        "ycsb",
        &[
            "scale",
            "records",
            "mix",
            "txn",
            "distribution",
            "theta",
            "skew",
            "hot_set_fraction",
            "hot_ops_fraction",
            "field_count",
            "field_length",
            "max_retries",
        ],
    )?;
    let mix = match (named_mix, o.mix.as_deref()) {
        (Some(a), Some(b)) if !a.eq_ignore_ascii_case(b) => {
            return Err(format!("workload ycsb-{a} contradicts mix {b:?}"))
        }
        (Some(a), _) => a.to_string(),
        (None, Some(b)) => b.to_ascii_lowercase(),
        (None, None) => "a".to_string(),
    };
    let mut cfg = YcsbConfig::preset(&mix)?;
    if let (Some(s), Some(r)) = (o.scale, o.records) {
        if s != r {
            return Err(format!("ycsb: scale {s} and records {r} disagree; give one"));
        }
    }
    if let Some(n) = o.records.or(o.scale) {
        cfg.record_count = n;
    }
    if let Some(txn) = &o.txn {
        let p = match txn.as_str() {
            "read" => [1.0, 0.0, 0.0, 0.0, 0.0],
            "update" => [0.0, 1.0, 0.0, 0.0, 0.0],
            "insert" => [0.0, 0.0, 1.0, 0.0, 0.0],
            "scan" => [0.0, 0.0, 0.0, 1.0, 0.0],
            "read-modify-write" => [0.0, 0.0, 0.0, 0.0, 1.0],
            _ => {
                return Err(format!(
                    "unknown YCSB operation {txn:?}: use read, update, insert, scan or \
                     read-modify-write"
                ))
            }
        };
        cfg.read_proportion = p[0];
        cfg.update_proportion = p[1];
        cfg.insert_proportion = p[2];
        cfg.scan_proportion = p[3];
        cfg.read_modify_write_proportion = p[4];
    }
    if let Some(d) = &o.distribution {
        cfg.request_distribution = match d.as_str() {
            "uniform" => RequestDistribution::Uniform,
            "zipfian" => RequestDistribution::Zipfian,
            "scrambled-zipfian" => RequestDistribution::ScrambledZipfian,
            "latest" => RequestDistribution::Latest,
            "hotspot" => RequestDistribution::Hotspot,
            "nstore-skew" => RequestDistribution::NstoreSkew,
            _ => {
                return Err(format!(
                    "unknown YCSB distribution {d:?}: use uniform, zipfian, scrambled-zipfian, \
                     latest, hotspot or nstore-skew"
                ))
            }
        };
    }
    if let (Some(s), RequestDistribution::NstoreSkew) = (&o.skew, cfg.request_distribution) {
        cfg.nstore_skew = match s.as_str() {
            "low" => 0.1,
            "high" => 0.5,
            n => n.parse().map_err(|_| {
                format!("nstore-skew: skew must be a number in (0, 1), low or high, not {n:?}")
            })?,
        };
    } else if let Some(s) = &o.skew {
        if cfg.request_distribution != RequestDistribution::Hotspot && o.distribution.is_some() {
            return Err("skew implies the hotspot distribution; drop distribution".to_string());
        }
        let (set, ops) = Skew::parse(s)?.fractions();
        cfg.request_distribution = RequestDistribution::Hotspot;
        cfg.hot_set_fraction = set;
        cfg.hot_ops_fraction = ops;
    }
    if let Some(t) = o.theta {
        cfg.zipfian_theta = t;
    }
    if let Some(f) = o.hot_set_fraction {
        cfg.hot_set_fraction = f;
    }
    if let Some(f) = o.hot_ops_fraction {
        cfg.hot_ops_fraction = f;
    }
    if let Some(n) = o.field_count {
        cfg.field_count = n;
    }
    if let Some(n) = o.field_length {
        cfg.field_length = n;
    }
    if let Some(n) = o.max_retries {
        cfg.max_retries = n;
    }
    Ycsb::new(cfg)
}

/// Only the default (full) mix exists for TPC-B, TPC-C and TATP; `txn` picks one type.
fn standard_mix(workload: &str, mix: &Option<String>) -> Result<(), String> {
    match mix.as_deref() {
        None | Some("standard") => Ok(()),
        Some(m) => Err(format!("{workload} has only the standard mix, not {m:?}; use txn")),
    }
}

/// Mobibench: `txn` = insert (default), update or delete; `ops_per_txn` = N; `records`.
fn mobibench(o: &WorkloadOptions) -> Result<Mobibench, String> {
    o.only("mobibench", &["txn", "ops_per_txn", "records", "max_retries"])?;
    let op = match o.txn.as_deref() {
        None => MobiOp::Insert,
        Some(t) => MobiOp::parse(t).ok_or_else(|| {
            format!("unknown mobibench transaction {t:?}: insert, update or delete")
        })?,
    };
    let mut cfg = MobibenchConfig::new(op);
    if let Some(n) = o.ops_per_txn {
        cfg.ops_per_txn = n;
    }
    if let Some(n) = o.records {
        cfg.records = n;
    }
    if let Some(n) = o.max_retries {
        cfg.max_retries = n;
    }
    Mobibench::new(cfg)
}

fn tpcb(o: &WorkloadOptions) -> Result<Tpcb, String> {
    let allowed =
        ["scale", "mix", "txn", "accounts_per_branch", "max_retries", "for_update", "history_last"];
    o.only("tpcb", &allowed)?;
    standard_mix("tpcb", &o.mix)?;
    if let Some(t) = &o.txn {
        if t != "account-update" {
            return Err(format!("unknown TPC-B transaction {t:?}: it has only account-update"));
        }
    }
    let mut cfg = TpcbConfig::default();
    if let Some(s) = o.scale {
        cfg.branches = s;
    }
    if let Some(n) = o.accounts_per_branch {
        cfg.accounts_per_branch = n;
    }
    if let Some(n) = o.max_retries {
        cfg.max_retries = n;
    }
    if let Some(f) = o.for_update {
        cfg.for_update = f;
    }
    if let Some(h) = o.history_last {
        cfg.history_last = h;
    }
    Tpcb::new(cfg)
}

fn tpcc(o: &WorkloadOptions) -> Result<Tpcc, String> {
    o.only("tpcc", &["scale", "mix", "txn", "items", "customers_per_district", "max_retries"])?;
    standard_mix("tpcc", &o.mix)?;
    let mut cfg = TpccConfig::default();
    if let Some(s) = o.scale {
        cfg.warehouses =
            u32::try_from(s).map_err(|_| format!("tpcc: scale {s} is too many warehouses"))?;
    }
    if let Some(t) = &o.txn {
        cfg.txn = Some(TpccTxn::parse(t)?);
    }
    if let Some(n) = o.items {
        cfg.items = n;
    }
    if let Some(n) = o.customers_per_district {
        cfg.customers_per_district = n;
    }
    if let Some(n) = o.max_retries {
        cfg.max_retries = n;
    }
    Tpcc::new(cfg)
}

fn tatp(o: &WorkloadOptions) -> Result<Tatp, String> {
    o.only("tatp", &["scale", "records", "mix", "txn", "distribution", "max_retries"])?;
    standard_mix("tatp", &o.mix)?;
    let mut cfg = TatpConfig::default();
    match (o.scale, o.records) {
        (Some(_), Some(_)) => return Err("tatp: give scale or records, not both".to_string()),
        (Some(s), None) => {
            cfg.subscribers = s
                .checked_mul(SUBSCRIBERS_PER_SCALE)
                .ok_or_else(|| format!("tatp: scale {s} is too large"))?
        }
        (None, Some(r)) => cfg.subscribers = r,
        (None, None) => {}
    }
    if let Some(t) = &o.txn {
        cfg.txn = Some(TatpTxn::parse(t)?);
    }
    if let Some(d) = &o.distribution {
        cfg.distribution = match d.as_str() {
            "nurand" | "non-uniform" => SubscriberDistribution::NonUniform,
            "uniform" => SubscriberDistribution::Uniform,
            _ => return Err(format!("unknown TATP distribution {d:?}: use nurand or uniform")),
        };
    }
    if let Some(n) = o.max_retries {
        cfg.max_retries = n;
    }
    Tatp::new(cfg)
}

//! The workload flags shared by `nvmdb bench` and `nvmdb crashtest`, and how they become
//! `workloads::WorkloadOptions`: the dedicated flags, then `--workload-opt KEY=VALUE` pairs laid
//! over them (values that parse as numbers are numbers; unknown keys are errors). Also the
//! `KEY=VALUE` parser both commands use for `--engine-opt`.

use std::collections::BTreeMap;
use workloads::WorkloadOptions;

/// `KEY=VALUE` pairs; an empty key or a key given twice is an error (the message names the pair).
pub fn key_values(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(format!("`{pair}` is not KEY=VALUE"));
        };
        if map.insert(key.trim().to_string(), value.trim().to_string()).is_some() {
            return Err(format!("`{key}` given twice"));
        }
    }
    Ok(map)
}

#[derive(clap::Args, Debug, Default, Clone)]
pub struct WorkloadFlags {
    /// Workload mix (YCSB: a..f, read-only, read-heavy, balanced, write-heavy).
    #[arg(long)]
    pub mix: Option<String>,
    /// Run only this transaction type (e.g. tpcc new-order, tatp update-location).
    #[arg(long)]
    pub txn: Option<String>,
    /// Scale factor (TPC-B branches, TPC-C warehouses, TATP subscribers in units of 10,000).
    #[arg(long, value_parser = super::numeric::whole::<u64>(1, 1 << 20))]
    pub scale: Option<u64>,
    /// YCSB record count (TATP: subscriber count).
    #[arg(long, value_parser = super::numeric::whole::<u64>(1, 1 << 40))]
    pub records: Option<u64>,
    /// Request distribution (YCSB: uniform, zipfian, scrambled-zipfian, latest, hotspot;
    /// TATP: nurand, uniform).
    #[arg(long)]
    pub distribution: Option<String>,
    /// YCSB: N-Store skew, low or high (implies the hotspot distribution).
    #[arg(long)]
    pub skew: Option<String>,
    /// YCSB: zipfian constant θ in (0, 1).
    #[arg(long, allow_hyphen_values = true, value_parser = super::numeric::real_between(0.0, 1.0))]
    pub theta: Option<f64>,
    /// Any other workload option KEY=VALUE (repeatable), e.g. field_length=100,
    /// accounts_per_branch=1000, items=1000, max_retries=100.
    #[arg(long = "workload-opt", value_name = "KEY=VALUE")]
    pub workload_opt: Vec<String>,
}

impl WorkloadFlags {
    /// The options these flags describe; `Err` is a one-line message about `--workload-opt`.
    pub fn options(&self) -> Result<WorkloadOptions, String> {
        let base = WorkloadOptions {
            scale: self.scale,
            records: self.records,
            mix: self.mix.clone(),
            txn: self.txn.clone(),
            distribution: self.distribution.clone(),
            theta: self.theta,
            skew: self.skew.clone(),
            ..WorkloadOptions::default()
        };
        if self.workload_opt.is_empty() {
            return Ok(base);
        }
        let mut value = serde_json::to_value(&base).map_err(|e| e.to_string())?;
        let Some(map) = value.as_object_mut() else {
            return Err("workload options are not an object".into());
        };
        for (key, text) in key_values(&self.workload_opt)? {
            let parsed = if let Ok(n) = text.parse::<u64>() {
                serde_json::Value::from(n)
            } else if let Ok(x) = text.parse::<f64>() {
                serde_json::Value::from(x)
            } else {
                serde_json::Value::from(text)
            };
            map.insert(key.replace('-', "_"), parsed);
        }
        serde_json::from_value(value).map_err(|e| e.to_string())
    }
}

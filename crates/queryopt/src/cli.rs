//! `nvmdb scan` and `nvmdb join`: flags, validation (one-line errors, exit 2 through the
//! binary), and output as a table or one JSON object.

use crate::error::{invalid, Result};
use crate::join::{JoinAlgo, MIN_MEMORY_PAGES};
use crate::report::{self, DeviceKind, JoinOptions, ScanOptions};
use crate::scan::{ScanOp, ScanParams};
use std::path::PathBuf;

/// Table 3.1's table sizes in GB (R × S).
pub const TABLE_3_1_GB: &[(f64, f64)] =
    &[(1.9, 1.9), (3.9, 3.9), (3.9, 6.8), (6.8, 6.8), (6.8, 9.7), (9.7, 9.7)];

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// Rows of the Wisconsin table (the thesis: 10,000,000).
    #[arg(long, default_value_t = 200_000)]
    pub rows: u64,
    /// Devices, comma-separated: ssd-model, disk-model, file (a real file with O_DIRECT).
    #[arg(long, default_value = "ssd-model,disk-model")]
    pub device: String,
    /// Directory (or file) for the file device; must be on a block device (not tmpfs).
    #[arg(long, default_value = ".")]
    pub path: PathBuf,
    /// Selectivities, comma-separated fractions (0.01 = 1%); default a 1e-6..1 grid.
    #[arg(long)]
    pub selectivity: Option<String>,
    /// relation, index, rowid-sort or all (comma-separated).
    #[arg(long, default_value = "all")]
    pub operator: String,
    /// Buffer-pool frames of the index scan (the memory limit), in 4 KiB pages.
    #[arg(long, default_value_t = 256)]
    pub memory_pages: usize,
    /// Pages per sequential request (prefetch size).
    #[arg(long, default_value_t = 32)]
    pub extent_pages: usize,
    /// Tuples per 4 KiB page (19: the 208-byte Wisconsin tuple); a list with
    /// --expected-pages (default 19,29,30).
    #[arg(long)]
    pub tuples_per_page: Option<String>,
    /// Measured distinct pages of rowid-sort scans vs Yao's expectation (Fig. 3.3) instead of
    /// the timing sweep.
    #[arg(long)]
    pub expected_pages: bool,
    /// Stop running index/rowid-sort scans once this many times slower than the best.
    #[arg(long, default_value_t = 10.0)]
    pub prune: f64,
    /// If the file system refuses O_DIRECT, read through the page cache (with a notice).
    #[arg(long)]
    pub allow_buffered: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct JoinArgs {
    /// Rows of R (the build/inner relation).
    #[arg(long, default_value_t = 100_000)]
    pub rows_r: u64,
    /// Rows of S.
    #[arg(long, default_value_t = 100_000)]
    pub rows_s: u64,
    /// Table 3.1's six size pairs (1.9×1.9 … 9.7×9.7 GB) scaled by --rows-per-gb, instead of
    /// --rows-r/--rows-s.
    #[arg(long = "table-3-1")]
    pub table_3_1: bool,
    /// Rows per GB of the thesis's tables when scaling Table 3.1 (the thesis: ~5,000,000).
    #[arg(long, default_value_t = 50_000)]
    pub rows_per_gb: u64,
    /// Fractions of tuple bytes kept, comma-separated (the thesis: 0.05 and 0.25).
    #[arg(long, default_value = "0.05")]
    pub projectivity: String,
    /// sort-merge, hybrid-hash, nested-loop (in memory, tiny tables) or all (= the first two).
    #[arg(long, default_value = "all")]
    pub algorithm: String,
    /// Memory limit in 4 KiB pages for buffers, sort areas and hash tables.
    #[arg(long, default_value_t = 256)]
    pub memory_pages: usize,
    /// Pages per sequential request (capped at a quarter of memory).
    #[arg(long, default_value_t = 32)]
    pub extent_pages: usize,
    /// Devices, comma-separated: ssd-model, disk-model, file.
    #[arg(long, default_value = "ssd-model,disk-model")]
    pub device: String,
    /// Directory (or file) for the file device.
    #[arg(long, default_value = ".")]
    pub path: PathBuf,
    #[arg(long)]
    pub allow_buffered: bool,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn list<T>(s: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(parse).collect()
}

fn fraction(name: &'static str, s: &str) -> Result<f64> {
    s.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| invalid(name, s, "a number such as 0.01"))
}

fn devices(s: &str, path: &std::path::Path) -> Result<Vec<DeviceKind>> {
    let kinds = list(s, |d| DeviceKind::parse(d, path))?;
    if kinds.is_empty() {
        return Err(invalid("device", s, "ssd-model, disk-model or file"));
    }
    Ok(kinds)
}

fn tpp_list(s: &str) -> Result<Vec<usize>> {
    list(s, |x| {
        x.parse::<usize>().map_err(|_| invalid("tuples-per-page", x, "a whole number such as 19"))
    })
}

fn print<T: serde::Serialize>(json: bool, value: &T, text: impl Fn(&T) -> String) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into()));
    } else {
        print!("{}", text(value));
    }
    Ok(())
}

/// `nvmdb scan`.
pub fn scan(a: ScanArgs) -> anyhow::Result<std::process::ExitCode> {
    if a.memory_pages == 0 {
        return Err(invalid("memory-pages", 0, "at least 1").into());
    }
    if a.extent_pages == 0 || a.extent_pages > 4096 {
        return Err(invalid("extent-pages", a.extent_pages, "1 to 4096").into());
    }
    if a.prune.is_nan() || a.prune < 1.0 {
        return Err(invalid("prune", a.prune, "a factor of at least 1").into());
    }
    let sels = match &a.selectivity {
        Some(s) => list(s, |x| fraction("selectivity", x))?,
        None if a.expected_pages => report::PAGES_SELECTIVITIES.to_vec(),
        None => report::DEFAULT_SELECTIVITIES.to_vec(),
    };
    if let Some(bad) = sels.iter().find(|s| !(0.0..=1.0).contains(*s)) {
        return Err(invalid("selectivity", bad, "fractions in [0, 1] (0.01 = 1%)").into());
    }
    if a.expected_pages {
        let tpps = tpp_list(a.tuples_per_page.as_deref().unwrap_or("19,29,30"))?;
        let r = report::pages_report(a.rows, &tpps, &sels, a.seed)?;
        print(a.json, &r, report::pages_text)?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let tpps = tpp_list(a.tuples_per_page.as_deref().unwrap_or("19"))?;
    let [tpp] = tpps[..] else {
        return Err(
            invalid("tuples-per-page", tpps.len(), "one value (lists: --expected-pages)").into()
        );
    };
    let operators =
        if a.operator == "all" { ScanOp::ALL.to_vec() } else { list(&a.operator, ScanOp::parse)? };
    let kinds = devices(&a.device, &a.path)?;
    crate::wisconsin::Layout::new(a.rows, tpp)?;
    let opts = ScanOptions {
        rows: a.rows,
        tuples_per_page: tpp,
        selectivities: sels,
        operators,
        params: ScanParams { extent_pages: a.extent_pages, buffer_pages: a.memory_pages },
        seed: a.seed,
        prune_factor: a.prune,
        allow_buffered: a.allow_buffered,
    };
    let r = report::scan_report(&kinds, &opts)?;
    print(a.json, &r, report::scan_text)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// `nvmdb join`.
pub fn join(a: JoinArgs) -> anyhow::Result<std::process::ExitCode> {
    if a.memory_pages < MIN_MEMORY_PAGES {
        let expected = format!("at least {MIN_MEMORY_PAGES}");
        return Err(invalid("memory-pages", a.memory_pages, expected).into());
    }
    if a.extent_pages == 0 || a.extent_pages > 4096 {
        return Err(invalid("extent-pages", a.extent_pages, "1 to 4096").into());
    }
    let projectivities = list(&a.projectivity, |x| fraction("projectivity", x))?;
    for &p in &projectivities {
        crate::join::record_bytes(p, crate::wisconsin::TUPLE_BYTES)?;
    }
    let algorithms = if a.algorithm == "all" {
        vec![JoinAlgo::SortMerge, JoinAlgo::HybridHash]
    } else {
        list(&a.algorithm, JoinAlgo::parse)?
    };
    let sizes = if a.table_3_1 {
        if a.rows_per_gb == 0 {
            return Err(invalid("rows-per-gb", 0, "at least 1").into());
        }
        let rows = |gb: f64| (gb * a.rows_per_gb as f64).round() as u64;
        TABLE_3_1_GB.iter().map(|&(r, s)| (rows(r), rows(s))).collect()
    } else {
        vec![(a.rows_r, a.rows_s)]
    };
    for &(r, s) in &sizes {
        crate::wisconsin::Layout::new(r, 19)?;
        crate::wisconsin::Layout::new(s, 19)?;
    }
    let nested = algorithms.contains(&JoinAlgo::NestedLoop);
    if nested && sizes.iter().any(|&(r, s)| r * s > 100_000_000) {
        return Err(invalid(
            "algorithm",
            "nested-loop",
            "tables with rows-r × rows-s ≤ 1e8 (it is the in-memory reference)",
        )
        .into());
    }
    let opts = JoinOptions {
        sizes,
        projectivities,
        algorithms,
        memory_pages: a.memory_pages,
        extent_pages: a.extent_pages,
        seed: a.seed,
        allow_buffered: a.allow_buffered,
    };
    let r = report::join_report(&devices(&a.device, &a.path)?, &opts)?;
    print(a.json, &r, report::join_text)?;
    Ok(std::process::ExitCode::SUCCESS)
}

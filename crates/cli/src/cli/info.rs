//! `nvmdb info`: what this machine offers for persistent memory (docs/design.md §2): the CPU's
//! flush instructions and which one regions use, the TSC behind the timing model, whether `--path`
//! is on a DAX file system, the platform's persistence domain (eADR), and what each medium's
//! persist does and survives.

use anyhow::Context;
use pmem::{CpuFlushSupport, FlushKind, Medium, Tsc};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Also tell whether this path (a file, or where one would be created) is on a DAX file
    /// system.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Machine-readable output (one JSON object).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Info {
    cpu: CpuInfo,
    tsc: TscInfo,
    path: Option<PathInfo>,
    /// NVDIMM regions the kernel knows (`/sys/bus/nd`), with their persistence domain.
    nvdimm_regions: Vec<NvdimmRegion>,
    /// Durable CPU caches: `Some(true)` when an NVDIMM region reports `cpu_cache`.
    eadr: Option<bool>,
    media: Vec<MediumInfo>,
}

#[derive(Serialize)]
struct CpuInfo {
    clwb: bool,
    clflushopt: bool,
    clflush: bool,
    /// What regions use unless told otherwise (`--flush`).
    selected: FlushKind,
}

#[derive(Serialize)]
struct TscInfo {
    frequency_hz: f64,
    invariant: bool,
    /// Fixed cost taken off every modelled delay.
    delay_overhead_ns: f64,
}

#[derive(Serialize)]
struct PathInfo {
    path: PathBuf,
    filesystem: String,
    dax: bool,
}

#[derive(Serialize)]
struct NvdimmRegion {
    region: String,
    /// `cpu_cache` (eADR: caches are durable) or `memory_controller` (ADR: flush needed).
    persistence_domain: String,
}

#[derive(Serialize)]
struct MediumInfo {
    medium: Medium,
    persist: &'static str,
    survives_process_crash: &'static str,
    survives_power_loss: &'static str,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cpu = CpuFlushSupport::detect();
    let tsc = Tsc::get();
    let path = args.path.as_deref().map(path_info).transpose()?;
    let nvdimm_regions = nvdimm_regions();
    let eadr = if nvdimm_regions.is_empty() {
        None
    } else {
        Some(nvdimm_regions.iter().all(|r| r.persistence_domain == "cpu_cache"))
    };
    let info = Info {
        cpu: CpuInfo {
            clwb: cpu.clwb,
            clflushopt: cpu.clflushopt,
            clflush: cpu.clflush,
            selected: cpu.best(),
        },
        tsc: TscInfo {
            frequency_hz: tsc.frequency_hz(),
            invariant: Tsc::invariant(),
            delay_overhead_ns: tsc.overhead_ns(),
        },
        path,
        nvdimm_regions,
        eadr,
        media: Medium::ALL
            .into_iter()
            .map(|m| {
                let (process, power) = m.survives();
                MediumInfo {
                    medium: m,
                    persist: m.persist_action(),
                    survives_process_crash: process,
                    survives_power_loss: power,
                }
            })
            .collect(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print_human(&info);
    }
    Ok(ExitCode::SUCCESS)
}

fn path_info(path: &Path) -> anyhow::Result<PathInfo> {
    let dax = pmem::is_dax(path).with_context(|| format!("probing {} for DAX", path.display()))?;
    let filesystem = pmem::filesystem_name(path)?;
    Ok(PathInfo { path: path.to_path_buf(), filesystem, dax })
}

/// Reads `/sys/bus/nd/devices/region*/persistence_domain`; none on machines without NVDIMMs.
fn nvdimm_regions() -> Vec<NvdimmRegion> {
    let Ok(entries) = std::fs::read_dir("/sys/bus/nd/devices") else { return Vec::new() };
    let mut regions: Vec<NvdimmRegion> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("region"))
        .filter_map(|e| {
            let domain = std::fs::read_to_string(e.path().join("persistence_domain")).ok()?;
            Some(NvdimmRegion {
                region: e.file_name().to_string_lossy().into_owned(),
                persistence_domain: domain.trim().to_string(),
            })
        })
        .collect();
    regions.sort_by(|a, b| a.region.cmp(&b.region));
    regions
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn print_human(info: &Info) {
    let c = &info.cpu;
    println!("CPU flush instructions");
    println!("  clwb        {}", yes_no(c.clwb));
    println!("  clflushopt  {}", yes_no(c.clflushopt));
    println!("  clflush     {}", yes_no(c.clflush));
    println!("  selected    {} (the best available; --flush overrides)", c.selected.name());
    let t = &info.tsc;
    println!(
        "\nTSC           {:.1} MHz, {}invariant; delays take off {:.1} ns of loop overhead",
        t.frequency_hz / 1e6,
        if t.invariant { "" } else { "NOT " },
        t.delay_overhead_ns
    );
    if !t.invariant {
        println!("              (modelled delays drift with the clock speed on this CPU)");
    }
    match &info.path {
        Some(p) if p.dax => println!(
            "\nPath          {} ({}): DAX; --medium dax maps it with MAP_SYNC",
            p.path.display(),
            p.filesystem
        ),
        Some(p) => println!(
            "\nPath          {} ({}): not DAX; use --medium file (--sync msync to survive \
             power loss) or shm",
            p.path.display(),
            p.filesystem
        ),
        None => println!("\nPath          (give --path to test a file system for DAX)"),
    }
    if info.nvdimm_regions.is_empty() {
        println!("NVDIMMs       none found in /sys/bus/nd; eADR unknown (--eadr asserts it)");
    } else {
        for r in &info.nvdimm_regions {
            println!("NVDIMM        {}: persistence domain {}", r.region, r.persistence_domain);
        }
        let eadr = info.eadr == Some(true);
        println!(
            "eADR          {}",
            if eadr {
                "yes: CPU caches are durable; --eadr makes flushes no-ops"
            } else {
                "no: stores need a flush to persist"
            }
        );
    }
    println!("\nMedia");
    println!("  {:<6} {:<58} {:<14} power loss", "medium", "what a persist does", "process crash");
    for m in &info.media {
        println!(
            "  {:<6} {:<58} {:<14} {}",
            m.medium.name(),
            m.persist,
            m.survives_process_crash,
            m.survives_power_loss
        );
    }
}

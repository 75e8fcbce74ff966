use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Also tell whether this path is on a DAX file system.
    #[arg(long)]
    pub path: Option<std::path::PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let cpu = pmem::CpuFlushSupport::detect();
    println!(
        "clwb={} clflushopt={} clflush={} selected={}",
        cpu.clwb,
        cpu.clflushopt,
        cpu.clflush,
        cpu.best().name()
    );
    let _ = args;
    Ok(ExitCode::SUCCESS)
}

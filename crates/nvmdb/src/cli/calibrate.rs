use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    let tsc = pmem::Tsc::get();
    println!("tsc_hz={:.0}", tsc.frequency_hz());
    Ok(ExitCode::SUCCESS)
}

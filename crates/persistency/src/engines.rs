//! The analyser on nvmdb's own engines (beyond the thesis). Filled in below.

use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    pub json: bool,
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    Err(crate::error::invalid("engines", "not built yet").into())
}

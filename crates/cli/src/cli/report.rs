//! `nvmdb report DIR`: figures (SVG, PNG), `index.html`, `report.md` and `verdicts.json` from a
//! sweep's results, each figure beside the paper's claims and a verdict (docs/design.md §6). The
//! work lives in `experiments::report`.

use experiments::report::{self, ReportOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A sweep's output directory (with results.jsonl).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Also report these specs (files or directories), even without results; a spec given here
    /// replaces the copy the sweep saved.
    #[arg(long = "spec", value_name = "SPEC")]
    pub specs: Vec<PathBuf>,
    /// Write the report here instead of DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also report a seed run by its own command (repeatable): the directory its command wrote,
    /// with `*experiment.json` manifests (`results/persistency`, `results/queryopt`,
    /// `results/dcpower`).
    #[arg(long = "seed", value_name = "DIR")]
    pub seeds: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options =
        ReportOptions { dir: args.dir, specs: args.specs, out: args.out, seeds: args.seeds };
    let built = report::build(&options)?;
    let written = report::write(&built)?;
    print!("{}", report::markdown(&built));
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

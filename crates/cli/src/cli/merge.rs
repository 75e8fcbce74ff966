//! `nvmdb merge DIR... --out DIR`: join the output directories of sharded sweeps (one per
//! machine or array task) into one, keeping one row per run (docs/design.md §6). The work lives in
//! `experiments::results::merge`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output directories of `nvmdb sweep` (one per shard).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged results.jsonl and specs go (may be one of the inputs).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    for dir in &args.dirs {
        if !dir.join(experiments::results::RESULTS_FILE).is_file() {
            anyhow::bail!(
                "{}: no results.jsonl (is it an `nvmdb sweep --out` directory?)",
                dir.display()
            );
        }
    }
    let stats = experiments::results::merge(&args.dirs, &args.out)?;
    println!(
        "merged {} directories: {} rows read, {} duplicates dropped, {} rows in {}/results.jsonl, \
         {} spec copies",
        stats.inputs,
        stats.rows_read,
        stats.duplicates,
        stats.rows_written,
        args.out.display(),
        stats.specs
    );
    if stats.skipped_lines > 0 {
        eprintln!("warning: {} unreadable line(s) were skipped", stats.skipped_lines);
    }
    Ok(ExitCode::SUCCESS)
}

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
    /// A rerun: drop every row the output directory holds of a spec the inputs hold rows of,
    /// so that spec's verdicts come from the inputs' sitting alone (without it, a run the output
    /// already holds is kept and the rerun's copy dropped as a duplicate).
    #[arg(long, conflicts_with = "replace_points")]
    pub replace: bool,
    /// A partial rerun: drop only the rows the output directory holds of the points (every
    /// repetition) the inputs hold rows of, keeping the spec's other points (its verdicts then
    /// mix two sittings).
    #[arg(long)]
    pub replace_points: bool,
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
    let stats = if args.replace {
        experiments::results::merge_replacing(&args.dirs, &args.out)?
    } else if args.replace_points {
        experiments::results::merge_replacing_points(&args.dirs, &args.out)?
    } else {
        experiments::results::merge(&args.dirs, &args.out)?
    };
    println!(
        "merged {} directories: {} rows read, {} rows replaced, {} duplicates dropped, {} rows in \
         {}/results.jsonl, {} spec copies",
        stats.inputs,
        stats.rows_read,
        stats.replaced,
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

//! `nvmdb dcpower model|route`: the data-centre power model of thesis app. A (Table A.3, Fig.
//! A.10) and Power Routing of app. B (capacity with and without routing per topology, on
//! synthetic traces). The work is in the `dcpower` crate; this module parses flags and prints.

use dcpower::schedule::Mix;
use dcpower::topology::Kind;
use dcpower::trace::TraceSpec;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(clap::Subcommand)]
pub enum Sub {
    /// Table A.3's hypothetical data centres at U = 25%: power by subsystem and PUE, beside the
    /// paper's numbers.
    Model(ModelArgs),
    /// Provisioned capacity with and without Power Routing per topology, vs the bound
    /// (synthetic traces).
    Route(RouteArgs),
}

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Data-centre utilisation U in [0, 1].
    #[arg(
        long,
        default_value_t = dcpower::report::CASE_STUDY_U,
        allow_hyphen_values = true,
        value_parser = super::numeric::real_in(0.0, 1.0),
    )]
    pub utilisation: f64,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct RouteArgs {
    /// wrapped, x-y, serpentine, fully-connected, or all.
    #[arg(long, default_value = "all")]
    pub topology: String,
    /// Number of PDUs.
    #[arg(long, default_value_t = 6, value_parser = super::numeric::whole::<usize>(1, 1 << 16))]
    pub pdus: usize,
    /// Servers in the synthetic facility.
    #[arg(long, default_value_t = 1000, value_parser = super::numeric::whole::<usize>(1, 1 << 24))]
    pub servers: usize,
    /// Trace length in minutes.
    #[arg(long, default_value_t = 1440, value_parser = super::numeric::whole::<usize>(1, 1 << 24))]
    pub minutes: usize,
    /// Server idle power as a fraction of peak (0.1 for Fig. B.10's energy-proportional servers).
    #[arg(
        long,
        default_value_t = 0.6,
        allow_hyphen_values = true,
        value_parser = super::numeric::real_in(0.0, 1.0),
    )]
    pub idle_fraction: f64,
    /// Servers per rack (a rack shares one PDU pair).
    #[arg(long, default_value_t = 20, value_parser = super::numeric::whole::<usize>(1, 1 << 16))]
    pub servers_per_rack: usize,
    /// How a zone's PDU pairs spread over its racks: blocks (neighbouring racks share a pair),
    /// per-rack (racks take the pairs in turn) or within-rack (servers cycle over them).
    #[arg(long, default_value = "blocks")]
    pub layout: String,
    /// Trace generator seed.
    #[arg(long, default_value_t = 1, value_parser = super::numeric::any_u64())]
    pub seed: u64,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Model(a) => {
            let report = dcpower::report::model_report(a.utilisation)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", dcpower::report::model_text(&report));
            }
        }
        Sub::Route(a) => {
            let kinds = if a.topology.eq_ignore_ascii_case("all") {
                Kind::ALL.to_vec()
            } else {
                vec![a.topology.parse::<Kind>()?]
            };
            let trace = TraceSpec {
                servers: a.servers,
                minutes: a.minutes,
                idle_fraction: a.idle_fraction,
                seed: a.seed,
            };
            let mix = match a.layout.as_str() {
                "blocks" => Mix::Blocks,
                "per-rack" => Mix::PerRack,
                "within-rack" => Mix::WithinRack,
                other => anyhow::bail!(
                    "invalid layout = {other}: expected blocks, per-rack or within-rack"
                ),
            };
            let report =
                dcpower::report::route_report(&kinds, a.pdus, a.servers_per_rack, mix, trace)?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", dcpower::report::route_text(&report));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

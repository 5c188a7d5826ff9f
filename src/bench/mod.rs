//! `ringbroker bench`: the load generator. Producers and consumers are instances of the
//! project's own Kafka client ([`crate::client`]), so it measures any Kafka-compatible broker.
//!
//! - [`args`]: the command line; [`run`]: the produce / consume / e2e workloads
//! - [`rate`]: the open-loop schedule (`--rate`); [`record_size`], [`payload`], [`rng`]
//! - [`stats`]: HDR histograms and per-second series; [`report`]: table, results.json, csv;
//!   [`hgrm`]: the `.hgrm` percentile distribution; [`chart`]: chart.svg; [`output`]: `--out`
//! - [`progress`]: the live line on stderr
pub mod args;
pub mod chart;
pub mod hgrm;
pub mod output;
pub mod payload;
pub mod progress;
pub mod rate;
pub mod record_size;
pub mod report;
pub mod rng;
pub mod run;
pub mod stats;

pub use args::{BenchArgs, BenchCommand};
pub use run::{run, BenchError, Outcome};

/// Runs a bench command: prints the summary on stdout and writes `--out` files.
pub fn main(command: BenchCommand) -> Result<Outcome, BenchError> {
    let outcome = run(command)?;
    print!("{}", report::summary_table(&outcome));
    if let Some(dir) = &outcome.args.out {
        output::write_all(&outcome, dir)?;
        println!("\nwrote {} in {}", output::FILES.join(", "), dir.display());
    }
    Ok(outcome)
}

//! `ringbroker bench`: the load generator. Producers and consumers are instances of the
//! project's own Kafka client ([`crate::client`]), so it measures any Kafka-compatible broker.
//!
//! - [`args`]: the command line; [`run`]: the produce / consume / e2e workloads
//! - [`rate`]: the open-loop schedule (`--rate`); [`record_size`], [`payload`], [`rng`]
//! - [`stats`]: HDR histograms and per-second series; [`report`]: table, results.json, csv;
//!   [`hgrm`]: the `.hgrm` percentile distribution; [`chart`]: chart.svg; [`output`]: `--out`
//! - [`progress`]: the live line on stderr; [`broker_breakdown`]: the broker's own stage
//!   latencies (ringbroker's `/metrics/stages.json`) over the run
pub mod args;
pub mod broker_breakdown;
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
    let args = command.args();
    let metrics =
        broker_breakdown::metrics_address(args.broker_metrics.as_deref(), &args.bootstrap);
    // Another broker (or a ringbroker without the endpoint) simply has no breakdown.
    let before = metrics
        .as_deref()
        .and_then(|a| broker_breakdown::fetch(a).ok());
    let outcome = run(command)?;
    print!("{}", report::summary_table(&outcome));
    let after = match (&metrics, &before) {
        (Some(addr), Some(_)) => match broker_breakdown::fetch(addr) {
            Ok(v) => Some(v),
            Err(e) => {
                eprintln!("broker breakdown unavailable: {e}");
                None
            }
        },
        _ => None,
    };
    if let Some(after) = &after {
        print!("{}", broker_breakdown::table(before.as_ref(), after));
    }
    if let Some(dir) = &outcome.args.out {
        output::write_all(&outcome, dir)?;
        let mut files = output::FILES.join(", ");
        if let Some(after) = &after {
            output::write_broker_breakdown(
                dir,
                &broker_breakdown::to_json(before.as_ref(), after),
            )?;
            files.push_str(", broker_breakdown.json");
        }
        println!("\nwrote {files} in {}", dir.display());
    }
    Ok(outcome)
}

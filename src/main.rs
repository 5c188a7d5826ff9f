//! The `ringbroker` command line. Entry point only: each subcommand lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ringbroker",
    version,
    about = "A Kafka-compatible streaming broker, thread-per-core on io_uring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect partition logs on disk.
    #[command(subcommand)]
    Log(LogCommand),
}

#[derive(Subcommand)]
enum LogCommand {
    /// Print the segments and batches of a partition directory, checking every CRC (as
    /// kafka-dump-log.sh does). Read-only; run it on a stopped broker's data.
    ///
    /// Example: ringbroker log dump ./data/orders-0
    Dump {
        /// The partition directory (`<topic>-<partition>`).
        dir: PathBuf,
        /// Print one line per batch, not only per segment.
        #[arg(long)]
        batches: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Log(LogCommand::Dump { dir, batches }) => {
            match ringbroker::log::dump::dump_dir(&dir, batches, &mut std::io::stdout()) {
                Ok(summary) if summary.invalid_batches == 0 => ExitCode::SUCCESS,
                Ok(_) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: cannot dump {}: {e}", dir.display());
                    ExitCode::from(2)
                }
            }
        }
    }
}

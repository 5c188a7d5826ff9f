//! The `ringbroker` command line. Entry point only: each subcommand lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Survives `Vec::with_capacity(n)` with `n` read off the wire (see alloc_guard.rs).
#[global_allocator]
static ALLOCATOR: ringbroker::alloc_guard::GuardedAllocator =
    ringbroker::alloc_guard::GuardedAllocator;

#[derive(Parser)]
#[command(
    name = "ringbroker",
    version,
    about = "A Kafka-compatible streaming broker, thread-per-core on io_uring"
)]
struct Cli {
    /// Log lines on stderr as `text` or `json` (one object per line); default text, or the
    /// environment variable RINGBROKER_LOG_FORMAT.
    #[arg(long, global = true, value_name = "text|json")]
    log_format: Option<String>,
    /// Log level (error, warn, info, debug, trace) or tracing filter directives; RUST_LOG,
    /// when set, wins.
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker
    ///
    /// Examples:
    ///   ringbroker serve
    ///   ringbroker serve --listen 127.0.0.1:19092 --data-dir /var/lib/ringbroker --shards 4
    ///   ringbroker serve --config broker.toml
    ///   ringbroker serve --config tuning/profiles/durability.toml --check-config
    ///   ringbroker --log-format json serve
    #[command(verbatim_doc_comment)]
    Serve(ServeArgs),
    /// Inspect partition logs on disk
    #[command(subcommand)]
    Log(LogCommand),
    /// Load generator with HDR latency percentiles, against any Kafka-compatible broker
    ///
    /// Produce, consume or both (see docs/bench.md).
    ///
    /// Examples:
    ///   ringbroker bench produce --bootstrap 127.0.0.1:9092 --records 1000000 --out results/
    ///   ringbroker bench e2e --rate 50000 --duration 60s --warmup 10s --compression lz4
    #[command(subcommand, verbatim_doc_comment)]
    Bench(ringbroker::bench::BenchCommand),
    /// Manage topics: create, list, describe, delete, alter-config, add-partitions
    ///
    /// Examples:
    ///   ringbroker topic create orders -p 6 -c retention.ms=86400000
    ///   ringbroker topic describe orders -b 127.0.0.1:9092
    #[command(subcommand, verbatim_doc_comment)]
    Topic(ringbroker::cli::topic::TopicCommand),
    /// Manage consumer groups: list, describe (members, offsets, lag), delete, reset-offsets
    ///
    /// Examples:
    ///   ringbroker group describe billing
    ///   ringbroker group reset-offsets billing --topic orders --to-earliest --execute
    #[command(subcommand, verbatim_doc_comment)]
    Group(ringbroker::cli::group::GroupCommand),
    /// The cluster (cluster mode): the metadata quorum and the brokers
    ///
    /// Example:
    ///   ringbroker cluster status --controller 127.0.0.1:29091 --format json
    #[command(subcommand, verbatim_doc_comment)]
    Cluster(ringbroker::cli::cluster::ClusterCommand),
    /// Produce records from stdin or a file, one per line (like kcat -P)
    ///
    /// Waits for every delivery; prints a summary on stderr; exit code 1 if any record failed.
    ///
    /// Examples:
    ///   echo hello | ringbroker produce orders
    ///   ringbroker produce orders --key-separator : -H source=cli --compression zstd < lines.txt
    ///   ringbroker produce orders --partition 0 --acks 1 --file lines.txt
    #[command(verbatim_doc_comment)]
    Produce(ringbroker::cli::produce::ProduceArgs),
    /// Print records of a topic (like kcat -C), optionally as a consumer group member
    ///
    /// Examples:
    ///   ringbroker consume orders --from beginning -e
    ///   ringbroker consume orders -p 0 --from 1000 -n 10 --format '%p:%o %k=%s\n'
    ///   ringbroker consume orders --from @1700000000000 --format json
    ///   ringbroker consume orders --group billing --from beginning
    #[command(verbatim_doc_comment)]
    Consume(ringbroker::cli::consume::ConsumeArgs),
    /// Check the Linux settings a broker depends on; --apply changes the safe ones
    ///
    /// Checks memlock, open files, io_uring, vm.*, THP, net.*, CPU governor and cores,
    /// and the data directory's file system; --apply changes what is safe at runtime
    /// (sysctls, THP, CPU governor). Exit status: 0 all fine, 1 something is off, 2 error.
    /// See tuning/README.md.
    ///
    /// Examples:
    ///   ringbroker tune --check
    ///   ringbroker tune --check --profile latency --data-dir /var/lib/ringbroker
    ///   ringbroker tune --check --json --config broker.toml
    ///   ringbroker tune --apply --dry-run --profile latency
    ///   sudo ringbroker tune --apply
    #[command(verbatim_doc_comment)]
    Tune(ringbroker::tune::TuneArgs),
    /// Print docs/configuration.md, the property reference generated from the broker and
    /// topic property tables (a test fails when the committed file differs)
    #[command(hide = true)]
    ConfigReference,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// A TOML file of Kafka broker properties (`"log.dirs" = "/data"`, `num.partitions = 3`).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on (Kafka's `listeners`), e.g. 127.0.0.1:9092.
    #[arg(long)]
    listen: Option<String>,
    /// Data directory (Kafka's `log.dirs`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Number of shards (one executor per core by default).
    #[arg(long)]
    shards: Option<usize>,
    /// Any broker property, repeatable: --set num.partitions=3
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Validate the configuration, print every property with its effective value (marking
    /// those set explicitly) and exit: 0 if valid, 2 if not. Starts nothing, touches no files.
    #[arg(long)]
    check_config: bool,
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
    ringbroker::alloc_guard::keep_freed_buffers();
    let cli = Cli::parse();
    if let Err(e) = init_logging(&cli) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    match cli.command {
        // The KRaft properties' rules span several of them: checked together here too.
        Command::Serve(args) if args.check_config => match serve_config(args)
            .map_err(|e| e.to_string())
            .and_then(
                |config| match ringbroker::server::cluster_mode::check(&config) {
                    Ok(_) => Ok(config),
                    Err(e) => Err(e.to_string()),
                },
            ) {
            Ok(config) => {
                use std::io::Write;
                let mut text = ringbroker::config::listing::render(&config.effective_properties());
                text.push_str("# configuration is valid\n");
                match std::io::stdout().lock().write_all(text.as_bytes()) {
                    // A closed pipe (`| head`) is the reader's choice, not a failure.
                    Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                        eprintln!("error: cannot write the listing: {e}");
                        ExitCode::from(1)
                    }
                    _ => ExitCode::SUCCESS,
                }
            }
            Err(e) => {
                eprintln!("error: invalid configuration: {e}");
                ExitCode::from(2)
            }
        },
        Command::Serve(args) => match serve_config(args) {
            Ok(config) => match ringbroker::server::serve(config) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            },
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Bench(command) => match ringbroker::bench::main(command) {
            Ok(outcome) if ringbroker::bench::report::errors(&outcome).is_empty() => {
                ExitCode::SUCCESS
            }
            // The run completed but some records failed: the table says which errors.
            Ok(_) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        Command::Topic(command) => match ringbroker::cli::topic::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
        Command::Produce(args) => match ringbroker::cli::produce::run(args) {
            Ok(outcome) => outcome.exit_code(),
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
        Command::Cluster(command) => match ringbroker::cli::cluster::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
        Command::Group(command) => match ringbroker::cli::group::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
        Command::Consume(args) => match ringbroker::cli::consume::run(args) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                e.exit_code()
            }
        },
        Command::Tune(args) => match ringbroker::tune::main(&args, &mut std::io::stdout()) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
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
        Command::ConfigReference => {
            use std::io::Write;
            let text = ringbroker::config::reference::render();
            match std::io::stdout().lock().write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("error: cannot write the reference: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            }
        }
    }
}

fn init_logging(cli: &Cli) -> Result<(), ringbroker::logging::LoggingError> {
    let format = match &cli.log_format {
        Some(f) => f.parse()?,
        None => match std::env::var("RINGBROKER_LOG_FORMAT") {
            Ok(f) if !f.trim().is_empty() => f.parse()?,
            _ => ringbroker::logging::LogFormat::default(),
        },
    };
    ringbroker::logging::init(format, cli.log_level.as_deref())
}

fn serve_config(
    args: ServeArgs,
) -> Result<ringbroker::config::BrokerConfig, ringbroker::config::ConfigError> {
    let mut config = match &args.config {
        Some(path) => ringbroker::config::BrokerConfig::from_file(path)?,
        None => ringbroker::config::BrokerConfig::default(),
    };
    for pair in &args.set {
        let (name, value) =
            pair.split_once('=')
                .ok_or_else(|| ringbroker::config::ConfigError::BadValue {
                    name: pair.clone(),
                    reason: "expected NAME=VALUE".to_string(),
                })?;
        config.set(name.trim(), value.trim())?;
    }
    if let Some(listen) = &args.listen {
        // Only the client listener: a CONTROLLER listener from --set listeners stays.
        config.set_client_listener(listen)?;
    }
    if let Some(dir) = &args.data_dir {
        config.set_data_dir(dir.clone());
    }
    if let Some(shards) = args.shards {
        config.set("num.shards", &shards.to_string())?;
    }
    Ok(config)
}

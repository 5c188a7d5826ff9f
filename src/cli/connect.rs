//! Connection options shared by every client command, and connecting with them.

use std::time::Duration;

use crate::bench::args::parse_duration;
use crate::client::{ClientConfig, Cluster};

use super::explain::CliError;

/// `--bootstrap` and `--timeout`, flattened into each command.
#[derive(clap::Args, Debug, Clone)]
pub struct ConnectArgs {
    /// Brokers to bootstrap from, host:port[,host:port...].
    #[arg(
        long,
        short = 'b',
        env = "RINGBROKER_BOOTSTRAP",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap: String,
    /// Bound on connecting and on each request (an unreachable broker fails this fast).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
}

impl ConnectArgs {
    pub fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new(&self.bootstrap);
        config.client_id = "ringbroker-cli".into();
        config.request_timeout = self.timeout;
        config
    }

    /// Connects to the first bootstrap broker that answers.
    pub fn connect(&self) -> Result<Cluster, CliError> {
        Cluster::connect(self.client_config()).map_err(|source| CliError::Unreachable {
            bootstrap: self.bootstrap.clone(),
            source,
        })
    }
}

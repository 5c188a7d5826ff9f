//! `ringbroker cluster status`: the metadata quorum and the brokers, asked of a voter's
//! CONTROLLER listener (clients' listeners do not know the quorum). When the voter asked is
//! not the leader, the leader is asked too: only it knows each voter's log end.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::explain::CliError;
use super::table::{emit, emit_json, Format, OutputArgs, Table};
use crate::controller::quorum::status::fetch_status;
use crate::controller::quorum::status_report::ClusterStatusReport;

#[derive(clap::Subcommand, Debug)]
pub enum ClusterCommand {
    /// Show the controller quorum (voters, leader, each voter's log end and lag) and the
    /// brokers (endpoints, racks, fenced or not, broker epochs, the metadata offset each
    /// reported applied; known to the active controller).
    ///
    /// Examples:
    ///   ringbroker cluster status --controller 127.0.0.1:29091
    ///   ringbroker cluster status --controller 127.0.0.1:29091 --format json
    #[command(verbatim_doc_comment)]
    Status(StatusArgs),
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// A voter's CONTROLLER listener, host:port (one of `controller.quorum.voters`).
    #[arg(long, env = "RINGBROKER_CONTROLLER")]
    pub controller: String,
    /// Seconds to wait for each answer.
    #[arg(long, default_value_t = 5)]
    pub timeout: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: ClusterCommand) -> Result<(), CliError> {
    match command {
        ClusterCommand::Status(args) => status(args),
    }
}

fn resolve(text: &str) -> Result<SocketAddr, CliError> {
    text.to_socket_addrs()
        .map_err(|e| CliError::Usage(format!("--controller {text}: {e}")))?
        .next()
        .ok_or_else(|| CliError::Usage(format!("--controller {text}: no address")))
}

fn status(args: StatusArgs) -> Result<(), CliError> {
    let timeout = Duration::from_secs(args.timeout.max(1));
    let addr = resolve(&args.controller)?;
    let asked = fetch_status(addr, timeout).map_err(|e| {
        CliError::Refused(format!(
            "{e}; is --controller a voter's CONTROLLER listener?"
        ))
    })?;
    // Best effort: a leader that does not answer leaves the first report.
    let report = asked
        .leader
        .filter(|l| *l != asked.node_id)
        .and_then(|l| asked.voters.iter().find(|v| v.id == l))
        .and_then(|v| v.address.parse().ok())
        .and_then(|leader| fetch_status(leader, timeout).ok())
        .unwrap_or(asked);
    match args.output.format {
        Format::Json => emit_json(&report),
        Format::Table => emit(&render(&report)),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn render(r: &ClusterStatusReport) -> String {
    let mut out = format!(
        "quorum: leader {}, term {}, answered by {} (metadata offset {})\n\n",
        opt(r.leader.map(|l| l.0)),
        r.term,
        r.node_id,
        opt(r.metadata_offset.map(|o| o.0)),
    );
    let mut voters = Table::new(&["VOTER", "ADDRESS", "LEADER", "LOG END", "LAG"]);
    for v in &r.voters {
        voters.row(vec![
            v.id.to_string(),
            v.address.clone(),
            (r.leader == Some(v.id)).to_string(),
            opt(v.log_end),
            opt(v.lag),
        ]);
    }
    out.push_str(&voters.render());
    out.push('\n');
    let mut brokers = Table::new(&[
        "BROKER",
        "ENDPOINT",
        "RACK",
        "FENCED",
        "EPOCH",
        "METADATA-OFFSET",
    ]);
    for b in &r.brokers {
        brokers.row(vec![
            b.id.to_string(),
            b.endpoint.clone().unwrap_or_else(|| "-".to_string()),
            b.rack.clone().unwrap_or_else(|| "-".to_string()),
            b.fenced.to_string(),
            b.epoch.to_string(),
            opt(b.metadata_offset.map(|o| o.0)),
        ]);
    }
    out.push_str(&brokers.render());
    out
}

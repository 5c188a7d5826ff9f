//! What `ringbroker cluster status` shows: the quorum as one voter sees it (leader, term,
//! each voter's log end and lag, as known on the leader) and the brokers of its applied
//! metadata. Asked over the CONTROLLER listener ([`super::wire`]); the blocking client
//! here is for the command line, which runs no executor.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use futures_lite::io::AssertAsync;
use serde::{Deserialize, Serialize};

use super::network::CallError;
use super::state_machine::MetadataView;
use super::wire::{read_frame, write_frame, ControllerRequest, ControllerResponse};
use super::Raft;
use crate::controller::ids::{BrokerId, MetadataOffset};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterStatus {
    pub id: BrokerId,
    pub address: String,
    /// The last log index the leader knows this voter holds (the leader only knows).
    pub log_end: Option<u64>,
    /// Entries behind the leader's log end.
    pub lag: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerStatus {
    pub id: BrokerId,
    pub epoch: u64,
    pub endpoint: Option<String>,
    pub rack: Option<String>,
    pub fenced: bool,
    /// The metadata offset the broker last reported applied (known to the active
    /// controller, from heartbeats; absent elsewhere).
    #[serde(default)]
    pub metadata_offset: Option<MetadataOffset>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatusReport {
    /// The voter that answered.
    pub node_id: BrokerId,
    pub leader: Option<BrokerId>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    /// The metadata offset this voter has applied.
    pub metadata_offset: Option<MetadataOffset>,
    pub voters: Vec<VoterStatus>,
    pub brokers: Vec<BrokerStatus>,
}

/// The report of the node running `raft`.
pub fn report(raft: &Raft, view: &MetadataView) -> ClusterStatusReport {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let leader_end = m.last_log_index;
    let voters = m
        .membership_config
        .nodes()
        .map(|(id, node)| {
            // Only the leader tracks the voters' logs (its own end is its last index).
            let log_end = m.replication.as_ref().and_then(|r| match r.get(id) {
                Some(matched) => matched.map(|l| l.index),
                None if *id == m.id => leader_end,
                None => None,
            });
            VoterStatus {
                id: *id,
                address: node.addr.clone(),
                log_end,
                lag: log_end
                    .zip(leader_end)
                    .map(|(end, top)| top.saturating_sub(end)),
            }
        })
        .collect();
    let meta = view.get();
    let brokers = meta
        .brokers()
        .map(|b| BrokerStatus {
            id: b.id,
            epoch: b.epoch.0,
            endpoint: b
                .endpoints
                .first()
                .map(|e| format!("{}:{}", e.host, e.port)),
            rack: b.rack.clone(),
            fenced: b.fenced,
            metadata_offset: view.reported(b.id),
        })
        .collect();
    ClusterStatusReport {
        node_id: m.id,
        leader: m.current_leader,
        term: m.current_term,
        last_log_index: m.last_log_index,
        metadata_offset: meta.applied_offset(),
        voters,
        brokers,
    }
}

/// Asks the voter at `addr` for its report (blocking, bounded by `timeout` per step).
pub fn fetch_status(addr: SocketAddr, timeout: Duration) -> Result<ClusterStatusReport, CallError> {
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|source| CallError::Connect { addr, source })?;
    let set = stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)));
    set.map_err(|source| CallError::Connect { addr, source })?;
    // Blocking I/O polled by `block_on`: the command line runs no executor.
    let mut io = AssertAsync::new(stream);
    let wire = |source| CallError::Wire { addr, source };
    futures_lite::future::block_on(async {
        write_frame(&mut io, &ControllerRequest::Status)
            .await
            .map_err(wire)?;
        match read_frame(&mut io).await.map_err(wire)? {
            Some(ControllerResponse::Status(report)) => Ok(report),
            _ => Err(CallError::Unexpected { addr }),
        }
    })
}

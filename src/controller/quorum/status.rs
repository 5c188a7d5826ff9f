//! What `ringbroker cluster status` shows: the quorum as one voter sees it (leader, term,
//! each voter's log end and lag, as known on the leader) and the brokers of its applied
//! metadata. Asked over the CONTROLLER listener ([`super::wire`]); the blocking client
//! here is for the command line, which runs no executor.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use futures_lite::io::AssertAsync;

use super::network::CallError;
use super::state_machine::MetadataView;
use super::status_report::{BrokerStatus, ClusterStatusReport, VoterStatus};
use super::wire::{read_frame, write_frame, ControllerRequest, ControllerResponse};
use super::Raft;

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

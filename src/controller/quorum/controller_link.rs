//! A broker's line to the metadata quorum, on shard 0: forwards topic admin requests to the
//! active controller (Kafka's forwarding, KIP-590: any broker takes CreateTopics and the
//! like), and on a node that is not a voter follows the applied metadata by asking voters
//! for it ([`follow_metadata`]), so broker-only nodes hold the same metadata as voters.
//!
//! The active controller is found the way the broker session finds it: ask a voter, follow
//! its hint. Every call is bounded in time and attempts.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use crate::runtime::Instant;

use super::network::ControllerClient;
use super::state_machine::MetadataView;
use super::wire::{ControllerRequest, ControllerResponse};
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::topic_changes::{ChangeRefused, TopicChange};
use crate::model::{BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};
use crate::runtime;
use crate::util::shutdown::ShutdownSignal;

/// Why a forwarded request got no answer from the controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForwardError {
    #[error("no active controller answered within {0:?}")]
    NoController(Duration),
    #[error("the controller refused the request ({}): {}", .0.code, .0.message)]
    Refused(ChangeRefused),
}

/// The controller's answer to forwarded topic changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangesAnswer {
    pub results: Vec<Result<(), ChangeRefused>>,
    /// The offset to wait for before answering the client.
    pub committed: Option<MetadataOffset>,
}

/// A partition as the controller committed it, in answer to an AlterPartition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedPartition {
    pub isr: Vec<BrokerId>,
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

pub struct ControllerLink {
    voters: Vec<(BrokerId, String)>,
    /// One connection per voter, used one call at a time (calls wait for each other).
    clients: Vec<RefCell<Option<ControllerClient>>>,
    /// The voter tried first: the last one that answered as the controller.
    target: Cell<usize>,
}

/// How long one request to a voter may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(6);

impl ControllerLink {
    pub fn new(voters: Vec<(BrokerId, String)>) -> ControllerLink {
        let clients = voters
            .iter()
            .map(|(_, addr)| RefCell::new(Some(ControllerClient::new(addr))))
            .collect();
        ControllerLink {
            voters,
            clients,
            target: Cell::new(0),
        }
    }

    /// One call to voter `index`; waits while another call uses its connection.
    async fn call_voter(
        &self,
        index: usize,
        request: &ControllerRequest,
        timeout: Duration,
    ) -> Option<ControllerResponse> {
        let started = Instant::now();
        let mut client = loop {
            if let Some(c) = self.clients[index].borrow_mut().take() {
                break c;
            }
            if started.elapsed() >= timeout {
                return None;
            }
            runtime::sleep(Duration::from_millis(5)).await;
        };
        let left = timeout.saturating_sub(started.elapsed());
        let answer = client.call(request, left).await;
        *self.clients[index].borrow_mut() = Some(client);
        match answer {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::debug!(voter = %self.voters[index].1, error = %e, "controller call failed");
                None
            }
        }
    }

    /// Sends `changes` to the active controller within `within`.
    pub async fn forward(
        &self,
        changes: Vec<TopicChange>,
        validate_only: bool,
        within: Duration,
    ) -> Result<ChangesAnswer, ForwardError> {
        let request = ControllerRequest::TopicChanges {
            changes,
            validate_only,
        };
        match self.call_controller(&request, within).await? {
            ControllerResponse::TopicChanges { results, committed } => {
                Ok(ChangesAnswer { results, committed })
            }
            _ => Err(ForwardError::NoController(within)),
        }
    }

    /// Asks the active controller for an ISR change; the answer is the partition as committed.
    pub async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
        within: Duration,
    ) -> Result<CommittedPartition, ForwardError> {
        let request = ControllerRequest::AlterPartition(request);
        match self.call_controller(&request, within).await? {
            ControllerResponse::PartitionState {
                isr,
                leader,
                leader_epoch,
                partition_epoch,
            } => Ok(CommittedPartition {
                isr,
                leader,
                leader_epoch,
                partition_epoch,
            }),
            _ => Err(ForwardError::NoController(within)),
        }
    }

    /// A block of producer ids `start..end` for this broker, committed by the controller.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: BrokerId,
        broker_epoch: crate::model::BrokerEpoch,
        within: Duration,
    ) -> Result<(i64, i64), ForwardError> {
        let request = ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        };
        match self.call_controller(&request, within).await? {
            ControllerResponse::ProducerIds { start, end } => Ok((start, end)),
            _ => Err(ForwardError::NoController(within)),
        }
    }

    /// Sends `request` to the active controller (following NotController hints) within
    /// `within`; a refusal is an error, any other answer is the controller's.
    async fn call_controller(
        &self,
        request: &ControllerRequest,
        within: Duration,
    ) -> Result<ControllerResponse, ForwardError> {
        let started = Instant::now();
        let n = self.voters.len().max(1);
        while started.elapsed() < within {
            let index = self.target.get() % n;
            let left = within.saturating_sub(started.elapsed()).min(CALL_TIMEOUT);
            match self.call_voter(index, request, left).await {
                Some(ControllerResponse::Refused { code, message }) => {
                    return Err(ForwardError::Refused(ChangeRefused { code, message }))
                }
                Some(ControllerResponse::NotController { leader: Some(l) })
                    if self.voters.iter().any(|(id, _)| *id == l) && self.voters[index].0 != l =>
                {
                    let next = self.voters.iter().position(|(id, _)| *id == l);
                    self.target.set(next.unwrap_or(index + 1));
                    continue;
                }
                Some(ControllerResponse::NotController { .. }) | None => {
                    self.target.set((index + 1) % n)
                }
                Some(answer) => return Ok(answer),
            }
            // No leader known (an election): do not spin through the voters.
            runtime::sleep(Duration::from_millis(50)).await;
        }
        Err(ForwardError::NoController(within))
    }

    /// Fetches the applied metadata once it is past `after` from any voter; `None` when no
    /// voter had anything newer within a long poll.
    async fn fetch(&self, after: Option<MetadataOffset>) -> Option<ClusterMetadata> {
        let n = self.voters.len().max(1);
        let index = self.target.get() % n;
        let request = ControllerRequest::FetchMetadata {
            after,
            wait_ms: 2_000,
        };
        match self.call_voter(index, &request, CALL_TIMEOUT).await {
            Some(ControllerResponse::Metadata(Some(snapshot))) => {
                match ClusterMetadata::from_snapshot(snapshot) {
                    Ok(meta) => Some(meta),
                    Err(e) => {
                        tracing::error!(error = %e, "metadata from the quorum breaks an invariant; ignored");
                        None
                    }
                }
            }
            Some(ControllerResponse::Metadata(None)) => None,
            _ => {
                self.target.set((index + 1) % n);
                runtime::sleep(Duration::from_millis(100)).await;
                None
            }
        }
    }
}

/// A node that is not a voter: keeps `view` at the metadata the voters applied, in order
/// (an answer older than what the view holds is dropped), until `shutdown`.
pub async fn follow_metadata(
    link: Rc<ControllerLink>,
    view: Rc<MetadataView>,
    shutdown: Rc<ShutdownSignal>,
) {
    while !shutdown.is_triggered() {
        let after = view.applied_offset();
        let fetched = futures_lite::future::or(link.fetch(after), async {
            shutdown.wait().await;
            None
        })
        .await;
        if let Some(meta) = fetched {
            if meta.applied_offset() > view.applied_offset() {
                view.replace(meta);
            }
        }
    }
}

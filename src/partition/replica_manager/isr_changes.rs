//! A leader's ISR changes on their way to the controller (Kafka's AlterPartitionManager): one
//! in flight per partition (the leader state keeps to that), sent as AlterPartition over an
//! [`IsrChannel`], the answer applied as `replication::isr_answer` decides: a change whose
//! outcome is unknown stays pending (holding the HW back) and is sent again.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use super::{ReplicaManager, FETCH_BACKOFF};
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::quorum::controller_link::{
    CommittedPartition, ControllerLink, ForwardError,
};
use crate::partition::Partition;
use crate::protocol::ResponseError;
use crate::replication::isr_answer::{isr_action, IsrAction, IsrAnswer};
use crate::replication::leader_state::IsrProposal;
use crate::runtime;

/// How long an AlterPartition may take (the controller may be electing).
const ALTER_PARTITION_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest pause between two attempts of one change.
const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(2);

/// Where a leader's AlterPartition requests go: the active controller ([`ControllerLink`]),
/// or a test's stand-in.
pub trait IsrChannel {
    fn alter_partition<'a>(
        &'a self,
        request: AlterPartitionRequest,
        within: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<CommittedPartition, ForwardError>> + 'a>>;
}

impl IsrChannel for ControllerLink {
    fn alter_partition<'a>(
        &'a self,
        request: AlterPartitionRequest,
        within: Duration,
    ) -> Pin<Box<dyn Future<Output = Result<CommittedPartition, ForwardError>> + 'a>> {
        Box::pin(ControllerLink::alter_partition(self, request, within))
    }
}

impl ReplicaManager {
    /// Sends an ISR change to the controller and applies its answer, in the background: sent
    /// again (with the epochs as they are then) until it is committed, definitely refused,
    /// or settled otherwise (the metadata brought a newer partition state, the leadership
    /// ended, the partition is gone, the broker stops).
    pub(super) fn submit_isr_change(self: &Rc<Self>, p: &Rc<Partition>, proposal: IsrProposal) {
        let (manager, p) = (Rc::clone(self), Rc::clone(p));
        runtime::spawn_detached(async move { manager.send_isr_change(&p, proposal).await });
    }

    async fn send_isr_change(self: &Rc<Self>, p: &Rc<Partition>, first: IsrProposal) {
        let epoch = first.leader_epoch;
        let mut proposal = first;
        let mut backoff = FETCH_BACKOFF;
        for attempt in 1u64.. {
            let answer = match self.alter_partition_request(p, &proposal) {
                Some(request) => {
                    tracing::info!(topic = %p.topic, partition = p.index, isr = ?request.new_isr, attempt, "asking the controller for an ISR change");
                    match self
                        .link
                        .alter_partition(request, ALTER_PARTITION_TIMEOUT)
                        .await
                    {
                        Ok(c) => IsrAnswer::Committed {
                            leader: c.leader,
                            leader_epoch: c.leader_epoch,
                            isr: c.isr,
                            partition_epoch: c.partition_epoch,
                        },
                        Err(ForwardError::Refused(r)) => {
                            tracing::info!(topic = %p.topic, partition = p.index, code = r.code, refused = %r.message, "ISR change refused");
                            IsrAnswer::Refused(r.code)
                        }
                        Err(e @ ForwardError::NoController(_)) => {
                            tracing::info!(topic = %p.topic, partition = p.index, error = %e, "ISR change not answered; it may still commit");
                            IsrAnswer::NoAnswer
                        }
                    }
                }
                // Nothing sent: the metadata does not name the topic or this broker (yet).
                // Only a first attempt is settled by that; an earlier one may still commit.
                None if attempt == 1 => {
                    IsrAnswer::Refused(ResponseError::OperationNotAttempted.code())
                }
                None => IsrAnswer::NoAnswer,
            };
            match isr_action(&answer, self.me, epoch) {
                IsrAction::Apply {
                    isr,
                    partition_epoch,
                } => {
                    p.isr_committed(epoch, isr, partition_epoch);
                    return;
                }
                IsrAction::Revert => {
                    // Not at once: the next fetch would propose the same change again.
                    runtime::sleep(FETCH_BACKOFF).await;
                    p.isr_rejected(epoch);
                    return;
                }
                IsrAction::Retry => {}
            }
            futures_lite::future::or(runtime::sleep(backoff), self.shutdown.wait()).await;
            backoff = (backoff * 2).min(MAX_RETRY_BACKOFF);
            if self.shutdown.is_triggered() {
                return;
            }
            let still_ours = self
                .partitions
                .get(&p.topic, p.index)
                .is_some_and(|q| Rc::ptr_eq(&q, p));
            // The same change still pending on the same state; anything else settled it (a
            // commit or the metadata clear it; a later proposal has its own sender).
            match p.pending_isr_proposal(epoch) {
                Some(current) if still_ours && current == proposal => proposal = current,
                _ => return,
            }
        }
    }

    /// The AlterPartition for `proposal`, with this broker's current registration; `None`
    /// when the published metadata does not name the topic or this broker.
    fn alter_partition_request(
        &self,
        p: &Partition,
        proposal: &IsrProposal,
    ) -> Option<AlterPartitionRequest> {
        let meta = self.image();
        let (topic, me) = (meta.topic_by_name(&p.topic)?, meta.broker(self.me)?);
        Some(AlterPartitionRequest {
            broker_id: self.me,
            broker_epoch: me.epoch,
            topic_id: topic.id,
            partition: p.index as u32,
            leader_epoch: proposal.leader_epoch,
            partition_epoch: proposal.partition_epoch,
            new_isr: proposal.new_isr.clone(),
        })
    }
}

#[cfg(test)]
#[path = "isr_changes_tests.rs"]
mod tests;

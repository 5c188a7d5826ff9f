//! Cluster mode on the shards: topic changes are the controller's, not shard 0's. Admin
//! requests are forwarded to the active controller and answered once the committed change is
//! published here, and partition requests for partitions another broker leads are refused
//! with NOT_LEADER_OR_FOLLOWER, as Kafka's replica manager does.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::messages::{AdminError, AdminOp};
use super::Shard;
use crate::controller::quorum::controller_link::{ControllerLink, ForwardError};
use crate::controller::topic_admin::CreateTopicRequest;
use crate::controller::topic_changes::TopicChange;
use crate::group::api::OFFSETS_TOPIC;
use crate::idempotence::producer_ids::ProducerIdError;
use crate::metadata::cluster_state::PartitionState;
use crate::metadata::{LiveBroker, MetadataImage};
use crate::model::{BrokerId, MetadataOffset, ProducerIdBlock};
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::ops::error_result;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::ResponseError;
use crate::runtime;

/// How long a forwarded change may take, commit and local apply included (Kafka's
/// `request.timeout.ms` default is 30 s).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// Shard 0's part of cluster mode: the link to the controller and how far the controller's
/// topics have been copied into the shards' metadata.
pub struct ClusterAdmin {
    link: Rc<ControllerLink>,
    adopted: tokio::sync::watch::Sender<Option<MetadataOffset>>,
}

impl ClusterAdmin {
    pub fn new(link: Rc<ControllerLink>) -> ClusterAdmin {
        ClusterAdmin {
            link,
            adopted: tokio::sync::watch::Sender::new(None),
        }
    }

    /// Waits until the metadata up to `offset` is in every shard, at most `limit`.
    async fn wait_adopted(&self, offset: MetadataOffset, limit: Duration) -> bool {
        let mut adopted = self.adopted.subscribe();
        let reached = async {
            loop {
                if adopted.borrow_and_update().is_some_and(|a| a >= offset) {
                    return true;
                }
                if adopted.changed().await.is_err() {
                    return false;
                }
            }
        };
        futures_lite::future::or(reached, async {
            runtime::sleep(limit).await;
            false
        })
        .await
    }
}

/// Broker ids per partition, as the controller takes them.
fn replicas_of(assignment: Vec<Vec<i32>>) -> Vec<Vec<BrokerId>> {
    assignment
        .into_iter()
        .map(|replicas| replicas.into_iter().map(BrokerId).collect())
        .collect()
}

/// `op` as the controller takes it (in both modes: a single node's own controller decides by
/// the same rules), and whether it is only to be validated.
pub(super) fn change_of(op: AdminOp) -> Result<(TopicChange, bool), AdminError> {
    if let AdminOp::DeleteTopic { name } | AdminOp::CreatePartitions { name, .. } = &op {
        if name == OFFSETS_TOPIC {
            // Its partition count maps groups to coordinators; changing it loses groups.
            return Err(AdminError {
                code: ResponseError::InvalidTopicException.code(),
                message: format!("{name} is internal and cannot be deleted or repartitioned"),
            });
        }
    }
    let wire = |n: i32| (n >= 0).then_some(n);
    let change = match op {
        AdminOp::CreateTopic {
            name,
            partitions,
            replication_factor,
            assignment,
            configs,
            validate_only,
        } => {
            let assignment = assignment.map(replicas_of);
            let manual = assignment.is_some();
            let request = CreateTopicRequest {
                name,
                partitions: wire(partitions).filter(|_| !manual),
                replication_factor: wire(replication_factor).filter(|_| !manual),
                assignment,
                configs,
            };
            (TopicChange::Create(request), validate_only)
        }
        AdminOp::DeleteTopic { name } => (TopicChange::Delete { name }, false),
        AdminOp::CreatePartitions {
            name,
            total,
            assignment,
            validate_only,
        } => {
            let assignment = assignment.map(replicas_of);
            let change = TopicChange::CreatePartitions {
                name,
                total,
                assignment,
            };
            (change, validate_only)
        }
        AdminOp::SetTopicConfigs {
            name,
            configs,
            validate_only,
        } => (TopicChange::SetConfigs { name, configs }, validate_only),
        AdminOp::SetBrokerConfigs {
            resource,
            configs,
            validate_only,
        } => (
            TopicChange::BrokerConfigs { resource, configs },
            validate_only,
        ),
    };
    Ok(change)
}

impl Shard {
    /// Shard 0 in cluster mode: from now on admin changes go to the controller.
    pub fn attach_cluster_admin(&self, admin: ClusterAdmin) {
        if self.cluster_admin.set(admin).is_err() {
            tracing::error!("cluster admin attached twice; the first one stays");
        }
    }

    pub(super) fn cluster_admin(&self) -> Option<&ClusterAdmin> {
        self.cluster_admin.get()
    }

    /// Shard 0 in cluster mode: a block of producer ids from the controller (Kafka's
    /// AllocateProducerIds), so that no two brokers hand out the same id.
    pub(super) async fn controller_producer_id_block(
        &self,
    ) -> Result<ProducerIdBlock, ProducerIdError> {
        let unavailable = |why: &str| ProducerIdError::Controller(why.to_string());
        let admin = self
            .cluster_admin()
            .ok_or_else(|| unavailable("cluster mode is still starting"))?;
        let me = BrokerId(self.config.node_id);
        let epoch = self
            .image()
            .broker(me)
            .map(|b| b.epoch)
            .ok_or_else(|| unavailable("this broker is not registered yet"))?;
        let (start, end) = admin
            .link
            .allocate_producer_ids(me, epoch, FORWARD_TIMEOUT)
            .await
            .map_err(|e| ProducerIdError::Controller(e.to_string()))?;
        Ok(ProducerIdBlock { start, end })
    }

    /// Sends `op` to the active controller; answers once the change is applied on every
    /// shard of this broker.
    pub(super) async fn forward_admin(
        self: &Rc<Self>,
        admin: &ClusterAdmin,
        op: AdminOp,
    ) -> Result<Arc<MetadataImage>, AdminError> {
        let (change, validate_only) = change_of(op)?;
        let answer = admin
            .link
            .forward(vec![change], validate_only, FORWARD_TIMEOUT)
            .await
            .map_err(|e| match e {
                ForwardError::Refused(r) => AdminError {
                    code: r.code,
                    message: r.message,
                },
                e @ ForwardError::NoController(_) => AdminError {
                    code: ResponseError::RequestTimedOut.code(),
                    message: e.to_string(),
                },
            })?;
        if let Some(Err(refused)) = answer.results.into_iter().next() {
            return Err(AdminError {
                code: refused.code,
                message: refused.message,
            });
        }
        if let Some(offset) = answer.committed {
            if !admin.wait_adopted(offset, FORWARD_TIMEOUT).await {
                return Err(AdminError {
                    code: ResponseError::RequestTimedOut.code(),
                    message: format!(
                        "the change committed at metadata offset {} is not applied on this broker yet",
                        offset.0
                    ),
                });
            }
        }
        Ok(self.image())
    }

    /// Shard 0: the metadata as of `offset` is published (its topics copied, its roles
    /// applied): admin requests waiting for that change can answer, and a client's next
    /// request sees it.
    pub fn note_published(&self, offset: MetadataOffset) {
        if let Some(admin) = self.cluster_admin() {
            admin.adopted.send_replace(Some(offset));
        }
    }

    /// The refusal of a partition request this broker cannot serve, decided on `state` (the
    /// partition as the image the request is routed by has it); `None` when it leads the
    /// partition, or holds a replica of it and the request may be answered by any replica
    /// (Describe, a debugging client's ListOffsets). A single node leads every partition.
    pub(super) fn leadership_refusal(
        &self,
        state: &PartitionState,
        op: &PartitionOp,
    ) -> Option<PartitionResult> {
        let (topic, partition) = op.topic_partition();
        let me = BrokerId(self.config.node_id);
        let any_replica = matches!(
            op,
            PartitionOp::Describe { .. }
                | PartitionOp::ListOffsets {
                    reader: OffsetsReader::Debugging,
                    ..
                }
        );
        if state.leader == Some(me) || (any_replica && state.replicas.contains(&me)) {
            return None;
        }
        let message = match state.leader {
            Some(l) => format!("broker {} leads {topic}-{partition}, not this one", l.0),
            None => format!("{topic}-{partition} has no leader"),
        };
        Some(error_result(
            op,
            ResponseError::NotLeaderOrFollower.code(),
            message,
        ))
    }
}

/// The broker coordinating a group in cluster mode: the leader of its offsets partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorBroker {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

impl Shard {
    /// Cluster mode: who coordinates `group_id`, or the error code to answer while nobody
    /// can (no offsets topic yet, its partition leaderless); `None` on a single node.
    pub fn cluster_coordinator(&self, group_id: &str) -> Option<Result<CoordinatorBroker, i16>> {
        if !self.config.is_cluster_mode() {
            return None;
        }
        let image = self.image();
        let unavailable = Err(ResponseError::CoordinatorNotAvailable.code());
        let Some(topic) = image.topic_by_name(OFFSETS_TOPIC) else {
            return Some(unavailable);
        };
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let partition = crate::group::api::offsets_partition_for(group_id, count);
        let leader = image
            .partition_by_name(OFFSETS_TOPIC, partition)
            .and_then(|p| p.leader);
        let live = image.live_brokers();
        let broker = leader.and_then(|l| live.iter().find(|b| b.id == l));
        Some(match broker {
            Some(b) => Ok(CoordinatorBroker {
                id: b.id.0,
                host: b.host.clone(),
                port: b.port,
            }),
            None => unavailable,
        })
    }
}

/// KIP-951: the leader a client should go to instead, sent with NOT_LEADER_OR_FOLLOWER.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderHint {
    pub leader_id: i32,
    pub leader_epoch: i32,
    /// The leader's endpoint, when it is live (the response's `node_endpoints`).
    pub endpoint: Option<LiveBroker>,
}

impl Shard {
    /// The current leader of `topic`/`partition` as the published metadata has it; `None`
    /// when the partition is unknown or leaderless.
    pub fn leader_hint(&self, topic: &str, partition: i32) -> Option<LeaderHint> {
        let image = self.image();
        let state = image.partition_by_name(topic, partition)?;
        let leader = state.leader?;
        Some(LeaderHint {
            leader_id: leader.0,
            leader_epoch: state.leader_epoch.0,
            endpoint: image.live_brokers().into_iter().find(|b| b.id == leader),
        })
    }
}

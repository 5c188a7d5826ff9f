//! Talking to a consumer group's coordinator: finding it (FindCoordinator) and reading and
//! writing the group's committed offsets (OffsetFetch, OffsetCommit). Used by group members
//! and by admin commands alike.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::accumulator::TopicPartition;
use super::cluster::{topic_name, Cluster};
use super::connection::Connection;
use super::error::{ClientError, ClientResult, KafkaCode};

/// Pause between FindCoordinator attempts while the coordinator is loading or moving.
const COORDINATOR_RETRY: Duration = Duration::from_millis(100);

/// Who commits: a member of the group's current generation, or (generation -1, empty member
/// id) a client outside group management, which Kafka accepts only while the group is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitIdentity {
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

impl CommitIdentity {
    /// A commit outside group management (admin tools, assign-only consumers).
    pub fn standalone() -> CommitIdentity {
        CommitIdentity {
            generation: -1,
            member_id: String::new(),
            group_instance_id: None,
        }
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

fn is_coordinator_moving(code: KafkaCode) -> bool {
    code.0 == ResponseError::CoordinatorNotAvailable.code()
        || code.0 == ResponseError::CoordinatorLoadInProgress.code()
        || code.0 == ResponseError::NotCoordinator.code()
}

/// The connection to `group`'s coordinator. Retries while the coordinator is loading or not
/// yet available, up to the request timeout.
pub fn find_coordinator(cluster: &Cluster, group: &str) -> ClientResult<Arc<Connection>> {
    let version = cluster.version(ApiKey::FindCoordinator)?;
    let deadline = Instant::now() + cluster.config().request_timeout;
    loop {
        let mut req = FindCoordinatorRequest::default();
        req.key_type = 0; // a consumer group
        if version >= 4 {
            req.coordinator_keys = vec![StrBytes::from_string(group.to_string())];
        } else {
            req.key = StrBytes::from_string(group.to_string());
        }
        let resp: FindCoordinatorResponse =
            cluster
                .any_connection()?
                .call(ApiKey::FindCoordinator, version, &req)?;
        let (code, node, message) = if version >= 4 {
            let c = resp.coordinators.first().ok_or_else(|| {
                ClientError::codec("FindCoordinator response", "no coordinator in it")
            })?;
            (c.error_code, c.node_id.0, c.error_message.clone())
        } else {
            (resp.error_code, resp.node_id.0, resp.error_message.clone())
        };
        match KafkaCode::from_code(code) {
            None => {
                // A coordinator that is not in our metadata yet: refresh once and connect.
                if !cluster.metadata().brokers.contains_key(&node) {
                    cluster.refresh_metadata(&[])?;
                }
                return cluster.connection(node);
            }
            Some(code) if is_coordinator_moving(code) && Instant::now() < deadline => {
                std::thread::sleep(COORDINATOR_RETRY);
            }
            Some(code) => {
                return Err(ClientError::Kafka {
                    api: "FindCoordinator",
                    code,
                    message: message.map(|m| m.to_string()),
                })
            }
        }
    }
}

/// Calls the coordinator of `group`, finding it again (bounded by the request timeout) when
/// the answer says the coordinator moved or is loading. `error_of` picks the error code that
/// decides whether to retry.
pub(crate) fn call_coordinator<Req, Resp>(
    cluster: &Cluster,
    group: &str,
    key: ApiKey,
    request: &Req,
    error_of: impl Fn(&Resp) -> Option<KafkaCode>,
) -> ClientResult<Resp>
where
    Req: kafka_protocol::protocol::Encodable,
    Resp: kafka_protocol::protocol::Decodable,
{
    let version = cluster.version(key)?;
    let deadline = Instant::now() + cluster.config().request_timeout;
    loop {
        let resp: Resp = find_coordinator(cluster, group)?.call(key, version, request)?;
        match error_of(&resp) {
            Some(code) if is_coordinator_moving(code) && Instant::now() < deadline => {
                std::thread::sleep(COORDINATOR_RETRY);
            }
            _ => return Ok(resp),
        }
    }
}

/// The committed offsets of `group`: of the given topics' partitions, or of everything the
/// group committed when `topics` is `None`. Partitions without a commit are left out.
pub fn fetch_offsets(
    cluster: &Cluster,
    group: &str,
    topics: Option<&[(&str, Vec<i32>)]>,
) -> ClientResult<BTreeMap<TopicPartition, i64>> {
    let mut req = OffsetFetchRequest::default();
    req.group_id = group_id(group);
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|(name, parts)| {
                let mut t = OffsetFetchRequestTopic::default();
                t.name = topic_name(name);
                t.partition_indexes = parts.clone();
                t
            })
            .collect()
    });
    let resp: OffsetFetchResponse = call_coordinator(
        cluster,
        group,
        ApiKey::OffsetFetch,
        &req,
        |r: &OffsetFetchResponse| KafkaCode::from_code(r.error_code),
    )?;
    if let Some(code) = KafkaCode::from_code(resp.error_code) {
        return Err(ClientError::Kafka {
            api: "OffsetFetch",
            code,
            message: Some(format!("group {group}")),
        });
    }
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        let topic: Arc<str> = Arc::from(t.name.0.as_str());
        for p in &t.partitions {
            if let Some(code) = KafkaCode::from_code(p.error_code) {
                return Err(ClientError::Kafka {
                    api: "OffsetFetch",
                    code,
                    message: Some(format!("{topic}-{}", p.partition_index)),
                });
            }
            if p.committed_offset >= 0 {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: p.partition_index,
                };
                out.insert(tp, p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// Commits `offsets` (the next offset to read, as Kafka commits) for `group`. Fails with the
/// first partition error (e.g. `ILLEGAL_GENERATION`, `UNKNOWN_MEMBER_ID`,
/// `REBALANCE_IN_PROGRESS`) so that a member can rejoin.
pub fn commit_offsets(
    cluster: &Cluster,
    group: &str,
    identity: &CommitIdentity,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> ClientResult<()> {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, &offset) in offsets {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = tp.partition;
        p.committed_offset = offset;
        p.committed_leader_epoch = -1;
        p.committed_metadata = Some(StrBytes::from_static_str(""));
        by_topic.entry(&tp.topic).or_default().push(p);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = group_id(group);
    req.generation_id_or_member_epoch = identity.generation;
    req.member_id = StrBytes::from_string(identity.member_id.clone());
    req.group_instance_id = identity
        .group_instance_id
        .as_ref()
        .map(|s| StrBytes::from_string(s.clone()));
    req.retention_time_ms = -1;
    req.topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            let mut t = OffsetCommitRequestTopic::default();
            t.name = topic_name(name);
            t.partitions = partitions;
            t
        })
        .collect();
    let first_error = |r: &OffsetCommitResponse| {
        r.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find_map(|p| KafkaCode::from_code(p.error_code))
    };
    let resp: OffsetCommitResponse =
        call_coordinator(cluster, group, ApiKey::OffsetCommit, &req, first_error)?;
    for t in &resp.topics {
        for p in &t.partitions {
            if let Some(code) = KafkaCode::from_code(p.error_code) {
                return Err(ClientError::Kafka {
                    api: "OffsetCommit",
                    code,
                    message: Some(format!(
                        "{}-{} in group {group}",
                        t.name.0, p.partition_index
                    )),
                });
            }
        }
    }
    Ok(())
}

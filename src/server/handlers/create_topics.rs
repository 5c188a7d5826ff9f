//! CreateTopics (key 19): partitions, configs, validate_only, manual replica assignments.
//! Replication factor above 1 is INVALID_REPLICATION_FACTOR until clustering exists; a manual
//! assignment is checked as Kafka's controller checks it (every partition once, from 0, known
//! brokers, no broker twice) and, on one node, can only be `[node.id]` per partition.

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::legacy_admin::{
    decode_create_topics_v0_1, encode_create_topics_response_v0_1,
};
use crate::protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use crate::protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::config_resource::Failure;
use super::{str_bytes, HandlerError, Request};
use crate::partition::offline_notice::could_not_open_message;
use crate::shard::messages::AdminOp;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: CreateTopicsRequest = if req.version() <= 1 {
        req.decode_with(|body| decode_create_topics_v0_1(body, req.version()))?
    } else {
        req.decode()?
    };
    let mut results = Vec::with_capacity(request.topics.len().min(1024));
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        let clustered = req.config().is_cluster_mode();
        // In cluster mode the controller checks counts and assignments against the live
        // brokers; a single node checks them here.
        let assigned = if clustered {
            None
        } else {
            manual_partition_count(topic, req.config().node_id)
        };
        let manual = clustered && !topic.assignments.is_empty();
        let partitions = match &assigned {
            Some(Ok(n)) => *n,
            _ if manual => topic.assignments.len() as i32,
            _ if topic.num_partitions == -1 => req.config().num_partitions,
            _ => topic.num_partitions,
        };
        if req.version() >= 5 {
            result.num_partitions = partitions;
            result.replication_factor = if clustered {
                topic.replication_factor
            } else {
                1
            };
        }
        let outcome = if let Some(Err(refused)) = assigned {
            Err(refused)
        } else if !clustered && assigned.is_none() && topic.replication_factor > 1 {
            Err((
                ResponseError::InvalidReplicationFactor.code(),
                // Kafka's message (ReplicationControlManager, through the placer).
                format!(
                    "Unable to replicate the partition {rf} time(s): The target replication \
                     factor of {rf} cannot be reached because only 1 broker(s) are registered.",
                    rf = topic.replication_factor
                ),
            ))
        } else {
            let mut configs = BTreeMap::new();
            for c in &topic.configs {
                if let Some(v) = &c.value {
                    configs.insert(c.name.to_string(), v.to_string());
                }
            }
            let assignment = manual.then(|| {
                let mut sorted: Vec<_> = topic.assignments.iter().collect();
                sorted.sort_by_key(|a| a.partition_index);
                sorted
                    .iter()
                    .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
            req.admin(AdminOp::CreateTopic {
                name: name.clone(),
                partitions,
                replication_factor: i32::from(topic.replication_factor),
                assignment,
                configs,
                validate_only: request.validate_only,
            })
            .await
            .map_err(|e| (e.code, e.message))
        };
        match outcome {
            Ok(meta) => {
                if let Some(t) = meta.topic_by_name(&name).filter(|_| req.version() >= 7) {
                    result.topic_id = t.id;
                }
                if let Some(rf) = clustered
                    .then(|| replication_factor_of(req, &name))
                    .flatten()
                {
                    if req.version() >= 5 {
                        result.replication_factor = rf;
                    }
                }
                let offline = match meta.topic_by_name(&name).filter(|_| !request.validate_only) {
                    Some(t) => req.partitions().offline_partitions_of(t, 0),
                    None => Vec::new(),
                };
                if let Some(message) = could_not_open_message(&name, &offline) {
                    // The topic exists, but not all of it can be served: say so, as Kafka
                    // does when a replica cannot create its log.
                    tracing::error!(topic = %name, partitions, "created topic, but some partitions are offline: {message}");
                    result.error_code = ResponseError::KafkaStorageError.code();
                    result.error_message = Some(str_bytes(message));
                } else if !request.validate_only {
                    tracing::info!(topic = %name, partitions, "created topic");
                }
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = Some(str_bytes(message));
                result.num_partitions = -1;
                result.replication_factor = -1;
            }
        }
        results.push(result);
    }
    let mut response = CreateTopicsResponse::default();
    response.topics = results;
    if req.version() <= 1 {
        return Ok(encode_create_topics_response_v0_1(&response, req.version()));
    }
    req.encode(&response)
}

/// Cluster mode: the replication factor the controller gave `topic` (its first partition's).
fn replication_factor_of(req: &Request<'_>, topic: &str) -> Option<i16> {
    let image = req.image();
    let first = image.partition_by_name(topic, 0)?;
    i16::try_from(first.replicas.len()).ok()
}

/// The partition count a manual assignment asks for (`None`: no assignment), or why Kafka
/// refuses it.
fn manual_partition_count(topic: &CreatableTopic, node: i32) -> Option<Result<i32, Failure>> {
    if topic.assignments.is_empty() {
        return None;
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Some(Err((
            ResponseError::InvalidRequest.code(),
            "Both numPartitions or replicationFactor and replicasAssignments were set. \
             Both cannot be used at the same time."
                .to_string(),
        )));
    }
    let invalid = |m: String| Some(Err((ResponseError::InvalidReplicaAssignment.code(), m)));
    let mut seen = BTreeSet::new();
    for a in &topic.assignments {
        if !seen.insert(a.partition_index) {
            return invalid(format!(
                "Found multiple manual partition assignments for partition {}",
                a.partition_index
            ));
        }
        let brokers: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        if let Err(m) = check_replicas(&brokers, node, None) {
            return invalid(m);
        }
    }
    let count = seen.len() as i32;
    if seen.iter().copied().ne(0..count) {
        return invalid("partitions should be a consecutive 0-based integer sequence".to_string());
    }
    Some(Ok(count))
}

/// Kafka's checks of one partition's replica list (its `validateManualPartitionAssignment`):
/// not empty, every broker known (here: only this one), none twice, and as many replicas as
/// the topic has (`replication_factor`, when known).
pub(super) fn check_replicas(
    brokers: &[i32],
    node: i32,
    replication_factor: Option<usize>,
) -> Result<(), String> {
    if brokers.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".to_string());
    }
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    for (i, b) in sorted.iter().enumerate() {
        if *b != node {
            return Err(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == *b {
            return Err(format!(
                "The manual partition assignment includes the broker {b} more than once."
            ));
        }
    }
    match replication_factor {
        Some(rf) if rf != sorted.len() => Err(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            sorted.len()
        )),
        _ => Ok(()),
    }
}

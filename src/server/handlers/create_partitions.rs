//! CreatePartitions (key 37): grow a topic to a new partition count. Partitions never shrink
//! (INVALID_PARTITIONS). The new partitions are placed on shards round-robin like a new topic's;
//! a manual assignment is checked as Kafka's controller checks it and can, on one node, only
//! be what this broker would do anyway (one replica, this broker): INVALID_REPLICA_ASSIGNMENT
//! otherwise. validate_only answers without adding anything.

use crate::util::hash::HashMap;

use crate::protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use crate::protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::create_topics::check_replicas;
use super::{str_bytes, HandlerError, Request};
use crate::model::MAX_PARTITIONS;
use crate::partition::offline_notice::could_not_open_message;
use crate::shard::messages::AdminOp;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: CreatePartitionsRequest = req.decode()?;
    let mut occurrences: HashMap<String, usize> = HashMap::default();
    for t in &request.topics {
        *occurrences.entry(t.name.0.to_string()).or_default() += 1;
    }
    let mut response = CreatePartitionsResponse::default();
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatePartitionsTopicResult::default();
        result.name = topic.name.clone();
        let outcome = if occurrences.get(&name).copied().unwrap_or(0) > 1 {
            Err((
                ResponseError::InvalidRequest.code(),
                format!("topic {name} appears more than once in the request"),
            ))
        } else {
            grow(req, topic, &name, request.validate_only).await
        };
        if let Err((code, message)) = outcome {
            result.error_code = code;
            result.error_message = Some(str_bytes(message));
        }
        response.results.push(result);
    }
    req.encode(&response)
}

async fn grow(
    req: &Request<'_>,
    topic: &CreatePartitionsTopic,
    name: &str,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let total = topic.count;
    let current = match req.image().topic_by_name(name) {
        Some(t) => t.partitions.len() as i32,
        None => {
            return Err((
                ResponseError::UnknownTopicOrPartition.code(),
                format!("topic '{name}' does not exist"),
            ))
        }
    };
    let invalid_partitions = |m: String| Err((ResponseError::InvalidPartitions.code(), m));
    if total < current {
        return invalid_partitions(format!(
            "The topic {name} currently has {current} partition(s); {total} would not be an increase."
        ));
    }
    if total == current {
        // Kafka's messages (ReplicationControlManager.createPartitions).
        return invalid_partitions(format!("Topic already has {current} partition(s)."));
    }
    if total > MAX_PARTITIONS {
        return invalid_partitions(format!(
            "{total} partitions is more than the limit of {MAX_PARTITIONS} per topic"
        ));
    }
    let clustered = req.config().is_cluster_mode();
    // In cluster mode the controller checks the assignment against the registered brokers.
    let assignment = topic.assignments.as_ref().filter(|_| clustered).map(|a| {
        a.iter()
            .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
            .collect()
    });
    if let Some(assignments) = topic.assignments.as_ref().filter(|_| !clustered) {
        // Kafka's controller checks: one assignment per new partition, each a valid replica
        // list as long as the topic's (one replica, this broker, on one node).
        let added = (total - current) as usize;
        let bad = |m: String| Err((ResponseError::InvalidReplicaAssignment.code(), m));
        if assignments.len() != added {
            return bad(format!(
                "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                assignments.len()
            ));
        }
        for a in assignments {
            let brokers: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
            if let Err(m) = check_replicas(&brokers, req.config().node_id, Some(1)) {
                return bad(m);
            }
        }
    }
    let meta = req
        .admin(AdminOp::CreatePartitions {
            name: name.to_string(),
            total,
            assignment,
            validate_only,
        })
        .await
        .map_err(|e| (e.code, e.message))?;
    if validate_only {
        return Ok(());
    }
    let offline = match meta.topic_by_name(name) {
        Some(t) => req.partitions().offline_partitions_of(t, current),
        None => Vec::new(),
    };
    if let Some(message) = could_not_open_message(name, &offline) {
        // The partitions exist, but not all can be served: say so (KAFKA_STORAGE_ERROR).
        tracing::error!(topic = %name, from = current, to = total, "added partitions, but some are offline: {message}");
        return Err((ResponseError::KafkaStorageError.code(), message));
    }
    tracing::info!(topic = %name, from = current, to = total, "added partitions");
    Ok(())
}

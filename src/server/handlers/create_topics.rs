//! CreateTopics (key 19): partitions, configs, validate_only. Replication factor above 1 is
//! INVALID_REPLICATION_FACTOR until clustering exists.

use std::collections::BTreeMap;

use crate::protocol::messages::create_topics_request::CreateTopicsRequest;
use crate::protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, HandlerError, Request};
use crate::shard::messages::AdminOp;
use crate::shard::metadata::TopicMetadata;
use crate::shard::offline::OfflineNotice;
use crate::shard::Shard;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: CreateTopicsRequest = req.decode()?;
    let shard = req.shard;
    let mut results = Vec::with_capacity(request.topics.len().min(1024));
    for topic in &request.topics {
        let name = topic.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        let partitions = if topic.num_partitions == -1 {
            shard.config.num_partitions
        } else {
            topic.num_partitions
        };
        if req.version() >= 5 {
            result.num_partitions = partitions;
            result.replication_factor = 1;
        }
        let outcome = if topic.replication_factor > 1 {
            Err((
                ResponseError::InvalidReplicationFactor.code(),
                format!(
                    "replication factor {} is larger than the number of brokers (1)",
                    topic.replication_factor
                ),
            ))
        } else if !topic.assignments.is_empty() {
            Err((
                ResponseError::InvalidRequest.code(),
                "manual replica assignments are not supported".to_string(),
            ))
        } else {
            let mut configs = BTreeMap::new();
            for c in &topic.configs {
                if let Some(v) = &c.value {
                    configs.insert(c.name.to_string(), v.to_string());
                }
            }
            shard
                .admin(AdminOp::CreateTopic {
                    name: name.clone(),
                    partitions,
                    configs,
                    validate_only: request.validate_only,
                })
                .await
                .map_err(|e| (e.code, e.message))
        };
        match outcome {
            Ok(meta) => {
                if let Some(t) = meta.topic(&name).filter(|_| req.version() >= 7) {
                    result.topic_id = t.id;
                }
                let offline = match meta.topic(&name).filter(|_| !request.validate_only) {
                    Some(t) => offline_partitions(shard, t),
                    None => Vec::new(),
                };
                if let Some(message) = offline_message(&name, &offline) {
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
    req.encode(&response)
}

/// The partitions of a just-created topic that went offline (the owning shards told every
/// shard before the change was acknowledged).
fn offline_partitions(shard: &Shard, topic: &TopicMetadata) -> Vec<OfflineNotice> {
    (0..topic.partitions.len() as i32)
        .filter_map(|i| shard.offline_notice(&topic.name, topic.id, i))
        .collect()
}

/// The error message naming the partitions that could not be opened, if any.
fn offline_message(name: &str, offline: &[OfflineNotice]) -> Option<String> {
    let first = offline.first()?;
    let list: Vec<String> = offline.iter().map(|n| n.index.to_string()).collect();
    Some(format!(
        "topic '{name}' was created but partition(s) {} could not be opened and are offline (KAFKA_STORAGE_ERROR); partition {}: {}",
        list.join(", "),
        first.index,
        first.reason
    ))
}

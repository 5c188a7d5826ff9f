//! CreateTopics (key 19): partitions, configs, validate_only. Replication factor above 1 is
//! INVALID_REPLICATION_FACTOR until clustering exists.

use std::collections::BTreeMap;

use crate::protocol::legacy_admin::{
    decode_create_topics_v0_1, encode_create_topics_response_v0_1,
};
use crate::protocol::messages::create_topics_request::CreateTopicsRequest;
use crate::protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, HandlerError, Request};
use crate::shard::messages::AdminOp;
use crate::shard::offline::could_not_open_message;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: CreateTopicsRequest = if req.version() <= 1 {
        req.decode_with(|body| decode_create_topics_v0_1(body, req.version()))?
    } else {
        req.decode()?
    };
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
                    Some(t) => shard.offline_partitions_of(t, 0),
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

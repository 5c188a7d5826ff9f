//! Kafka error codes for what a shard's work can fail with: log, produce and metadata errors,
//! and the per-operation results of partitions that are unknown or whose shard did not answer.

use super::messages::{AdminError, PartitionOp, PartitionResult};
use crate::config::DynamicConfigError;
use crate::metadata::MetadataError;
use crate::partition::error::PartitionError;
use crate::protocol::ResponseError;

pub(super) fn metadata_error(e: MetadataError) -> AdminError {
    let code = match &e {
        MetadataError::TopicExists(_) => ResponseError::TopicAlreadyExists.code(),
        MetadataError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition.code(),
        MetadataError::InvalidTopic { .. } => ResponseError::InvalidTopicException.code(),
        MetadataError::InvalidPartitions(_) => ResponseError::InvalidPartitions.code(),
        MetadataError::InvalidReplicationFactor(_) => {
            ResponseError::InvalidReplicationFactor.code()
        }
        MetadataError::InvalidConfig(_) => ResponseError::InvalidConfig.code(),
    };
    AdminError {
        code,
        message: e.to_string(),
    }
}

pub(super) fn error_result(op: &PartitionOp, code: i16, message: String) -> PartitionResult {
    let err = PartitionError::new(code, message);
    match op {
        PartitionOp::Produce { .. } => PartitionResult::Produce(Err(err)),
        PartitionOp::Fetch { .. } => PartitionResult::Fetch(Err(err)),
        PartitionOp::ListOffsets {
            max_num_offsets: Some(_),
            ..
        } => PartitionResult::LegacyOffsets(Err(err)),
        PartitionOp::ListOffsets { .. } => PartitionResult::ListOffsets(Err(err)),
        PartitionOp::DeleteRecords { .. } => PartitionResult::DeleteRecords(Err(err)),
        PartitionOp::Describe { .. } => PartitionResult::Describe(Err(err)),
    }
}

pub(super) fn unknown_partition_result(op: &PartitionOp) -> PartitionResult {
    let (t, p) = op.topic_partition();
    error_result(
        op,
        ResponseError::UnknownTopicOrPartition.code(),
        format!("{t}-{p} does not exist"),
    )
}

pub(super) fn unavailable_result(op: &PartitionOp) -> PartitionResult {
    let (t, p) = op.topic_partition();
    error_result(
        op,
        ResponseError::NotLeaderOrFollower.code(),
        format!("the shard owning {t}-{p} did not answer"),
    )
}

/// Kafka's codes for a refused dynamic broker config: a bad value is INVALID_CONFIG, a name
/// that cannot change (or not here) INVALID_REQUEST.
pub(super) fn dynamic_config_error(e: DynamicConfigError) -> AdminError {
    let code = match &e {
        DynamicConfigError::Unknown(_) | DynamicConfigError::Invalid { .. } => {
            ResponseError::InvalidConfig.code()
        }
        DynamicConfigError::ReadOnly(_)
        | DynamicConfigError::PerBrokerOnly(_)
        | DynamicConfigError::NotApplied(_) => ResponseError::InvalidRequest.code(),
    };
    AdminError {
        code,
        message: e.to_string(),
    }
}

//! Kafka error codes for what a shard's admin work can fail with: metadata changes and dynamic
//! broker configs.

use super::messages::AdminError;
use crate::config::DynamicConfigError;
use crate::metadata::MetadataError;
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

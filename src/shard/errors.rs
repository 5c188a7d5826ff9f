//! Kafka error codes for what a shard's admin work can fail with that the controller does not
//! decide: dynamic broker configs.

use super::messages::AdminError;
use crate::config::DynamicConfigError;
use crate::protocol::ResponseError;

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

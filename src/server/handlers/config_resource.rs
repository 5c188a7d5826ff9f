//! What the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) share: the
//! resource types a request names and the (error code, message) a config change fails with.
//! Kept apart so the three handlers and `broker_configs` import it rather than each other.

/// ConfigResource types (Kafka's `ConfigResource.Type`).
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// A Kafka error code and the message that goes with it.
pub(super) type Failure = (i16, String);

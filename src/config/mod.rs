//! Configuration by Kafka property name. Two tables hold every property: the broker's
//! ([`broker_properties`]) and the topics' ([`topic_properties`]); the config file, `--set`,
//! `serve --check-config`, DescribeConfigs, (Incremental)AlterConfigs and
//! docs/configuration.md are all derived from them.
//!
//! Files depend on each other in one direction only: `error`, `group_config`,
//! `property_kind` and `value_forms` depend on no sibling; `broker_config` on `group_config`; `listeners` on `broker_config`;
//! the tables on those; `load`, `listing`, `dynamic` and `reference` on the tables.

mod broker_config;
mod broker_properties;
mod broker_property;
mod dynamic;
mod error;
mod group_config;
mod listeners;
pub mod listing;
mod load;
mod property_kind;
pub mod reference;
pub mod topic_properties;
mod value_forms;

pub use broker_config::{
    BrokerConfig, DEFAULT_CHECKPOINT_INTERVAL_MS, DEFAULT_CONNECTIONS_MAX_IDLE_MS,
    DEFAULT_DISK_FREE_WARN_BYTES, DEFAULT_DISK_FREE_WARN_PERCENT, DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_HW_CHECKPOINT_INTERVAL_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_METRICS_LISTEN,
    DEFAULT_REQUEST_READ_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, PRODUCE_MEMORY_DEFAULT_CAP,
    PRODUCE_MEMORY_DEFAULT_FLOOR,
};
pub use broker_properties::{broker_property, BROKER_PROPERTIES};
pub use broker_property::{Alias, BrokerKind, BrokerProperty, DefaultValue, Scope};
pub use dynamic::{validate_dynamic, DynamicConfigError};
pub use error::ConfigError;
pub use group_config::GroupConfig;
pub use topic_properties::{topic_log_config, topic_property_value, TOPIC_PROPERTIES};
pub use value_forms::log_io_name;

#[cfg(test)]
mod tests;

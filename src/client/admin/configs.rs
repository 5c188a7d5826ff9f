//! Config admin calls: describe a topic's or broker's configs, alter them (incrementally,
//! or by replacing the whole set on brokers without IncrementalAlterConfigs).

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource as LegacyResource,
    AlterableConfig as LegacyAlterableConfig,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResponse;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::ApiKey;

use crate::client::cluster::Cluster;
use crate::client::error::{ClientError, ClientResult};

use super::{kafka_error, s};

/// ConfigResource types (Kafka's `ConfigResource.Type`).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

/// What a config resource is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigResource {
    Topic(String),
    Broker(i32),
}

impl ConfigResource {
    fn kind_and_name(&self) -> (i8, String) {
        match self {
            ConfigResource::Topic(t) => (RESOURCE_TOPIC, t.clone()),
            ConfigResource::Broker(id) => (RESOURCE_BROKER, id.to_string()),
        }
    }
}

/// Where a config value comes from (`DescribeConfigsResponse.ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    Unknown,
}

impl ConfigSource {
    fn from_code(code: i8) -> ConfigSource {
        match code {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            _ => ConfigSource::Unknown,
        }
    }

    /// Kafka's name for the source, as kafka-configs.sh prints it.
    pub fn name(self) -> &'static str {
        match self {
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::Unknown => "UNKNOWN",
        }
    }

    /// Whether the value was set on this resource itself (a topic override, a dynamic broker
    /// setting) rather than inherited.
    pub fn is_override(self) -> bool {
        matches!(
            self,
            ConfigSource::DynamicTopic | ConfigSource::DynamicBroker
        )
    }
}

/// One config of a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for sensitive or unset values.
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
}

/// A change to a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigChange {
    Set {
        name: String,
        value: String,
    },
    /// Back to the inherited value.
    Delete {
        name: String,
    },
}

/// Every config of a resource, sorted by name. Broker configs are asked of that broker (as
/// Kafka requires), topic configs of any broker.
pub fn describe_configs(
    cluster: &Cluster,
    resource: &ConfigResource,
) -> ClientResult<Vec<ConfigEntry>> {
    let (kind, name) = resource.kind_and_name();
    let mut r = DescribeConfigsResource::default();
    r.resource_type = kind;
    r.resource_name = s(&name);
    r.configuration_keys = None;
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    req.include_synonyms = false;
    let version = cluster.version(ApiKey::DescribeConfigs)?;
    let conn = match resource {
        ConfigResource::Broker(id) => cluster.connection(*id)?,
        ConfigResource::Topic(_) => cluster.any_connection()?,
    };
    let resp: DescribeConfigsResponse = conn.call(ApiKey::DescribeConfigs, version, &req)?;
    let result = resp
        .results
        .first()
        .ok_or_else(|| ClientError::codec("DescribeConfigs response", "no resource in it"))?;
    kafka_error(
        "DescribeConfigs",
        result.error_code,
        result.error_message.as_ref(),
    )?;
    let mut entries: Vec<ConfigEntry> = result
        .configs
        .iter()
        .map(|c| ConfigEntry {
            name: c.name.to_string(),
            value: c.value.as_ref().map(|v| v.to_string()),
            source: ConfigSource::from_code(c.config_source),
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// Applies `changes` with IncrementalAlterConfigs, or, when the broker does not speak it,
/// with AlterConfigs over the current overrides (which replaces them all: racy against
/// concurrent changes, as it is with Kafka's own tools on old brokers).
pub fn alter_configs(
    cluster: &Cluster,
    resource: &ConfigResource,
    changes: &[ConfigChange],
) -> ClientResult<()> {
    match cluster.version(ApiKey::IncrementalAlterConfigs) {
        Ok(version) => alter_incrementally(cluster, resource, changes, version),
        Err(ClientError::UnsupportedApi { .. }) => alter_by_replacing(cluster, resource, changes),
        Err(e) => Err(e),
    }
}

fn config_connection(
    cluster: &Cluster,
    resource: &ConfigResource,
) -> ClientResult<std::sync::Arc<crate::client::connection::Connection>> {
    match resource {
        ConfigResource::Broker(id) => cluster.connection(*id),
        ConfigResource::Topic(_) => cluster.any_connection(),
    }
}

fn alter_incrementally(
    cluster: &Cluster,
    resource: &ConfigResource,
    changes: &[ConfigChange],
    version: i16,
) -> ClientResult<()> {
    let (kind, name) = resource.kind_and_name();
    let mut r = AlterConfigsResource::default();
    r.resource_type = kind;
    r.resource_name = s(&name);
    r.configs = changes
        .iter()
        .map(|change| {
            let mut c = AlterableConfig::default();
            match change {
                ConfigChange::Set { name, value } => {
                    c.name = s(name);
                    c.config_operation = OP_SET;
                    c.value = Some(s(value));
                }
                ConfigChange::Delete { name } => {
                    c.name = s(name);
                    c.config_operation = OP_DELETE;
                    c.value = None;
                }
            }
            c
        })
        .collect();
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = config_connection(cluster, resource)?.call(
        ApiKey::IncrementalAlterConfigs,
        version,
        &req,
    )?;
    let result = resp.responses.first().ok_or_else(|| {
        ClientError::codec("IncrementalAlterConfigs response", "no resource in it")
    })?;
    kafka_error(
        "IncrementalAlterConfigs",
        result.error_code,
        result.error_message.as_ref(),
    )
}

/// The overrides after `changes`: what AlterConfigs has to send to get the same effect.
pub fn apply_changes(
    current: &[ConfigEntry],
    changes: &[ConfigChange],
) -> BTreeMap<String, Option<String>> {
    let mut overrides: BTreeMap<String, Option<String>> = current
        .iter()
        .filter(|e| e.source.is_override())
        .map(|e| (e.name.clone(), e.value.clone()))
        .collect();
    for change in changes {
        match change {
            ConfigChange::Set { name, value } => {
                overrides.insert(name.clone(), Some(value.clone()));
            }
            ConfigChange::Delete { name } => {
                overrides.remove(name);
            }
        }
    }
    overrides
}

fn alter_by_replacing(
    cluster: &Cluster,
    resource: &ConfigResource,
    changes: &[ConfigChange],
) -> ClientResult<()> {
    let version = cluster.version(ApiKey::AlterConfigs)?;
    let current = describe_configs(cluster, resource)?;
    let (kind, name) = resource.kind_and_name();
    let mut r = LegacyResource::default();
    r.resource_type = kind;
    r.resource_name = s(&name);
    r.configs = apply_changes(&current, changes)
        .into_iter()
        .map(|(name, value)| {
            let mut c = LegacyAlterableConfig::default();
            c.name = s(&name);
            c.value = value.map(|v| s(&v));
            c
        })
        .collect();
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: AlterConfigsResponse =
        config_connection(cluster, resource)?.call(ApiKey::AlterConfigs, version, &req)?;
    let result = resp
        .responses
        .first()
        .ok_or_else(|| ClientError::codec("AlterConfigs response", "no resource in it"))?;
    kafka_error(
        "AlterConfigs",
        result.error_code,
        result.error_message.as_ref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_alter_keeps_other_overrides() {
        let entry = |name: &str, value: &str, source| ConfigEntry {
            name: name.into(),
            value: Some(value.into()),
            source,
            read_only: false,
            sensitive: false,
        };
        let current = vec![
            entry("retention.ms", "1000", ConfigSource::DynamicTopic),
            entry("segment.bytes", "1024", ConfigSource::DynamicTopic),
            entry("flush.ms", "5", ConfigSource::Default),
        ];
        let changes = vec![
            ConfigChange::Set {
                name: "retention.ms".into(),
                value: "2000".into(),
            },
            ConfigChange::Delete {
                name: "segment.bytes".into(),
            },
            ConfigChange::Set {
                name: "max.message.bytes".into(),
                value: "10".into(),
            },
        ];
        let after = apply_changes(&current, &changes);
        let expected: BTreeMap<String, Option<String>> = [
            ("max.message.bytes".to_string(), Some("10".to_string())),
            ("retention.ms".to_string(), Some("2000".to_string())),
        ]
        .into_iter()
        .collect();
        assert_eq!(after, expected);
    }
}

//! IncrementalAlterConfigs (key 44): SET, DELETE, APPEND and SUBTRACT applied to a topic's
//! current overrides; the result replaces them (through shard 0) and the owning shards apply it
//! to the open logs. APPEND/SUBTRACT only apply to list properties (`cleanup.policy`). On a
//! broker resource the same operations apply to its dynamic broker configs (`broker_configs`).
//!
//! The new set is computed here from this shard's copy of the metadata, so two concurrent
//! incremental changes to the same topic from different connections may lose one of them
//! (last writer wins), as with Kafka's ZooKeeper-era brokers.

use crate::util::hash::HashSet;
use std::collections::BTreeMap;

use crate::protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, IncrementalAlterConfigsRequest,
};
use crate::protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::alter_configs::{
    apply_topic_configs, duplicate_resource_error, duplicate_resources, existing_topic_configs,
};
use super::broker_configs::{apply_broker_configs, existing_broker_configs};
use super::config_resource::{Failure, RESOURCE_BROKER};
use super::{str_bytes, HandlerError, Request};
use crate::config::topic_properties::{topic_property, TopicConfigError, TYPE_LIST};
use crate::config::{broker_property, DynamicConfigError};

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: IncrementalAlterConfigsRequest = req.decode()?;
    let duplicates = duplicate_resources(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in &request.resources {
        let name = resource.resource_name.as_str();
        let outcome = if duplicates.contains(&(resource.resource_type, name.to_string())) {
            Err(duplicate_resource_error())
        } else {
            alter(req, resource, request.validate_only).await
        };
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = resource.resource_type;
        r.resource_name = resource.resource_name.clone();
        match outcome {
            Ok(()) => r.error_message = None,
            Err((code, message)) => {
                r.error_code = code;
                r.error_message = Some(str_bytes(message));
            }
        }
        response.responses.push(r);
    }
    req.encode(&response)
}

async fn alter(
    req: &Request<'_>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Failure> {
    let name = resource.resource_name.as_str();
    let broker = resource.resource_type == RESOURCE_BROKER;
    let mut configs = if broker {
        existing_broker_configs(req, name)?
    } else {
        existing_topic_configs(req, resource.resource_type, name)?
    };
    let mut seen = HashSet::default();
    for c in &resource.configs {
        if !seen.insert(c.name.as_str()) {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("config {} is given more than once", c.name.as_str()),
            ));
        }
    }
    for c in &resource.configs {
        apply_op(
            req,
            broker,
            &mut configs,
            c.name.as_str(),
            c.config_operation,
            c.value.as_ref().map(|v| v.as_str()),
        )?;
    }
    if broker {
        return apply_broker_configs(req, name, configs, validate_only).await;
    }
    apply_topic_configs(req, name, configs, validate_only).await
}

/// What an operation needs to know of a property of a broker or topic resource: whether
/// it is a list, and its value where the resource has no override of it.
struct Known {
    is_list: bool,
    inherited: String,
}

fn known(req: &Request<'_>, broker: bool, key: &str) -> Result<Known, Failure> {
    let effective = req.effective_config();
    let found = if broker {
        broker_property(key).map(|p| Known {
            is_list: p.kind.config_type() == TYPE_LIST,
            inherited: (p.get)(&effective),
        })
    } else {
        topic_property(key).map(|p| Known {
            is_list: p.kind.config_type() == TYPE_LIST,
            inherited: p.value(&effective.log_defaults, &BTreeMap::new()),
        })
    };
    found.ok_or_else(|| {
        let unknown = if broker {
            DynamicConfigError::Unknown(key.to_string()).to_string()
        } else {
            TopicConfigError::Unknown(key.to_string()).to_string()
        };
        (ResponseError::InvalidConfig.code(), unknown)
    })
}

/// Applies one operation to an override set. Values are validated with the whole set later.
fn apply_op(
    req: &Request<'_>,
    broker: bool,
    configs: &mut BTreeMap<String, String>,
    key: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), Failure> {
    let invalid_request = |m: String| Err((ResponseError::InvalidRequest.code(), m));
    match op {
        OP_SET => {
            let Some(v) = value else {
                return invalid_request(format!("null value not supported for {key}"));
            };
            configs.insert(key.to_string(), v.to_string());
        }
        OP_DELETE => {
            known(req, broker, key)?;
            configs.remove(key);
        }
        OP_APPEND | OP_SUBTRACT => {
            let prop = known(req, broker, key)?;
            let verb = if op == OP_APPEND {
                "APPEND"
            } else {
                "SUBTRACT"
            };
            if !prop.is_list {
                // INVALID_CONFIG, as Kafka's controller answers (ConfigurationControlManager).
                return Err((
                    ResponseError::InvalidConfig.code(),
                    format!("Can't {verb} to key {key} because its type is not LIST."),
                ));
            }
            let Some(v) = value else {
                return invalid_request(format!("null value not supported for {key}"));
            };
            let current = configs.get(key).cloned().unwrap_or(prop.inherited);
            let mut items = split_list(&current);
            for item in split_list(v) {
                if op == OP_APPEND {
                    if !items.contains(&item) {
                        items.push(item);
                    }
                } else {
                    items.retain(|i| *i != item);
                }
            }
            configs.insert(key.to_string(), items.join(","));
        }
        other => {
            return invalid_request(format!(
                "unknown config operation {other} (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)"
            ))
        }
    }
    Ok(())
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

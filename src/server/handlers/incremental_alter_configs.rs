//! IncrementalAlterConfigs (key 44): SET, DELETE, APPEND and SUBTRACT applied to a topic's
//! current overrides; the result replaces them (through shard 0) and the owning shards apply it
//! to the open logs. APPEND/SUBTRACT only apply to list properties (`cleanup.policy`).
//!
//! The new set is computed here from this shard's copy of the metadata, so two concurrent
//! incremental changes to the same topic from different connections may lose one of them
//! (last writer wins), as with Kafka's ZooKeeper-era brokers.

use std::collections::{BTreeMap, HashSet};

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
    Failure,
};
use super::{str_bytes, HandlerError, Request};
use crate::config::topic_properties::{topic_property, TopicConfigError, TYPE_LIST};

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
    let mut configs = existing_topic_configs(req, resource.resource_type, name)?;
    let mut seen = HashSet::new();
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
            &mut configs,
            c.name.as_str(),
            c.config_operation,
            c.value.as_ref().map(|v| v.as_str()),
        )?;
    }
    apply_topic_configs(req, name, configs, validate_only).await
}

/// Applies one operation to an override set. Values are validated with the whole set later.
fn apply_op(
    req: &Request<'_>,
    configs: &mut BTreeMap<String, String>,
    key: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), Failure> {
    let invalid_request = |m: String| Err((ResponseError::InvalidRequest.code(), m));
    let known = || {
        topic_property(key).ok_or_else(|| {
            (
                ResponseError::InvalidConfig.code(),
                TopicConfigError::Unknown(key.to_string()).to_string(),
            )
        })
    };
    match op {
        OP_SET => {
            let Some(v) = value else {
                return invalid_request(format!("null value not supported for {key}"));
            };
            configs.insert(key.to_string(), v.to_string());
        }
        OP_DELETE => {
            known()?;
            configs.remove(key);
        }
        OP_APPEND | OP_SUBTRACT => {
            let prop = known()?;
            let verb = if op == OP_APPEND {
                "append"
            } else {
                "subtract"
            };
            if prop.kind.config_type() != TYPE_LIST {
                return invalid_request(format!(
                    "config value {verb} is not allowed for config key: {key} (not a list)"
                ));
            }
            let Some(v) = value else {
                return invalid_request(format!("null value not supported for {key}"));
            };
            let current = match configs.get(key) {
                Some(v) => v.clone(),
                None => prop.value(&req.shard.config.log_defaults, &BTreeMap::new()),
            };
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

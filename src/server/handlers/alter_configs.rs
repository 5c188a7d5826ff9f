//! AlterConfigs (key 33): replaces a topic's whole set of config overrides (Kafka's legacy
//! semantics: a property left out goes back to its default). The owning shards apply the new
//! config to the open logs when the metadata change reaches them. On a broker resource it
//! replaces the dynamic broker configs (`broker_configs`).

use crate::util::hash::HashMap;
use std::collections::BTreeMap;

use crate::protocol::messages::alter_configs_request::{AlterConfigsRequest, AlterConfigsResource};
use crate::protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::broker_configs::{apply_broker_configs, check_broker_resource};
use super::config_resource::{Failure, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::{str_bytes, HandlerError, Request};
use crate::config::topic_log_config;
use crate::shard::messages::AdminOp;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: AlterConfigsRequest = req.decode()?;
    let duplicates = duplicate_resources(
        request
            .resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut response = AlterConfigsResponse::default();
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

/// Replaces the overrides of the topic one resource names.
async fn alter(
    req: &Request<'_>,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Failure> {
    let name = resource.resource_name.as_str();
    let broker = resource.resource_type == RESOURCE_BROKER;
    if broker {
        check_broker_resource(req.config(), name)?;
    } else {
        existing_topic_configs(req, resource.resource_type, name)?;
    }
    let mut configs = BTreeMap::new();
    for c in &resource.configs {
        let key = c.name.to_string();
        let Some(value) = &c.value else {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("null value not supported for {key}"),
            ));
        };
        if configs.insert(key.clone(), value.to_string()).is_some() {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("config {key} is given more than once"),
            ));
        }
    }
    if broker {
        return apply_broker_configs(req, name, configs, validate_only).await;
    }
    apply_topic_configs(req, name, configs, validate_only).await
}

/// The (type, name) pairs that occur more than once: Kafka refuses all of their occurrences.
pub(super) fn duplicate_resources<'a>(
    resources: impl Iterator<Item = (i8, &'a str)>,
) -> Vec<(i8, String)> {
    let mut count: HashMap<(i8, String), usize> = HashMap::default();
    for (t, n) in resources {
        *count.entry((t, n.to_string())).or_default() += 1;
    }
    count
        .into_iter()
        .filter(|(_, c)| *c > 1)
        .map(|(k, _)| k)
        .collect()
}

pub(super) fn duplicate_resource_error() -> Failure {
    (
        ResponseError::InvalidRequest.code(),
        "the resource appears more than once in the request".to_string(),
    )
}

/// The current overrides of the topic a resource names, or why it cannot be altered.
pub(super) fn existing_topic_configs(
    req: &Request<'_>,
    resource_type: i8,
    name: &str,
) -> Result<BTreeMap<String, String>, Failure> {
    match resource_type {
        RESOURCE_TOPIC => req
            .image()
            .topic_by_name(name)
            .map(|t| t.configs.clone())
            .ok_or_else(|| {
                (
                    ResponseError::UnknownTopicOrPartition.code(),
                    format!("topic '{name}' does not exist"),
                )
            }),
        RESOURCE_BROKER_LOGGER => Err((
            ResponseError::InvalidRequest.code(),
            "broker loggers cannot be altered at runtime: set the log level with --log-level or \
             RUST_LOG and restart the broker"
                .to_string(),
        )),
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("resource type {other} is not supported (2 = topic, 4 = broker)"),
        )),
    }
}

/// Checks a complete override set against the topic property table: every name known, every
/// value valid (INVALID_CONFIG with Kafka's message otherwise).
pub(super) fn validate_topic_configs(
    req: &Request<'_>,
    configs: &BTreeMap<String, String>,
) -> Result<(), Failure> {
    topic_log_config(&req.effective_config().log_defaults, configs)
        .map(|_| ())
        .map_err(|e| (ResponseError::InvalidConfig.code(), e.to_string()))
}

/// Validates and stores a topic's new override set (through shard 0).
pub(super) async fn apply_topic_configs(
    req: &Request<'_>,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), Failure> {
    validate_topic_configs(req, &configs)?;
    let summary = format!("{configs:?}");
    req.admin(AdminOp::SetTopicConfigs {
        name: name.to_string(),
        configs,
        validate_only,
    })
    .await
    .map_err(|e| (e.code, e.message))?;
    if !validate_only {
        tracing::info!(topic = %name, configs = %summary, "altered topic configs");
    }
    Ok(())
}

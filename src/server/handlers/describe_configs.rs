//! DescribeConfigs (key 32): the effective config of topics (every topic property of the
//! table in `config::topic_properties`, with where its value comes from) and of this broker
//! (every property of `config::broker_properties`, then the topic defaults it lacks).

use crate::protocol::legacy_admin::{
    decode_describe_configs_v0, encode_describe_configs_response_v0,
};
use crate::protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use crate::protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use crate::protocol::ResponseError;
use bytes::Bytes;
use std::collections::BTreeMap;

use super::{str_bytes, HandlerError, Request};
use crate::config::topic_properties::TOPIC_PROPERTIES;
use crate::config::{broker_property, topic_log_config, BrokerConfig, BROKER_PROPERTIES};
use crate::log::LogConfig;
use crate::shard::metadata::validate_topic_name;

/// ConfigResource types (Kafka's `ConfigResource.Type`).
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// Config sources (`DescribeConfigsResponse.ConfigSource`).
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

pub fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: DescribeConfigsRequest = if req.version() == 0 {
        req.decode_with(decode_describe_configs_v0)?
    } else {
        req.decode()?
    };
    let mut response = DescribeConfigsResponse::default();
    for resource in &request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let described = match resource.resource_type {
            RESOURCE_TOPIC => describe_topic(req, &request, resource),
            RESOURCE_BROKER => describe_broker(req, &request, resource),
            other => Err((
                ResponseError::InvalidRequest.code(),
                format!("resource type {other} is not supported (2 = topic, 4 = broker)"),
            )),
        };
        match described {
            Ok(configs) => {
                result.error_message = None;
                result.configs = configs;
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = Some(str_bytes(message));
            }
        }
        response.results.push(result);
    }
    if req.version() == 0 {
        return Ok(encode_describe_configs_response_v0(&response));
    }
    req.encode(&response)
}

/// Whether the client asked for `name` (no keys, or an empty list, means every property).
fn wanted(resource: &DescribeConfigsResource, name: &str) -> bool {
    match &resource.configuration_keys {
        None => true,
        Some(keys) if keys.is_empty() => true,
        Some(keys) => keys.iter().any(|k| k.as_str() == name),
    }
}

/// One entry, with the version-specific fields set only where the version has them.
#[allow(clippy::too_many_arguments)]
fn entry(
    req: &Request<'_>,
    request: &DescribeConfigsRequest,
    name: &str,
    value: String,
    source: i8,
    read_only: bool,
    config_type: i8,
    doc: &str,
    synonyms: Vec<DescribeConfigsSynonym>,
) -> DescribeConfigsResourceResult {
    let mut e = DescribeConfigsResourceResult::default();
    e.name = str_bytes(name);
    e.value = Some(str_bytes(value));
    e.read_only = read_only;
    e.config_source = source;
    e.is_sensitive = false;
    if request.include_synonyms {
        e.synonyms = synonyms;
    }
    if req.version() >= 3 {
        e.config_type = config_type;
        e.documentation = request
            .include_documentation
            .then(|| str_bytes(doc.to_string()));
    }
    e
}

fn synonym(name: &str, value: String, source: i8) -> DescribeConfigsSynonym {
    let mut s = DescribeConfigsSynonym::default();
    s.name = str_bytes(name);
    s.value = Some(str_bytes(value));
    s.source = source;
    s
}

fn describe_topic(
    req: &Request<'_>,
    request: &DescribeConfigsRequest,
    resource: &DescribeConfigsResource,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, String)> {
    let name = resource.resource_name.as_str();
    if let Err(e) = validate_topic_name(name) {
        return Err((ResponseError::InvalidTopicException.code(), e.to_string()));
    }
    let meta = req.shard.metadata();
    let Some(topic) = meta.topic(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("topic '{name}' does not exist"),
        ));
    };
    let broker_defaults = &req.shard.config.log_defaults;
    let builtin = LogConfig::default();
    let effective = topic_log_config(broker_defaults, &topic.configs).map_err(|e| {
        (
            ResponseError::InvalidConfig.code(),
            format!("the stored config of topic {name} is invalid: {e}"),
        )
    })?;
    let no_overrides = BTreeMap::new();
    let mut configs = Vec::new();
    for prop in TOPIC_PROPERTIES {
        let name = prop.name;
        if !wanted(resource, name) {
            continue;
        }
        let value = prop.value(&effective, &topic.configs);
        let broker_value = prop.value(broker_defaults, &no_overrides);
        let default_value = prop.value(&builtin, &no_overrides);
        let broker_source = if broker_value != default_value {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        };
        // Synonyms, most specific first (as Kafka orders them); a property without a broker
        // synonym (the throttles, tiered storage) has only its own name.
        let mut synonyms = Vec::new();
        if let Some(v) = topic.configs.get(name) {
            synonyms.push(synonym(name, v.clone(), SOURCE_DYNAMIC_TOPIC));
        }
        if let Some(broker_name) = prop.broker_name {
            if broker_source == SOURCE_STATIC_BROKER {
                synonyms.push(synonym(
                    broker_name,
                    broker_value.clone(),
                    SOURCE_STATIC_BROKER,
                ));
            }
            synonyms.push(synonym(broker_name, default_value, SOURCE_DEFAULT));
        }
        let source = if topic.configs.contains_key(name) {
            SOURCE_DYNAMIC_TOPIC
        } else {
            broker_source
        };
        configs.push(entry(
            req,
            request,
            name,
            value,
            source,
            false,
            prop.kind.config_type(),
            prop.doc,
            synonyms,
        ));
    }
    Ok(configs)
}

fn describe_broker(
    req: &Request<'_>,
    request: &DescribeConfigsRequest,
    resource: &DescribeConfigsResource,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, String)> {
    let config = &req.shard.config;
    let name = resource.resource_name.as_str();
    if !name.is_empty() && name.parse::<i32>().ok() != Some(config.node_id) {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!(
                "unexpected broker id, expected {} or empty string, but received {name}",
                config.node_id
            ),
        ));
    }
    let builtin = BrokerConfig::default();
    let mut configs = Vec::new();
    for p in BROKER_PROPERTIES {
        let value = (p.get)(config);
        let default = (p.get)(&builtin);
        let explicit = config.is_explicit(p.name) || value != default;
        // Kafka lists its older names (`broker.id`, `log.dir`) as configs of their own.
        let same_unit_aliases = p.aliases.iter().filter(|a| a.factor == 1).map(|a| a.name);
        for name in std::iter::once(p.name).chain(same_unit_aliases) {
            if wanted(resource, name) {
                let (value, default) = (value.clone(), default.clone());
                let kind = p.kind.config_type();
                configs.push(broker_entry(
                    req, request, name, value, default, explicit, kind, p.doc,
                ));
            }
        }
    }
    // The other topic defaults (`log.cleanup.policy`, `compression.type`, ...), under their
    // broker names: not settable on the broker, so always the built-in default.
    let no_overrides = BTreeMap::new();
    let builtin_log = LogConfig::default();
    for p in TOPIC_PROPERTIES {
        let Some(name) = p.broker_name else { continue };
        if broker_property(name).is_some() || !wanted(resource, name) {
            continue;
        }
        let value = p.value(&config.log_defaults, &no_overrides);
        let default = p.value(&builtin_log, &no_overrides);
        let explicit = value != default;
        let kind = p.kind.config_type();
        configs.push(broker_entry(
            req, request, name, value, default, explicit, kind, p.doc,
        ));
    }
    Ok(configs)
}

/// One broker config: a value set at start-up is STATIC_BROKER_CONFIG, with the default
/// after it among the synonyms (Kafka's order: most specific first). Every broker config is
/// read-only here: AlterConfigs on a broker is refused.
#[allow(clippy::too_many_arguments)]
fn broker_entry(
    req: &Request<'_>,
    request: &DescribeConfigsRequest,
    name: &str,
    value: String,
    default: String,
    explicit: bool,
    config_type: i8,
    doc: &str,
) -> DescribeConfigsResourceResult {
    let source = if explicit {
        SOURCE_STATIC_BROKER
    } else {
        SOURCE_DEFAULT
    };
    let mut synonyms = Vec::new();
    if explicit {
        synonyms.push(synonym(name, value.clone(), SOURCE_STATIC_BROKER));
    }
    synonyms.push(synonym(name, default, SOURCE_DEFAULT));
    entry(
        req,
        request,
        name,
        value,
        source,
        true,
        config_type,
        doc,
        synonyms,
    )
}

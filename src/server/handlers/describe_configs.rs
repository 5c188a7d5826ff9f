//! DescribeConfigs (key 32): the effective config of topics (every topic property of the
//! table in `config::topic_properties`, with where its value comes from) and of this broker
//! (every property of `config::broker_properties`, then the topic defaults it lacks), each
//! with its synonyms: dynamic broker configs, the config file, the default.

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

use super::broker_configs::check_broker_resource;
use super::config_resource::{RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{str_bytes, HandlerError, Request};
use crate::config::topic_properties::TOPIC_PROPERTIES;
use crate::config::{
    broker_property, topic_log_config, BrokerConfig, BrokerProperty, BROKER_PROPERTIES,
};
use crate::log::LogConfig;
use crate::model::validate_topic_name;

/// Config sources (`DescribeConfigsResponse.ConfigSource`).
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
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
    let meta = req.image();
    let Some(topic) = meta.topic_by_name(name) else {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("topic '{name}' does not exist"),
        ));
    };
    let layers = meta.broker_config_layers(req.config().node_id);
    let configured_defaults = &req.config().log_defaults;
    let broker_defaults = req.config().with_dynamic(&layers).log_defaults;
    let builtin = LogConfig::default();
    let effective = topic_log_config(&broker_defaults, &topic.configs).map_err(|e| {
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
        // Synonyms, most specific first (as Kafka orders them); a property without a broker
        // synonym (the throttles, tiered storage) has only its own name.
        let mut synonyms = Vec::new();
        if let Some(v) = topic.configs.get(name) {
            synonyms.push(synonym(name, v.clone(), SOURCE_DYNAMIC_TOPIC));
        }
        if let Some(broker_name) = prop.broker_name {
            let configured = prop.value(configured_defaults, &no_overrides);
            let default = prop.value(&builtin, &no_overrides);
            let configured = (configured != default).then_some(configured);
            let names = broker_property(broker_name).map_or_else(|| vec![broker_name], names_of);
            synonyms.extend(broker_synonyms(&names, layers, configured, default));
        }
        let source = synonyms.first().map_or(SOURCE_DEFAULT, |s| s.source);
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

/// A broker property's name, then the other names it is set by (in Kafka's precedence).
fn names_of(p: &BrokerProperty) -> Vec<&'static str> {
    std::iter::once(p.name)
        .chain(p.aliases.iter().map(|a| a.name))
        .collect()
}

/// Where a broker property's value comes from, most specific first (Kafka's synonym order):
/// this broker's dynamic config, the cluster-wide dynamic default, the config file or flags
/// (`configured`, if set there), the default. `names`: the property's names, main one first.
fn broker_synonyms(
    names: &[&str],
    layers: [Option<&BTreeMap<String, String>>; 2],
    configured: Option<String>,
    default: String,
) -> Vec<DescribeConfigsSynonym> {
    let [cluster_default, own] = layers;
    let mut out = Vec::new();
    for (layer, source) in [
        (own, SOURCE_DYNAMIC_BROKER),
        (cluster_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
    ] {
        for name in names {
            if let Some(v) = layer.and_then(|l| l.get(*name)) {
                out.push(synonym(name, v.clone(), source));
            }
        }
    }
    if let Some(v) = configured {
        out.push(synonym(names[0], v, SOURCE_STATIC_BROKER));
    }
    out.push(synonym(names[0], default, SOURCE_DEFAULT));
    out
}

fn describe_broker(
    req: &Request<'_>,
    request: &DescribeConfigsRequest,
    resource: &DescribeConfigsResource,
) -> Result<Vec<DescribeConfigsResourceResult>, (i16, String)> {
    let config = req.config();
    check_broker_resource(config, resource.resource_name.as_str())?;
    let meta = req.image();
    let layers = meta.broker_config_layers(config.node_id);
    let effective = config.with_dynamic(&layers);
    let builtin = BrokerConfig::default();
    let mut configs = Vec::new();
    for p in BROKER_PROPERTIES {
        let value = (p.get)(&effective);
        let configured = (p.get)(config);
        let default = (p.get)(&builtin);
        let configured =
            (config.is_explicit(p.name) || configured != default).then_some(configured);
        let synonyms = broker_synonyms(&names_of(p), layers, configured, default);
        let source = synonyms.first().map_or(SOURCE_DEFAULT, |s| s.source);
        // Kafka lists its older names (`broker.id`, `log.dir`) as configs of their own.
        let same_unit_aliases = p.aliases.iter().filter(|a| a.factor == 1).map(|a| a.name);
        for name in std::iter::once(p.name).chain(same_unit_aliases) {
            if wanted(resource, name) {
                configs.push(entry(
                    req,
                    request,
                    name,
                    value.clone(),
                    source,
                    !p.runtime,
                    p.kind.config_type(),
                    p.doc,
                    synonyms.clone(),
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
        let value = p.value(&effective.log_defaults, &no_overrides);
        let default = p.value(&builtin_log, &no_overrides);
        let configured = (value != default).then(|| value.clone());
        let synonyms = broker_synonyms(&[name], [None, None], configured, default);
        let source = synonyms.first().map_or(SOURCE_DEFAULT, |s| s.source);
        let kind = p.kind.config_type();
        configs.push(entry(
            req, request, name, value, source, true, kind, p.doc, synonyms,
        ));
    }
    Ok(configs)
}

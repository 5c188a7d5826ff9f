//! DescribeConfigs (key 32): the effective config of topics (every topic property of the
//! table in `config::topic_properties`, with where its value comes from) and of this broker (read-only: broker
//! properties are set in the config file or on the command line).

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

use super::{str_bytes, HandlerError, Request};
use crate::config::topic_properties::{
    TOPIC_PROPERTIES, TYPE_BOOLEAN, TYPE_INT, TYPE_LIST, TYPE_LONG, TYPE_STRING,
};
use crate::config::{topic_log_config, BrokerConfig};
use crate::log::LogConfig;
use crate::model::validate_topic_name;

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
    let no_overrides = std::collections::BTreeMap::new();
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

/// The broker properties DescribeConfigs reports: (name, value, type, doc).
fn broker_properties(c: &BrokerConfig) -> Vec<(&'static str, String, i8, &'static str)> {
    let mut props = vec![
        (
            "node.id",
            c.node_id.to_string(),
            TYPE_INT,
            "This broker's id.",
        ),
        (
            "broker.id",
            c.node_id.to_string(),
            TYPE_INT,
            "This broker's id (same as node.id).",
        ),
        (
            "listeners",
            listed_value(c, "listeners"),
            TYPE_STRING,
            "The addresses listened on: clients' (every shard), and CONTROLLER's in a cluster.",
        ),
        (
            "advertised.listeners",
            listed_value(c, "advertised.listeners"),
            TYPE_STRING,
            "The address given to clients in Metadata.",
        ),
        (
            "log.dirs",
            c.data_dir.display().to_string(),
            TYPE_STRING,
            "The data directory.",
        ),
        (
            "num.partitions",
            c.num_partitions.to_string(),
            TYPE_INT,
            "Partitions of auto-created topics and of CreateTopics with -1.",
        ),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            TYPE_BOOLEAN,
            "Create unknown topics asked for in Metadata.",
        ),
        (
            "fetch.max.bytes",
            c.fetch_max_bytes.to_string(),
            TYPE_INT,
            "Most record bytes in one Fetch response (the first batch comes whole).",
        ),
        (
            "max.incremental.fetch.session.cache.slots",
            c.fetch_session_cache_slots.to_string(),
            TYPE_INT,
            "Fetch sessions (KIP-227) kept per shard; 0 turns them off.",
        ),
        (
            "socket.request.max.bytes",
            c.socket_request_max_bytes.to_string(),
            TYPE_INT,
            "Largest request frame accepted.",
        ),
        (
            "queued.max.request.bytes",
            c.queued_max_request_bytes(),
            TYPE_LONG,
            "Request bytes in flight on one connection before the broker stops reading it.",
        ),
        (
            "log.flush.offset.checkpoint.interval.ms",
            c.checkpoint_interval_ms.to_string(),
            TYPE_LONG,
            "How often each partition's recovery point and producer state are written (also at every roll).",
        ),
        (
            "replica.high.watermark.checkpoint.interval.ms",
            c.hw_checkpoint_interval_ms.to_string(),
            TYPE_LONG,
            "How often a replicated partition's high watermark is written, when it moved.",
        ),
        (
            "connections.max.idle.ms",
            c.connections_max_idle_ms.to_string(),
            TYPE_LONG,
            "A connection with no request for this long is closed; -1 never closes one.",
        ),
        (
            "ringbroker.request.read.timeout.ms",
            c.request_read_timeout_ms.to_string(),
            TYPE_LONG,
            "Time for the rest of a request to arrive once its first bytes did (at most connections.max.idle.ms).",
        ),
        (
            "ringbroker.shutdown.timeout.ms",
            c.shutdown_timeout_ms.to_string(),
            TYPE_LONG,
            "From SIGTERM or a failure, the broker ends within this; past it, it exits non-zero at once.",
        ),
        (
            "max.connections",
            c.max_connections.to_string(),
            TYPE_INT,
            "Open connections across all shards; more are closed at once.",
        ),
        (
            "max.connections.per.ip",
            c.max_connections_per_ip.to_string(),
            TYPE_INT,
            "Open connections from one address; more are closed at once.",
        ),
        (
            "max.connections.per.ip.overrides",
            listed_value(c, "max.connections.per.ip.overrides"),
            TYPE_STRING,
            "Per-address limits (ip:count,...) that replace max.connections.per.ip.",
        ),
        (
            "ringbroker.produce.memory.max.bytes",
            c.produce_memory_limit().to_string(),
            TYPE_LONG,
            "Produce request bytes one shard holds; more waits in the sockets (backpressure).",
        ),
        (
            "num.shards",
            c.shards.to_string(),
            TYPE_INT,
            "Shards (executors, one per core).",
        ),
        (
            "ringbroker.pin.shards",
            c.pin_shards.to_string(),
            TYPE_BOOLEAN,
            "Pin shard i to CPU i.",
        ),
        (
            "ringbroker.acks.all.fsync",
            c.fsync_on_acks_all.to_string(),
            TYPE_BOOLEAN,
            "acks=all produce waits for an fdatasync.",
        ),
        (
            "ringbroker.log.io",
            crate::config_listing::log_io_name(c.log_defaults.io).to_string(),
            TYPE_STRING,
            "How segment files are written: direct (O_DIRECT) or buffered (page cache).",
        ),
        (
            "ringbroker.log.tail.cache.bytes",
            c.tail_cache_bytes.to_string(),
            TYPE_LONG,
            "Per shard: memory for the last written log bytes, served to fetches without a disk read.",
        ),
        (
            "offsets.topic.num.partitions",
            c.group.offsets_partitions.to_string(),
            TYPE_INT,
            "Partitions of __consumer_offsets (fixed once the topic exists).",
        ),
        (
            "offsets.retention.minutes",
            (c.group.offsets_retention_ms / 60_000).to_string(),
            TYPE_INT,
            "Committed offsets of an empty group expire after this long.",
        ),
        (
            "group.initial.rebalance.delay.ms",
            c.group.initial_rebalance_delay_ms.to_string(),
            TYPE_INT,
            "How long a new group waits for more members before its first rebalance.",
        ),
        (
            "group.min.session.timeout.ms",
            c.group.min_session_timeout_ms.to_string(),
            TYPE_INT,
            "Smallest session timeout a member may ask for.",
        ),
        (
            "group.max.session.timeout.ms",
            c.group.max_session_timeout_ms.to_string(),
            TYPE_INT,
            "Largest session timeout a member may ask for.",
        ),
        (
            "group.max.size",
            c.group.max_size.to_string(),
            TYPE_INT,
            "Most members one group may have.",
        ),
        (
            "producer.id.expiration.ms",
            c.producer_id_expiration_ms.to_string(),
            TYPE_LONG,
            "How long an idempotent producer may stay idle before the broker forgets its sequence numbers.",
        ),
        (
            "ringbroker.metrics.listen",
            c.metrics_listen
                .map_or_else(|| "none".to_string(), |a| a.to_string()),
            TYPE_STRING,
            "Where shard 0 serves GET /metrics; none disables it.",
        ),
        (
            "ringbroker.log.slow.fsync.warn.ms",
            c.slow_fsync_warn_ms.to_string(),
            TYPE_LONG,
            "An fdatasync slower than this is logged (rate-limited); 0 disables.",
        ),
        (
            "ringbroker.disk.free.warn.bytes",
            c.disk_free_warn_bytes.to_string(),
            TYPE_LONG,
            "Warn when the data dir's filesystem has less free space; 0 disables.",
        ),
        (
            "ringbroker.disk.free.warn.percent",
            c.disk_free_warn_percent.to_string(),
            TYPE_INT,
            "Warn when less than this percentage of the filesystem is free; 0 disables.",
        ),
    ];
    // The KRaft properties (cluster mode), as `--check-config` lists them.
    const CLUSTER_DOCS: &[(&str, i8, &str)] = &[
        (
            "broker.heartbeat.interval.ms",
            TYPE_INT,
            "How often a broker heartbeats the active controller.",
        ),
        (
            "broker.rack",
            TYPE_STRING,
            "This broker's rack: replicas are spread over racks.",
        ),
        (
            "broker.session.timeout.ms",
            TYPE_INT,
            "A broker silent this long is fenced.",
        ),
        (
            "cluster.id",
            TYPE_STRING,
            "The cluster's id (meta.properties); generated when not set.",
        ),
        (
            "controller.listener.names",
            TYPE_LIST,
            "Listeners the controller quorum uses.",
        ),
        (
            "controller.quorum.election.timeout.ms",
            TYPE_INT,
            "Shortest Raft election timeout of the metadata quorum.",
        ),
        (
            "controller.quorum.voters",
            TYPE_LIST,
            "The metadata quorum: id@host:port,... (unset: single node).",
        ),
        (
            "default.replication.factor",
            TYPE_INT,
            "Replication factor of topics created without one.",
        ),
        (
            "offsets.topic.replication.factor",
            TYPE_INT,
            "Replication factor of __consumer_offsets (capped by the live brokers).",
        ),
        (
            "process.roles",
            TYPE_LIST,
            "broker, controller, or both (default: both for a voter).",
        ),
        (
            "replica.fetch.max.bytes",
            TYPE_INT,
            "Bytes a follower asks for per partition in one fetch.",
        ),
        (
            "replica.fetch.response.max.bytes",
            TYPE_INT,
            "Bytes a follower asks for in one fetch, all partitions together (the first \
             batch comes even when larger).",
        ),
        (
            "replica.fetch.wait.max.ms",
            TYPE_INT,
            "How long a follower's fetch waits at the leader for new data.",
        ),
        (
            "replica.lag.time.max.ms",
            TYPE_LONG,
            "A follower not caught up for this long leaves the ISR.",
        ),
    ];
    props.extend(
        CLUSTER_DOCS
            .iter()
            .map(|(name, kind, doc)| (*name, listed_value(c, name), *kind, *doc)),
    );
    // The topic defaults (`log.*`, `message.max.bytes`, ...), under their broker names.
    let no_overrides = std::collections::BTreeMap::new();
    for p in TOPIC_PROPERTIES {
        if let Some(broker_name) = p.broker_name {
            let v = p.value(&c.log_defaults, &no_overrides);
            props.push((broker_name, v, p.kind.config_type(), p.doc));
        }
    }
    props
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
    let defaults: std::collections::HashMap<&str, String> =
        broker_properties(&BrokerConfig::default())
            .into_iter()
            .map(|(n, v, _, _)| (n, v))
            .collect();
    let mut configs = Vec::new();
    for (prop, value, config_type, doc) in broker_properties(config) {
        if !wanted(resource, prop) {
            continue;
        }
        let default = defaults.get(prop).cloned().unwrap_or_default();
        let source = if value != default {
            SOURCE_STATIC_BROKER
        } else {
            SOURCE_DEFAULT
        };
        let mut synonyms = Vec::new();
        if source == SOURCE_STATIC_BROKER {
            synonyms.push(synonym(prop, value.clone(), SOURCE_STATIC_BROKER));
        }
        synonyms.push(synonym(prop, default, SOURCE_DEFAULT));
        configs.push(entry(
            req,
            request,
            prop,
            value,
            source,
            true,
            config_type,
            doc,
            synonyms,
        ));
    }
    Ok(configs)
}

/// A property's effective value as `serve --check-config` lists it.
fn listed_value(c: &BrokerConfig, name: &str) -> String {
    crate::config_listing::BROKER_PROPERTIES
        .iter()
        .find(|p| p.name == name)
        .map(|p| (p.value)(c))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every property `set` accepts (config_listing's table) is described too, so a new
    /// property cannot be forgotten here.
    #[test]
    fn every_broker_property_is_described() {
        let described: Vec<&str> = broker_properties(&BrokerConfig::default())
            .into_iter()
            .map(|(name, ..)| name)
            .collect();
        for p in crate::config_listing::BROKER_PROPERTIES {
            assert!(described.contains(&p.name), "{} is not described", p.name);
        }
    }
}

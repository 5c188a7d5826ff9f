//! Kafka 3.9's whole set of topic configs against the real broker, over raw requests:
//! CreateTopics, AlterConfigs and IncrementalAlterConfigs accept every name with a valid value
//! and refuse bad ones with INVALID_CONFIG and Kafka's message; DescribeConfigs lists them with
//! value, source, type and synonyms. Every wait is bounded; the broker is stopped by Drop.

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResponse;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    self, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

mod broker;
use broker::{s, Broker, Client};

const TOPIC: i8 = 2;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DEFAULT_CONFIG: i8 = 5;
const INVALID_CONFIG: i16 = 40;

/// Kafka 3.9's topic configs (its LogConfig), each with a valid value that is not the default,
/// and the value DescribeConfigs gives back for it.
const KAFKA_TOPIC_CONFIGS: &[(&str, &str, &str)] = &[
    ("cleanup.policy", "delete,compact", "delete,compact"), // in the order given, as Kafka
    ("compression.gzip.level", "5", "5"),
    ("compression.lz4.level", "10", "10"),
    ("compression.type", "zstd", "zstd"),
    ("compression.zstd.level", "7", "7"),
    ("delete.retention.ms", "1000", "1000"),
    ("file.delete.delay.ms", "1000", "1000"),
    ("flush.messages", "1000", "1000"),
    ("flush.ms", "1000", "1000"),
    ("follower.replication.throttled.replicas", "0:0", "0:0"),
    ("index.interval.bytes", "8192", "8192"),
    ("leader.replication.throttled.replicas", "*", "*"),
    ("local.retention.bytes", "1000", "1000"),
    ("local.retention.ms", "1000", "1000"),
    ("max.compaction.lag.ms", "1000", "1000"),
    ("max.message.bytes", "2000000", "2000000"),
    ("message.downconversion.enable", "false", "false"),
    ("message.format.version", "2.8", "2.8"),
    ("message.timestamp.after.max.ms", "3600000", "3600000"),
    ("message.timestamp.before.max.ms", "3600000", "3600000"),
    ("message.timestamp.difference.max.ms", "3600000", "3600000"),
    ("message.timestamp.type", "LogAppendTime", "LogAppendTime"),
    ("min.cleanable.dirty.ratio", "0.25", "0.25"),
    ("min.compaction.lag.ms", "1000", "1000"),
    ("min.insync.replicas", "2", "2"),
    ("preallocate", "true", "true"),
    ("remote.log.copy.disable", "true", "true"),
    ("remote.log.delete.on.disable", "true", "true"),
    ("remote.storage.enable", "false", "false"),
    ("retention.bytes", "100000000", "100000000"),
    ("retention.ms", "-1", "-1"),
    ("segment.bytes", "10000000", "10000000"),
    ("segment.index.bytes", "100000", "100000"),
    ("segment.jitter.ms", "1000", "1000"),
    ("segment.ms", "3600000", "3600000"),
    ("unclean.leader.election.enable", "true", "true"),
];

/// (name, invalid value, what Kafka's message says).
const INVALID: &[(&str, &str, &str)] = &[
    ("segment.bytes", "13", "Value must be at least 14"),
    ("segment.ms", "0", "Value must be at least 1"),
    ("retention.ms", "-2", "Value must be at least -1"),
    ("max.message.bytes", "many", "Not a number of type INT"),
    ("flush.ms", "1.5", "Not a number of type LONG"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("min.cleanable.dirty.ratio", "2", "between 0 and 1"),
    ("preallocate", "yes", "either true or false"),
    ("cleanup.policy", "compact,shred", "shred"),
    ("compression.type", "brotli", "String must be one of"),
    ("message.timestamp.type", "Now", "String must be one of"),
    (
        "message.timestamp.before.max.ms",
        "-1",
        "Value must be at least 0",
    ),
    ("segment.index.bytes", "3", "Value must be at least 4"),
    (
        "remote.storage.enable",
        "true",
        "remote.log.storage.system.enable",
    ),
    ("message.format.version", "latest", "not a valid version"),
    (
        "leader.replication.throttled.replicas",
        "0-1",
        "[partitionId]:[brokerId]",
    ),
    (
        "no.such.config",
        "1",
        "Unknown topic config name: no.such.config",
    ),
];

fn create(
    c: &mut Client,
    name: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> CreatableTopicResult {
    c.try_create_topic(name, 1, configs, validate_only)
}

fn describe(c: &mut Client, name: &str) -> DescribeConfigsResult {
    let mut r = DescribeConfigsResource::default();
    r.resource_type = TOPIC;
    r.resource_name = s(name);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    req.include_synonyms = true;
    req.include_documentation = true;
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 4, &req);
    let result = resp.results.into_iter().next().expect("one result");
    assert_eq!(result.error_code, 0, "{:?}", result.error_message);
    result
}

fn entry<'a>(d: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
    d.configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} is not described"))
}

fn value(d: &DescribeConfigsResult, name: &str) -> String {
    entry(d, name)
        .value
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_default()
}

fn alter(c: &mut Client, topic: &str, name: &str, v: &str) -> (i16, String) {
    let mut cfg = AlterableConfig::default();
    cfg.name = s(name);
    cfg.value = Some(s(v));
    let mut r = AlterConfigsResource::default();
    r.resource_type = TOPIC;
    r.resource_name = s(topic);
    r.configs = vec![cfg];
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req);
    let r = &resp.responses[0];
    outcome(r.error_code, &r.error_message)
}

fn incremental_set(c: &mut Client, topic: &str, name: &str, v: &str) -> (i16, String) {
    incremental(c, topic, name, 0, v)
}

/// IncrementalAlterConfigs v1 of one operation (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).
fn incremental(c: &mut Client, topic: &str, name: &str, op: i8, v: &str) -> (i16, String) {
    let mut cfg = incremental_alter_configs_request::AlterableConfig::default();
    cfg.name = s(name);
    cfg.config_operation = op;
    cfg.value = Some(s(v));
    let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
    r.resource_type = TOPIC;
    r.resource_name = s(topic);
    r.configs = vec![cfg];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse = c.call(ApiKey::IncrementalAlterConfigs, 1, &req);
    let r = &resp.responses[0];
    outcome(r.error_code, &r.error_message)
}

fn outcome(code: i16, message: &Option<kafka_protocol::protocol::StrBytes>) -> (i16, String) {
    (
        code,
        message.as_ref().map(|m| m.to_string()).unwrap_or_default(),
    )
}

#[test]
fn every_kafka_topic_config_is_accepted_and_described() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let all: Vec<(&str, &str)> = KAFKA_TOPIC_CONFIGS
        .iter()
        .map(|(n, v, _)| (*n, *v))
        .collect();
    let created = create(&mut c, "all", &all, false);
    assert_eq!(created.error_code, 0, "{:?}", created.error_message);

    let d = describe(&mut c, "all");
    for (name, _, shown) in KAFKA_TOPIC_CONFIGS {
        let e = entry(&d, name);
        assert_eq!(value(&d, name), *shown, "{name}");
        assert_eq!(e.config_source, DYNAMIC_TOPIC_CONFIG, "{name}");
        assert!(!e.read_only, "{name}");
        assert_eq!(
            e.synonyms[0].name.as_str(),
            *name,
            "{name}: the override first"
        );
        assert!(e.documentation.is_some(), "{name}");
    }
    // Kafka's config types (v3+): BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7.
    for (name, t) in [
        ("preallocate", 1),
        ("compression.type", 2),
        ("segment.bytes", 3),
        ("retention.ms", 5),
        ("min.cleanable.dirty.ratio", 6),
        ("cleanup.policy", 7),
        ("leader.replication.throttled.replicas", 7),
    ] {
        assert_eq!(entry(&d, name).config_type, t, "{name}");
    }

    // A topic without overrides lists the same names with Kafka's defaults, and the broker
    // property each default comes from as a synonym.
    let plain = create(&mut c, "plain", &[], false);
    assert_eq!(plain.error_code, 0);
    let d = describe(&mut c, "plain");
    for (name, _, _) in KAFKA_TOPIC_CONFIGS {
        assert_eq!(entry(&d, name).config_source, DEFAULT_CONFIG, "{name}");
    }
    for (name, default, synonym) in [
        ("compression.type", "producer", Some("compression.type")),
        (
            "message.format.version",
            "3.0-IV1",
            Some("log.message.format.version"),
        ),
        (
            "segment.index.bytes",
            "10485760",
            Some("log.index.size.max.bytes"),
        ),
        ("min.insync.replicas", "1", Some("min.insync.replicas")),
        (
            "message.timestamp.before.max.ms",
            "9223372036854775807",
            Some("log.message.timestamp.before.max.ms"),
        ),
        ("local.retention.ms", "-2", Some("log.local.retention.ms")),
        ("remote.storage.enable", "false", None),
    ] {
        assert_eq!(value(&d, name), default, "{name}");
        let synonyms: Vec<&str> = entry(&d, name)
            .synonyms
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(synonyms, synonym.into_iter().collect::<Vec<_>>(), "{name}");
    }

    // Each config, set alone on the existing topic by AlterConfigs and by
    // IncrementalAlterConfigs, is accepted too.
    for (name, v, shown) in KAFKA_TOPIC_CONFIGS {
        let (code, msg) = alter(&mut c, "plain", name, v);
        assert_eq!(code, 0, "AlterConfigs {name}={v}: {msg}");
        let (code, msg) = incremental_set(&mut c, "plain", name, v);
        assert_eq!(code, 0, "IncrementalAlterConfigs {name}={v}: {msg}");
        assert_eq!(value(&describe(&mut c, "plain"), name), *shown, "{name}");
    }
}

#[test]
fn invalid_topic_configs_are_refused_with_kafkas_messages() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    assert_eq!(create(&mut c, "t", &[], false).error_code, 0);
    for (name, bad, says) in INVALID {
        for validate_only in [false, true] {
            let r = create(&mut c, "refused", &[(name, bad)], validate_only);
            let msg = r.error_message.map(|m| m.to_string()).unwrap_or_default();
            assert_eq!(r.error_code, INVALID_CONFIG, "create {name}={bad}: {msg}");
            assert!(msg.contains(says), "create {name}={bad}: {msg}");
        }
        let (code, msg) = alter(&mut c, "t", name, bad);
        assert_eq!(code, INVALID_CONFIG, "alter {name}={bad}: {msg}");
        assert!(msg.contains(says), "alter {name}={bad}: {msg}");
        let (code, msg) = incremental_set(&mut c, "t", name, bad);
        assert_eq!(code, INVALID_CONFIG, "incremental {name}={bad}: {msg}");
        assert!(msg.contains(says), "incremental {name}={bad}: {msg}");
    }
    let (code, _, _) = c.topic_metadata("refused");
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());
    // A valid value reads back normalized, as Kafka renders a list.
    let (code, _) = alter(&mut c, "t", "cleanup.policy", " compact , delete ");
    assert_eq!(code, 0);
    assert_eq!(
        value(&describe(&mut c, "t"), "cleanup.policy"),
        "compact,delete"
    );
}

/// APPEND and SUBTRACT apply to list properties only; on another one Kafka's controller answers
/// INVALID_CONFIG (found by the Java admin client's differential test, tests/interop/kafka_diff.py).
#[test]
fn append_or_subtract_on_a_non_list_config_is_invalid_config() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    assert_eq!(create(&mut c, "t", &[], false).error_code, 0);
    for (op, verb) in [(2, "APPEND"), (3, "SUBTRACT")] {
        let (code, msg) = incremental(&mut c, "t", "retention.ms", op, "5");
        assert_eq!(code, INVALID_CONFIG, "{verb} retention.ms: {msg}");
        assert!(
            msg.contains(&format!("Can't {verb} to key retention.ms")),
            "{verb}: {msg}"
        );
    }
    // A list property takes them, and keeps its order: appended at the end, as Kafka does
    // ("delete,compact" there; the differential test found "compact,delete" here).
    let (code, msg) = incremental(&mut c, "t", "cleanup.policy", 2, "compact");
    assert_eq!(code, 0, "{msg}");
    assert_eq!(
        value(&describe(&mut c, "t"), "cleanup.policy"),
        "delete,compact"
    );
    let (code, msg) = incremental(&mut c, "t", "cleanup.policy", 3, "delete");
    assert_eq!(code, 0, "{msg}");
    assert_eq!(value(&describe(&mut c, "t"), "cleanup.policy"), "compact");
}

/// Non-incremental AlterConfigs v2 (librdkafka's version) of `configs` on `topic`.
fn alter_all(c: &mut Client, topic: &str, configs: Vec<AlterableConfig>) -> (i16, String) {
    let mut r = AlterConfigsResource::default();
    r.resource_type = TOPIC;
    r.resource_name = s(topic);
    r.configs = configs;
    let mut req = AlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, 2, &req);
    let r = &resp.responses[0];
    outcome(r.error_code, &r.error_message)
}

/// librdkafka's `test_AlterConfigs_simple`, as its test 0092 (mixed message versions) uses
/// it: DescribeConfigs v1 with synonyms, then a non-incremental AlterConfigs repeating every
/// entry described (defaults included) plus `message.format.version=0.10.0.0`, deprecated
/// since Kafka 3.0 (KIP-724) and ignored (batches stay v2), but still a valid topic config
/// that Kafka 3.x stores and describes. Told the broker is 3.2 or later, librdkafka leaves the
/// described `message.format.version` out: accepted, every entry sent becomes an override,
/// as Kafka stores them. Told nothing (its default, 2.4), it sends the name twice: refused
/// with INVALID_REQUEST, as Kafka does since 3.2 ("duplicate config keys"), nothing changed.
#[test]
fn a_describe_then_alter_of_everything_round_trips() {
    const INVALID_REQUEST: i16 = 42;
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    assert_eq!(create(&mut c, "roundtrip", &[], false).error_code, 0);
    let mut r = DescribeConfigsResource::default();
    r.resource_type = TOPIC;
    r.resource_name = s("roundtrip");
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    req.include_synonyms = true;
    let resp: DescribeConfigsResponse = c.call(ApiKey::DescribeConfigs, 1, &req);
    let described = &resp.results[0];
    assert_eq!(described.error_code, 0);
    assert_eq!(
        value(described, "message.format.version"),
        "3.0-IV1",
        "described, with Kafka 3.x's default"
    );
    let as_described = |skip: Option<&str>| -> Vec<AlterableConfig> {
        let mut configs: Vec<AlterableConfig> = described
            .configs
            .iter()
            .filter(|e| Some(e.name.as_str()) != skip)
            .map(|e| {
                let mut cfg = AlterableConfig::default();
                cfg.name = e.name.clone();
                cfg.value = e.value.clone();
                cfg
            })
            .collect();
        let mut format = AlterableConfig::default();
        format.name = s("message.format.version");
        format.value = Some(s("0.10.0.0"));
        configs.push(format);
        configs
    };

    // librdkafka told of a broker older than 3.2: the name twice.
    let (code, message) = alter_all(&mut c, "roundtrip", as_described(None));
    assert_eq!(code, INVALID_REQUEST, "{message}");
    let after = describe(&mut c, "roundtrip");
    assert_eq!(entry(&after, "retention.ms").config_source, DEFAULT_CONFIG);

    // Told of 3.2 or later: accepted and stored, defaults included.
    let sent = as_described(Some("message.format.version"));
    assert!(sent.iter().all(|cfg| cfg.value.is_some()), "no null values");
    assert_eq!(alter_all(&mut c, "roundtrip", sent), (0, String::new()));
    let after = describe(&mut c, "roundtrip");
    assert_eq!(value(&after, "message.format.version"), "0.10.0.0");
    for name in ["message.format.version", "retention.ms", "cleanup.policy"] {
        assert_eq!(
            entry(&after, name).config_source,
            DYNAMIC_TOPIC_CONFIG,
            "{name}"
        );
    }

    // IncrementalAlterConfigs of it too.
    assert_eq!(
        incremental_set(&mut c, "roundtrip", "message.format.version", "2.8-IV1"),
        (0, String::new())
    );
    let after = describe(&mut c, "roundtrip");
    assert_eq!(value(&after, "message.format.version"), "2.8-IV1");
}

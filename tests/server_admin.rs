//! The admin APIs against the real broker binary, over raw Kafka requests: DescribeConfigs,
//! AlterConfigs, IncrementalAlterConfigs, CreatePartitions, DeleteRecords, DeleteTopics,
//! DescribeCluster and ApiVersions. Every wait is bounded; the broker is stopped with SIGTERM
//! and must exit 0.

use std::path::Path;

use kafka_protocol::messages::alter_configs_request::{self, AlterConfigsRequest};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResponse;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsResponse;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
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
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::ResponseError;

mod broker;
use broker::{s, topic_name, Broker, Client};
use uuid::Uuid;

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC_ID: i16 = 100;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const DEFAULT_CONFIG: i8 = 5;

// ---------------------------------------------------------------------------------------------
// Requests this file sends often

/// The shared client plus the admin requests this file sends often.
struct AdminClient(Client);

impl std::ops::Deref for AdminClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for AdminClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl AdminClient {
    fn describe_configs(
        &mut self,
        version: i16,
        resource_type: i8,
        name: &str,
        keys: Option<&[&str]>,
    ) -> DescribeConfigsResult {
        let mut r = DescribeConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = s(name);
        r.configuration_keys = keys.map(|k| k.iter().map(|k| s(k)).collect());
        let mut req = DescribeConfigsRequest::default();
        req.resources = vec![r];
        req.include_synonyms = true;
        if version >= 3 {
            req.include_documentation = true;
        }
        let resp: DescribeConfigsResponse = self.call(ApiKey::DescribeConfigs, version, &req);
        assert_eq!(resp.results.len(), 1);
        resp.results.into_iter().next().unwrap()
    }

    /// IncrementalAlterConfigs v1 on a topic: (error code, message).
    fn incremental_alter(
        &mut self,
        topic: &str,
        ops: &[(&str, i8, Option<&str>)],
        validate_only: bool,
    ) -> (i16, Option<String>) {
        self.incremental_alter_on(TOPIC, topic, ops, validate_only)
    }

    /// IncrementalAlterConfigs v1 on any resource: (error code, message).
    fn incremental_alter_on(
        &mut self,
        resource_type: i8,
        name: &str,
        ops: &[(&str, i8, Option<&str>)],
        validate_only: bool,
    ) -> (i16, Option<String>) {
        let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = s(name);
        r.configs = ops
            .iter()
            .map(|(n, op, v)| {
                let mut c = incremental_alter_configs_request::AlterableConfig::default();
                c.name = s(n);
                c.config_operation = *op;
                c.value = v.map(s);
                c
            })
            .collect();
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![r];
        req.validate_only = validate_only;
        let resp: IncrementalAlterConfigsResponse =
            self.call(ApiKey::IncrementalAlterConfigs, 1, &req);
        let r = &resp.responses[0];
        assert_eq!(r.resource_name.as_str(), name);
        (
            r.error_code,
            r.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    /// AlterConfigs v2: (error code, message).
    fn alter(
        &mut self,
        resource_type: i8,
        name: &str,
        configs: &[(&str, &str)],
    ) -> (i16, Option<String>) {
        let mut r = alter_configs_request::AlterConfigsResource::default();
        r.resource_type = resource_type;
        r.resource_name = s(name);
        r.configs = configs
            .iter()
            .map(|(n, v)| {
                let mut c = alter_configs_request::AlterableConfig::default();
                c.name = s(n);
                c.value = Some(s(v));
                c
            })
            .collect();
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![r];
        let resp: AlterConfigsResponse = self.call(ApiKey::AlterConfigs, 2, &req);
        let r = &resp.responses[0];
        (
            r.error_code,
            r.error_message.as_ref().map(|m| m.to_string()),
        )
    }
}

fn config<'a>(result: &'a DescribeConfigsResult, name: &str) -> &'a DescribeConfigsResourceResult {
    result
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} is not described: {result:?}"))
}

fn value(result: &DescribeConfigsResult, name: &str) -> String {
    config(result, name)
        .value
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_default()
}

fn partition_dirs(data: &Path, topic: &str) -> Vec<String> {
    let prefix = format!("{topic}-");
    let mut found: Vec<String> = std::fs::read_dir(data)
        .expect("read the data dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|rest| rest.parse::<u32>().is_ok())
        })
        .collect();
    found.sort();
    found
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn topic_configs_describe_and_alter() {
    let mut broker = Broker::start(&[]);
    let mut c = AdminClient(broker.client());
    c.create_topic("cfg", 2, &[("retention.ms", "60000")]);

    // Every topic property, the override DYNAMIC, the rest defaults.
    let d = c.describe_configs(4, TOPIC, "cfg", None);
    assert_eq!(d.error_code, NONE, "{:?}", d.error_message);
    for name in ringbroker::config::TOPIC_PROPERTIES.iter().map(|p| p.name) {
        let e = config(&d, name);
        assert!(!e.read_only && !e.is_sensitive, "{name}");
        assert!(
            e.documentation.is_some(),
            "{name}: documentation was asked for"
        );
    }
    assert_eq!(value(&d, "retention.ms"), "60000");
    assert_eq!(
        config(&d, "retention.ms").config_source,
        DYNAMIC_TOPIC_CONFIG
    );
    assert_eq!(
        config(&d, "retention.ms").synonyms[0].source,
        DYNAMIC_TOPIC_CONFIG
    );
    assert_eq!(value(&d, "segment.bytes"), (1u64 << 30).to_string());
    assert_eq!(config(&d, "segment.bytes").config_source, DEFAULT_CONFIG);
    assert_eq!(value(&d, "cleanup.policy"), "delete");

    // Asking for some keys returns only those (unknown ones are left out); v1 encodes too.
    let d = c.describe_configs(1, TOPIC, "cfg", Some(&["retention.ms", "no.such.key"]));
    assert_eq!(d.error_code, NONE);
    assert_eq!(d.configs.len(), 1);
    assert_eq!(value(&d, "retention.ms"), "60000");

    // IncrementalAlterConfigs: SET and DELETE on top of the current overrides.
    let (code, msg) = c.incremental_alter(
        "cfg",
        &[
            ("retention.bytes", 0, Some("1048576")),
            ("retention.ms", 1, None),
        ],
        false,
    );
    assert_eq!(code, NONE, "{msg:?}");
    let d = c.describe_configs(4, TOPIC, "cfg", None);
    assert_eq!(value(&d, "retention.bytes"), "1048576");
    assert_eq!(
        config(&d, "retention.bytes").config_source,
        DYNAMIC_TOPIC_CONFIG
    );
    assert_eq!(
        value(&d, "retention.ms"),
        (7i64 * 24 * 3600 * 1000).to_string()
    );
    assert_eq!(config(&d, "retention.ms").config_source, DEFAULT_CONFIG);

    // validate_only changes nothing; APPEND on a non-list and unknown names are refused.
    let (code, _) = c.incremental_alter("cfg", &[("segment.ms", 0, Some("1000"))], true);
    assert_eq!(code, NONE);
    let d = c.describe_configs(4, TOPIC, "cfg", Some(&["segment.ms"]));
    assert_eq!(config(&d, "segment.ms").config_source, DEFAULT_CONFIG);
    // Kafka's controller answers INVALID_CONFIG here (checked against Kafka 4.1 by
    // tests/interop/kafka_diff.py), not INVALID_REQUEST.
    let (code, _) = c.incremental_alter("cfg", &[("retention.ms", 2, Some("1"))], false);
    assert_eq!(code, INVALID_CONFIG);
    let (code, _) = c.incremental_alter("cfg", &[("bogus.name", 0, Some("1"))], false);
    assert_eq!(code, INVALID_CONFIG);
    let (code, _) = c.incremental_alter("cfg", &[("cleanup.policy", 2, Some("delete"))], false);
    assert_eq!(code, NONE, "APPEND of a value already in the list");
    let (code, msg) = c.incremental_alter("cfg", &[("cleanup.policy", 2, Some("compact"))], false);
    assert_eq!(code, NONE, "{msg:?}");
    let d = c.describe_configs(4, TOPIC, "cfg", Some(&["cleanup.policy"]));
    // Appended at the end, as Kafka keeps a list (checked against Kafka 4.1).
    assert_eq!(value(&d, "cleanup.policy"), "delete,compact");
    let (code, _) = c.incremental_alter("cfg", &[("cleanup.policy", 3, Some("compact"))], false);
    assert_eq!(code, NONE, "SUBTRACT");
    let (code, _) = c.incremental_alter("cfg", &[("cleanup.policy", 2, Some("bogus"))], false);
    assert_eq!(code, INVALID_CONFIG, "not a cleanup policy");

    // AlterConfigs: bad values and unknown names are INVALID_CONFIG with a message.
    let (code, msg) = c.alter(TOPIC, "cfg", &[("retention.ms", "soon")]);
    assert_eq!(code, INVALID_CONFIG);
    assert!(msg.unwrap_or_default().contains("retention.ms"));
    let (code, msg) = c.alter(TOPIC, "cfg", &[("no.such.property", "1")]);
    assert_eq!(code, INVALID_CONFIG);
    assert!(msg.unwrap_or_default().contains("no.such.property"));
    let (code, _) = c.alter(BROKER, "0", &[("num.partitions", "3")]);
    assert_eq!(code, INVALID_REQUEST);
    let (code, _) = c.alter(TOPIC, "missing", &[("retention.ms", "1")]);
    assert_eq!(code, UNKNOWN_TOPIC_OR_PARTITION);

    // AlterConfigs replaces the whole override set: retention.bytes goes back to its default.
    let (code, msg) = c.alter(TOPIC, "cfg", &[("max.message.bytes", "200")]);
    assert_eq!(code, NONE, "{msg:?}");
    let d = c.describe_configs(4, TOPIC, "cfg", None);
    assert_eq!(value(&d, "max.message.bytes"), "200");
    assert_eq!(config(&d, "retention.bytes").config_source, DEFAULT_CONFIG);
    assert_eq!(value(&d, "retention.bytes"), "-1");

    // ...and applies live, on both shards' partitions.
    for p in 0..2 {
        let (code, _) = c.produce("cfg", p, 5, 100);
        assert_eq!(code, MESSAGE_TOO_LARGE, "partition {p}");
        let (code, _) = c.produce("cfg", p, 1, 10);
        assert_eq!(code, NONE, "partition {p}");
    }

    // Overrides survive a restart and are applied to the reopened logs.
    drop(c);
    broker.restart();
    let mut c = AdminClient(broker.client());
    let d = c.describe_configs(4, TOPIC, "cfg", None);
    assert_eq!(value(&d, "max.message.bytes"), "200");
    assert_eq!(
        config(&d, "max.message.bytes").config_source,
        DYNAMIC_TOPIC_CONFIG
    );
    assert_eq!(c.produce("cfg", 1, 5, 100).0, MESSAGE_TOO_LARGE);

    // Unknown topics and resource types; the broker resource is described read-only.
    let d = c.describe_configs(4, TOPIC, "missing", None);
    assert_eq!(d.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    let d = c.describe_configs(4, 99, "x", None);
    assert_eq!(d.error_code, INVALID_REQUEST);
    let d = c.describe_configs(4, BROKER, "0", None);
    assert_eq!(d.error_code, NONE, "{:?}", d.error_message);
    assert_eq!(
        value(&d, "log.dirs"),
        broker.data_dir().display().to_string()
    );
    assert_eq!(value(&d, "num.shards"), "2");
    assert!(config(&d, "log.dirs").read_only);
    for key in [
        "num.partitions",
        "auto.create.topics.enable",
        "message.max.bytes",
        "log.segment.bytes",
        "log.retention.ms",
    ] {
        config(&d, key);
    }
    let d = c.describe_configs(2, BROKER, "", Some(&["num.partitions"]));
    assert_eq!(d.error_code, NONE);
    assert_eq!(value(&d, "num.partitions"), "1");
    let d = c.describe_configs(4, BROKER, "7", None);
    assert_eq!(d.error_code, INVALID_REQUEST);

    drop(c);
    broker.stop_cleanly();
}

#[test]
fn partitions_records_and_topic_deletion() {
    let mut broker = Broker::start(&[]);
    let mut c = AdminClient(broker.client());
    c.create_topic("grow", 2, &[]);

    // CreatePartitions: validate_only, growth, no shrinking, manual assignments.
    assert_eq!(c.create_partitions("grow", 4, None, true).0, NONE);
    assert_eq!(c.topic_metadata("grow").1, 2);
    let (code, msg) = c.create_partitions("grow", 4, None, false);
    assert_eq!(code, NONE, "{msg:?}");
    let (code, partitions, _) = c.topic_metadata("grow");
    assert_eq!((code, partitions), (NONE, 4));
    let (code, msg) = c.create_partitions("grow", 3, None, false);
    assert_eq!(code, INVALID_PARTITIONS);
    assert!(msg.is_some());
    assert_eq!(
        c.create_partitions("grow", 4, None, false).0,
        INVALID_PARTITIONS
    );
    assert_eq!(
        c.create_partitions("grow", 6, Some(vec![vec![0], vec![5]]), false)
            .0,
        INVALID_REPLICA_ASSIGNMENT
    );
    assert_eq!(
        c.create_partitions("grow", 5, Some(vec![vec![0]]), false).0,
        NONE
    );
    assert_eq!(c.topic_metadata("grow").1, 5);
    assert_eq!(
        c.create_partitions("missing", 3, None, false).0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    for p in 0..5 {
        assert!(
            broker.data_dir().join(format!("grow-{p}")).is_dir(),
            "grow-{p}"
        );
    }
    // A new partition takes writes.
    assert_eq!(c.produce("grow", 4, 3, 10), (NONE, 0));

    // DeleteRecords on partitions of both shards.
    assert_eq!(c.produce("grow", 0, 10, 10), (NONE, 0));
    assert_eq!(c.produce("grow", 1, 10, 10), (NONE, 0));
    assert_eq!(c.delete_records("grow", 0, 5), (NONE, 5));
    assert_eq!(c.delete_records("grow", 1, -1), (NONE, 10));
    assert_eq!(
        c.delete_records("grow", 0, 3),
        (NONE, 5),
        "never moves back"
    );
    assert_eq!(c.delete_records("grow", 0, 11).0, OFFSET_OUT_OF_RANGE);
    assert_eq!(c.delete_records("grow", 9, 0).0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(
        c.delete_records("missing", 0, 0).0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(c.list_offset("grow", 0, -2), (NONE, 5));
    assert_eq!(c.list_offset("grow", 0, -1), (NONE, 10));
    assert_eq!(c.list_offset("grow", 1, -2), (NONE, 10));
    assert_eq!(c.fetch("grow", 0, 0).0, OFFSET_OUT_OF_RANGE);
    let (code, log_start, hw, bytes) = c.fetch("grow", 0, 5);
    assert_eq!((code, log_start, hw), (NONE, 5, 10));
    assert!(bytes > 0);

    // The partition count and the log start offsets survive a restart.
    drop(c);
    broker.restart();
    let mut c = AdminClient(broker.client());
    assert_eq!(c.topic_metadata("grow").1, 5);
    assert_eq!(c.list_offset("grow", 0, -2), (NONE, 5));
    assert_eq!(c.list_offset("grow", 1, -2), (NONE, 10));
    assert_eq!(c.list_offset("grow", 4, -1), (NONE, 3));

    // DeleteTopics by name: gone from Metadata and from disk.
    let data = broker.data_dir();
    assert_eq!(partition_dirs(&data, "grow").len(), 5);
    assert_eq!(
        c.delete_topic(Some("grow"), Uuid::nil()),
        (NONE, Some("grow".into()))
    );
    assert_eq!(c.topic_metadata("grow").0, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(partition_dirs(&data, "grow"), Vec::<String>::new());
    assert_eq!(
        c.delete_topic(Some("grow"), Uuid::nil()).0,
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(c.produce("grow", 0, 1, 10).0, UNKNOWN_TOPIC_OR_PARTITION);

    // By id (v6), and an unknown id.
    c.create_topic("byid", 2, &[]);
    let (_, _, id) = c.topic_metadata("byid");
    assert!(!id.is_nil());
    assert_eq!(
        c.delete_topic(None, ringbroker::util::entropy::uuid_v4()).0,
        UNKNOWN_TOPIC_ID
    );
    assert_eq!(c.delete_topic(None, id), (NONE, Some("byid".into())));
    assert_eq!(c.topic_metadata("byid").0, UNKNOWN_TOPIC_OR_PARTITION);
    assert!(partition_dirs(&data, "byid").is_empty());

    // v1 by names; the name can be used again afterwards.
    c.create_topic("old", 1, &[]);
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = vec![topic_name("old"), topic_name("never")];
    req.timeout_ms = 5000;
    let resp: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, 1, &req);
    let codes: Vec<i16> = resp.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![NONE, UNKNOWN_TOPIC_OR_PARTITION]);
    c.create_topic("old", 1, &[]);
    assert_eq!(
        c.produce("old", 0, 2, 10),
        (NONE, 0),
        "a recreated topic starts empty"
    );

    // Deleted topics stay deleted after a restart.
    drop(c);
    broker.restart();
    let mut c = AdminClient(broker.client());
    for gone in ["grow", "byid"] {
        assert_eq!(
            c.topic_metadata(gone).0,
            UNKNOWN_TOPIC_OR_PARTITION,
            "{gone}"
        );
        assert!(partition_dirs(&data, gone).is_empty(), "{gone}");
    }
    assert_eq!(c.list_offset("old", 0, -1), (NONE, 2));

    drop(c);
    broker.stop_cleanly();
}

#[test]
fn cluster_description_and_every_version_encodes() {
    let broker = Broker::start(&[]);
    let mut c = AdminClient(broker.client());

    for version in 0..=1 {
        let req = DescribeClusterRequest::default();
        let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, version, &req);
        assert_eq!(resp.error_code, NONE);
        assert_eq!(resp.controller_id, BrokerId(0));
        assert!(!resp.cluster_id.is_empty());
        assert_eq!(resp.brokers.len(), 1);
        assert_eq!(resp.brokers[0].broker_id, BrokerId(0));
        assert_eq!(resp.brokers[0].host.as_str(), "127.0.0.1");
        assert_eq!(resp.brokers[0].port, i32::from(broker.addr.port()));
        assert_eq!(resp.endpoint_type, 1);
    }
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 2;
    let resp: DescribeClusterResponse = c.call(ApiKey::DescribeCluster, 1, &req);
    assert_eq!(
        resp.error_code,
        ResponseError::UnsupportedEndpointType.code()
    );

    // ApiVersions advertises exactly the handler table.
    let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, NONE);
    for spec in ringbroker::server::handlers::APIS {
        let v = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == spec.key as i16)
            .unwrap_or_else(|| panic!("{:?} is not advertised", spec.key));
        if spec.key != ApiKey::Produce {
            assert_eq!(v.min_version, spec.min_version, "{:?}", spec.key);
        }
        assert_eq!(v.max_version, spec.max_version, "{:?}", spec.key);
    }
    assert_eq!(
        resp.api_keys.len(),
        ringbroker::server::handlers::APIS.len()
    );
    for (key, min, max) in [
        (ApiKey::DeleteTopics, 0, 6),
        (ApiKey::DeleteRecords, 0, 2),
        (ApiKey::DescribeConfigs, 0, 4),
        (ApiKey::AlterConfigs, 0, 2),
        (ApiKey::CreatePartitions, 0, 3),
        (ApiKey::IncrementalAlterConfigs, 0, 1),
        (ApiKey::DescribeCluster, 0, 1),
    ] {
        let v = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap();
        assert_eq!((v.min_version, v.max_version), (min, max), "{key:?}");
    }

    // Every advertised version of every new API answers (the response encodes).
    c.create_topic("v", 1, &[("retention.ms", "1000")]);
    for version in 1..=4 {
        for (t, name) in [(TOPIC, "v"), (TOPIC, "missing"), (BROKER, "0")] {
            let d = c.describe_configs(version, t, name, None);
            assert_eq!(d.error_code == NONE, name != "missing", "v{version} {name}");
        }
    }
    for version in 0..=2 {
        let mut r = alter_configs_request::AlterConfigsResource::default();
        r.resource_type = TOPIC;
        r.resource_name = s("v");
        let mut req = AlterConfigsRequest::default();
        req.resources = vec![r];
        req.validate_only = true;
        let resp: AlterConfigsResponse = c.call(ApiKey::AlterConfigs, version, &req);
        assert_eq!(resp.responses[0].error_code, NONE, "v{version}");
    }
    for version in 0..=1 {
        let mut r = incremental_alter_configs_request::AlterConfigsResource::default();
        r.resource_type = TOPIC;
        r.resource_name = s("missing");
        let mut req = IncrementalAlterConfigsRequest::default();
        req.resources = vec![r];
        let resp: IncrementalAlterConfigsResponse =
            c.call(ApiKey::IncrementalAlterConfigs, version, &req);
        assert_eq!(resp.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
    }
    for version in 0..=3 {
        let mut t = CreatePartitionsTopic::default();
        t.name = topic_name("v");
        t.count = 1;
        let mut req = CreatePartitionsRequest::default();
        req.topics = vec![t];
        let resp: CreatePartitionsResponse = c.call(ApiKey::CreatePartitions, version, &req);
        assert_eq!(resp.results[0].error_code, INVALID_PARTITIONS, "v{version}");
    }
    for version in 0..=2 {
        let mut p = DeleteRecordsPartition::default();
        p.offset = 0;
        let mut t = DeleteRecordsTopic::default();
        t.name = topic_name("v");
        t.partitions = vec![p];
        let mut req = DeleteRecordsRequest::default();
        req.topics = vec![t];
        let resp: DeleteRecordsResponse = c.call(ApiKey::DeleteRecords, version, &req);
        assert_eq!(resp.topics[0].partitions[0].error_code, NONE, "v{version}");
        assert_eq!(resp.topics[0].partitions[0].low_watermark, 0);
    }
    for version in 1..=5 {
        let mut req = DeleteTopicsRequest::default();
        req.topic_names = vec![topic_name("missing")];
        let resp: DeleteTopicsResponse = c.call(ApiKey::DeleteTopics, version, &req);
        assert_eq!(resp.responses[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(
            resp.responses[0].error_message.is_some(),
            version >= 5,
            "v{version}"
        );
    }

    drop(c);
    broker.stop_cleanly();
}

/// Dynamic broker configs (`kafka-configs --entity-type brokers --alter`): a topic default
/// Kafka makes cluster-wide changes on the running broker and reaches every topic without an
/// override of it; a broker's own value wins over the cluster-wide one; both are described
/// with their source and survive a restart; what cannot change at runtime is refused.
#[test]
fn dynamic_broker_configs_change_topic_defaults_live() {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    let mut broker = Broker::start(&[]);
    let mut c = AdminClient(broker.client());
    c.create_topic("dyn", 2, &[]);
    c.create_topic("own", 1, &[("max.message.bytes", "100000")]);

    let set = |v| [("message.max.bytes", SET, Some(v))];
    let (code, msg) = c.incremental_alter_on(BROKER, "", &set("200"), false);
    assert_eq!(code, NONE, "{msg:?}");
    for p in 0..2 {
        assert_eq!(
            c.produce("dyn", p, 5, 100).0,
            MESSAGE_TOO_LARGE,
            "partition {p}"
        );
        assert_eq!(c.produce("dyn", p, 1, 10).0, NONE, "partition {p}");
    }
    assert_eq!(
        c.produce("own", 0, 5, 100).0,
        NONE,
        "the topic's override wins"
    );
    let d = c.describe_configs(4, BROKER, "0", Some(&["message.max.bytes"]));
    let e = config(&d, "message.max.bytes");
    assert_eq!(value(&d, "message.max.bytes"), "200");
    assert_eq!(e.config_source, DYNAMIC_DEFAULT_BROKER_CONFIG);
    assert!(!e.read_only, "altered at runtime");
    let d = c.describe_configs(4, TOPIC, "dyn", Some(&["max.message.bytes"]));
    let e = config(&d, "max.message.bytes");
    assert_eq!(value(&d, "max.message.bytes"), "200");
    assert_eq!(e.config_source, DYNAMIC_DEFAULT_BROKER_CONFIG);
    assert_eq!(e.synonyms[0].name.as_str(), "message.max.bytes");

    // This broker's own value wins over the cluster-wide default.
    let (code, msg) = c.incremental_alter_on(BROKER, "0", &set("100000"), false);
    assert_eq!(code, NONE, "{msg:?}");
    assert_eq!(c.produce("dyn", 1, 5, 100).0, NONE);

    // Refused: read-only (Kafka's own rule), per-broker at the cluster level, a bad value,
    // another broker's id; validate_only changes nothing.
    let refused = [
        (BROKER, "0", "num.partitions", "3", INVALID_REQUEST),
        (
            BROKER,
            "",
            "listeners",
            "PLAINTEXT://127.0.0.1:1",
            INVALID_REQUEST,
        ),
        (BROKER, "0", "max.connections", "10", INVALID_REQUEST),
        (BROKER, "0", "log.segment.bytes", "0", INVALID_CONFIG),
        (BROKER, "0", "no.such.property", "1", INVALID_CONFIG),
        (BROKER, "7", "log.retention.ms", "1", INVALID_REQUEST),
    ];
    for (t, resource, name, v, expected) in refused {
        let (code, msg) = c.incremental_alter_on(t, resource, &[(name, SET, Some(v))], false);
        assert_eq!(code, expected, "{name}={v} on '{resource}': {msg:?}");
    }
    let (code, msg) = c.alter(BROKER, "0", &[("num.partitions", "3")]);
    assert_eq!(code, INVALID_REQUEST);
    assert!(
        msg.unwrap_or_default()
            .contains("Cannot update these configs dynamically"),
        "Kafka's message"
    );
    let (code, _) = c.incremental_alter_on(BROKER, "0", &set("1"), true);
    assert_eq!(code, NONE, "validate only");
    assert_eq!(
        c.produce("dyn", 1, 5, 100).0,
        NONE,
        "validate only changed nothing"
    );

    // Kept across a restart, with its source.
    drop(c);
    broker.restart();
    let mut c = AdminClient(broker.client());
    let d = c.describe_configs(4, BROKER, "0", Some(&["message.max.bytes"]));
    assert_eq!(value(&d, "message.max.bytes"), "100000");
    let e = config(&d, "message.max.bytes");
    assert_eq!(e.config_source, DYNAMIC_BROKER_CONFIG);
    let sources: Vec<i8> = e.synonyms.iter().map(|s| s.source).collect();
    assert_eq!(
        sources,
        [
            DYNAMIC_BROKER_CONFIG,
            DYNAMIC_DEFAULT_BROKER_CONFIG,
            DEFAULT_CONFIG
        ],
        "most specific first"
    );

    // Deleting this broker's value falls back to the cluster-wide one.
    let (code, msg) =
        c.incremental_alter_on(BROKER, "0", &[("message.max.bytes", DELETE, None)], false);
    assert_eq!(code, NONE, "{msg:?}");
    assert_eq!(c.produce("dyn", 0, 5, 100).0, MESSAGE_TOO_LARGE);
    drop(c);
    broker.stop_cleanly();
}

/// The messages of CreateTopics and CreatePartitions refusals are Kafka's, word for word (the
/// differential test against Apache Kafka 4.1, tests/interop/kafka_diff.py, compares what
/// kafka-topics prints).
#[test]
fn topic_refusals_carry_kafkas_messages() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("t", 3, &[]);
    let again = c.try_create_topic("t", 3, &[], false);
    assert_eq!(again.error_code, ResponseError::TopicAlreadyExists.code());
    assert_eq!(
        again.error_message.map(|m| m.to_string()).as_deref(),
        Some("Topic 't' already exists.")
    );
    let rf = c.try_create_replicated_topic("rf3", 1, 3, &[], false);
    assert_eq!(
        rf.error_code,
        ResponseError::InvalidReplicationFactor.code()
    );
    assert_eq!(
        rf.error_message.map(|m| m.to_string()).as_deref(),
        Some(
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
             cannot be reached because only 1 broker(s) are registered."
        )
    );
    let (code, msg) = c.create_partitions("t", 2, None, false);
    assert_eq!(code, ResponseError::InvalidPartitions.code());
    assert_eq!(
        msg.as_deref(),
        Some("The topic t currently has 3 partition(s); 2 would not be an increase.")
    );
    let (code, msg) = c.create_partitions("t", 3, None, false);
    assert_eq!(code, ResponseError::InvalidPartitions.code());
    assert_eq!(msg.as_deref(), Some("Topic already has 3 partition(s)."));
}

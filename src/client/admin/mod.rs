//! Admin calls on a [`Cluster`]: topics (list, create, delete, add partitions), configs
//! (describe, alter) and consumer groups (list, describe, delete, delete offsets). Each returns
//! plain structs; a Kafka error of the one thing asked about is a [`ClientError::Kafka`], and
//! calls about several things return one result per thing.
//!
//! Topics are here; configs in `configs`, consumer groups in `groups`.

mod configs;
mod groups;

pub use configs::{
    alter_configs, apply_changes, describe_configs, ConfigChange, ConfigEntry, ConfigResource,
    ConfigSource,
};
pub use groups::{
    coordinator_of, decode_assignment, delete_groups, delete_offsets, describe_group, list_groups,
    GroupInfo, GroupListing, MemberInfo,
};

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::cluster::{topic_name, Cluster};
use super::error::{ClientError, ClientResult, KafkaCode};

/// One partition of a topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    /// -1 when there is none.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub error: Option<KafkaCode>,
}

/// A topic as Metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub internal: bool,
    /// Sorted by partition index.
    pub partitions: Vec<PartitionInfo>,
}

/// What to create.
#[derive(Debug, Clone, Default)]
pub struct NewTopic {
    pub name: String,
    /// `None`: the broker's `num.partitions`.
    pub partitions: Option<i32>,
    /// `None`: the broker's `default.replication.factor`.
    pub replication_factor: Option<i16>,
    /// Replicas per partition (broker ids, the first the preferred leader) instead of the
    /// broker's placement; then `partitions` and `replication_factor` must be `None`.
    pub replica_assignment: Option<Vec<Vec<i32>>>,
    pub configs: Vec<(String, String)>,
}

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(super) fn kafka_error(
    api: &'static str,
    code: i16,
    message: Option<&StrBytes>,
) -> ClientResult<()> {
    match KafkaCode::from_code(code) {
        None => Ok(()),
        Some(code) => Err(ClientError::Kafka {
            api,
            code,
            message: message.map(|m| m.to_string()).filter(|m| !m.is_empty()),
        }),
    }
}

pub(super) fn timeout_ms(cluster: &Cluster) -> i32 {
    cluster
        .config()
        .request_timeout
        .as_millis()
        .min(i32::MAX as u128) as i32
}

/// Metadata of `topics` (every topic when `None`). A topic that does not exist is an
/// `UNKNOWN_TOPIC_OR_PARTITION` error when named.
pub fn describe_topics(cluster: &Cluster, topics: Option<&[&str]>) -> ClientResult<Vec<TopicInfo>> {
    let mut req = MetadataRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|t| {
                let mut rt = MetadataRequestTopic::default();
                rt.name = Some(topic_name(t));
                rt
            })
            .collect()
    });
    req.allow_auto_topic_creation = false;
    let version = cluster.version(ApiKey::Metadata)?;
    let resp: MetadataResponse = cluster
        .any_connection()?
        .call(ApiKey::Metadata, version, &req)?;
    let mut out = Vec::new();
    for t in &resp.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        kafka_error("Metadata", t.error_code, None).map_err(|e| match e {
            ClientError::Kafka { api, code, .. } => ClientError::Kafka {
                api,
                code,
                message: Some(format!("topic {name}")),
            },
            other => other,
        })?;
        let mut partitions: Vec<PartitionInfo> = t
            .partitions
            .iter()
            .map(|p| PartitionInfo {
                partition: p.partition_index,
                leader: p.leader_id.0,
                replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                error: KafkaCode::from_code(p.error_code),
            })
            .collect();
        partitions.sort_by_key(|p| p.partition);
        out.push(TopicInfo {
            name,
            internal: t.is_internal,
            partitions,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Creates a topic. Unlike [`Cluster::create_topic`], an existing topic is an error
/// (`TOPIC_ALREADY_EXISTS`), so that callers can tell.
pub fn create_topic(cluster: &Cluster, topic: &NewTopic) -> ClientResult<()> {
    let mut t = CreatableTopic::default();
    t.name = topic_name(&topic.name);
    t.num_partitions = topic.partitions.unwrap_or(-1);
    t.replication_factor = topic.replication_factor.unwrap_or(-1);
    if let Some(assignment) = &topic.replica_assignment {
        t.assignments = assignment
            .iter()
            .enumerate()
            .map(|(index, brokers)| {
                let mut a = CreatableReplicaAssignment::default();
                a.partition_index = index as i32;
                a.broker_ids = brokers.iter().map(|b| BrokerId(*b)).collect();
                a
            })
            .collect();
    }
    t.configs = topic
        .configs
        .iter()
        .map(|(n, v)| {
            let mut c = CreatableTopicConfig::default();
            c.name = s(n);
            c.value = Some(s(v));
            c
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = timeout_ms(cluster);
    let version = cluster.version(ApiKey::CreateTopics)?;
    let resp: CreateTopicsResponse =
        cluster
            .any_connection()?
            .call(ApiKey::CreateTopics, version, &req)?;
    let result = resp
        .topics
        .first()
        .ok_or_else(|| ClientError::codec("CreateTopics response", "no topic in it"))?;
    kafka_error(
        "CreateTopics",
        result.error_code,
        result.error_message.as_ref(),
    )
}

/// Deletes topics; one result per topic, in the order asked.
pub fn delete_topics(
    cluster: &Cluster,
    topics: &[&str],
) -> ClientResult<Vec<(String, ClientResult<()>)>> {
    let version = cluster.version(ApiKey::DeleteTopics)?;
    let mut req = DeleteTopicsRequest::default();
    if version >= 6 {
        req.topics = topics
            .iter()
            .map(|t| {
                let mut state = DeleteTopicState::default();
                state.name = Some(topic_name(t));
                state
            })
            .collect();
    } else {
        req.topic_names = topics.iter().map(|t| topic_name(t)).collect();
    }
    req.timeout_ms = timeout_ms(cluster);
    let resp: DeleteTopicsResponse =
        cluster
            .any_connection()?
            .call(ApiKey::DeleteTopics, version, &req)?;
    let mut by_name: BTreeMap<String, ClientResult<()>> = resp
        .responses
        .iter()
        .map(|r| {
            let name = r.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            let result = kafka_error("DeleteTopics", r.error_code, r.error_message.as_ref());
            (name, result)
        })
        .collect();
    Ok(topics
        .iter()
        .map(|t| {
            let result = by_name.remove(*t).unwrap_or_else(|| {
                Err(ClientError::codec(
                    "DeleteTopics response",
                    format!("no result for {t}"),
                ))
            });
            (t.to_string(), result)
        })
        .collect())
}

/// Grows `topic` to `total` partitions.
pub fn create_partitions(cluster: &Cluster, topic: &str, total: i32) -> ClientResult<()> {
    let mut t = CreatePartitionsTopic::default();
    t.name = topic_name(topic);
    t.count = total;
    t.assignments = None;
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = timeout_ms(cluster);
    let version = cluster.version(ApiKey::CreatePartitions)?;
    let resp: CreatePartitionsResponse =
        cluster
            .any_connection()?
            .call(ApiKey::CreatePartitions, version, &req)?;
    let result = resp
        .results
        .first()
        .ok_or_else(|| ClientError::codec("CreatePartitions response", "no topic in it"))?;
    kafka_error(
        "CreatePartitions",
        result.error_code,
        result.error_message.as_ref(),
    )
}

/// Whether `e` is the Kafka error `expected`.
pub fn is_kafka_error(e: &ClientError, expected: ResponseError) -> bool {
    matches!(e, ClientError::Kafka { code, .. } if code.0 == expected.code())
}

/// Creates a topic (replication factor 1 unless configured otherwise by the broker).
/// `TOPIC_ALREADY_EXISTS` is not an error (see [`create_topic`] for the
/// strict form).
pub fn create_topic_if_absent(
    cluster: &Cluster,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    configs: &[(&str, &str)],
) -> ClientResult<()> {
    let topic = NewTopic {
        name: name.to_string(),
        partitions: Some(partitions),
        replication_factor: Some(replication_factor),
        replica_assignment: None,
        configs: configs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    };
    match create_topic(cluster, &topic) {
        Err(ClientError::Kafka { code, .. })
            if code.0 == ResponseError::TopicAlreadyExists.code() =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Makes sure `topic` exists (creating it with `partitions` partitions if it does not) and
/// waits until every partition has a leader. Returns the partition count.
pub fn ensure_topic(cluster: &Cluster, topic: &str, partitions: i32) -> ClientResult<usize> {
    let md = cluster.refresh_metadata(&[topic])?;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    match md.topics.get(topic).and_then(|t| t.error) {
        Some(code) if code.0 == unknown => {
            create_topic_if_absent(cluster, topic, partitions, 1, &[])?
        }
        Some(code) => {
            return Err(ClientError::Kafka {
                api: "Metadata",
                code,
                message: None,
            })
        }
        None if md.topics.contains_key(topic) => {}
        None => create_topic_if_absent(cluster, topic, partitions, 1, &[])?,
    }
    cluster.wait_for_leaders(topic)
}

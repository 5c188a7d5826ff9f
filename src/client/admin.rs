//! Admin calls on a [`Cluster`]: topics (list, create, delete, add partitions), configs
//! (describe, alter) and consumer groups (list, describe, delete, delete offsets). Each returns
//! plain structs; a Kafka error of the one thing asked about is a [`ClientError::Kafka`], and
//! calls about several things return one result per thing.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource as LegacyResource,
    AlterableConfig as LegacyAlterableConfig,
};
use kafka_protocol::messages::alter_configs_response::AlterConfigsResponse;
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::DeleteGroupsResponse;
use kafka_protocol::messages::delete_topics_request::{DeleteTopicState, DeleteTopicsRequest};
use kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::OffsetDeleteResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, GroupId};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;

use super::accumulator::TopicPartition;
use super::cluster::{topic_name, Cluster};
use super::error::{ClientError, ClientResult, KafkaCode};
use super::group_coordinator::{call_coordinator, find_coordinator};

/// ConfigResource types (Kafka's `ConfigResource.Type`).
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

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

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    /// `None` from brokers older than ListGroups v4.
    pub state: Option<String>,
}

/// A member of a group and what it was assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Topic → partitions, decoded from the consumer protocol assignment (empty for other
    /// protocol types or before the group's first SyncGroup).
    pub assignment: BTreeMap<String, Vec<i32>>,
}

/// A group as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
    pub protocol_type: String,
    /// The assignor chosen (range, roundrobin, ...), empty unless stable.
    pub protocol: String,
    pub members: Vec<MemberInfo>,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn group_id(v: &str) -> GroupId {
    GroupId(s(v))
}

fn kafka_error(api: &'static str, code: i16, message: Option<&StrBytes>) -> ClientResult<()> {
    match KafkaCode::from_code(code) {
        None => Ok(()),
        Some(code) => Err(ClientError::Kafka {
            api,
            code,
            message: message.map(|m| m.to_string()).filter(|m| !m.is_empty()),
        }),
    }
}

fn timeout_ms(cluster: &Cluster) -> i32 {
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
) -> ClientResult<std::sync::Arc<super::connection::Connection>> {
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

/// Every group of every broker, sorted by id.
pub fn list_groups(cluster: &Cluster) -> ClientResult<Vec<GroupListing>> {
    let version = cluster.version(ApiKey::ListGroups)?;
    let mut brokers: Vec<i32> = cluster.metadata().brokers.keys().copied().collect();
    brokers.sort_unstable();
    let mut groups = BTreeMap::new();
    for broker in brokers {
        let resp: ListGroupsResponse = cluster.connection(broker)?.call(
            ApiKey::ListGroups,
            version,
            &ListGroupsRequest::default(),
        )?;
        kafka_error("ListGroups", resp.error_code, None)?;
        for g in resp.groups {
            let id = g.group_id.0.to_string();
            let listing = GroupListing {
                group_id: id.clone(),
                protocol_type: g.protocol_type.to_string(),
                state: (version >= 4).then(|| g.group_state.to_string()),
            };
            groups.insert(id, listing);
        }
    }
    Ok(groups.into_values().collect())
}

/// State, protocol and members of `group`, asked of its coordinator. A group that does not
/// exist is a `GROUP_ID_NOT_FOUND` error.
pub fn describe_group(cluster: &Cluster, group: &str) -> ClientResult<GroupInfo> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![group_id(group)];
    let resp: DescribeGroupsResponse = call_coordinator(
        cluster,
        group,
        ApiKey::DescribeGroups,
        &req,
        |r: &DescribeGroupsResponse| {
            r.groups
                .first()
                .and_then(|g| KafkaCode::from_code(g.error_code))
        },
    )?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| ClientError::codec("DescribeGroups response", "no group in it"))?;
    kafka_error("DescribeGroups", g.error_code, g.error_message.as_ref())
        .map_err(|e| with_context(e, group))?;
    // Kafka describes a group it does not know as Dead; its admin client reports that as
    // GROUP_ID_NOT_FOUND, and so does this one.
    if g.group_state.as_str() == "Dead" && g.members.is_empty() {
        return Err(ClientError::Kafka {
            api: "DescribeGroups",
            code: KafkaCode(ResponseError::GroupIdNotFound.code()),
            message: Some(format!("group {group} does not exist")),
        });
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .into_iter()
        .map(|m| MemberInfo {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            assignment: if consumer {
                decode_assignment(&m.member_assignment).unwrap_or_default()
            } else {
                BTreeMap::new()
            },
        })
        .collect();
    Ok(GroupInfo {
        group_id: g.group_id.0.to_string(),
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members,
    })
}

/// Topic → partitions of a `ConsumerProtocolAssignment` (i16 version, then the struct).
/// Empty bytes (no assignment yet) are an empty assignment.
pub fn decode_assignment(bytes: &Bytes) -> ClientResult<BTreeMap<String, Vec<i32>>> {
    let mut buf = bytes.clone();
    if buf.len() < 2 {
        return Ok(BTreeMap::new());
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    // Later versions only add fields at the end (Kafka's compatibility rule): read them as
    // the newest version this crate knows.
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3))
        .map_err(|e| ClientError::codec("consumer protocol assignment", e))?;
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in assignment.assigned_partitions {
        let parts = out.entry(tp.topic.0.to_string()).or_default();
        parts.extend(tp.partitions);
        parts.sort_unstable();
    }
    Ok(out)
}

/// Deletes groups (and their committed offsets), each at its coordinator; one result per
/// group, in the order asked. Kafka refuses groups with members (`NON_EMPTY_GROUP`).
pub fn delete_groups(cluster: &Cluster, groups: &[&str]) -> Vec<(String, ClientResult<()>)> {
    groups
        .iter()
        .map(|g| (g.to_string(), delete_group(cluster, g)))
        .collect()
}

fn delete_group(cluster: &Cluster, group: &str) -> ClientResult<()> {
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![group_id(group)];
    let first_error = |r: &DeleteGroupsResponse| {
        r.results
            .first()
            .and_then(|g| KafkaCode::from_code(g.error_code))
    };
    let resp: DeleteGroupsResponse =
        call_coordinator(cluster, group, ApiKey::DeleteGroups, &req, first_error)?;
    let result = resp
        .results
        .first()
        .ok_or_else(|| ClientError::codec("DeleteGroups response", "no group in it"))?;
    kafka_error("DeleteGroups", result.error_code, None).map_err(|e| with_context(e, group))
}

fn with_context(e: ClientError, what: &str) -> ClientError {
    match e {
        ClientError::Kafka {
            api,
            code,
            message: None,
        } => ClientError::Kafka {
            api,
            code,
            message: Some(what.to_string()),
        },
        other => other,
    }
}

/// Removes `group`'s committed offsets of `partitions`; one result per partition. Kafka
/// refuses partitions of topics the group's members consume (`GROUP_SUBSCRIBED_TO_TOPIC`).
pub fn delete_offsets(
    cluster: &Cluster,
    group: &str,
    partitions: &[TopicPartition],
) -> ClientResult<Vec<(TopicPartition, ClientResult<()>)>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut req = OffsetDeleteRequest::default();
    req.group_id = group_id(group);
    req.topics = by_topic
        .into_iter()
        .map(|(name, parts)| {
            let mut t = OffsetDeleteRequestTopic::default();
            t.name = topic_name(name);
            t.partitions = parts
                .into_iter()
                .map(|p| {
                    let mut rp = OffsetDeleteRequestPartition::default();
                    rp.partition_index = p;
                    rp
                })
                .collect();
            t
        })
        .collect();
    let resp: OffsetDeleteResponse = call_coordinator(
        cluster,
        group,
        ApiKey::OffsetDelete,
        &req,
        |r: &OffsetDeleteResponse| KafkaCode::from_code(r.error_code),
    )?;
    kafka_error("OffsetDelete", resp.error_code, None).map_err(|e| with_context(e, group))?;
    let mut results: BTreeMap<(String, i32), i16> = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            results.insert((t.name.0.to_string(), p.partition_index), p.error_code);
        }
    }
    Ok(partitions
        .iter()
        .map(|tp| {
            let result = match results.get(&(tp.topic.to_string(), tp.partition)) {
                Some(&code) => kafka_error("OffsetDelete", code, None)
                    .map_err(|e| with_context(e, &format!("{}-{}", tp.topic, tp.partition))),
                None => Err(ClientError::codec(
                    "OffsetDelete response",
                    format!("no result for {}-{}", tp.topic, tp.partition),
                )),
            };
            (tp.clone(), result)
        })
        .collect())
}

/// Whether `e` is the Kafka error `expected`.
pub fn is_kafka_error(e: &ClientError, expected: ResponseError) -> bool {
    matches!(e, ClientError::Kafka { code, .. } if code.0 == expected.code())
}

/// The address (host:port) of `group`'s coordinator, for display.
pub fn coordinator_of(cluster: &Cluster, group: &str) -> ClientResult<String> {
    Ok(find_coordinator(cluster, group)?.addr().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn assignments_decode_to_topic_partitions() {
        for version in 0..=3i16 {
            let mut a = ConsumerProtocolAssignment::default();
            let mut tp = AssignedTp::default();
            tp.topic = topic_name("orders");
            tp.partitions = vec![2, 0];
            a.assigned_partitions = vec![tp];
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&version.to_be_bytes());
            a.encode(&mut buf, version).unwrap();
            let decoded = decode_assignment(&buf.freeze()).unwrap();
            assert_eq!(decoded.get("orders"), Some(&vec![0, 2]), "v{version}");
        }
        assert!(decode_assignment(&Bytes::new()).unwrap().is_empty());
        assert!(decode_assignment(&Bytes::from_static(&[0, 0, 0])).is_err());
    }

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

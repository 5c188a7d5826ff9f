//! Metadata (key 3): brokers (this one), topics with ids, partitions and leaders. Topics asked
//! for by name that do not exist are created when auto-creation is on and the client allows it.

use std::collections::BTreeMap;

use crate::protocol::messages::metadata_request::MetadataRequest;
use crate::protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::messages::BrokerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, topic_name, HandlerError, Request};
use crate::controller::client_view;
use crate::controller::cluster_metadata::{ClusterMetadata, TopicState};
use crate::group::api::OFFSETS_TOPIC;
use crate::metadata::TopicMetadata;
use crate::model::validate_topic_name;
use crate::shard::messages::AdminOp;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: MetadataRequest = req.decode()?;
    let shard = req.shard;
    let config = &shard.config;
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let wanted: Option<Vec<String>> = match &request.topics {
        None => None,
        Some(t) if t.is_empty() && req.version() == 0 => None,
        Some(t) => Some(
            t.iter()
                .map(|t| match &t.name {
                    Some(n) => n.0.to_string(),
                    None => shard
                        .metadata()
                        .topic_by_id(t.topic_id)
                        .map(|m| m.name.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        ),
    };
    let auto_create =
        config.auto_create_topics && (req.version() < 4 || request.allow_auto_topic_creation);
    let mut creation_errors: BTreeMap<String, i16> = BTreeMap::new();
    if let Some(names) = &wanted {
        for name in names {
            if shard.metadata().topic(name).is_some() {
                continue;
            }
            if !auto_create || validate_topic_name(name).is_err() {
                continue;
            }
            let created = shard
                .admin(AdminOp::CreateTopic {
                    name: name.clone(),
                    replication_factor: -1,
                    assignment: None,
                    partitions: config.num_partitions,
                    configs: BTreeMap::new(),
                    validate_only: false,
                })
                .await;
            if let Err(e) = created {
                if e.code != ResponseError::TopicAlreadyExists.code() {
                    creation_errors.insert(name.clone(), e.code);
                }
            } else {
                tracing::info!(topic = %name, partitions = config.num_partitions, "auto-created topic");
            }
        }
    }
    let meta = shard.metadata();
    let node_id = config.node_id;
    let version = req.version();
    // Only fields that exist in the client's version may differ from their defaults.
    let topic_entry = |t: &TopicMetadata| {
        let mut topic = topic_header(&t.name, t.id, version);
        topic.partitions = (0..t.partitions.len())
            .map(|i| {
                let mut p = MetadataResponsePartition::default();
                p.partition_index = i as i32;
                p.leader_id = BrokerId(node_id);
                if version >= 7 {
                    p.leader_epoch = 0;
                }
                p.replica_nodes = vec![BrokerId(node_id)];
                p.isr_nodes = vec![BrokerId(node_id)];
                if shard
                    .partitions
                    .offline_notice(&t.name, t.id, i as i32)
                    .is_some()
                {
                    // Kafka's metadata cache for a partition whose only replica is on an
                    // offline log dir: no leader, LEADER_NOT_AVAILABLE, the replica listed
                    // offline (requests sent anyway get KAFKA_STORAGE_ERROR).
                    p.error_code = ResponseError::LeaderNotAvailable.code();
                    p.leader_id = BrokerId(-1);
                    if version >= 5 {
                        p.offline_replicas = vec![BrokerId(node_id)];
                    }
                }
                p
            })
            .collect();
        topic
    };
    let cluster_meta = shard.cluster.get().map(|c| c.get());
    let topics = match (&wanted, &cluster_meta) {
        // Cluster mode: the controller's topics, leaders and ISRs, whatever this broker hosts.
        (_, Some(summary)) => {
            let meta = &summary.metadata;
            let entry = |t: &TopicState| cluster_topic_entry(meta, t, version);
            match &wanted {
                None => meta.topics().map(|t| entry(t)).collect(),
                Some(names) => names
                    .iter()
                    .map(|name| match meta.topic_by_name(name) {
                        Some(t) => entry(t),
                        None => missing_topic(name, &creation_errors),
                    })
                    .collect(),
            }
        }
        (None, None) => meta.topics.values().map(topic_entry).collect(),
        (Some(names), None) => names
            .iter()
            .map(|name| match meta.topic(name) {
                Some(t) => topic_entry(t),
                None => missing_topic(name, &creation_errors),
            })
            .collect(),
    };
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(node_id);
    broker.host = str_bytes(config.advertised_host.clone());
    broker.port = i32::from(config.advertised_port);
    let mut response = MetadataResponse::default();
    response.brokers = vec![broker];
    let mut cluster_id = meta.cluster_id.clone();
    let mut controller_id = node_id;
    // Cluster mode: every live broker the applied metadata log lists (until this broker
    // has seen any, it answers for itself alone).
    if let Some(cluster) = super::cluster_answer(shard) {
        cluster_id = cluster.cluster_id;
        if !cluster.brokers.is_empty() {
            response.brokers = cluster
                .brokers
                .into_iter()
                .map(|b| {
                    let mut broker = MetadataResponseBroker::default();
                    broker.node_id = BrokerId(b.id.0);
                    broker.host = str_bytes(b.host);
                    broker.port = i32::from(b.port);
                    if version >= 1 {
                        broker.rack = b.rack.map(str_bytes);
                    }
                    broker
                })
                .collect();
        }
        if let Some(c) = cluster.controller {
            controller_id = c.0;
        }
    }
    if version >= 2 {
        response.cluster_id = Some(str_bytes(cluster_id));
    }
    if version >= 1 {
        response.controller_id = BrokerId(controller_id);
    }
    response.topics = topics;
    req.encode(&response)
}

/// A topic's name, id (v10+) and internal flag (v1+): only fields of the client's version
/// may differ from their defaults.
fn topic_header(name: &str, id: uuid::Uuid, version: i16) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(topic_name(name));
    if version >= 10 {
        topic.topic_id = id;
    }
    if version >= 1 {
        topic.is_internal = name == OFFSETS_TOPIC;
    }
    topic
}

/// A topic asked for by name that does not exist (or could not be created).
fn missing_topic(name: &str, creation_errors: &BTreeMap<String, i16>) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(topic_name(name));
    topic.error_code = match creation_errors.get(name) {
        Some(code) => *code,
        None if validate_topic_name(name).is_err() => ResponseError::InvalidTopicException.code(),
        None => ResponseError::UnknownTopicOrPartition.code(),
    };
    topic
}

/// A topic as the controller's metadata has it: per partition the leader (or -1 with
/// LEADER_NOT_AVAILABLE), its epoch, the replicas, the ISR and the offline replicas.
fn cluster_topic_entry(
    meta: &ClusterMetadata,
    t: &TopicState,
    version: i16,
) -> MetadataResponseTopic {
    let ids = |brokers: &[crate::model::BrokerId]| -> Vec<BrokerId> {
        brokers.iter().map(|b| BrokerId(b.0)).collect()
    };
    let mut topic = topic_header(&t.name, t.id, version);
    topic.partitions = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, state)| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = i as i32;
            let (leader, error) = client_view::leader_and_error(state);
            p.leader_id = BrokerId(leader);
            p.error_code = error;
            if version >= 7 {
                p.leader_epoch = state.leader_epoch.0;
            }
            p.replica_nodes = ids(&state.replicas);
            p.isr_nodes = ids(&state.isr);
            if version >= 5 {
                p.offline_replicas = ids(&client_view::offline_replicas(meta, state));
            }
            p
        })
        .collect();
    topic
}

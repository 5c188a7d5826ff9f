//! Metadata (key 3): the live brokers, topics with ids, partitions, leaders, replicas and ISRs,
//! as this shard's metadata image has them (the same answer in both modes). Topics asked
//! for by name that do not exist are created when auto-creation is on and the client allows it;
//! as in Kafka (KRaft's `AutoTopicCreationManager`), the request that creates a topic is
//! answered UNKNOWN_TOPIC_OR_PARTITION for it, without partitions, and the next one lists it.

use std::collections::BTreeMap;

use crate::protocol::messages::metadata_request::MetadataRequest;
use crate::protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::messages::BrokerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{str_bytes, topic_name, HandlerError, Request};
use crate::group::api::OFFSETS_TOPIC;
use crate::metadata::cluster_state::TopicState;
use crate::metadata::MetadataImage;
use crate::model::validate_topic_name;
use crate::shard::messages::AdminOp;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: MetadataRequest = req.decode()?;
    let config = req.config();
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let wanted: Option<Vec<String>> = match &request.topics {
        None => None,
        Some(t) if t.is_empty() && req.version() == 0 => None,
        Some(t) => Some(
            t.iter()
                .map(|t| match &t.name {
                    Some(n) => n.0.to_string(),
                    None => req
                        .image()
                        .topic(t.topic_id)
                        .map(|m| m.name.clone())
                        .unwrap_or_default(),
                })
                .collect(),
        ),
    };
    let auto_create =
        config.auto_create_topics && (req.version() < 4 || request.allow_auto_topic_creation);
    // A topic this request created is answered UNKNOWN_TOPIC_OR_PARTITION too: Kafka's
    // broker sends the creation to the controller and answers without waiting, and clients
    // count on it (kafka-go's tests read an auto-creating listing right after DeleteTopics as
    // having no partitions). Unlike Kafka's, the creation is done when this answers.
    let mut unlisted: BTreeMap<String, i16> = BTreeMap::new();
    if let Some(names) = &wanted {
        for name in names {
            if req.image().topic_by_name(name).is_some() {
                continue;
            }
            if !auto_create || validate_topic_name(name).is_err() {
                continue;
            }
            let created = req
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
                    unlisted.insert(name.clone(), e.code);
                }
            } else {
                tracing::info!(topic = %name, partitions = config.num_partitions, "auto-created topic");
                unlisted.insert(name.clone(), ResponseError::UnknownTopicOrPartition.code());
            }
        }
    }
    let image = req.image();
    let me = crate::model::BrokerId(config.node_id);
    let version = req.version();
    let entry = |t: &TopicState| {
        let mut topic = topic_entry(&image, t, version);
        for p in &mut topic.partitions {
            let leads_here = p.leader_id.0 == me.0;
            if leads_here
                && req
                    .partitions()
                    .offline_notice(&t.name, t.id, p.partition_index)
                    .is_some()
            {
                // Kafka's metadata cache for a partition whose replica here is on an
                // offline log dir: no leader, LEADER_NOT_AVAILABLE, the replica listed
                // offline (requests sent anyway get KAFKA_STORAGE_ERROR).
                p.error_code = ResponseError::LeaderNotAvailable.code();
                p.leader_id = BrokerId(-1);
                if version >= 5 {
                    p.offline_replicas = vec![BrokerId(me.0)];
                }
            }
        }
        topic
    };
    let topics = match &wanted {
        None => image.topics().map(|t| entry(t)).collect(),
        Some(names) => names
            .iter()
            .map(|name| match image.topic_by_name(name) {
                Some(t) if !unlisted.contains_key(name) => entry(t),
                _ => missing_topic(name, &unlisted),
            })
            .collect(),
    };
    let mut response = MetadataResponse::default();
    // Every live broker the image lists; until this broker has applied any (cluster mode
    // starting up), it answers for itself alone.
    response.brokers = super::client_brokers(config, &image)
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
    let cluster_id = image.cluster_id.clone();
    let controller_id = image.client_controller().map_or(me.0, |c| c.0);
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

/// A topic asked for by name that did not exist (created by this request, or not).
fn missing_topic(name: &str, unlisted: &BTreeMap<String, i16>) -> MetadataResponseTopic {
    let mut topic = MetadataResponseTopic::default();
    topic.name = Some(topic_name(name));
    topic.error_code = match unlisted.get(name) {
        Some(code) => *code,
        None if validate_topic_name(name).is_err() => ResponseError::InvalidTopicException.code(),
        None => ResponseError::UnknownTopicOrPartition.code(),
    };
    topic
}

/// A topic as the image has it: per partition the leader (or -1 with LEADER_NOT_AVAILABLE),
/// its epoch, the replicas, the ISR and the offline replicas (on fenced or unregistered
/// brokers).
fn topic_entry(image: &MetadataImage, t: &TopicState, version: i16) -> MetadataResponseTopic {
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
            match state.leader {
                Some(l) => p.leader_id = BrokerId(l.0),
                None => {
                    p.leader_id = BrokerId(-1);
                    p.error_code = ResponseError::LeaderNotAvailable.code();
                }
            }
            if version >= 7 {
                p.leader_epoch = state.leader_epoch.0;
            }
            p.replica_nodes = ids(&state.replicas);
            p.isr_nodes = ids(&state.isr);
            if version >= 5 {
                p.offline_replicas = ids(&image.offline_replicas(state));
            }
            p
        })
        .collect();
    topic
}

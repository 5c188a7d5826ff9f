//! The metadata as every shard's services read it, in both modes: brokers, the controller,
//! topics with their partitions' replicas, ISR, leader and epochs, and the dynamic broker
//! configs. One immutable value per publication (`Arc<MetadataImage>`), swapped whole in each
//! shard's [`super::cache::MetadataCache`]; topics are `Arc`s shared with the previous image and
//! (in cluster mode) with the controller's applied `ClusterMetadata`, so a publication copies
//! only what changed.
//!
//! Where it comes from: in both modes from the controller's applied metadata
//! (`controller::image`): on a single node the records its shard 0 decided and applied itself
//! (Kafka's combined mode, with this broker the only one), in cluster mode the metadata log.
//! Handlers never ask which.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::cluster_state::{
    shard_for_slot, BrokerRegistration, Endpoint, MetadataSnapshot, PartitionState, TopicState,
};
use crate::model::{BrokerEpoch, BrokerId, MetadataOffset};

/// A live broker as clients are told about it (Metadata, DescribeCluster, KIP-951 hints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

pub use super::cluster_state::BrokerConfigs;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// Publication order: a shard never takes an image older than the one it holds.
    pub version: u64,
    pub cluster_id: String,
    /// Cluster mode: the metadata log offset the image reflects; `None` on a single node and
    /// before the first applied record.
    pub metadata_offset: Option<MetadataOffset>,
    /// The active controller when known (a single node is its own).
    pub controller: Option<BrokerId>,
    brokers: BTreeMap<BrokerId, BrokerRegistration>,
    topics: BTreeMap<Uuid, Arc<TopicState>>,
    topic_ids: BTreeMap<String, Uuid>,
    broker_configs: Arc<BrokerConfigs>,
}

impl MetadataImage {
    /// An image with no brokers and no topics yet (cluster mode before its first publication:
    /// the broker answers for itself alone and serves no partition).
    pub fn empty(cluster_id: String) -> MetadataImage {
        MetadataImage {
            cluster_id,
            ..MetadataImage::default()
        }
    }

    /// Replaces the dynamic broker configs (for an image kept up to date by deltas).
    pub fn set_broker_configs(&mut self, configs: Arc<BrokerConfigs>) {
        self.broker_configs = configs;
    }

    /// An image of the given parts; topics keyed by id (names are unique among them).
    pub fn from_parts(
        parts: ImageParts,
        topics: impl IntoIterator<Item = Arc<TopicState>>,
    ) -> MetadataImage {
        let mut image = MetadataImage {
            version: parts.version,
            cluster_id: parts.cluster_id,
            metadata_offset: parts.metadata_offset,
            controller: parts.controller,
            brokers: parts.brokers.into_iter().map(|b| (b.id, b)).collect(),
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            broker_configs: parts.broker_configs,
        };
        for t in topics {
            image.topic_ids.insert(t.name.clone(), t.id);
            image.topics.insert(t.id, t);
        }
        image
    }

    /// The image of a stored snapshot, for placing logs at start (cluster mode: what this
    /// broker applied before it stopped; not for answering clients, which wait for the
    /// metadata log).
    pub fn of_snapshot(snapshot: &MetadataSnapshot, cluster_id: String) -> MetadataImage {
        let parts = ImageParts {
            version: 0,
            cluster_id,
            metadata_offset: snapshot.applied,
            controller: None,
            brokers: snapshot.brokers.clone(),
            broker_configs: Arc::new(snapshot.broker_configs.clone()),
        };
        let topics = snapshot.topics.iter().cloned().map(Arc::new);
        MetadataImage::from_parts(parts, topics.collect::<Vec<_>>())
    }

    /// `me` as a registration: the broker of a single node's image, whatever the stored
    /// registration says (its address is the config's of this start).
    pub fn registration_of(me: &LiveBroker) -> BrokerRegistration {
        BrokerRegistration {
            id: me.id,
            epoch: BrokerEpoch(0),
            incarnation: Uuid::nil(),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".to_string(),
                host: me.host.clone(),
                port: me.port,
            }],
            rack: me.rack.clone(),
            fenced: false,
        }
    }

    pub fn broker(&self, id: BrokerId) -> Option<&BrokerRegistration> {
        self.brokers.get(&id)
    }

    /// Registered and not fenced: may lead, is told to clients.
    pub fn is_unfenced(&self, id: BrokerId) -> bool {
        self.brokers.get(&id).is_some_and(|b| !b.fenced)
    }

    /// The unfenced brokers by id, each with its first advertised endpoint (the one given
    /// out to clients).
    pub fn live_brokers(&self) -> Vec<LiveBroker> {
        self.brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| {
                let e = b.endpoints.first()?;
                Some(LiveBroker {
                    id: b.id,
                    host: e.host.clone(),
                    port: e.port,
                    rack: b.rack.clone(),
                })
            })
            .collect()
    }

    /// Registered but fenced.
    pub fn fenced_brokers(&self) -> Vec<BrokerId> {
        self.brokers
            .values()
            .filter(|b| b.fenced)
            .map(|b| b.id)
            .collect()
    }

    /// The broker named as controller to clients: any live broker will do (clients cannot
    /// reach the quorum); the active controller when it is one of them.
    pub fn client_controller(&self) -> Option<BrokerId> {
        let live = self.live_brokers();
        self.controller
            .filter(|c| live.iter().any(|b| b.id == *c))
            .or_else(|| live.first().map(|b| b.id))
    }

    pub fn topic(&self, id: Uuid) -> Option<&Arc<TopicState>> {
        self.topics.get(&id)
    }

    pub fn topic_by_name(&self, name: &str) -> Option<&Arc<TopicState>> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// Every topic, by name.
    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicState>> {
        self.topic_ids.values().filter_map(|id| self.topics.get(id))
    }

    /// Partition `partition` of the topic named `name`, as a client names it.
    pub fn partition_by_name(&self, name: &str, partition: i32) -> Option<&PartitionState> {
        let topic = self.topic_by_name(name)?;
        topic.partitions.get(usize::try_from(partition).ok()?)
    }

    /// Whether `topic` exists and has `partition` (hosted here or not).
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.partition_by_name(topic, partition).is_some()
    }

    /// The shard owning `topic`/`partition` in a process of `shards` shards.
    pub fn shard_of(&self, topic: &str, partition: i32, shards: usize) -> Option<usize> {
        self.partition_by_name(topic, partition)
            .map(|p| shard_for_slot(p.slot, shards))
    }

    /// Replicas of `p` on brokers that are fenced or not registered, in assignment order.
    pub fn offline_replicas(&self, p: &PartitionState) -> Vec<BrokerId> {
        p.replicas
            .iter()
            .copied()
            .filter(|r| !self.is_unfenced(*r))
            .collect()
    }

    /// The dynamic broker configs that apply to broker `node_id`, weakest first: the
    /// cluster-wide defaults, then its own.
    pub fn broker_config_layers(&self, node_id: i32) -> [Option<&BTreeMap<String, String>>; 2] {
        [
            self.broker_configs.get(""),
            self.broker_configs.get(&node_id.to_string()),
        ]
    }

    pub fn broker_configs(&self) -> &Arc<BrokerConfigs> {
        &self.broker_configs
    }

    pub fn broker_count(&self) -> usize {
        self.brokers.len()
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// Adds or replaces a topic (for an image kept up to date by deltas).
    pub fn put_topic(&mut self, topic: Arc<TopicState>) {
        if let Some(old) = self.topics.get(&topic.id) {
            if old.name != topic.name && self.topic_ids.get(&old.name) == Some(&topic.id) {
                let name = old.name.clone();
                self.topic_ids.remove(&name);
            }
        }
        self.topic_ids.insert(topic.name.clone(), topic.id);
        self.topics.insert(topic.id, topic);
    }

    /// Removes topic `id`; its name is freed if it still names that id.
    pub fn remove_topic(&mut self, id: Uuid, name: &str) {
        if let Some(old) = self.topics.remove(&id) {
            if self.topic_ids.get(&old.name) == Some(&id) {
                self.topic_ids.remove(&old.name);
            }
        }
        if self.topic_ids.get(name) == Some(&id) {
            self.topic_ids.remove(name);
        }
    }

    /// Sets or removes (`None`) broker `id`'s registration.
    pub fn put_broker(&mut self, id: BrokerId, registration: Option<BrokerRegistration>) {
        match registration {
            Some(b) => self.brokers.insert(id, b),
            None => self.brokers.remove(&id),
        };
    }
}

/// What an image holds besides its topics.
#[derive(Debug, Clone, Default)]
pub struct ImageParts {
    pub version: u64,
    pub cluster_id: String,
    pub metadata_offset: Option<MetadataOffset>,
    pub controller: Option<BrokerId>,
    pub brokers: Vec<BrokerRegistration>,
    pub broker_configs: Arc<BrokerConfigs>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::{LeaderEpoch, PartitionEpoch};

    #[test]
    fn fenced_brokers_are_not_live_and_their_replicas_are_offline() {
        let broker = |id: i32, fenced: bool| BrokerRegistration {
            id: BrokerId(id),
            epoch: BrokerEpoch(id as u64),
            incarnation: Uuid::from_u128(id as u128),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "h".into(),
                port: 9000 + id as u16,
            }],
            rack: None,
            fenced,
        };
        let topic = TopicState {
            name: "t".into(),
            id: Uuid::from_u128(7),
            partitions: vec![PartitionState {
                replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
                isr: vec![BrokerId(2)],
                leader: Some(BrokerId(2)),
                leader_epoch: LeaderEpoch(4),
                partition_epoch: PartitionEpoch(5),
                slot: 0,
            }],
            configs: BTreeMap::new(),
        };
        let image = MetadataImage::from_parts(
            ImageParts {
                controller: Some(BrokerId(1)),
                brokers: vec![broker(1, true), broker(2, false)],
                ..ImageParts::default()
            },
            [Arc::new(topic)],
        );
        let live: Vec<BrokerId> = image.live_brokers().iter().map(|b| b.id).collect();
        assert_eq!(live, vec![BrokerId(2)]);
        assert_eq!(image.fenced_brokers(), vec![BrokerId(1)]);
        assert_eq!(
            image.client_controller(),
            Some(BrokerId(2)),
            "a live broker"
        );
        let p = image.partition_by_name("t", 0).expect("t-0");
        assert_eq!(image.offline_replicas(p), vec![BrokerId(1), BrokerId(3)]);
    }
}

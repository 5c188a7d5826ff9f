//! The metadata as every shard's services read it, in both modes: brokers, the controller,
//! topics with their partitions' replicas, ISR, leader and epochs, and the dynamic broker
//! configs. One immutable value per publication (`Arc<MetadataImage>`), swapped whole in each
//! shard's [`super::cache::MetadataCache`]; topics are `Arc`s shared with the previous image and
//! (in cluster mode) with the controller's applied `ClusterMetadata`, so a publication copies
//! only what changed.
//!
//! Where it comes from: on a single node, from the stored metadata ([`MetadataImage::single_node`]:
//! this broker is the only one, the leader and ISR of every partition, at epoch 0, which is
//! what Kafka reports for a one-broker cluster); in cluster mode, from the applied metadata log
//! (`controller::image::shard_image`). Handlers never ask which.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::cluster_state::{BrokerRegistration, Endpoint, PartitionState, TopicState};
use super::stored::{shard_for_slot, StoredMetadata};
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};

/// A live broker as clients are told about it (Metadata, DescribeCluster, KIP-951 hints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: BrokerId,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// Dynamic broker configs by resource name: "" the cluster-wide defaults, a broker id that
/// broker's own (see `StoredMetadata::broker_configs`).
pub type BrokerConfigs = BTreeMap<String, BTreeMap<String, String>>;

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

    /// This image with `configs` as its dynamic broker configs.
    pub fn with_broker_configs(mut self, configs: Arc<BrokerConfigs>) -> MetadataImage {
        self.broker_configs = configs;
        self
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

    /// A single node's image of `stored`: `me` is the only broker, the controller, and the
    /// leader and sole in-sync replica of every partition (leader epoch 0). Topics unchanged
    /// since `previous` keep its `Arc`s.
    pub fn single_node(
        stored: &StoredMetadata,
        me: &LiveBroker,
        previous: Option<&MetadataImage>,
    ) -> MetadataImage {
        let topics = stored.topics.values().map(|t| {
            let partitions: Vec<PartitionState> = t
                .partitions
                .iter()
                .map(|p| PartitionState {
                    replicas: vec![me.id],
                    isr: vec![me.id],
                    leader: Some(me.id),
                    leader_epoch: LeaderEpoch(0),
                    partition_epoch: PartitionEpoch(0),
                    slot: p.slot,
                })
                .collect();
            let state = TopicState {
                name: t.name.clone(),
                id: t.id,
                partitions,
                configs: t.configs.clone(),
            };
            match previous.and_then(|p| p.topics.get(&t.id)) {
                Some(old) if **old == state => Arc::clone(old),
                _ => Arc::new(state),
            }
        });
        let broker = BrokerRegistration {
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
        };
        let broker_configs = match previous {
            Some(p) if *p.broker_configs == stored.broker_configs => Arc::clone(&p.broker_configs),
            _ => Arc::new(stored.broker_configs.clone()),
        };
        let parts = ImageParts {
            version: stored.version,
            cluster_id: stored.cluster_id.clone(),
            metadata_offset: None,
            controller: Some(me.id),
            brokers: vec![broker],
            broker_configs,
        };
        MetadataImage::from_parts(parts, topics.collect::<Vec<_>>())
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
    /// cluster-wide defaults, then its own (as `StoredMetadata::broker_config_layers`).
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

    fn me() -> LiveBroker {
        LiveBroker {
            id: BrokerId(1),
            host: "127.0.0.1".to_string(),
            port: 9092,
            rack: None,
        }
    }

    #[test]
    fn a_single_node_leads_every_partition_and_shares_unchanged_topics() {
        let stored = StoredMetadata::new("c".to_string())
            .with_topic("a", 2, BTreeMap::new(), Uuid::from_u128(1))
            .and_then(|m| m.with_topic("b", 1, BTreeMap::new(), Uuid::from_u128(2)))
            .expect("topics");
        let image = MetadataImage::single_node(&stored, &me(), None);
        assert_eq!(image.cluster_id, "c");
        assert_eq!(image.client_controller(), Some(BrokerId(1)));
        assert_eq!(image.live_brokers(), vec![me()]);
        let p = image.partition_by_name("a", 1).expect("a-1");
        assert_eq!(
            (p.leader, p.isr.clone()),
            (Some(BrokerId(1)), vec![BrokerId(1)])
        );
        assert_eq!(
            image.shard_of("a", 1, 2),
            Some(stored.shard_of("a", 1, 2).unwrap())
        );
        assert!(image.partition_by_name("a", 2).is_none());
        assert!(image.offline_replicas(p).is_empty());
        let more = stored.with_partition_count("a", 3).expect("repartitioned");
        let next = MetadataImage::single_node(&more, &me(), Some(&image));
        assert!(Arc::ptr_eq(
            next.topic_by_name("b").unwrap(),
            image.topic_by_name("b").unwrap()
        ));
        assert_eq!(next.topic_by_name("a").unwrap().partitions.len(), 3);
        assert!(next.version > image.version);
        let names: Vec<&str> = next.topics().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b"], "by name");
        let configs = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        let layered = more
            .with_broker_configs("", configs("x", "cluster"))
            .with_broker_configs("1", configs("x", "own"));
        let image = MetadataImage::single_node(&layered, &me(), Some(&next));
        assert_eq!(
            image.broker_config_layers(1),
            layered.broker_config_layers(1)
        );
    }

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

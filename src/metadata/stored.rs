//! Cluster metadata: topics, their ids, partitions, configs and the placement slot of each
//! partition. A plain value: changes are pure functions returning the next version, so shard 0
//! can persist it and every shard holds an immutable copy (an `Arc`).
//!
//! The stored placement is a *slot*, given once at creation; the shard owning a partition is
//! `slot mod shard count`, evaluated with the running process's shard count. So a restart
//! with fewer or more shards re-places every partition instead of losing those whose stored
//! shard no longer exists (CLUSTER.md, "Thread-per-core placement").

use std::collections::BTreeMap;

use crate::model::{validate_topic_name, InvalidTopicName, MAX_PARTITIONS};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a partition lives. One node for now: the shard slot is the only placement decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    /// Placement slot; the owning shard is `slot mod shard count` ([`shard_for_slot`]).
    /// Metadata written before slots existed stored the shard itself (`shard`): as a slot it
    /// places every partition where it was when the shard count is unchanged.
    #[serde(alias = "shard")]
    pub slot: usize,
    /// Whether this broker holds a replica (always on a single node; in cluster mode the
    /// controller's assignment says). Partitions not hosted have no log here.
    #[serde(default = "hosted_by_default", skip_serializing_if = "is_hosted")]
    pub hosted: bool,
}

fn hosted_by_default() -> bool {
    true
}

fn is_hosted(hosted: &bool) -> bool {
    *hosted
}

/// The shard owning placement `slot` in a process running `shards` shards.
pub fn shard_for_slot(slot: usize, shards: usize) -> usize {
    slot % shards.max(1)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionMeta>,
    /// Topic-level config overrides (Kafka property names).
    pub configs: BTreeMap<String, String>,
    /// Cluster mode: a copy of the controller's topic (replaced and deleted as the metadata
    /// log says). A topic without it was created by this node alone before it joined.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_controller: bool,
}

/// The metadata this broker keeps in its data dir (`store.rs`, JSON) and hands to
/// every shard: on a single node the whole truth, in cluster mode this broker's copy of the
/// controller's topics (`controller::ClusterMetadata` is the controller's own model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMetadata {
    /// Bumped by every change.
    pub version: u64,
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMetadata>,
    /// The slot the next new partition gets (round-robin over shards of any count).
    #[serde(alias = "next_shard")]
    pub next_slot: usize,
    /// Cluster mode: the metadata log offset the controller's topics were copied at. A
    /// broker applies only metadata at or past it, so a view that is still catching up
    /// after a restart (behind what this broker already copied) never deletes a topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_offset: Option<u64>,
    /// Dynamic broker configs (IncrementalAlterConfigs on a broker resource) by resource
    /// name: "" holds the cluster-wide defaults, a broker id that broker's own. They win over
    /// the config file, a broker's own over the defaults (Kafka's order).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BTreeMap<String, BTreeMap<String, String>>,
}

/// Why a metadata change was refused; each maps to a Kafka error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("topic '{0}' already exists")]
    TopicExists(String),
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name '{name}': {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    #[error("replication factor {0} is not possible: this cluster has one broker")]
    InvalidReplicationFactor(i32),
    #[error("{0}")]
    InvalidConfig(String),
}

impl StoredMetadata {
    pub fn new(cluster_id: String) -> Self {
        StoredMetadata {
            version: 0,
            cluster_id,
            topics: BTreeMap::new(),
            next_slot: 0,
            controller_offset: None,
            broker_configs: BTreeMap::new(),
        }
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMetadata> {
        self.topics.values().find(|t| t.id == id)
    }

    /// The placement slot of `topic`/`partition`, if both exist and this broker hosts it.
    pub fn slot_of(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
            .filter(|p| p.hosted)
            .map(|p| p.slot)
    }

    /// Cluster mode: the controller's topics as of metadata offset `offset` replace the
    /// copies held so far (`topics`, by name, all marked `from_controller`); copies it no
    /// longer has are dropped, topics of this node alone are kept. `None` when nothing
    /// changed, or when `offset` is before the one already copied (a stale view).
    pub fn with_controller_topics(
        &self,
        offset: u64,
        topics: BTreeMap<String, TopicMetadata>,
    ) -> Option<StoredMetadata> {
        if self.controller_offset.is_some_and(|o| offset < o) {
            return None;
        }
        let mut next = self.clone();
        next.controller_offset = Some(offset);
        next.topics
            .retain(|name, t| !t.from_controller || topics.contains_key(name));
        for (name, topic) in topics {
            next.topics.insert(name, topic);
        }
        if next.topics == self.topics {
            // Nothing to open or delete; the offset is stored with the next real change.
            return None;
        }
        next.version += 1;
        Some(next)
    }

    /// Whether `topic` exists and has `partition` (hosted here or not).
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.topics
            .get(topic)
            .is_some_and(|t| usize::try_from(partition).is_ok_and(|p| p < t.partitions.len()))
    }

    /// The shard owning `topic`/`partition` in a process of `shards` shards, if both exist.
    pub fn shard_of(&self, topic: &str, partition: i32, shards: usize) -> Option<usize> {
        self.slot_of(topic, partition)
            .map(|slot| shard_for_slot(slot, shards))
    }

    /// Gives the next placement slot (round-robin whatever the shard count).
    fn take_slot(&mut self) -> PartitionMeta {
        let slot = self.next_slot;
        self.next_slot = self.next_slot.wrapping_add(1);
        PartitionMeta { slot, hosted: true }
    }

    /// Adds a topic; its partitions get consecutive slots, so they spread round-robin.
    pub fn with_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        id: Uuid,
    ) -> Result<StoredMetadata, MetadataError> {
        validate_topic_name(name)?;
        if self.topics.contains_key(name) {
            return Err(MetadataError::TopicExists(name.to_string()));
        }
        if partitions <= 0 || partitions > MAX_PARTITIONS {
            return Err(MetadataError::InvalidPartitions(partitions));
        }
        let mut next = self.clone();
        let placed = (0..partitions).map(|_| next.take_slot()).collect();
        next.topics.insert(
            name.to_string(),
            TopicMetadata {
                name: name.to_string(),
                id,
                partitions: placed,
                configs,
                from_controller: false,
            },
        );
        next.version += 1;
        Ok(next)
    }

    pub fn without_topic(&self, name: &str) -> Result<StoredMetadata, MetadataError> {
        if !self.topics.contains_key(name) {
            return Err(MetadataError::UnknownTopic(name.to_string()));
        }
        let mut next = self.clone();
        next.topics.remove(name);
        next.version += 1;
        Ok(next)
    }

    /// Grows a topic to `total` partitions (CreatePartitions; partitions never shrink).
    pub fn with_partition_count(
        &self,
        name: &str,
        total: i32,
    ) -> Result<StoredMetadata, MetadataError> {
        let current = self
            .topics
            .get(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?
            .partitions
            .len() as i32;
        if total <= current || total > MAX_PARTITIONS {
            return Err(MetadataError::InvalidPartitions(total));
        }
        let mut next = self.clone();
        for _ in current..total {
            let placed = next.take_slot();
            if let Some(t) = next.topics.get_mut(name) {
                t.partitions.push(placed);
            }
        }
        next.version += 1;
        Ok(next)
    }

    pub fn with_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<StoredMetadata, MetadataError> {
        let mut next = self.clone();
        let t = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        t.configs = configs;
        next.version += 1;
        Ok(next)
    }

    /// Replaces the dynamic broker configs of one resource ("" or a broker id).
    pub fn with_broker_configs(
        &self,
        resource: &str,
        configs: BTreeMap<String, String>,
    ) -> StoredMetadata {
        let mut next = self.clone();
        if configs.is_empty() {
            next.broker_configs.remove(resource);
        } else {
            next.broker_configs.insert(resource.to_string(), configs);
        }
        next.version += 1;
        next
    }

    /// The dynamic broker configs that apply to broker `node_id`, weakest first: the
    /// cluster-wide defaults, then its own.
    pub fn broker_config_layers(&self, node_id: i32) -> [Option<&BTreeMap<String, String>>; 2] {
        [
            self.broker_configs.get(""),
            self.broker_configs.get(&node_id.to_string()),
        ]
    }
}

impl From<InvalidTopicName> for MetadataError {
    fn from(e: InvalidTopicName) -> Self {
        MetadataError::InvalidTopic {
            name: e.name,
            reason: e.reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_spread_round_robin_and_versioned() {
        let m = StoredMetadata::new("c".into());
        let m = m
            .with_topic("a", 3, BTreeMap::new(), Uuid::from_u128(1))
            .unwrap();
        let m = m
            .with_topic("b", 2, BTreeMap::new(), Uuid::from_u128(2))
            .unwrap();
        let shards: Vec<usize> = (0..3).map(|p| m.shard_of("a", p, 2).unwrap()).collect();
        assert_eq!(shards, vec![0, 1, 0]);
        assert_eq!(m.shard_of("b", 0, 2), Some(1));
        assert_eq!(m.shard_of("b", 2, 2), None);
        assert_eq!(m.version, 2);
        assert_eq!(
            m.topic_by_id(Uuid::from_u128(2)).map(|t| t.name.as_str()),
            Some("b")
        );
        assert!(matches!(
            m.with_topic("a", 1, BTreeMap::new(), Uuid::nil()),
            Err(MetadataError::TopicExists(_))
        ));
        let grown = m.with_partition_count("a", 5).unwrap();
        assert_eq!(grown.topic("a").unwrap().partitions.len(), 5);
        assert!(m.with_partition_count("a", 2).is_err());
        let gone = m.without_topic("a").unwrap();
        assert!(gone.topic("a").is_none());
        assert!(gone.without_topic("a").is_err());
    }

    #[test]
    fn any_shard_count_places_every_partition() {
        let m = StoredMetadata::new("c".into())
            .with_topic("a", 4, BTreeMap::new(), Uuid::from_u128(1))
            .unwrap();
        for shards in 1..=5 {
            let owners: Vec<usize> = (0..4)
                .map(|p| m.shard_of("a", p, shards).unwrap())
                .collect();
            assert!(owners.iter().all(|s| *s < shards), "{shards}: {owners:?}");
            let expected: Vec<usize> = (0..4).map(|p| p % shards).collect();
            assert_eq!(owners, expected, "round-robin over {shards} shards");
        }
        assert_eq!(m.shard_of("a", 3, 0), Some(0), "no shards counts as one");
    }

    #[test]
    fn metadata_stored_with_shards_reads_them_as_slots() {
        let old = r#"{"version":3,"cluster_id":"c","next_shard":1,"topics":{"a":{"name":"a",
            "id":"00000000-0000-0000-0000-000000000001","partitions":[{"shard":0},{"shard":1},
            {"shard":0}],"configs":{}}}}"#;
        let m: StoredMetadata = serde_json::from_str(old).unwrap();
        assert_eq!(m.next_slot, 1);
        let on_two: Vec<Option<usize>> = (0..3).map(|p| m.shard_of("a", p, 2)).collect();
        assert_eq!(
            on_two,
            vec![Some(0), Some(1), Some(0)],
            "same shards as before"
        );
        let on_one: Vec<Option<usize>> = (0..3).map(|p| m.shard_of("a", p, 1)).collect();
        assert_eq!(on_one, vec![Some(0); 3], "one shard owns all");
    }

    #[test]
    fn controller_topics_replace_copies_and_a_stale_view_changes_nothing() {
        let local = StoredMetadata::new("c".into())
            .with_topic("mine", 1, BTreeMap::new(), Uuid::from_u128(1))
            .unwrap();
        let copy = |name: &str, id: u128, hosted: bool| TopicMetadata {
            name: name.into(),
            id: Uuid::from_u128(id),
            partitions: vec![
                PartitionMeta { slot: 0, hosted },
                PartitionMeta {
                    slot: 1,
                    hosted: true,
                },
            ],
            configs: BTreeMap::new(),
            from_controller: true,
        };
        let both = BTreeMap::from([
            ("a".to_string(), copy("a", 2, false)),
            ("b".to_string(), copy("b", 3, true)),
        ]);
        let m = local
            .with_controller_topics(10, both.clone())
            .expect("changed");
        assert_eq!(m.controller_offset, Some(10));
        assert!(
            m.topic("mine").is_some(),
            "a topic of this node alone stays"
        );
        assert_eq!(m.shard_of("a", 0, 2), None, "not hosted here");
        assert!(m.has_partition("a", 0), "but it exists");
        assert_eq!(m.shard_of("a", 1, 2), Some(1));
        assert!(m.with_controller_topics(11, both).is_none(), "no change");
        let only_b = BTreeMap::from([("b".to_string(), copy("b", 3, true))]);
        assert!(
            m.with_controller_topics(9, only_b.clone()).is_none(),
            "an older view deletes nothing"
        );
        let later = m.with_controller_topics(12, only_b).expect("a deleted");
        assert!(later.topic("a").is_none() && later.topic("b").is_some());
        assert!(later.topic("mine").is_some());
    }

    #[test]
    fn serde_round_trip() {
        let m = StoredMetadata::new("c".into())
            .with_topic("a", 2, BTreeMap::new(), Uuid::from_u128(7))
            .unwrap();
        let text = serde_json::to_string(&m).unwrap();
        let back: StoredMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }
}

//! Cluster metadata: topics, their ids, partitions, configs and the placement slot of each
//! partition. A plain value: changes are pure functions returning the next version, so shard 0
//! can persist it and every shard holds an immutable copy (an `Arc`).
//!
//! The stored placement is a *slot*, given once at creation; the shard owning a partition is
//! `slot mod shard count`, evaluated with the running process's shard count. So a restart
//! with fewer or more shards re-places every partition instead of losing those whose stored
//! shard no longer exists (CLUSTER.md, "Thread-per-core placement").

use std::collections::BTreeMap;

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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMetadata {
    /// Bumped by every change.
    pub version: u64,
    pub cluster_id: String,
    pub topics: BTreeMap<String, TopicMetadata>,
    /// The slot the next new partition gets (round-robin over shards of any count).
    #[serde(alias = "next_shard")]
    pub next_slot: usize,
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

/// Largest partition count accepted for one topic (bounds memory and file handles).
pub const MAX_PARTITIONS: i32 = 10_000;

impl ClusterMetadata {
    pub fn new(cluster_id: String) -> Self {
        ClusterMetadata {
            version: 0,
            cluster_id,
            topics: BTreeMap::new(),
            next_slot: 0,
        }
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMetadata> {
        self.topics.values().find(|t| t.id == id)
    }

    /// The placement slot of `topic`/`partition`, if both exist.
    pub fn slot_of(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
            .map(|p| p.slot)
    }

    /// Whether `topic` exists and has `partition`.
    pub fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.slot_of(topic, partition).is_some()
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
        PartitionMeta { slot }
    }

    /// Adds a topic; its partitions get consecutive slots, so they spread round-robin.
    pub fn with_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        id: Uuid,
    ) -> Result<ClusterMetadata, MetadataError> {
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
            },
        );
        next.version += 1;
        Ok(next)
    }

    pub fn without_topic(&self, name: &str) -> Result<ClusterMetadata, MetadataError> {
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
    ) -> Result<ClusterMetadata, MetadataError> {
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
    ) -> Result<ClusterMetadata, MetadataError> {
        let mut next = self.clone();
        let t = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetadataError::UnknownTopic(name.to_string()))?;
        t.configs = configs;
        next.version += 1;
        Ok(next)
    }
}

/// Kafka's rule: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), MetadataError> {
    let invalid = |reason: &str| MetadataError::InvalidTopic {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.len() > 249 {
        return Err(invalid("longer than 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are not allowed"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_spread_round_robin_and_versioned() {
        let m = ClusterMetadata::new("c".into());
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
        let m = ClusterMetadata::new("c".into())
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
        let m: ClusterMetadata = serde_json::from_str(old).unwrap();
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
    fn topic_names() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serde_round_trip() {
        let m = ClusterMetadata::new("c".into())
            .with_topic("a", 2, BTreeMap::new(), Uuid::from_u128(7))
            .unwrap();
        let text = serde_json::to_string(&m).unwrap();
        let back: ClusterMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }
}

//! Cluster metadata: topics, their ids, partitions, configs and the shard owning each
//! partition. A plain value: changes are pure functions returning the next version, so shard 0
//! can persist it and every shard holds an immutable copy (an `Arc`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a partition lives. One node for now: the shard is the only placement decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMeta {
    pub shard: usize,
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
    /// Round-robin cursor for placing new partitions on shards.
    pub next_shard: usize,
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
            next_shard: 0,
        }
    }

    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&TopicMetadata> {
        self.topics.values().find(|t| t.id == id)
    }

    /// The shard owning `topic`/`partition`, if both exist.
    pub fn shard_of(&self, topic: &str, partition: i32) -> Option<usize> {
        let t = self.topics.get(topic)?;
        usize::try_from(partition)
            .ok()
            .and_then(|p| t.partitions.get(p))
            .map(|p| p.shard)
    }

    /// Adds a topic; partitions are spread round-robin over `shards`.
    pub fn with_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        shards: usize,
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
        let placed = (0..partitions)
            .map(|_| {
                let shard = next.next_shard % shards.max(1);
                next.next_shard = (next.next_shard + 1) % shards.max(1);
                PartitionMeta { shard }
            })
            .collect();
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
        shards: usize,
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
            let shard = next.next_shard % shards.max(1);
            next.next_shard = (next.next_shard + 1) % shards.max(1);
            if let Some(t) = next.topics.get_mut(name) {
                t.partitions.push(PartitionMeta { shard });
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
            .with_topic("a", 3, BTreeMap::new(), 2, Uuid::from_u128(1))
            .unwrap();
        let m = m
            .with_topic("b", 2, BTreeMap::new(), 2, Uuid::from_u128(2))
            .unwrap();
        let shards: Vec<usize> = (0..3).map(|p| m.shard_of("a", p).unwrap()).collect();
        assert_eq!(shards, vec![0, 1, 0]);
        assert_eq!(m.shard_of("b", 0), Some(1));
        assert_eq!(m.shard_of("b", 2), None);
        assert_eq!(m.version, 2);
        assert_eq!(
            m.topic_by_id(Uuid::from_u128(2)).map(|t| t.name.as_str()),
            Some("b")
        );
        assert!(matches!(
            m.with_topic("a", 1, BTreeMap::new(), 2, Uuid::nil()),
            Err(MetadataError::TopicExists(_))
        ));
        let grown = m.with_partition_count("a", 5, 2).unwrap();
        assert_eq!(grown.topic("a").unwrap().partitions.len(), 5);
        assert!(m.with_partition_count("a", 2, 2).is_err());
        let gone = m.without_topic("a").unwrap();
        assert!(gone.topic("a").is_none());
        assert!(gone.without_topic("a").is_err());
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
            .with_topic("a", 2, BTreeMap::new(), 2, Uuid::from_u128(7))
            .unwrap();
        let text = serde_json::to_string(&m).unwrap();
        let back: ClusterMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }
}

//! The client's view of the cluster: brokers and, per topic, each partition's leader.

use crate::util::hash::HashMap;

use kafka_protocol::messages::metadata_response::MetadataResponse;

use super::error::KafkaCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    /// -1 when there is none.
    pub leader: i32,
    pub error: Option<KafkaCode>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub error: Option<KafkaCode>,
    /// Sorted by partition index.
    pub partitions: Vec<PartitionMetadata>,
}

/// A snapshot of broker addresses and partition leaders.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    /// node id → "host:port"
    pub brokers: HashMap<i32, String>,
    pub topics: HashMap<String, TopicMetadata>,
}

impl Metadata {
    pub fn from_response(resp: &MetadataResponse) -> Metadata {
        let brokers = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
            .collect();
        let topics = resp
            .topics
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.0.to_string();
                let mut partitions: Vec<PartitionMetadata> = t
                    .partitions
                    .iter()
                    .map(|p| PartitionMetadata {
                        partition: p.partition_index,
                        leader: p.leader_id.0,
                        error: KafkaCode::from_code(p.error_code),
                    })
                    .collect();
                partitions.sort_by_key(|p| p.partition);
                Some((
                    name,
                    TopicMetadata {
                        error: KafkaCode::from_code(t.error_code),
                        partitions,
                    },
                ))
            })
            .collect();
        Metadata { brokers, topics }
    }

    /// Merges a (partial) refresh into this snapshot: its brokers replace ours, its topics
    /// replace ours of the same name.
    pub fn merge(&mut self, newer: Metadata) {
        if !newer.brokers.is_empty() {
            self.brokers = newer.brokers;
        }
        self.topics.extend(newer.topics);
    }

    /// The number of partitions of a topic known without error.
    pub fn partition_count(&self, topic: &str) -> Option<usize> {
        self.topics
            .get(topic)
            .filter(|t| t.error.is_none())
            .map(|t| t.partitions.len())
    }

    /// The leader's node id of a partition, if it has a known leader with an address.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        let t = self.topics.get(topic)?;
        let p = t.partitions.iter().find(|p| p.partition == partition)?;
        (p.leader >= 0 && self.brokers.contains_key(&p.leader)).then_some(p.leader)
    }

    /// Whether every partition of the topic has a leader.
    pub fn is_ready(&self, topic: &str) -> bool {
        self.topics.get(topic).is_some_and(|t| {
            t.error.is_none()
                && !t.partitions.is_empty()
                && t.partitions
                    .iter()
                    .all(|p| self.leader(topic, p.partition).is_some())
        })
    }
}

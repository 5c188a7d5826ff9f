//! A shard's read-only copy of the cluster metadata, brought up to date by deltas: only the
//! topics and brokers a delta names are copied from the applied metadata (a topic is an
//! `Arc`, so "copied" is a reference count), never the whole map. Shard 0 applies the log
//! and sends each shard the merged delta with a clone of the changed entries, in log order,
//! so no shard sees an older epoch after a newer one.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::cluster_metadata::{BrokerRegistration, ClusterMetadata, TopicState};
use super::delta::MetadataDelta;
use crate::model::{BrokerId, MetadataOffset};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataImage {
    /// The log offset the image reflects.
    pub offset: Option<MetadataOffset>,
    pub brokers: BTreeMap<BrokerId, BrokerRegistration>,
    pub topics: BTreeMap<Uuid, Arc<TopicState>>,
    pub topic_ids: BTreeMap<String, Uuid>,
}

impl MetadataImage {
    /// Brings the image to `source`'s offset, given the merged delta of every record
    /// applied since the image's offset.
    pub fn update(&mut self, source: &ClusterMetadata, delta: &MetadataDelta) {
        for (id, name) in &delta.deleted_topics {
            self.topics.remove(id);
            if self.topic_ids.get(name) == Some(id) {
                self.topic_ids.remove(name);
            }
        }
        for id in &delta.changed_topics {
            match source.topic(*id) {
                Some(topic) => {
                    self.topic_ids.insert(topic.name.clone(), *id);
                    self.topics.insert(*id, Arc::clone(topic));
                }
                // Changed, then deleted later in the same run.
                None => {
                    self.topics.remove(id);
                }
            }
        }
        for id in &delta.changed_brokers {
            match source.broker(*id) {
                Some(b) => self.brokers.insert(*id, b.clone()),
                None => self.brokers.remove(id),
            };
        }
        self.offset = source.applied_offset();
    }

    /// Whether the image holds exactly `source`'s brokers and topics (for tests and checks).
    pub fn matches(&self, source: &ClusterMetadata) -> bool {
        self.offset == source.applied_offset()
            && self.brokers.len() == source.brokers().count()
            && source.brokers().all(|b| self.brokers.get(&b.id) == Some(b))
            && self.topics.len() == source.topics().count()
            && self.topic_ids.len() == self.topics.len()
            && source.topics().all(|t| {
                self.topics.get(&t.id) == Some(t) && self.topic_ids.get(&t.name) == Some(&t.id)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{CreateTopic, MetadataRecord, NewPartition, RegisterBroker};

    #[test]
    fn an_image_follows_deltas_and_shares_unchanged_topics() {
        let mut meta = ClusterMetadata::new();
        let mut image = MetadataImage::default();
        let topic = |name: &str, id: u128| {
            MetadataRecord::CreateTopic(CreateTopic {
                name: name.to_string(),
                topic_id: Uuid::from_u128(id),
                partitions: vec![NewPartition {
                    replicas: vec![BrokerId(1)],
                    isr: vec![BrokerId(1)],
                    leader: None,
                    slot: 0,
                }],
                configs: BTreeMap::new(),
            })
        };
        let records = [
            MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: BrokerId(1),
                incarnation: Uuid::from_u128(1),
                endpoints: Vec::new(),
                rack: None,
            }),
            topic("a", 10),
            topic("b", 11),
        ];
        let mut delta = MetadataDelta::default();
        for (i, r) in records.iter().enumerate() {
            delta.merge(
                meta.apply(MetadataOffset(i as u64 + 1), r)
                    .expect("applies"),
            );
        }
        image.update(&meta, &delta);
        assert!(image.matches(&meta));
        let b_before = Arc::clone(&image.topics[&Uuid::from_u128(11)]);
        // Delete `a` and recreate it under a new id, in one run of deltas.
        let mut delta = MetadataDelta::default();
        let more = [
            MetadataRecord::DeleteTopic {
                topic_id: Uuid::from_u128(10),
            },
            topic("a", 12),
        ];
        for (i, r) in more.iter().enumerate() {
            delta.merge(
                meta.apply(MetadataOffset(i as u64 + 10), r)
                    .expect("applies"),
            );
        }
        image.update(&meta, &delta);
        assert!(image.matches(&meta));
        assert_eq!(image.topic_ids["a"], Uuid::from_u128(12));
        assert!(Arc::ptr_eq(&b_before, &image.topics[&Uuid::from_u128(11)]));
    }
}

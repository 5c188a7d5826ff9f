//! What one applied record (or a run of them) changed, so each shard's copy of the metadata
//! is updated per topic and per broker instead of being replaced whole.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::model::BrokerId;
use crate::model::ProducerIdBlock;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// Topics created or changed (partitions, leaders, ISRs, configs): read their new state
    /// from the metadata.
    pub changed_topics: BTreeSet<Uuid>,
    /// Topics deleted, with their names (the metadata no longer has them).
    pub deleted_topics: BTreeMap<Uuid, String>,
    /// Brokers registered, fenced or unfenced.
    pub changed_brokers: BTreeSet<BrokerId>,
    /// A producer-id block handed out, and to whom.
    pub producer_id_block: Option<(BrokerId, ProducerIdBlock)>,
    /// The dynamic broker configs changed.
    pub broker_configs: bool,
}

impl MetadataDelta {
    pub fn topic(id: Uuid) -> MetadataDelta {
        MetadataDelta {
            changed_topics: BTreeSet::from([id]),
            ..MetadataDelta::default()
        }
    }

    pub fn broker(id: BrokerId) -> MetadataDelta {
        MetadataDelta {
            changed_brokers: BTreeSet::from([id]),
            ..MetadataDelta::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.changed_topics.is_empty()
            && self.deleted_topics.is_empty()
            && self.changed_brokers.is_empty()
            && self.producer_id_block.is_none()
            && !self.broker_configs
    }

    /// Folds in the delta of a later record, so a publisher that fell behind sends one delta.
    pub fn merge(&mut self, later: MetadataDelta) {
        for id in later.changed_topics {
            self.deleted_topics.remove(&id);
            self.changed_topics.insert(id);
        }
        for (id, name) in later.deleted_topics {
            // Kept even if the topic was created within the run: a shard ignores the delete
            // of a topic it never had, but would keep one it had if the delete were dropped.
            self.changed_topics.remove(&id);
            self.deleted_topics.insert(id, name);
        }
        self.changed_brokers.extend(later.changed_brokers);
        self.broker_configs |= later.broker_configs;
        if later.producer_id_block.is_some() {
            self.producer_id_block = later.producer_id_block;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deleted_topic_is_no_longer_changed() {
        let id = Uuid::from_u128(7);
        let mut d = MetadataDelta::topic(id);
        d.merge(MetadataDelta {
            deleted_topics: BTreeMap::from([(id, "t".to_string())]),
            ..MetadataDelta::default()
        });
        assert!(d.changed_topics.is_empty());
        assert_eq!(d.deleted_topics.get(&id).map(String::as_str), Some("t"));
    }

    #[test]
    fn a_change_after_a_delete_wins() {
        let id = Uuid::from_u128(7);
        let mut d = MetadataDelta {
            deleted_topics: BTreeMap::from([(id, "t".to_string())]),
            ..MetadataDelta::default()
        };
        d.merge(MetadataDelta::topic(id));
        assert!(d.deleted_topics.is_empty());
        assert!(d.changed_topics.contains(&id));
        d.merge(MetadataDelta::broker(BrokerId(3)));
        assert!(d.changed_brokers.contains(&BrokerId(3)));
        assert!(!d.is_empty());
    }
}

//! A shard's image of the applied cluster metadata (`metadata::MetadataImage`, the value every
//! shard's services read in both modes), built from the controller's `ClusterMetadata` or
//! brought up to date by deltas: only the topics and brokers a delta names are copied from the
//! applied metadata (a topic is an `Arc`, so "copied" is a reference count), never the whole
//! map. Shard 0 applies the log and publishes each shard the image in log order, so no shard
//! sees an older epoch after a newer one.

use std::sync::Arc;

use super::cluster_metadata::ClusterMetadata;
use super::delta::MetadataDelta;
use crate::metadata::image::{ImageParts, LiveBroker, MetadataImage};
use crate::model::BrokerId;

/// The image of `source` for publication `version`: its brokers, topics and dynamic broker
/// configs (shared `Arc`s), the active controller as the quorum knows it, the cluster id of
/// `meta.properties`.
pub fn shard_image(
    source: &ClusterMetadata,
    version: u64,
    cluster_id: String,
    controller: Option<BrokerId>,
) -> MetadataImage {
    MetadataImage::from_parts(
        ImageParts {
            version,
            cluster_id,
            metadata_offset: source.applied_offset(),
            controller,
            brokers: source.brokers().cloned().collect(),
            broker_configs: Arc::clone(source.broker_configs()),
        },
        source.topics().cloned().collect::<Vec<_>>(),
    )
}

/// A single node's image of `source` (the records its shard 0 applied): `me`, with the address
/// of this start's config, is the only broker and the controller. The publication number is
/// the applied offset, which every change advances.
pub fn single_node_image(
    source: &ClusterMetadata,
    cluster_id: String,
    me: &LiveBroker,
) -> MetadataImage {
    MetadataImage::from_parts(
        ImageParts {
            version: source.applied_offset().map_or(0, |o| o.0),
            cluster_id,
            metadata_offset: source.applied_offset(),
            controller: Some(me.id),
            brokers: vec![MetadataImage::registration_of(me)],
            broker_configs: Arc::clone(source.broker_configs()),
        },
        source.topics().cloned().collect::<Vec<_>>(),
    )
}

/// Brings `image` to `source`'s offset, given the merged delta of every record applied since
/// the image's offset.
pub fn update(image: &mut MetadataImage, source: &ClusterMetadata, delta: &MetadataDelta) {
    for (id, name) in &delta.deleted_topics {
        image.remove_topic(*id, name);
    }
    for id in &delta.changed_topics {
        match source.topic(*id) {
            Some(topic) => image.put_topic(Arc::clone(topic)),
            // Changed, then deleted later in the same run.
            None => image.remove_topic(*id, ""),
        }
    }
    for id in &delta.changed_brokers {
        image.put_broker(*id, source.broker(*id).cloned());
    }
    if delta.broker_configs {
        image.set_broker_configs(Arc::clone(source.broker_configs()));
    }
    image.metadata_offset = source.applied_offset();
}

/// Whether `image` holds exactly `source`'s brokers and topics (for tests and checks).
pub fn matches(image: &MetadataImage, source: &ClusterMetadata) -> bool {
    let topics: Vec<_> = image.topics().collect();
    image.metadata_offset == source.applied_offset()
        && image.broker_count() == source.brokers().count()
        && image.broker_configs() == source.broker_configs()
        && source.brokers().all(|b| image.broker(b.id) == Some(b))
        && topics.len() == source.topics().count()
        && image.topic_count() == topics.len()
        && source.topics().all(|t| {
            image.topic(t.id) == Some(t) && image.topic_by_name(&t.name).map(|x| x.id) == Some(t.id)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{CreateTopic, MetadataRecord, NewPartition, RegisterBroker};
    use crate::model::MetadataOffset;
    use std::collections::BTreeMap;
    use uuid::Uuid;

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
        update(&mut image, &meta, &delta);
        assert!(matches(&image, &meta));
        let b_before = Arc::clone(image.topic(Uuid::from_u128(11)).expect("b"));
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
        update(&mut image, &meta, &delta);
        assert!(matches(&image, &meta));
        assert_eq!(image.topic_by_name("a").expect("a").id, Uuid::from_u128(12));
        assert!(Arc::ptr_eq(
            &b_before,
            image.topic(Uuid::from_u128(11)).expect("b")
        ));
    }
}

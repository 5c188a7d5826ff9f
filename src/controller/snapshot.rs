//! The bytes of a metadata snapshot: [`MetadataSnapshot`] as JSON in a versioned envelope,
//! like the records. A snapshot at offset N replaces the log up to N, so the log does not
//! grow forever and a new or restarted broker loads it instead of replaying everything.

use super::cluster_metadata::{ClusterMetadata, InvalidSnapshot};
use crate::metadata::snapshot_codec::{self, SnapshotCodecError};

pub use crate::metadata::snapshot_codec::SNAPSHOT_FORMAT_VERSION;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Codec(#[from] SnapshotCodecError),
    #[error("metadata snapshot breaks an invariant: {0}")]
    Invalid(#[from] InvalidSnapshot),
}

pub fn encode_snapshot(meta: &ClusterMetadata) -> Result<Vec<u8>, serde_json::Error> {
    snapshot_codec::encode(&meta.to_snapshot())
}

pub fn decode_snapshot(bytes: &[u8]) -> Result<ClusterMetadata, SnapshotError> {
    Ok(ClusterMetadata::from_snapshot(snapshot_codec::decode(
        bytes,
    )?)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{CreateTopic, MetadataRecord, NewPartition, RegisterBroker};
    use crate::controller::{PartitionState, TopicState};
    use crate::model::MetadataOffset;
    use crate::model::{BrokerId, LeaderEpoch, PartitionEpoch};
    use std::collections::BTreeMap;
    use uuid::Uuid;

    fn sample() -> ClusterMetadata {
        let mut meta = ClusterMetadata::new();
        let records = [
            MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: BrokerId(1),
                incarnation: Uuid::from_u128(1),
                endpoints: Vec::new(),
                rack: Some("r".to_string()),
            }),
            MetadataRecord::CreateTopic(CreateTopic {
                name: "t".to_string(),
                topic_id: Uuid::from_u128(9),
                partitions: vec![NewPartition {
                    replicas: vec![BrokerId(1)],
                    isr: vec![BrokerId(1)],
                    leader: None,
                    slot: 3,
                }],
                configs: BTreeMap::from([("retention.ms".to_string(), "5".to_string())]),
            }),
        ];
        for (i, r) in records.iter().enumerate() {
            meta.apply(MetadataOffset(i as u64 + 1), r)
                .expect("applies");
        }
        meta
    }

    #[test]
    fn a_snapshot_restores_the_same_metadata() {
        let meta = sample();
        let bytes = encode_snapshot(&meta).expect("encodes");
        assert_eq!(decode_snapshot(&bytes).expect("decodes"), meta);
    }

    #[test]
    fn a_snapshot_that_breaks_an_invariant_is_refused() {
        let mut snapshot = sample().to_snapshot();
        snapshot.topics.push(TopicState {
            name: "bad".to_string(),
            id: Uuid::from_u128(10),
            partitions: vec![PartitionState {
                replicas: vec![BrokerId(1)],
                isr: vec![BrokerId(2)],
                leader: None,
                leader_epoch: LeaderEpoch(0),
                partition_epoch: PartitionEpoch(0),
                slot: 0,
            }],
            configs: BTreeMap::new(),
        });
        assert!(ClusterMetadata::from_snapshot(snapshot.clone()).is_err());
        snapshot.topics.pop();
        snapshot.topics.push(snapshot.topics[0].clone());
        assert!(ClusterMetadata::from_snapshot(snapshot).is_err());
        let wrong_version = br#"{"version":7,"snapshot":{}}"#;
        assert!(matches!(
            decode_snapshot(wrong_version),
            Err(SnapshotError::Codec(SnapshotCodecError::Version(7)))
        ));
        assert!(decode_snapshot(b"{").is_err());
    }
}

//! A single node's controller (Kafka's combined mode, with one broker and no quorum): shard 0
//! decides topic and config changes by the active controller's own rules, on the metadata it
//! applied, and applies the records itself. The stored snapshot is its log: each change is
//! saved before it is applied here or published. Pure; the caller does the I/O.

use uuid::Uuid;

use super::active_controller::{ActiveController, ControllerConfig};
use super::cluster_metadata::{ClusterMetadata, InvalidSnapshot, Skipped};
use super::records::{BrokerFencing, MetadataRecord, RegisterBroker};
use super::topic_changes::{ChangeDecision, TopicChange};
use crate::metadata::cluster_state::{
    BrokerRegistration, MetadataSnapshot, PartitionState, TopicState,
};
use crate::metadata::legacy_json::LegacyMetadata;
use crate::metadata::{LiveBroker, MetadataImage};
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocalStartError {
    #[error("the stored metadata is inconsistent: {0}")]
    Invalid(#[from] InvalidSnapshot),
    #[error("this data directory belongs to broker {stored}, not to node.id={configured} (Kafka refuses such a start too): start it with node.id={stored}")]
    OtherNode { stored: i32, configured: i32 },
    #[error("registering this broker in its own metadata failed: {0}")]
    Register(Skipped),
}

#[derive(Debug, Clone)]
pub struct LocalController {
    meta: ClusterMetadata,
    decider: ActiveController,
}

impl LocalController {
    /// The controller of `snapshot`, with `me` registered and unfenced (the records that do it
    /// are applied on the first start); the flag says whether the metadata changed, so the
    /// caller saves it before serving.
    pub fn open(
        snapshot: MetadataSnapshot,
        me: &LiveBroker,
        config: ControllerConfig,
    ) -> Result<(LocalController, bool), LocalStartError> {
        let mut meta = ClusterMetadata::from_snapshot(snapshot)?;
        let registered = meta.broker(me.id).is_some();
        if !registered {
            if let Some(other) = meta.brokers().next().filter(|_| meta.topics().count() > 0) {
                return Err(LocalStartError::OtherNode {
                    stored: other.id.0,
                    configured: me.id.0,
                });
            }
        }
        let mut next = offset_after(&meta);
        let mut changed = false;
        if !registered {
            let register = MetadataRecord::RegisterBroker(RegisterBroker {
                broker_id: me.id,
                incarnation: crate::util::entropy::uuid_v4(),
                // The image gives out the config's address of each start; this is the first.
                endpoints: MetadataImage::registration_of(me).endpoints,
                rack: me.rack.clone(),
            });
            meta.apply(next, &register)
                .map_err(LocalStartError::Register)?;
            next = MetadataOffset(next.0 + 1);
            changed = true;
        }
        if let Some(b) = meta.broker(me.id).filter(|b| b.fenced) {
            let unfence = MetadataRecord::UnfenceBroker(BrokerFencing {
                broker_id: me.id,
                broker_epoch: b.epoch,
            });
            meta.apply(next, &unfence)
                .map_err(LocalStartError::Register)?;
            changed = true;
        }
        let decider = ActiveController::new(config, 0);
        Ok((LocalController { meta, decider }, changed))
    }

    pub fn metadata(&self) -> &ClusterMetadata {
        &self.meta
    }

    /// The records of `changes` (each validated on the metadata plus the earlier ones), or why
    /// each was refused; `new_id` draws the id of each created topic.
    pub fn decide(&self, changes: &[TopicChange], new_id: impl FnMut() -> Uuid) -> ChangeDecision {
        self.decider
            .decide_topic_changes(&self.meta, changes, new_id)
    }

    /// The metadata with `records` applied after the last applied offset (a copy: nothing
    /// changes here until [`LocalController::commit`]). A record that would be skipped was
    /// decided on this very state, so it would be a decision bug: it is logged, and the rest
    /// still applies (as the quorum applies a committed batch).
    pub fn applied(&self, records: &[MetadataRecord]) -> ClusterMetadata {
        let mut next = self.meta.clone();
        for r in records {
            let offset = offset_after(&next);
            if let Err(e) = next.apply(offset, r) {
                tracing::error!(offset = offset.0, error = %e, "a metadata change decided on this node was skipped");
            }
        }
        next
    }

    /// `next` (from [`LocalController::applied`], saved by the caller) is the metadata now.
    pub fn commit(&mut self, next: ClusterMetadata) {
        self.meta = next;
    }
}

fn offset_after(meta: &ClusterMetadata) -> MetadataOffset {
    MetadataOffset(meta.applied_offset().map_or(1, |o| o.0 + 1))
}

/// An earlier release's metadata file as a snapshot. Every topic keeps its id, partitions,
/// slots and configs; the dynamic broker configs are kept. On a single node `me` is the only
/// broker, replica, ISR and leader of every partition at epoch 0 (what that release reported).
/// In cluster mode the file was this broker's copy of the controller's topics, which only
/// placed its logs: the partitions it hosted get `me` as their replica and the rest none, at
/// the metadata offset the copy was made (the metadata log replaces it all once caught up);
/// topics of the node alone, from before it joined, are left out (they were never served).
pub fn import_legacy(
    legacy: &LegacyMetadata,
    me: BrokerId,
    cluster_mode: bool,
) -> MetadataSnapshot {
    let topics = legacy
        .topics
        .values()
        .filter(|t| !cluster_mode || t.from_controller)
        .map(|t| TopicState {
            name: t.name.clone(),
            id: t.id,
            partitions: t
                .partitions
                .iter()
                .map(|p| {
                    // A single node hosts every partition whatever the file says.
                    let replicas = if p.hosted || !cluster_mode {
                        vec![me]
                    } else {
                        Vec::new()
                    };
                    PartitionState {
                        isr: replicas.clone(),
                        leader: (!cluster_mode).then_some(me),
                        replicas,
                        leader_epoch: LeaderEpoch(0),
                        partition_epoch: PartitionEpoch(0),
                        slot: p.slot,
                    }
                })
                .collect(),
            configs: t.configs.clone(),
        })
        .collect();
    let brokers = if cluster_mode {
        Vec::new()
    } else {
        // Registered at offset 1 and unfenced; the image gives the config's address.
        vec![BrokerRegistration {
            id: me,
            epoch: BrokerEpoch(1),
            incarnation: Uuid::nil(),
            endpoints: Vec::new(),
            rack: None,
            fenced: false,
        }]
    };
    MetadataSnapshot {
        applied: if cluster_mode {
            legacy.controller_offset.map(MetadataOffset)
        } else {
            Some(MetadataOffset(1))
        },
        brokers,
        topics,
        next_slot: legacy.next_slot,
        next_producer_id: 0,
        broker_configs: legacy.broker_configs.clone(),
    }
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;

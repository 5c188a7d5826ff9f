//! Offline partitions: those a shard owns but cannot serve because their log failed (Kafka's
//! offline replica, whose log dir failed). The rest of the shard keeps serving.
//!
//! The manager keeps each one with its cause beside the online ones: produce, fetch,
//! list-offsets and delete-records answer KAFKA_STORAGE_ERROR for it. Every shard's manager
//! also holds a notice of every offline partition of the broker (its `offline_view`), sent by
//! the owner through the shard mesh, so that any shard answers Metadata (no leader, this
//! broker in `offline_replicas`) and CreateTopics (which partitions could not be opened)
//! without a round trip. A partition goes offline when its log cannot be opened, or when a
//! log fails while serving ([`PartitionManager::take_offline`]); it stays offline until the
//! broker restarts or the topic is deleted.

use std::path::PathBuf;
use std::rc::Rc;

use uuid::Uuid;

use super::{PartitionKey, PartitionManager};
use crate::log::LogError;
use crate::metadata::cluster_state::TopicState;
use crate::metadata::MetadataImage;
use crate::partition::dirs::PartitionDirError;
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::ops::{error_result, unknown_partition_result, PartitionOp, PartitionResult};
use crate::partition::Partition;
use crate::protocol::ResponseError;

/// Why a partition is offline.
#[derive(Debug, thiserror::Error)]
pub enum OfflineCause {
    #[error("its log cannot be opened: {0}")]
    Open(#[source] LogError),
    #[error("its producer state cannot be loaded: {0}")]
    Producers(#[source] LogError),
    #[error(transparent)]
    Dir(#[from] PartitionDirError),
    /// The log failed while serving (e.g. an fsync error: what was written may be lost).
    #[error("its log failed: {0}")]
    Failed(#[source] LogError),
}

/// An offline partition as its owning shard keeps it.
#[derive(Debug)]
pub struct OfflinePartition {
    pub topic: String,
    pub index: i32,
    pub topic_id: Uuid,
    pub dir: PathBuf,
    pub cause: OfflineCause,
}

impl OfflinePartition {
    fn notice(&self) -> OfflineNotice {
        OfflineNotice {
            topic: self.topic.clone(),
            index: self.index,
            topic_id: self.topic_id,
            reason: format!("{}: {}", self.dir.display(), self.cause),
        }
    }
}

/// A partition of this shard, as requests find it.
pub enum PartitionState {
    Online(Rc<Partition>),
    Offline(Rc<OfflinePartition>),
}

impl PartitionManager {
    /// The state of a partition this shard owns; `None` if it owns no such partition.
    pub fn state(&self, topic: &str, index: i32) -> Option<PartitionState> {
        if let Some(p) = self.get(topic, index) {
            return Some(PartitionState::Online(p));
        }
        let key = (topic.to_string(), index);
        self.offline
            .borrow()
            .get(&key)
            .cloned()
            .map(PartitionState::Offline)
    }

    /// The online partition `op` works on, or the result to answer instead (unknown partition,
    /// or KAFKA_STORAGE_ERROR when it is offline).
    pub fn online_for(&self, op: &PartitionOp) -> Result<Rc<Partition>, PartitionResult> {
        let (topic, index) = op.topic_partition();
        match self.state(topic, index) {
            Some(PartitionState::Online(p)) => Ok(p),
            Some(PartitionState::Offline(o)) => Err(error_result(
                op,
                ResponseError::KafkaStorageError.code(),
                format!("{topic}-{index} is offline: {}", o.cause),
            )),
            None => Err(unknown_partition_result(op)),
        }
    }

    /// Whether `topic` (this incarnation of it) has `index` offline, on any shard.
    pub fn offline_notice(&self, topic: &str, topic_id: Uuid, index: i32) -> Option<OfflineNotice> {
        self.offline_view
            .borrow()
            .get(&(topic.to_string(), index))
            .filter(|n| n.topic_id == topic_id)
            .cloned()
    }

    /// The partitions of `topic` from `first` on that are offline, on any shard (after a
    /// CreateTopics or CreatePartitions: the owners told every shard before it was
    /// acknowledged).
    pub fn offline_partitions_of(&self, topic: &TopicState, first: i32) -> Vec<OfflineNotice> {
        (first..topic.partitions.len() as i32)
            .filter_map(|i| self.offline_notice(&topic.name, topic.id, i))
            .collect()
    }

    /// Offline partitions this shard owns.
    pub fn offline_count(&self) -> usize {
        self.offline.borrow().len()
    }

    /// Notices of every offline partition this shard owns (for the other shards).
    pub fn offline_notices(&self) -> Vec<OfflineNotice> {
        self.offline.borrow().values().map(|p| p.notice()).collect()
    }

    /// Records `p` as offline here, logging it once. Returns the notice for the other shards.
    pub(super) fn record_offline(&self, p: OfflinePartition) -> OfflineNotice {
        tracing::error!(
            shard = self.settings.shard,
            topic = %p.topic,
            partition = p.index,
            dir = %p.dir.display(),
            error = %p.cause,
            "partition is OFFLINE: its requests answer KAFKA_STORAGE_ERROR until the broker restarts; the other partitions are served"
        );
        let notice = p.notice();
        self.offline
            .borrow_mut()
            .insert((p.topic.clone(), p.index), Rc::new(p));
        notice
    }

    /// Takes an online partition offline (for a log that failed while serving): its requests
    /// answer KAFKA_STORAGE_ERROR from now on, its long polls are woken, nothing more is
    /// written to its log. Returns the notice for every shard's view (this one's included:
    /// the caller adopts it with the others').
    pub fn take_offline(
        &self,
        topic: &str,
        index: i32,
        topic_id: Uuid,
        cause: OfflineCause,
    ) -> Option<OfflineNotice> {
        let p = self
            .online
            .borrow_mut()
            .remove(&(topic.to_string(), index))?;
        p.notify_append();
        Some(self.record_offline(OfflinePartition {
            topic: topic.to_string(),
            index,
            topic_id,
            dir: self.dir_of(topic, index),
            cause,
        }))
    }

    /// Adds notices of offline partitions (of any shard) to this shard's view.
    pub fn adopt_offline_notices(&self, notices: Vec<OfflineNotice>) {
        let mut view = self.offline_view.borrow_mut();
        for n in notices {
            view.insert((n.topic.clone(), n.index), n);
        }
    }

    /// Forgets offline partitions whose topic is gone from `meta` (deleted, or recreated with
    /// another id). Returns those this shard owned, whose directories are to be removed.
    pub(super) fn forget_offline_gone(&self, meta: &MetadataImage) -> Vec<Rc<OfflinePartition>> {
        let current = |topic: &str, index: i32, id: Uuid| {
            meta.topic_by_name(topic).is_some_and(|t| t.id == id)
                && meta.has_partition(topic, index)
        };
        self.offline_view
            .borrow_mut()
            .retain(|(t, i), n| current(t, *i, n.topic_id));
        let mut owned = self.offline.borrow_mut();
        let gone: Vec<PartitionKey> = owned
            .iter()
            .filter(|((t, i), p)| !current(t, *i, p.topic_id))
            .map(|(k, _)| k.clone())
            .collect();
        gone.iter().filter_map(|k| owned.remove(k)).collect()
    }
}

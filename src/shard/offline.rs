//! Offline partitions: those a shard owns but cannot serve because their log failed (Kafka's
//! offline replica, whose log dir failed). The rest of the shard keeps serving.
//!
//! The owning shard keeps each one with its cause (`Shard::offline`), beside the online ones:
//! produce, fetch, list-offsets and delete-records answer KAFKA_STORAGE_ERROR for it. Every
//! shard also holds a notice of every offline partition of the broker (`Shard::offline_view`),
//! sent by the owner, so that any shard answers Metadata (no leader, this broker in
//! `offline_replicas`) and CreateTopics (which partitions could not be opened) without a
//! round trip. A partition goes offline when its log cannot be opened, or, through
//! [`Shard::mark_offline`], when a log fails while serving; it stays offline until the broker
//! restarts or the topic is deleted.

use std::path::PathBuf;
use std::rc::Rc;

use uuid::Uuid;

use super::errors::error_result;
use super::messages::{PartitionOp, PartitionRequest, PartitionResult, ShardReply, ShardRequest};
use super::partition_dirs::PartitionDirError;
use super::{PartitionKey, Shard};
use crate::log::LogError;
use crate::metadata::{StoredMetadata, TopicMetadata};
use crate::partition::offline_notice::OfflineNotice;
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

impl Shard {
    /// The state of a partition this shard owns; `None` if it owns no such partition.
    pub fn partition_state(&self, topic: &str, index: i32) -> Option<PartitionState> {
        if let Some(p) = self.partition(topic, index) {
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
    pub(super) fn online_for(&self, op: &PartitionOp) -> Result<Rc<Partition>, PartitionResult> {
        let (topic, index) = op.topic_partition();
        match self.partition_state(topic, index) {
            Some(PartitionState::Online(p)) => Ok(p),
            Some(PartitionState::Offline(o)) => Err(error_result(
                op,
                ResponseError::KafkaStorageError.code(),
                format!("{topic}-{index} is offline: {}", o.cause),
            )),
            None => Err(super::errors::unknown_partition_result(op)),
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
    pub fn offline_partitions_of(&self, topic: &TopicMetadata, first: i32) -> Vec<OfflineNotice> {
        (first..topic.partitions.len() as i32)
            .filter_map(|i| self.offline_notice(&topic.name, topic.id, i))
            .collect()
    }

    /// Offline partitions this shard owns.
    pub fn offline_count(&self) -> usize {
        self.offline.borrow().len()
    }

    /// Records `p` as offline here, logging it once. Returns the notice for the other shards.
    pub(super) fn record_offline(&self, p: OfflinePartition) -> OfflineNotice {
        tracing::error!(
            shard = self.id,
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

    /// Takes an online partition of this shard offline (for a log that failed while serving):
    /// its requests answer KAFKA_STORAGE_ERROR from now on, its long polls are woken, and
    /// every shard is told before this returns. Nothing more is written to its log.
    pub async fn mark_offline(self: &Rc<Self>, topic: &str, index: i32, cause: OfflineCause) {
        let key = (topic.to_string(), index);
        let Some(p) = self.partitions.borrow_mut().remove(&key) else {
            return;
        };
        p.notify_append();
        let meta = self.metadata();
        let notice = self.record_offline(OfflinePartition {
            topic: topic.to_string(),
            index,
            topic_id: meta.topic(topic).map(|t| t.id).unwrap_or_default(),
            dir: self.partition_dir(topic, index),
            cause,
        });
        self.tell_offline(vec![notice]).await;
    }

    /// Sends every offline partition of this shard to every shard (at start, once the mesh
    /// is served, before the listener opens).
    pub async fn publish_offline_partitions(self: &Rc<Self>) {
        let notices: Vec<OfflineNotice> =
            self.offline.borrow().values().map(|p| p.notice()).collect();
        if !notices.is_empty() {
            self.tell_offline(notices).await;
        }
    }

    /// Adds `notices` to every shard's view (this one included) and waits for all of them.
    pub(super) async fn tell_offline(self: &Rc<Self>, notices: Vec<OfflineNotice>) {
        let mut tasks = Vec::new();
        for to in (0..self.count).filter(|&to| to != self.id) {
            let shard = Rc::clone(self);
            let notices = notices.clone();
            tasks.push(crate::runtime::spawn(async move {
                shard
                    .request(
                        to,
                        ShardRequest::Partitions(PartitionRequest::Offline(notices)),
                    )
                    .await
            }));
        }
        self.adopt_offline_notices(notices);
        for t in tasks {
            if !matches!(t.await, Some(ShardReply::Applied)) {
                tracing::warn!("a shard did not acknowledge offline partitions");
            }
        }
    }

    pub(super) fn adopt_offline_notices(&self, notices: Vec<OfflineNotice>) {
        let mut view = self.offline_view.borrow_mut();
        for n in notices {
            view.insert((n.topic.clone(), n.index), n);
        }
    }

    /// Forgets offline partitions whose topic is gone from `meta` (deleted, or recreated with
    /// another id). Returns those this shard owned, whose directories are to be removed.
    pub(super) fn forget_offline_gone(&self, meta: &StoredMetadata) -> Vec<Rc<OfflinePartition>> {
        let current = |topic: &str, index: i32, id: Uuid| {
            meta.topic(topic).is_some_and(|t| t.id == id) && meta.has_partition(topic, index)
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

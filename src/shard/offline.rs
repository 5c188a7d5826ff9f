//! Offline partitions across shards: the owner takes a failed partition offline in its
//! partition manager (`partition::offline`) and tells every shard, so that any of them
//! answers Metadata and CreateTopics for it without a round trip.

use std::rc::Rc;

use super::messages::{PartitionRequest, ShardReply, ShardRequest};
use super::Shard;
use crate::partition::manager::offline::OfflineCause;
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::Partition;

impl Shard {
    /// Takes an online partition of this shard offline (for a log that failed while serving):
    /// its requests answer KAFKA_STORAGE_ERROR from now on, its long polls are woken, and
    /// every shard is told before this returns. Nothing more is written to its log.
    pub async fn mark_offline(self: &Rc<Self>, topic: &str, index: i32, cause: OfflineCause) {
        let topic_id = self
            .image()
            .topic_by_name(topic)
            .map(|t| t.id)
            .unwrap_or_default();
        if let Some(notice) = self.partitions.take_offline(topic, index, topic_id, cause) {
            self.tell_offline(vec![notice]).await;
        }
    }

    /// Takes a partition whose log went offline (a failed fsync or write) out of service.
    pub(super) async fn offline_if_failed(self: &Rc<Self>, p: &Partition) {
        if let Some(reason) = p.log.offline_reason() {
            let error = crate::log::LogError::Offline {
                dir: p.log.dir().to_path_buf(),
                reason,
            };
            self.mark_offline(&p.topic, p.index, OfflineCause::Failed(error))
                .await;
        }
    }

    /// Sends every offline partition of this shard to every shard (at start, once the mesh
    /// is served, before the listener opens).
    pub async fn publish_offline_partitions(self: &Rc<Self>) {
        let notices = self.partitions.offline_notices();
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
        self.partitions.adopt_offline_notices(notices);
        for t in tasks {
            if !matches!(t.await, Some(ShardReply::Applied)) {
                tracing::warn!("a shard did not acknowledge offline partitions");
            }
        }
    }
}

//! Keeping a shard's logs in step with the metadata: partitions it now owns are opened (one
//! that cannot open goes offline, the others still open), topic configs are applied, and
//! partitions that are gone are closed and their directories renamed for deletion.

use std::io;

use super::offline::{OfflineCause, OfflinePartition};
use super::{PartitionKey, PartitionManager};
use crate::config::topic_log_config;
use crate::idempotence::append::ProducerLoad;
use crate::log::{Log, LogConfig};
use crate::metadata::cluster_state::TopicState;
use crate::metadata::{self, MetadataImage};
use crate::partition::dirs::{self as partition_dirs, Aside, PartitionDirError};
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::recovery_summary::RecoverySummary;
use crate::partition::Partition;
use crate::runtime;

impl PartitionManager {
    /// Opens the logs of partitions this shard owns in `meta` (those with a replica on this
    /// broker whose slot maps to this shard) and has not opened yet, applies
    /// topic configs to open ones, and closes and deletes logs of partitions that are gone.
    /// `defaults` are the topic defaults as `meta` has them (dynamic broker configs included):
    /// a change of them reaches every open log here, as a topic's own change does. Returns
    /// what loading the newly opened logs found, and the partitions that went offline
    /// (already recorded here; the caller tells the other shards).
    pub async fn open_owned(
        &self,
        meta: &MetadataImage,
        defaults: &LogConfig,
    ) -> (RecoverySummary, Vec<OfflineNotice>) {
        let mut opened = RecoverySummary::default();
        let mut offline = Vec::new();
        for gone in self.forget_offline_gone(meta) {
            self.delete_partition_dir(&gone.topic, gone.index).await;
        }
        let (me, shards) = (self.settings.shard, self.settings.shards);
        let broker = self.settings.broker;
        for topic in meta.topics() {
            let log_config = log_config_of(defaults, topic);
            for (i, p) in topic.partitions.iter().enumerate() {
                if !p.replicas.contains(&broker) || metadata::shard_for_slot(p.slot, shards) != me {
                    continue;
                }
                let index = i as i32;
                if let Some(p) = self.get(&topic.name, index) {
                    if p.log.config() != log_config {
                        p.log.set_config(log_config.clone());
                        p.refresh_leader_config();
                    }
                    continue;
                }
                let key: PartitionKey = (topic.name.clone(), index);
                // Offline until the broker restarts, as in Kafka: no retry on every change.
                if self.offline.borrow().contains_key(&key) {
                    continue;
                }
                match self.open_partition(topic, index, log_config.clone()).await {
                    Ok((partition, producers)) => {
                        opened.add_log(
                            partition.log.recovery_report(),
                            partition.log.offsets().size_bytes,
                            producers,
                        );
                        self.online
                            .borrow_mut()
                            .insert(key, std::rc::Rc::new(partition));
                    }
                    Err(cause) => offline.push(self.record_offline(OfflinePartition {
                        topic: topic.name.clone(),
                        index,
                        topic_id: topic.id,
                        dir: self.dir_of(&topic.name, index),
                        cause,
                    })),
                }
            }
        }
        opened.offline_partitions += offline.len();
        self.close_gone_partitions(meta).await;
        (opened, offline)
    }

    /// Opens one partition's log after checking that its directory belongs to this topic.
    async fn open_partition(
        &self,
        topic: &TopicState,
        index: i32,
        log_config: LogConfig,
    ) -> Result<(Partition, ProducerLoad), OfflineCause> {
        let dir = self.dir_of(&topic.name, index);
        match partition_dirs::read_topic_id(&dir).await? {
            Some(id) if id == topic.id => {}
            found => {
                if let Some(other) = found {
                    // Another incarnation of the topic (deleted, then created again, with a
                    // crash in between): never serve its data as this one's.
                    let aside =
                        partition_dirs::rename_aside(&dir, &topic.name, index, Aside::Stray)
                            .await?;
                    tracing::warn!(topic = %topic.name, partition = index, found_topic_id = %other, topic_id = %topic.id, moved_to = %aside.display(), "a partition directory of another topic with this name was set aside; the partition starts empty");
                }
                // New, set aside, or written before the file existed (upgrade): this topic's.
                partition_dirs::write_topic_id(&dir, topic.id).await?;
            }
        }
        let log = Log::open(&dir, log_config)
            .await
            .map_err(OfflineCause::Open)?;
        let partition = if self.settings.cluster_mode {
            let p = Partition::replicated(topic.name.clone(), index, log);
            p.load_epochs().await.map_err(OfflineCause::Open)?;
            p
        } else {
            Partition::new(topic.name.clone(), index, log)
        };
        // On failure the log is dropped, not closed: a clean-shutdown marker would make the
        // next start trust a log that just failed to load.
        let producers = partition
            .load_producers(runtime::now_ms())
            .await
            .map_err(OfflineCause::Producers)?;
        Ok((partition, producers))
    }

    /// Closes the open partitions `meta` no longer gives this shard and deletes their data.
    async fn close_gone_partitions(&self, meta: &MetadataImage) {
        let (me, shards, broker) = (
            self.settings.shard,
            self.settings.shards,
            self.settings.broker,
        );
        let owned = |t: &str, i: i32| {
            meta.partition_by_name(t, i).is_some_and(|p| {
                p.replicas.contains(&broker) && metadata::shard_for_slot(p.slot, shards) == me
            })
        };
        let gone: Vec<PartitionKey> = self
            .online
            .borrow()
            .keys()
            .filter(|(t, i)| !owned(t, *i))
            .cloned()
            .collect();
        for key in gone {
            let Some(p) = self.online.borrow_mut().remove(&key) else {
                continue;
            };
            p.notify_append();
            if let Err(e) = p.log.close().await {
                tracing::warn!(topic = %key.0, partition = key.1, error = %e, "closing a deleted partition");
            }
            self.delete_partition_dir(&key.0, key.1).await;
        }
    }

    /// Renames a deleted partition's directory to `-delete` (durably) and removes it in the
    /// background: from the rename on, nothing can load it as a partition again.
    async fn delete_partition_dir(&self, topic: &str, index: i32) {
        let dir = self.dir_of(topic, index);
        match partition_dirs::rename_aside(&dir, topic, index, Aside::Delete).await {
            Ok(aside) => partition_dirs::remove_in_background(aside),
            Err(PartitionDirError::Rename { source, .. })
                if source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::error!(topic, partition = index, dir = %dir.display(), error = %e, "cannot rename a deleted partition's directory for deletion; the next start sets it aside");
            }
        }
    }
}

/// Configs are validated before they are stored; should one still not parse (a hand-edited
/// file, a property dropped in a later version), the topic is served with the broker defaults
/// rather than not at all.
fn log_config_of(defaults: &LogConfig, topic: &TopicState) -> LogConfig {
    match topic_log_config(defaults, &topic.configs) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(topic = %topic.name, error = %e, "invalid topic config; using broker defaults");
            defaults.clone()
        }
    }
}

//! The partitions one shard owns: the online ones (open logs), the offline ones (logs that
//! failed), and a view of every offline partition of the broker. Kafka splits this between
//! its LogManager and the partition table of its ReplicaManager; here one shard's thread owns
//! all of it, so it is plain `RefCell` state.
//!
//! The manager opens and closes logs to match the metadata it is given ([`open_logs`]), runs
//! partition operations on its own partitions ([`execute`]) and keeps the offline ones
//! ([`offline`]). What crosses shards (telling the others of an offline partition, routing
//! an operation to its owner) is the shard's business: the manager returns what to send.

mod execute;
pub mod offline;
mod open_logs;

pub use offline::{OfflineCause, PartitionState};

use crate::util::hash::HashMap;
use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;

use super::offline_notice::OfflineNotice;
use super::Partition;
use crate::log::partition_dir_name;
use crate::replication::leader_state::IsrProposal;
use offline::OfflinePartition;

/// A partition by topic name and index.
pub type PartitionKey = (String, i32);

/// Where a leader's ISR proposals go (cluster mode: the shard's replica manager, which sends
/// them to the controller). Without one, every proposal is refused at once.
pub type IsrSink = Rc<dyn Fn(&Rc<Partition>, IsrProposal)>;

/// What a manager needs to know of its broker and shard, fixed at start.
#[derive(Debug, Clone)]
pub struct ManagerSettings {
    /// The owning shard and how many the process runs (placement is `slot mod shards`).
    pub shard: usize,
    pub shards: usize,
    /// This broker (`node.id`): the partitions with a replica here are hosted.
    pub broker: crate::model::BrokerId,
    pub data_dir: PathBuf,
    /// Partitions are replicated (leader epochs loaded, roles applied by the replica manager).
    pub cluster_mode: bool,
}

pub struct PartitionManager {
    pub(crate) settings: ManagerSettings,
    /// The partitions this shard serves.
    online: RefCell<HashMap<PartitionKey, Rc<Partition>>>,
    /// The partitions this shard owns but cannot serve (see [`offline`]); never also
    /// online.
    offline: RefCell<HashMap<PartitionKey, Rc<OfflinePartition>>>,
    /// Every offline partition of the broker, whichever shard owns it (for Metadata).
    offline_view: RefCell<HashMap<PartitionKey, OfflineNotice>>,
    isr_sink: RefCell<Option<IsrSink>>,
}

impl PartitionManager {
    pub fn new(settings: ManagerSettings) -> PartitionManager {
        PartitionManager {
            settings,
            online: RefCell::new(HashMap::default()),
            offline: RefCell::new(HashMap::default()),
            offline_view: RefCell::new(HashMap::default()),
            isr_sink: RefCell::new(None),
        }
    }

    pub fn settings(&self) -> &ManagerSettings {
        &self.settings
    }

    /// An online partition of this shard.
    pub fn get(&self, topic: &str, index: i32) -> Option<Rc<Partition>> {
        self.online
            .borrow()
            .get(&(topic.to_string(), index))
            .cloned()
    }

    /// Every online partition of this shard.
    pub fn all(&self) -> Vec<Rc<Partition>> {
        self.online.borrow().values().cloned().collect()
    }

    fn dir_of(&self, topic: &str, index: i32) -> PathBuf {
        self.settings
            .data_dir
            .join(partition_dir_name(topic, index))
    }

    /// Sends leaders' ISR proposals to `sink` from now on.
    pub fn set_isr_sink(&self, sink: IsrSink) {
        *self.isr_sink.borrow_mut() = Some(sink);
    }

    /// A leader's ISR proposal, to the sink (refused when there is none).
    fn submit_isr_change(&self, p: &Rc<Partition>, proposal: IsrProposal) {
        let sink = self.isr_sink.borrow().clone();
        match sink {
            Some(sink) => sink(p, proposal),
            None => p.isr_rejected(proposal.leader_epoch),
        }
    }

    /// Whether a partition is replicated (its HW is checkpointed on its own interval).
    pub fn has_replicated(&self) -> bool {
        self.online.borrow().values().any(|p| p.is_replicated())
    }

    /// Whether a partition flushes by count or age (`log.flush.interval.messages|ms`), so
    /// housekeeping must check it often.
    pub fn has_flush_policy(&self) -> bool {
        self.online.borrow().values().any(|p| {
            let config = p.log.config();
            config.flush_ms != i64::MAX || config.flush_messages != u64::MAX
        })
    }

    /// The broker stops: waiters on every partition (acks=all, DeleteRecords) are answered.
    pub fn begin_close(&self) {
        for p in self.all() {
            p.begin_close();
        }
    }

    /// Clean shutdown of every log (flush, checkpoint, clean-shutdown marker).
    pub async fn close_all(&self) {
        for p in self.all() {
            if let Err(e) = p.close().await {
                tracing::error!(topic = %p.topic, partition = p.index, error = %e, "closing a partition failed");
            }
        }
    }

    /// One round of periodic work on every partition: the scheduled flush always, and the
    /// jobs `due` says. Returns the partitions whose log failed on the way (the caller takes
    /// them offline, which involves the other shards).
    pub async fn housekeeping(&self, now_ms: i64, due: Housekeeping) -> Vec<Rc<Partition>> {
        let mut failed = Vec::new();
        for p in self.all() {
            if let Err(e) = p.log.flush_if_due(now_ms).await {
                tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "scheduled flush failed");
            }
            if due.retention {
                if let Err(e) = p.log.apply_retention(now_ms).await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "retention failed");
                }
                p.producers.expire(now_ms, due.producer_id_expiration_ms);
            }
            if due.checkpoint {
                p.note_high_watermark();
                if let Err(e) = p.log.checkpoint().await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "checkpoint failed");
                }
                if let Err(e) = p.producers.snapshot(&p.log).await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "producer snapshot failed");
                }
            } else if due.hw_checkpoint && p.note_high_watermark() {
                // Only the HW moved since the last checkpoint: Kafka writes it every 5 s,
                // so a restarted broker serves consumers up to it without waiting.
                if let Err(e) = p.log.checkpoint().await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "high watermark checkpoint failed");
                }
            }
            if p.log.offline_reason().is_some() {
                failed.push(p);
            }
        }
        failed
    }
}

/// The jobs of one housekeeping round, beside the scheduled flush.
#[derive(Debug, Clone, Copy)]
pub struct Housekeeping {
    pub retention: bool,
    pub checkpoint: bool,
    pub hw_checkpoint: bool,
    /// `producer.id.expiration.ms` as the dynamic broker configs have it now.
    pub producer_id_expiration_ms: i64,
}

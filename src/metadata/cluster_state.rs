//! The values the cluster metadata is made of: brokers' registrations, topics and their
//! partitions' replica sets, leaders and epochs. Plain data: the controller's
//! `ClusterMetadata` applies records to them, and every shard's published image
//! (`image.rs`) shares them (`Arc<TopicState>`) in both modes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};

/// A listener a broker advertises (`advertised.listeners`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Listener name, e.g. `PLAINTEXT`.
    pub name: String,
    pub host: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: BrokerId,
    /// The offset of the RegisterBroker record.
    pub epoch: BrokerEpoch,
    pub incarnation: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// A fenced broker leads nothing and is in no ISR with other members. A registration
    /// starts fenced; the controller unfences it once it has caught up with the log.
    pub fenced: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// In assignment order (the election order).
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub leader: Option<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
    /// Shard slot, the same on every broker.
    pub slot: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicState {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<PartitionState>,
    pub configs: BTreeMap<String, String>,
}

/// Dynamic broker configs by resource name: "" holds the cluster-wide defaults, a broker id
/// that broker's own. They win over the config file, a broker's own over the defaults
/// (Kafka's order).
pub type BrokerConfigs = BTreeMap<String, BTreeMap<String, String>>;

/// The applied cluster metadata as plain data: what a Raft snapshot stores, and what every
/// broker keeps in its data dir (`store.rs`) to place its logs at the next start. The
/// controller's `ClusterMetadata` is built from it and turns back into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataSnapshot {
    pub applied: Option<MetadataOffset>,
    pub brokers: Vec<BrokerRegistration>,
    pub topics: Vec<TopicState>,
    pub next_slot: usize,
    pub next_producer_id: i64,
    /// Absent from snapshots written before dynamic broker configs were records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub broker_configs: BrokerConfigs,
}

/// The shard owning placement `slot` in a process running `shards` shards. The stored
/// placement is a slot given once at creation, the same on every broker, so a restart with
/// another shard count re-places every partition instead of losing those whose shard is gone
/// (CLUSTER.md, "Thread-per-core placement").
pub fn shard_for_slot(slot: usize, shards: usize) -> usize {
    slot % shards.max(1)
}

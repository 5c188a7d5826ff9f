//! The values the cluster metadata is made of: brokers' registrations, topics and their
//! partitions' replica sets, leaders and epochs. Plain data: the controller's
//! `ClusterMetadata` applies records to them, and every shard's published image
//! (`image.rs`) shares them (`Arc<TopicState>`) in both modes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch};

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

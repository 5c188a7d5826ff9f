//! The records of the metadata log: what the Raft log carries, applied in order by every
//! broker ([`super::ClusterMetadata::apply`]).
//!
//! Every record that changes existing state names the version it was decided on (a broker
//! epoch, a partition epoch, the next producer id, a partition count). Applying a record whose
//! expectation no longer holds is a no-op, so a proposal that was delayed, duplicated or
//! decided by a controller that has since lost its place cannot undo a newer decision.
//!
//! Encoding: JSON in a versioned envelope (`{"version":1,"record":{"type":...}}`). JSON is
//! what the crate already uses for its metadata file, is readable in `cluster status` dumps,
//! and serde's tagged enums give a tested encoding without hand-written code; metadata
//! records are few and small, so its size does not matter.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, PartitionEpoch};

/// The envelope version written by [`encode`]; [`decode`] refuses others.
pub const RECORD_FORMAT_VERSION: u16 = 1;

pub use crate::metadata::cluster_state::Endpoint;

/// One partition as created: its replicas in assignment order and the shard slot it gets on
/// every broker (CLUSTER.md, "Thread-per-core placement").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewPartition {
    pub replicas: Vec<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub leader: Option<BrokerId>,
    pub slot: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBroker {
    pub broker_id: BrokerId,
    /// Random per process start: tells a restart from a retried registration.
    pub incarnation: Uuid,
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
}

/// Fence or unfence one registration of a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerFencing {
    pub broker_id: BrokerId,
    pub broker_epoch: BrokerEpoch,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateTopic {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<NewPartition>,
    /// Topic config overrides (Kafka property names).
    pub configs: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePartitions {
    pub topic_id: Uuid,
    /// The partition count the new partitions were numbered from.
    pub from_count: usize,
    pub partitions: Vec<NewPartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetConfig {
    pub topic_id: Uuid,
    pub name: String,
    /// `None` removes the override (back to the broker default).
    pub value: Option<String>,
}

/// A new leader and/or ISR for one partition, decided on `from_partition_epoch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic_id: Uuid,
    pub partition: u32,
    pub from_partition_epoch: PartitionEpoch,
    pub leader: Option<BrokerId>,
    pub isr: Vec<BrokerId>,
    pub leader_epoch: LeaderEpoch,
    pub partition_epoch: PartitionEpoch,
}

/// Producer ids `start..start + size` given to a broker (Kafka's ProducerIdsRecord).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlockAllocation {
    pub broker_id: BrokerId,
    pub broker_epoch: BrokerEpoch,
    /// Must equal the cluster's next unallocated id when applied.
    pub start: i64,
    pub size: i64,
}

/// Sets (`Some`) or removes (`None`) one dynamic broker config (IncrementalAlterConfigs on a
/// broker resource; Kafka's ConfigRecord of resource type BROKER).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetBrokerConfig {
    /// "" for the cluster-wide default, else the broker id.
    pub resource: String,
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    RegisterBroker(RegisterBroker),
    FenceBroker(BrokerFencing),
    UnfenceBroker(BrokerFencing),
    CreateTopic(CreateTopic),
    DeleteTopic { topic_id: Uuid },
    CreatePartitions(CreatePartitions),
    SetConfig(SetConfig),
    PartitionChange(PartitionChange),
    ProducerIdBlock(ProducerIdBlockAllocation),
    SetBrokerConfig(SetBrokerConfig),
}

#[derive(Serialize)]
struct EnvelopeRef<'a> {
    version: u16,
    record: &'a MetadataRecord,
}

#[derive(Deserialize)]
struct Envelope {
    version: u16,
    record: serde_json::Value,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordDecodeError {
    #[error("metadata record is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("metadata record format version {0} is not supported (this build reads {RECORD_FORMAT_VERSION})")]
    Version(u16),
}

/// The bytes of one record as the log stores it. (Plain data with string map keys: an
/// error here would be a bug in a serde derive, but it is passed on rather than hidden.)
pub fn encode(record: &MetadataRecord) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&EnvelopeRef {
        version: RECORD_FORMAT_VERSION,
        record,
    })
}

pub fn decode(bytes: &[u8]) -> Result<MetadataRecord, RecordDecodeError> {
    let envelope: Envelope = serde_json::from_slice(bytes)?;
    if envelope.version != RECORD_FORMAT_VERSION {
        return Err(RecordDecodeError::Version(envelope.version));
    }
    Ok(serde_json::from_value(envelope.record)?)
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;

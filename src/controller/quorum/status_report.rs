//! The cluster status one voter reports (`ringbroker cluster status`): plain values, sent
//! over the controller wire and printed by the command line.

use serde::{Deserialize, Serialize};

use crate::model::{BrokerId, MetadataOffset};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterStatus {
    pub id: BrokerId,
    pub address: String,
    /// The last log index the leader knows this voter holds (the leader only knows).
    pub log_end: Option<u64>,
    /// Entries behind the leader's log end.
    pub lag: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerStatus {
    pub id: BrokerId,
    pub epoch: u64,
    pub endpoint: Option<String>,
    pub rack: Option<String>,
    pub fenced: bool,
    /// The metadata offset the broker last reported applied (known to the active
    /// controller, from heartbeats; absent elsewhere).
    #[serde(default)]
    pub metadata_offset: Option<MetadataOffset>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterStatusReport {
    /// The voter that answered.
    pub node_id: BrokerId,
    pub leader: Option<BrokerId>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    /// The metadata offset this voter has applied.
    pub metadata_offset: Option<MetadataOffset>,
    pub voters: Vec<VoterStatus>,
    pub brokers: Vec<BrokerStatus>,
}

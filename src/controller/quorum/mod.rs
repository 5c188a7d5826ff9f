//! The metadata log on openraft: the seam described in `controller/mod.rs` made real.
//!
//! One Raft entry carries one [`MetadataBatch`], so a batch commits whole or not at all. Every
//! record of a committed batch gets the next [`MetadataOffset`] (Kafka numbers metadata
//! records, not batches), so offsets are the same on every node: each applies the same
//! entries in the same order. The files live in `<data-dir>/__cluster_metadata-0/`, Kafka's
//! directory name for the metadata log:
//! - `log`: framed entries ([`frame`]), fsynced before openraft hears they are stored;
//! - `quorum-state`: the vote, replaced atomically;
//! - `snapshot`: the last snapshot (its meta and the [`super::snapshot`] bytes).
//!
//! The pieces, one per file: [`log_store`] (openraft's log storage), [`state_machine`]
//! (applies entries to [`super::ClusterMetadata`]), [`wire`] and [`network`] (RPCs over TCP on the
//! CONTROLLER listener), [`server`] (answers them) and [`node`] (starts it all and offers
//! propose / committed metadata / leader).

pub mod active;
pub mod broker_session;
pub mod controller_link;
pub mod frame;
pub mod log_store;
mod lost_log;
pub mod network;
pub mod node;
pub mod server;
pub mod state_machine;
pub mod status;
pub mod status_report;
pub mod wire;

#[cfg(test)]
mod active_tests;
#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod failover_tests;
#[cfg(test)]
mod log_store_tests;
#[cfg(test)]
mod lost_log_tests;
#[cfg(test)]
mod state_machine_tests;
#[cfg(test)]
mod test_support;

use std::io::Cursor;

use serde::{Deserialize, Serialize};

use super::records::MetadataRecord;
use crate::model::{BrokerId, MetadataOffset};
use crate::runtime::raft_runtime::GlommioRaftRuntime;

pub use node::{NotLeader, ProposeError, QuorumConfig, QuorumError, QuorumNode, QuorumStatus};

/// Kafka's name for the metadata log's directory in a data dir.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

/// The records one proposal commits together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

/// What applying a batch returns: the offset of its first record (its others follow it),
/// and how many of its records changed nothing (decided on a state that no longer held).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchApplied {
    pub first_offset: Option<MetadataOffset>,
    pub skipped: usize,
}

openraft::declare_raft_types!(
    /// The Raft type configuration of the metadata log.
    pub MetadataRaft:
        D = MetadataBatch,
        R = BatchApplied,
        NodeId = BrokerId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<MetadataRaft>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = GlommioRaftRuntime,
);

pub type Raft = openraft::Raft<MetadataRaft>;
pub type LogId = openraft::LogId<BrokerId>;
pub type Entry = openraft::Entry<MetadataRaft>;
pub type StorageError = openraft::StorageError<BrokerId>;

//! The cluster controller, pure part: the metadata log's records, the [`ClusterMetadata`]
//! every broker builds by applying them, and the active controller's decisions (registration,
//! heartbeats and fencing, placement, leader election, producer-id blocks). No I/O, no clock:
//! inputs and the time come in as values, records to propose go out (CLUSTER.md, "The
//! controller"). The simulation in `sim_tests.rs` runs it against a model log.
//!
//! # The Raft library, and the seam
//! Checked with `cargo info` (2026-12): openraft 0.9.25 is the stable release and has the
//! `singlethreaded` feature (no `Send` bounds on the application types and futures); its
//! runtime is a trait (`AsyncRuntime`), so a glommio implementation can live in
//! `src/runtime/`. openraft 0.10 is still alpha (0.10.0-alpha.37, where the feature is
//! `single-threaded`). raft-rs 0.7.0 is a pure core (tick/step/ready, no runtime at all),
//! but its default protobuf codec is protobuf 2 (an advisory) and it leaves log storage,
//! snapshots and membership plumbing to us.
//!
//! Choice: **openraft 0.9 with `singlethreaded`**, driven from shard 0 — it brings log
//! replication, snapshots and membership changes already tested, and raft-rs's advantage
//! (running the consensus core inside our simulation) is not needed because the controller
//! is tested against a model log. The seam the rest of the controller sees is three things:
//! - `propose(batch: Vec<MetadataRecord>) -> Result<MetadataOffset, NotLeader>`: one Raft
//!   entry per batch, so a batch commits whole or not at all;
//! - the committed stream: `(MetadataOffset, MetadataRecord)` in log order, fed to
//!   [`ClusterMetadata::apply`] on every node (voters and observers alike);
//! - the current leader (`Option<NodeId>` plus its term): the node whose
//!   [`ActiveController`] decides; a new term creates a new `ActiveController` (which
//!   restarts every broker's session grace period).
//!
//! The seam is implemented in [`quorum`] (openraft's storage, state machine and network,
//! plus the active controller's loop and the broker's session); [`image`] builds the shards'
//! `metadata::MetadataImage` of the applied metadata.

pub mod active_controller;
pub mod alter_partition;
pub mod broker_lifecycle;
pub mod cluster_metadata;
pub mod delta;
pub mod election;
pub mod error;

pub mod image;
pub mod kraft_config;
pub mod local;
pub mod placement;
pub mod quorum;
pub mod records;
#[cfg(test)]
mod sim_tests;
pub mod snapshot;
pub mod topic_admin;
pub mod topic_changes;

pub use active_controller::{ActiveController, ControllerConfig};
pub use alter_partition::AlterPartitionRequest;
pub use broker_lifecycle::{BrokerRegistrationRequest, Heartbeat, HeartbeatReply};
pub use cluster_metadata::{
    BrokerRegistration, ClusterMetadata, MetadataSnapshot, PartitionState, TopicState,
};
pub use delta::MetadataDelta;
pub use error::ControllerError;

pub use records::MetadataRecord;
pub use topic_admin::CreateTopicRequest;

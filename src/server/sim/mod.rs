//! The real broker under the deterministic simulator ([`crate::runtime::sim`]): brokers of a
//! cluster, each on a simulated host, running the same services as `serve` (partition and
//! replica managers, group service, the Raft quorum and active controller, the Kafka
//! handlers behind real connections), driven by seeded faults, checked by invariants.
//! Issue 32 §3; the hand-kept model of `replication/cluster_sim` predates it.

pub mod broker;
pub mod client;
#[cfg(test)]
mod cluster;
#[cfg(test)]
mod group_tests;
pub mod invariants;
#[cfg(test)]
mod replication_tests;

//! Partition replication as Kafka does it (../shared/CLUSTER.md, "Replication"): the pure
//! state machines (the epoch cache, the leader's view of its replicas) and the follower's
//! connection to leaders. The partitions' roles live in `partition::replica_role`, the fetchers
//! and ISR changes in `shard::replica_manager`.

#[cfg(test)]
mod cluster_sim;
pub mod epoch_cache;
pub mod fetch_session_client;
pub mod leader_state;
pub mod replica_client;
pub mod replica_fetch;

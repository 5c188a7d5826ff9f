//! Partition replication as Kafka does it (../shared/CLUSTER.md, "Replication"): the pure
//! state machines (the epoch cache, the leader's view of its replicas) and the follower's
//! connection to leaders, and what a leader does with the controller's answer to an ISR
//! change. The partitions' roles live in `partition::replica_role`, the fetchers and ISR
//! changes in `partition::replica_manager`.

#[cfg(test)]
mod cluster_sim;
pub mod epoch_cache;
pub mod fetch_session_client;
pub mod isr_answer;
pub mod leader_state;
pub mod replica_client;
pub mod replica_fetch;

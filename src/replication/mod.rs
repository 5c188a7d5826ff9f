//! Partition replication as Kafka does it (../shared/CLUSTER.md, Replication): leaders stamp
//! their epoch into batches, followers fetch and truncate by epoch, never to the high watermark.
//!
//! - [`epoch_cache`]: the leader-epoch cache and its `leader-epoch-checkpoint` file, which
//!   OffsetForLeaderEpoch and fetch divergence are answered from
pub mod epoch_cache;

//! ringbroker: a Kafka-compatible streaming broker, thread-per-core on io_uring.
//!
//! - [`runtime`]: the only module that touches glommio (shards, mesh, timers, files)
//! - [`protocol`]: the Kafka wire formats (record batches for now)
//! - [`log`]: the partition log (segments, indexes, group commit, recovery)
//! - [`client`]: the project's own Kafka client; [`bench`]: the `ringbroker bench` load generator
//! - [`metrics`]: per-shard latency and request metrics, the Prometheus endpoint
//! - [`logging`]: the log subscriber (text or JSON); [`health`]: slow-fsync and low-disk warnings
//! - [`tune`]: `ringbroker tune`, checks and adjusts the Linux settings the broker depends on
//! - [`controller`]: the cluster controller's pure state machine (metadata records, election)
//! - [`cli`]: the admin and client commands (topic, group, produce, consume)
//! - [`replication`]: partition replication (epoch cache, leader state, follower connection)
pub mod alloc_guard;
pub mod bench;
pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod group;
pub mod health;
pub mod idempotence;
pub mod log;
pub mod logging;
pub mod metrics;
pub mod protocol;
pub mod replication;
pub mod runtime;
pub mod server;
pub mod shard;
pub mod tune;
pub mod util;

//! ringbroker: a Kafka-compatible streaming broker, thread-per-core on io_uring.
//! (docs/architecture.md walks through how these fit together.)
//!
//! - [`runtime`]: the only module that touches glommio (shards, mesh, timers, files, TCP)
//! - [`server`]: `ringbroker serve` (start-up, connections, one handler per Kafka API, stop)
//! - [`shard`]: one shard's partitions, metadata copy and routing of work to other shards
//! - [`protocol`]: the Kafka wire formats (framing, headers, record batches, old versions)
//! - [`log`]: the partition log (segments, indexes, group commit, recovery)
//! - [`idempotence`]: idempotent producers; [`group`]: the consumer-group coordinator
//! - [`controller`]: cluster mode's controller (pure decisions; `quorum` runs them on Raft)
//! - [`replication`]: partition replication (epoch cache, leader state, follower connection)
//! - [`metrics`]: per-shard latency and request metrics, the Prometheus endpoint
//! - [`config`], [`config_listing`]: broker and topic properties with Kafka's names
//! - [`logging`]: the log subscriber (text or JSON); [`health`]: slow-fsync and low-disk warnings
//! - [`client`]: the project's own Kafka client; [`bench`]: the `ringbroker bench` load generator
//! - [`cli`]: the admin and client commands (topic, group, cluster, produce, consume)
//! - [`tune`]: `ringbroker tune`, checks and adjusts the Linux settings the broker depends on
//! - [`util`]: small pieces not about Kafka; [`alloc_guard`]: the binary's allocator
pub mod alloc_guard;
pub mod bench;
pub mod cli;
pub mod client;
pub mod config;
pub mod config_listing;
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

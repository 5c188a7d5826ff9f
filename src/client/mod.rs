//! The project's own Kafka client: plain Kafka protocol over blocking sockets and threads, so
//! it works against any Kafka-compatible broker. Used by `ringbroker bench`.
//!
//! - [`cluster`]: bootstrap, ApiVersions negotiation ([`versions`]), metadata ([`metadata`]),
//!   one [`connection`] per broker (pipelined, correlation ids), admin calls
//! - [`admin`]: topics, configs and groups as an operator manages them (the CLI's calls)
//! - [`group_coordinator`]: FindCoordinator, committed offsets of a group
//! - [`group_member`]: a consumer group member (join, sync, heartbeat, leave, commit) using
//!   the [`assignor`] ("consumer" protocol, "range" assignment)
//! - [`producer`]: batching per partition ([`accumulator`]), [`compression`], acks, retries,
//!   idempotence; outcomes per record or per batch ([`delivery`]); keys pick partitions as
//!   Kafka's default partitioner does ([`partitioner`])
//! - [`consumer`]: assigned partitions, pipelined fetches, batch decoding
pub mod accumulator;
pub mod admin;
pub mod assignor;
pub mod cluster;
pub mod compression;
pub mod connection;
pub mod consumer;
pub mod delivery;
pub mod error;
pub mod group_coordinator;
pub mod group_member;
pub mod log_dirs;
pub mod metadata;
pub mod partitioner;
pub mod produce_request;
pub mod producer;
pub mod versions;

pub use cluster::{ClientConfig, Cluster};
pub use compression::Compression;
pub use consumer::{Consumer, ConsumerConfig, ConsumerRecord, OffsetSpec};
pub use delivery::{Delivered, DeliveryCallback, DeliveryHandler, DeliveryResult, RecordMetadata};
pub use error::{ClientError, ClientResult, KafkaCode};
pub use producer::{Producer, ProducerConfig, ProducerRecord};

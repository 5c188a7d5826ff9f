//! The admin and client commands of `ringbroker` (topic, group, produce, consume): what an
//! operator runs against any Kafka-compatible broker, the way rpk serves Redpanda users.
//!
//! - [`connect`]: the `--bootstrap`/`--timeout` options every command shares
//! - [`explain`]: errors for humans: Kafka codes by name with a one-line explanation
//! - [`table`]: `--format table|json`: aligned tables for people, JSON for scripts
//! - [`topic`]: `ringbroker topic create|list|describe|delete|alter-config|add-partitions`
//! - [`group`]: `ringbroker group list|describe|delete|reset-offsets` (lag, offsets)
pub mod connect;
pub mod explain;
pub mod group;
pub mod table;
pub mod topic;

//! The admin and client commands of `ringbroker` (topic, group, produce, consume): what an
//! operator runs against any Kafka-compatible broker, the way rpk serves Redpanda users.
//!
//! - [`cluster`]: `ringbroker cluster status`: the metadata quorum and the brokers
//! - [`connect`]: the `--bootstrap`/`--timeout` options every command shares
//! - [`explain`]: errors for humans: Kafka codes by name with a one-line explanation
//! - [`table`]: `--format table|json`: aligned tables for people, JSON for scripts
//! - [`topic`]: `ringbroker topic create|list|describe|delete|alter-config|add-partitions`
//! - [`topic_describe`]: `ringbroker topic describe`, with kafka-topics.sh's filters
//!   (under-replicated, under/at min ISR, unavailable partitions)
//! - [`group`]: `ringbroker group list|describe|delete|reset-offsets` (lag, offsets)
//! - [`produce`]: `ringbroker produce`: stdin or a file, one record per line
//! - [`consume`]: `ringbroker consume`: print records (as [`record_format`] says), optionally
//!   as a consumer group member
//! - [`topic_exists`]: the "does the topic exist" check of produce and consume
pub mod cluster;
pub mod connect;
pub mod consume;
pub mod explain;
pub mod group;
pub mod group_reset;
pub mod produce;
pub mod record_format;
pub mod table;
pub mod topic;
pub mod topic_describe;
pub mod topic_exists;

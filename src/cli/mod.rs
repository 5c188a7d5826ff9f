//! The admin and client commands of `ringbroker` (topic, group, produce, consume): what an
//! operator runs against any Kafka-compatible broker, the way rpk serves Redpanda users.
//!
//! - [`connect`]: the `--bootstrap`/`--timeout` options every command shares
//! - [`explain`]: errors for humans: Kafka codes by name with a one-line explanation
//! - [`produce`]: `ringbroker produce`: stdin or a file, one record per line
//! - [`consume`]: `ringbroker consume`: print records (as [`record_format`] says), optionally
//!   as a consumer group member
//! - [`topic_exists`]: the "does the topic exist" check of produce and consume
pub mod connect;
pub mod consume;
pub mod explain;
pub mod produce;
pub mod record_format;
pub mod topic_exists;

//! The admin and client commands of `ringbroker` (topic, group, produce, consume): what an
//! operator runs against any Kafka-compatible broker, the way rpk serves Redpanda users.
//!
//! - [`connect`]: the `--bootstrap`/`--timeout` options every command shares
//! - [`explain`]: errors for humans: Kafka codes by name with a one-line explanation
pub mod connect;
pub mod explain;

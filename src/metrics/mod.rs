//! Metrics: per-shard registries of stage latencies and request counters, partition and
//! consumer-group gauges gathered over the mesh, and the HTTP endpoint that serves them in
//! the Prometheus text format and as a JSON latency breakdown.
//!
//! - [`registry`]: the per-shard (thread-local) registry and the recording functions
//! - [`latency`]: an HDR histogram of microseconds with its exact sum
//! - [`snapshot`]: what a shard reports when asked
//! - [`prometheus_text`], [`stages_json`]: the two renderings
//! - [`http`], [`endpoint`]: the minimal HTTP server on shard 0

pub mod endpoint;
pub mod http;
pub mod latency;
pub mod prometheus_text;
pub mod registry;
mod replication_text;
pub mod snapshot;
pub mod stages_json;

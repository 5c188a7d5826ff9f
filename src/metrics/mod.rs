//! Metrics: per-shard registries of stage latencies and request counters, partition and
//! consumer-group gauges gathered over the mesh, and their renderings in the Prometheus text
//! format and as a JSON latency breakdown. A leaf: it imports nothing stateful; the HTTP
//! endpoint that serves the renderings is `server::metrics_endpoint`.
//!
//! - [`registry`]: the per-shard (thread-local) registry and the recording functions
//! - [`latency`]: an HDR histogram of microseconds with its exact sum
//! - [`snapshot`]: what a shard reports when asked
//! - [`process_cpu`]: the process's CPU time by thread kind (shard, io_uring worker, other)
//! - [`prometheus_text`], [`stages_json`]: the two renderings; [`text`]: the text format's writer

pub mod latency;
pub mod process_cpu;
pub mod prometheus_text;
pub mod registry;
mod replication_text;
pub mod snapshot;
pub mod stages_json;
pub mod text;

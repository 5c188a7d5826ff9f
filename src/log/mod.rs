//! The partition log: Kafka's on-disk layout, written through io_uring.
//!
//! A partition directory (`<topic>-<partition>`) holds segments named by their base offset
//! (20 digits): `.log` (record batches exactly as produced, offsets assigned), `.index`
//! (sparse offset → position) and `.timeindex` (timestamp → offset), plus a checkpoint and,
//! after a clean shutdown, a marker.
//!
//! - [`partition_log`]: the log itself (open, flush, checkpoint, close); its other roles in
//!   `append.rs` (staging producers' and followers' batches), `stage.rs` (validate and assign
//!   offsets), [`read`] (fetch and timestamp
//!   lookups), `truncate.rs` and `retention.rs`
//! - [`commit`]: group commit, the one task that writes staged appends
//! - [`recovery`]: loading and repairing after a crash
//! - [`segment`], [`offset_index`], [`time_index`], [`checkpoint`]: the on-disk pieces
//! - [`policy`]: roll, retention and flush decisions as pure functions
//! - [`record_check`]: looking inside batches when a topic asks (keys of compacted topics,
//!   timestamp bounds, recompression to `compression.type`)
//! - [`scan`]: walking batch headers in a buffer or a file
//! - [`segment_read`]: reading whole batches out of one segment (the fetch path)
//! - [`tail_cache`]: the last written bytes of each log in memory, under a per-shard budget
mod append;
pub mod checkpoint;
mod commit;
pub mod config;
pub mod dump;
pub mod error;
mod log_state;
pub mod offset_index;
pub mod offsets_before;
pub mod partition_log;
pub mod policy;
pub mod read;
pub mod record_check;
pub mod recovery;
mod retention;
pub mod scan;
pub mod segment;
pub mod segment_delete;
pub mod segment_read;
mod stage;
pub mod tail_cache;
pub mod time_index;
mod truncate;

pub use config::LogConfig;
pub use error::LogError;
pub use partition_log::{AppendInfo, AppendOptions, Log, LogOffsets, LogStats, StagedAppend};
pub use read::ReadResult;
pub use recovery::RecoveryReport;
pub use retention::RetentionOutcome;

/// The directory name Kafka gives a partition: `<topic>-<partition>`.
pub fn partition_dir_name(topic: &str, partition: i32) -> String {
    format!("{topic}-{partition}")
}

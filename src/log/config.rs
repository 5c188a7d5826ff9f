//! Per-log (topic-level) settings, named and defaulted as Kafka's topic configs are.

use crate::protocol::record_batch::TimestampType;

/// Settings of one partition log. Field names follow Kafka's topic config names
/// (`segment.bytes` → `segment_bytes`); `-1` means "no limit" where Kafka says so.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment once it is this old (ms since its first append).
    pub segment_ms: i64,
    /// `retention.ms`: delete segments whose newest record is older than this; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is larger; -1 means no limit.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes of log between two sparse index entries.
    pub index_interval_bytes: u32,
    /// `flush.messages`: fdatasync after this many records; `u64::MAX` leaves it to the OS
    /// (Kafka's default, Long.MAX_VALUE).
    pub flush_messages: u64,
    /// `flush.ms`: fdatasync when the oldest unflushed write is this old; `i64::MAX` = never.
    pub flush_ms: i64,
    /// `max.message.bytes`: largest batch accepted, bytes (Kafka default 1048588).
    pub max_message_bytes: usize,
    /// `message.timestamp.type`: CreateTime keeps producer timestamps; LogAppendTime stamps
    /// batches with the broker's clock on append.
    pub message_timestamp_type: TimestampType,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            flush_messages: u64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
        }
    }
}

impl LogConfig {
    /// Segment positions are u32 in the index files (as in Kafka), so a segment can never be
    /// larger than this.
    pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

    /// The segment size actually used: `segment_bytes` clamped to what the index can address.
    pub fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.clamp(1, Self::MAX_SEGMENT_BYTES)
    }
}

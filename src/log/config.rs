//! Per-log (topic-level) settings, named and defaulted as Kafka's topic configs are. Which
//! names exist, how their values are checked and shown, and how they land here is the
//! property table in `crate::config::topic_properties`.

use crate::protocol::record_batch::{Compression, TimestampType};
use crate::runtime::FileIo;

/// `compression.type`: the codec the log stores batches in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicCompression {
    /// Keep the producer's codec (Kafka's default): no broker-side work.
    Producer,
    /// Store with this codec (`Compression::None` is `uncompressed`); other batches are
    /// recompressed on append, as Kafka's LogValidator does.
    Codec(Compression),
}

impl TopicCompression {
    /// The codec a batch compressed with `source` is stored with.
    pub fn target(self, source: Compression) -> Compression {
        match self {
            TopicCompression::Producer => source,
            TopicCompression::Codec(c) => c,
        }
    }
}

/// `cleanup.policy`: a list of `delete` and `compact` (either, both, or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    /// Retention (`retention.ms`, `retention.bytes`) deletes old segments.
    pub delete: bool,
    /// The topic is compacted: every record must have a key (the cleaner itself comes later).
    pub compact: bool,
}

/// Settings of one partition log. Field names follow Kafka's topic config names
/// (`segment.bytes` → `segment_bytes`); `-1` means "no limit" where Kafka says so.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll the active segment once it is this old (ms since its first append).
    pub segment_ms: i64,
    /// `segment.jitter.ms`: up to this much is taken off `segment.ms`, differently for each
    /// segment, so that partitions created together do not all roll at the same moment.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: a segment whose offset index (8-byte entries) or time index
    /// (12-byte entries) would outgrow this is rolled, as Kafka rolls on a full index.
    pub segment_index_bytes: u32,
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
    /// `max.message.bytes`: largest batch accepted, bytes (Kafka default 1048588), checked
    /// on what is stored (after recompression).
    pub max_message_bytes: usize,
    /// `message.timestamp.type`: CreateTime keeps producer timestamps; LogAppendTime stamps
    /// batches with the broker's clock on append.
    pub message_timestamp_type: TimestampType,
    /// `message.timestamp.before.max.ms`: a CreateTime record older than now minus this is
    /// INVALID_TIMESTAMP; `i64::MAX` = no bound.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: likewise for records newer than now plus this.
    pub message_timestamp_after_max_ms: i64,
    /// `message.timestamp.difference.max.ms` (deprecated since Kafka 3.6): the bound on both
    /// sides where the two above are left at their default.
    pub message_timestamp_difference_max_ms: i64,
    /// `compression.type`
    pub compression: TopicCompression,
    /// `cleanup.policy`
    pub cleanup_policy: CleanupPolicy,
    /// `file.delete.delay.ms`: how long a segment deleted by retention or DeleteRecords lives
    /// on as `<name>.deleted` before its files are removed.
    pub file_delete_delay_ms: i64,
    /// `preallocate`: a new segment's blocks are allocated up front (`segment.bytes`).
    pub preallocate: bool,
    /// `min.insync.replicas`: stored for replication (one node: the ISR is always 1).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`: stored for leader election (cluster phase).
    pub unclean_leader_election_enable: bool,
    /// `message.downconversion.enable`: whether Fetch v0/v1 fetchers get batches converted
    /// to the legacy message format.
    pub message_downconversion_enable: bool,
    /// `ringbroker.log.io` (broker-wide, not a topic config): how segment files are written.
    pub io: FileIo,
    /// `ringbroker.log.write.behind.bytes` (broker-wide): once a buffered segment has this
    /// many bytes written since its last write-back request, the committer asks the kernel to
    /// start writing them (`sync_file_range`, no wait); 0 never asks (the kernel's own
    /// write-back and fdatasync only). Durability is unchanged either way: only fdatasync
    /// makes data durable.
    pub write_behind_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10 << 20,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            flush_messages: u64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
            message_timestamp_difference_max_ms: i64::MAX,
            compression: TopicCompression::Producer,
            cleanup_policy: CleanupPolicy {
                delete: true,
                compact: false,
            },
            file_delete_delay_ms: 60_000,
            preallocate: false,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            message_downconversion_enable: true,
            io: FileIo::Buffered,
            write_behind_bytes: 8 << 20,
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

    /// How far before and after the broker's clock a CreateTime record's timestamp may be:
    /// `before.max.ms` / `after.max.ms`, each falling back to the deprecated
    /// `difference.max.ms` while left at its default (Kafka's `LogConfig` does the same).
    pub fn timestamp_bounds(&self) -> (i64, i64) {
        let or_difference = |v: i64| {
            if v == i64::MAX {
                self.message_timestamp_difference_max_ms
            } else {
                v
            }
        };
        (
            or_difference(self.message_timestamp_before_max_ms),
            or_difference(self.message_timestamp_after_max_ms),
        )
    }

    /// Whether appends must look inside batches (record keys or timestamps) or rewrite them
    /// (another codec). False with Kafka's defaults: batches are then stored as sent.
    pub fn inspects_records(&self) -> bool {
        let (before, after) = self.timestamp_bounds();
        let timestamps = self.message_timestamp_type == TimestampType::CreateTime
            && (before != i64::MAX || after != i64::MAX);
        timestamps || self.cleanup_policy.compact || self.compression != TopicCompression::Producer
    }

    /// Entries the offset index (8 bytes each) and the time index (12 bytes each) of a
    /// segment may hold under `segment.index.bytes`; a full one rolls the segment.
    pub fn max_index_entries(&self) -> (usize, usize) {
        let bytes = self.segment_index_bytes as usize;
        ((bytes / 8).max(1), (bytes / 12).max(1))
    }
}

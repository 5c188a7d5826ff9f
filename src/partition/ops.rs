//! The operations a partition's owning shard runs on it (produce, fetch, offsets, deletion,
//! description) and their results. They cross the mesh, so everything here is `Send`.

use bytes::Bytes;

use super::error::PartitionError;
use super::offsets_reader::OffsetsReader;
use super::summary::PartitionSummary;
use crate::log::AppendInfo;
use crate::protocol::ResponseError;

/// Who fetches: a consumer reads below the high watermark, a follower to the log end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchReader {
    /// Replica id -1; `current_leader_epoch` -1 is not checked (Kafka's rule).
    Consumer { current_leader_epoch: i32 },
    /// A follower broker: its fetch offset is its log end, reported to the leader.
    Replica {
        id: i32,
        current_leader_epoch: i32,
        last_fetched_epoch: i32,
        /// The follower's log start offset (-1: not sent).
        log_start_offset: i64,
    },
}

/// One partition's ListOffsets answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetAnswer {
    pub offset: i64,
    pub timestamp: i64,
    /// The leader epoch of the batch at `offset` (Kafka's answer to EARLIEST and timestamp
    /// lookups; -1 when unknown); `None`: the current leader epoch (LATEST, a single node).
    pub leader_epoch: Option<i32>,
}

/// One partition operation, executed by the partition's owning shard.
#[derive(Debug, Clone)]
pub enum PartitionOp {
    Produce {
        topic: String,
        partition: i32,
        records: Bytes,
        durable: bool,
        now_ms: i64,
        /// acks=all waits for the in-sync replicas (cluster mode), at most `timeout_ms`.
        acks_all: bool,
        timeout_ms: u64,
    },
    Fetch {
        topic: String,
        partition: i32,
        offset: i64,
        /// The request's `partition_max_bytes`.
        max_bytes: usize,
        /// The log end an earlier read of the same long poll saw: if the log still ends
        /// there, nothing is read (empty records, that end as high watermark) and the caller
        /// keeps what it read before.
        known_end: Option<i64>,
        reader: FetchReader,
    },
    /// timestamp: -1 latest, -2 earliest, -3 max timestamp, -4 earliest local, -5 latest
    /// tiered, else by timestamp. `max_num_offsets` asks for ListOffsets v0's answer instead
    /// ([`PartitionResult::LegacyOffsets`]).
    ListOffsets {
        topic: String,
        partition: i32,
        timestamp: i64,
        max_num_offsets: Option<i32>,
        reader: OffsetsReader,
    },
    DeleteRecords {
        topic: String,
        partition: i32,
        offset: i64,
        /// How long a leader waits for its followers' log starts to reach the offset (the
        /// request's `timeout_ms`).
        timeout_ms: i32,
    },
    /// Read a partition's offsets and size (and, with `producers`, its active idempotent
    /// producers): OffsetForLeaderEpoch, DescribeLogDirs and DescribeProducers.
    Describe {
        topic: String,
        partition: i32,
        producers: bool,
    },
}

impl PartitionOp {
    /// A fetch by a follower broker (not a consumer).
    pub fn is_replica_fetch(&self) -> bool {
        matches!(
            self,
            PartitionOp::Fetch {
                reader: FetchReader::Replica { .. },
                ..
            }
        )
    }

    pub fn topic_partition(&self) -> (&str, i32) {
        match self {
            PartitionOp::Produce {
                topic, partition, ..
            }
            | PartitionOp::Fetch {
                topic, partition, ..
            }
            | PartitionOp::ListOffsets {
                topic, partition, ..
            }
            | PartitionOp::DeleteRecords {
                topic, partition, ..
            }
            | PartitionOp::Describe {
                topic, partition, ..
            } => (topic, *partition),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FetchedData {
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// Where this reader's view ends (the HW for a consumer, the log end for a follower):
    /// a long poll waits for it to move.
    pub read_end: i64,
    /// A follower's log diverges from the leader's: (epoch, end offset) to truncate to.
    pub diverging: Option<(i32, i64)>,
}

/// A produce's outcome as the response carries it: the handlers (`server/`) still take bare
/// offsets, so the log's [`AppendInfo`] is unwrapped here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducedOffsets {
    pub base_offset: i64,
    /// The time stamped on the batches for LogAppendTime logs, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

impl From<AppendInfo> for ProducedOffsets {
    fn from(info: AppendInfo) -> Self {
        ProducedOffsets {
            base_offset: info.base_offset.0,
            log_append_time_ms: info.log_append_time_ms,
            log_start_offset: info.log_start_offset.0,
        }
    }
}

#[derive(Debug, Clone)]
pub enum PartitionResult {
    Produce(Result<ProducedOffsets, PartitionError>),
    Fetch(Result<FetchedData, PartitionError>),
    /// (offset, timestamp); offset -1 when no record matches.
    ListOffsets(Result<OffsetAnswer, PartitionError>),
    /// ListOffsets v0: offsets, highest first.
    LegacyOffsets(Result<Vec<i64>, PartitionError>),
    DeleteRecords(Result<i64, PartitionError>),
    Describe(Result<PartitionSummary, PartitionError>),
}

/// The result `op` answers with when it fails with `code`.
pub fn error_result(op: &PartitionOp, code: i16, message: String) -> PartitionResult {
    let err = PartitionError::new(code, message);
    match op {
        PartitionOp::Produce { .. } => PartitionResult::Produce(Err(err)),
        PartitionOp::Fetch { .. } => PartitionResult::Fetch(Err(err)),
        PartitionOp::ListOffsets {
            max_num_offsets: Some(_),
            ..
        } => PartitionResult::LegacyOffsets(Err(err)),
        PartitionOp::ListOffsets { .. } => PartitionResult::ListOffsets(Err(err)),
        PartitionOp::DeleteRecords { .. } => PartitionResult::DeleteRecords(Err(err)),
        PartitionOp::Describe { .. } => PartitionResult::Describe(Err(err)),
    }
}

pub fn unknown_partition_result(op: &PartitionOp) -> PartitionResult {
    let (t, p) = op.topic_partition();
    error_result(
        op,
        ResponseError::UnknownTopicOrPartition.code(),
        format!("{t}-{p} does not exist"),
    )
}

pub fn unavailable_result(op: &PartitionOp) -> PartitionResult {
    let (t, p) = op.topic_partition();
    error_result(
        op,
        ResponseError::NotLeaderOrFollower.code(),
        format!("the shard owning {t}-{p} did not answer"),
    )
}

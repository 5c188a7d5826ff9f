//! What shards say to each other over the channel mesh. Everything here is `Send`: payloads are
//! `Bytes` and `Arc`s, never a shard's own `Rc` state.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::idempotence::producer_ids::ProducerIdError;
use crate::log::AppendInfo;
use crate::metadata::StoredMetadata;
use crate::model::ProducerIdBlock;
use crate::partition::error::PartitionError;
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::summary::PartitionSummary;

/// A message on the mesh: a request with an id, or the reply to one.
pub enum MeshMessage {
    Request {
        id: u64,
        from: usize,
        request: ShardRequest,
    },
    Reply {
        id: u64,
        reply: ShardReply,
    },
}

/// A request to another shard, by the service on that shard that answers it.
pub enum ShardRequest {
    /// For the partitions the shard owns.
    Partitions(PartitionRequest),
    /// For the shard's metadata copy and replica roles (shard 0 also writes the metadata).
    Metadata(MetadataRequest),
    /// A consumer-group call for the coordinator on this shard.
    Group(crate::group::api::Call),
    /// To shard 0: reserve (durably) a block of producer ids for the asking shard.
    AllocateProducerIdBlock,
    /// This shard's metrics report (a scrape of the metrics endpoint).
    Metrics,
}

/// Work for the partitions a shard owns.
pub enum PartitionRequest {
    /// Operations on partitions this shard owns, in one round trip. With `fetch_budget`, the
    /// operations are the fetches of one Fetch request: read in order against that many
    /// response bytes (see `shard::fetch_budget`); without, they run concurrently.
    Ops {
        ops: Vec<PartitionOp>,
        fetch_budget: Option<usize>,
    },
    /// Resolve once any of these partitions has data past the offset, or after the timeout.
    WaitForData {
        partitions: Vec<(String, i32, i64)>,
        timeout_ms: u64,
        /// Wait for the log end (a follower) rather than the high watermark.
        log_end: bool,
    },
    /// Partitions that went offline on the sending shard (see `shard::offline`).
    Offline(Vec<OfflineNotice>),
}

/// Metadata for a shard to adopt, or (to shard 0) a change to make.
pub enum MetadataRequest {
    /// New metadata from shard 0: adopt it, open logs of new partitions, drop deleted ones.
    Apply(Arc<StoredMetadata>),
    /// A metadata change, sent to shard 0 (the only writer).
    Admin(AdminOp),
    /// Cluster mode: lead or follow as this metadata says, before it is published.
    ApplyRoles(Arc<crate::controller::published::ClusterSummary>),
}

pub enum ShardReply {
    Partitions(Vec<PartitionResult>),
    Applied,
    Admin(Result<Arc<StoredMetadata>, AdminError>),
    DataAvailable(bool),
    /// The coordinator's reply, or a whole-request error code.
    Group(Result<crate::group::api::Reply, i16>),
    ProducerIdBlock(Result<ProducerIdBlock, ProducerIdError>),
    /// Boxed: a report holds histograms and would make every mesh message large.
    Metrics(Box<crate::metrics::snapshot::ShardMetrics>),
}

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

#[derive(Debug, Clone)]
pub enum PartitionResult {
    Produce(Result<AppendInfo, PartitionError>),
    Fetch(Result<FetchedData, PartitionError>),
    /// (offset, timestamp); offset -1 when no record matches.
    ListOffsets(Result<OffsetAnswer, PartitionError>),
    /// ListOffsets v0: offsets, highest first.
    LegacyOffsets(Result<Vec<i64>, PartitionError>),
    DeleteRecords(Result<i64, PartitionError>),
    Describe(Result<PartitionSummary, PartitionError>),
}

#[derive(Debug, Clone)]
pub enum AdminOp {
    CreateTopic {
        name: String,
        partitions: i32,
        /// -1: the default. A single node has already refused anything but 1.
        replication_factor: i32,
        /// Replicas (broker ids) per partition, when the client chose them.
        assignment: Option<Vec<Vec<i32>>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
        /// Replicas (broker ids) per new partition, when the client chose them.
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    },
    SetTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    /// Replaces the dynamic broker configs of one broker resource ("" or a broker id).
    SetBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    pub code: i16,
    pub message: String,
}

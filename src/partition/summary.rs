//! A partition described: offsets, size, producers and leader epochs (DescribeProducers,
//! OffsetForLeaderEpoch, DescribeLogDirs and the metrics read it).

/// A partition as a Describe operation on it reads it.
#[derive(Debug, Clone, Default)]
pub struct PartitionSummary {
    pub log_start_offset: i64,
    /// The end of what is written (ListOffsets' latest offset).
    pub end_offset: i64,
    pub size_bytes: u64,
    /// Empty unless asked for.
    pub producers: Vec<ActiveProducer>,
    /// What OffsetForLeaderEpoch answers from.
    pub epochs: EpochView,
}

/// A partition's leader epochs as OffsetForLeaderEpoch sees them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EpochView {
    /// A single node: one epoch (0), from the log start.
    #[default]
    Alone,
    /// Led here at `epoch`, with the epoch cache.
    Leader {
        epoch: i32,
        cache: crate::replication::epoch_cache::LeaderEpochCache,
    },
    /// Followed here: only the leader answers (CLUSTER.md).
    Follower,
}

/// An idempotent producer with written batches on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_timestamp: i64,
}

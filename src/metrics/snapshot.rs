//! What one shard reports when asked for its metrics (sent over the mesh, so `Send`).

use super::registry::Registry;
use crate::runtime::stall::StallStats;
use crate::util::memory_budget::MemoryBudgetStats;

/// One shard's metrics at one moment.
#[derive(Debug, Clone)]
pub struct ShardMetrics {
    pub shard: usize,
    pub registry: Registry,
    /// The partitions this shard owns.
    pub partitions: Vec<PartitionStats>,
    /// Committed offsets of the groups whose coordinator runs on this shard.
    pub group_offsets: Vec<GroupOffset>,
    /// The shard's produce memory budget (`ringbroker.produce.memory.max.bytes`).
    pub produce_memory: MemoryBudgetStats,
    /// The shard thread's longest poll and how many passed the stall threshold.
    pub stalls: StallStats,
    /// Partitions this shard owns but cannot serve (their log failed).
    pub offline_partitions: usize,
    /// The shard's tail cache (recently written log bytes in memory).
    pub tail_cache: ShardTailCache,
    /// Incremental fetch sessions cached on the shard (consumers' and followers').
    pub fetch_sessions: usize,
}

/// Offsets and sizes of one partition log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionStats {
    pub topic: String,
    pub partition: i32,
    pub log_start_offset: i64,
    /// One past the last offset consumers may read (what group lag is measured against).
    pub high_watermark: i64,
    /// The next offset to assign (staged appends included).
    pub log_end_offset: i64,
    pub size_bytes: u64,
    pub segments: usize,
    /// Group-commit flights and fdatasync calls of this log since it was opened.
    pub flights: u64,
    pub fsyncs: u64,
    /// Cluster mode: the partition's replication as this broker sees it.
    pub replication: Option<ReplicationStats>,
}

/// One partition's replication, from this broker's side.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicationStats {
    pub leader: bool,
    /// Leaders only: in-sync replicas, replicas, and whether the ISR is below
    /// `min.insync.replicas`.
    pub isr_size: usize,
    pub replicas: usize,
    pub under_min_isr: bool,
    /// Leaders only: per follower, (broker id, offsets behind the leader's end, ms since
    /// it was last caught up).
    pub followers: Vec<(i32, i64, i64)>,
    /// Bytes appended from the leader (as follower) and read for followers (as leader).
    pub fetched_bytes: u64,
    pub served_bytes: u64,
}

/// A consumer group's committed offset for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub committed_offset: i64,
}

/// Lag of one group on one partition: high watermark − committed offset (never negative).
/// `None` when the partition is unknown to every shard (a deleted topic).
pub fn group_lag(offset: &GroupOffset, shards: &[ShardMetrics]) -> Option<i64> {
    shards
        .iter()
        .flat_map(|s| &s.partitions)
        .find(|p| p.topic == offset.topic && p.partition == offset.partition)
        .map(|p| (p.high_watermark - offset.committed_offset).max(0))
}

/// What this shard's tail caches hold and served, for metrics (filled by `log::tail_cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardTailCache {
    pub bytes: usize,
    pub budget: usize,
    pub stats: TailCacheStats,
}

/// Hits and misses of one log's cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TailCacheStats {
    pub hits: u64,
    pub misses: u64,
    pub hit_bytes: u64,
}

//! A shard's side of the metrics: its own report (registry, partitions, committed offsets),
//! gathering every shard's report over the mesh, and counting partition errors.

use std::rc::Rc;
use std::time::Duration;

use super::messages::{ShardReply, ShardRequest};
use super::Shard;
use crate::metrics::snapshot::{GroupOffset, PartitionStats, ShardMetrics};
use crate::metrics::{self};
use crate::partition::ops::PartitionResult;
use crate::protocol::messages::ApiKey;
use crate::runtime;

/// How long a scrape waits for another shard's report (a busy or stopping shard is left out
/// rather than holding the scrape).
const SHARD_REPORT_TIMEOUT: Duration = Duration::from_secs(2);

impl Shard {
    /// This shard's metrics now.
    pub fn local_metrics(&self) -> ShardMetrics {
        let mut partitions: Vec<PartitionStats> = self
            .partitions
            .all()
            .iter()
            .map(|p| {
                let offsets = p.log.offsets();
                let stats = p.log.stats();
                PartitionStats {
                    topic: p.topic.clone(),
                    partition: p.index,
                    log_start_offset: offsets.log_start_offset,
                    high_watermark: p.high_watermark(),
                    log_end_offset: offsets.log_end_offset,
                    size_bytes: offsets.size_bytes,
                    segments: offsets.segments,
                    flights: stats.flights,
                    fsyncs: stats.fsyncs,
                    replication: p.replication_stats(runtime::now_ms()),
                }
            })
            .collect();
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let mut group_offsets: Vec<GroupOffset> = self
            .groups
            .committed_offsets()
            .into_iter()
            .map(|(group, topic, partition, committed_offset)| GroupOffset {
                group,
                topic,
                partition,
                committed_offset,
            })
            .collect();
        group_offsets.sort_by(|a, b| {
            (&a.group, &a.topic, a.partition).cmp(&(&b.group, &b.topic, b.partition))
        });
        ShardMetrics {
            shard: self.id,
            registry: metrics::registry::snapshot(),
            partitions,
            group_offsets,
            produce_memory: self.produce_memory.stats(),
            stalls: runtime::stall::stats(),
            offline_partitions: self.partitions.offline_count(),
            tail_cache: crate::log::tail_cache::shard_tail_cache(),
            fetch_sessions: self.fetch_sessions.borrow().len(),
        }
    }

    /// Every shard's metrics, in shard order; shards that do not answer in time are missing.
    pub async fn collect_metrics(self: &Rc<Self>) -> Vec<ShardMetrics> {
        let mut tasks = Vec::new();
        for to in (0..self.count).filter(|&to| to != self.id) {
            let shard = Rc::clone(self);
            tasks.push(runtime::spawn(async move {
                let reply = async { shard.request(to, ShardRequest::Metrics).await };
                let timeout = async {
                    runtime::sleep(SHARD_REPORT_TIMEOUT).await;
                    None
                };
                match futures_lite::future::or(reply, timeout).await {
                    Some(ShardReply::Metrics(report)) => Some(*report),
                    _ => None,
                }
            }));
        }
        let mut reports = vec![self.local_metrics()];
        for t in tasks {
            reports.extend(t.await);
        }
        reports.sort_by_key(|r| r.shard);
        reports
    }
}

/// Counts partition results that carry an error code, under the API they belong to.
pub(super) fn count_partition_errors(results: &[PartitionResult]) {
    for r in results {
        let (api, code) = match r {
            PartitionResult::Produce(Err(e)) => (ApiKey::Produce, e.code),
            PartitionResult::Fetch(Err(e)) => (ApiKey::Fetch, e.code),
            PartitionResult::ListOffsets(Err(e)) => (ApiKey::ListOffsets, e.code),
            PartitionResult::LegacyOffsets(Err(e)) => (ApiKey::ListOffsets, e.code),
            PartitionResult::DeleteRecords(Err(e)) => (ApiKey::DeleteRecords, e.code),
            _ => continue,
        };
        metrics::registry::record_partition_error(api, code);
    }
}

//! Partition operations on the partitions of this shard: produce (with acks=all waiting for
//! the in-sync replicas in cluster mode), fetch (alone, or the fetches of one request in
//! order against its byte budget, [`crate::partition::fetch_budget`], so that a partition past the
//! budget is not read at all), offsets, deletion, description; and long polls waiting for
//! data.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::PartitionManager;
use crate::log::{AppendInfo, LogError};
use crate::metrics::registry::{self as metrics, Stage};
use crate::model::BrokerId;
use crate::partition::error::{log_error, produce_error, PartitionError};
use crate::partition::fetch_budget::{FetchBudget, ReadLimit};
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::ops::{
    FetchReader, FetchedData, OffsetAnswer, PartitionOp, PartitionResult, ProducedOffsets,
};
use crate::partition::{AppendWaker, Partition};
use crate::runtime;
use crate::util::shutdown::ShutdownSignal;

impl PartitionManager {
    /// Runs `op` on its partition of this shard (unknown or offline ones are answered so).
    /// The caller takes a partition whose log failed on the way offline.
    pub async fn execute(&self, op: PartitionOp) -> PartitionResult {
        match self.online_for(&op) {
            Ok(p) => self.execute_on(&p, op).await,
            Err(result) => result,
        }
    }

    async fn execute_on(&self, p: &Rc<Partition>, op: PartitionOp) -> PartitionResult {
        let p = Rc::clone(p);
        match op {
            PartitionOp::Produce {
                records,
                durable,
                now_ms,
                acks_all,
                timeout_ms,
                ..
            } => PartitionResult::Produce(
                self.produce_on(&p, &records, durable, now_ms, acks_all, timeout_ms)
                    .await
                    .map(ProducedOffsets::from),
            ),
            PartitionOp::Fetch {
                offset,
                max_bytes,
                known_end,
                reader,
                ..
            } => {
                let limit = ReadLimit {
                    max_bytes,
                    whole_first: true,
                };
                PartitionResult::Fetch(
                    self.fetch_from(&p, offset, Some(limit), known_end, reader)
                        .await,
                )
            }
            PartitionOp::ListOffsets {
                timestamp,
                max_num_offsets,
                reader,
                ..
            } => {
                let allowed = p.check_offsets_reader(reader);
                match max_num_offsets {
                    Some(max) => PartitionResult::LegacyOffsets(allowed.map(|()| {
                        p.log
                            .legacy_offsets_before(timestamp, max, runtime::now_ms())
                    })),
                    None => PartitionResult::ListOffsets(match allowed {
                        Ok(()) => list_offsets(&p, timestamp, reader).await,
                        Err(e) => Err(e),
                    }),
                }
            }
            PartitionOp::DeleteRecords {
                offset, timeout_ms, ..
            } => PartitionResult::DeleteRecords(
                p.delete_records(offset, Duration::from_millis(timeout_ms.max(0) as u64))
                    .await,
            ),
            PartitionOp::Describe { producers, .. } => {
                PartitionResult::Describe(Ok(crate::partition::summary(&p, producers)))
            }
        }
    }

    /// A producer's append on the partition's owning shard. In cluster mode only the leader
    /// takes it (its epoch stamped in); acks=all is refused up front when the ISR is below
    /// `min.insync.replicas` and answered once the HW passes the batch.
    async fn produce_on(
        &self,
        p: &Partition,
        records: &[u8],
        durable: bool,
        now_ms: i64,
        acks_all: bool,
        timeout_ms: u64,
    ) -> Result<AppendInfo, PartitionError> {
        let options = p.leader_append_options(durable, now_ms)?;
        if acks_all {
            p.check_acks_all()?;
        }
        let epoch = p.leading_epoch();
        let info = p.produce(records, options).await.map_err(produce_error)?;
        p.after_leader_append();
        if acks_all {
            p.wait_acks_all(epoch, info.last_offset.0, Duration::from_millis(timeout_ms))
                .await?;
        }
        Ok(info)
    }

    /// Runs the fetches `ops` (all of this shard) in order within `max_bytes` response bytes.
    pub async fn execute_fetches(
        &self,
        ops: Vec<PartitionOp>,
        max_bytes: usize,
    ) -> Vec<PartitionResult> {
        let mut budget = FetchBudget::new(max_bytes);
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            let PartitionOp::Fetch {
                offset,
                max_bytes,
                known_end,
                reader,
                ..
            } = &op
            else {
                // Only fetches are budgeted; anything else runs as usual.
                results.push(self.execute(op).await);
                continue;
            };
            let p = match self.online_for(&op) {
                Ok(p) => p,
                Err(result) => {
                    results.push(result);
                    continue;
                }
            };
            let result = self
                .fetch_from(
                    &p,
                    *offset,
                    budget.limit_for(*max_bytes),
                    *known_end,
                    *reader,
                )
                .await;
            if let Ok(data) = &result {
                budget.spend(data.records.len());
            }
            results.push(PartitionResult::Fetch(result));
        }
        results
    }

    /// Waits on this shard's `partitions` for their HW (or, with `log_end`, their written
    /// end) to pass the offsets.
    /// `stopping` ends the wait early (the broker stops: long polls answer now).
    pub async fn wait_for_data(
        &self,
        partitions: &[(String, i32, i64)],
        timeout_ms: u64,
        log_end: bool,
        stopping: &ShutdownSignal,
    ) -> bool {
        let (waker, woken) = AppendWaker::new();
        let mut watching = false;
        for (t, i, offset) in partitions {
            let Some(p) = self.get(t, *i) else {
                continue;
            };
            let end = if log_end {
                p.log.offsets().written_end_offset
            } else {
                p.high_watermark()
            };
            if end > *offset {
                return true;
            }
            if log_end {
                p.watch_appends(&waker);
            } else {
                p.watch_high_watermark(&waker);
            }
            watching = true;
        }
        if !watching {
            return false;
        }
        let appended = async { woken.await.is_some() };
        let timeout = async {
            futures_lite::future::or(
                runtime::sleep(Duration::from_millis(timeout_ms)),
                stopping.wait(),
            )
            .await;
            false
        };
        // Dropping `waker` on return unregisters it from every partition.
        futures_lite::future::or(appended, timeout).await
    }

    /// One partition's part of a Fetch: up to `limit` (`None`: the budget is spent, offsets
    /// only); nothing read when the reader's view still ends at `known_end`. A consumer reads
    /// below the HW; a follower's fetch is first checked by the leader (epochs, divergence)
    /// and reports the follower's position, which may propose an ISR expansion.
    async fn fetch_from(
        &self,
        p: &Rc<Partition>,
        offset: i64,
        limit: Option<ReadLimit>,
        known_end: Option<i64>,
        reader: FetchReader,
    ) -> Result<FetchedData, PartitionError> {
        let (upper_bound, high_watermark) = match reader {
            FetchReader::Consumer {
                current_leader_epoch,
            } => {
                p.check_consumer_epoch(current_leader_epoch)?;
                let hw = p.high_watermark();
                (Some(hw), hw)
            }
            FetchReader::Replica {
                id,
                current_leader_epoch,
                last_fetched_epoch,
                log_start_offset,
            } => {
                let check = p.check_replica_fetch(
                    BrokerId(id),
                    offset,
                    current_leader_epoch,
                    last_fetched_epoch,
                    runtime::now_ms(),
                )?;
                p.record_follower_log_start(BrokerId(id), log_start_offset);
                if let Some(proposal) = check.propose {
                    self.submit_isr_change(p, proposal);
                }
                if let Some(diverging) = check.diverging {
                    let o = p.log.offsets();
                    return Ok(FetchedData {
                        records: Bytes::new(),
                        high_watermark: check.high_watermark,
                        log_start_offset: o.log_start_offset,
                        read_end: o.written_end_offset,
                        diverging: Some(diverging),
                    });
                }
                (None, check.high_watermark)
            }
        };
        let read_end = upper_bound.unwrap_or_else(|| p.log.offsets().written_end_offset);
        let unchanged = known_end.is_some_and(|end| read_end == end);
        let limit = match limit {
            Some(l) if !unchanged => l,
            _ => ReadLimit {
                max_bytes: 0,
                whole_first: false,
            },
        };
        let started = Instant::now();
        let read = p
            .log
            .read_within(offset, limit.max_bytes, upper_bound, limit.whole_first)
            .await;
        metrics::record_stage(Stage::Read, started.elapsed());
        if let (Ok(r), FetchReader::Replica { .. }) = (&read, reader) {
            p.count_replica_bytes(0, r.records.len() as u64);
        }
        read.map(|r| FetchedData {
            records: r.records,
            high_watermark,
            log_start_offset: r.log_start_offset,
            read_end,
            diverging: None,
        })
        .map_err(|e| {
            if matches!(e, LogError::CorruptSegment { .. }) {
                p.log_corrupt_read(offset, &e);
            }
            log_error(e)
        })
    }
}

/// One partition's ListOffsets answer for `timestamp`: -1 latest (the HW for a consumer, the
/// log end for a replica), -2 / -4 earliest, -5 latest tiered, -3 max timestamp, else the
/// first offset at or after the timestamp. In a cluster every answer but latest carries the
/// epoch of its offset's batch, as Kafka's does.
async fn list_offsets(
    p: &Partition,
    timestamp: i64,
    reader: OffsetsReader,
) -> Result<OffsetAnswer, PartitionError> {
    let o = p.log.offsets();
    let (offset, timestamp) = match timestamp {
        -1 => {
            let latest = match reader {
                OffsetsReader::Consumer { .. } => p.latest_offset()?,
                OffsetsReader::Replica { .. } | OffsetsReader::Debugging => o.written_end_offset,
            };
            return Ok(OffsetAnswer {
                offset: latest,
                timestamp: -1,
                leader_epoch: None,
            });
        }
        // Earliest: without tiered storage the local log start is the log start.
        -2 | -4 => (o.log_start_offset, -1),
        // Latest tiered: nothing is tiered; Kafka answers offset -1.
        -5 => (-1, -1),
        -3 => p.log.max_timestamp().unwrap_or((-1, -1)),
        ts => p
            .log
            .offset_for_timestamp(ts)
            .await
            .map_err(log_error)?
            .unwrap_or((-1, -1)),
    };
    let leader_epoch = p.is_replicated().then(|| {
        (offset >= 0)
            .then(|| p.epoch_for_offset(offset))
            .flatten()
            .map_or(-1, |e| e.0)
    });
    Ok(OffsetAnswer {
        offset,
        timestamp,
        leader_epoch,
    })
}

//! One partition operation on the shard that owns the partition: produce (with acks=all
//! waiting for the in-sync replicas in cluster mode), fetch, offsets, deletion, description.

use std::rc::Rc;
use std::time::Duration;

use super::fetch_budget;
use super::messages::{OffsetAnswer, PartitionOp, PartitionResult};
use super::Shard;
use crate::log::AppendInfo;
use crate::partition::error::PartitionError;
use crate::partition::error::{log_error, produce_error};
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::{self, Partition};
use crate::runtime;

impl Shard {
    pub(super) async fn execute_on(
        self: &Rc<Self>,
        p: &Rc<Partition>,
        op: PartitionOp,
    ) -> PartitionResult {
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
                    .await,
            ),
            PartitionOp::Fetch {
                offset,
                max_bytes,
                known_end,
                reader,
                ..
            } => {
                let limit = fetch_budget::ReadLimit {
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
                PartitionResult::Describe(Ok(partition::summary(&p, producers)))
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
            p.wait_acks_all(epoch, info.last_offset, Duration::from_millis(timeout_ms))
                .await?;
        }
        Ok(info)
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

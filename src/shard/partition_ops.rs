//! One partition operation on the shard that owns the partition: produce (with acks=all
//! waiting for the in-sync replicas in cluster mode), fetch, offsets, deletion, description.

use std::rc::Rc;
use std::time::Duration;

use super::errors::{log_error, produce_error};
use super::fetch_budget;
use super::messages::{PartitionError, PartitionOp, PartitionResult};
use super::partition::{self, Partition};
use super::Shard;
use crate::log::AppendInfo;
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
                max_num_offsets: Some(max),
                ..
            } => PartitionResult::LegacyOffsets(Ok(p.log.legacy_offsets_before(
                timestamp,
                max,
                runtime::now_ms(),
            ))),
            PartitionOp::ListOffsets { timestamp, .. } => {
                let o = p.log.offsets();
                let result = match timestamp {
                    -1 => p.latest_offset().map(|offset| (offset, -1)),
                    // Earliest: without tiered storage the local log start is the log start.
                    -2 | -4 => Ok((o.log_start_offset, -1)),
                    // Latest tiered: nothing is tiered; Kafka answers offset -1.
                    -5 => Ok((-1, -1)),
                    -3 => Ok(p.log.max_timestamp().unwrap_or((-1, -1))),
                    ts => p
                        .log
                        .offset_for_timestamp(ts)
                        .await
                        .map(|found| found.unwrap_or((-1, -1)))
                        .map_err(log_error),
                };
                PartitionResult::ListOffsets(result)
            }
            PartitionOp::DeleteRecords { offset, .. } => {
                let target = if offset == -1 {
                    p.high_watermark()
                } else {
                    offset
                };
                PartitionResult::DeleteRecords(
                    p.log.delete_records_before(target).await.map_err(log_error),
                )
            }
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

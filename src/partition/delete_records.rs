//! DeleteRecords on a partition's leader (Kafka's `deleteRecordsOnLeader` and
//! `DelayedDeleteRecords`): the log start moves at once; a replicated partition answers once
//! its low watermark — the smallest log start over the leader and the followers on live
//! brokers, as their fetches report it — reached the offset, so the records are gone from
//! every replica when the client hears so.

use std::time::Duration;

use super::error::log_error;
use crate::model::{BrokerId, LeaderEpoch, Offset};
use crate::partition::error::PartitionError;
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::replica_role::{deadline_first, ReplicaRole};
use crate::partition::Partition;
use crate::protocol::ResponseError;
use crate::runtime;
use crate::util::local_oneshot;

impl Partition {
    /// Deletes the records before `offset` (-1: the HW) and returns the low watermark. An
    /// offset past the HW is OFFSET_OUT_OF_RANGE (records not yet committed cannot go); a
    /// topic without the `delete` cleanup policy refuses with POLICY_VIOLATION. A leader
    /// waits at most `timeout` for its followers (REQUEST_TIMED_OUT after it).
    pub async fn delete_records(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, PartitionError> {
        self.check_offsets_reader(OffsetsReader::Consumer {
            current_leader_epoch: -1,
        })?;
        if !self.log.config().cleanup_policy.delete {
            return Err(PartitionError::new(
                ResponseError::PolicyViolation.code(),
                format!(
                    "records of {}-{} cannot be deleted: its cleanup.policy has no delete",
                    self.topic, self.index
                ),
            ));
        }
        let hw = self.high_watermark();
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(PartitionError::new(
                ResponseError::OffsetOutOfRange.code(),
                format!(
                    "cannot delete records of {}-{} before offset {target}: it is past the high watermark {hw}",
                    self.topic, self.index
                ),
            ));
        }
        // `None` on a single node: nothing to wait for.
        let epoch = self.leading_epoch();
        let log_start = self
            .log
            .delete_records_before(target)
            .await
            .map_err(log_error)?;
        match epoch {
            Some(epoch) => self.wait_low_watermark(epoch, target, timeout).await,
            None => Ok(log_start),
        }
    }

    /// The leader's side of a follower's fetch: the log start offset it reported.
    pub fn record_follower_log_start(&self, follower: BrokerId, log_start: i64) {
        let changed = match &mut *self.role.borrow_mut() {
            ReplicaRole::Leader(l) => l.on_follower_log_start(follower, Offset(log_start)),
            _ => false,
        };
        if changed {
            self.wake_low_watermark_waiters();
        }
    }

    /// Answers every DeleteRecords waiting here, to look again.
    pub fn wake_low_watermark_waiters(&self) {
        let waiters = std::mem::take(&mut *self.low_watermark_waiters.borrow_mut());
        for w in waiters {
            w.send(());
        }
    }

    /// Waits until the low watermark reaches `offset` while leading at `epoch`, at most
    /// `timeout`: NOT_LEADER_OR_FOLLOWER at once if leadership moves, REQUEST_TIMED_OUT
    /// after the timeout (Kafka's `DelayedDeleteRecords`).
    async fn wait_low_watermark(
        &self,
        epoch: LeaderEpoch,
        offset: i64,
        timeout: Duration,
    ) -> Result<i64, PartitionError> {
        let deadline = runtime::sleep(timeout);
        futures_lite::pin!(deadline);
        let mut timed_out = false;
        loop {
            let low = match &*self.role.borrow() {
                ReplicaRole::Leader(l) if l.leader_epoch() == epoch => {
                    l.low_watermark(Offset(self.log.offsets().log_start_offset))
                        .0
                }
                _ => {
                    return Err(PartitionError::new(
                        ResponseError::NotLeaderOrFollower.code(),
                        format!(
                            "leadership of {}-{} moved while deleting records",
                            self.topic, self.index
                        ),
                    ))
                }
            };
            if low >= offset {
                return Ok(low);
            }
            if timed_out {
                return Err(PartitionError::new(
                    ResponseError::RequestTimedOut.code(),
                    format!(
                        "the replicas of {}-{} did not delete the records before {offset} within {timeout:?} (low watermark {low})",
                        self.topic, self.index
                    ),
                ));
            }
            let (tx, rx) = local_oneshot::channel();
            self.low_watermark_waiters.borrow_mut().push(tx);
            timed_out = deadline_first(rx, deadline.as_mut()).await;
        }
    }
}

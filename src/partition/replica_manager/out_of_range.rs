//! A follower's answer to OFFSET_OUT_OF_RANGE from its leader (Kafka's
//! `fetchOffsetAndTruncate`): the leader's log no longer holds the follower's fetch offset,
//! so the follower moves its log to the leader's bounds, as
//! `replica_fetch::out_of_range_action` decides. Starting over is crash-safe in this order:
//! producer snapshots removed, the epoch cache emptied (durably), then the log started over;
//! a crash in between leaves a log that is out of range again and redoes the rest.

use crate::util::hash::HashMap;
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use kafka_protocol::messages::{ApiKey, BrokerId as WireBrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::log::LogError;
use crate::model::{BrokerId, Offset};
use crate::partition::replica_role::{FetchPosition, ReplicaRole};
use crate::partition::Partition;
use crate::replication::epoch_cache::LeaderEpochCache;
use crate::replication::replica_client::{ReplicaClient, ReplicaClientError};
use crate::replication::replica_fetch::{self, OutOfRangeAction};

impl Partition {
    /// Moves the log to the leader's `[leader_start, leader_end)` after an out-of-range
    /// answer to the fetch `asked`; returns the action taken. An answer the partition has
    /// moved on from (a role change, another truncation) changes nothing.
    pub async fn follow_leader_log_bounds(
        &self,
        asked: FetchPosition,
        leader_start: i64,
        leader_end: i64,
    ) -> Result<OutOfRangeAction, LogError> {
        let _io = self.replica_io.enter().await;
        if !self.still_at(asked) {
            return Ok(OutOfRangeAction::Refetch);
        }
        let own_end = self.log.offsets().log_end_offset;
        let action = replica_fetch::out_of_range_action(own_end, leader_start, leader_end);
        match action {
            OutOfRangeAction::Refetch => {}
            OutOfRangeAction::TruncateTo(end) => {
                tracing::warn!(topic = %self.topic, partition = self.index, from = own_end, to = end, "the leader's log ends below ours: truncating to its end");
                let end = self.log.truncate_to(end).await?;
                if self.epochs.borrow_mut().truncate_from_end(Offset(end)) {
                    self.write_epochs().await?;
                }
                self.producers.truncate_to(Offset(end));
                self.cap_follower_high_watermark(end);
            }
            OutOfRangeAction::StartOver(start) => {
                tracing::warn!(topic = %self.topic, partition = self.index, log_end = own_end, leader_log_start = start, "our log ends below the leader's log start (records deleted while this replica was away): starting over empty there");
                self.producers.start_over(self.log.dir()).await?;
                *self.epochs.borrow_mut() = LeaderEpochCache::new();
                self.write_epochs().await?;
                self.log.truncate_fully_and_start_at(start).await?;
                // Everything below the leader's log start was committed (Kafka sets the
                // HW to the new log end here too).
                if let ReplicaRole::Follower(f) = &mut *self.role.borrow_mut() {
                    f.high_watermark = start;
                }
            }
        }
        Ok(action)
    }

    fn cap_follower_high_watermark(&self, end: i64) {
        if let ReplicaRole::Follower(f) = &mut *self.role.borrow_mut() {
            f.high_watermark = f.high_watermark.min(end);
        }
    }
}

/// ListOffsets v4+ carries `current_leader_epoch`, so a leader that moved on fences us.
const LIST_OFFSETS_VERSION: i16 = 7;
const LIST_OFFSETS_TIMEOUT: Duration = Duration::from_secs(5);
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// Why the leader's log bounds could not be had; the next fetch tries again.
#[derive(Debug, thiserror::Error)]
pub enum LeaderBoundsError {
    #[error("ListOffsets to the leader failed: {0}")]
    Call(#[from] ReplicaClientError),
    #[error("the leader answered ListOffsets with error {code}")]
    Refused { code: i16 },
    #[error("the leader's ListOffsets answer left the partition out")]
    Missing,
}

/// Asks the leader (as replica `me`: its answer is its log end, not its HW) where the log of
/// each of `partitions` starts and ends, then moves each log there. Failures are logged: the
/// partition's next fetch is out of range again and retries.
pub async fn reset_out_of_range(
    client: &mut ReplicaClient,
    me: BrokerId,
    partitions: &[(Rc<Partition>, FetchPosition)],
) {
    let bounds = async {
        let starts = list_offsets(client, me, partitions, EARLIEST).await?;
        let ends = list_offsets(client, me, partitions, LATEST).await?;
        Ok::<_, LeaderBoundsError>((starts, ends))
    };
    let (starts, ends) = match bounds.await {
        Ok(b) => b,
        Err(e) => {
            tracing::info!(error = %e, "cannot read the leader's log bounds for partitions it has no records at our end for");
            return;
        }
    };
    for (i, (p, asked)) in partitions.iter().enumerate() {
        let (start, end) = match (&starts[i], &ends[i]) {
            (Ok(s), Ok(e)) => (*s, *e),
            (Err(e), _) | (_, Err(e)) => {
                tracing::info!(topic = %p.topic, partition = p.index, error = %e, "cannot read the leader's log bounds");
                continue;
            }
        };
        if let Err(e) = p.follow_leader_log_bounds(*asked, start, end).await {
            tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "moving the log to the leader's bounds failed");
        }
    }
}

/// One ListOffsets request for `timestamp` of every partition; the offsets in order.
async fn list_offsets(
    client: &mut ReplicaClient,
    me: BrokerId,
    partitions: &[(Rc<Partition>, FetchPosition)],
    timestamp: i64,
) -> Result<Vec<Result<i64, LeaderBoundsError>>, LeaderBoundsError> {
    let mut by_topic: HashMap<&str, Vec<ListOffsetsPartition>> = HashMap::default();
    for (p, asked) in partitions {
        let mut lp = ListOffsetsPartition::default();
        lp.partition_index = p.index;
        lp.current_leader_epoch = asked.leader_epoch.0;
        lp.timestamp = timestamp;
        by_topic.entry(p.topic.as_str()).or_default().push(lp);
    }
    let mut request = ListOffsetsRequest::default();
    request.replica_id = WireBrokerId(me.0);
    for (topic, partitions) in by_topic {
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = partitions;
        request.topics.push(t);
    }
    let response: ListOffsetsResponse = client
        .call(
            ApiKey::ListOffsets,
            LIST_OFFSETS_VERSION,
            &request,
            LIST_OFFSETS_TIMEOUT,
        )
        .await?;
    let mut answers: HashMap<(&str, i32), Result<i64, LeaderBoundsError>> = HashMap::default();
    for t in &response.topics {
        for r in &t.partitions {
            let answer = if r.error_code == 0 {
                Ok(r.offset)
            } else {
                Err(LeaderBoundsError::Refused { code: r.error_code })
            };
            answers.insert((t.name.0.as_str(), r.partition_index), answer);
        }
    }
    Ok(partitions
        .iter()
        .map(|(p, _)| {
            answers
                .remove(&(p.topic.as_str(), p.index))
                .unwrap_or(Err(LeaderBoundsError::Missing))
        })
        .collect())
}

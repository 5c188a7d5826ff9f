//! OffsetForLeaderEpoch (key 23): the end offset of the largest leader epoch at or below the
//! one asked for. Clients use it to check that a position survived a leader change
//! (librdkafka ≥ 2.1 after every rebalance). One node: the only epoch there has been is 0,
//! which starts at the log start and is still being written, so epoch 0 ends at the log end.
//! In cluster mode the leader answers from its epoch cache (`leader-epoch-checkpoint`);
//! a follower answers NOT_LEADER_OR_FOLLOWER.
//!
//! v0/v1 are hand-coded (`protocol::legacy_epoch`); v2+ come from the crate.

use crate::model::{LeaderEpoch, Offset};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::partition::summary::EpochView;
use crate::partition::summary::PartitionSummary;
use crate::protocol::legacy_epoch;
use crate::protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderEpochRequest, OffsetForLeaderPartition,
};
use crate::protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{HandlerError, Request};

/// The leader epoch of every partition on one node.
const LEADER_EPOCH: i32 = 0;
/// Kafka's "no epoch" (as a request's `current_leader_epoch`: not checked).
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_OFFSET: i64 = -1;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: OffsetForLeaderEpochRequest = if req.version() < 2 {
        req.decode_with(legacy_epoch::decode_request_v0_1)?
    } else {
        req.decode()?
    };
    let mut ops = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            ops.push(PartitionOp::Describe {
                topic: topic.topic.0.to_string(),
                partition: p.partition,
                producers: false,
            });
        }
    }
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut response = OffsetForLeaderEpochResponse::default();
    for topic in &request.topics {
        let mut t = OffsetForLeaderTopicResult::default();
        t.topic = topic.topic.clone();
        for p in &topic.partitions {
            let answer = match results.next() {
                Some(PartitionResult::Describe(Ok(summary))) => end_offset_for(p, &summary),
                Some(PartitionResult::Describe(Err(e))) => Err(e.code),
                _ => Err(ResponseError::UnknownServerError.code()),
            };
            let mut r = EpochEndOffset::default();
            r.partition = p.partition;
            match answer {
                Ok((epoch, offset)) => {
                    r.leader_epoch = epoch;
                    r.end_offset = offset;
                }
                Err(code) => {
                    r.error_code = code;
                    r.leader_epoch = UNDEFINED_EPOCH;
                    r.end_offset = UNDEFINED_OFFSET;
                }
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    if req.version() < 2 {
        return Ok(legacy_epoch::encode_response_v0_1(&response, req.version()));
    }
    req.encode(&response)
}

/// Kafka's answer for one partition: fencing by `current_leader_epoch` first, then the
/// epoch cache lookup (which here holds only epoch 0, starting at the log start).
fn end_offset_for(
    p: &OffsetForLeaderPartition,
    summary: &PartitionSummary,
) -> Result<(i32, i64), i16> {
    match &summary.epochs {
        EpochView::Alone => {}
        EpochView::Follower => return Err(ResponseError::NotLeaderOrFollower.code()),
        EpochView::Leader { epoch, cache } => {
            match p.current_leader_epoch {
                UNDEFINED_EPOCH => {}
                e if e > *epoch => return Err(ResponseError::UnknownLeaderEpoch.code()),
                e if e < *epoch => return Err(ResponseError::FencedLeaderEpoch.code()),
                _ => {}
            }
            let (epoch, Offset(end_offset)) =
                cache.end_offset_for(LeaderEpoch(p.leader_epoch), Offset(summary.end_offset));
            return Ok((epoch, end_offset));
        }
    }
    match p.current_leader_epoch {
        UNDEFINED_EPOCH => {}
        e if e > LEADER_EPOCH => return Err(ResponseError::UnknownLeaderEpoch.code()),
        e if e < LEADER_EPOCH => return Err(ResponseError::FencedLeaderEpoch.code()),
        _ => {}
    }
    Ok(match p.leader_epoch {
        UNDEFINED_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_OFFSET),
        LEADER_EPOCH => (LEADER_EPOCH, summary.end_offset),
        // Newer than any epoch known: Kafka has no answer.
        e if e > LEADER_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_OFFSET),
        // Older than the first known epoch: where the first known one starts.
        e => (e, summary.log_start_offset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(leader_epoch: i32, current: i32) -> OffsetForLeaderPartition {
        let mut p = OffsetForLeaderPartition::default();
        p.leader_epoch = leader_epoch;
        p.current_leader_epoch = current;
        p
    }

    const SUMMARY: PartitionSummary = PartitionSummary {
        log_start_offset: 3,
        end_offset: 10,
        size_bytes: 0,
        producers: Vec::new(),
        epochs: EpochView::Alone,
    };

    #[test]
    fn epoch_zero_ends_at_the_log_end_and_later_epochs_are_unknown() {
        assert_eq!(end_offset_for(&partition(0, -1), &SUMMARY), Ok((0, 10)));
        assert_eq!(end_offset_for(&partition(0, 0), &SUMMARY), Ok((0, 10)));
        assert_eq!(end_offset_for(&partition(4, -1), &SUMMARY), Ok((-1, -1)));
        assert_eq!(end_offset_for(&partition(-1, -1), &SUMMARY), Ok((-1, -1)));
        assert_eq!(end_offset_for(&partition(-3, -1), &SUMMARY), Ok((-3, 3)));
    }

    #[test]
    fn the_current_leader_epoch_fences_older_and_refuses_newer() {
        assert_eq!(
            end_offset_for(&partition(0, 1), &SUMMARY),
            Err(ResponseError::UnknownLeaderEpoch.code())
        );
        assert_eq!(
            end_offset_for(&partition(0, -2), &SUMMARY),
            Err(ResponseError::FencedLeaderEpoch.code())
        );
    }
}

//! The decisions of a replica fetch, both sides, as pure functions: what the leader answers a
//! follower's fetch before reading (fencing by leader epoch, divergence by last fetched
//! epoch), and what the follower does with the answer (its new HW, where to truncate).
//! `partition::replica_role` calls these around its I/O, and the cluster simulation
//! (`cluster_sim`) calls the same ones, so the simulation checks the broker's rules.

use crate::model::{LeaderEpoch, Offset};
use crate::replication::epoch_cache::LeaderEpochCache;

/// A request's `current_leader_epoch` does not match the leader's (Kafka's fencing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EpochFenceError {
    /// FENCED_LEADER_EPOCH (74): the requester is behind.
    #[error("leader epoch {given} is older than {mine}")]
    Fenced { given: i32, mine: i32 },
    /// UNKNOWN_LEADER_EPOCH (75): the requester knows a newer epoch than this leader.
    #[error("leader epoch {given} is newer than {mine}")]
    Unknown { given: i32, mine: i32 },
    /// OFFSET_OUT_OF_RANGE (1): where the follower's last fetched epoch ends is not known here
    /// (newer than every epoch of this log). Kafka answers so; the follower then moves its
    /// log to the leader's bounds. A DivergingEpoch of (-1, -1) made it fetch again forever.
    #[error("the end of the last fetched epoch {last_fetched} is not known here")]
    UnknownLastFetchedEpoch { last_fetched: i32 },
}

impl EpochFenceError {
    pub fn response_error(&self) -> kafka_protocol::ResponseError {
        match self {
            EpochFenceError::Fenced { .. } => kafka_protocol::ResponseError::FencedLeaderEpoch,
            EpochFenceError::Unknown { .. } => kafka_protocol::ResponseError::UnknownLeaderEpoch,
            EpochFenceError::UnknownLastFetchedEpoch { .. } => {
                kafka_protocol::ResponseError::OffsetOutOfRange
            }
        }
    }
}

/// Kafka's check of a request's `current_leader_epoch` against the leader's; a negative
/// given epoch (an old client) is not checked.
pub fn check_leader_epoch(given: i32, mine: i32) -> Result<(), EpochFenceError> {
    if given >= 0 && given < mine {
        return Err(EpochFenceError::Fenced { given, mine });
    }
    if given > mine {
        return Err(EpochFenceError::Unknown { given, mine });
    }
    Ok(())
}

/// The leader's answer to a follower's fetch of one partition, before any read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchDecision {
    /// The follower's log agrees with ours up to its fetch offset: read from there and record
    /// the offset as its LEO.
    Read,
    /// Its log diverges: answer `DivergingEpoch { epoch, end_offset }` with no records, and
    /// do not record the fetch offset (it names records the leader does not have).
    Diverging { epoch: i32, end_offset: i64 },
}

/// Fencing by `current_leader_epoch`, then divergence (Fetch v12+): the follower's last
/// fetched epoch must end, in our log, at or after its fetch offset, and at that same epoch.
/// `leo` is the leader's log end; `epochs` its epoch cache.
pub fn check_follower_fetch(
    epochs: &LeaderEpochCache,
    leo: i64,
    my_epoch: LeaderEpoch,
    fetch_offset: i64,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
) -> Result<FetchDecision, EpochFenceError> {
    check_leader_epoch(current_leader_epoch, my_epoch.0)?;
    if last_fetched_epoch >= 0 {
        let (epoch, Offset(end_offset)) =
            epochs.end_offset_for(LeaderEpoch(last_fetched_epoch), Offset(leo));
        if epoch < 0 || end_offset < 0 {
            return Err(EpochFenceError::UnknownLastFetchedEpoch {
                last_fetched: last_fetched_epoch,
            });
        }
        if epoch != last_fetched_epoch || end_offset < fetch_offset {
            return Ok(FetchDecision::Diverging { epoch, end_offset });
        }
    }
    Ok(FetchDecision::Read)
}

/// A follower's HW after an answer: the leader's HW capped by its own LEO (it cannot expose
/// records it does not have), and never below what it already had (capped by the LEO too).
pub fn follower_high_watermark(current_hw: i64, leader_hw: i64, leo: i64) -> i64 {
    leader_hw.min(leo).max(current_hw.min(leo))
}

/// Where a follower moves its log start after an answer (Kafka's follower follows the
/// leader's log start offset: records deleted on the leader, by DeleteRecords or retention,
/// must not come back when this replica leads). Up to the leader's, never past its own HW
/// (Kafka refuses a log start beyond the HW); `None` when it does not move. A leader's log
/// start of -1 (not sent) moves nothing.
pub fn follower_log_start(own_start: i64, leader_start: i64, follower_hw: i64) -> Option<i64> {
    let target = leader_start.min(follower_hw);
    (target > own_start).then_some(target)
}

/// Where a follower told `DivergingEpoch { epoch, end_offset }` truncates (Kafka's
/// `getOffsetTruncationState`): to the smaller of the leader's end offset of that epoch and
/// its own, never past its own end. If it never had that epoch, to where its own largest
/// epoch below it ends, and it fetches again (the next answer finishes the job). An epoch
/// it cannot answer for (undefined) leaves the leader's end offset alone.
///
/// The caller cuts its log there if that is below its end, and its epoch cache there in any
/// case: an entry at the very end names a leadership of this replica that wrote nothing,
/// and kept, it stays the follower's last fetched epoch, which the leader keeps calling
/// diverging (Kafka's `UnifiedLog.truncateTo` cuts the cache for that reason too).
pub fn truncation_target(epoch: i32, end_offset: i64, own: &LeaderEpochCache, leo: i64) -> i64 {
    let (own_epoch, Offset(own_end)) = own.end_offset_for(LeaderEpoch(epoch), Offset(leo));
    let target = if own_epoch < 0 {
        end_offset
    } else if own_epoch != epoch {
        own_end
    } else {
        own_end.min(end_offset)
    };
    target.min(leo)
}

/// What a follower does when the leader answers its fetch OFFSET_OUT_OF_RANGE (Kafka's
/// `AbstractFetcherThread.fetchOffsetAndTruncate`), from the leader's log start and end as
/// ListOffsets reports them to a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfRangeAction {
    /// The leader's log ends below ours (an unclean election the epochs did not catch): cut
    /// ours to its end.
    TruncateTo(i64),
    /// The leader's log starts past our end (DeleteRecords or retention while we were away):
    /// what we miss is gone; our log starts over, empty, at the leader's log start.
    StartOver(i64),
    /// Our end is within the leader's log (its log start moved while the fetch was under
    /// way, or the leader changed): fetch again from our end.
    Refetch,
}

pub fn out_of_range_action(own_end: i64, leader_start: i64, leader_end: i64) -> OutOfRangeAction {
    if leader_end < own_end {
        OutOfRangeAction::TruncateTo(leader_end.max(0))
    } else if leader_start > own_end {
        OutOfRangeAction::StartOver(leader_start)
    } else {
        OutOfRangeAction::Refetch
    }
}

#[cfg(test)]
#[path = "replica_fetch_tests.rs"]
mod tests;

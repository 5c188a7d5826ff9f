//! Table tests of the replica fetch decisions (Kafka's PartitionTest divergence cases and
//! AbstractFetcherThread's truncation and HW rules).

use super::*;
use crate::replication::epoch_cache::{EpochEntry, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

/// Epochs 0@0, 2@10, 4@20; LEO 30.
fn leader_epochs() -> LeaderEpochCache {
    LeaderEpochCache::from_entries(
        [(0, 0), (2, 10), (4, 20)]
            .into_iter()
            .map(|(e, s)| EpochEntry {
                epoch: LeaderEpoch(e),
                start_offset: s,
            })
            .collect(),
    )
}

#[test]
fn fencing_by_current_leader_epoch() {
    let cases = [
        // (given, mine, expected)
        (4, 4, Ok(())),
        (-1, 4, Ok(())),
        (3, 4, Err(EpochFenceError::Fenced { given: 3, mine: 4 })),
        (5, 4, Err(EpochFenceError::Unknown { given: 5, mine: 4 })),
    ];
    for (given, mine, expected) in cases {
        assert_eq!(
            check_leader_epoch(given, mine),
            expected,
            "{given} vs {mine}"
        );
    }
    assert_eq!(
        EpochFenceError::Fenced { given: 3, mine: 4 }
            .response_error()
            .code(),
        74
    );
    assert_eq!(
        EpochFenceError::Unknown { given: 5, mine: 4 }
            .response_error()
            .code(),
        75
    );
}

#[test]
fn divergence_by_last_fetched_epoch() {
    let epochs = leader_epochs();
    let read = Ok(FetchDecision::Read);
    let diverging = |epoch, end_offset| Ok(FetchDecision::Diverging { epoch, end_offset });
    let cases = [
        // (fetch offset, last fetched epoch, expected)
        (25, 4, read),
        (30, 4, read),
        // Ahead of the leader in its latest epoch: cut back to the leader's end.
        (31, 4, diverging(4, 30)),
        (15, 2, read),
        (20, 2, read),
        // Epoch 2 ended at 20 here; the follower has more of it.
        (22, 2, diverging(2, 20)),
        // An epoch the leader never had: the largest before it, ending where the next starts.
        (12, 3, diverging(2, 20)),
        (12, 1, diverging(0, 10)),
        // Newer than anything the leader has: undefined.
        (12, 7, diverging(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)),
        // No epoch yet (an empty follower): nothing to check.
        (0, -1, read),
    ];
    for (fetch_offset, last, expected) in cases {
        assert_eq!(
            check_follower_fetch(&epochs, 30, LeaderEpoch(4), fetch_offset, 4, last),
            expected,
            "fetch at {fetch_offset}, last fetched epoch {last}"
        );
    }
    // Fencing comes first.
    assert_eq!(
        check_follower_fetch(&epochs, 30, LeaderEpoch(4), 31, 3, 4),
        Err(EpochFenceError::Fenced { given: 3, mine: 4 })
    );
}

#[test]
fn a_followers_hw_is_capped_by_its_leo_and_never_goes_back() {
    let cases = [
        // (current HW, leader HW, LEO, expected)
        (0, 5, 10, 5),
        (0, 15, 10, 10),
        (7, 5, 10, 7),
        // A truncation below the old HW caps it.
        (7, 5, 6, 6),
        (3, 3, 3, 3),
    ];
    for (current, leader, leo, expected) in cases {
        assert_eq!(
            follower_high_watermark(current, leader, leo),
            expected,
            "{current} {leader} {leo}"
        );
    }
}

#[test]
fn truncation_never_goes_past_the_followers_end() {
    assert_eq!(truncation_target(5, 10), Some(5));
    assert_eq!(truncation_target(10, 10), None);
    assert_eq!(truncation_target(12, 10), None);
    assert_eq!(truncation_target(0, 3), Some(0));
}

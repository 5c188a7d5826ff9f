//! Table tests of the replica fetch decisions (Kafka's PartitionTest divergence cases and
//! AbstractFetcherThread's truncation and HW rules).

use super::*;
use crate::replication::epoch_cache::EpochEntry;

/// Epochs 0@0, 2@10, 4@20; LEO 30.
fn leader_epochs() -> LeaderEpochCache {
    LeaderEpochCache::from_entries(
        [(0, 0), (2, 10), (4, 20)]
            .into_iter()
            .map(|(e, s)| EpochEntry {
                epoch: LeaderEpoch(e),
                start_offset: Offset(s),
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
        // Newer than anything the leader has: its end is unknown, OFFSET_OUT_OF_RANGE (as
        // Kafka), not a DivergingEpoch of (-1, -1) the follower cannot act on.
        (
            12,
            7,
            Err(EpochFenceError::UnknownLastFetchedEpoch { last_fetched: 7 }),
        ),
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

fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
    LeaderEpochCache::from_entries(
        entries
            .iter()
            .map(|&(e, s)| EpochEntry {
                epoch: LeaderEpoch(e),
                start_offset: Offset(s),
            })
            .collect(),
    )
}

/// (follower's epochs, its LEO, the leader's diverging answer, the target)
type TruncationCase = (&'static [(i32, i64)], i64, (i32, i64), i64);

#[test]
fn truncation_by_the_smaller_end_offset_of_the_leaders_epoch() {
    let cases: [TruncationCase; 7] = [
        // (follower's epochs, its LEO, leader's answer, target)
        // Same epoch, the follower has more of it: the leader's end.
        (&[(0, 0), (2, 10)], 25, (2, 20), 20),
        // Never past its own end.
        (&[(0, 0), (2, 10)], 15, (2, 20), 15),
        // The follower's epoch 0 ended (at 24) before the leader's (25): its own end.
        (&[(0, 0), (1, 24)], 25, (0, 25), 24),
        // It never had epoch 2: where its largest epoch below 2 ends, then ask again.
        (&[(1, 0), (3, 5)], 10, (2, 8), 5),
        (&[(1, 0)], 5, (1, 5), 5),
        // Below its first epoch: its first start.
        (&[(3, 4)], 10, (1, 6), 4),
        // An undefined own answer (the leader's epoch is newer): the leader's end.
        (&[(0, 0)], 10, (4, 7), 7),
    ];
    for (own, leo, (epoch, end), expected) in cases {
        assert_eq!(
            truncation_target(epoch, end, &cache(own), leo),
            expected,
            "{own:?} LEO {leo}, leader says ({epoch}, {end})"
        );
    }
}

/// Fetches, truncating as told, until the leader lets the follower read; returns the end.
fn converge(
    leader: &LeaderEpochCache,
    leader_leo: i64,
    own: &mut LeaderEpochCache,
    mut leo: i64,
) -> i64 {
    let latest = leader.latest_epoch().expect("epochs");
    for _ in 0..4 {
        let last = own.latest_epoch().map_or(-1, |e| e.0);
        match check_follower_fetch(leader, leader_leo, latest, leo, latest.0, last) {
            Ok(FetchDecision::Read) => return leo,
            Ok(FetchDecision::Diverging { epoch, end_offset }) => {
                leo = truncation_target(epoch, end_offset, own, leo);
                own.truncate_from_end(Offset(leo));
            }
            Err(e) => panic!("{e}"),
        }
    }
    panic!("no convergence: {own:?} at {leo}");
}

/// Found by the cluster simulation, seed 39: this replica led epoch 1 from offset 26 without
/// writing, then followed a leader with epochs 0@0, 4@26. Asked with last fetched epoch 1,
/// the leader answered (0, 26), which cut no record; with the epoch entry kept, the follower
/// asked with epoch 1 again, for ever.
#[test]
fn an_epoch_entry_at_the_followers_end_is_cut_even_when_no_record_is() {
    let leader = cache(&[(0, 0), (4, 26), (6, 60)]);
    let mut follower = cache(&[(0, 0), (1, 26)]);
    assert_eq!(converge(&leader, 90, &mut follower, 26), 26);
    assert_eq!(follower.latest_epoch(), Some(LeaderEpoch(0)));
}

/// Found by the cluster simulation, seed 194: the follower wrote offset 24 at epoch 1, the
/// leader has epoch 0 up to 25. Truncating to the leader's end (25) alone cut nothing and
/// kept epoch 1 as the last fetched epoch, diverging for ever; Kafka takes the smaller of the
/// two ends of epoch 0 (24).
#[test]
fn a_follower_ahead_in_an_epoch_the_leader_never_had_truncates_to_its_own_end() {
    let leader = cache(&[(0, 0), (2, 25), (10, 64)]);
    let mut follower = cache(&[(0, 0), (1, 24)]);
    assert_eq!(converge(&leader, 74, &mut follower, 25), 24);
    // Two rounds: the follower never had the leader's epoch 2.
    let leader = cache(&[(1, 0), (2, 5), (4, 8)]);
    let mut follower = cache(&[(1, 0), (3, 5)]);
    assert_eq!(converge(&leader, 12, &mut follower, 10), 5);
}

#[test]
fn a_follower_log_start_follows_the_leaders_up_to_its_own_hw_and_never_back() {
    // (own start, leader start, follower HW) → new start
    let cases = [
        ((0, 10, 50), Some(10)), // DeleteRecords at the leader: follow it
        ((0, 80, 50), Some(50)), // the leader's start past what this replica has committed
        ((10, 10, 50), None),    // already there
        ((20, 10, 50), None),    // never back (the leader's answer may predate ours)
        ((0, -1, 50), None),     // not sent (Fetch below v5)
        ((0, 0, 0), None),
    ];
    for ((own, leader, hw), want) in cases {
        assert_eq!(
            follower_log_start(own, leader, hw),
            want,
            "own {own}, leader {leader}, hw {hw}"
        );
    }
}

#[test]
fn out_of_range_answers_as_kafkas_fetcher_does() {
    let cases = [
        // (own end, leader start, leader end, action)
        // Behind the leader's log start: start over there.
        (5, 25, 30, OutOfRangeAction::StartOver(25)),
        (0, 1, 1, OutOfRangeAction::StartOver(1)),
        // Past the leader's end: cut to it (even when its log start is past that end).
        (40, 10, 30, OutOfRangeAction::TruncateTo(30)),
        (40, 30, 30, OutOfRangeAction::TruncateTo(30)),
        // Within the leader's log (its bounds moved since the fetch): fetch again.
        (25, 25, 30, OutOfRangeAction::Refetch),
        (30, 10, 30, OutOfRangeAction::Refetch),
        (12, 10, 30, OutOfRangeAction::Refetch),
    ];
    for (own_end, leader_start, leader_end, expected) in cases {
        assert_eq!(
            out_of_range_action(own_end, leader_start, leader_end),
            expected,
            "own end {own_end}, leader's log [{leader_start}, {leader_end})"
        );
    }
}

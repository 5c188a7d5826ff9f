//! Kafka's PartitionTest and ReplicaTest cases (HW, ISR expansion and shrink, caught-up time),
//! retold as tables over a small script of leader events, plus a seeded random walk that
//! checks the invariants after every step.

use super::*;
use crate::util::rng::SeededRng;

const LAG: i64 = 30_000;
/// Far from zero, so that "never" (`NEVER_MS`) and "at time 0" differ.
const T0: i64 = 1_000_000;
const ME: BrokerId = BrokerId(0);

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn sorted(mut v: Vec<BrokerId>) -> Vec<BrokerId> {
    v.sort();
    v
}

fn config(min_isr: usize) -> LeaderConfig {
    LeaderConfig {
        min_insync_replicas: min_isr,
        replica_lag_time_max_ms: LAG,
    }
}

/// Leader 0 at epoch 5, partition epoch 1, started at `T0`.
fn leader(replicas: &[i32], isr: &[i32], leo: i64, hw: i64, min_isr: usize) -> LeaderState {
    leader_from(replicas, isr, leo, leo, hw, min_isr)
}

fn leader_from(
    replicas: &[i32],
    isr: &[i32],
    epoch_start: i64,
    leo: i64,
    hw: i64,
    min_isr: usize,
) -> LeaderState {
    LeaderState::new(
        ME,
        ids(replicas),
        ids(isr),
        LeaderEpoch(5),
        PartitionEpoch(1),
        Offset(epoch_start),
        Offset(leo),
        Offset(hw),
        T0,
        config(min_isr),
    )
}

/// One event of a scenario.
#[derive(Clone, Copy)]
enum Step {
    /// Follower fetches at this offset, with the leader's LEO as it is.
    Fetch(i32, i64),
    /// The leader's LEO becomes this.
    Append(i64),
    Sleep(i64),
    /// The periodic ISR check.
    Shrink,
    /// The controller commits the change in flight (partition epoch + 1).
    Commit,
    /// The controller refuses it (INELIGIBLE_REPLICA).
    Reject,
    Eligible(i32, bool),
    /// Metadata brings this ISR (partition epoch + 1), same replicas.
    MetadataIsr(&'static [i32]),
    /// `maybe_advance_hw` at the current time.
    Tick,
}

struct Run {
    state: LeaderState,
    now: i64,
    proposals: Vec<IsrProposal>,
}

impl Run {
    fn new(state: LeaderState) -> Self {
        Run {
            state,
            now: T0,
            proposals: Vec::new(),
        }
    }

    fn step(&mut self, step: Step) {
        let s = &mut self.state;
        match step {
            Step::Fetch(f, offset) => {
                let leo = s.log_end_offset();
                let out = s.on_follower_fetch(BrokerId(f), Offset(offset), leo, self.now);
                self.proposals.extend(out.propose);
            }
            Step::Append(leo) => {
                s.on_leader_append(Offset(leo));
            }
            Step::Sleep(ms) => self.now += ms,
            Step::Shrink => self.proposals.extend(s.check_shrink(self.now)),
            Step::Commit => {
                let p = s.pending_proposal().expect("a change in flight to commit");
                s.on_isr_committed(p.new_isr, p.partition_epoch.next());
            }
            Step::Reject => s.on_isr_rejected(),
            Step::Eligible(f, e) => {
                s.set_isr_eligible(BrokerId(f), e);
            }
            Step::MetadataIsr(isr) => {
                let replicas = s.replicas().to_vec();
                let pe = s.partition_epoch().next();
                s.on_partition_state(replicas, ids(isr), pe);
            }
            Step::Tick => {
                s.maybe_advance_hw(self.now);
            }
        }
    }
}

struct Case {
    name: &'static str,
    replicas: &'static [i32],
    isr: &'static [i32],
    min_isr: usize,
    /// Leader's LEO at election (also the epoch start offset) and the HW it starts from.
    leo: i64,
    hw: i64,
    steps: &'static [Step],
    want_hw: i64,
    want_isr: &'static [i32],
    want_maximal: &'static [i32],
    /// Proposals returned over the run.
    want_proposals: usize,
}

use Step::*;

const CASES: &[Case] = &[
    // --- HW ---
    Case {
        name: "HW is the smallest LEO over the ISR",
        replicas: &[0, 1, 2],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 7), Fetch(2, 9)],
        want_hw: 7,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2],
        want_proposals: 0,
    },
    Case {
        name: "an ISR member that has not fetched yet holds the HW",
        replicas: &[0, 1, 2],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 7)],
        want_hw: 0,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2],
        want_proposals: 0,
    },
    Case {
        name: "the HW never moves back (a follower reports a smaller offset)",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 8), Fetch(1, 5)],
        want_hw: 8,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 0,
    },
    Case {
        name: "the HW the leader knew as follower is not lowered",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 6,
        steps: &[Fetch(1, 4)],
        want_hw: 6,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 0,
    },
    Case {
        name: "a lagging replica outside the ISR does not hold the HW",
        replicas: &[0, 1, 2],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(2, 3), Fetch(1, 10)],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 0,
    },
    Case {
        name: "ISR of the leader alone: the HW follows its appends",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Append(12)],
        want_hw: 12,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    Case {
        name: "a pending expansion counts for the HW (maximal ISR)",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Append(20)],
        want_hw: 10,
        want_isr: &[0],
        want_maximal: &[0, 1],
        want_proposals: 1,
    },
    // testHighWatermarkAdvanceShouldNotAdvanceWhenUnderMinISR
    Case {
        name: "under min ISR the HW waits, even when the maximal ISR is big enough",
        replicas: &[0, 1, 2],
        isr: &[0, 1],
        min_isr: 3,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Fetch(2, 10)],
        want_hw: 0,
        want_isr: &[0, 1],
        want_maximal: &[0, 1, 2],
        want_proposals: 1,
    },
    Case {
        name: "once the expansion to the min ISR commits, the HW moves",
        replicas: &[0, 1, 2],
        isr: &[0, 1],
        min_isr: 3,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Fetch(2, 10), Commit],
        want_hw: 10,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2],
        want_proposals: 1,
    },
    Case {
        name: "min.insync.replicas above the replica count is capped by it",
        replicas: &[0],
        isr: &[0],
        min_isr: 3,
        leo: 10,
        hw: 0,
        steps: &[Append(15)],
        want_hw: 15,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    // testHighWatermarkIncreasesWithFencedOrShutdownFollower, "unfenced"
    Case {
        name: "a caught-up eligible replica removed from the ISR still holds the HW",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Append(20), MetadataIsr(&[0])],
        want_hw: 10,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    // ... "fenced" / "shutdown"
    Case {
        name: "a fenced or shutting-down replica outside the ISR does not hold the HW",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[
            Fetch(1, 10),
            Eligible(1, false),
            Append(20),
            MetadataIsr(&[0]),
        ],
        want_hw: 20,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    Case {
        name: "a silent replica outside the ISR stops holding the HW once its lag expires",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[
            Fetch(1, 10),
            Append(20),
            MetadataIsr(&[0]),
            Sleep(LAG + 1),
            Tick,
        ],
        want_hw: 20,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    // --- ISR expansion ---
    // testIsrExpansion
    Case {
        name: "a follower below the HW is not added",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 3)],
        want_hw: 10,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    Case {
        name: "a follower at the HW is proposed, and joins when committed",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 3), Fetch(1, 10), Commit],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 1,
    },
    // testIsrNotExpandedIfReplicaIsFencedOrShutdown / InControlledShutdown
    Case {
        name: "refused expansion reverts; an ineligible follower is not proposed until back",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[
            Fetch(1, 10),
            Reject,
            Eligible(1, false),
            Fetch(1, 10),
            Eligible(1, true),
            Fetch(1, 10),
            Commit,
        ],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 2,
    },
    Case {
        name: "refused expansion leaves the committed ISR",
        replicas: &[0, 1],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Reject],
        want_hw: 10,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 1,
    },
    // testSingleInFlightAlterIsr
    Case {
        name: "no shrink is proposed while an expansion is in flight",
        replicas: &[0, 1, 2, 3],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(3, 10), Sleep(LAG + 1), Shrink],
        want_hw: 0,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2, 3],
        want_proposals: 1,
    },
    Case {
        name: "one expansion at a time: the second follower waits",
        replicas: &[0, 1, 2],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Fetch(2, 10)],
        want_hw: 10,
        want_isr: &[0],
        want_maximal: &[0, 1],
        want_proposals: 1,
    },
    // --- ISR shrink ---
    // testMaybeShrinkIsr
    Case {
        name: "ISR members are not shrunk right after the election",
        replicas: &[0, 1, 2],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Shrink],
        want_hw: 0,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2],
        want_proposals: 0,
    },
    Case {
        name: "a silent member is shrunk after the lag; the pending shrink still holds the HW",
        replicas: &[0, 1, 2],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Sleep(LAG + 1), Shrink],
        want_hw: 0,
        want_isr: &[0, 1, 2],
        want_maximal: &[0, 1, 2],
        want_proposals: 1,
    },
    Case {
        name: "when the shrink commits the HW moves",
        replicas: &[0, 1, 2],
        isr: &[0, 1, 2],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Sleep(LAG + 1), Shrink, Commit],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 1,
    },
    // testShouldNotShrinkIsrIfPreviousFetchIsCaughtUp
    Case {
        name: "not shrunk when each fetch reaches where the leader was at the previous one",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[
            Sleep(5_000),
            Fetch(1, 5),
            Sleep(LAG - 4_999),
            Append(15),
            Fetch(1, 10),
            Shrink,
        ],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 0,
    },
    Case {
        name: "shrunk when the follower never reaches the leader's earlier LEO",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[
            Sleep(5_000),
            Fetch(1, 5),
            Sleep(LAG - 4_999),
            Append(15),
            Fetch(1, 9),
            Shrink,
        ],
        want_hw: 9,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 1,
    },
    // testShouldNotShrinkIsrIfFollowerCaughtUpToLogEnd
    Case {
        name: "an idle partition: a follower at the leader's LEO is never shrunk",
        replicas: &[0, 1],
        isr: &[0, 1],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Fetch(1, 10), Sleep(LAG + 1), Shrink],
        want_hw: 10,
        want_isr: &[0, 1],
        want_maximal: &[0, 1],
        want_proposals: 0,
    },
    Case {
        name: "the leader is never shrunk, even alone",
        replicas: &[0],
        isr: &[0],
        min_isr: 1,
        leo: 10,
        hw: 0,
        steps: &[Sleep(10 * LAG), Append(11), Shrink],
        want_hw: 11,
        want_isr: &[0],
        want_maximal: &[0],
        want_proposals: 0,
    },
    // testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch is in its own
    // test below (it needs an epoch start below the LEO).
];

#[test]
fn scenarios() {
    for c in CASES {
        let mut run = Run::new(leader(c.replicas, c.isr, c.leo, c.hw, c.min_isr));
        for &s in c.steps {
            run.step(s);
        }
        let st = &run.state;
        assert_eq!(st.high_watermark(), Offset(c.want_hw), "{}: hw", c.name);
        assert_eq!(st.isr(), &ids(c.want_isr)[..], "{}: isr", c.name);
        assert_eq!(
            sorted(st.maximal_isr()),
            ids(c.want_maximal),
            "{}: maximal isr",
            c.name
        );
        assert_eq!(
            run.proposals.len(),
            c.want_proposals,
            "{}: proposals",
            c.name
        );
        for p in &run.proposals {
            assert!(p.new_isr.contains(&ME), "{}: the leader stays", c.name);
            assert_eq!(p.leader_epoch, LeaderEpoch(5), "{}", c.name);
        }
    }
}

// testFollowerDoesNotJoinISRUntilCaughtUpToOffsetWithinCurrentLeaderEpoch: committed data may
// sit between the HW and the epoch start; a follower must have it before it may join.
#[test]
fn follower_joins_only_from_the_epoch_start() {
    let mut s = leader_from(&[0, 1, 2], &[0, 2], 5, 7, 2, 1);
    for (offset, want) in [(0, false), (2, false), (4, false), (5, true)] {
        let out = s.on_follower_fetch(BrokerId(1), Offset(offset), Offset(7), T0);
        assert_eq!(out.propose.is_some(), want, "fetch at {offset}");
    }
    assert_eq!(sorted(s.maximal_isr()), ids(&[0, 1, 2]));
    assert_eq!(s.isr(), &ids(&[0, 2])[..]);
}

// ReplicaTest.testUpdateFetchState, with "no previous fetch" as NEVER_MS.
#[test]
fn caught_up_time_follows_kafkas_rule() {
    let mut s = leader(&[0, 1], &[0], 10, 0, 1);
    // (at, fetch offset, leader LEO, wanted last caught-up time)
    let steps = [
        (T0 + 100, 5, 10, NEVER_MS),  // behind, and no earlier fetch to credit
        (T0 + 200, 10, 15, T0 + 100), // reached the LEO of the previous fetch
        (T0 + 300, 12, 20, T0 + 100), // did not reach 15: nothing new
        (T0 + 400, 20, 20, T0 + 400), // at the LEO now
    ];
    for (at, offset, leo, want) in steps {
        s.on_follower_fetch(BrokerId(1), Offset(offset), Offset(leo), at);
        let f = s.follower(BrokerId(1)).copied().expect("follower");
        assert_eq!(f.last_caught_up_ms, want, "fetch {offset} at {at}");
        assert_eq!(f.log_end_offset, Offset(offset));
        assert_eq!(f.last_fetch_ms, at);
        assert_eq!(f.last_fetch_leader_leo, Offset(leo));
    }
}

// PartitionTest.testUpdateFollowerFetchState and ReplicaTest's reset cases.
#[test]
fn election_resets_followers() {
    let s = leader(&[0, 1, 2], &[0, 1], 6, 0, 1);
    let in_isr = s.follower(BrokerId(1)).copied().expect("in isr");
    assert_eq!(in_isr.log_end_offset, UNKNOWN_OFFSET);
    assert_eq!(in_isr.last_caught_up_ms, T0);
    let out = s.follower(BrokerId(2)).copied().expect("not in isr");
    assert_eq!(out.log_end_offset, UNKNOWN_OFFSET);
    assert_eq!(out.last_caught_up_ms, NEVER_MS);
    assert!(s.follower(ME).is_none(), "the leader is no follower");

    let mut s = s;
    s.on_follower_fetch(BrokerId(1), Offset(3), Offset(6), T0 + 500);
    assert_eq!(
        s.follower(BrokerId(1)).map(|f| f.last_caught_up_ms),
        Some(T0)
    );
    s.on_follower_fetch(BrokerId(1), Offset(6), Offset(6), T0 + 1_000);
    assert_eq!(
        s.follower(BrokerId(1)).map(|f| f.last_caught_up_ms),
        Some(T0 + 1_000)
    );
}

// ReplicaTest.testIsCaughtUpWhen...
#[test]
fn is_caught_up_table() {
    let fresh = FollowerState::reset(false, T0);
    let mut at_end = fresh;
    at_end.update_fetch(Offset(10), Offset(10), T0);
    let mut behind = fresh;
    behind.update_fetch(Offset(5), Offset(10), T0);
    behind.update_fetch(Offset(10), Offset(15), T0 + 10);
    // (state, leader LEO, now, want)
    let cases = [
        (fresh, 10, T0, false),
        (at_end, 10, T0, true),
        (at_end, 10, T0 + LAG + 1, true), // at the LEO: lag time does not matter
        (at_end, 11, T0 + LAG + 1, false),
        (behind, 16, T0 + 10, true), // caught up as of its first fetch
        (behind, 16, T0 + LAG + 1, false),
    ];
    for (i, (f, leo, now, want)) in cases.into_iter().enumerate() {
        assert_eq!(f.is_caught_up(Offset(leo), now, LAG), want, "case {i}");
    }
}

#[test]
fn initial_hw_is_clamped_to_the_leo_and_rf1_advances_on_append() {
    let mut s = leader(&[0], &[0], 5, 9, 1);
    assert_eq!(s.high_watermark(), Offset(5));
    assert_eq!(s.on_leader_append(Offset(7)), Some(Offset(7)));
    assert_eq!(s.on_leader_append(Offset(7)), None);
    assert_eq!(s.high_watermark(), Offset(7));
}

// testRetryShrinkIsr: a retriable failure resends the same proposal.
#[test]
fn pending_proposal_is_the_one_to_resend() {
    let mut s = leader(&[0, 1], &[0, 1], 10, 0, 1);
    assert_eq!(s.pending_proposal(), None);
    let p = s.check_shrink(T0 + LAG + 1).expect("shrink");
    assert_eq!(p.new_isr, ids(&[0]));
    assert_eq!(p.partition_epoch, PartitionEpoch(1));
    assert_eq!(s.pending_proposal(), Some(p.clone()));
    assert_eq!(s.high_watermark(), Offset(0));
    assert_eq!(
        s.on_isr_committed(p.new_isr, PartitionEpoch(2)),
        Some(Offset(10))
    );
    assert_eq!(s.partition_epoch(), PartitionEpoch(2));
    assert_eq!(s.pending(), &PendingIsrChange::None);
}

// handleAlterPartitionUpdate: an answer older than our partition epoch changes nothing.
#[test]
fn stale_or_unexpected_commits_are_ignored() {
    let mut s = leader(&[0, 1], &[0, 1], 10, 0, 1);
    s.on_partition_state(ids(&[0, 1]), ids(&[0, 1]), PartitionEpoch(3));
    let p = s.check_shrink(T0 + LAG + 1).expect("shrink");
    assert_eq!(p.partition_epoch, PartitionEpoch(3));
    assert_eq!(s.on_isr_committed(ids(&[0]), PartitionEpoch(2)), None);
    assert_eq!(s.isr(), &ids(&[0, 1])[..]);
    assert!(s.pending_proposal().is_some(), "still in flight");

    // testAlterIsrLeaderAndIsrRace: metadata overtakes the answer, which is then ignored.
    s.on_partition_state(ids(&[0, 1]), ids(&[0, 1]), PartitionEpoch(4));
    assert_eq!(s.pending(), &PendingIsrChange::None);
    assert_eq!(s.on_isr_committed(ids(&[0]), PartitionEpoch(5)), None);
    assert_eq!(s.isr(), &ids(&[0, 1])[..]);
    assert_eq!(s.partition_epoch(), PartitionEpoch(4));
    // and the leader may propose again
    assert!(s.check_shrink(T0 + LAG + 1).is_some());
}

// testIgnoreLeaderPartitionStateChangeWithOlderPartitionEpoch,
// testDoNotResetReplicaStateIfLeaderEpochIsNotBumped, testUpdateAssignmentAndIsr.
#[test]
fn partition_state_updates() {
    let mut s = leader(&[0, 1, 2], &[0, 1, 2], 10, 0, 1);
    s.on_follower_fetch(BrokerId(1), Offset(8), Offset(10), T0 + 5);
    let before = s.follower(BrokerId(1)).copied();

    assert_eq!(
        s.on_partition_state(ids(&[0]), ids(&[0]), PartitionEpoch(0)),
        None
    );
    assert_eq!(s.replicas(), &ids(&[0, 1, 2])[..], "older epoch ignored");

    // reassignment: 2 leaves, 3 arrives; 1 keeps its state
    s.on_partition_state(ids(&[0, 1, 3]), ids(&[0, 1]), PartitionEpoch(2));
    assert_eq!(s.follower(BrokerId(1)).copied(), before);
    assert!(s.follower(BrokerId(2)).is_none());
    let new = s.follower(BrokerId(3)).copied().expect("new replica");
    assert_eq!(new.log_end_offset, UNKNOWN_OFFSET);
    assert_eq!(new.last_caught_up_ms, NEVER_MS);
    assert!(s.is_follower(BrokerId(3)) && !s.is_follower(BrokerId(2)));
    assert_eq!(s.high_watermark(), Offset(8), "2 no longer holds it");

    // a fetch from a broker that is not a replica is ignored
    let out = s.on_follower_fetch(BrokerId(2), Offset(10), Offset(10), T0 + 6);
    assert_eq!(out, FetchOutcome::default());
    assert!(s.follower(BrokerId(2)).is_none());
}

// testIsUnderMinIsr, testAtMinIsr, appendRecordsToLeader's check.
#[test]
fn acks_all_admission() {
    let mut s = leader(&[0, 1], &[0, 1], 10, 0, 2);
    assert!(!s.under_min_isr());
    assert_eq!(s.check_acks_all_admission(), Ok(()));
    s.on_partition_state(ids(&[0, 1]), ids(&[0]), PartitionEpoch(2));
    assert!(s.under_min_isr());
    let err = s.check_acks_all_admission().expect_err("under min isr");
    assert_eq!(err, AcksAllError::NotEnoughReplicas { isr: 1, min: 2 });
    assert_eq!(err.response_error().code(), 19);

    // a pending expansion does not admit: Kafka checks the committed ISR
    s.on_follower_fetch(BrokerId(1), Offset(10), Offset(10), T0);
    assert_eq!(s.maximal_isr().len(), 2);
    assert!(s.check_acks_all_admission().is_err());
}

// checkEnoughReplicasReachOffset
#[test]
fn acks_all_completion() {
    let mut s = leader(&[0, 1, 2], &[0, 1, 2], 10, 0, 2);
    assert_eq!(s.acks_all_status(Offset(9)), AcksAllStatus::Pending);
    s.on_follower_fetch(BrokerId(1), Offset(10), Offset(10), T0);
    assert_eq!(
        s.acks_all_status(Offset(9)),
        AcksAllStatus::Pending,
        "2 not there"
    );
    s.on_follower_fetch(BrokerId(2), Offset(10), Offset(10), T0);
    assert_eq!(s.acks_all_status(Offset(9)), AcksAllStatus::Done(Ok(())));
    assert_eq!(
        s.acks_all_status(Offset(10)),
        AcksAllStatus::Pending,
        "HW is exclusive"
    );

    // 2 goes silent; once it is shrunk out, the ISR {0,1} still meets min 2
    s.on_leader_append(Offset(20));
    s.on_follower_fetch(BrokerId(1), Offset(20), Offset(20), T0 + LAG + 1);
    assert_eq!(s.acks_all_status(Offset(19)), AcksAllStatus::Pending);
    let p = s.check_shrink(T0 + LAG + 1).expect("2 is out of sync");
    assert_eq!(p.new_isr, ids(&[0, 1]));
    assert_eq!(
        s.on_isr_committed(p.new_isr, PartitionEpoch(2)),
        Some(Offset(20))
    );
    assert_eq!(s.acks_all_status(Offset(19)), AcksAllStatus::Done(Ok(())));

    // the ISR falls under the minimum after the HW passed the batch
    s.on_partition_state(ids(&[0, 1, 2]), ids(&[0]), PartitionEpoch(3));
    let want = AcksAllError::NotEnoughReplicasAfterAppend { isr: 1, min: 2 };
    assert_eq!(
        s.acks_all_status(Offset(19)),
        AcksAllStatus::Done(Err(want))
    );
    assert_eq!(want.response_error().code(), 20);
}

#[path = "leader_state_walk_tests.rs"]
mod walk;

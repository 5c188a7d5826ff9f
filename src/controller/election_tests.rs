//! Table tests in the spirit of Kafka's PartitionChangeBuilderTest.

use super::*;
use crate::model::{LeaderEpoch, PartitionEpoch};

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn partition(replicas: &[i32], isr: &[i32], leader: Option<i32>) -> PartitionState {
    PartitionState {
        replicas: ids(replicas),
        isr: ids(isr),
        leader: leader.map(BrokerId),
        leader_epoch: LeaderEpoch(5),
        partition_epoch: PartitionEpoch(9),
        slot: 0,
    }
}

struct Case {
    name: &'static str,
    replicas: &'static [i32],
    isr: &'static [i32],
    leader: Option<i32>,
    target_isr: &'static [i32],
    unfenced: &'static [i32],
    unclean: bool,
    want: Election,
}

const CASES: &[Case] = &[
    Case {
        name: "a valid leader is kept even if it is not the first replica",
        replicas: &[1, 2, 3],
        isr: &[1, 2, 3],
        leader: Some(2),
        target_isr: &[1, 2, 3],
        unfenced: &[1, 2, 3],
        unclean: false,
        want: Election::Kept(BrokerId(2)),
    },
    Case {
        name: "a fenced leader is replaced by the first ISR replica in assignment order",
        replicas: &[3, 1, 2],
        isr: &[1, 2, 3],
        leader: Some(3),
        target_isr: &[1, 2],
        unfenced: &[1, 2],
        unclean: false,
        want: Election::Clean(BrokerId(1)),
    },
    Case {
        name: "assignment order, not ISR order, decides",
        replicas: &[2, 1, 3],
        isr: &[1, 2, 3],
        leader: Some(3),
        target_isr: &[1, 2],
        unfenced: &[1, 2],
        unclean: false,
        want: Election::Clean(BrokerId(2)),
    },
    Case {
        name: "a leader leaving the ISR is replaced",
        replicas: &[1, 2, 3],
        isr: &[1, 2, 3],
        leader: Some(1),
        target_isr: &[2, 3],
        unfenced: &[1, 2, 3],
        unclean: false,
        want: Election::Clean(BrokerId(2)),
    },
    Case {
        name: "ISR members that are fenced are skipped",
        replicas: &[1, 2, 3],
        isr: &[1, 2, 3],
        leader: None,
        target_isr: &[1, 2, 3],
        unfenced: &[3],
        unclean: false,
        want: Election::Clean(BrokerId(3)),
    },
    Case {
        name: "no acceptable ISR member and unclean off: leaderless",
        replicas: &[1, 2, 3],
        isr: &[1],
        leader: Some(1),
        target_isr: &[1],
        unfenced: &[2, 3],
        unclean: false,
        want: Election::None,
    },
    Case {
        name: "no acceptable ISR member and unclean on: first live replica",
        replicas: &[1, 3, 2],
        isr: &[1],
        leader: Some(1),
        target_isr: &[1],
        unfenced: &[2, 3],
        unclean: true,
        want: Election::Unclean(BrokerId(3)),
    },
    Case {
        name: "unclean on but a clean choice exists: clean",
        replicas: &[1, 2, 3],
        isr: &[1, 3],
        leader: Some(1),
        target_isr: &[3],
        unfenced: &[2, 3],
        unclean: true,
        want: Election::Clean(BrokerId(3)),
    },
    Case {
        name: "nobody alive at all: leaderless even with unclean on",
        replicas: &[1, 2],
        isr: &[1, 2],
        leader: Some(1),
        target_isr: &[2],
        unfenced: &[],
        unclean: true,
        want: Election::None,
    },
];

#[test]
fn election_table() {
    for c in CASES {
        let p = partition(c.replicas, c.isr, c.leader);
        let unfenced = ids(c.unfenced);
        let got = elect(&p, &ids(c.target_isr), |b| unfenced.contains(&b), c.unclean);
        assert_eq!(got, c.want, "{}", c.name);
    }
}

fn change(
    p: &PartitionState,
    target_isr: &[i32],
    unfenced: &[i32],
    unclean: bool,
) -> Option<PartitionChange> {
    let unfenced = ids(unfenced);
    partition_change(
        Uuid::nil(),
        0,
        p,
        &ids(target_isr),
        |b| unfenced.contains(&b),
        unclean,
    )
}

#[test]
fn nothing_to_change_gives_no_record() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], Some(1));
    assert_eq!(change(&p, &[1, 2, 3], &[1, 2, 3], false), None);
}

#[test]
fn an_isr_shrink_keeps_the_leader_epoch_and_bumps_the_partition_epoch() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], Some(1));
    let c = change(&p, &[1, 2], &[1, 2], false).expect("a change");
    assert_eq!(c.leader, Some(BrokerId(1)));
    assert_eq!(c.isr, ids(&[1, 2]));
    assert_eq!(c.leader_epoch, LeaderEpoch(5));
    assert_eq!(c.partition_epoch, PartitionEpoch(10));
    assert_eq!(c.from_partition_epoch, PartitionEpoch(9));
}

#[test]
fn a_leader_change_bumps_both_epochs() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], Some(1));
    let c = change(&p, &[2, 3], &[2, 3], false).expect("a change");
    assert_eq!(c.leader, Some(BrokerId(2)));
    assert_eq!(c.leader_epoch, LeaderEpoch(6));
    assert_eq!(c.partition_epoch, PartitionEpoch(10));
}

#[test]
fn losing_the_last_isr_member_keeps_it_in_the_isr_without_a_leader() {
    let p = partition(&[1, 2], &[1], Some(1));
    let c = change(&p, &[], &[2], false).expect("a change");
    assert_eq!(c.leader, None);
    assert_eq!(c.isr, ids(&[1]));
    assert_eq!(c.leader_epoch, LeaderEpoch(6));
}

#[test]
fn the_last_isr_member_coming_back_leads_again() {
    let p = partition(&[1, 2], &[1], None);
    let c = change(&p, &[1], &[1, 2], false).expect("a change");
    assert_eq!(c.leader, Some(BrokerId(1)));
    assert_eq!(c.isr, ids(&[1]));
}

#[test]
fn an_unclean_election_resets_the_isr_to_the_new_leader() {
    let p = partition(&[1, 2, 3], &[1], Some(1));
    let c = change(&p, &[], &[2, 3], true).expect("a change");
    assert_eq!(c.leader, Some(BrokerId(2)));
    assert_eq!(c.isr, ids(&[2]));
}

#[test]
fn the_target_isr_is_kept_within_the_replicas_in_their_order() {
    let p = partition(&[3, 1, 2], &[3, 1, 2], Some(3));
    let c = change(&p, &[2, 9, 1], &[1, 2, 3], false).expect("a change");
    assert_eq!(c.isr, ids(&[1, 2]));
    assert_eq!(c.leader, Some(BrokerId(1)));
}

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn no_racks(v: &[i32]) -> Vec<(BrokerId, Option<&'static str>)> {
    v.iter().map(|i| (BrokerId(*i), None)).collect()
}

#[test]
fn replica_j_of_partition_i_is_on_broker_i_plus_j_mod_n() {
    let order = placement_order(&no_racks(&[3, 1, 2]));
    assert_eq!(order, ids(&[1, 2, 3]));
    let got = assign_replicas(&order, 0, 4, 2).expect("placed");
    let want: Vec<Vec<BrokerId>> = [[1, 2], [2, 3], [3, 1], [1, 2]]
        .iter()
        .map(|p| ids(p))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn new_partitions_continue_the_rotation() {
    let order = ids(&[1, 2, 3]);
    let got = assign_replicas(&order, 4, 2, 1).expect("placed");
    assert_eq!(got, vec![ids(&[2]), ids(&[3])]);
}

#[test]
fn replication_factor_beyond_the_live_brokers_is_refused() {
    let order = ids(&[1, 2]);
    for rf in [0, -1, 3] {
        let err = assign_replicas(&order, 0, 1, rf).expect_err("refused");
        assert_eq!(
            err,
            ControllerError::InvalidReplicationFactor {
                requested: rf,
                live: 2
            }
        );
        assert_eq!(err.code(), 38);
    }
    assert!(assign_replicas(&[], 0, 1, 1).is_err());
}

#[test]
fn racks_are_interleaved() {
    let brokers = [
        (BrokerId(1), Some("a")),
        (BrokerId(2), Some("a")),
        (BrokerId(3), Some("b")),
        (BrokerId(4), Some("b")),
        (BrokerId(5), Some("c")),
        (BrokerId(6), Some("c")),
    ];
    assert_eq!(placement_order(&brokers), ids(&[1, 3, 5, 2, 4, 6]));
}

#[test]
fn brokers_without_a_rack_form_their_own_group() {
    let brokers = [
        (BrokerId(1), Some("a")),
        (BrokerId(2), None),
        (BrokerId(3), Some("a")),
    ];
    assert_eq!(placement_order(&brokers), ids(&[2, 1, 3]));
}

#[test]
fn manual_assignments_are_checked() {
    let registered = |b: BrokerId| (1..=3).contains(&b.0);
    assert!(check_manual_assignment(&[ids(&[1, 2]), ids(&[2, 3])], registered).is_ok());
    for bad in [
        vec![],
        vec![ids(&[1, 2]), ids(&[3])],
        vec![ids(&[1, 1])],
        vec![ids(&[1, 9])],
        vec![ids(&[])],
    ] {
        let err = check_manual_assignment(&bad, registered).expect_err("refused");
        assert_eq!(err.code(), 39, "{bad:?}");
    }
}

proptest! {
    /// With equal racks and RF ≤ racks, every partition's replicas are on distinct racks.
    #[test]
    fn equal_racks_give_distinct_racks_per_partition(
        racks in 1usize..5,
        per_rack in 1usize..4,
        partitions in 1usize..20,
        first in 0usize..10,
        rf_seed in 0usize..5,
    ) {
        let rack_names = ["r0", "r1", "r2", "r3", "r4"];
        let brokers: Vec<(BrokerId, Option<&str>)> = (0..racks * per_rack)
            .map(|i| (BrokerId(i as i32 * 7 % 31), Some(rack_names[i % racks])))
            .collect();
        let rack_of = |b: BrokerId| brokers.iter().find(|(id, _)| *id == b).and_then(|(_, r)| *r);
        let order = placement_order(&brokers);
        prop_assert_eq!(order.len(), brokers.len());
        let rf = 1 + rf_seed % racks;
        let placed = assign_replicas(&order, first, partitions, rf as i32).expect("placed");
        for replicas in placed {
            let distinct: BTreeSet<_> = replicas.iter().map(|b| rack_of(*b)).collect();
            prop_assert_eq!(distinct.len(), rf);
        }
    }

    /// Without racks each broker gets an equal share (±1) of each replica position.
    #[test]
    fn leaders_spread_evenly(n in 1i32..8, partitions in 1usize..40) {
        let order: Vec<BrokerId> = (0..n).map(BrokerId).collect();
        let placed = assign_replicas(&order, 0, partitions, 1).expect("placed");
        let counts: Vec<usize> = order
            .iter()
            .map(|b| placed.iter().filter(|r| r[0] == *b).count())
            .collect();
        let (min, max) = (counts.iter().min(), counts.iter().max());
        prop_assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1));
    }
}

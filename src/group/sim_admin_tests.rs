//! Coordinator simulations, continued: snapshots and restarts, loading, the admin APIs
//! (ListGroups, DescribeGroups, DeleteGroups, OffsetDelete), offset expiry, and randomized
//! membership churn checked against the invariants.

use super::*;

#[test]
fn snapshot_replay_restores_groups_and_offsets() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    run(&mut sim, &mut clients, 5_000);
    let t = sim.commit("simple", "", -1, 2, 9);
    assert_eq!(sim.commit_codes(t), vec![0]);
    let generation = sim.generation("g");
    let offsets_g = sim.fetch("g");
    assert!(!offsets_g.is_empty());
    let restore = |records: Vec<(i32, Vec<OffsetsRecord>)>| {
        let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
        for (p, recs) in records {
            coord.begin_load(p);
            for r in recs {
                coord.replay(p, &r.key, r.value.as_deref()).unwrap();
            }
            coord.finish_load(p, 1_000_000);
        }
        coord
    };
    let snapshot: Vec<(i32, Vec<OffsetsRecord>)> = (0..PARTITIONS)
        .map(|p| (p, sim.coord.snapshot_records(p).unwrap_or_default()))
        .collect();
    let full_log: Vec<(i32, Vec<OffsetsRecord>)> = (0..PARTITIONS)
        .map(|p| (p, sim.log.get(&p).cloned().unwrap_or_default()))
        .collect();
    for coord in [restore(snapshot), restore(full_log)] {
        let mut restored = Sim::new();
        restored.coord = coord;
        restored.now = 1_000_000;
        assert_eq!(restored.generation("g"), generation);
        assert_eq!(restored.state("g"), Some(GroupState::Stable));
        assert_eq!(restored.fetch("g"), offsets_g);
        assert_eq!(restored.fetch("simple"), BTreeMap::from([(2, 9)]));
        // The members carry on in the restored generation.
        let id = &clients[0].member_id;
        assert_eq!(restored.heartbeat("g", id, generation), 0);
        let t = restored.call(sync_call("g", id, generation, vec![]));
        let sync = restored.sync_reply(t);
        assert_eq!(
            decode_assignment(&sync.assignment).unwrap().1,
            clients[0].assignment
        );
    }
}

#[test]
fn empty_group_generation_survives_restart() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    clients[0].leave(&mut sim);
    assert_eq!(
        (sim.state("g"), sim.generation("g")),
        (Some(GroupState::Empty), 2)
    );
    let p = sim.coord.groups["g"].partition;
    let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
    coord.begin_load(p);
    for r in &sim.log[&p] {
        coord.replay(p, &r.key, r.value.as_deref()).unwrap();
    }
    coord.finish_load(p, 0);
    assert_eq!(coord.groups["g"].generation, 2);
    assert_eq!(coord.groups["g"].state, GroupState::Empty);
}

#[test]
fn loading_and_foreign_partitions() {
    let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
    let p = crate::group::api::offsets_partition_for("g", PARTITIONS);
    let mut out = coord.handle(1, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::NotCoordinator))
    );
    coord.begin_load(p);
    out = coord.handle(2, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::CoordinatorLoadInProgress))
    );
    out = coord.handle(
        3,
        Call::ListGroups {
            states_filter: vec![],
        },
        0,
    );
    assert!(
        matches!(&out.replies[0].1, Reply::ListGroups(r) if r.error == code(ResponseError::CoordinatorLoadInProgress))
    );
    // Unknown record types are skipped; garbage is an error.
    assert!(coord.replay(p, &[0, 9, 0, 0], Some(b"whatever")).is_ok());
    assert!(coord.replay(p, &[0, 1, 0x7f], None).is_err());
    assert!(coord.replay(p + 1, &[0, 2, 0, 1, b'g'], None).is_err());
    coord.finish_load(p, 0);
    out = coord.handle(4, join_call("g", "c", "", None), 0);
    assert!(
        matches!(&out.replies[0].1, Reply::Join(r) if r.error == code(ResponseError::MemberIdRequired))
    );
}

#[test]
fn list_groups_filters_by_state_case_insensitively() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "busy")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.commit("idle", "", -1, 0, 1);
    sim.take(t);
    let mut list = |filter: &[&str]| {
        let t = sim.call(Call::ListGroups {
            states_filter: filter.iter().map(|s| s.to_string()).collect(),
        });
        match sim.take(t) {
            Some(Reply::ListGroups(r)) => {
                r.groups.into_iter().map(|g| g.group_id).collect::<Vec<_>>()
            }
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(list(&[]), vec!["busy", "idle"]);
    assert_eq!(list(&["stable"]), vec!["busy"]);
    assert_eq!(list(&["EMPTY"]), vec!["idle"]);
    assert_eq!(list(&["Stable", "Empty"]), vec!["busy", "idle"]);
    assert!(list(&["Dead"]).is_empty());
}

#[test]
fn describe_groups() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.call(Call::DescribeGroups {
        group_ids: vec!["g".into(), "unknown".into()],
    });
    let Some(Reply::DescribeGroups(d)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        (d[0].state.as_str(), d[0].protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(d[0].protocol_type, "consumer");
    assert_eq!(d[0].members.len(), 1);
    assert_eq!(d[0].members[0].member_id, clients[0].member_id);
    assert_eq!(d[0].members[0].metadata, encode_subscription(&[TOPIC]));
    assert!(!d[0].members[0].assignment.is_empty());
    assert_eq!((d[1].state.as_str(), d[1].error), ("Dead", 0));
}

#[test]
fn delete_groups() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "busy")];
    settle(&mut sim, &mut clients, 30_000);
    for (group, p) in [("idle", 0), ("idle", 1), ("other", 0)] {
        let t = sim.commit(group, "", -1, p, 1);
        sim.take(t);
    }
    sim.hold_appends = true;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["busy".into(), "nope".into(), "idle".into(), "other".into()],
    });
    assert!(sim.take(t).is_none(), "waits for the tombstones");
    assert_eq!(sim.state("idle"), Some(GroupState::Dead));
    let tombstones: usize = sim.held.iter().map(|a| a.records.len()).sum();
    assert_eq!(
        tombstones,
        2 + 1 + 2,
        "offsets and group metadata of both groups"
    );
    assert!(sim
        .held
        .iter()
        .flat_map(|a| &a.records)
        .all(|r| r.value.is_none()));
    sim.complete_held(true);
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![
            ("busy".into(), code(ResponseError::NonEmptyGroup)),
            ("nope".into(), code(ResponseError::GroupIdNotFound)),
            ("idle".into(), 0),
            ("other".into(), 0),
        ]
    );
    assert_eq!(sim.state("idle"), None);
    assert!(sim.fetch("idle").is_empty());
    sim.hold_appends = false;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["idle".into()],
    });
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![("idle".into(), code(ResponseError::GroupIdNotFound))]
    );
}

#[test]
fn failed_delete_keeps_the_group() {
    let mut sim = Sim::new();
    let t = sim.commit("idle", "", -1, 0, 1);
    sim.take(t);
    sim.fail_appends = true;
    let t = sim.call(Call::DeleteGroups {
        group_ids: vec!["idle".into()],
    });
    let Some(Reply::DeleteGroups(r)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(
        r,
        vec![("idle".into(), code(ResponseError::CoordinatorNotAvailable))]
    );
    assert_eq!(sim.state("idle"), Some(GroupState::Empty));
    assert_eq!(sim.fetch("idle"), BTreeMap::from([(0, 1)]));
}

#[test]
fn offset_delete() {
    let mut sim = Sim::new();
    let delete = |sim: &mut Sim, group: &str, topics: &[(&str, i32)]| {
        let t = sim.call(Call::OffsetDelete(OffsetDeleteCall {
            group_id: group.into(),
            partitions: topics.iter().map(|(t, p)| (t.to_string(), *p)).collect(),
        }));
        match sim.take(t) {
            Some(Reply::OffsetDelete(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        delete(&mut sim, "nope", &[("t", 0)]).error,
        code(ResponseError::GroupIdNotFound)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let id = clients[0].member_id.clone();
    let generation = sim.generation("g");
    for (topic, p) in [(TOPIC, 0), ("old", 0)] {
        let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
            group_id: "g".into(),
            generation_id: generation,
            member_id: id.clone(),
            group_instance_id: None,
            offsets: vec![OffsetToCommit {
                topic: topic.into(),
                partition: p,
                offset: 3,
                leader_epoch: -1,
                metadata: None,
                commit_timestamp: None,
            }],
        }));
        assert_eq!(sim.commit_codes(t), vec![0]);
    }
    let r = delete(&mut sim, "g", &[(TOPIC, 0), ("old", 0)]);
    assert_eq!(r.error, 0);
    assert_eq!(
        r.partitions,
        vec![
            (TOPIC.into(), 0, code(ResponseError::GroupSubscribedToTopic)),
            ("old".into(), 0, 0)
        ]
    );
    let t = sim.call(Call::OffsetFetch(OffsetFetchCall {
        group_id: "g".into(),
        partitions: Some(vec![("old".into(), 0), (TOPIC.into(), 0)]),
    }));
    let Some(Reply::OffsetFetch(f)) = sim.take(t) else {
        panic!()
    };
    assert_eq!(f.partitions[0].offset, -1);
    assert_eq!(f.partitions[1].offset, 3);
    // Once empty, any topic's offsets can go.
    clients[0].leave(&mut sim);
    let r = delete(&mut sim, "g", &[(TOPIC, 0)]);
    assert_eq!(r.partitions, vec![(TOPIC.into(), 0, 0)]);
    assert!(sim.fetch("g").is_empty());
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention() {
    let mut sim = Sim::new();
    let retention = config().offsets_retention_ms;
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.commit("g", &clients[0].member_id, sim.generation("g"), 0, 5);
    assert_eq!(sim.commit_codes(t), vec![0]);
    clients[0].phase = Phase::Gone;
    sim.advance(i64::from(SESSION_MS) + 1_000);
    assert_eq!(sim.state("g"), Some(GroupState::Empty));
    let empty_since = sim.coord.groups["g"].state_since_ms.unwrap();
    sim.advance(retention - 700_000);
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 5)]));
    sim.advance(empty_since + retention + 700_000 - sim.now);
    assert_eq!(sim.state("g"), None, "the group went with its last offset");
    let p = crate::group::api::offsets_partition_for("g", PARTITIONS);
    let last = sim.log[&p].iter().rev().take(2).collect::<Vec<_>>();
    assert!(last.iter().all(|r| r.value.is_none()));
}

#[test]
fn simple_consumer_offsets_expire_by_commit_time() {
    let mut sim = Sim::new();
    let retention = config().offsets_retention_ms;
    let t = sim.commit("simple", "", -1, 0, 1);
    sim.take(t);
    sim.advance(retention / 2);
    let t = sim.commit("simple", "", -1, 1, 1);
    sim.take(t);
    sim.advance(retention / 2 + OFFSETS_CHECK_MS);
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(1, 1)]));
}

const OFFSETS_CHECK_MS: i64 = crate::group::coordinator::OFFSETS_RETENTION_CHECK_INTERVAL_MS;

fn check_invariants(sim: &Sim, clients: &[Client], generations: &mut HashMap<String, i32>) {
    for group in sim.coord.groups.values() {
        let last = generations
            .entry(group.id.clone())
            .or_insert(group.generation);
        assert!(
            group.generation >= *last,
            "generation went back in {}",
            group.id
        );
        *last = group.generation;
        if group.state == GroupState::Stable {
            let mut seen = BTreeSet::new();
            for m in &group.members {
                if let Some((generation, partitions)) = decode_assignment(&m.assignment) {
                    assert_eq!(
                        generation, group.generation,
                        "stale assignment in a stable group"
                    );
                    for p in partitions {
                        assert!(seen.insert(p), "partition {p} assigned twice");
                    }
                }
            }
        }
    }
    // Clients consuming in the current generation never share a partition.
    let current = sim.generation("g");
    let mut owned = BTreeSet::new();
    for c in clients
        .iter()
        .filter(|c| c.phase == Phase::Stable && c.generation == current)
    {
        for p in &c.assignment {
            assert!(
                owned.insert(*p),
                "partition {p} consumed twice: {clients:#?}"
            );
        }
    }
}

#[test]
fn randomized_membership_churn_keeps_invariants() {
    for seed in 1..=12u64 {
        let mut rng = Rng::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut sim = Sim::new();
        // Appends finish a few ticks later, some fail.
        sim.hold_appends = true;
        let mut clients: Vec<Client> = Vec::new();
        let mut generations = HashMap::default();
        let mut next_client = 0;
        for _ in 0..3_000 {
            if rng.chance(15) || clients.is_empty() {
                let mut c = Client::new(&format!("c{next_client}"), "g");
                if rng.chance(300) {
                    c.instance_id = Some(format!("i{next_client}"));
                }
                next_client += 1;
                clients.push(c);
            }
            let live: Vec<usize> = (0..clients.len())
                .filter(|&i| clients[i].phase != Phase::Gone)
                .collect();
            if live.len() > 1 && rng.chance(10) {
                let i = live[(rng.next_u64() % live.len() as u64) as usize];
                match (rng.next_u64() % 3, clients[i].instance_id.clone()) {
                    (0, _) => clients[i].leave(&mut sim),
                    // A static member restarts: a new process with the same instance id.
                    (1, Some(instance)) => {
                        clients[i].phase = Phase::Gone;
                        let mut c = Client::new(&clients[i].name.clone(), "g");
                        c.instance_id = Some(instance);
                        clients.push(c);
                    }
                    _ => clients[i].phase = Phase::Gone, // crash
                }
            }
            let ready = rng.next_u64() % (sim.held.len() as u64 + 1);
            for append in sim.held.drain(..ready as usize).collect::<Vec<_>>() {
                let ok = !rng.chance(50);
                sim.complete(append, ok);
            }
            for c in clients.iter_mut() {
                c.step(&mut sim);
            }
            check_invariants(&sim, &clients, &mut generations);
            // Committed offsets are exactly the last acknowledged commit per partition.
            let acked = sim.acked.clone();
            assert_eq!(sim.fetch("g"), acked, "seed {seed}");
            sim.advance(TICK_MS);
        }
        // Calm down: the survivors converge on one generation covering every partition.
        sim.hold_appends = false;
        sim.complete_held(true);
        clients.retain(|c| c.phase != Phase::Gone);
        settle(&mut sim, &mut clients, 120_000);
        assert_disjoint_cover(&clients);
        check_invariants(&sim, &clients, &mut generations);
        run(&mut sim, &mut clients, 3_000);
        assert_eq!(sim.fetch("g"), sim.acked, "seed {seed}");
    }
}

#[test]
fn unload_answers_waiting_requests_with_not_coordinator() {
    let mut sim = Sim::new();
    let (_, t) = join_new(&mut sim, "g", "c0");
    let p = crate::group::api::offsets_partition_for("g", PARTITIONS);
    let out = sim.coord.unload(p);
    sim.absorb(out);
    assert_eq!(sim.join_reply(t).error, code(ResponseError::NotCoordinator));
    assert_eq!(sim.state("g"), None);
    assert_eq!(
        sim.heartbeat("g", "m", 1),
        code(ResponseError::NotCoordinator)
    );
}

mod replayed_values {
    use super::*;
    use crate::group::records::{
        encode_group_metadata_key, encode_offset_commit_key, GroupMetadataValue,
        MemberMetadataValue, OffsetCommitValue,
    };
    use proptest::prelude::*;

    proptest! {
        /// Whatever numbers a replayed record holds, the coordinator keeps working.
        #[test]
        fn odd_replayed_values_never_panic(
            generation in any::<i32>(),
            state_ts in any::<i64>(),
            timeouts in proptest::collection::vec((any::<i32>(), any::<i32>()), 0..4),
            commit_ts in any::<i64>(),
            expire_ts in proptest::option::of(any::<i64>()),
            now in 0i64..i64::MAX / 4,
        ) {
            let group = "g";
            let p = offsets_partition_for(group, PARTITIONS);
            let value = GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation,
                protocol: Some("range".into()),
                leader: Some("m0".into()),
                current_state_timestamp: state_ts,
                members: timeouts
                    .iter()
                    .enumerate()
                    .map(|(i, (rebalance, session))| MemberMetadataValue {
                        member_id: format!("m{i}"),
                        group_instance_id: None,
                        client_id: "c".into(),
                        client_host: "h".into(),
                        rebalance_timeout_ms: *rebalance,
                        session_timeout_ms: *session,
                        subscription: Bytes::from_static(b"\xff"),
                        assignment: Bytes::new(),
                    })
                    .collect(),
            };
            let offset = OffsetCommitValue {
                offset: 1,
                leader_epoch: -1,
                metadata: String::new(),
                commit_timestamp: commit_ts,
                expire_timestamp: expire_ts,
            };
            let mut coord = GroupCoordinator::with_member_ids(config(), counting_member_ids());
            coord.begin_load(p);
            coord.replay(p, &encode_group_metadata_key(group), Some(&value.encode())).unwrap();
            coord
                .replay(p, &encode_offset_commit_key(group, TOPIC, 0), Some(&offset.encode()))
                .unwrap();
            coord.finish_load(p, now);
            for dt in [0, 100, 1_000_000, i64::MAX / 4] {
                let _ = coord.tick(now + dt);
                let _ = coord.next_deadline();
                let _ = coord.handle(1, join_call(group, "c", "m0", None), now + dt);
                let _ = coord.handle(2, sync_call(group, "m0", generation, vec![]), now + dt);
                let _ = coord.snapshot_records(p);
            }
        }
    }
}

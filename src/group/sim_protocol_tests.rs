//! Coordinator simulations, continued: offset commits and their validation, failed stores,
//! and the errors of JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

use super::*;

#[test]
fn commits_during_rebalance() {
    let mut sim = Sim::new();
    let mut clients: Vec<Client> = (0..2).map(|i| Client::new(&format!("c{i}"), "g")).collect();
    settle(&mut sim, &mut clients, 30_000);
    let generation = sim.generation("g");
    let (a, b) = (clients[0].member_id.clone(), clients[1].member_id.clone());
    // A third member starts a rebalance: commits with the current generation still pass.
    let (_c, t_c) = join_new(&mut sim, "g", "c2");
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
    let t = sim.commit("g", &a, generation, 0, 5);
    assert_eq!(sim.commit_codes(t), vec![0]);
    assert_eq!(
        sim.heartbeat("g", &a, generation),
        code(ResponseError::RebalanceInProgress)
    );
    // Both old members rejoin; the join phase completes.
    let t_a = sim.call(join_call("g", "c0", &a, None));
    let t_b = sim.call(join_call("g", "c1", &b, None));
    for t in [t_a, t_b, t_c] {
        assert_eq!(sim.join_reply(t).generation_id, generation + 1);
    }
    assert_eq!(sim.state("g"), Some(GroupState::CompletingRebalance));
    // The old generation is refused; the new one must wait for its assignment.
    let t = sim.commit("g", &a, generation, 0, 6);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let t = sim.commit("g", &a, generation + 1, 0, 6);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::RebalanceInProgress)]
    );
    // Heartbeats are fine while assignments are computed (Kafka resets the session).
    assert_eq!(sim.heartbeat("g", &b, generation + 1), 0);
    assert_eq!(sim.fetch("g"), BTreeMap::from([(0, 5)]));
}

#[test]
fn commit_is_visible_only_after_its_append() {
    let mut sim = Sim::new();
    sim.hold_appends = true;
    let t = sim.commit("simple", "", -1, 3, 100);
    assert!(sim.take(t).is_none());
    assert_eq!(sim.held.len(), 1);
    assert_eq!(sim.held[0].records.len(), 1);
    assert!(sim.fetch("simple").is_empty());
    sim.complete_held(true);
    assert_eq!(sim.commit_codes(t), vec![0]);
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(3, 100)]));
    // A simple consumer's group is Empty with no protocol type.
    let t = sim.call(Call::ListGroups {
        states_filter: vec![],
    });
    match sim.take(t) {
        Some(Reply::ListGroups(r)) => assert_eq!(
            r.groups,
            vec![ListedGroup {
                group_id: "simple".into(),
                protocol_type: String::new(),
                state: "Empty".into()
            }]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn failed_commit_append_is_an_error_and_not_visible() {
    let mut sim = Sim::new();
    let t = sim.commit("simple", "", -1, 0, 1);
    assert_eq!(sim.commit_codes(t), vec![0]);
    sim.fail_appends = true;
    let t = sim.commit("simple", "", -1, 0, 2);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::CoordinatorNotAvailable)]
    );
    assert_eq!(sim.fetch("simple"), BTreeMap::from([(0, 1)]));
}

#[test]
fn commit_validation() {
    let mut sim = Sim::new();
    // Unknown group with a generation: a member of a lost generation.
    let t = sim.commit("g", "m", 3, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::IllegalGeneration)]
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    // A non-member cannot commit to a group with members.
    let t = sim.commit("g", "", -1, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::UnknownMemberId)]
    );
    let t = sim.commit("g", "nobody", 1, 0, 1);
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::UnknownMemberId)]
    );
    // Oversized metadata fails only its partition.
    let id = clients[0].member_id.clone();
    let t = sim.call(Call::OffsetCommit(OffsetCommitCall {
        group_id: "g".into(),
        generation_id: 1,
        member_id: id,
        group_instance_id: None,
        offsets: vec![
            OffsetToCommit {
                topic: TOPIC.into(),
                partition: 0,
                offset: 7,
                leader_epoch: 3,
                metadata: Some("x".repeat(4097)),
                commit_timestamp: None,
            },
            OffsetToCommit {
                topic: TOPIC.into(),
                partition: 1,
                offset: 8,
                leader_epoch: 3,
                metadata: None,
                commit_timestamp: None,
            },
        ],
    }));
    assert_eq!(
        sim.commit_codes(t),
        vec![code(ResponseError::OffsetMetadataTooLarge), 0]
    );
    assert_eq!(sim.fetch("g"), BTreeMap::from([(1, 8)]));
}

#[test]
fn failed_assignment_store_errors_syncs_and_rebalances() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (b, t_b) = join_new(&mut sim, "g", "c1");
    // The initial delay is extended once because a second member came.
    sim.advance(6_100);
    let ja = sim.join_reply(t_a);
    let jb = sim.join_reply(t_b);
    assert_eq!(ja.leader, a);
    assert!(
        jb.members.is_empty(),
        "followers do not get the member list"
    );
    sim.hold_appends = true;
    let t_follower = sim.call(sync_call("g", &b, 1, vec![]));
    let t_leader = sim.call(sync_call("g", &a, 1, round_robin(1, &ja.members)));
    assert_eq!(sim.held.len(), 1, "one append for the whole assignment");
    assert!(sim.take(t_follower).is_none());
    sim.complete_held(false);
    for t in [t_follower, t_leader] {
        assert_eq!(
            sim.sync_reply(t).error,
            code(ResponseError::CoordinatorNotAvailable)
        );
    }
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn members_left_out_by_the_leader_get_empty_assignments() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (b, t_b) = join_new(&mut sim, "g", "c1");
    // The initial delay is extended once because a second member came.
    sim.advance(6_100);
    sim.join_reply(t_a);
    sim.join_reply(t_b);
    let t_leader = sim.call(sync_call(
        "g",
        &a,
        1,
        vec![(a.clone(), encode_assignment(1, &[0]))],
    ));
    assert_eq!(sim.sync_reply(t_leader).error, 0);
    let t = sim.call(sync_call("g", &b, 1, vec![]));
    let sync = sim.sync_reply(t);
    assert_eq!((sync.error, sync.assignment.len()), (0, 0));
}

#[test]
fn member_that_never_syncs_is_removed() {
    let mut sim = Sim::new();
    let (a, t_a) = join_new(&mut sim, "g", "c0");
    let (_b, t_b) = join_new(&mut sim, "g", "c1");
    sim.advance(6_100);
    let ja = sim.join_reply(t_a);
    sim.join_reply(t_b);
    let t = sim.call(sync_call("g", &a, 1, round_robin(1, &ja.members)));
    assert_eq!(sim.sync_reply(t).error, 0);
    // c1 vanished before syncing: the sync deadline (the rebalance timeout) removes it.
    for _ in 0..(i64::from(REBALANCE_MS) / HEARTBEAT_MS) {
        sim.advance(HEARTBEAT_MS);
        let _ = sim.heartbeat("g", &a, sim.generation("g"));
    }
    assert_eq!(sim.coord.groups["g"].members.len(), 1);
    assert_eq!(sim.state("g"), Some(GroupState::PreparingRebalance));
}

#[test]
fn unused_member_id_expires_and_unblocks_the_join() {
    let mut sim = Sim::new();
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let a = clients[0].member_id.clone();
    // A new client gets an id but never comes back; the leader's rejoin waits for it.
    let t = sim.call(join_call("g", "ghost", "", None));
    assert_eq!(
        sim.join_reply(t).error,
        code(ResponseError::MemberIdRequired)
    );
    let t = sim.call(join_call("g", "c0", &a, None));
    sim.advance(i64::from(SESSION_MS) - 200);
    assert!(sim.take(t).is_none());
    sim.advance(400);
    let join = sim.join_reply(t);
    assert_eq!((join.error, join.members.len()), (0, 1));
}

#[test]
fn initial_delay_is_extended_by_new_members_up_to_the_rebalance_timeout() {
    let mut sim = Sim::new();
    let (_, t0) = join_new(&mut sim, "g", "c0");
    sim.advance(2_000);
    let (_, t1) = join_new(&mut sim, "g", "c1");
    sim.advance(1_100); // first delay over: extended because c1 came
    assert!(sim.take(t0).is_none());
    sim.advance(3_000);
    assert_eq!(sim.join_reply(t0).members.len(), 2);
    assert_eq!(sim.join_reply(t1).generation_id, 1);
}

#[test]
fn join_validation() {
    let mut sim = Sim::new();
    let join = |sim: &mut Sim, call: Call| {
        let t = sim.call(call);
        sim.join_reply(t).error
    };
    assert_eq!(
        join(&mut sim, join_call("", "c", "", None)),
        code(ResponseError::InvalidGroupId)
    );
    let Call::Join(mut bad_session) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    bad_session.session_timeout_ms = 10;
    assert_eq!(
        join(&mut sim, Call::Join(bad_session)),
        code(ResponseError::InvalidSessionTimeout)
    );
    assert_eq!(
        join(&mut sim, join_call("g", "c", "who", None)),
        code(ResponseError::UnknownMemberId)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let Call::Join(mut other_type) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    other_type.protocol_type = "connect".into();
    assert_eq!(
        join(&mut sim, Call::Join(other_type)),
        code(ResponseError::InconsistentGroupProtocol)
    );
    let Call::Join(mut other_protocol) = join_call("g", "c", "", None) else {
        unreachable!()
    };
    other_protocol.protocols = vec![("sticky".into(), Bytes::new())];
    assert_eq!(
        join(&mut sim, Call::Join(other_protocol)),
        code(ResponseError::InconsistentGroupProtocol)
    );
    assert_eq!(
        join(&mut sim, join_call("g", "c", "who", None)),
        code(ResponseError::UnknownMemberId)
    );
}

#[test]
fn group_max_size_is_enforced() {
    let mut sim = Sim::new();
    sim.coord.config.max_size = 1;
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let t = sim.call(join_call("g", "c1", "", None));
    let id = sim.join_reply(t).member_id;
    let t = sim.call(join_call("g", "c1", &id, None));
    assert_eq!(
        sim.join_reply(t).error,
        code(ResponseError::GroupMaxSizeReached)
    );
}

#[test]
fn heartbeat_and_sync_errors() {
    let mut sim = Sim::new();
    assert_eq!(
        sim.heartbeat("nope", "m", 1),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        sim.heartbeat("", "m", 1),
        code(ResponseError::InvalidGroupId)
    );
    let mut clients = vec![Client::new("c0", "g")];
    settle(&mut sim, &mut clients, 30_000);
    let id = clients[0].member_id.clone();
    assert_eq!(
        sim.heartbeat("g", &id, 7),
        code(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        sim.heartbeat("g", "other", 1),
        code(ResponseError::UnknownMemberId)
    );
    let t = sim.call(sync_call("g", &id, 7, vec![]));
    assert_eq!(
        sim.sync_reply(t).error,
        code(ResponseError::IllegalGeneration)
    );
    let Call::Sync(mut wrong) = sync_call("g", &id, 1, vec![]) else {
        unreachable!()
    };
    wrong.protocol_name = Some("roundrobin".into());
    let t = sim.call(Call::Sync(wrong));
    assert_eq!(
        sim.sync_reply(t).error,
        code(ResponseError::InconsistentGroupProtocol)
    );
}

#[test]
fn leave_errors() {
    let mut sim = Sim::new();
    let t = sim.call(Call::Leave(LeaveCall {
        group_id: "nope".into(),
        members: vec![("m".into(), None)],
    }));
    match sim.take(t) {
        Some(Reply::Leave(r)) => {
            assert_eq!(r.error, 0);
            assert_eq!(
                r.members,
                vec![("m".into(), None, code(ResponseError::UnknownMemberId))]
            );
        }
        other => panic!("{other:?}"),
    }
    let mut clients = vec![Client::new("c0", "g")];
    clients[0].instance_id = Some("i0".into());
    settle(&mut sim, &mut clients, 30_000);
    // Removal by instance id alone (admin), next to an unknown member.
    let t = sim.call(Call::Leave(LeaveCall {
        group_id: "g".into(),
        members: vec![("x".into(), None), (String::new(), Some("i0".into()))],
    }));
    match sim.take(t) {
        Some(Reply::Leave(r)) => {
            let codes: Vec<i16> = r.members.iter().map(|m| m.2).collect();
            assert_eq!(codes, vec![code(ResponseError::UnknownMemberId), 0]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(sim.state("g"), Some(GroupState::Empty));
}

//! Consumer groups against the real broker over raw Kafka requests: committed offsets survive
//! SIGKILL once acknowledged and a restart with another `offsets.topic.num.partitions`, a
//! two-member group shares partitions through JoinGroup/SyncGroup, and
//! ListGroups/DescribeGroups/DeleteGroups report what the coordinator holds.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::DeleteGroupsResponse;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::{JoinGroupRequest, JoinGroupRequestProtocol};
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::{LeaveGroupRequest, MemberIdentity};
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::ResponseError;
use ringbroker::group::api::offsets_partition_for;

mod broker;
use broker::{s, topic_name, until_coordinator_ready, Broker, Client};

const FAST_GROUPS: &[&str] = &[
    "group.initial.rebalance.delay.ms=0",
    "group.min.session.timeout.ms=500",
];

fn group_id(g: &str) -> GroupId {
    GroupId(s(g))
}

/// OffsetCommit v8 outside group management (generation -1): error code per partition.
fn commit(c: &mut Client, group: &str, topic: &str, offsets: &[(i32, i64)]) -> Vec<i16> {
    commit_as(c, group, -1, "", topic, offsets)
}

fn commit_as(
    c: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    topic: &str,
    offsets: &[(i32, i64)],
) -> Vec<i16> {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = offsets
        .iter()
        .map(|(p, o)| {
            let mut part = OffsetCommitRequestPartition::default();
            part.partition_index = *p;
            part.committed_offset = *o;
            part.committed_leader_epoch = -1;
            part.committed_metadata = Some(s("m"));
            part
        })
        .collect();
    let mut req = OffsetCommitRequest::default();
    req.group_id = group_id(group);
    req.generation_id_or_member_epoch = generation;
    req.member_id = s(member);
    req.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// OffsetFetch v7 for partitions of one topic: (partition, offset), or the group-level error.
fn try_fetch_offsets(
    c: &mut Client,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64)>, i16> {
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(topic);
    t.partition_indexes = partitions.to_vec();
    let mut req = OffsetFetchRequest::default();
    req.group_id = group_id(group);
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
    if resp.error_code != 0 {
        return Err(resp.error_code);
    }
    let mut out: Vec<(i32, i64)> = resp
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            assert_eq!(p.error_code, 0, "OffsetFetch partition error");
            (p.partition_index, p.committed_offset)
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}

fn fetch_offsets(c: &mut Client, group: &str, topic: &str, partitions: &[i32]) -> Vec<(i32, i64)> {
    try_fetch_offsets(c, group, topic, partitions).expect("OffsetFetch group error")
}

#[test]
fn committed_offsets_survive_sigkill() {
    let mut broker = Broker::start(FAST_GROUPS);
    let mut c = broker.client();
    c.create_topic("orders", 4, &[]);
    let partitions = [0, 1, 2, 3];
    let mut acked = vec![(0, -1i64), (1, -1), (2, -1), (3, -1)];
    for cycle in 0..5i64 {
        let mut c = broker.client();
        // A burst of commits; only the acknowledged ones count.
        for round in 0..20i64 {
            let offsets: Vec<(i32, i64)> = partitions
                .iter()
                .map(|p| (*p, cycle * 1000 + round * 10 + i64::from(*p)))
                .collect();
            let codes = until_coordinator_ready(|| {
                let codes = commit(&mut c, "durable-group", "orders", &offsets);
                match codes.iter().find(|c| **c != 0) {
                    Some(code) => Err(*code),
                    None => Ok(codes.clone()),
                }
            });
            assert!(codes.iter().all(|c| *c == 0));
            acked = offsets;
        }
        broker.kill9_and_restart();
        let mut c = broker.client();
        let fetched = until_coordinator_ready(|| {
            try_fetch_offsets(&mut c, "durable-group", "orders", &partitions)
        });
        assert_eq!(
            fetched, acked,
            "cycle {cycle}: committed offsets after SIGKILL"
        );
    }
    broker.stop_cleanly();
}

/// `offsets.topic.num.partitions` only sizes `__consumer_offsets` when it is created: after a
/// restart with another value, groups are still routed by the topic's real partition count
/// (Kafka's rule), so the offsets committed before are found where they were written.
#[test]
fn offsets_survive_a_restart_with_another_offsets_partition_count() {
    const CREATED_WITH: i32 = 5;
    const RESTARTED_WITH: i32 = 3;
    // Partition p of the offsets topic (created first) is on shard p % 2 of the broker's two:
    // these groups hash to another shard under the new count than under the real one.
    let groups: Vec<String> = (0..200)
        .map(|i| format!("moved-group-{i}"))
        .filter(|g| {
            let real = offsets_partition_for(g, CREATED_WITH);
            let configured = offsets_partition_for(g, RESTARTED_WITH);
            real % 2 != configured % 2
        })
        .take(4)
        .collect();
    assert_eq!(groups.len(), 4, "enough groups that change shard");
    let created = format!("offsets.topic.num.partitions={CREATED_WITH}");
    let mut broker = Broker::start(&[FAST_GROUPS[0], FAST_GROUPS[1], &created]);
    let mut c = broker.client();
    c.create_topic("events", 2, &[]);
    for (i, g) in groups.iter().enumerate() {
        let offsets = [(0, 100 + i as i64), (1, 200 + i as i64)];
        let codes = until_coordinator_ready(|| {
            let codes = commit(&mut c, g, "events", &offsets);
            match codes.iter().find(|c| **c != 0) {
                Some(code) => Err(*code),
                None => Ok(codes.clone()),
            }
        });
        assert!(codes.iter().all(|c| *c == 0), "{g}: {codes:?}");
    }
    let restarted = format!("offsets.topic.num.partitions={RESTARTED_WITH}");
    broker.set_settings(&[FAST_GROUPS[0], FAST_GROUPS[1], &restarted]);
    broker.restart();
    let mut c = broker.client();
    for (i, g) in groups.iter().enumerate() {
        let fetched = until_coordinator_ready(|| try_fetch_offsets(&mut c, g, "events", &[0, 1]));
        assert_eq!(
            fetched,
            vec![(0, 100 + i as i64), (1, 200 + i as i64)],
            "{g}: offsets committed before the restart"
        );
    }
    broker.stop_cleanly();
}

fn join(c: &mut Client, group: &str, member: &str, metadata: &'static [u8]) -> JoinGroupResponse {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(metadata);
    let mut req = JoinGroupRequest::default();
    req.group_id = group_id(group);
    req.session_timeout_ms = 10_000;
    req.rebalance_timeout_ms = 5_000;
    req.member_id = s(member);
    req.protocol_type = s("consumer");
    req.protocols = vec![p];
    c.call(ApiKey::JoinGroup, 7, &req)
}

/// Joins the way a v4+ client does: MEMBER_ID_REQUIRED first, then again with the given id.
fn join_new_member(c: &mut Client, group: &str, metadata: &'static [u8]) -> JoinGroupResponse {
    let first = until_coordinator_ready(|| {
        let r = join(c, group, "", metadata);
        if r.error_code == ResponseError::MemberIdRequired.code() {
            Ok(r)
        } else {
            Err(r.error_code)
        }
    });
    assert!(
        !first.member_id.is_empty(),
        "MEMBER_ID_REQUIRED carries the new id"
    );
    join(c, group, &first.member_id, metadata)
}

fn sync(
    c: &mut Client,
    group: &str,
    generation: i32,
    member: &str,
    assignments: Vec<(String, &'static [u8])>,
) -> SyncGroupResponse {
    let mut req = SyncGroupRequest::default();
    req.group_id = group_id(group);
    req.generation_id = generation;
    req.member_id = s(member);
    req.protocol_type = Some(s("consumer"));
    req.protocol_name = Some(s("range"));
    req.assignments = assignments
        .into_iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(&m);
            x.assignment = Bytes::from_static(a);
            x
        })
        .collect();
    c.call(ApiKey::SyncGroup, 5, &req)
}

fn heartbeat(c: &mut Client, group: &str, generation: i32, member: &str) -> i16 {
    let mut req = HeartbeatRequest::default();
    req.group_id = group_id(group);
    req.generation_id = generation;
    req.member_id = s(member);
    let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &req);
    resp.error_code
}

#[test]
fn two_members_share_a_group() {
    let broker = Broker::start(FAST_GROUPS);
    let mut admin = broker.client();
    admin.create_topic("events", 2, &[]);

    let mut req = FindCoordinatorRequest::default();
    req.key_type = 0;
    req.coordinator_keys = vec![s("pair")];
    let found: FindCoordinatorResponse = admin.call(ApiKey::FindCoordinator, 4, &req);
    assert_eq!(found.coordinators.len(), 1);
    assert_eq!(found.coordinators[0].error_code, 0);
    assert_eq!(found.coordinators[0].port, i32::from(broker.addr.port()));

    // Member A alone: generation 1, leader.
    let mut a = broker.client();
    let joined = join_new_member(&mut a, "pair", b"meta-a");
    assert_eq!(joined.error_code, 0);
    let a_id = joined.member_id.to_string();
    assert_eq!(joined.leader.as_str(), a_id);
    let gen1 = joined.generation_id;
    let synced = sync(&mut a, "pair", gen1, &a_id, vec![(a_id.clone(), b"all")]);
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], b"all");
    assert_eq!(heartbeat(&mut a, "pair", gen1, &a_id), 0);

    // Member B joins on its own connection: its join waits for A to rejoin.
    let b_addr = broker.addr;
    let b_thread = std::thread::spawn(move || {
        let mut b = Client::connect(b_addr);
        let joined = join_new_member(&mut b, "pair", b"meta-b");
        (b, joined)
    });
    // A learns about the rebalance from its heartbeat (bounded), then rejoins.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let code = heartbeat(&mut a, "pair", gen1, &a_id);
        if code == ResponseError::RebalanceInProgress.code() {
            break;
        }
        assert_eq!(code, 0);
        assert!(Instant::now() < deadline, "no rebalance signalled to A");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rejoined = join(&mut a, "pair", &a_id, b"meta-a");
    assert_eq!(rejoined.error_code, 0);
    let (mut b, b_joined) = b_thread.join().expect("member B");
    assert_eq!(b_joined.error_code, 0);
    let gen2 = rejoined.generation_id;
    assert!(gen2 > gen1);
    assert_eq!(b_joined.generation_id, gen2);
    let b_id = b_joined.member_id.to_string();
    // The leader (A, kept from before) sees both members' metadata.
    assert_eq!(rejoined.leader.as_str(), a_id);
    let mut seen: Vec<(String, Vec<u8>)> = rejoined
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.to_vec()))
        .collect();
    seen.sort();
    let mut want = vec![
        (a_id.clone(), b"meta-a".to_vec()),
        (b_id.clone(), b"meta-b".to_vec()),
    ];
    want.sort();
    assert_eq!(seen, want);
    assert!(b_joined.members.is_empty(), "followers get no member list");

    // B syncs first (waits), then the leader hands out the assignment.
    let b_sync = std::thread::spawn(move || {
        let r = sync(&mut b, "pair", gen2, &b_id, vec![]);
        (b, b_id, r)
    });
    std::thread::sleep(Duration::from_millis(100));
    let a_sync = sync(
        &mut a,
        "pair",
        gen2,
        &a_id,
        vec![
            (a_id.clone(), b"p0"),
            (b_joined.member_id.to_string(), b"p1"),
        ],
    );
    assert_eq!(a_sync.error_code, 0);
    assert_eq!(&a_sync.assignment[..], b"p0");
    let (mut b, b_id, b_synced) = b_sync.join().expect("member B sync");
    assert_eq!(b_synced.error_code, 0);
    assert_eq!(&b_synced.assignment[..], b"p1");

    // Commits with a stale generation are refused; with the current one they stick.
    let stale = commit_as(&mut a, "pair", gen1, &a_id, "events", &[(0, 5)]);
    assert_eq!(stale, vec![ResponseError::IllegalGeneration.code()]);
    let ok = commit_as(&mut a, "pair", gen2, &a_id, "events", &[(0, 7)]);
    assert_eq!(ok, vec![0]);
    assert_eq!(
        fetch_offsets(&mut admin, "pair", "events", &[0]),
        vec![(0, 7)]
    );

    // ListGroups and DescribeGroups see the stable group and both members.
    let listed: ListGroupsResponse =
        admin.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    let entry = listed
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == "pair")
        .expect("pair listed");
    assert_eq!(entry.group_state.as_str(), "Stable");
    assert_eq!(entry.protocol_type.as_str(), "consumer");
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![group_id("pair")];
    let described: DescribeGroupsResponse = admin.call(ApiKey::DescribeGroups, 5, &req);
    let g = &described.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 2);
    let member_b = g
        .members
        .iter()
        .find(|m| m.member_id.as_str() == b_id)
        .expect("B described");
    assert_eq!(&member_b.member_assignment[..], b"p1");

    // A non-empty group cannot be deleted; after both leave it can.
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![group_id("pair")];
    let deleted: DeleteGroupsResponse = admin.call(ApiKey::DeleteGroups, 2, &req);
    assert_eq!(
        deleted.results[0].error_code,
        ResponseError::NonEmptyGroup.code()
    );
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = group_id("pair");
    leave.members = [a_id.as_str(), b_id.as_str()]
        .iter()
        .map(|m| {
            let mut x = MemberIdentity::default();
            x.member_id = s(m);
            x
        })
        .collect();
    let left: LeaveGroupResponse = b.call(ApiKey::LeaveGroup, 4, &leave);
    assert_eq!(left.error_code, 0);
    assert!(left.members.iter().all(|m| m.error_code == 0));
    let deleted: DeleteGroupsResponse = admin.call(ApiKey::DeleteGroups, 2, &req);
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(
        fetch_offsets(&mut admin, "pair", "events", &[0]),
        vec![(0, -1)],
        "offsets go with the group"
    );
    broker.stop_cleanly();
}

//! The consumer-group APIs on the wire, against the real broker binary: every advertised
//! version of FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//! OffsetFetch, ListGroups, DescribeGroups, DeleteGroups and OffsetDelete is sent with
//! kafka-protocol's client encoders and its response must decode with that version.
//!
//! The encoding test accepts any error code (the coordinator may be unavailable); the other
//! tests check real outcomes, one concern each, so a failure names what broke. Every wait is
//! bounded; the broker is stopped with SIGTERM and must exit 0.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
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
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::OffsetDeleteResponse;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::sync_group_request::{SyncGroupRequest, SyncGroupRequestAssignment};
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{ApiKey, BrokerId, GroupId};
use kafka_protocol::ResponseError;

mod broker;
use broker::{s, topic_name, Broker, Client};

const NONE: i16 = 0;
const CLIENT_ID: &str = "server_group_wire";

/// Bound on every wait of this file (start, connect, each response, shutdown, coordinator).
const WAIT: Duration = Duration::from_secs(10);

/// A new group's first rebalance does not wait for more members here.
const BROKER_SETTINGS: &[&str] = &["group.initial.rebalance.delay.ms=0"];

/// The group APIs and the versions the broker must advertise for them.
const GROUP_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::FindCoordinator, 0, 5),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 0, 9),
    (ApiKey::OffsetFetch, 0, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
];

// ---------------------------------------------------------------------------------------------
// The broker process

/// The shared client plus the group requests this file sends often.
struct GroupClient(Client);

impl std::ops::Deref for GroupClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for GroupClient {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

impl GroupClient {
    /// Repeats `call` while the coordinator is loading or not available (as a client would,
    /// after finding the coordinator again), for at most `WAIT`.
    fn until_coordinator_ready<R>(
        &mut self,
        mut call: impl FnMut(&mut Client) -> R,
        error_of: impl Fn(&R) -> i16,
    ) -> R {
        let retriable = [
            ResponseError::CoordinatorNotAvailable.code(),
            ResponseError::CoordinatorLoadInProgress.code(),
        ];
        let deadline = Instant::now() + WAIT;
        loop {
            let response = call(self);
            if !retriable.contains(&error_of(&response)) || Instant::now() >= deadline {
                return response;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn join(&mut self, version: i16, group: &str, member_id: &str) -> JoinGroupResponse {
        let req = join_request(version, group, member_id);
        self.until_coordinator_ready(
            |c| c.call::<_, JoinGroupResponse>(ApiKey::JoinGroup, version, &req),
            |r| r.error_code,
        )
    }

    fn commit(&mut self, version: i16, group: &str, topic: &str, offset: i64) -> i16 {
        let req = commit_request(version, group, topic, 0, offset);
        let resp: OffsetCommitResponse = self.until_coordinator_ready(
            |c| c.call(ApiKey::OffsetCommit, version, &req),
            |r: &OffsetCommitResponse| r.topics[0].partitions[0].error_code,
        );
        resp.topics[0].partitions[0].error_code
    }
}

fn group_id(v: &str) -> GroupId {
    GroupId(s(v))
}

// ---------------------------------------------------------------------------------------------
// Requests, each with only the fields its version has

fn find_coordinator_request(version: i16, key_type: i8, keys: &[&str]) -> FindCoordinatorRequest {
    let mut req = FindCoordinatorRequest::default();
    if version >= 4 {
        req.coordinator_keys = keys.iter().map(|k| s(k)).collect();
    } else {
        req.key = s(keys[0]);
    }
    if version >= 1 {
        req.key_type = key_type;
    }
    req
}

fn join_request(version: i16, group: &str, member_id: &str) -> JoinGroupRequest {
    let mut protocol = JoinGroupRequestProtocol::default();
    protocol.name = s("range");
    protocol.metadata = Bytes::from_static(b"\x00\x01subscription");
    let mut req = JoinGroupRequest::default();
    req.group_id = group_id(group);
    req.session_timeout_ms = 10_000;
    if version >= 1 {
        req.rebalance_timeout_ms = 5_000;
    }
    req.member_id = s(member_id);
    req.protocol_type = s("consumer");
    req.protocols = vec![protocol];
    if version >= 8 {
        req.reason = Some(s("test join"));
    }
    req
}

fn sync_request(version: i16, group: &str, generation: i32, member_id: &str) -> SyncGroupRequest {
    let mut req = SyncGroupRequest::default();
    req.group_id = group_id(group);
    req.generation_id = generation;
    req.member_id = s(member_id);
    if version >= 5 {
        req.protocol_type = Some(s("consumer"));
        req.protocol_name = Some(s("range"));
    }
    let mut assignment = SyncGroupRequestAssignment::default();
    assignment.member_id = s(member_id);
    assignment.assignment = Bytes::from_static(b"assignment");
    req.assignments = vec![assignment];
    req
}

fn heartbeat_request(group: &str, generation: i32, member_id: &str) -> HeartbeatRequest {
    let mut req = HeartbeatRequest::default();
    req.group_id = group_id(group);
    req.generation_id = generation;
    req.member_id = s(member_id);
    req
}

fn leave_request(version: i16, group: &str, member_id: &str) -> LeaveGroupRequest {
    let mut req = LeaveGroupRequest::default();
    req.group_id = group_id(group);
    if version >= 3 {
        let mut member = MemberIdentity::default();
        member.member_id = s(member_id);
        if version >= 5 {
            member.reason = Some(s("test leave"));
        }
        req.members = vec![member];
    } else {
        req.member_id = s(member_id);
    }
    req
}

fn commit_request(
    version: i16,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> OffsetCommitRequest {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = partition;
    p.committed_offset = offset;
    if version >= 6 {
        p.committed_leader_epoch = 0;
    }
    p.committed_metadata = Some(s("meta"));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = group_id(group);
    // A commit outside group management (generation -1, no member).
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    req
}

/// OffsetFetch of `partitions` of `topic`, or of every partition when `None` (v2+).
fn fetch_request(
    version: i16,
    groups: &[&str],
    topic: &str,
    partitions: Option<&[i32]>,
) -> OffsetFetchRequest {
    let mut req = OffsetFetchRequest::default();
    if version >= 8 {
        req.groups = groups
            .iter()
            .map(|g| {
                let mut group = OffsetFetchRequestGroup::default();
                group.group_id = group_id(g);
                group.topics = partitions.map(|ps| {
                    let mut t = OffsetFetchRequestTopics::default();
                    t.name = topic_name(topic);
                    t.partition_indexes = ps.to_vec();
                    vec![t]
                });
                group
            })
            .collect();
    } else {
        req.group_id = group_id(groups[0]);
        req.topics = partitions.map(|ps| {
            let mut t = OffsetFetchRequestTopic::default();
            t.name = topic_name(topic);
            t.partition_indexes = ps.to_vec();
            vec![t]
        });
    }
    req
}

fn offset_delete_request(group: &str, topic: &str, partitions: &[i32]) -> OffsetDeleteRequest {
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = partitions
        .iter()
        .map(|&p| {
            let mut partition = OffsetDeleteRequestPartition::default();
            partition.partition_index = p;
            partition
        })
        .collect();
    let mut req = OffsetDeleteRequest::default();
    req.group_id = group_id(group);
    req.topics = vec![t];
    req
}

/// The committed offset of partition 0 of `topic` in an OffsetFetch response of `version`.
fn fetched_offset(resp: &OffsetFetchResponse, version: i16) -> Option<i64> {
    if version >= 8 {
        resp.groups
            .first()?
            .topics
            .first()?
            .partitions
            .iter()
            .find(|p| p.partition_index == 0)
            .map(|p| p.committed_offset)
    } else {
        resp.topics
            .first()?
            .partitions
            .iter()
            .find(|p| p.partition_index == 0)
            .map(|p| p.committed_offset)
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn every_group_api_version_is_advertised_and_its_responses_decode() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    c.create_topic("wire", 2, &[]);

    let resp: ApiVersionsResponse = c.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    for &(key, min, max) in GROUP_APIS {
        let v = resp
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} is not advertised"));
        assert_eq!((v.min_version, v.max_version), (min, max), "{key:?}");
    }

    // Each call decodes with its version (`call` checks that); the counts checked hold
    // whatever the coordinator answers.
    // v0-v1 of OffsetCommit and v0 of OffsetFetch are hand-coded (tests/server_old_offsets).
    for version in 0..=5 {
        let req = find_coordinator_request(version, 0, &["g"]);
        let _: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, version, &req);
    }
    for version in 0..=9 {
        // A group per version: before v4 a join without member id enters the group and waits
        // for its rebalance, which a second newcomer would prolong.
        let req = join_request(version, &format!("g-enc-{version}"), "");
        let _: JoinGroupResponse = c.call(ApiKey::JoinGroup, version, &req);
    }
    for version in 0..=5 {
        let req = sync_request(version, "g-enc", 1, "nobody");
        let _: SyncGroupResponse = c.call(ApiKey::SyncGroup, version, &req);
    }
    for version in 0..=4 {
        let req = heartbeat_request("g-enc", 1, "nobody");
        let _: HeartbeatResponse = c.call(ApiKey::Heartbeat, version, &req);
    }
    for version in 0..=5 {
        let req = leave_request(version, "g-enc", "nobody");
        let _: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, version, &req);
    }
    for version in 2..=9 {
        let req = commit_request(version, "g-enc", "wire", 1, 5);
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, version, &req);
        assert_eq!(resp.topics.len(), 1, "v{version}");
        assert_eq!(resp.topics[0].partitions.len(), 1, "v{version}");
    }
    for version in 1..=9 {
        let req = fetch_request(version, &["g-enc", "g-enc-2"], "wire", Some(&[0, 1]));
        let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, version, &req);
        if version >= 8 {
            assert_eq!(resp.groups.len(), 2, "v{version}");
        } else if version == 1 {
            // v1 has no group error: partitions are always listed.
            let listed: usize = resp.topics.iter().map(|t| t.partitions.len()).sum();
            assert_eq!(listed, 2, "v{version}");
        }
        if version >= 2 {
            let req = fetch_request(version, &["g-enc"], "wire", None);
            let _: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, version, &req);
        }
    }
    for version in 0..=5 {
        let mut req = ListGroupsRequest::default();
        if version >= 4 {
            req.states_filter = vec![s("Stable")];
        }
        let _: ListGroupsResponse = c.call(ApiKey::ListGroups, version, &req);
    }
    for version in 0..=5 {
        let mut req = DescribeGroupsRequest::default();
        req.groups = vec![group_id("g-enc"), group_id("unknown")];
        if version >= 3 {
            req.include_authorized_operations = true;
        }
        let _: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, version, &req);
    }
    for version in 0..=2 {
        let mut req = DeleteGroupsRequest::default();
        req.groups_names = vec![group_id("unknown")];
        let _: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, version, &req);
    }
    let req = offset_delete_request("g-enc", "wire", &[0]);
    let _: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &req);

    drop(c);
    broker.stop_cleanly();
}

#[test]
fn find_coordinator_names_this_broker_for_groups_only() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    let port = i32::from(broker.addr.port());
    for version in 0..=3 {
        let req = find_coordinator_request(version, 0, &["g"]);
        let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, version, &req);
        assert_eq!(resp.error_code, NONE, "v{version}");
        assert_eq!(resp.node_id, BrokerId(0), "v{version}");
        assert_eq!(resp.host.as_str(), "127.0.0.1", "v{version}");
        assert_eq!(resp.port, port, "v{version}");
    }
    let req = find_coordinator_request(4, 0, &["a", "b"]);
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
    assert_eq!(resp.coordinators.len(), 2);
    for (coordinator, key) in resp.coordinators.iter().zip(["a", "b"]) {
        assert_eq!(coordinator.key.as_str(), key);
        assert_eq!(coordinator.error_code, NONE);
        assert_eq!(coordinator.node_id, BrokerId(0));
        assert_eq!(coordinator.port, port);
    }

    // Transactions: not available (with a message); unknown key types: a bad request.
    for (key_type, code) in [
        (1, ResponseError::CoordinatorNotAvailable.code()),
        (9, ResponseError::InvalidRequest.code()),
    ] {
        let req = find_coordinator_request(3, key_type, &["t"]);
        let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 3, &req);
        assert_eq!(resp.error_code, code, "key type {key_type}");
        assert_eq!(resp.node_id, BrokerId(-1));
        assert!(resp.error_message.is_some_and(|m| !m.is_empty()));
        let req = find_coordinator_request(4, key_type, &["t"]);
        let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 4, &req);
        assert_eq!(resp.coordinators[0].error_code, code, "key type {key_type}");
    }
    drop(c);
    broker.stop_cleanly();
}

/// Checks the broker makes before any coordinator is asked.
#[test]
fn requests_kafka_refuses_up_front() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    c.create_topic("known", 1, &[]);
    let invalid_group = ResponseError::InvalidGroupId.code();

    let resp: JoinGroupResponse = c.call(ApiKey::JoinGroup, 9, &join_request(9, "", ""));
    assert_eq!(resp.error_code, invalid_group);
    let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &sync_request(5, "", 1, "m"));
    assert_eq!(resp.error_code, invalid_group);
    let resp: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &heartbeat_request("", 1, "m"));
    assert_eq!(resp.error_code, invalid_group);
    let resp: LeaveGroupResponse = c.call(ApiKey::LeaveGroup, 1, &leave_request(1, "", "m"));
    assert_eq!(resp.error_code, invalid_group);
    let resp: OffsetDeleteResponse = c.call(
        ApiKey::OffsetDelete,
        0,
        &offset_delete_request("", "known", &[0]),
    );
    assert_eq!(resp.error_code, invalid_group);

    // SyncGroup v5 must name the protocol type and name.
    let mut req = sync_request(5, "g", 1, "m");
    req.protocol_name = None;
    let resp: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(
        resp.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );

    // Partitions that do not exist are answered by the broker, the others by the coordinator.
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    for (topic, partition) in [("missing", 0), ("known", 7)] {
        let req = commit_request(8, "g", topic, partition, 1);
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
        assert_eq!(resp.topics[0].partitions[0].error_code, unknown, "{topic}");
    }
    drop(c);
    broker.stop_cleanly();
}

/// JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED and the id to join with.
#[test]
fn first_join_v4_and_later_gets_a_member_id() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    for version in 4..=9 {
        let resp = c.join(version, &format!("g-required-{version}"), "");
        assert_eq!(
            resp.error_code,
            ResponseError::MemberIdRequired.code(),
            "v{version}"
        );
        assert!(!resp.member_id.is_empty(), "v{version}");
    }
    drop(c);
    broker.stop_cleanly();
}

/// One member through a whole generation: join, sync, heartbeat, describe, list, leave.
#[test]
fn single_member_group_round_trip() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    let group = "g-round";

    let first = c.join(9, group, "");
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let member_id = first.member_id.to_string();
    let joined = c.join(9, group, &member_id);
    assert_eq!(joined.error_code, NONE);
    assert_eq!(joined.member_id.as_str(), member_id);
    assert_eq!(joined.leader.as_str(), member_id, "the only member leads");
    assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    assert_eq!(joined.members.len(), 1);
    assert_eq!(
        joined.members[0].metadata,
        Bytes::from_static(b"\x00\x01subscription")
    );
    let generation = joined.generation_id;

    let req = sync_request(5, group, generation, &member_id);
    let synced: SyncGroupResponse = c.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(synced.error_code, NONE);
    assert_eq!(synced.assignment, Bytes::from_static(b"assignment"));
    assert_eq!(synced.protocol_name.as_deref(), Some("range"));

    let req = heartbeat_request(group, generation, &member_id);
    let beat: HeartbeatResponse = c.call(ApiKey::Heartbeat, 4, &req);
    assert_eq!(beat.error_code, NONE);

    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![group_id(group)];
    let described: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req);
    let g = &described.groups[0];
    assert_eq!(g.error_code, NONE);
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");
    assert_eq!(g.protocol_data.as_str(), "range");
    assert_eq!(g.members.len(), 1);
    assert_eq!(g.members[0].member_id.as_str(), member_id);
    assert_eq!(g.members[0].client_id.as_str(), CLIENT_ID);
    assert_eq!(g.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(
        g.members[0].member_assignment,
        Bytes::from_static(b"assignment")
    );

    let mut req = ListGroupsRequest::default();
    req.states_filter = vec![s("Stable")];
    let listed: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &req);
    assert_eq!(listed.error_code, NONE);
    let g = listed
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group)
        .expect("the group is listed");
    assert_eq!(g.group_state.as_str(), "Stable");
    assert_eq!(g.protocol_type.as_str(), "consumer");

    let left: LeaveGroupResponse =
        c.call(ApiKey::LeaveGroup, 5, &leave_request(5, group, &member_id));
    assert_eq!(left.error_code, NONE);
    assert_eq!(left.members.len(), 1);
    assert_eq!(left.members[0].error_code, NONE);

    drop(c);
    broker.stop_cleanly();
}

/// Offsets committed with each OffsetCommit version come back from each OffsetFetch version,
/// can be deleted with OffsetDelete, and go with the group on DeleteGroups.
#[test]
fn offsets_commit_fetch_and_delete() {
    let broker = Broker::start(BROKER_SETTINGS);
    let mut c = GroupClient(broker.client().with_client_id(CLIENT_ID));
    c.create_topic("offsets", 2, &[]);

    for commit_version in 2..=8 {
        let group = format!("g-commit-{commit_version}");
        let offset = 100 + i64::from(commit_version);
        assert_eq!(
            c.commit(commit_version, &group, "offsets", offset),
            NONE,
            "commit v{commit_version}"
        );
        for fetch_version in 1..=8 {
            let req = fetch_request(fetch_version, &[&group], "offsets", Some(&[0]));
            let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, fetch_version, &req);
            assert_eq!(
                fetched_offset(&resp, fetch_version),
                Some(offset),
                "commit v{commit_version}, fetch v{fetch_version}: {resp:?}"
            );
        }
        // Every partition of the group (topics null).
        for fetch_version in 2..=8 {
            let req = fetch_request(fetch_version, &[&group], "offsets", None);
            let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, fetch_version, &req);
            assert_eq!(
                fetched_offset(&resp, fetch_version),
                Some(offset),
                "all partitions, fetch v{fetch_version}: {resp:?}"
            );
        }
    }

    // Several groups in one v8 fetch, each with its own offsets.
    let req = fetch_request(8, &["g-commit-2", "g-commit-8"], "offsets", Some(&[0]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    let offsets: Vec<i64> = resp
        .groups
        .iter()
        .map(|g| g.topics[0].partitions[0].committed_offset)
        .collect();
    assert_eq!(offsets, vec![102, 108]);

    // A partition without a commit: offset -1.
    let req = fetch_request(7, &["g-commit-2"], "offsets", Some(&[1]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.topics[0].partitions[0].committed_offset, -1);

    // OffsetDelete on a group without members.
    let req = offset_delete_request("g-commit-3", "offsets", &[0]);
    let resp: OffsetDeleteResponse = c.call(ApiKey::OffsetDelete, 0, &req);
    assert_eq!(resp.error_code, NONE);
    assert_eq!(resp.topics[0].partitions[0].error_code, NONE);
    let req = fetch_request(8, &["g-commit-3"], "offsets", Some(&[0]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    assert_eq!(fetched_offset(&resp, 8), Some(-1));

    // DeleteGroups removes the group and its offsets.
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![group_id("g-commit-4")];
    let resp: DeleteGroupsResponse = c.call(ApiKey::DeleteGroups, 2, &req);
    assert_eq!(resp.results.len(), 1);
    assert_eq!(resp.results[0].group_id.0.as_str(), "g-commit-4");
    assert_eq!(resp.results[0].error_code, NONE);
    let req = fetch_request(8, &["g-commit-4"], "offsets", Some(&[0]));
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 8, &req);
    assert_eq!(fetched_offset(&resp, 8), Some(-1));

    drop(c);
    broker.stop_cleanly();
}

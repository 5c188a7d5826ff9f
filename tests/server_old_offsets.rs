//! ListOffsets v0 (`max_num_offsets`, `old_style_offsets`) and v8/v9 (timestamps -4/-5),
//! OffsetCommit v0/v1 (v1's commit timestamp) and v9, OffsetFetch v0 and v9, ListGroups v5 and
//! FindCoordinator v5, over the wire.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId};

mod broker;
use broker::{s, topic_name, until_coordinator_ready, Broker, Client};

fn put_str(b: &mut BytesMut, v: &str) {
    b.put_i16(v.len() as i16);
    b.put_slice(v.as_bytes());
}

/// ListOffsets v0 of partition 0 of `topic`: (error code, old-style offsets).
fn list_offsets_v0(c: &mut Client, topic: &str, timestamp: i64, max: i32) -> (i16, Vec<i64>) {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(1);
    put_str(&mut b, topic);
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(timestamp);
    b.put_i32(max);
    let mut r = c.call_raw(ApiKey::ListOffsets, 0, &b);
    assert_eq!(r.get_i32(), 1);
    let n = r.get_i16() as usize;
    r.advance(n);
    assert_eq!(r.get_i32(), 1);
    assert_eq!(r.get_i32(), 0);
    let error = r.get_i16();
    let count = r.get_i32();
    let offsets = (0..count).map(|_| r.get_i64()).collect();
    assert!(r.is_empty());
    (error, offsets)
}

#[test]
fn list_offsets_v0_answers_old_style_offsets_and_v8_v9_the_new_timestamps() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("lo", 1, &[]);
    for _ in 0..3 {
        assert_eq!(c.produce("lo", 0, 2, 10).0, 0);
    }
    // Latest: the log end, then the base of the one segment.
    assert_eq!(list_offsets_v0(&mut c, "lo", -1, 10), (0, vec![6, 0]));
    assert_eq!(list_offsets_v0(&mut c, "lo", -1, 1), (0, vec![6]));
    assert_eq!(list_offsets_v0(&mut c, "lo", -2, 10), (0, vec![0]));
    // Nothing was modified before the epoch.
    assert_eq!(list_offsets_v0(&mut c, "lo", 1, 10), (0, vec![]));
    let (e, offsets) = list_offsets_v0(&mut c, "no-such", -1, 1);
    assert_ne!(e, 0);
    assert!(offsets.is_empty());

    for version in [8, 9] {
        assert_eq!(
            c.list_offset_at(version, "lo", 0, -4),
            (0, 0, 0),
            "v{version}"
        );
        assert_eq!(
            c.list_offset_at(version, "lo", 0, -1),
            (0, 6, 0),
            "v{version}"
        );
    }
    assert_eq!(c.list_offset_at(9, "lo", 0, -5), (0, -1, -1));
    broker.stop_cleanly();
}

/// An OffsetCommit v0 or v1 body for partition 0 of `topic`; v1 as generation -1 (a commit
/// outside group management) with `timestamp`.
fn commit_body(version: i16, group: &str, topic: &str, offset: i64, timestamp: i64) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_str(&mut b, group);
    if version == 1 {
        b.put_i32(-1);
        put_str(&mut b, "");
    }
    b.put_i32(1);
    put_str(&mut b, topic);
    b.put_i32(1);
    b.put_i32(0);
    b.put_i64(offset);
    if version == 1 {
        b.put_i64(timestamp);
    }
    put_str(&mut b, "meta");
    b.to_vec()
}

/// The one partition's error of an OffsetCommit v0–v2 response.
fn commit_error(mut r: Bytes) -> i16 {
    assert_eq!(r.get_i32(), 1);
    let n = r.get_i16() as usize;
    r.advance(n);
    assert_eq!(r.get_i32(), 1);
    assert_eq!(r.get_i32(), 0);
    let e = r.get_i16();
    assert!(r.is_empty());
    e
}

/// OffsetFetch v0 (v1's layout) of partition 0: (offset, metadata, error).
fn fetch_v0(c: &mut Client, group: &str, topic: &str) -> (i64, String, i16) {
    let mut b = BytesMut::new();
    put_str(&mut b, group);
    b.put_i32(1);
    put_str(&mut b, topic);
    b.put_i32(1);
    b.put_i32(0);
    let mut r = c.call_raw(ApiKey::OffsetFetch, 0, &b);
    assert_eq!(r.get_i32(), 1);
    let n = r.get_i16() as usize;
    r.advance(n);
    assert_eq!(r.get_i32(), 1);
    assert_eq!(r.get_i32(), 0);
    let offset = r.get_i64();
    let n = r.get_i16() as usize;
    let meta = String::from_utf8(r.split_to(n).to_vec()).unwrap();
    let e = r.get_i16();
    assert!(r.is_empty());
    (offset, meta, e)
}

/// OffsetFetch v9 of partition 0, classic group (no member epoch): the offset.
fn fetch_v9(c: &mut Client, group: &str, topic: &str) -> i64 {
    let mut t = OffsetFetchRequestTopics::default();
    t.name = topic_name(topic);
    t.partition_indexes = vec![0];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(s(group));
    g.member_epoch = -1;
    g.topics = Some(vec![t]);
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 9, &req);
    let g = &resp.groups[0];
    assert_eq!(g.error_code, 0);
    let p = &g.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.committed_offset
}

#[test]
fn offset_commit_v0_v1_v9_are_stored_and_read_back_by_offset_fetch_v0_and_v9() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("oc", 1, &[]);

    until_coordinator_ready(|| {
        match commit_error(c.call_raw(ApiKey::OffsetCommit, 0, &commit_body(0, "g0", "oc", 5, -1)))
        {
            0 => Ok(()),
            e => Err(e),
        }
    });
    assert_eq!(fetch_v0(&mut c, "g0", "oc"), (5, "meta".to_string(), 0));
    assert_eq!(fetch_v9(&mut c, "g0", "oc"), 5);

    // v1 with an explicit commit timestamp, and with -1 (the broker's time).
    for (offset, ts) in [(7, 1_700_000_000_000), (8, -1)] {
        let raw = c.call_raw(
            ApiKey::OffsetCommit,
            1,
            &commit_body(1, "g1", "oc", offset, ts),
        );
        assert_eq!(commit_error(raw), 0);
        assert_eq!(fetch_v9(&mut c, "g1", "oc"), offset);
    }

    // v9 on a classic (here: simple) group: the member epoch -1 is a generation -1.
    let mut p = OffsetCommitRequestPartition::default();
    p.committed_offset = 11;
    p.committed_leader_epoch = -1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name("oc");
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s("g9"));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 9, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    assert_eq!(fetch_v0(&mut c, "g9", "oc").0, 11);

    // A v1 commit with a generation for a group that has no members is refused as in Kafka.
    let mut body = commit_body(1, "g1", "oc", 9, -1);
    body[2 + 2..2 + 2 + 4].copy_from_slice(&3i32.to_be_bytes());
    let e = commit_error(c.call_raw(ApiKey::OffsetCommit, 1, &body));
    assert_ne!(e, 0);
    assert_eq!(fetch_v9(&mut c, "g1", "oc"), 8);

    // ListGroups v5: every group is classic; FindCoordinator v5 answers as v4.
    for (types, listed) in [
        (vec![], true),
        (vec!["Classic"], true),
        (vec!["consumer"], false),
    ] {
        let mut req = ListGroupsRequest::default();
        req.types_filter = types.iter().map(|t| s(t)).collect();
        let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 5, &req);
        assert_eq!(resp.error_code, 0);
        let g0 = resp.groups.iter().find(|g| &*g.group_id.0 == "g0");
        assert_eq!(g0.is_some(), listed, "{types:?}");
        if let Some(g) = g0 {
            assert_eq!(&*g.group_type, "classic");
        }
    }
    let mut req = FindCoordinatorRequest::default();
    req.coordinator_keys = vec![s("g0")];
    let resp: FindCoordinatorResponse = c.call(ApiKey::FindCoordinator, 5, &req);
    assert_eq!(resp.coordinators[0].error_code, 0);
    broker.stop_cleanly();
}

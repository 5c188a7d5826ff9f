//! The "consumer" protocol of consumer groups, as every Kafka client speaks it: the member
//! metadata (ConsumerProtocolSubscription) and assignment (ConsumerProtocolAssignment) byte
//! formats, and Kafka's "range" assignor that the group leader runs. Pure: no I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use kafka_protocol::messages::consumer_protocol_subscription::ConsumerProtocolSubscription;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::accumulator::TopicPartition;
use super::cluster::topic_name;
use super::error::{ClientError, ClientResult};

/// The protocol type of consumer groups (librdkafka, kafka-python and Java all use it).
pub const PROTOCOL_TYPE: &str = "consumer";
/// Kafka's RangeAssignor name: another client in the group that also offers "range" agrees.
pub const RANGE: &str = "range";

/// Highest version of the two formats the kafka-protocol crate decodes. Newer versions only
/// append fields, so a newer encoding is read with this one (as Kafka's own clients do).
const MAX_KNOWN_VERSION: i16 = 3;

/// Member metadata for JoinGroup. Version 0 (topics only): every client reads it.
pub fn encode_subscription(topics: &[String]) -> ClientResult<Bytes> {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics
        .iter()
        .map(|t| StrBytes::from_string(t.clone()))
        .collect();
    encode_versioned(&s, 0, "ConsumerProtocolSubscription")
}

/// The topics a member subscribes to, from its JoinGroup metadata (any version).
pub fn decode_subscription(metadata: &[u8]) -> ClientResult<Vec<String>> {
    let (version, mut body) = split_version(metadata, "ConsumerProtocolSubscription")?;
    let s = ConsumerProtocolSubscription::decode(&mut body, version)
        .map_err(|e| ClientError::codec("ConsumerProtocolSubscription", e))?;
    Ok(s.topics.iter().map(|t| t.to_string()).collect())
}

/// The leader's assignment of one member for SyncGroup (version 0).
pub fn encode_assignment(partitions: &BTreeMap<String, Vec<i32>>) -> ClientResult<Bytes> {
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = partitions
        .iter()
        .map(|(topic, parts)| {
            let mut t = AssignedTopic::default();
            t.topic = topic_name(topic);
            t.partitions = parts.clone();
            t
        })
        .collect();
    encode_versioned(&a, 0, "ConsumerProtocolAssignment")
}

/// This member's partitions from the SyncGroup response. Empty bytes are an empty assignment
/// (a coordinator sends them to members the leader left out).
pub fn decode_assignment(bytes: &[u8]) -> ClientResult<Vec<TopicPartition>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let (version, mut body) = split_version(bytes, "ConsumerProtocolAssignment")?;
    let a = ConsumerProtocolAssignment::decode(&mut body, version)
        .map_err(|e| ClientError::codec("ConsumerProtocolAssignment", e))?;
    let mut out = Vec::new();
    for t in &a.assigned_partitions {
        let topic: Arc<str> = Arc::from(t.topic.0.as_str());
        for &partition in &t.partitions {
            out.push(TopicPartition {
                topic: topic.clone(),
                partition,
            });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn encode_versioned<M: Encodable>(m: &M, version: i16, what: &str) -> ClientResult<Bytes> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&version.to_be_bytes());
    m.encode(&mut buf, version)
        .map_err(|e| ClientError::codec(what, e))?;
    Ok(buf.freeze())
}

fn split_version(bytes: &[u8], what: &str) -> ClientResult<(i16, Bytes)> {
    let mut body = Bytes::copy_from_slice(bytes);
    if body.len() < 2 {
        return Err(ClientError::codec(what, "shorter than its version"));
    }
    let version = body.get_i16();
    if version < 0 {
        return Err(ClientError::codec(what, format!("version {version}")));
    }
    Ok((version.min(MAX_KNOWN_VERSION), body))
}

/// A member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<String>,
}

/// Kafka's RangeAssignor: per topic, the members subscribed to it in a fixed order (static
/// members by instance id first, then the rest by member id) each get a contiguous range of
/// partitions; the first `partitions % members` get one more. Topics missing from
/// `partition_counts` (unknown to the cluster) are assigned to nobody. Every member gets an
/// entry, possibly empty.
pub fn range_assign(
    members: &[MemberSubscription],
    partition_counts: &BTreeMap<String, usize>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<i32>>> = members
        .iter()
        .map(|m| (m.member_id.clone(), BTreeMap::new()))
        .collect();
    let mut by_topic: BTreeMap<&str, Vec<&MemberSubscription>> = BTreeMap::new();
    for m in members {
        for t in &m.topics {
            let list = by_topic.entry(t.as_str()).or_default();
            if !list.iter().any(|o| o.member_id == m.member_id) {
                list.push(m);
            }
        }
    }
    for (topic, mut subscribers) in by_topic {
        let Some(&count) = partition_counts.get(topic) else {
            continue;
        };
        subscribers.sort_by(|a, b| {
            let key = |m: &MemberSubscription| {
                (
                    m.group_instance_id.is_none(),
                    m.group_instance_id.clone().unwrap_or_default(),
                    m.member_id.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        let n = subscribers.len();
        let (per, extra) = (count / n, count % n);
        for (i, m) in subscribers.iter().enumerate() {
            let start = per * i + i.min(extra);
            let len = per + usize::from(i < extra);
            if len == 0 {
                continue;
            }
            let parts = (start..start + len).map(|p| p as i32).collect();
            if let Some(assigned) = out.get_mut(&m.member_id) {
                assigned.insert(topic.to_string(), parts);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: None,
            topics: topics.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_and_the_remainder_to_the_first_members() {
        let members = [
            member("b", &["t"]),
            member("a", &["t"]),
            member("c", &["t"]),
        ];
        let out = range_assign(&members, &counts(&[("t", 7)]));
        assert_eq!(out["a"]["t"], vec![0, 1, 2]);
        assert_eq!(out["b"]["t"], vec![3, 4]);
        assert_eq!(out["c"]["t"], vec![5, 6]);
    }

    #[test]
    fn range_with_more_members_than_partitions_leaves_some_empty() {
        let members = [
            member("a", &["t"]),
            member("b", &["t"]),
            member("c", &["t"]),
        ];
        let out = range_assign(&members, &counts(&[("t", 2)]));
        assert_eq!(out["a"]["t"], vec![0]);
        assert_eq!(out["b"]["t"], vec![1]);
        assert!(out["c"].is_empty());
    }

    #[test]
    fn range_assigns_each_topic_among_its_own_subscribers_only() {
        let members = [member("a", &["x", "y"]), member("b", &["y", "gone"])];
        let out = range_assign(&members, &counts(&[("x", 2), ("y", 3)]));
        assert_eq!(out["a"]["x"], vec![0, 1]);
        assert_eq!(out["a"]["y"], vec![0, 1]);
        assert_eq!(out["b"]["y"], vec![2]);
        assert!(!out["b"].contains_key("gone"));
    }

    #[test]
    fn every_partition_is_assigned_exactly_once() {
        for members_n in 1..6 {
            for parts in 0..12 {
                let members: Vec<_> = (0..members_n)
                    .map(|i| member(&format!("m{i}"), &["t"]))
                    .collect();
                let out = range_assign(&members, &counts(&[("t", parts)]));
                let mut all: Vec<i32> = out
                    .values()
                    .flat_map(|m| m.get("t").cloned().unwrap_or_default())
                    .collect();
                all.sort();
                assert_eq!(all, (0..parts as i32).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn static_members_come_first() {
        let mut s = member("z", &["t"]);
        s.group_instance_id = Some("instance".into());
        let out = range_assign(&[member("a", &["t"]), s], &counts(&[("t", 3)]));
        assert_eq!(out["z"]["t"], vec![0, 1]);
        assert_eq!(out["a"]["t"], vec![2]);
    }

    #[test]
    fn subscription_and_assignment_round_trip() {
        let bytes = encode_subscription(&["a".into(), "b".into()]).unwrap();
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(decode_subscription(&bytes).unwrap(), vec!["a", "b"]);

        let mut plan = BTreeMap::new();
        plan.insert("t".to_string(), vec![2, 0]);
        let decoded = decode_assignment(&encode_assignment(&plan).unwrap()).unwrap();
        let parts: Vec<i32> = decoded.iter().map(|tp| tp.partition).collect();
        assert_eq!(parts, vec![0, 2]);
        assert!(decode_assignment(&[]).unwrap().is_empty());
    }

    #[test]
    fn newer_versions_are_read_as_the_newest_known_one() {
        // A v3 subscription (as librdkafka 2.x sends) with a v9 version number in front.
        let mut s = ConsumerProtocolSubscription::default();
        s.topics = vec![StrBytes::from_static_str("t")];
        s.generation_id = 4;
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&9i16.to_be_bytes());
        s.encode(&mut buf, 3).unwrap();
        buf.extend_from_slice(b"future fields");
        assert_eq!(decode_subscription(&buf).unwrap(), vec!["t"]);
        assert!(decode_subscription(&[0]).is_err());
        assert!(decode_assignment(&[0xff, 0xff, 0]).is_err());
    }
}

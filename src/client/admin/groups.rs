//! Consumer group admin calls: list, describe, delete groups and delete their offsets.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::consumer_protocol_assignment::ConsumerProtocolAssignment;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::DeleteGroupsResponse;
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribeGroupsResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::OffsetDeleteResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError;

use crate::client::accumulator::TopicPartition;
use crate::client::cluster::{topic_name, Cluster};
use crate::client::error::{ClientError, ClientResult, KafkaCode};
use crate::client::group_coordinator::{call_coordinator, find_coordinator};

use super::{kafka_error, s};

/// A group as ListGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    /// `None` from brokers older than ListGroups v4.
    pub state: Option<String>,
}

/// A member of a group and what it was assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Topic → partitions, decoded from the consumer protocol assignment (empty for other
    /// protocol types or before the group's first SyncGroup).
    pub assignment: BTreeMap<String, Vec<i32>>,
}

/// A group as its coordinator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    pub group_id: String,
    /// Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: String,
    pub protocol_type: String,
    /// The assignor chosen (range, roundrobin, ...), empty unless stable.
    pub protocol: String,
    pub members: Vec<MemberInfo>,
}

fn group_id(v: &str) -> GroupId {
    GroupId(s(v))
}

/// Every group of every broker, sorted by id.
pub fn list_groups(cluster: &Cluster) -> ClientResult<Vec<GroupListing>> {
    let version = cluster.version(ApiKey::ListGroups)?;
    let mut brokers: Vec<i32> = cluster.metadata().brokers.keys().copied().collect();
    brokers.sort_unstable();
    let mut groups = BTreeMap::new();
    for broker in brokers {
        let resp: ListGroupsResponse = cluster.connection(broker)?.call(
            ApiKey::ListGroups,
            version,
            &ListGroupsRequest::default(),
        )?;
        kafka_error("ListGroups", resp.error_code, None)?;
        for g in resp.groups {
            let id = g.group_id.0.to_string();
            let listing = GroupListing {
                group_id: id.clone(),
                protocol_type: g.protocol_type.to_string(),
                state: (version >= 4).then(|| g.group_state.to_string()),
            };
            groups.insert(id, listing);
        }
    }
    Ok(groups.into_values().collect())
}

/// State, protocol and members of `group`, asked of its coordinator. A group that does not
/// exist is a `GROUP_ID_NOT_FOUND` error.
pub fn describe_group(cluster: &Cluster, group: &str) -> ClientResult<GroupInfo> {
    let mut req = DescribeGroupsRequest::default();
    req.groups = vec![group_id(group)];
    let resp: DescribeGroupsResponse = call_coordinator(
        cluster,
        group,
        ApiKey::DescribeGroups,
        &req,
        |r: &DescribeGroupsResponse| {
            r.groups
                .first()
                .and_then(|g| KafkaCode::from_code(g.error_code))
        },
    )?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| ClientError::codec("DescribeGroups response", "no group in it"))?;
    kafka_error("DescribeGroups", g.error_code, g.error_message.as_ref())
        .map_err(|e| with_context(e, group))?;
    // Kafka describes a group it does not know as Dead; its admin client reports that as
    // GROUP_ID_NOT_FOUND, and so does this one.
    if g.group_state.as_str() == "Dead" && g.members.is_empty() {
        return Err(ClientError::Kafka {
            api: "DescribeGroups",
            code: KafkaCode(ResponseError::GroupIdNotFound.code()),
            message: Some(format!("group {group} does not exist")),
        });
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members = g
        .members
        .into_iter()
        .map(|m| MemberInfo {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            assignment: if consumer {
                decode_assignment(&m.member_assignment).unwrap_or_default()
            } else {
                BTreeMap::new()
            },
        })
        .collect();
    Ok(GroupInfo {
        group_id: g.group_id.0.to_string(),
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members,
    })
}

/// Topic → partitions of a `ConsumerProtocolAssignment` (i16 version, then the struct).
/// Empty bytes (no assignment yet) are an empty assignment.
pub fn decode_assignment(bytes: &Bytes) -> ClientResult<BTreeMap<String, Vec<i32>>> {
    let mut buf = bytes.clone();
    if buf.len() < 2 {
        return Ok(BTreeMap::new());
    }
    let version = i16::from_be_bytes([buf[0], buf[1]]);
    let _ = bytes::Buf::get_i16(&mut buf);
    // Later versions only add fields at the end (Kafka's compatibility rule): read them as
    // the newest version this crate knows.
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3))
        .map_err(|e| ClientError::codec("consumer protocol assignment", e))?;
    let mut out: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for tp in assignment.assigned_partitions {
        let parts = out.entry(tp.topic.0.to_string()).or_default();
        parts.extend(tp.partitions);
        parts.sort_unstable();
    }
    Ok(out)
}

/// Deletes groups (and their committed offsets), each at its coordinator; one result per
/// group, in the order asked. Kafka refuses groups with members (`NON_EMPTY_GROUP`).
pub fn delete_groups(cluster: &Cluster, groups: &[&str]) -> Vec<(String, ClientResult<()>)> {
    groups
        .iter()
        .map(|g| (g.to_string(), delete_group(cluster, g)))
        .collect()
}

fn delete_group(cluster: &Cluster, group: &str) -> ClientResult<()> {
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![group_id(group)];
    let first_error = |r: &DeleteGroupsResponse| {
        r.results
            .first()
            .and_then(|g| KafkaCode::from_code(g.error_code))
    };
    let resp: DeleteGroupsResponse =
        call_coordinator(cluster, group, ApiKey::DeleteGroups, &req, first_error)?;
    let result = resp
        .results
        .first()
        .ok_or_else(|| ClientError::codec("DeleteGroups response", "no group in it"))?;
    kafka_error("DeleteGroups", result.error_code, None).map_err(|e| with_context(e, group))
}

fn with_context(e: ClientError, what: &str) -> ClientError {
    match e {
        ClientError::Kafka {
            api,
            code,
            message: None,
        } => ClientError::Kafka {
            api,
            code,
            message: Some(what.to_string()),
        },
        other => other,
    }
}

/// Removes `group`'s committed offsets of `partitions`; one result per partition. Kafka
/// refuses partitions of topics the group's members consume (`GROUP_SUBSCRIBED_TO_TOPIC`).
pub fn delete_offsets(
    cluster: &Cluster,
    group: &str,
    partitions: &[TopicPartition],
) -> ClientResult<Vec<(TopicPartition, ClientResult<()>)>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut req = OffsetDeleteRequest::default();
    req.group_id = group_id(group);
    req.topics = by_topic
        .into_iter()
        .map(|(name, parts)| {
            let mut t = OffsetDeleteRequestTopic::default();
            t.name = topic_name(name);
            t.partitions = parts
                .into_iter()
                .map(|p| {
                    let mut rp = OffsetDeleteRequestPartition::default();
                    rp.partition_index = p;
                    rp
                })
                .collect();
            t
        })
        .collect();
    let resp: OffsetDeleteResponse = call_coordinator(
        cluster,
        group,
        ApiKey::OffsetDelete,
        &req,
        |r: &OffsetDeleteResponse| KafkaCode::from_code(r.error_code),
    )?;
    kafka_error("OffsetDelete", resp.error_code, None).map_err(|e| with_context(e, group))?;
    let mut results: BTreeMap<(String, i32), i16> = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            results.insert((t.name.0.to_string(), p.partition_index), p.error_code);
        }
    }
    Ok(partitions
        .iter()
        .map(|tp| {
            let result = match results.get(&(tp.topic.to_string(), tp.partition)) {
                Some(&code) => kafka_error("OffsetDelete", code, None)
                    .map_err(|e| with_context(e, &format!("{}-{}", tp.topic, tp.partition))),
                None => Err(ClientError::codec(
                    "OffsetDelete response",
                    format!("no result for {}-{}", tp.topic, tp.partition),
                )),
            };
            (tp.clone(), result)
        })
        .collect())
}

/// The address (host:port) of `group`'s coordinator, for display.
pub fn coordinator_of(cluster: &Cluster, group: &str) -> ClientResult<String> {
    Ok(find_coordinator(cluster, group)?.addr().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTp;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn assignments_decode_to_topic_partitions() {
        for version in 0..=3i16 {
            let mut a = ConsumerProtocolAssignment::default();
            let mut tp = AssignedTp::default();
            tp.topic = topic_name("orders");
            tp.partitions = vec![2, 0];
            a.assigned_partitions = vec![tp];
            let mut buf = BytesMut::new();
            buf.extend_from_slice(&version.to_be_bytes());
            a.encode(&mut buf, version).unwrap();
            let decoded = decode_assignment(&buf.freeze()).unwrap();
            assert_eq!(decoded.get("orders"), Some(&vec![0, 2]), "v{version}");
        }
        assert!(decode_assignment(&Bytes::new()).unwrap().is_empty());
        assert!(decode_assignment(&Bytes::from_static(&[0, 0, 0])).is_err());
    }
}

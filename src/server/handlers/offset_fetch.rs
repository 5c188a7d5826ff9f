//! OffsetFetch (key 9), v0–v9: a group's committed offsets. v0 has v1's layout (decoded and
//! answered as v1; offsets come from the coordinator, where v0 commits go too). v1–v7 ask
//! for one group: given
//! partitions, or (v2+, topics null) every partition the group has an offset for. v8 asks for
//! several groups at once, each answered with its own error. Errors: per partition only in
//! v1, for the group from v2. `require_stable` (v7+) is ignored: there are no transactional
//! offsets to wait for. v9 (KIP-848) adds a member id and epoch per group, which Kafka does
//! not check for classic groups: neither do we.

use crate::util::hash::HashMap;

use crate::group::api::{Call, FetchedOffset, OffsetFetchCall, OffsetFetchReply, Reply};
use crate::protocol::messages::offset_fetch_request::OffsetFetchRequest;
use crate::protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions, OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use crate::protocol::messages::TopicName;
use crate::runtime;
use bytes::Bytes;

use super::{coordinator_call, group_id, str_bytes, topic_name, Groups, HandlerError, Request};

/// The first version asking for several groups.
const GROUPS_VERSION: i16 = 8;
/// The first version with a group-level error code.
const GROUP_ERROR_VERSION: i16 = 2;
/// The first version carrying leader epochs.
const LEADER_EPOCH_VERSION: i16 = 5;
/// Kafka's offset for "none committed".
const NO_OFFSET: i64 = -1;
const NO_LEADER_EPOCH: i32 = -1;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: OffsetFetchRequest = req.decode_as(req.version().max(1))?;
    if req.version() >= GROUPS_VERSION {
        handle_groups(req, request).await
    } else {
        handle_single_group(req, request).await
    }
}

/// v1–v7: one group.
async fn handle_single_group(
    req: &Request<'_>,
    request: OffsetFetchRequest,
) -> Result<Bytes, HandlerError> {
    let version = req.version();
    // Empty group ids are allowed (Kafka keeps them for old consumers).
    let group = request.group_id.0.to_string();
    let partitions: Option<Vec<(String, i32)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(|&p| (t.name.0.to_string(), p))
            })
            .collect()
    });
    let reply = fetch(&req.groups(), group, partitions.clone()).await;
    let mut response = OffsetFetchResponse::default();
    if reply.error == 0 {
        response.topics = single_group_topics(reply.partitions, version);
    } else if version >= GROUP_ERROR_VERSION {
        response.error_code = reply.error;
    } else {
        // v1 has no group error: every requested partition carries it.
        let failed = partitions
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partition)| FetchedOffset {
                topic,
                partition,
                offset: NO_OFFSET,
                leader_epoch: NO_LEADER_EPOCH,
                metadata: None,
                error: reply.error,
            })
            .collect();
        response.topics = single_group_topics(failed, version);
    }
    req.encode_as(version.max(1), &response)
}

/// v8+: several groups, fetched concurrently (they may live on different shards).
async fn handle_groups(
    req: &Request<'_>,
    request: OffsetFetchRequest,
) -> Result<Bytes, HandlerError> {
    let tasks: Vec<_> = request
        .groups
        .iter()
        .map(|g| {
            let group = g.group_id.0.to_string();
            let partitions: Option<Vec<(String, i32)>> = g.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .flat_map(|t| {
                        t.partition_indexes
                            .iter()
                            .map(|&p| (t.name.0.to_string(), p))
                    })
                    .collect()
            });
            let groups = req.groups();
            runtime::spawn(async move {
                let reply = fetch(&groups, group.clone(), partitions).await;
                (group, reply)
            })
        })
        .collect();
    let mut response = OffsetFetchResponse::default();
    for task in tasks {
        let (group, reply) = task.await;
        let mut g = OffsetFetchResponseGroup::default();
        g.group_id = group_id(&group);
        if reply.error == 0 {
            g.topics = groups_topics(reply.partitions);
        } else {
            g.error_code = reply.error;
        }
        response.groups.push(g);
    }
    req.encode(&response)
}

/// The coordinator's answer for one group, a request-wide error folded into the group error.
async fn fetch(
    groups: &Groups,
    group: String,
    partitions: Option<Vec<(String, i32)>>,
) -> OffsetFetchReply {
    let call = OffsetFetchCall {
        group_id: group.clone(),
        partitions,
    };
    coordinator_call(groups, &group, Call::OffsetFetch(call), |r| match r {
        Reply::OffsetFetch(f) => Some(f),
        _ => None,
    })
    .await
    .unwrap_or_else(|code| OffsetFetchReply {
        error: code,
        partitions: Vec::new(),
    })
}

fn single_group_topics(offsets: Vec<FetchedOffset>, version: i16) -> Vec<OffsetFetchResponseTopic> {
    by_topic(offsets)
        .into_iter()
        .map(|(name, offsets)| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = name;
            t.partitions = offsets
                .into_iter()
                .map(|o| single_group_partition(o, version))
                .collect();
            t
        })
        .collect()
}

fn groups_topics(offsets: Vec<FetchedOffset>) -> Vec<OffsetFetchResponseTopics> {
    by_topic(offsets)
        .into_iter()
        .map(|(name, offsets)| {
            let mut t = OffsetFetchResponseTopics::default();
            t.name = name;
            t.partitions = offsets.into_iter().map(groups_partition).collect();
            t
        })
        .collect()
}

/// Groups offsets by topic, topics in order of first appearance.
fn by_topic(offsets: Vec<FetchedOffset>) -> Vec<(TopicName, Vec<FetchedOffset>)> {
    let mut topics: Vec<(TopicName, Vec<FetchedOffset>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::default();
    for o in offsets {
        match index.get(&o.topic) {
            Some(&i) => topics[i].1.push(o),
            None => {
                index.insert(o.topic.clone(), topics.len());
                topics.push((topic_name(&o.topic), vec![o]));
            }
        }
    }
    topics
}

fn single_group_partition(o: FetchedOffset, version: i16) -> OffsetFetchResponsePartition {
    let mut p = OffsetFetchResponsePartition::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    if version >= LEADER_EPOCH_VERSION {
        p.committed_leader_epoch = o.leader_epoch;
    }
    // Kafka stores a missing metadata string as "".
    p.metadata = Some(str_bytes(o.metadata.unwrap_or_default()));
    p.error_code = o.error;
    p
}

fn groups_partition(o: FetchedOffset) -> OffsetFetchResponsePartitions {
    let mut p = OffsetFetchResponsePartitions::default();
    p.partition_index = o.partition;
    p.committed_offset = o.offset;
    p.committed_leader_epoch = o.leader_epoch;
    p.metadata = Some(str_bytes(o.metadata.unwrap_or_default()));
    p.error_code = o.error;
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Encodable;

    fn offsets() -> Vec<FetchedOffset> {
        ["a", "b", "a"]
            .iter()
            .enumerate()
            .map(|(i, topic)| FetchedOffset {
                topic: topic.to_string(),
                partition: i as i32,
                offset: 10,
                leader_epoch: 2,
                metadata: None,
                error: 0,
            })
            .collect()
    }

    #[test]
    fn offsets_are_grouped_by_topic_in_first_seen_order() {
        let topics = by_topic(offsets());
        let names: Vec<&str> = topics.iter().map(|(n, _)| n.0.as_str()).collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(topics[0].1.len(), 2);
    }

    #[test]
    fn offsets_encode_in_every_version() {
        for version in 1..=7 {
            let mut response = OffsetFetchResponse::default();
            response.topics = single_group_topics(offsets(), version);
            let mut buf = bytes::BytesMut::new();
            response
                .encode(&mut buf, version)
                .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
        let mut group = OffsetFetchResponseGroup::default();
        group.group_id = group_id("g");
        group.topics = groups_topics(offsets());
        let mut response = OffsetFetchResponse::default();
        response.groups = vec![group];
        let mut buf = bytes::BytesMut::new();
        response
            .encode(&mut buf, GROUPS_VERSION)
            .unwrap_or_else(|e| panic!("v8: {e}"));
    }
}

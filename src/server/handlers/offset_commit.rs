//! OffsetCommit (key 8), v0–v9: a group (or a consumer outside group management, generation
//! -1) stores consumed positions. v0 has no generation or member (a commit outside group
//! management); v1 adds them and a per-partition commit timestamp, which becomes the
//! offset's commit time (-1: the broker's), as in Kafka; v0/v1 are hand-decoded and answered
//! as v2 (same response). v6 adds the leader epoch, v7 the group instance id; the retention
//! time of v2–v4 is ignored (as by Kafka since 2.1: the broker's retention applies). v9
//! (KIP-848) changes nothing for classic groups: its member epoch is the generation.
//! The response has per-partition errors only, so a request-wide error goes on every partition.

use crate::util::hash::HashMap;

use crate::group::api::{Call, OffsetCommitCall, OffsetToCommit, Reply};
use crate::protocol::legacy_offset_codecs::{decode_offset_commit_v0_1, LegacyOffsetCommit};
use crate::protocol::messages::offset_commit_request::OffsetCommitRequest;
use crate::protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{coordinator_call, HandlerError, Request};

/// v0 and v1 are answered with the v2 response, which has the same layout.
const FIRST_CRATE_VERSION: i16 = 2;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let LegacyOffsetCommit {
        request,
        commit_timestamps,
    } = if req.version() < FIRST_CRATE_VERSION {
        req.decode_with(|body| decode_offset_commit_v0_1(body, req.version()))?
    } else {
        let request: OffsetCommitRequest = req.decode()?;
        LegacyOffsetCommit {
            request,
            commit_timestamps: Vec::new(),
        }
    };
    // Empty group ids are allowed here (Kafka keeps them for old consumers).
    let group_id = request.group_id.0.to_string();

    // Kafka answers partitions that do not exist itself; the others go to the coordinator.
    let meta = req.image();
    let mut offsets = Vec::new();
    // Whether each requested partition exists, in request order.
    let mut known = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let exists = meta
                .partition_by_name(&topic.name.0, p.partition_index)
                .is_some();
            let commit_timestamp = commit_timestamps.get(known.len()).copied();
            known.push(exists);
            if exists {
                offsets.push(OffsetToCommit {
                    topic: topic.name.0.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
                    commit_timestamp,
                });
            }
        }
    }
    drop(meta);

    let outcome: Result<HashMap<(String, i32), i16>, i16> = if offsets.is_empty() {
        Ok(HashMap::default())
    } else {
        let call = OffsetCommitCall {
            group_id: group_id.clone(),
            generation_id: request.generation_id_or_member_epoch,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|s| s.to_string()),
            offsets,
        };
        coordinator_call(
            &req.groups(),
            &group_id,
            Call::OffsetCommit(call),
            |r| match r {
                Reply::OffsetCommit(c) => Some(c),
                _ => None,
            },
        )
        .await
        .map(|reply| {
            reply
                .partitions
                .into_iter()
                .map(|(topic, partition, error)| ((topic, partition), error))
                .collect()
        })
    };

    let mut known = known.into_iter();
    let mut response = OffsetCommitResponse::default();
    for topic in &request.topics {
        let mut t = OffsetCommitResponseTopic::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let error = match (&outcome, known.next().unwrap_or(false)) {
                (_, false) => ResponseError::UnknownTopicOrPartition.code(),
                (Err(code), true) => *code,
                (Ok(errors), true) => errors
                    .get(&(topic.name.0.to_string(), p.partition_index))
                    .copied()
                    .unwrap_or(ResponseError::UnknownServerError.code()),
            };
            let mut partition = OffsetCommitResponsePartition::default();
            partition.partition_index = p.partition_index;
            partition.error_code = error;
            t.partitions.push(partition);
        }
        response.topics.push(t);
    }
    req.encode_as(req.version().max(FIRST_CRATE_VERSION), &response)
}

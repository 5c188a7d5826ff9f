//! Produce (key 0): append record batches to partitions, wherever their shard is.
//!
//! Records a topic's config refuses (no key on a compacted topic, a timestamp out of range)
//! fail the whole batch with `record_errors` and `error_message` (KIP-467, v8+).
//!
//! acks=0 gets no response; acks=1 is answered once the batches are in the log (page cache);
//! acks=all (-1) likewise on one node, and additionally waits for an fdatasync when
//! `ringbroker.acks.all.fsync` is set (group-committed with concurrent appends).

use crate::protocol::messages::produce_request::ProduceRequest;
use crate::protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, NodeEndpoint, PartitionProduceResponse, ProduceResponse,
    TopicProduceResponse,
};
use crate::protocol::messages::BrokerId;
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{storage_error_for_version, str_bytes, HandlerError, Partitions, Request};
use crate::group::api::OFFSETS_TOPIC;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::legacy::convert_message_set;
use crate::protocol::legacy_produce::{
    decode_produce_v0_2, encode_produce_response_v0_2, LegacyPartitionResponse,
};
use crate::runtime;

/// Whether Produce v0–v2 (legacy message sets) are served.
pub const LEGACY_SUPPORTED: bool = true;

/// Largest decompressed size of one legacy message set.
const LEGACY_MAX_DECOMPRESSED: usize = 64 << 20;

/// Produce v0–v2: legacy MessageSets (magic 0/1), converted to one v2 batch per partition on
/// ingest (keeping the codec), then appended like any batch.
pub async fn handle_legacy(req: &Request<'_>) -> Result<Option<Bytes>, HandlerError> {
    let version = req.version();
    let mut body = req.frame.body.clone();
    let request = decode_produce_v0_2(&mut body, version).map_err(|e| HandlerError::Decode {
        api: req.api,
        version,
        reason: e.to_string(),
    });
    req.signal_decoded(request.is_ok());
    let request = request?;
    let acks = request.acks;
    let durable = acks == -1 && req.config().fsync_on_acks_all;
    let now_ms = runtime::now_ms();
    let mut ops = Vec::new();
    let mut outcome: Vec<Vec<Option<LegacyPartitionResponse>>> = Vec::new();
    for topic in &request.topics {
        let mut early = Vec::new();
        for part in &topic.partitions {
            let failed = |code: i16| {
                Some(LegacyPartitionResponse {
                    partition: part.partition,
                    error_code: code,
                    base_offset: -1,
                    log_append_time_ms: -1,
                })
            };
            if !matches!(acks, -1..=1) {
                early.push(failed(ResponseError::InvalidRequiredAcks.code()));
                continue;
            }
            let Some(records) = part.records.as_ref().filter(|r| !r.is_empty()) else {
                early.push(failed(ResponseError::InvalidRecord.code()));
                continue;
            };
            match convert_message_set(records, LEGACY_MAX_DECOMPRESSED, now_ms) {
                Ok(converted) => {
                    early.push(None);
                    ops.push(PartitionOp::Produce {
                        topic: topic.name.clone(),
                        partition: part.partition,
                        records: Bytes::from(converted.batch),
                        durable,
                        now_ms,
                        acks_all: acks == -1,
                        timeout_ms: request.timeout_ms.max(0) as u64,
                    });
                }
                Err(e) => {
                    tracing::debug!(topic = %topic.name, partition = part.partition, error = %e, "rejected legacy message set");
                    early.push(failed(ResponseError::CorruptMessage.code()));
                }
            }
        }
        outcome.push(early);
    }
    let mut results = req.partitions().run(ops).await.into_iter();
    if acks == 0 {
        return Ok(None);
    }
    let mut topics = Vec::new();
    for (topic, early) in request.topics.iter().zip(outcome) {
        let mut parts = Vec::new();
        for (part, e) in topic.partitions.iter().zip(early) {
            let r = match e {
                Some(r) => r,
                None => match results.next() {
                    Some(PartitionResult::Produce(Ok(info))) => LegacyPartitionResponse {
                        partition: part.partition,
                        error_code: 0,
                        base_offset: info.base_offset,
                        log_append_time_ms: info.log_append_time_ms,
                    },
                    Some(PartitionResult::Produce(Err(e))) => LegacyPartitionResponse {
                        partition: part.partition,
                        error_code: storage_error_for_version(e.code, version, 4),
                        base_offset: -1,
                        log_append_time_ms: -1,
                    },
                    _ => LegacyPartitionResponse {
                        partition: part.partition,
                        error_code: ResponseError::UnknownServerError.code(),
                        base_offset: -1,
                        log_append_time_ms: -1,
                    },
                },
            };
            parts.push(r);
        }
        topics.push((topic.name.clone(), parts));
    }
    Ok(Some(encode_produce_response_v0_2(version, &topics, 0)))
}

pub async fn handle(req: &Request<'_>) -> Result<Option<Bytes>, HandlerError> {
    let request: ProduceRequest = req.decode()?;
    let acks = request.acks;
    let durable = acks == -1 && req.config().fsync_on_acks_all;
    let now_ms = runtime::now_ms();
    let mut ops = Vec::new();
    let mut slots = Vec::new(); // (topic index, partition index) for each op
    let mut early: Vec<Vec<Option<(i16, String)>>> = Vec::new();
    for (ti, topic) in request.topic_data.iter().enumerate() {
        let name = topic.name.0.to_string();
        let mut topic_early = Vec::with_capacity(topic.partition_data.len().min(4096));
        for (pi, part) in topic.partition_data.iter().enumerate() {
            if !matches!(acks, -1..=1) {
                topic_early.push(Some((
                    ResponseError::InvalidRequiredAcks.code(),
                    format!("acks must be -1, 0 or 1, got {acks}"),
                )));
                continue;
            }
            if name == OFFSETS_TOPIC {
                topic_early.push(Some((
                    ResponseError::InvalidTopicException.code(),
                    format!("{OFFSETS_TOPIC} is internal: only the group coordinator writes it"),
                )));
                continue;
            }
            let Some(records) = part.records.clone().filter(|r| !r.is_empty()) else {
                topic_early.push(Some((
                    ResponseError::InvalidRecord.code(),
                    "no records in the request".to_string(),
                )));
                continue;
            };
            topic_early.push(None);
            ops.push(PartitionOp::Produce {
                topic: name.clone(),
                partition: part.index,
                records,
                durable,
                now_ms,
                acks_all: acks == -1,
                timeout_ms: request.timeout_ms.max(0) as u64,
            });
            slots.push((ti, pi));
        }
        early.push(topic_early);
    }
    let results = req.partitions().run(ops).await;
    if acks == 0 {
        return Ok(None);
    }
    let mut by_slot = crate::util::hash::HashMap::default();
    for (slot, result) in slots.into_iter().zip(results) {
        by_slot.insert(slot, result);
    }
    let version = req.version();
    let mut response = ProduceResponse::default();
    let mut hints = Vec::new();
    for (ti, topic) in request.topic_data.iter().enumerate() {
        let mut t = TopicProduceResponse::default();
        t.name = topic.name.clone();
        t.topic_id = topic.topic_id;
        for (pi, part) in topic.partition_data.iter().enumerate() {
            let mut p = PartitionProduceResponse::default();
            p.index = part.index;
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            p.log_start_offset = -1;
            if let Some(Some((code, message))) = early.get(ti).and_then(|e| e.get(pi)) {
                p.error_code = *code;
                if version >= 8 {
                    p.error_message = Some(str_bytes(message.clone()));
                }
            } else {
                match by_slot.remove(&(ti, pi)) {
                    Some(PartitionResult::Produce(Ok(info))) => {
                        p.base_offset = info.base_offset;
                        p.log_append_time_ms = info.log_append_time_ms;
                        if version >= 5 {
                            p.log_start_offset = info.log_start_offset;
                        }
                    }
                    Some(PartitionResult::Produce(Err(e))) => {
                        p.error_code = storage_error_for_version(e.code, version, 4);
                        if let Some(hint) = hint_for(
                            &req.partitions(),
                            (version, LEADER_HINT_VERSION),
                            &topic.name.0,
                            part.index,
                            e.code,
                        ) {
                            p.current_leader.leader_id = BrokerId(hint.leader_id);
                            p.current_leader.leader_epoch = hint.leader_epoch;
                            hints.extend(hint.endpoint);
                        }
                        tracing::debug!(topic = %topic.name.0, partition = part.index, error = %e.message, "produce failed");
                        if version >= 8 {
                            // KIP-467: which records made the batch fail, and why.
                            p.record_errors = e
                                .record_errors
                                .into_iter()
                                .map(|r| {
                                    let mut b = BatchIndexAndErrorMessage::default();
                                    b.batch_index = r.batch_index;
                                    b.batch_index_error_message = Some(str_bytes(r.message));
                                    b
                                })
                                .collect();
                            p.error_message = Some(str_bytes(e.message));
                        }
                    }
                    _ => p.error_code = ResponseError::UnknownServerError.code(),
                }
            }
            t.partition_responses.push(p);
        }
        response.responses.push(t);
    }
    response.node_endpoints = node_endpoints(hints);
    req.encode(&response).map(Some)
}

/// The first Produce version with KIP-951's leader hints.
const LEADER_HINT_VERSION: i16 = 10;

/// A leader hint for a partition refused with NOT_LEADER_OR_FOLLOWER, when the client's
/// version (`version` ≥ `first`) has them; shared with Fetch.
pub(super) fn hint_for(
    partitions: &Partitions<'_>,
    (version, first): (i16, i16),
    topic: &str,
    partition: i32,
    code: i16,
) -> Option<crate::shard::cluster_admin::LeaderHint> {
    let hinted = code == ResponseError::NotLeaderOrFollower.code();
    (hinted && version >= first)
        .then(|| partitions.leader_hint(topic, partition))
        .flatten()
}

/// Each hinted leader once.
pub(super) fn node_endpoints(mut hinted: Vec<crate::metadata::LiveBroker>) -> Vec<NodeEndpoint> {
    hinted.sort_by_key(|b| b.id);
    hinted.dedup_by_key(|b| b.id);
    hinted
        .into_iter()
        .map(|b| {
            let mut e = NodeEndpoint::default();
            e.node_id = BrokerId(b.id.0);
            e.host = str_bytes(b.host);
            e.port = i32::from(b.port);
            e.rack = b.rack.map(str_bytes);
            e
        })
        .collect()
}

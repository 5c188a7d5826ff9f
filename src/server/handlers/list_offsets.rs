//! ListOffsets (key 2), v0–v9: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest
//! local (-4, v8+: the log start, nothing being tiered), latest tiered (-5, v9+: offset -1, as
//! Kafka answers without tiered storage) or the first offset at or after a timestamp.
//!
//! v0 (hand-decoded) asks for up to `max_num_offsets` offsets "before" a time and gets
//! `old_style_offsets`: segment base offsets and the log end, highest first (see
//! `log::offsets_before`).

use crate::protocol::legacy_offset_codecs::{
    decode_list_offsets_v0, encode_list_offsets_response_v0, LegacyListOffsets, LegacyOffsetsAnswer,
};
use crate::protocol::messages::list_offsets_request::ListOffsetsRequest;
use crate::protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::ResponseError;
use bytes::Bytes;

use super::{HandlerError, Request};
use crate::partition::offsets_reader::OffsetsReader;
use crate::partition::ops::{PartitionOp, PartitionResult};

/// Latest tiered offset (KIP-1005): the one answer without a leader epoch.
const LATEST_TIERED_TIMESTAMP: i64 = -5;

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    if req.version() == 0 {
        return handle_v0(req).await;
    }
    let request: ListOffsetsRequest = req.decode()?;
    let ops = ops(&request, &[]);
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut response = ListOffsetsResponse::default();
    for topic in &request.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let mut r = ListOffsetsPartitionResponse::default();
            r.partition_index = p.partition_index;
            // The current leader epoch for latest (one node: 0): a consumer validates its
            // position with it after a leader change (KIP-320), and with an older epoch the
            // leader would report that epoch's end and the client would see a truncation
            // that did not happen. Other answers carry their batch's epoch, as Kafka's do.
            let current_epoch = || {
                req.partitions()
                    .leader_hint(&topic.name.0, p.partition_index)
                    .map_or(0, |h| h.leader_epoch)
            };
            let with_epoch = req.version() >= 4 && p.timestamp != LATEST_TIERED_TIMESTAMP;
            match results.next() {
                Some(PartitionResult::ListOffsets(Ok(answer))) => {
                    r.offset = answer.offset;
                    r.timestamp = answer.timestamp;
                    if with_epoch {
                        r.leader_epoch = answer.leader_epoch.unwrap_or_else(current_epoch);
                    }
                }
                Some(PartitionResult::ListOffsets(Err(e))) => {
                    r.error_code = e.code;
                    r.offset = -1;
                    r.timestamp = -1;
                    if with_epoch {
                        r.leader_epoch = current_epoch();
                    }
                }
                _ => r.error_code = ResponseError::UnknownServerError.code(),
            }
            t.partitions.push(r);
        }
        response.topics.push(t);
    }
    req.encode(&response)
}

/// One operation per requested partition, in request order; `max_num_offsets` (v0) is
/// matched by position.
fn ops(request: &ListOffsetsRequest, max_num_offsets: &[i32]) -> Vec<PartitionOp> {
    let mut ops = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            ops.push(PartitionOp::ListOffsets {
                topic: topic.name.0.to_string(),
                partition: p.partition_index,
                timestamp: p.timestamp,
                max_num_offsets: max_num_offsets.get(ops.len()).copied(),
                reader: OffsetsReader::from_request(request.replica_id.0, p.current_leader_epoch),
            });
        }
    }
    ops
}

async fn handle_v0(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let LegacyListOffsets {
        request,
        max_num_offsets,
    } = req.decode_with(decode_list_offsets_v0)?;
    let ops = ops(&request, &max_num_offsets);
    let mut results = req.partitions().run(ops).await.into_iter();
    let mut topics = Vec::new();
    for topic in &request.topics {
        let mut partitions = Vec::new();
        for p in &topic.partitions {
            let (error_code, offsets) = match results.next() {
                Some(PartitionResult::LegacyOffsets(Ok(offsets))) => (0, offsets),
                Some(PartitionResult::LegacyOffsets(Err(e))) => (e.code, Vec::new()),
                _ => (ResponseError::UnknownServerError.code(), Vec::new()),
            };
            partitions.push(LegacyOffsetsAnswer {
                partition: p.partition_index,
                error_code,
                offsets,
            });
        }
        topics.push((topic.name.0.to_string(), partitions));
    }
    Ok(encode_list_offsets_response_v0(&topics))
}

//! Produce (key 0): append record batches to partitions, wherever their shard is.
//!
//! acks=0 gets no response; acks=1 is answered once the batches are in the log (page cache);
//! acks=all (-1) likewise on one node, and additionally waits for an fdatasync when
//! `ringbroker.acks.all.fsync` is set (group-committed with concurrent appends).

use bytes::Bytes;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::ResponseError;

use super::{str_bytes, HandlerError, Request};
use crate::runtime;
use crate::shard::messages::{PartitionOp, PartitionResult};

/// Whether Produce v0–v2 (legacy message sets) are served.
pub const LEGACY_SUPPORTED: bool = false;

pub async fn handle(req: &Request<'_>) -> Result<Option<Bytes>, HandlerError> {
    let request: ProduceRequest = req.decode()?;
    let shard = req.shard;
    let acks = request.acks;
    let durable = acks == -1 && shard.config.fsync_on_acks_all;
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
            });
            slots.push((ti, pi));
        }
        early.push(topic_early);
    }
    let results = shard.run_partition_ops(ops).await;
    if acks == 0 {
        return Ok(None);
    }
    let mut by_slot = std::collections::HashMap::new();
    for (slot, result) in slots.into_iter().zip(results) {
        by_slot.insert(slot, result);
    }
    let version = req.version();
    let mut response = ProduceResponse::default();
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
                        p.error_code = e.code;
                        tracing::debug!(topic = %topic.name.0, partition = part.index, error = %e.message, "produce failed");
                        if version >= 8 {
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
    req.encode(&response).map(Some)
}

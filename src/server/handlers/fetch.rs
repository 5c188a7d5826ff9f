//! Fetch (key 1): read batches from partitions, long-polling up to max_wait_ms until min_bytes
//! are available. Sessions are not kept (session id 0: every request is a full fetch).

use std::time::{Duration, Instant};

use crate::protocol::messages::fetch_request::FetchRequest;
use crate::protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, PartitionData,
};
use crate::protocol::messages::BrokerId;
use bytes::Bytes;

use super::{HandlerError, Request};
use crate::shard::messages::{PartitionOp, PartitionResult};

/// Upper bound on one long poll, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

pub async fn handle(req: &Request<'_>) -> Result<Bytes, HandlerError> {
    let request: FetchRequest = req.decode()?;
    let shard = req.shard;
    let meta = shard.metadata();
    let names: Vec<String> = request
        .topics
        .iter()
        .map(|t| {
            if req.version() >= 13 {
                meta.topic_by_id(t.topic_id)
                    .map(|m| m.name.clone())
                    .unwrap_or_default()
            } else {
                t.topic.0.to_string()
            }
        })
        .collect();
    let deadline =
        Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP);
    let min_bytes = request.min_bytes.max(0) as usize;
    let max_bytes = if request.max_bytes <= 0 {
        usize::MAX
    } else {
        request.max_bytes as usize
    };
    // After the deadline, one last look (data may have come just then), then answer.
    let mut last_look = false;
    loop {
        let results = shard.run_partition_ops(fetch_ops(&request, &names)).await;
        let total: usize = results
            .iter()
            .map(|r| match r {
                PartitionResult::Fetch(Ok(d)) => d.records.len(),
                _ => 0,
            })
            .sum();
        let any_error = results
            .iter()
            .any(|r| matches!(r, PartitionResult::Fetch(Err(_))));
        let now = Instant::now();
        let satisfied = total >= min_bytes.max(1) || any_error || results.is_empty();
        if satisfied || last_look || now >= deadline {
            return build_response(req, &request, &names, results, max_bytes);
        }
        let waits = request
            .topics
            .iter()
            .zip(&names)
            .flat_map(|(t, name)| {
                t.partitions
                    .iter()
                    .map(move |p| (name.clone(), p.partition, p.fetch_offset))
            })
            .collect();
        let arrived = shard.wait_for_data(waits, deadline - now).await;
        last_look = !arrived && Instant::now() >= deadline;
    }
}

/// One fetch operation per requested partition, in request order.
fn fetch_ops(request: &FetchRequest, names: &[String]) -> Vec<PartitionOp> {
    let mut ops = Vec::new();
    for (topic, name) in request.topics.iter().zip(names) {
        for p in &topic.partitions {
            ops.push(PartitionOp::Fetch {
                topic: name.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
            });
        }
    }
    ops
}

fn build_response(
    req: &Request<'_>,
    request: &FetchRequest,
    names: &[String],
    results: Vec<PartitionResult>,
    max_bytes: usize,
) -> Result<Bytes, HandlerError> {
    let mut results = results.into_iter();
    let mut budget_used = 0usize;
    let mut response = FetchResponse::default();
    response.session_id = 0;
    for (topic, name) in request.topics.iter().zip(names) {
        let mut t = FetchableTopicResponse::default();
        t.topic = topic.topic.clone();
        t.topic_id = topic.topic_id;
        let _ = name;
        for p in &topic.partitions {
            let mut d = PartitionData::default();
            d.partition_index = p.partition;
            d.preferred_read_replica = BrokerId(-1);
            d.aborted_transactions = Some(Vec::new());
            match results.next() {
                Some(PartitionResult::Fetch(Ok(data))) => {
                    d.high_watermark = data.high_watermark;
                    d.last_stable_offset = data.high_watermark;
                    if req.version() >= 5 {
                        d.log_start_offset = data.log_start_offset;
                    }
                    // The response's max_bytes: whole partitions until it is reached; the
                    // first non-empty one goes whatever its size, as in Kafka.
                    let len = data.records.len();
                    if len > 0 && budget_used > 0 && budget_used + len > max_bytes {
                        d.records = Some(Bytes::new());
                    } else {
                        budget_used += len;
                        d.records = Some(data.records);
                    }
                }
                Some(PartitionResult::Fetch(Err(e))) => {
                    d.error_code = e.code;
                    d.high_watermark = -1;
                    d.last_stable_offset = -1;
                    d.records = Some(Bytes::new());
                }
                _ => {
                    d.error_code = crate::protocol::ResponseError::UnknownServerError.code();
                    d.records = Some(Bytes::new());
                }
            }
            t.partitions.push(d);
        }
        response.responses.push(t);
    }
    req.encode(&response)
}

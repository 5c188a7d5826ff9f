//! Fetch (key 1): read batches from partitions, long-polling up to max_wait_ms until min_bytes
//! are available. From v7, fetch sessions (KIP-227, `shard::fetch_session`): a full fetch
//! creates one, and the incremental fetches that follow name only the partitions that changed
//! and are answered only the partitions with news.
//!
//! The response keeps to one byte budget (KIP-74): the request's `max_bytes`, capped by the
//! broker's `fetch.max.bytes`, spent on partitions in request order, each at most its
//! `partition_max_bytes`, the first batch whole even when larger. Each owning shard reads its
//! partitions in order within the budget; the budget is applied once more over the merged
//! results. After a long-poll wake only partitions whose log grew are read again.
//!
//! v0–v3 (hand-decoded: the crate starts at v4) get their batches down-converted to legacy
//! message sets, magic 0 for v0/v1 and magic 1 for v2/v3, as Kafka does. v13+ name topics by
//! id; an id we do not know is answered UNKNOWN_TOPIC_ID.

use std::time::Duration;

use crate::runtime::Instant;

use crate::protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use crate::protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, PartitionData,
};
use crate::protocol::messages::BrokerId;
use bytes::Bytes;

use super::{encode_sharing, storage_error_for_version, HandlerError, Request};
use crate::metrics::registry::{self as metrics, Stage};
use crate::model::Offset;
use crate::partition::fetch_budget::FetchBudget;
use crate::partition::ops::{FetchReader, PartitionOp, PartitionResult};
use crate::protocol::legacy_downconvert::{
    down_convert, magic_for_fetch_version, DownConvertError,
};
use crate::protocol::legacy_fetch::{decode_fetch_v0_3, encode_fetch_response_v0_3};
use crate::protocol::sharing_buf::SHARE_MIN_BYTES;
use crate::protocol::ResponseError;
use crate::shard::fetch_session::{
    Plan, Position, ReadOutcome, SessionPartition, FINAL_EPOCH, NO_SESSION,
};

/// The last version answered with legacy message sets.
const LAST_LEGACY_VERSION: i16 = 3;
/// The first version naming topics by id.
const TOPIC_ID_VERSION: i16 = 13;
/// The first version with fetch sessions.
const SESSION_VERSION: i16 = 7;

/// The response body, as parts: the record batches are shared with storage, not copied.
pub async fn handle(req: &Request<'_>) -> Result<Vec<Bytes>, HandlerError> {
    let request: FetchRequest = if req.version() <= LAST_LEGACY_VERSION {
        req.decode_with(|body| decode_fetch_v0_3(body, req.version()))?
    } else {
        req.decode()?
    };
    let mut request = request;
    let replica = replica_of(&request, req.version());
    let plan = match begin_session(req, &mut request) {
        Ok(plan) => plan,
        Err(code) => {
            let mut response = FetchResponse::default();
            response.error_code = code;
            response.session_id = NO_SESSION;
            return Ok(vec![req.encode(&response)?]);
        }
    };
    let meta = req.image();
    let names: Vec<String> = request
        .topics
        .iter()
        .map(|t| {
            if req.version() >= TOPIC_ID_VERSION {
                meta.topic(t.topic_id)
                    .map(|m| m.name.clone())
                    .unwrap_or_default()
            } else {
                t.topic.0.to_string()
            }
        })
        .collect();
    // As long as the client asks, as Kafka's DelayedFetch waits (kafka-go's conn sends
    // i32::MAX ms when it has no deadline): a stopping broker still answers at once.
    let deadline = Instant::now() + Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let max_bytes = response_max_bytes(request.max_bytes, req.config().fetch_max_bytes);
    // Not capped by `max_bytes`: when min_bytes can never be read, Kafka waits the whole
    // max wait, and so do we.
    let min_bytes = request.min_bytes.max(0) as usize;
    // After the deadline, one last look (data may have come just then), then answer.
    let mut last_look = false;
    let mut results: Vec<PartitionResult> = Vec::new();
    loop {
        let ops = fetch_ops(&request, &names, &results, replica);
        let fresh = req.partitions().run_fetch(ops, max_bytes).await;
        results = if results.is_empty() {
            fresh
        } else {
            keep_unchanged(results, fresh)
        };
        let now = Instant::now();
        if answer_now(&results, min_bytes) || last_look || now >= deadline {
            return build_response(req, &request, &names, results, max_bytes, &plan);
        }
        let waits = fetch_ops(&request, &names, &results, replica)
            .into_iter()
            .filter_map(|op| match op {
                // Wait for data past what was read already, not past the fetch offset:
                // a partition with some data (below min_bytes) would wake at once, again
                // and again, until the deadline.
                PartitionOp::Fetch {
                    topic,
                    partition,
                    offset,
                    known_end,
                    ..
                } => Some((topic, partition, known_end.unwrap_or(offset).max(offset))),
                _ => None,
            })
            .collect();
        let arrived = req
            .partitions()
            .wait_for_data(waits, deadline - now, replica.is_some())
            .await;
        metrics::record_stage(Stage::FetchWait, now.elapsed());
        // A stopping broker answers with what it has (one last look, as at the deadline).
        last_look = (!arrived && Instant::now() >= deadline) || req.is_stopping();
    }
}

/// Whether the reads so far answer the fetch now rather than holding it, by Kafka's rules
/// (`ReplicaManager.fetchMessages`; max wait ≤ 0 is the caller's deadline): no partitions,
/// at least `min_bytes` read (so always with min_bytes 0), an error on a partition, or a
/// follower's diverging epoch (it must truncate before fetching on). This broker names no
/// preferred read replica.
fn answer_now(results: &[PartitionResult], min_bytes: usize) -> bool {
    let mut total = 0;
    for r in results {
        match r {
            PartitionResult::Fetch(Ok(d)) if d.diverging.is_some() => return true,
            PartitionResult::Fetch(Ok(d)) => total += d.records.len(),
            _ => return true,
        }
    }
    results.is_empty() || total >= min_bytes
}

/// The broker id of a follower's fetch (replica id ≥ 0; in `ReplicaState` from v15), or
/// `None` for a consumer.
fn replica_of(request: &FetchRequest, version: i16) -> Option<i32> {
    let id = if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    };
    (id >= 0).then_some(id)
}

/// The response's byte budget: the request's `max_bytes` (0 or less: none given) capped by
/// the broker's `fetch.max.bytes`.
fn response_max_bytes(requested: i32, broker_max: usize) -> usize {
    match usize::try_from(requested) {
        Ok(n) if n > 0 => n.min(broker_max),
        _ => broker_max,
    }
}

/// One fetch operation per requested partition, in request order. `previous` (empty on the
/// first read) gives each partition the log end already seen, so that a partition whose log
/// did not grow is not read again.
fn fetch_ops(
    request: &FetchRequest,
    names: &[String],
    previous: &[PartitionResult],
    replica: Option<i32>,
) -> Vec<PartitionOp> {
    let mut ops = Vec::new();
    for (topic, name) in request.topics.iter().zip(names) {
        for p in &topic.partitions {
            let known_end = match previous.get(ops.len()) {
                Some(PartitionResult::Fetch(Ok(d))) => Some(d.read_end),
                _ => None,
            };
            let reader = match replica {
                Some(id) => FetchReader::Replica {
                    id,
                    current_leader_epoch: p.current_leader_epoch,
                    last_fetched_epoch: p.last_fetched_epoch,
                    log_start_offset: p.log_start_offset,
                },
                None => FetchReader::Consumer {
                    current_leader_epoch: p.current_leader_epoch,
                },
            };
            ops.push(PartitionOp::Fetch {
                topic: name.clone(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                known_end,
                reader,
            });
        }
    }
    ops
}

/// Merges a re-read into the previous results: a partition whose log end did not move was
/// not read again (empty records, same end) and keeps what the previous read returned.
fn keep_unchanged(
    previous: Vec<PartitionResult>,
    fresh: Vec<PartitionResult>,
) -> Vec<PartitionResult> {
    previous
        .into_iter()
        .zip(fresh)
        .map(|(old, new)| match (&old, &new) {
            (PartitionResult::Fetch(Ok(o)), PartitionResult::Fetch(Ok(n)))
                if n.records.is_empty()
                    && n.read_end == o.read_end
                    && n.high_watermark == o.high_watermark =>
            {
                old
            }
            _ => new,
        })
        .collect()
}

/// Fetch's KIP-951 versions: a partition's current leader from v12, the endpoints from v16.
const CURRENT_LEADER_VERSION: i16 = 12;
const NODE_ENDPOINTS_VERSION: i16 = 16;

/// The same endpoints as Produce's, in Fetch's message type.
fn endpoints_for_fetch(
    hinted: Vec<crate::metadata::LiveBroker>,
) -> Vec<crate::protocol::messages::fetch_response::NodeEndpoint> {
    super::produce::node_endpoints(hinted)
        .into_iter()
        .map(|e| {
            let mut f = crate::protocol::messages::fetch_response::NodeEndpoint::default();
            f.node_id = e.node_id;
            f.host = e.host;
            f.port = e.port;
            f.rack = e.rack;
            f
        })
        .collect()
}

fn build_response(
    req: &Request<'_>,
    request: &FetchRequest,
    names: &[String],
    results: Vec<PartitionResult>,
    max_bytes: usize,
    plan: &Plan,
) -> Result<Vec<Bytes>, HandlerError> {
    let mut results = results.into_iter();
    // Each shard kept to the budget on its own; over all of them, in request order, it is
    // applied once more (whole batches only).
    let mut budget = FetchBudget::new(max_bytes);
    let mut response = FetchResponse::default();
    let mut hints = Vec::new();
    for (topic, name) in request.topics.iter().zip(names) {
        let unknown_id = req.version() >= TOPIC_ID_VERSION && name.is_empty();
        let mut t = FetchableTopicResponse::default();
        t.topic = topic.topic.clone();
        t.topic_id = topic.topic_id;
        for p in &topic.partitions {
            let mut d = PartitionData::default();
            d.partition_index = p.partition;
            d.preferred_read_replica = BrokerId(-1);
            d.aborted_transactions = Some(Vec::new());
            match results.next() {
                _ if unknown_id => {
                    d.error_code = ResponseError::UnknownTopicId.code();
                    d.high_watermark = -1;
                    d.last_stable_offset = -1;
                    d.records = Some(Bytes::new());
                }
                Some(PartitionResult::Fetch(Ok(data))) => {
                    d.high_watermark = data.high_watermark;
                    d.last_stable_offset = data.high_watermark;
                    if let Some((epoch, end_offset)) = data.diverging {
                        d.diverging_epoch.epoch = epoch;
                        d.diverging_epoch.end_offset = end_offset;
                    }
                    if req.version() >= 5 {
                        d.log_start_offset = data.log_start_offset;
                    }
                    let partition_max = p.partition_max_bytes.max(0) as usize;
                    d.records = Some(budget.take(data.records, partition_max));
                }
                Some(PartitionResult::Fetch(Err(e))) => {
                    d.error_code = storage_error_for_version(e.code, req.version(), 6);
                    let at = (req.version(), CURRENT_LEADER_VERSION);
                    if let Some(hint) =
                        super::produce::hint_for(&req.partitions(), at, name, p.partition, e.code)
                    {
                        d.current_leader.leader_id = BrokerId(hint.leader_id);
                        d.current_leader.leader_epoch = hint.leader_epoch;
                        hints.extend(hint.endpoint);
                    }
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
    if req.version() >= NODE_ENDPOINTS_VERSION {
        response.node_endpoints = endpoints_for_fetch(hints);
    }
    finish_session(req, request, &mut response, plan);
    if req.version() <= LAST_LEGACY_VERSION {
        let magic = magic_for_fetch_version(req.version());
        let max_decompressed = req.config().fetch_max_bytes.saturating_mul(4);
        for (t, asked) in response.responses.iter_mut().zip(&request.topics) {
            for (p, asked) in t.partitions.iter_mut().zip(&asked.partitions) {
                downconvert_partition(p, magic, asked.fetch_offset, max_decompressed);
            }
        }
        return Ok(vec![encode_fetch_response_v0_3(&response, req.version())]);
    }
    let batches: Vec<Bytes> = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.clone())
        .filter(|r| r.len() >= SHARE_MIN_BYTES)
        .collect();
    encode_sharing(req.api, req.version(), &response, batches)
}

/// Applies the request's session fields to this shard's sessions. For an incremental fetch,
/// rewrites `request` to name every partition of the session (with the positions it holds).
/// Err: the error code of the whole response (70, 71).
fn begin_session(req: &Request<'_>, request: &mut FetchRequest) -> Result<Plan, i16> {
    if req.version() < SESSION_VERSION {
        return Ok(Plan::Sessionless);
    }
    let requested: Vec<(SessionPartition, Position)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    session_key(req, &t.topic.0, t.topic_id, p.partition),
                    position_of(p),
                )
            })
        })
        .collect();
    let forgotten: Vec<SessionPartition> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| session_key(req, &t.topic.0, t.topic_id, *p))
        })
        .collect();
    let plan = req
        .fetch_sessions()
        .begin(
            request.session_id,
            request.session_epoch,
            &requested,
            &forgotten,
        )
        .map_err(|e| e.code())?;
    if let Plan::Incremental { partitions, .. } = &plan {
        request.topics = session_topics(partitions);
    }
    Ok(plan)
}

/// A requested partition's position, as a session keeps it.
fn position_of(p: &FetchPartition) -> Position {
    Position {
        fetch_offset: Offset(p.fetch_offset),
        max_bytes: p.partition_max_bytes,
        current_leader_epoch: p.current_leader_epoch,
        last_fetched_epoch: p.last_fetched_epoch,
        log_start_offset: Offset(p.log_start_offset),
    }
}

fn session_key(req: &Request<'_>, name: &str, id: uuid::Uuid, partition: i32) -> SessionPartition {
    let by_id = req.version() >= TOPIC_ID_VERSION;
    SessionPartition {
        topic: if by_id {
            String::new()
        } else {
            name.to_string()
        },
        topic_id: if by_id { id.as_u128() } else { 0 },
        partition,
    }
}

/// The session's partitions as request topics (consecutive partitions of a topic together).
fn session_topics(partitions: &[(SessionPartition, Position)]) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (key, position) in partitions {
        let id = uuid::Uuid::from_u128(key.topic_id);
        let same = topics
            .last()
            .is_some_and(|t| t.topic.0.as_str() == key.topic && t.topic_id == id);
        if !same {
            let mut t = FetchTopic::default();
            t.topic = super::topic_name(&key.topic);
            t.topic_id = id;
            topics.push(t);
        }
        let mut p = FetchPartition::default();
        p.partition = key.partition;
        p.fetch_offset = position.fetch_offset.0;
        p.partition_max_bytes = position.max_bytes;
        p.current_leader_epoch = position.current_leader_epoch;
        p.last_fetched_epoch = position.last_fetched_epoch;
        p.log_start_offset = position.log_start_offset.0;
        if let Some(t) = topics.last_mut() {
            t.partitions.push(p);
        }
    }
    topics
}

/// Creates the session of a full fetch (its id in the response), or keeps only the partitions
/// with news in the response of an incremental one.
fn finish_session(
    req: &Request<'_>,
    request: &FetchRequest,
    response: &mut FetchResponse,
    plan: &Plan,
) {
    let mut reads = Vec::new();
    for (asked, t) in request.topics.iter().zip(&response.responses) {
        for (p, d) in asked.partitions.iter().zip(&t.partitions) {
            let key = session_key(req, &asked.topic.0, asked.topic_id, p.partition);
            let position = position_of(p);
            let read = ReadOutcome {
                high_watermark: Offset(d.high_watermark),
                last_stable_offset: Offset(d.last_stable_offset),
                log_start_offset: Offset(d.log_start_offset),
                has_records: d.records.as_ref().is_some_and(|r| !r.is_empty()),
                error: d.error_code != 0,
            };
            reads.push((key, position, read));
        }
    }
    let mut sessions = req.fetch_sessions();
    match plan {
        Plan::Sessionless => response.session_id = NO_SESSION,
        Plan::Full if request.session_epoch != FINAL_EPOCH => {
            response.session_id = sessions.create(reads);
        }
        Plan::Full => response.session_id = NO_SESSION,
        Plan::Incremental { id, .. } => {
            let reads: Vec<_> = reads.into_iter().map(|(k, _, r)| (k, r)).collect();
            let mut keep = sessions.select(*id, &reads).into_iter();
            for t in &mut response.responses {
                t.partitions.retain(|_| keep.next().unwrap_or(true));
            }
            response.responses.retain(|t| !t.partitions.is_empty());
            response.session_id = *id;
        }
    }
}

/// Rewrites a partition's records as a legacy message set of `magic`.
fn downconvert_partition(p: &mut PartitionData, magic: i8, offset: i64, max_decompressed: usize) {
    let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) else {
        return;
    };
    match down_convert(records, magic, offset, max_decompressed) {
        Ok(set) => p.records = Some(Bytes::from(set)),
        Err(e) => {
            p.error_code = match e {
                DownConvertError::Zstd { .. } => ResponseError::UnsupportedCompressionType.code(),
                _ => ResponseError::CorruptMessage.code(),
            };
            tracing::warn!(partition = p.partition_index, error = %e, "fetch down-conversion failed");
            p.records = Some(Bytes::new());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_caps_the_requested_max_bytes() {
        assert_eq!(response_max_bytes(1000, 5000), 1000);
        assert_eq!(response_max_bytes(i32::MAX, 5000), 5000);
        assert_eq!(response_max_bytes(0, 5000), 5000);
        assert_eq!(response_max_bytes(-1, 5000), 5000);
    }

    fn read(bytes: usize, diverging: Option<(i32, i64)>) -> PartitionResult {
        PartitionResult::Fetch(Ok(crate::partition::ops::FetchedData {
            records: Bytes::from(vec![0u8; bytes]),
            high_watermark: 0,
            log_start_offset: 0,
            read_end: 0,
            diverging,
        }))
    }

    #[test]
    fn a_fetch_is_answered_now_only_by_kafkas_rules() {
        // Nothing read yet: held for min_bytes ≥ 1, answered for min_bytes 0.
        assert!(!answer_now(&[read(0, None)], 1));
        assert!(answer_now(&[read(0, None)], 0));
        // min_bytes counts over all partitions, and is not capped by anything.
        assert!(!answer_now(&[read(40, None), read(50, None)], 100));
        assert!(answer_now(&[read(40, None), read(60, None)], 100));
        assert!(!answer_now(&[read(5000, None)], 1 << 20));
        // No partitions, an error, a diverging epoch: at once.
        assert!(answer_now(&[], 1));
        let error = crate::partition::error::PartitionError::new(3, "unknown".to_string());
        assert!(answer_now(
            &[read(0, None), PartitionResult::Fetch(Err(error))],
            1
        ));
        assert!(answer_now(&[read(0, None), read(0, Some((3, 10)))], 1));
    }
}

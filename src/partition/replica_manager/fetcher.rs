//! A follower's fetchers: one task per leader broker, sending one long-poll Fetch (v12:
//! replica id, `LastFetchedEpoch`, `DivergingEpoch`, a KIP-227 session) for all of this
//! shard's partitions that broker leads; a diverging answer truncates, records are appended
//! as the leader has them, an out-of-range answer moves the log to the leader's bounds.

use crate::util::hash::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchRequest, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId as WireBrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{out_of_range, ReplicaManager, FETCH_BACKOFF, REPLICA_FETCH_VERSION};
use crate::metadata::MetadataImage;
use crate::model::{BrokerId, LeaderEpoch};
use crate::partition::replica_role::{FetchPosition, LeaderMarks};
use crate::partition::Partition;
use crate::protocol::ResponseError;
use crate::replication::fetch_session_client::FollowerSession;
use crate::replication::replica_client::ReplicaClient;
use crate::runtime;

impl ReplicaManager {
    /// Starts a fetcher for `leader` unless one runs.
    pub(super) fn ensure_fetcher(self: &Rc<Self>, leader: BrokerId) {
        if !self.fetching_from.borrow_mut().insert(leader) {
            return;
        }
        let manager = Rc::clone(self);
        runtime::spawn_detached(async move {
            run_fetcher(&manager, leader).await;
            manager.fetching_from.borrow_mut().remove(&leader);
        });
    }
}

/// The address clients use for `broker`, from its registration.
fn broker_addr(meta: &MetadataImage, broker: BrokerId) -> Option<SocketAddr> {
    let e = meta.broker(broker)?.endpoints.first()?;
    (e.host.as_str(), e.port).to_socket_addrs().ok()?.next()
}

/// Fetches from `leader` while this shard follows it for any partition.
async fn run_fetcher(manager: &Rc<ReplicaManager>, leader: BrokerId) {
    let placement = {
        let s = manager.partitions.settings();
        (s.shard, s.shards)
    };
    let mut client: Option<ReplicaClient> = None;
    // KIP-227 with this leader; a new connection starts a new one.
    let mut session = ReplicaSession::new();
    let mut idle_rounds = 0u32;
    while !manager.shutdown.is_triggered() {
        let partitions: Vec<Rc<Partition>> = manager
            .partitions
            .all()
            .into_iter()
            .filter(|p| p.follower_view().is_some_and(|f| f.leader == Some(leader)))
            .collect();
        if partitions.is_empty() {
            idle_rounds += 1;
            // Nothing to fetch for a while: the task ends; a new leadership starts another.
            if idle_rounds > 20 {
                return;
            }
            runtime::sleep(FETCH_BACKOFF).await;
            continue;
        }
        idle_rounds = 0;
        // The address is looked up for a new connection only: a leader that restarted on
        // another address closed the old one.
        if client.is_none() {
            let Some(addr) = broker_addr(&manager.image(), leader) else {
                runtime::sleep(FETCH_BACKOFF).await;
                continue;
            };
            let id = format!("ringbroker-replica-{}", manager.me.0);
            match ReplicaClient::connect(addr, &id, placement, Duration::from_secs(2)).await {
                Ok(c) => {
                    client = Some(c);
                    session = ReplicaSession::new();
                }
                Err(e) => {
                    tracing::debug!(leader = leader.0, error = %e, "cannot reach the leader");
                    runtime::sleep(FETCH_BACKOFF).await;
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else { continue };
        let (request, asked) = fetch_request(manager, leader, &partitions, &mut session);
        let wait = Duration::from_millis(manager.settings.replica_fetch_wait_max_ms);
        let answer: Result<FetchResponse, _> = c
            .call(
                ApiKey::Fetch,
                REPLICA_FETCH_VERSION,
                &request,
                wait + Duration::from_secs(5),
            )
            .await;
        let ok = match answer {
            Ok(response) => {
                session.on_response(response.session_id, response.error_code);
                let applied = apply_response(&partitions, &asked, response).await;
                if !applied.out_of_range.is_empty() {
                    out_of_range::reset_out_of_range(c, manager.me, &applied.out_of_range).await;
                }
                applied.answered
            }
            Err(e) => {
                tracing::debug!(leader = leader.0, error = %e, "replica fetch failed");
                session.on_failure();
                client = None;
                false
            }
        };
        if !ok {
            futures_lite::future::or(runtime::sleep(FETCH_BACKOFF), manager.shutdown.wait()).await;
        }
    }
}

/// A follower's fetch session with one leader: partitions by topic name and index, with
/// what the follower last told the leader of each.
type ReplicaSession = FollowerSession<(String, i32), FetchPartition>;

/// The fetch of `partitions` (all followers of `leader`), and what was asked of each. In a
/// fetch session only the partitions whose position changed are named; the leader reads the
/// others from where the session holds them, which is where they still are.
fn fetch_request(
    manager: &ReplicaManager,
    leader: BrokerId,
    partitions: &[Rc<Partition>],
    session: &mut ReplicaSession,
) -> (FetchRequest, Vec<FetchPosition>) {
    let mut fetches = Vec::with_capacity(partitions.len());
    let mut asked = Vec::with_capacity(partitions.len());
    for p in partitions {
        let view = p.follower_view();
        let position = FetchPosition {
            leader,
            leader_epoch: view.map_or(LeaderEpoch(-1), |v| v.leader_epoch),
            fetch_offset: p.log.offsets().log_end_offset,
        };
        asked.push(position);
        let mut f = FetchPartition::default();
        f.partition = p.index;
        f.fetch_offset = position.fetch_offset;
        f.current_leader_epoch = position.leader_epoch.0;
        f.last_fetched_epoch = p.latest_epoch().map_or(-1, |e| e.0);
        // The leader's DeleteRecords waits for every follower's log start (low watermark).
        f.log_start_offset = p.log.offsets().log_start_offset;
        f.partition_max_bytes = manager
            .settings
            .replica_fetch_max_bytes
            .min(i32::MAX as u64) as i32;
        fetches.push(((p.topic.clone(), p.index), f));
    }
    let planned = session.next(&fetches);
    let mut by_topic: HashMap<&str, Vec<FetchPartition>> = HashMap::default();
    for i in planned.send {
        let ((topic, _), f) = &fetches[i];
        by_topic.entry(topic.as_str()).or_default().push(f.clone());
    }
    let mut forgotten: HashMap<String, Vec<i32>> = HashMap::default();
    for (topic, index) in planned.forgotten {
        forgotten.entry(topic).or_default().push(index);
    }
    let mut request = FetchRequest::default();
    request.replica_id = WireBrokerId(manager.me.0);
    request.max_wait_ms = manager.settings.replica_fetch_wait_max_ms as i32;
    request.min_bytes = 1;
    request.max_bytes = manager
        .settings
        .replica_fetch_response_max_bytes
        .min(i32::MAX as u64) as i32;
    request.isolation_level = 0;
    request.session_id = planned.session_id;
    request.session_epoch = planned.epoch;
    for (topic, partitions) in forgotten {
        let mut t = ForgottenTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic));
        t.partitions = partitions;
        request.forgotten_topics_data.push(t);
    }
    for (topic, partitions) in by_topic {
        let mut t = FetchTopic::default();
        t.topic = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = partitions;
        request.topics.push(t);
    }
    (request, asked)
}

/// What one response did.
struct FetchApplied {
    /// Some partition was answered (false: every one was refused; the fetcher backs off).
    answered: bool,
    /// Partitions whose fetch offset the leader's log does not hold (OFFSET_OUT_OF_RANGE).
    out_of_range: Vec<(Rc<Partition>, FetchPosition)>,
}

/// Applies one response.
async fn apply_response(
    partitions: &[Rc<Partition>],
    asked: &[FetchPosition],
    response: FetchResponse,
) -> FetchApplied {
    let mut applied = FetchApplied {
        answered: false,
        out_of_range: Vec::new(),
    };
    if response.error_code != 0 {
        tracing::debug!(code = response.error_code, "replica fetch refused");
        return applied;
    }
    // An empty answer (the long poll ran out, or nothing new in a fetch session) is fine;
    // only refusals of every partition make the fetcher pause.
    applied.answered = response.responses.iter().all(|t| t.partitions.is_empty());
    let now = runtime::now_ms();
    // By name: a follower may fetch thousands of partitions from one leader.
    let by_name: HashMap<(&str, i32), (&Rc<Partition>, &FetchPosition)> = partitions
        .iter()
        .zip(asked)
        .map(|(p, a)| ((p.topic.as_str(), p.index), (p, a)))
        .collect();
    for t in response.responses {
        for d in t.partitions {
            let Some(&(p, asked)) = by_name.get(&(t.topic.0.as_str(), d.partition_index)) else {
                continue;
            };
            if d.error_code == ResponseError::OffsetOutOfRange.code() {
                applied.out_of_range.push((Rc::clone(p), *asked));
                continue;
            }
            if d.error_code != 0 {
                tracing::debug!(topic = %p.topic, partition = p.index, code = d.error_code, "replica fetch of a partition refused");
                continue;
            }
            applied.answered = true;
            if d.diverging_epoch.epoch >= 0 {
                match p
                    .truncate_to_diverging_epoch(
                        *asked,
                        d.diverging_epoch.epoch,
                        d.diverging_epoch.end_offset,
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "truncation failed")
                    }
                }
                continue;
            }
            let records = d.records.unwrap_or_default();
            match p
                .append_replicated(
                    *asked,
                    &records,
                    LeaderMarks {
                        high_watermark: d.high_watermark,
                        log_start: d.log_start_offset,
                    },
                    now,
                )
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::debug!(topic = %p.topic, partition = p.index, "a replica fetch answered after the partition moved on; dropped")
                }
                Err(e) => {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "appending replicated batches failed")
                }
            }
        }
    }
    applied
}

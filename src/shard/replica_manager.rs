//! Cluster mode, on every shard: the partitions' roles follow the published metadata, the
//! shard's followers fetch from their leaders, and leaders' ISR changes go to the controller
//! (Kafka's ReplicaManager, AlterPartitionManager and fetcher threads, one set per shard).
//!
//! - **Roles**: before each publication (so that clients learn of a new leader only once it
//!   leads), every partition this shard hosts leads or follows as the controller says
//!   ([`Partition::lead`], [`Partition::follow`]); a slower poll of the published metadata
//!   catches anything a shard missed.
//! - **Fetchers**: one task per leader broker, sending one long-poll Fetch (v12: replica id,
//!   `LastFetchedEpoch`, `DivergingEpoch`) for all of this shard's partitions that broker
//!   leads; a diverging answer truncates, records are appended as the leader has them.
//! - **ISR changes**: proposals (expansion when a follower caught up, shrink when one fell
//!   behind `replica.lag.time.max.ms`) are sent as AlterPartition, one in flight per
//!   partition (the leader state keeps to that), and applied when committed.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchRequest, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId as WireBrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::replica_reset;
use super::Shard;
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::published::ClusterSummary;
use crate::controller::quorum::controller_link::{ControllerLink, ForwardError};
use crate::group::api::OFFSETS_TOPIC;
use crate::model::{BrokerId, LeaderEpoch};
use crate::partition::replica_role::{FetchPosition, LeaderMarks};
use crate::partition::Partition;
use crate::protocol::ResponseError;
use crate::replication::fetch_session_client::FollowerSession;
use crate::replication::leader_state::{IsrProposal, LeaderConfig};
use crate::replication::replica_client::ReplicaClient;
use crate::runtime;
use crate::util::exclusive::Exclusive;
use crate::util::shutdown::ShutdownSignal;

/// The Fetch version followers send: the first with `LastFetchedEpoch` and
/// `DivergingEpoch`, still naming topics (v13 names them by id).
const REPLICA_FETCH_VERSION: i16 = 12;
/// How often the published metadata is looked at for role changes (roles are applied
/// before each publication; this catches a shard that missed one).
const ROLE_POLL: Duration = Duration::from_millis(250);
/// A fetcher's pause after a failed round (connection refused, an error answer).
const FETCH_BACKOFF: Duration = Duration::from_millis(100);
/// How long an AlterPartition may take (the controller may be electing).
const ALTER_PARTITION_TIMEOUT: Duration = Duration::from_secs(10);

/// The replication settings (Kafka's names).
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSettings {
    pub replica_lag_time_max_ms: u64,
    pub replica_fetch_wait_max_ms: u64,
    pub replica_fetch_max_bytes: u64,
    /// `replica.fetch.response.max.bytes`
    pub replica_fetch_response_max_bytes: u64,
}

pub struct ReplicaManager {
    me: BrokerId,
    /// This process's registration: until the metadata holds it, nothing is led here.
    incarnation: uuid::Uuid,
    settings: ReplicaSettings,
    /// This shard's own line to the controller (AlterPartition).
    link: ControllerLink,
    /// Leaders with a fetcher task running.
    fetching_from: RefCell<HashSet<BrokerId>>,
    /// The summary the roles were last applied from.
    applied: RefCell<Option<Arc<ClusterSummary>>>,
    /// Role changes one at a time (the publisher's and the poll's).
    applying: Exclusive,
    last_shrink_check_ms: Cell<i64>,
    shutdown: Rc<ShutdownSignal>,
}

impl ReplicaManager {
    pub fn new(
        me: BrokerId,
        incarnation: uuid::Uuid,
        settings: ReplicaSettings,
        voters: Vec<(BrokerId, String)>,
    ) -> ReplicaManager {
        ReplicaManager {
            me,
            incarnation,
            settings,
            link: ControllerLink::new(voters),
            fetching_from: RefCell::new(HashSet::new()),
            applied: RefCell::new(None),
            applying: Exclusive::new(),
            last_shrink_check_ms: Cell::new(0),
            shutdown: Rc::new(ShutdownSignal::new()),
        }
    }

    pub fn stop(&self) {
        self.shutdown.trigger();
    }

    fn leader_config(&self, p: &Partition) -> LeaderConfig {
        LeaderConfig {
            min_insync_replicas: p.log.config().min_insync_replicas.max(1) as usize,
            replica_lag_time_max_ms: self.settings.replica_lag_time_max_ms as i64,
        }
    }
}

/// Starts the shard's replica manager: the role loop, which starts fetchers as needed; and
/// takes the leaders' ISR proposals of the shard's partitions from now on.
pub fn start(shard: &Rc<Shard>, manager: Rc<ReplicaManager>) {
    // Weak: the partition manager lives as long as the shard that would own this closure.
    let (weak, sink_manager) = (Rc::downgrade(shard), Rc::clone(&manager));
    shard
        .partitions
        .set_isr_sink(Rc::new(move |p, proposal| match weak.upgrade() {
            Some(shard) => submit_isr_change(&shard, &sink_manager, p, proposal),
            None => p.isr_rejected(proposal.leader_epoch),
        }));
    let shard = Rc::clone(shard);
    runtime::spawn_detached(async move {
        while !manager.shutdown.is_triggered() {
            if let Some(summary) = shard.published_summary() {
                apply_roles(&shard, &manager, summary).await;
            }
            check_shrinks(&shard, &manager);
            futures_lite::future::or(runtime::sleep(ROLE_POLL), manager.shutdown.wait()).await;
        }
    });
}

/// Leads or follows each hosted partition as `summary` says, unless roles were applied from
/// it or from newer metadata already.
pub(super) async fn apply_roles(
    shard: &Rc<Shard>,
    manager: &Rc<ReplicaManager>,
    summary: Arc<ClusterSummary>,
) {
    let _one_at_a_time = manager.applying.enter().await;
    let done =
        manager.applied.borrow().as_ref().is_some_and(|a| {
            Arc::ptr_eq(a, &summary) || a.metadata_offset > summary.metadata_offset
        });
    if done {
        return;
    }
    let now = runtime::now_ms();
    let mut offsets_led = false;
    // A restarted broker replays metadata of its previous life, which may name it leader
    // at an epoch it led before the crash (with a log that may have lost its unflushed
    // tail). It leads only once its new registration is applied: the controller fenced
    // the old one in the same batch, which moved or bumped those leaderships.
    let registered = summary
        .metadata
        .broker(manager.me)
        .is_some_and(|b| b.incarnation == manager.incarnation);
    // Demotions at once; promotions after them and side by side: each makes an epoch
    // entry durable, and one after another they held the publication back by as many
    // fsyncs as partitions (seconds on a loaded disk).
    let mut leading = Vec::new();
    for p in shard.partitions.all() {
        let Some(state) = summary.metadata.partition_by_name(&p.topic, p.index) else {
            continue;
        };
        let offsets = p.topic == OFFSETS_TOPIC;
        if state.leader == Some(manager.me) && registered {
            leading.push((p, state.clone()));
            offsets_led |= offsets;
        } else {
            // Not registered yet, a partition named ours is followed with no leader.
            let leader = state.leader.filter(|l| *l != manager.me);
            p.follow(leader, state.leader_epoch);
            if offsets {
                shard.groups.unload_partition(&shard.group_host(), p.index);
            }
            if let Some(leader) = leader {
                ensure_fetcher(shard, manager, leader);
            }
        }
    }
    let tasks: Vec<_> = leading
        .into_iter()
        .map(|(p, state)| {
            let (me, config, summary) = (manager.me, manager.leader_config(&p), Arc::clone(&summary));
            runtime::spawn(async move {
                if let Err(e) = p.lead(me, &state, config, now).await {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "cannot become leader");
                }
                p.note_replica_liveness(|b| b == me || summary.metadata.is_unfenced(b));
            })
        })
        .collect();
    for t in tasks {
        t.await;
    }
    *manager.applied.borrow_mut() = Some(summary);
    if offsets_led {
        // The coordinator moves with the leadership: groups of newly led partitions are
        // loading (COORDINATOR_LOAD_IN_PROGRESS) before the metadata names this broker,
        // and load in the background.
        let loads = shard.groups.begin_loads(&**shard);
        if !loads.is_empty() {
            let (groups, host) = (Rc::clone(&shard.groups), shard.group_host());
            runtime::spawn_detached(async move { groups.finish_loads(&*host, loads).await });
        }
    }
}

/// Every half `replica.lag.time.max.ms` (Kafka's ISR expiration task), leaders look for
/// members that fell behind.
fn check_shrinks(shard: &Rc<Shard>, manager: &Rc<ReplicaManager>) {
    let now = runtime::now_ms();
    let every = (manager.settings.replica_lag_time_max_ms / 2).max(1) as i64;
    if now - manager.last_shrink_check_ms.get() < every {
        return;
    }
    manager.last_shrink_check_ms.set(now);
    for p in shard.partitions.all() {
        p.advance_hw_on_timer(now);
        if let Some(proposal) = p.check_isr_shrink(now) {
            submit_isr_change(shard, manager, &p, proposal);
        }
    }
}

/// How long the publisher waits for a shard to apply new roles before publishing anyway
/// (a shard stuck on a disk must not hold back the metadata of all the others).
const APPLY_ROLES_TIMEOUT: Duration = Duration::from_secs(5);

impl Shard {
    /// Every shard leads or follows as `summary` says; returns once all did (or after
    /// [`APPLY_ROLES_TIMEOUT`]). The publisher calls this before publishing `summary`, so
    /// a client told that this broker leads a partition finds it leading (Kafka's brokers
    /// too apply a metadata delta before it reaches their metadata cache).
    pub async fn apply_roles_everywhere(self: &Rc<Self>, summary: &Arc<ClusterSummary>) {
        let mut tasks = Vec::with_capacity(self.count);
        for to in 0..self.count {
            let shard = Rc::clone(self);
            let summary = Arc::clone(summary);
            tasks.push(runtime::spawn(async move {
                let apply = async {
                    if to == shard.id {
                        if let Some(manager) = shard.replicas.get() {
                            apply_roles(&shard, manager, summary).await;
                        }
                        true
                    } else {
                        shard
                            .request(
                                to,
                                super::messages::ShardRequest::Metadata(
                                    super::messages::MetadataRequest::ApplyRoles(summary),
                                ),
                            )
                            .await
                            .is_some()
                    }
                };
                let late = async {
                    runtime::sleep(APPLY_ROLES_TIMEOUT).await;
                    false
                };
                (to, futures_lite::future::or(apply, late).await)
            }));
        }
        for t in tasks {
            let (to, applied) = t.await;
            if !applied {
                tracing::warn!(
                    shard = to,
                    "a shard did not apply new partition roles in time; publishing anyway"
                );
            }
        }
    }
}

/// Sends an ISR change to the controller and applies its answer (in the background).
fn submit_isr_change(
    shard: &Rc<Shard>,
    manager: &Rc<ReplicaManager>,
    p: &Rc<Partition>,
    proposal: IsrProposal,
) {
    let Some(summary) = shard.published_summary() else {
        p.isr_rejected(proposal.leader_epoch);
        return;
    };
    let meta = &summary.metadata;
    let (Some(topic), Some(me)) = (meta.topic_by_name(&p.topic), meta.broker(manager.me)) else {
        p.isr_rejected(proposal.leader_epoch);
        return;
    };
    let request = AlterPartitionRequest {
        broker_id: manager.me,
        broker_epoch: me.epoch,
        topic_id: topic.id,
        partition: p.index as u32,
        leader_epoch: proposal.leader_epoch,
        partition_epoch: proposal.partition_epoch,
        new_isr: proposal.new_isr.clone(),
    };
    let (manager, p) = (Rc::clone(manager), Rc::clone(p));
    runtime::spawn_detached(async move {
        tracing::info!(topic = %p.topic, partition = p.index, isr = ?request.new_isr, "asking the controller for an ISR change");
        match manager
            .link
            .alter_partition(request, ALTER_PARTITION_TIMEOUT)
            .await
        {
            Ok(c) if c.leader == Some(manager.me) && c.leader_epoch == proposal.leader_epoch => {
                p.isr_committed(proposal.leader_epoch, c.isr, c.partition_epoch);
            }
            // Our view is stale: the change stays pending (nothing more is proposed) until
            // the metadata brings the newer partition state (Kafka's rule).
            Err(ForwardError::Refused(r))
                if r.code == ResponseError::FencedLeaderEpoch.code()
                    || r.code == ResponseError::InvalidUpdateVersion.code() =>
            {
                tracing::info!(topic = %p.topic, partition = p.index, refused = %r.message, "ISR change refused on a stale view; waiting for the metadata");
            }
            outcome => {
                tracing::info!(topic = %p.topic, partition = p.index, ?outcome, "ISR change not applied");
                // Not at once: the next fetch would propose the same change again.
                runtime::sleep(FETCH_BACKOFF).await;
                p.isr_rejected(proposal.leader_epoch);
            }
        }
    });
}

fn ensure_fetcher(shard: &Rc<Shard>, manager: &Rc<ReplicaManager>, leader: BrokerId) {
    if !manager.fetching_from.borrow_mut().insert(leader) {
        return;
    }
    let (shard, manager) = (Rc::clone(shard), Rc::clone(manager));
    runtime::spawn_detached(async move {
        run_fetcher(&shard, &manager, leader).await;
        manager.fetching_from.borrow_mut().remove(&leader);
    });
}

/// The address clients use for `broker`, from its registration.
fn broker_addr(meta: &ClusterMetadata, broker: BrokerId) -> Option<SocketAddr> {
    let e = meta.broker(broker)?.endpoints.first()?;
    (e.host.as_str(), e.port).to_socket_addrs().ok()?.next()
}

/// Fetches from `leader` while this shard follows it for any partition.
async fn run_fetcher(shard: &Rc<Shard>, manager: &Rc<ReplicaManager>, leader: BrokerId) {
    let mut client: Option<ReplicaClient> = None;
    // KIP-227 with this leader; a new connection starts a new one.
    let mut session = ReplicaSession::new();
    let mut idle_rounds = 0u32;
    while !manager.shutdown.is_triggered() {
        let partitions: Vec<Rc<Partition>> = shard
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
            let Some(addr) = shard
                .published_summary()
                .and_then(|s| broker_addr(&s.metadata, leader))
            else {
                runtime::sleep(FETCH_BACKOFF).await;
                continue;
            };
            let id = format!("ringbroker-replica-{}", manager.me.0);
            match ReplicaClient::connect(addr, &id, (shard.id, shard.count), Duration::from_secs(2))
                .await
            {
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
                    replica_reset::reset_out_of_range(c, manager.me, &applied.out_of_range).await;
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
    let mut by_topic: HashMap<&str, Vec<FetchPartition>> = HashMap::new();
    for i in planned.send {
        let ((topic, _), f) = &fetches[i];
        by_topic.entry(topic.as_str()).or_default().push(f.clone());
    }
    let mut forgotten: HashMap<String, Vec<i32>> = HashMap::new();
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

//! A shard: the partitions one core owns, its copy of the metadata, and the routing of work to
//! other shards over the channel mesh.
//!
//! Everything in a `Shard` is owned by its executor thread (hence `Rc`/`RefCell`). A request
//! touching partitions of other shards is split by owner, sent as one message per shard, and
//! the replies are merged: one round trip per shard involved. Shard 0 is the only writer of
//! the metadata; it persists each change and then hands the new version to every shard.

pub mod cluster_admin;
mod errors;
pub mod fetch_session;
pub mod group_routing;
pub mod housekeeping;
mod local_admin;
pub mod messages;
pub mod metrics_report;
pub mod offline;
pub mod producer_ids;
pub mod replica_roles;
mod stored_metadata;
pub mod wait_for_data;

use crate::util::hash::HashMap;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::protocol::ResponseError;

use crate::config::BrokerConfig;
use crate::metrics;
use crate::runtime::{self, Inbox, ShardContext};
use crate::util::exclusive::Exclusive;
use crate::util::local_oneshot;
use crate::util::memory_budget::MemoryBudget;

use crate::metadata::{LiveBroker, MetadataCache, MetadataImage};
use crate::partition::error::PartitionError;
use crate::partition::manager::{Housekeeping, ManagerSettings, PartitionManager};
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::ops::{unavailable_result, unknown_partition_result};
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::partition::recovery_summary::RecoverySummary;
use messages::{
    AdminError, AdminOp, MeshMessage, MetadataRequest, PartitionRequest, ShardReply, ShardRequest,
};

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(transparent)]
    Metadata(#[from] crate::metadata::store::MetadataStoreError),
    #[error(transparent)]
    Local(#[from] crate::controller::local::LocalStartError),
}

pub struct Shard {
    pub id: usize,
    count: usize,
    pub config: BrokerConfig,
    /// The image this shard's logs were last placed by: the published one, or in cluster mode
    /// at start what this broker applied before it stopped (see [`Shard::placement`]).
    placement: RefCell<Arc<MetadataImage>>,
    /// Shard 0: the stored side of the metadata (a single node's own controller, or in
    /// cluster mode the copy of the applied metadata log), see `stored_metadata.rs`.
    stored: RefCell<stored_metadata::StoredSide>,
    /// The partitions this shard owns: open logs, offline ones, and the operations on them.
    pub partitions: Rc<PartitionManager>,
    ctx: ShardContext<MeshMessage>,
    /// Requests sent to other shards and not yet answered: id → (peer, waiter).
    pending: RefCell<HashMap<u64, (usize, local_oneshot::Sender<ShardReply>)>>,
    next_request_id: Cell<u64>,
    /// Shard 0 applies admin changes one at a time (a cancelled change leaves the section).
    admin: Exclusive,
    /// The coordinator of the groups whose `__consumer_offsets` partitions this shard owns.
    pub groups: Rc<crate::group::service::GroupService>,
    /// Producer ids for InitProducerId (shard 0 also keeps the durable counter).
    producer_ids: crate::idempotence::producer_ids::ProducerIdAllocator,
    /// Bytes of Produce requests held on this shard (`ringbroker.produce.memory.max.bytes`):
    /// requests its connections read, and produce data other shards forwarded to it.
    pub produce_memory: MemoryBudget,
    /// Fetch sessions (KIP-227) of the connections this shard serves.
    fetch_sessions: RefCell<fetch_session::FetchSessions>,
    /// The metadata image the shard's services read (both modes), published by shard 0: on
    /// a single node at every change it applied, in cluster mode from the metadata log.
    pub metadata_cache: Rc<MetadataCache>,
    /// Cluster mode, shard 0: where admin changes go (see [`cluster_admin`]).
    cluster_admin: std::cell::OnceCell<cluster_admin::ClusterAdmin>,
    /// Cluster mode: this shard's replication (roles, fetchers, ISR changes).
    pub replicas: std::cell::OnceCell<Rc<crate::partition::replica_manager::ReplicaManager>>,
    /// Triggered when the broker stops: long polls answer with what they have.
    stopping: crate::util::shutdown::ShutdownSignal,
}

impl Shard {
    /// Loads the metadata and opens the logs this shard owns. Returns the shard, its mesh
    /// inboxes (to be drained by [`Shard::serve_mesh`]) and what opening the logs found.
    pub async fn start(
        mut ctx: ShardContext<MeshMessage>,
        config: BrokerConfig,
    ) -> Result<(Rc<Shard>, Vec<Inbox<MeshMessage>>, RecoverySummary), ShardError> {
        let started = std::time::Instant::now();
        crate::health::slow_fsync::configure(config.slow_fsync_warn_ms);
        let id = ctx.id();
        let count = ctx.count();
        let inboxes = ctx.take_inboxes();
        let loaded = stored_metadata::load(id, &config).await?;
        let config_group = config.group.clone();
        let fsync_on_acks_all = config.fsync_on_acks_all;
        let produce_memory = MemoryBudget::new(config.produce_memory_limit());
        let fetch_session_slots = config.fetch_session_cache_slots;
        let partitions = Rc::new(PartitionManager::new(ManagerSettings {
            shard: id,
            shards: count,
            broker: crate::model::BrokerId(config.node_id),
            data_dir: config.data_dir.clone(),
            cluster_mode: config.is_cluster_mode(),
        }));
        // Cluster mode answers from an empty image until the metadata log is applied; its
        // logs are placed by what this broker applied before it stopped.
        let placement = Arc::new(loaded.placement);
        let image = if config.is_cluster_mode() {
            Arc::new(MetadataImage::empty(String::new()))
        } else {
            Arc::clone(&placement)
        };
        let shard = Rc::new(Shard {
            id,
            count,
            metadata_cache: Rc::new(MetadataCache::new_shared(image)),
            config,
            placement: RefCell::new(placement),
            stored: RefCell::new(loaded.stored),
            partitions,
            ctx,
            pending: RefCell::new(HashMap::default()),
            next_request_id: Cell::new(0),
            admin: Exclusive::new(),
            groups: Rc::new(crate::group::service::GroupService::new(
                config_group,
                fsync_on_acks_all,
            )),
            producer_ids: crate::idempotence::producer_ids::ProducerIdAllocator::new(),
            produce_memory,
            fetch_sessions: RefCell::new(fetch_session::FetchSessions::new(
                fetch_session_slots,
                first_session_id(id),
            )),
            cluster_admin: std::cell::OnceCell::new(),
            replicas: std::cell::OnceCell::new(),
            stopping: crate::util::shutdown::ShutdownSignal::new(),
        });
        let meta = shard.placement();
        if id == 0 {
            // Before any shard opens a log: what a crash left of deleted partitions.
            crate::partition::dirs::sweep(&shard.config.data_dir, &meta).await;
        }
        // The offline ones are told to the other shards once the mesh is served
        // (`publish_offline_partitions`).
        let (mut recovery, _offline) = shard.open_owned_logs(&meta).await;
        shard.groups.load_partitions(&*shard).await;
        recovery.took = started.elapsed();
        Ok((shard, inboxes, recovery))
    }

    /// The metadata image as last published to this shard: what requests are answered from.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.metadata_cache.get()
    }

    /// The image this shard's logs were last placed by: the one published last, except in
    /// cluster mode before the metadata log is caught up, when it is what this broker applied
    /// before it stopped. Not for answering clients: they are answered from [`Shard::image`].
    pub fn placement(&self) -> Arc<MetadataImage> {
        Arc::clone(&self.placement.borrow())
    }

    /// The broker config as it is now: `config` (file and flags) with the dynamic broker
    /// configs of the current metadata applied. What may change at runtime (the topic
    /// defaults, producer expiry) is read from this, not from `config`.
    pub fn effective_config(&self) -> BrokerConfig {
        self.config
            .with_dynamic(&self.image().broker_config_layers(self.config.node_id))
    }

    /// The fetch sessions of this shard's connections, borrowed: not across an await, every
    /// Fetch on the shard needs them.
    pub fn fetch_sessions(&self) -> std::cell::RefMut<'_, fetch_session::FetchSessions> {
        self.fetch_sessions.borrow_mut()
    }

    /// Whether the broker is stopping ([`Shard::begin_stop`]).
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_triggered()
    }

    /// Opens, reconfigures and closes this shard's logs to match `meta` (see
    /// `PartitionManager::open_owned`), with the topic defaults `meta`'s dynamic broker
    /// configs give.
    async fn open_owned_logs(&self, meta: &MetadataImage) -> (RecoverySummary, Vec<OfflineNotice>) {
        let defaults = self
            .config
            .with_dynamic(&meta.broker_config_layers(self.config.node_id))
            .log_defaults;
        self.partitions.open_owned(meta, &defaults).await
    }

    /// Drains the mesh inboxes: requests run as their own tasks, replies complete waiters.
    pub fn serve_mesh(self: &Rc<Self>, inboxes: Vec<Inbox<MeshMessage>>) {
        for inbox in inboxes {
            let shard = Rc::clone(self);
            runtime::spawn_detached(async move {
                let peer = inbox.from();
                while let Some(msg) = inbox.recv().await {
                    match msg {
                        MeshMessage::Reply { id, reply } => {
                            if let Some((_, tx)) = shard.pending.borrow_mut().remove(&id) {
                                tx.send(reply);
                            }
                        }
                        MeshMessage::Request { id, from, request } => {
                            let shard = Rc::clone(&shard);
                            // Forwarded produce data is held here until answered: counted,
                            // never waited for (the sender admitted it; waiting could
                            // deadlock two shards forwarding to each other).
                            let forwarded = produce_bytes(&request);
                            let permit =
                                (forwarded > 0).then(|| shard.produce_memory.charge(forwarded));
                            runtime::spawn_detached(async move {
                                let reply = shard.execute_request(request).await;
                                drop(permit);
                                if shard
                                    .ctx
                                    .send_to(from, MeshMessage::Reply { id, reply })
                                    .await
                                    .is_err()
                                {
                                    tracing::warn!(
                                        to = from,
                                        "could not deliver a reply to a shard"
                                    );
                                }
                            });
                        }
                    }
                }
                // The peer stopped (shutdown): its answers will never come. Dropping the
                // waiters makes those requests fail instead of hanging a connection's drain.
                shard.pending.borrow_mut().retain(|_, (to, _)| *to != peer);
            });
        }
    }

    /// Sends a request to another shard and waits for its reply.
    async fn request(&self, to: usize, request: ShardRequest) -> Option<ShardReply> {
        let id = self.next_request_id.get();
        self.next_request_id.set(id + 1);
        let (tx, rx) = local_oneshot::channel();
        self.pending.borrow_mut().insert(id, (to, tx));
        let msg = MeshMessage::Request {
            id,
            from: self.id,
            request,
        };
        if self.ctx.send_to(to, msg).await.is_err() {
            self.pending.borrow_mut().remove(&id);
            return None;
        }
        rx.await
    }

    async fn execute_request(self: &Rc<Self>, request: ShardRequest) -> ShardReply {
        match request {
            ShardRequest::Partitions(request) => self.execute_partition_request(request).await,
            ShardRequest::Metadata(request) => self.execute_metadata_request(request).await,
            ShardRequest::Group(call) => {
                ShardReply::Group(self.groups.run_call(&self.group_host(), call).await)
            }
            ShardRequest::AllocateProducerIdBlock => {
                ShardReply::ProducerIdBlock(self.allocate_producer_id_block().await)
            }
            ShardRequest::Metrics => ShardReply::Metrics(Box::new(self.local_metrics())),
        }
    }

    async fn execute_partition_request(self: &Rc<Self>, request: PartitionRequest) -> ShardReply {
        match request {
            PartitionRequest::Ops {
                ops,
                fetch_budget: Some(max_bytes),
            } => {
                let results = self.partitions.execute_fetches(ops, max_bytes).await;
                ShardReply::Partitions(results)
            }
            PartitionRequest::Ops {
                ops,
                fetch_budget: None,
            } => {
                let mut tasks = Vec::with_capacity(ops.len());
                for op in ops {
                    let shard = Rc::clone(self);
                    tasks.push(runtime::spawn(async move { shard.execute_local(op).await }));
                }
                let mut results = Vec::with_capacity(tasks.len());
                for t in tasks {
                    results.push(t.await);
                }
                ShardReply::Partitions(results)
            }
            PartitionRequest::WaitForData {
                partitions,
                timeout_ms,
                log_end,
            } => ShardReply::DataAvailable(
                self.partitions
                    .wait_for_data(&partitions, timeout_ms, log_end, &self.stopping)
                    .await,
            ),
            PartitionRequest::Offline(notices) => {
                self.partitions.adopt_offline_notices(notices);
                ShardReply::Applied
            }
        }
    }

    async fn execute_metadata_request(self: &Rc<Self>, request: MetadataRequest) -> ShardReply {
        match request {
            MetadataRequest::Apply(image) => {
                self.adopt_image(image).await;
                ShardReply::Applied
            }
            MetadataRequest::Admin(op) => ShardReply::Admin(self.execute_admin(op).await),
            MetadataRequest::Publish(image) => {
                self.metadata_cache.publish(image);
                ShardReply::Applied
            }
        }
    }

    /// Runs partition operations wherever their partitions live; results come back in the
    /// order of `ops`. Local ones run here, the rest go out as one message per shard.
    pub async fn run_partition_ops(self: &Rc<Self>, ops: Vec<PartitionOp>) -> Vec<PartitionResult> {
        self.run_partition_ops_within(ops, None).await
    }

    /// [`Shard::run_partition_ops`] for the fetches of one Fetch request: each shard reads its
    /// partitions in request order within `max_bytes` response bytes (KIP-74). The caller
    /// applies the budget once more over all shards' results, in request order.
    pub async fn run_fetch_ops(
        self: &Rc<Self>,
        ops: Vec<PartitionOp>,
        max_bytes: usize,
    ) -> Vec<PartitionResult> {
        self.run_partition_ops_within(ops, Some(max_bytes)).await
    }

    async fn run_partition_ops_within(
        self: &Rc<Self>,
        ops: Vec<PartitionOp>,
        fetch_budget: Option<usize>,
    ) -> Vec<PartitionResult> {
        let image = self.image();
        let mut by_shard: HashMap<usize, Vec<(usize, PartitionOp)>> = HashMap::default();
        let mut results: Vec<Option<PartitionResult>> = vec![None; ops.len()];
        for (i, op) in ops.into_iter().enumerate() {
            let (topic, partition) = op.topic_partition();
            let Some(state) = image.partition_by_name(topic, partition) else {
                results[i] = Some(unknown_partition_result(&op));
                continue;
            };
            if let Some(refused) = self.leadership_refusal(state, &op) {
                results[i] = Some(refused);
                continue;
            }
            let owner = crate::metadata::shard_for_slot(state.slot, self.count);
            by_shard.entry(owner).or_default().push((i, op));
        }
        let mut tasks = Vec::new();
        for (owner, batch) in by_shard {
            let replica_fetches = batch.iter().filter(|(_, op)| op.is_replica_fetch()).count();
            if replica_fetches > 0 {
                metrics::registry::record_replica_fetch(owner == self.id, replica_fetches);
            }
            let shard = Rc::clone(self);
            tasks.push(runtime::spawn(async move {
                let (indexes, ops): (Vec<usize>, Vec<PartitionOp>) = batch.into_iter().unzip();
                let out = if owner == shard.id {
                    // The local shard always answers; its ops need no fallback (building
                    // one formats a message per op, on every request).
                    match shard
                        .execute_partition_request(PartitionRequest::Ops { ops, fetch_budget })
                        .await
                    {
                        ShardReply::Partitions(r) => r,
                        _ => Vec::new(),
                    }
                } else {
                    let fallback: Vec<PartitionResult> =
                        ops.iter().map(unavailable_result).collect();
                    let request =
                        ShardRequest::Partitions(PartitionRequest::Ops { ops, fetch_budget });
                    let sent = std::time::Instant::now();
                    let reply = shard.request(owner, request).await;
                    metrics::registry::record_stage(metrics::registry::Stage::Hop, sent.elapsed());
                    match reply {
                        Some(ShardReply::Partitions(r)) if r.len() == indexes.len() => r,
                        _ => fallback,
                    }
                };
                indexes.into_iter().zip(out).collect::<Vec<_>>()
            }));
        }
        for t in tasks {
            for (i, r) in t.await {
                results[i] = Some(r);
            }
        }
        let results: Vec<PartitionResult> = results
            .into_iter()
            .map(|r| {
                r.unwrap_or(PartitionResult::Fetch(Err(PartitionError::new(
                    ResponseError::UnknownServerError.code(),
                    "no result".to_string(),
                ))))
            })
            .collect();
        metrics_report::count_partition_errors(&results);
        results
    }

    /// Executes one operation on a partition of this shard.
    /// A partition whose log failed on the way is taken offline on every shard.
    async fn execute_local(self: &Rc<Self>, op: PartitionOp) -> PartitionResult {
        let (topic, index) = op.topic_partition();
        let (topic, index) = (topic.to_string(), index);
        let result = self.partitions.execute(op).await;
        if let Some(p) = self.partitions.get(&topic, index) {
            self.offline_if_failed(&p).await;
        }
        result
    }

    /// Applies a metadata change: on shard 0 directly, elsewhere by asking shard 0. Answers
    /// with the image the change was published in (for `validate_only`, the image it would
    /// give, never published).
    pub async fn admin(self: &Rc<Self>, op: AdminOp) -> Result<Arc<MetadataImage>, AdminError> {
        if self.id == 0 {
            return self.execute_admin(op).await;
        }
        match self
            .request(0, ShardRequest::Metadata(MetadataRequest::Admin(op)))
            .await
        {
            Some(ShardReply::Admin(r)) => r,
            _ => Err(AdminError {
                code: ResponseError::UnknownServerError.code(),
                message: "shard 0 did not answer".to_string(),
            }),
        }
    }

    /// Shard 0 only: decides one change, persists it, and hands the new image to every shard
    /// before answering (cluster mode: forwards it to the controller and waits for it to be
    /// applied here).
    async fn execute_admin(self: &Rc<Self>, op: AdminOp) -> Result<Arc<MetadataImage>, AdminError> {
        // Checked here, against this broker's property table, in both modes: the controller
        // only records them.
        if let AdminOp::SetBrokerConfigs {
            resource, configs, ..
        } = &op
        {
            crate::config::validate_dynamic(&self.config, configs, resource.is_empty())
                .map_err(errors::dynamic_config_error)?;
        }
        // Outside the section: the answer waits for the change to be adopted, which enters it.
        if let Some(admin) = self.cluster_admin() {
            return self.forward_admin(admin, op).await;
        }
        let _inside = self.admin.enter().await;
        self.execute_local_admin(op).await
    }

    /// Takes `image` (a newer publication only): places this shard's logs by it (opening new
    /// hosted partitions, applying configs, closing and deleting gone ones), leads or follows
    /// as it says (cluster mode), loads the groups of offsets partitions gained, and on a
    /// single node answers from it. Cluster mode publishes it to the cache afterwards, once
    /// every shard applied it (`replica_roles.rs`).
    async fn adopt_image(self: &Rc<Self>, image: Arc<MetadataImage>) {
        if image.version < self.placement.borrow().version {
            return;
        }
        *self.placement.borrow_mut() = Arc::clone(&image);
        if !self.config.is_cluster_mode() {
            self.metadata_cache.publish(Arc::clone(&image));
        }
        let (_, offline) = self.open_owned_logs(&image).await;
        // Before acknowledging: whoever asked for the change (CreateTopics) sees them.
        if !offline.is_empty() {
            self.tell_offline(offline).await;
        }
        if let Some(manager) = self.replicas.get() {
            manager.apply_roles(Arc::clone(&image)).await;
        }
        self.groups.load_partitions(&**self).await;
    }

    /// Periodic work: flush.ms (checked every time), and of the `jobs` due retention and
    /// checkpoints of every owned log.
    pub async fn housekeeping(self: &Rc<Self>, now_ms: i64, jobs: housekeeping::Jobs) {
        let housekeeping::Jobs {
            retention: retention_due,
            checkpoint: checkpoint_due,
            hw_checkpoint: hw_checkpoint_due,
            ..
        } = jobs;
        if retention_due {
            self.groups.compact_partitions(&**self).await;
        }
        let due = Housekeeping {
            retention: retention_due,
            checkpoint: checkpoint_due,
            hw_checkpoint: hw_checkpoint_due,
            producer_id_expiration_ms: self.effective_config().producer_id_expiration_ms,
        };
        for p in self.partitions.housekeeping(now_ms, due).await {
            self.offline_if_failed(&p).await;
        }
    }

    /// The broker stops: requests waiting for data or for replicas are answered now (long
    /// polls with what they have, acks=all with NOT_LEADER_OR_FOLLOWER), so that draining the
    /// connections takes no longer than writing those answers.
    pub fn begin_stop(&self) {
        self.stopping.trigger();
        self.partitions.begin_close();
    }
}

/// This broker as its clients reach it (a single node's only broker).
pub(crate) fn advertised_self(config: &BrokerConfig) -> LiveBroker {
    LiveBroker {
        id: crate::model::BrokerId(config.node_id),
        host: config.advertised_host.clone(),
        port: config.advertised_port,
        rack: None,
    }
}

/// A shard's first fetch session id: shards and restarts start apart, so that a client that
/// reconnects elsewhere with an old id is answered FETCH_SESSION_ID_NOT_FOUND, not someone
/// else's session.
fn first_session_id(shard: usize) -> i32 {
    // From util::entropy, not the clock's nanoseconds: random in `serve`, the seed's in a
    // simulation (session ids key tables and went into replays).
    let random = crate::util::entropy::random_u64() as usize;
    let spread = random.wrapping_add(shard.wrapping_mul(0x9E37_79B9)) & 0x3FFF_FFFF;
    spread.max(1) as i32
}

/// Bytes of record data in a request's produce operations.
fn produce_bytes(request: &ShardRequest) -> usize {
    match request {
        ShardRequest::Partitions(PartitionRequest::Ops { ops, .. }) => ops
            .iter()
            .map(|op| match op {
                PartitionOp::Produce { records, .. } => records.len(),
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

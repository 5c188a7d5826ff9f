//! What a handler gets: the request (frame, API, peer, decoding) and the services of the shard
//! it runs on, each behind a narrow accessor, as Redpanda's `request_context` hands out
//! `partition_manager()`, `groups()` and `metadata_cache()`. Handlers never hold the shard:
//! what they can reach is listed here, and the shard stays the one place that routes work
//! between shards. The handles only narrow (each holds the shard, nothing else), so taking
//! one per call costs nothing.

use std::cell::{RefCell, RefMut};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use uuid::Uuid;

use super::{encode, HandlerError};
use crate::config::BrokerConfig;
use crate::group::api::{Call, GroupDescription, ListGroupsReply, Reply};
use crate::idempotence::producer_ids::ProducerIdError;
use crate::metadata::cluster_state::TopicState;
use crate::metadata::MetadataImage;
use crate::metrics::registry::{self as metrics, Stage};
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::ops::{PartitionOp, PartitionResult};
use crate::protocol::header::RequestFrame;
use crate::protocol::messages::ApiKey;
use crate::protocol::{Decodable, Encodable};
use crate::shard::cluster_admin::{CoordinatorBroker, LeaderHint};
use crate::shard::fetch_session::FetchSessions;
use crate::shard::group_routing::GroupCallError;
use crate::shard::messages::{AdminError, AdminOp};
use crate::shard::Shard;
use crate::util::local_oneshot;

/// One request as its handler sees it.
pub struct Request<'a> {
    /// Reached only through the service accessors below.
    shard: &'a Rc<Shard>,
    pub frame: &'a RequestFrame,
    pub api: ApiKey,
    /// The client's address as `ip:port` ("unknown" when the socket could not tell).
    pub peer: &'a str,
    /// Told whether the body decoded, so the connection reads the next request only then
    /// (a request behind a malformed one must not run: the connection is about to close).
    decoded: RefCell<Option<local_oneshot::Sender<bool>>>,
    /// When the handler started (the start of the `decode` stage).
    started: Instant,
}

impl<'a> Request<'a> {
    /// A request of a known API and version, about to be handled (the decode stage starts).
    pub(super) fn new(
        shard: &'a Rc<Shard>,
        frame: &'a RequestFrame,
        api: ApiKey,
        peer: &'a str,
        decoded: local_oneshot::Sender<bool>,
    ) -> Request<'a> {
        Request {
            shard,
            frame,
            api,
            peer,
            decoded: RefCell::new(Some(decoded)),
            started: Instant::now(),
        }
    }

    pub fn version(&self) -> i16 {
        self.frame.api_version
    }

    /// Decodes the body with the kafka-protocol crate.
    pub fn decode<T: Decodable>(&self) -> Result<T, HandlerError> {
        let mut body = self.frame.body.clone();
        let decoded = T::decode(&mut body, self.version()).map_err(|e| HandlerError::Decode {
            api: self.api,
            version: self.version(),
            reason: e.to_string(),
        });
        self.signal_decoded(decoded.is_ok());
        decoded
    }

    /// Decodes the body as `version` of the same API: for old versions whose wire format is
    /// that of a later one the crate still knows (OffsetFetch v0 is v1, say).
    pub fn decode_as<T: Decodable>(&self, version: i16) -> Result<T, HandlerError> {
        let mut body = self.frame.body.clone();
        let decoded = T::decode(&mut body, version).map_err(|e| HandlerError::Decode {
            api: self.api,
            version: self.version(),
            reason: e.to_string(),
        });
        self.signal_decoded(decoded.is_ok());
        decoded
    }

    /// Decodes the body with a hand-written codec of an old version (see `protocol::wire`).
    pub fn decode_with<T>(
        &self,
        codec: impl FnOnce(Bytes) -> Result<T, crate::protocol::wire::WireError>,
    ) -> Result<T, HandlerError> {
        let decoded = codec(self.frame.body.clone()).map_err(|e| HandlerError::Decode {
            api: self.api,
            version: self.version(),
            reason: e.to_string(),
        });
        self.signal_decoded(decoded.is_ok());
        decoded
    }

    /// Reports whether the request body could be decoded (handlers that decode by hand call
    /// this themselves).
    pub fn signal_decoded(&self, ok: bool) {
        if let Some(tx) = self.decoded.borrow_mut().take() {
            metrics::record_stage(Stage::Decode, self.started.elapsed());
            tx.send(ok);
        }
    }

    /// The client id of the request header ("" when the client sent none).
    pub fn client_id(&self) -> &str {
        self.frame.client_id.as_deref().unwrap_or("")
    }

    /// The client's host as Kafka reports it for group members: the IP address after a `/`.
    pub fn client_host(&self) -> String {
        match self.peer.parse::<std::net::SocketAddr>() {
            Ok(addr) => format!("/{}", addr.ip()),
            Err(_) => self.peer.to_string(),
        }
    }

    /// Encodes a response body.
    pub fn encode<T: Encodable>(&self, response: &T) -> Result<Bytes, HandlerError> {
        encode(self.api, self.version(), response)
    }

    /// Encodes a response body as `version`, for old versions whose response is that of a
    /// later one.
    pub fn encode_as<T: Encodable>(
        &self,
        version: i16,
        response: &T,
    ) -> Result<Bytes, HandlerError> {
        encode(self.api, version, response)
    }

    /// The broker config of the file and flags. What dynamic broker configs may change (the
    /// topic defaults, producer expiry) is read from [`Request::effective_config`] instead.
    pub fn config(&self) -> &'a BrokerConfig {
        &self.shard.config
    }

    /// The broker config with the dynamic broker configs of the current metadata applied.
    pub fn effective_config(&self) -> BrokerConfig {
        self.shard.effective_config()
    }

    /// The metadata cache: the image as last published to this shard, what clients are
    /// answered from.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.shard.image()
    }

    /// Operations on partitions, wherever their shard is.
    pub fn partitions(&self) -> Partitions<'a> {
        Partitions(self.shard)
    }

    /// Consumer groups, on whichever shard coordinates each.
    pub fn groups(&self) -> Groups {
        Groups(Rc::clone(self.shard))
    }

    /// Applies a metadata change (through shard 0, or the controller in cluster mode) and
    /// answers with the image it was published in (for `validate_only`, the image it would
    /// give).
    pub async fn admin(&self, op: AdminOp) -> Result<Arc<MetadataImage>, AdminError> {
        self.shard.admin(op).await
    }

    /// The fetch sessions (KIP-227) of this shard's connections. Not to be held across an
    /// await: every Fetch on the shard needs them.
    pub fn fetch_sessions(&self) -> RefMut<'a, FetchSessions> {
        self.shard.fetch_sessions()
    }

    /// Producer ids for InitProducerId.
    pub fn producer_ids(&self) -> ProducerIds<'a> {
        ProducerIds(self.shard)
    }

    /// Whether the broker is stopping: long polls answer with what they have.
    pub fn is_stopping(&self) -> bool {
        self.shard.is_stopping()
    }
}

/// The partition router: runs operations on the shards owning their partitions, and tells
/// what the metadata and the offline notices say of a partition.
#[derive(Clone, Copy)]
pub struct Partitions<'a>(&'a Rc<Shard>);

impl Partitions<'_> {
    /// Runs `ops` wherever their partitions live; results come in the order of `ops`.
    pub async fn run(&self, ops: Vec<PartitionOp>) -> Vec<PartitionResult> {
        self.0.run_partition_ops(ops).await
    }

    /// [`Partitions::run`] for the reads of one Fetch: each shard keeps to `max_bytes`
    /// (KIP-74); the caller applies it once more over all results.
    pub async fn run_fetch(&self, ops: Vec<PartitionOp>, max_bytes: usize) -> Vec<PartitionResult> {
        self.0.run_fetch_ops(ops, max_bytes).await
    }

    /// Waits until one of `partitions` (topic, partition, offset) has data at or past its
    /// offset, or until `timeout`. Returns whether data came.
    pub async fn wait_for_data(
        &self,
        partitions: Vec<(String, i32, i64)>,
        timeout: Duration,
        log_end: bool,
    ) -> bool {
        self.0.wait_for_data(partitions, timeout, log_end).await
    }

    /// The partition's leader as the published metadata has it (KIP-951's hint).
    pub fn leader_hint(&self, topic: &str, partition: i32) -> Option<LeaderHint> {
        self.0.leader_hint(topic, partition)
    }

    /// Why this broker's replica of the partition cannot be served, if it is offline.
    pub fn offline_notice(&self, topic: &str, topic_id: Uuid, index: i32) -> Option<OfflineNotice> {
        self.0.partitions.offline_notice(topic, topic_id, index)
    }

    /// The offline replicas here of `topic`'s partitions from `first` on (those just created).
    pub fn offline_partitions_of(&self, topic: &TopicState, first: i32) -> Vec<OfflineNotice> {
        self.0.partitions.offline_partitions_of(topic, first)
    }
}

/// The group router: calls go to the shard coordinating each group. Owned (one more count
/// of the shard) so that a handler can hand it to tasks of its own, as OffsetFetch does to
/// fetch several groups at once.
#[derive(Clone)]
pub struct Groups(Rc<Shard>);

impl Groups {
    /// Runs one call on the coordinator of `group_id`.
    pub async fn call(&self, group_id: &str, call: Call) -> Result<Reply, GroupCallError> {
        self.0.group_call(group_id, call).await
    }

    /// Whether groups have a coordinator on this broker's shards: `__consumer_offsets`
    /// exists (any group id maps to one of its partitions).
    pub fn offsets_topic_ready(&self) -> bool {
        self.0.group_coordinator_shard("").is_some()
    }

    /// Cluster mode: the broker coordinating `group_id`, or the error code to answer while
    /// none can; `None` on a single node.
    pub fn cluster_coordinator(&self, group_id: &str) -> Option<Result<CoordinatorBroker, i16>> {
        self.0.cluster_coordinator(group_id)
    }

    /// ListGroups over every shard's coordinator, merged.
    pub async fn list(&self, states_filter: Vec<String>) -> ListGroupsReply {
        self.0.list_groups(states_filter).await
    }

    pub async fn describe(&self, group_ids: Vec<String>) -> Vec<GroupDescription> {
        self.0.describe_groups(group_ids).await
    }

    pub async fn delete(&self, group_ids: Vec<String>) -> Vec<(String, i16)> {
        self.0.delete_groups(group_ids).await
    }
}

/// Producer ids: a shard takes them from its block and asks shard 0 for a new one.
#[derive(Clone, Copy)]
pub struct ProducerIds<'a>(&'a Rc<Shard>);

impl ProducerIds<'_> {
    /// A producer id never handed out before on this data directory (cluster-wide in
    /// cluster mode).
    pub async fn allocate(&self) -> Result<i64, ProducerIdError> {
        self.0.allocate_producer_id().await
    }
}

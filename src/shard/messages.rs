//! What shards say to each other over the channel mesh. Everything here is `Send`: payloads are
//! `Bytes` and `Arc`s, never a shard's own `Rc` state.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::idempotence::producer_ids::ProducerIdError;
use crate::metadata::MetadataImage;
use crate::model::ProducerIdBlock;
use crate::partition::offline_notice::OfflineNotice;
use crate::partition::ops::{PartitionOp, PartitionResult};

/// A message on the mesh: a request with an id, or the reply to one.
pub enum MeshMessage {
    Request {
        id: u64,
        from: usize,
        request: ShardRequest,
    },
    Reply {
        id: u64,
        reply: ShardReply,
    },
}

/// A request to another shard, by the service on that shard that answers it.
pub enum ShardRequest {
    /// For the partitions the shard owns.
    Partitions(PartitionRequest),
    /// For the shard's metadata copy and replica roles (shard 0 also writes the metadata).
    Metadata(MetadataRequest),
    /// A consumer-group call for the coordinator on this shard.
    Group(crate::group::api::Call),
    /// To shard 0: reserve (durably) a block of producer ids for the asking shard.
    AllocateProducerIdBlock,
    /// This shard's metrics report (a scrape of the metrics endpoint).
    Metrics,
}

/// Work for the partitions a shard owns.
pub enum PartitionRequest {
    /// Operations on partitions this shard owns, in one round trip. With `fetch_budget`, the
    /// operations are the fetches of one Fetch request: read in order against that many
    /// response bytes (see `partition::fetch_budget`); without, they run concurrently.
    Ops {
        ops: Vec<PartitionOp>,
        fetch_budget: Option<usize>,
    },
    /// Resolve once any of these partitions has data past the offset, or after the timeout.
    WaitForData {
        partitions: Vec<(String, i32, i64)>,
        timeout_ms: u64,
        /// Wait for the log end (a follower) rather than the high watermark.
        log_end: bool,
    },
    /// Partitions that went offline on the sending shard (see `partition::offline`).
    Offline(Vec<OfflineNotice>),
}

/// Metadata for a shard to adopt, or (to shard 0) a change to make.
pub enum MetadataRequest {
    /// A new image from shard 0: open logs of new hosted partitions, drop gone ones, lead or
    /// follow as it says (cluster mode), load gained groups; on a single node also answer
    /// from it.
    Apply(Arc<MetadataImage>),
    /// A metadata change, sent to shard 0 (the only writer).
    Admin(AdminOp),
    /// Cluster mode: the image to answer requests from, once every shard applied it.
    Publish(Arc<MetadataImage>),
}

pub enum ShardReply {
    Partitions(Vec<PartitionResult>),
    Applied,
    Admin(Result<Arc<MetadataImage>, AdminError>),
    DataAvailable(bool),
    /// The coordinator's reply, or a whole-request error code.
    Group(Result<crate::group::api::Reply, i16>),
    ProducerIdBlock(Result<ProducerIdBlock, ProducerIdError>),
    /// Boxed: a report holds histograms and would make every mesh message large.
    Metrics(Box<crate::metrics::snapshot::ShardMetrics>),
}

#[derive(Debug, Clone)]
pub enum AdminOp {
    CreateTopic {
        name: String,
        partitions: i32,
        /// -1: the default. A single node has already refused anything but 1.
        replication_factor: i32,
        /// Replicas (broker ids) per partition, when the client chose them.
        assignment: Option<Vec<Vec<i32>>>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    DeleteTopic {
        name: String,
    },
    CreatePartitions {
        name: String,
        total: i32,
        /// Replicas (broker ids) per new partition, when the client chose them.
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    },
    SetTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
    /// Replaces the dynamic broker configs of one broker resource ("" or a broker id).
    SetBrokerConfigs {
        resource: String,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    pub code: i16,
    pub message: String,
}

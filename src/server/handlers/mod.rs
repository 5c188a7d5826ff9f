//! One file per Kafka API. The table below is the single list of what the broker serves:
//! ApiVersions is derived from it, and a key that is not here is not advertised.

pub mod alter_configs;
pub mod api_versions;
mod broker_configs;
mod config_resource;
mod context;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sync_group;

use std::rc::Rc;
use std::time::Instant;

use crate::protocol::messages::ApiKey;
use crate::protocol::Encodable;
use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

use crate::group::api::{Call, Reply};
use crate::metrics::registry::{self as metrics, Stage};
use crate::protocol::header::RequestFrame;
use crate::protocol::response_frame::ResponseFrame;
use crate::protocol::sharing_buf::SharingBuf;
use crate::protocol::ResponseError;
use crate::shard::Shard;
use crate::util::local_oneshot;

pub use context::{Groups, Partitions, ProducerIds, Request};

/// An API the broker serves and the versions it accepts.
#[derive(Debug, Clone, Copy)]
pub struct ApiSpec {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
}

/// Every API served: at least every version Apache Kafka 3.9 serves (Kafka 4.0 dropped the
/// oldest in KIP-896; we keep them for the clients still deployed). Versions the
/// kafka-protocol crate no longer knows are hand-coded in `protocol::legacy*`: Produce v0–v2
/// and Fetch v0–v3 (legacy message sets), ListOffsets v0, OffsetCommit v0/v1, OffsetFetch v0,
/// CreateTopics v0/v1, DeleteTopics v0, DescribeConfigs v0, OffsetForLeaderEpoch v0/v1. Produce stops at v11 (v12+ is
/// Kafka 4's), DescribeGroups at v5 (v6 is Kafka 4's), FindCoordinator at v5 (v6 adds share
/// groups).
pub const APIS: &[ApiSpec] = &[
    ApiSpec {
        key: ApiKey::Produce,
        min_version: 3,
        max_version: 11,
    },
    ApiSpec {
        key: ApiKey::Fetch,
        min_version: 0,
        max_version: 17,
    },
    ApiSpec {
        key: ApiKey::ListOffsets,
        min_version: 0,
        max_version: 9,
    },
    ApiSpec {
        key: ApiKey::Metadata,
        min_version: 0,
        max_version: 12,
    },
    ApiSpec {
        key: ApiKey::ApiVersions,
        min_version: 0,
        max_version: 4,
    },
    ApiSpec {
        key: ApiKey::CreateTopics,
        min_version: 0,
        max_version: 7,
    },
    ApiSpec {
        key: ApiKey::DeleteTopics,
        min_version: 0,
        max_version: 6,
    },
    ApiSpec {
        key: ApiKey::DeleteRecords,
        min_version: 0,
        max_version: 2,
    },
    ApiSpec {
        key: ApiKey::DescribeConfigs,
        min_version: 0,
        max_version: 4,
    },
    ApiSpec {
        key: ApiKey::AlterConfigs,
        min_version: 0,
        max_version: 2,
    },
    ApiSpec {
        key: ApiKey::CreatePartitions,
        min_version: 0,
        max_version: 3,
    },
    ApiSpec {
        key: ApiKey::IncrementalAlterConfigs,
        min_version: 0,
        max_version: 1,
    },
    ApiSpec {
        key: ApiKey::DescribeCluster,
        min_version: 0,
        max_version: 1,
    },
    ApiSpec {
        key: ApiKey::FindCoordinator,
        min_version: 0,
        max_version: 5,
    },
    ApiSpec {
        key: ApiKey::JoinGroup,
        min_version: 0,
        max_version: 9,
    },
    ApiSpec {
        key: ApiKey::SyncGroup,
        min_version: 0,
        max_version: 5,
    },
    ApiSpec {
        key: ApiKey::Heartbeat,
        min_version: 0,
        max_version: 4,
    },
    ApiSpec {
        key: ApiKey::LeaveGroup,
        min_version: 0,
        max_version: 5,
    },
    ApiSpec {
        key: ApiKey::OffsetCommit,
        min_version: 0,
        max_version: 9,
    },
    ApiSpec {
        key: ApiKey::OffsetFetch,
        min_version: 0,
        max_version: 9,
    },
    ApiSpec {
        key: ApiKey::ListGroups,
        min_version: 0,
        max_version: 5,
    },
    ApiSpec {
        key: ApiKey::DescribeGroups,
        min_version: 0,
        max_version: 5,
    },
    ApiSpec {
        key: ApiKey::DeleteGroups,
        min_version: 0,
        max_version: 2,
    },
    ApiSpec {
        key: ApiKey::OffsetDelete,
        min_version: 0,
        max_version: 0,
    },
    ApiSpec {
        key: ApiKey::OffsetForLeaderEpoch,
        min_version: 0,
        max_version: 4,
    },
    ApiSpec {
        key: ApiKey::DescribeLogDirs,
        min_version: 0,
        max_version: 4,
    },
    ApiSpec {
        key: ApiKey::DescribeProducers,
        min_version: 0,
        max_version: 0,
    },
    ApiSpec {
        key: ApiKey::InitProducerId,
        min_version: 0,
        max_version: 5,
    },
];

pub fn spec_for(key: ApiKey) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.key == key)
}

/// Why a request could not be answered; the connection is closed with a log line.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("API {0:?} is not supported by this broker")]
    UnsupportedApi(ApiKey),
    #[error("{api:?} v{version} is not supported (supported: v{min}-v{max})")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {api:?} v{version} request: {reason}")]
    Decode {
        api: ApiKey,
        version: i16,
        reason: String,
    },
    #[error("cannot encode the {api:?} v{version} response: {reason}")]
    Encode {
        api: ApiKey,
        version: i16,
        reason: String,
    },
}

/// Encodes a response body whose large byte fields lie in `shareable` (record batches) as
/// parts that share them instead of copying (see [`SharingBuf`]).
pub fn encode_sharing<T: Encodable>(
    api: ApiKey,
    version: i16,
    response: &T,
    shareable: Vec<Bytes>,
) -> Result<Vec<Bytes>, HandlerError> {
    let mut buf = SharingBuf::new(shareable);
    encode_into(api, version, response, &mut buf)?;
    Ok(buf.into_parts())
}

pub fn encode<T: Encodable>(
    api: ApiKey,
    version: i16,
    response: &T,
) -> Result<Bytes, HandlerError> {
    let mut buf = BytesMut::new();
    encode_into(api, version, response, &mut buf)?;
    Ok(buf.freeze())
}

/// Encodes into `buf`, timed as the encode stage.
fn encode_into<T: Encodable, B: ByteBufMut>(
    api: ApiKey,
    version: i16,
    response: &T,
    buf: &mut B,
) -> Result<(), HandlerError> {
    let started = Instant::now();
    response
        .encode(buf, version)
        .map_err(|e| HandlerError::Encode {
            api,
            version,
            reason: e.to_string(),
        })?;
    metrics::record_stage(Stage::Encode, started.elapsed());
    Ok(())
}

/// Handles one request; returns the framed response, or `None` when none is due (Produce
/// with acks=0).
///
/// `decoded` is told whether the request is acceptable (known API and version, body decoded)
/// as soon as that is known; it is dropped unsignalled for requests with nothing to decode.
pub async fn dispatch(
    shard: &Rc<Shard>,
    frame: &RequestFrame,
    peer: &str,
    decoded: local_oneshot::Sender<bool>,
) -> Result<Option<ResponseFrame>, HandlerError> {
    let Some(api) = frame.api else {
        decoded.send(false);
        return Err(HandlerError::UnknownApi(frame.api_key));
    };
    let version = frame.api_version;
    let spec = match spec_for(api) {
        Some(s) => s,
        None => {
            decoded.send(false);
            return Err(HandlerError::UnsupportedApi(api));
        }
    };
    let legacy_produce = api == ApiKey::Produce && (0..=2).contains(&version);
    if !legacy_produce && (version < spec.min_version || version > spec.max_version) {
        if api == ApiKey::ApiVersions {
            // Kafka answers an unknown ApiVersions version with a v0 response carrying
            // UNSUPPORTED_VERSION and the supported ranges, so the client can retry.
            let body = api_versions::unsupported_version_body()?;
            return Ok(Some(ResponseFrame::single(frame.correlation_id, 0, body)));
        }
        decoded.send(false);
        return Err(HandlerError::UnsupportedVersion {
            api,
            version,
            min: spec.min_version,
            max: spec.max_version,
        });
    }
    let req = Request::new(shard, frame, api, peer, decoded);
    let header_version = if legacy_produce {
        0
    } else {
        api.response_header_version(version)
    };
    if api == ApiKey::Fetch {
        let body = fetch::handle(&req).await?;
        return Ok(Some(ResponseFrame::new(
            frame.correlation_id,
            header_version,
            body,
        )));
    }
    let body = match api {
        ApiKey::ApiVersions => Some(api_versions::handle(&req)?),
        ApiKey::Metadata => Some(metadata::handle(&req).await?),
        ApiKey::CreateTopics => Some(create_topics::handle(&req).await?),
        ApiKey::Produce if legacy_produce => produce::handle_legacy(&req).await?,
        ApiKey::Produce => produce::handle(&req).await?,
        ApiKey::ListOffsets => Some(list_offsets::handle(&req).await?),
        ApiKey::DeleteTopics => Some(delete_topics::handle(&req).await?),
        ApiKey::DeleteRecords => Some(delete_records::handle(&req).await?),
        ApiKey::DescribeConfigs => Some(describe_configs::handle(&req)?),
        ApiKey::AlterConfigs => Some(alter_configs::handle(&req).await?),
        ApiKey::CreatePartitions => Some(create_partitions::handle(&req).await?),
        ApiKey::IncrementalAlterConfigs => Some(incremental_alter_configs::handle(&req).await?),
        ApiKey::DescribeCluster => Some(describe_cluster::handle(&req)?),
        ApiKey::FindCoordinator => Some(find_coordinator::handle(&req)?),
        ApiKey::JoinGroup => Some(join_group::handle(&req).await?),
        ApiKey::SyncGroup => Some(sync_group::handle(&req).await?),
        ApiKey::Heartbeat => Some(heartbeat::handle(&req).await?),
        ApiKey::LeaveGroup => Some(leave_group::handle(&req).await?),
        ApiKey::OffsetCommit => Some(offset_commit::handle(&req).await?),
        ApiKey::OffsetFetch => Some(offset_fetch::handle(&req).await?),
        ApiKey::ListGroups => Some(list_groups::handle(&req).await?),
        ApiKey::DescribeGroups => Some(describe_groups::handle(&req).await?),
        ApiKey::DeleteGroups => Some(delete_groups::handle(&req).await?),
        ApiKey::OffsetDelete => Some(offset_delete::handle(&req).await?),
        ApiKey::InitProducerId => Some(init_producer_id::handle(&req).await?),
        ApiKey::DescribeProducers => Some(describe_producers::handle(&req).await?),
        ApiKey::DescribeLogDirs => Some(describe_log_dirs::handle(&req).await?),
        ApiKey::OffsetForLeaderEpoch => Some(offset_for_leader_epoch::handle(&req).await?),
        other => return Err(HandlerError::UnsupportedApi(other)),
    };
    Ok(body.map(|b| ResponseFrame::single(frame.correlation_id, header_version, b)))
}

/// A topic name as the protocol types want it.
pub fn topic_name(name: &str) -> crate::protocol::messages::TopicName {
    crate::protocol::messages::TopicName(crate::protocol::StrBytes::from_string(name.to_string()))
}

/// A group id as the protocol types want it.
pub fn group_id(name: &str) -> crate::protocol::messages::GroupId {
    crate::protocol::messages::GroupId(str_bytes(name))
}

/// Runs `call` on the coordinator of `group_id` and takes the expected reply out of it with
/// `pick`. `Err` is an error code for the whole request; a reply of another kind is a
/// coordinator bug, answered with UNKNOWN_SERVER_ERROR.
pub async fn coordinator_call<T>(
    groups: &Groups,
    group_id: &str,
    call: Call,
    pick: impl FnOnce(Reply) -> Option<T>,
) -> Result<T, i16> {
    let kind = call_kind(&call);
    let reply = groups.call(group_id, call).await?;
    pick(reply).ok_or_else(|| {
        tracing::error!(
            group_id,
            call = kind,
            "the group coordinator answered with the wrong kind of reply"
        );
        ResponseError::UnknownServerError.code()
    })
}

fn call_kind(call: &Call) -> &'static str {
    match call {
        Call::Join(_) => "Join",
        Call::Sync(_) => "Sync",
        Call::Heartbeat(_) => "Heartbeat",
        Call::Leave(_) => "Leave",
        Call::OffsetCommit(_) => "OffsetCommit",
        Call::OffsetFetch(_) => "OffsetFetch",
        Call::ListGroups { .. } => "ListGroups",
        Call::DescribeGroups { .. } => "DescribeGroups",
        Call::DeleteGroups { .. } => "DeleteGroups",
        Call::OffsetDelete(_) => "OffsetDelete",
    }
}

pub fn str_bytes(s: impl Into<String>) -> crate::protocol::StrBytes {
    crate::protocol::StrBytes::from_string(s.into())
}

/// KAFKA_STORAGE_ERROR for clients that know it: Produce before v4 and Fetch before v6 predate
/// it (KIP-112), so they get NOT_LEADER_OR_FOLLOWER instead, as Kafka answers them (they then
/// refresh metadata and retry, rather than fail on an unknown code).
pub fn storage_error_for_version(code: i16, version: i16, first_version_with_it: i16) -> i16 {
    if code == ResponseError::KafkaStorageError.code() && version < first_version_with_it {
        ResponseError::NotLeaderOrFollower.code()
    } else {
        code
    }
}

/// The brokers Metadata and DescribeCluster list: every live broker of `image`; until the image
/// lists any (cluster mode starting up), this broker alone.
pub fn client_brokers(
    config: &crate::config::BrokerConfig,
    image: &crate::metadata::MetadataImage,
) -> Vec<crate::metadata::LiveBroker> {
    let mut live = image.live_brokers();
    if live.is_empty() {
        live.push(crate::metadata::LiveBroker {
            id: crate::model::BrokerId(config.node_id),
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        });
    }
    live
}

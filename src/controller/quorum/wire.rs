//! The messages of the CONTROLLER listener and their framing: `[length u32 BE][JSON]`, one
//! request then one response per frame, in order, on a connection. The length is checked
//! against [`MAX_RPC_FRAME`] before anything is allocated, and a frame that does not decode
//! is an error for that connection, never a panic.
//!
//! Raft's own RPCs (openraft's message types, serde-derived) and the brokers' registration
//! and heartbeats share the listener: a broker finds the active controller the same way the
//! voters find each other.

use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::MetadataRaft;
use crate::controller::alter_partition::AlterPartitionRequest;
use crate::controller::broker_lifecycle::{BrokerRegistrationRequest, Heartbeat, HeartbeatReply};
use crate::controller::cluster_metadata::MetadataSnapshot;
use crate::controller::topic_changes::{ChangeRefused, TopicChange};
use crate::model::{BrokerEpoch, BrokerId, LeaderEpoch, MetadataOffset, PartitionEpoch};

/// The largest frame either side accepts. Snapshot chunks are the largest messages
/// (openraft's default chunk is 3 MiB); a metadata batch is far smaller.
pub const MAX_RPC_FRAME: usize = 16 * 1024 * 1024;

#[derive(Debug, Serialize, Deserialize)]
pub enum ControllerRequest {
    AppendEntries(AppendEntriesRequest<MetadataRaft>),
    Vote(VoteRequest<BrokerId>),
    InstallSnapshot(InstallSnapshotRequest<MetadataRaft>),
    RegisterBroker(BrokerRegistrationRequest),
    BrokerHeartbeat(Heartbeat),
    /// `ringbroker cluster status`.
    Status,
    /// A topic admin request forwarded by a broker to the active controller.
    TopicChanges {
        changes: Vec<TopicChange>,
        validate_only: bool,
    },
    /// The applied metadata once it is past `after` (any voter answers), waiting at most
    /// `wait_ms`: how a broker that is not a voter follows the metadata log.
    FetchMetadata {
        after: Option<MetadataOffset>,
        wait_ms: u64,
    },
    /// A partition leader asks for an ISR change (Kafka's AlterPartition).
    AlterPartition(AlterPartitionRequest),
    /// A broker asks for a block of producer ids (Kafka's AllocateProducerIds).
    AllocateProducerIds {
        broker_id: BrokerId,
        broker_epoch: BrokerEpoch,
    },
}

#[derive(Debug, Serialize, Deserialize)]
pub enum ControllerResponse {
    /// Raft's errors on these two are only "this node has stopped": carried as text.
    AppendEntries(Result<AppendEntriesResponse<BrokerId>, String>),
    Vote(Result<VoteResponse<BrokerId>, String>),
    InstallSnapshot(
        Result<InstallSnapshotResponse<BrokerId>, RaftError<BrokerId, InstallSnapshotError>>,
    ),
    Registered {
        broker_epoch: BrokerEpoch,
    },
    Heartbeat(HeartbeatReply),
    Status(super::status_report::ClusterStatusReport),
    /// Per change in request order; `committed` is the offset of the batch's last record
    /// (`None` when nothing was proposed: all refused, or validate_only).
    TopicChanges {
        results: Vec<Result<(), ChangeRefused>>,
        committed: Option<MetadataOffset>,
    },
    /// `None`: nothing was applied past `after` within the wait.
    Metadata(Option<MetadataSnapshot>),
    /// The partition as committed after an AlterPartition (the asked-for ISR, or an equal
    /// one that needed no record).
    PartitionState {
        isr: Vec<BrokerId>,
        leader: Option<BrokerId>,
        leader_epoch: LeaderEpoch,
        partition_epoch: PartitionEpoch,
    },
    /// Producer ids `start..end`, committed for the asking broker.
    ProducerIds {
        start: i64,
        end: i64,
    },
    /// This node is not the active controller; `leader` is the one it knows of.
    NotController {
        leader: Option<BrokerId>,
    },
    /// The controller refused the request (a [`crate::controller::ControllerError`]).
    Refused {
        code: i16,
        message: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("controller connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("controller frame of {len} bytes exceeds the limit of {MAX_RPC_FRAME}")]
    TooLarge { len: usize },
    #[error("controller frame does not decode: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("controller connection closed by the peer")]
    Closed,
}

/// Writes one message as a frame.
pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    message: &T,
) -> Result<(), WireError> {
    let json = serde_json::to_vec(message)?;
    if json.len() > MAX_RPC_FRAME {
        return Err(WireError::TooLarge { len: json.len() });
    }
    let mut frame = Vec::with_capacity(4 + json.len());
    frame.extend_from_slice(&(json.len() as u32).to_be_bytes());
    frame.extend_from_slice(&json);
    w.write_all(&frame).await?;
    w.flush().await?;
    Ok(())
}

/// Reads one frame; `Ok(None)` when the peer closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin, T: DeserializeOwned>(
    r: &mut R,
) -> Result<Option<T>, WireError> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < header.len() {
        match r.read(&mut header[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(WireError::Closed),
            n => got += n,
        }
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > MAX_RPC_FRAME {
        return Err(WireError::TooLarge { len });
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            WireError::Closed
        } else {
            WireError::Io(e)
        }
    })?;
    Ok(Some(serde_json::from_slice(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::block_on;
    use futures_lite::io::Cursor;

    #[test]
    fn frames_round_trip_and_bad_input_is_an_error() {
        block_on(async {
            let mut buf = Cursor::new(Vec::new());
            let msg = ControllerResponse::NotController {
                leader: Some(BrokerId(2)),
            };
            write_frame(&mut buf, &msg).await.expect("writes");
            let bytes = buf.into_inner();
            let back: Option<ControllerResponse> = read_frame(&mut Cursor::new(bytes.clone()))
                .await
                .expect("reads");
            assert!(matches!(
                back,
                Some(ControllerResponse::NotController {
                    leader: Some(BrokerId(2))
                })
            ));
            let eof: Option<ControllerResponse> = read_frame(&mut Cursor::new(Vec::new()))
                .await
                .expect("clean end");
            assert!(eof.is_none());
            async fn read(bytes: Vec<u8>) -> Result<Option<ControllerResponse>, WireError> {
                read_frame(&mut Cursor::new(bytes)).await
            }
            assert!(matches!(
                read(bytes[..6].to_vec()).await,
                Err(WireError::Closed)
            ));
            let huge = u32::MAX.to_be_bytes().to_vec();
            assert!(matches!(read(huge).await, Err(WireError::TooLarge { .. })));
            let mut junk = 3u32.to_be_bytes().to_vec();
            junk.extend_from_slice(b"{{{");
            assert!(matches!(read(junk).await, Err(WireError::Decode(_))));
        });
    }
}

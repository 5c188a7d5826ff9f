//! openraft's network: RPCs to a peer's CONTROLLER listener over one TCP connection per peer
//! (per replication stream), opened lazily and dropped on any error, so a restarted peer is
//! reached again on the next call. Every call is bounded by openraft's TTL for it.

use std::net::SocketAddr;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AsyncRuntime, BasicNode};

use super::wire::{read_frame, write_frame, ControllerRequest, ControllerResponse, WireError};
use super::MetadataRaft;
use crate::model::BrokerId;
use crate::runtime::raft_runtime::GlommioRaftRuntime;
use crate::runtime::{self, TcpStream};

type Rpc<T, E = openraft::error::Infallible> =
    Result<T, RPCError<BrokerId, BasicNode, RaftError<BrokerId, E>>>;

/// Why a call to a controller endpoint failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("controller endpoint {addr:?} is not a socket address")]
    BadAddress { addr: String },
    #[error("cannot reach the controller at {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("controller at {addr}: {source}")]
    Wire { addr: SocketAddr, source: WireError },
    #[error("controller at {addr} did not answer within {timeout:?}")]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error("controller at {addr} answered with a message of another kind")]
    Unexpected { addr: SocketAddr },
}

/// One connection to one controller endpoint; reconnects after a failure.
pub struct ControllerClient {
    addr: Result<SocketAddr, String>,
    stream: Option<TcpStream>,
}

impl ControllerClient {
    pub fn new(addr: &str) -> ControllerClient {
        ControllerClient {
            addr: addr.parse().map_err(|_| addr.to_string()),
            stream: None,
        }
    }

    /// Sends `request` and waits for its response, all within `timeout`.
    pub async fn call(
        &mut self,
        request: &ControllerRequest,
        timeout: Duration,
    ) -> Result<ControllerResponse, CallError> {
        let addr = self
            .addr
            .clone()
            .map_err(|addr| CallError::BadAddress { addr })?;
        let timeout = timeout.max(Duration::from_millis(1));
        let result = GlommioRaftRuntime::timeout(timeout, self.exchange(addr, request, timeout))
            .await
            .unwrap_or(Err(CallError::Timeout { addr, timeout }));
        if result.is_err() {
            // The stream may hold half a frame; the next call starts a fresh one.
            self.stream = None;
        }
        result
    }

    async fn exchange(
        &mut self,
        addr: SocketAddr,
        request: &ControllerRequest,
        timeout: Duration,
    ) -> Result<ControllerResponse, CallError> {
        let mut stream = match self.stream.take() {
            Some(s) => s,
            None => runtime::connect(addr, timeout)
                .await
                .map_err(|source| CallError::Connect { addr, source })?,
        };
        let wire = |source| CallError::Wire { addr, source };
        write_frame(&mut stream, request).await.map_err(wire)?;
        let response = read_frame(&mut stream)
            .await
            .map_err(wire)?
            .ok_or(CallError::Wire {
                addr,
                source: WireError::Closed,
            })?;
        self.stream = Some(stream);
        Ok(response)
    }
}

/// Makes one [`PeerNetwork`] per replication target.
#[derive(Debug, Default, Clone)]
pub struct NetworkFactory;

impl RaftNetworkFactory<MetadataRaft> for NetworkFactory {
    type Network = PeerNetwork;

    async fn new_client(&mut self, target: BrokerId, node: &BasicNode) -> PeerNetwork {
        PeerNetwork {
            target,
            client: ControllerClient::new(&node.addr),
        }
    }
}

pub struct PeerNetwork {
    target: BrokerId,
    client: ControllerClient,
}

fn unreachable<E: std::error::Error>(e: CallError) -> RPCError<BrokerId, BasicNode, E> {
    match e {
        CallError::Timeout { .. } | CallError::Wire { .. } => {
            RPCError::Network(NetworkError::new(&e))
        }
        _ => RPCError::Unreachable(Unreachable::new(&e)),
    }
}

impl PeerNetwork {
    async fn call(
        &mut self,
        request: ControllerRequest,
        option: &RPCOption,
    ) -> Result<ControllerResponse, CallError> {
        self.client.call(&request, option.hard_ttl()).await
    }

    fn remote_failure<E: std::error::Error>(
        &self,
        message: String,
    ) -> RPCError<BrokerId, BasicNode, E> {
        RPCError::Unreachable(Unreachable::new(&std::io::Error::other(format!(
            "controller {} cannot serve raft requests: {message}",
            self.target
        ))))
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<BrokerId, BasicNode, E> {
        RPCError::Network(NetworkError::new(&CallError::Unexpected {
            addr: self
                .client
                .addr
                .clone()
                .unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        }))
    }
}

impl RaftNetwork<MetadataRaft> for PeerNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<MetadataRaft>,
        option: RPCOption,
    ) -> Rpc<AppendEntriesResponse<BrokerId>> {
        match self
            .call(ControllerRequest::AppendEntries(rpc), &option)
            .await
        {
            Ok(ControllerResponse::AppendEntries(Ok(r))) => Ok(r),
            Ok(ControllerResponse::AppendEntries(Err(m))) => Err(self.remote_failure(m)),
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<MetadataRaft>,
        option: RPCOption,
    ) -> Rpc<InstallSnapshotResponse<BrokerId>, InstallSnapshotError> {
        match self
            .call(ControllerRequest::InstallSnapshot(rpc), &option)
            .await
        {
            Ok(ControllerResponse::InstallSnapshot(Ok(r))) => Ok(r),
            Ok(ControllerResponse::InstallSnapshot(Err(e))) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<BrokerId>,
        option: RPCOption,
    ) -> Rpc<VoteResponse<BrokerId>> {
        match self.call(ControllerRequest::Vote(rpc), &option).await {
            Ok(ControllerResponse::Vote(Ok(r))) => Ok(r),
            Ok(ControllerResponse::Vote(Err(m))) => Err(self.remote_failure(m)),
            Ok(_) => Err(self.unexpected()),
            Err(e) => Err(unreachable(e)),
        }
    }
}

//! One voter of the metadata quorum on shard 0: opens the log and snapshot, starts openraft
//! and the CONTROLLER listener, and offers the seam of `controller/mod.rs`:
//! [`QuorumNode::propose`], the applied metadata ([`QuorumNode::view`]) and the current
//! leader ([`QuorumNode::status`]).
//!
//! Bootstrapping: every voter starts with the same `controller.quorum.voters`, and a voter
//! whose log is empty initializes the membership from it. openraft allows every voter to do
//! this with the same membership (they all write the same first entry), which is what lets a
//! cluster of empty data dirs form without a separate format step.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};

use super::log_store::{LogOpenError, MetadataLogStore};
use super::lost_log;
use super::network::NetworkFactory;
use super::server::{self, BrokerCall, ServerContext};
use super::state_machine::{MetadataStateMachine, MetadataView};
use super::{MetadataBatch, Raft};
use crate::controller::records::MetadataRecord;
use crate::model::{BrokerId, MetadataOffset};
use crate::runtime::{self, LocalSender, Task, TcpListener};
use crate::util::shutdown::ShutdownSignal;

/// How to run this node's part of the quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumConfig {
    pub node_id: BrokerId,
    /// Every voter with its CONTROLLER endpoint (`host:port`), this node included.
    pub voters: Vec<(BrokerId, String)>,
    /// The metadata log's directory (`<data-dir>/__cluster_metadata-0`).
    pub dir: PathBuf,
    /// `controller.quorum.election.timeout.ms`: the shortest election timeout; openraft picks
    /// each one at random in [this, 2 × this).
    pub election_timeout_ms: u64,
    /// How often the leader sends heartbeats; well below the election timeout.
    pub heartbeat_interval_ms: u64,
    /// Entries after which a snapshot is taken (and the log before it purged).
    pub snapshot_after_entries: u64,
    /// Tests: while set, the state machine applies nothing (its log still grows).
    #[cfg(test)]
    pub apply_gate: Option<Rc<std::cell::Cell<bool>>>,
}

impl QuorumConfig {
    /// Kafka's defaults: 1 s election timeout; heartbeats at a fifth of it.
    pub fn new(node_id: BrokerId, voters: Vec<(BrokerId, String)>, dir: PathBuf) -> QuorumConfig {
        QuorumConfig {
            node_id,
            voters,
            dir,
            election_timeout_ms: 1_000,
            heartbeat_interval_ms: 200,
            snapshot_after_entries: 1_000,
            #[cfg(test)]
            apply_gate: None,
        }
    }

    fn raft_config(&self) -> Result<Config, QuorumError> {
        let min = self.election_timeout_ms.max(2);
        Config {
            cluster_name: "ringbroker-metadata".to_string(),
            election_timeout_min: min,
            election_timeout_max: min * 2,
            heartbeat_interval: self.heartbeat_interval_ms.clamp(1, min - 1),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_after_entries.max(1)),
            max_in_snapshot_log_to_keep: 0,
            // Chunks travel as JSON, where bytes take up to 4 characters each: 1 MiB chunks
            // stay well inside the RPC frame limit (wire.rs).
            snapshot_max_chunk_size: 1024 * 1024,
            ..Config::default()
        }
        .validate()
        .map_err(|e| QuorumError::Config(e.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error("metadata quorum configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Log(#[from] LogOpenError),
    #[error("metadata snapshot in {dir}: {source}")]
    Snapshot {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("the raft node stopped: {0}")]
    Stopped(String),
    #[error("cannot write the voter marker {path}: {source}")]
    Marker {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The log is empty but was not new: starting would let this voter help lose committed
    /// metadata (see `lost_log.rs`).
    #[error("the metadata log in {dir} is empty, but {evidence}: it was lost. This voter is not started, since voting with an empty log can lose committed metadata. Restore the directory from a backup; if this is a new cluster, remove {marker}")]
    LostLog {
        dir: PathBuf,
        evidence: String,
        marker: PathBuf,
    },
}

/// The node asked is not the active controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the active controller (leader: {leader:?})")]
pub struct NotLeader {
    pub leader: Option<BrokerId>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    #[error(transparent)]
    NotLeader(#[from] NotLeader),
    #[error("an empty batch proposes nothing")]
    Empty,
    #[error("the metadata log cannot take proposals: {0}")]
    Failed(String),
}

/// The quorum as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumStatus {
    pub node_id: BrokerId,
    pub leader: Option<BrokerId>,
    pub term: u64,
    pub is_leader: bool,
    /// The leader has applied an entry of its own term, so everything earlier leaders
    /// committed too: only then may it decide as the active controller (KRaft's rule).
    pub leader_caught_up: bool,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub applied_offset: Option<MetadataOffset>,
    /// On the leader: each voter's matched log index.
    pub voter_log_ends: BTreeMap<BrokerId, Option<u64>>,
}

/// A running voter.
pub struct QuorumNode {
    node_id: BrokerId,
    raft: Raft,
    view: Rc<MetadataView>,
    shutdown: Rc<ShutdownSignal>,
    server: Task<()>,
}

impl QuorumNode {
    /// Opens the log in `config.dir`, starts Raft and serves `listener` (the CONTROLLER
    /// listener). Broker requests are sent to `broker_calls` when given.
    pub async fn start(
        config: QuorumConfig,
        listener: TcpListener,
        broker_calls: Option<Rc<LocalSender<BrokerCall>>>,
    ) -> Result<QuorumNode, QuorumError> {
        if !config.voters.iter().any(|(id, _)| *id == config.node_id) {
            return Err(QuorumError::Config(format!(
                "node {} is not among the voters",
                config.node_id
            )));
        }
        let raft_config = Arc::new(config.raft_config()?);
        let (log, recovered) = MetadataLogStore::open(&config.dir).await?;
        tracing::info!(
            dir = %config.dir.display(),
            entries = recovered.entries,
            cut_bytes = recovered.cut_bytes,
            "metadata log opened"
        );
        let fresh = log.log_ids().is_empty() && log.last_purged().is_none();
        if fresh {
            let evidence =
                lost_log::lost_log_evidence(&config.dir, config.node_id, &config.voters).await;
            if let Some(evidence) = evidence {
                return Err(QuorumError::LostLog {
                    dir: config.dir.clone(),
                    evidence,
                    marker: lost_log::marker_path(&config.dir),
                });
            }
        }
        let state_machine = MetadataStateMachine::open(&config.dir)
            .await
            .map_err(|source| QuorumError::Snapshot {
                dir: config.dir.clone(),
                source,
            })?;
        #[cfg(test)]
        let state_machine = state_machine.with_apply_gate(config.apply_gate.clone());
        let view = state_machine.view();
        let raft = Raft::new(
            config.node_id,
            raft_config,
            NetworkFactory,
            log,
            state_machine,
        )
        .await
        .map_err(|e| QuorumError::Stopped(e.to_string()))?;
        let shutdown = Rc::new(ShutdownSignal::new());
        let ctx = ServerContext {
            raft: raft.clone(),
            view: Rc::clone(&view),
            broker_calls,
            shutdown: Rc::clone(&shutdown),
        };
        let server = runtime::spawn(server::serve(listener, ctx));
        if fresh {
            let members: BTreeMap<BrokerId, BasicNode> = config
                .voters
                .iter()
                .map(|(id, addr)| (*id, BasicNode::new(addr)))
                .collect();
            match raft.initialize(members).await {
                Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                Err(e) => return Err(QuorumError::Stopped(e.to_string())),
            }
        }
        // From here the log holds the quorum's first entry: an empty one later was lost.
        lost_log::write_marker(&config.dir, config.node_id).map_err(|source| {
            QuorumError::Marker {
                path: lost_log::marker_path(&config.dir),
                source,
            }
        })?;
        Ok(QuorumNode {
            node_id: config.node_id,
            raft,
            view,
            shutdown,
            server,
        })
    }

    /// Proposes `records` as one entry; resolves once it is committed and applied here, with
    /// the offset of its first record.
    pub async fn propose(
        &self,
        records: Vec<MetadataRecord>,
    ) -> Result<MetadataOffset, ProposeError> {
        self.propose_applied(records).await.map(|(first, _)| first)
    }

    /// [`Self::propose`], also telling how many of the records were skipped when applied
    /// (decided on a state that no longer held: they changed nothing).
    pub async fn propose_applied(
        &self,
        records: Vec<MetadataRecord>,
    ) -> Result<(MetadataOffset, usize), ProposeError> {
        if records.is_empty() {
            return Err(ProposeError::Empty);
        }
        match self.raft.client_write(MetadataBatch(records)).await {
            Ok(reply) => reply
                .data
                .first_offset
                .map(|first| (first, reply.data.skipped))
                .ok_or_else(|| ProposeError::Failed("a batch applied without an offset".into())),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(NotLeader {
                leader: f.leader_id,
            }
            .into()),
            Err(e) => Err(ProposeError::Failed(e.to_string())),
        }
    }

    /// The metadata applied on this node, and a watch of its offset.
    pub fn view(&self) -> &Rc<MetadataView> {
        &self.view
    }

    pub fn node_id(&self) -> BrokerId {
        self.node_id
    }

    /// Why the Raft node stopped, if it did.
    pub fn failure(&self) -> Option<String> {
        self.raft
            .metrics()
            .borrow()
            .running_state
            .as_ref()
            .err()
            .map(|e| e.to_string())
    }

    pub fn status(&self) -> QuorumStatus {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        QuorumStatus {
            node_id: self.node_id,
            leader: m.current_leader,
            term: m.current_term,
            is_leader: m.state == ServerState::Leader,
            leader_caught_up: m.state == ServerState::Leader
                && m.last_applied
                    .is_some_and(|l| l.leader_id.term == m.current_term),
            last_log_index: m.last_log_index,
            last_applied_index: m.last_applied.map(|l| l.index),
            applied_offset: self.view.applied_offset(),
            voter_log_ends: m
                .replication
                .as_ref()
                .map(|r| {
                    r.iter()
                        .map(|(id, log)| (*id, log.map(|l| l.index)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Waits until the status changes (a new leader, term or log position), at most `limit`.
    pub async fn changed(&self, limit: Duration) {
        let mut metrics = self.raft.metrics();
        // A clone starts at the version its source last saw, which may be old.
        metrics.borrow_and_update();
        futures_lite::future::or(
            async {
                if metrics.changed().await.is_err() {
                    // The node has stopped: nothing will change; wait out the limit.
                    runtime::sleep(limit).await;
                }
            },
            runtime::sleep(limit),
        )
        .await;
    }

    /// Stops the listener and the Raft node.
    pub async fn shutdown(self) {
        self.shutdown.trigger();
        self.server.await;
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft node did not stop cleanly");
        }
    }
}

//! `serve` in cluster mode (`controller.quorum.voters` set): before the shards start, the
//! KRaft properties are checked together and the data directory is claimed for this cluster
//! and node (`meta.properties`); on shard 0 the metadata quorum's voter, the active
//! controller's loop, this broker's session with the controller and the publisher of the
//! live brokers run as tasks until shutdown. Without voters none of this exists and the
//! broker is the single node it always was.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::controller::active_controller::ControllerConfig;
use crate::controller::cluster_metadata::ClusterMetadata;
use crate::controller::image::shard_image;
use crate::controller::kraft_config::{HostPort, KraftConfig, KraftConfigError};
use crate::controller::quorum::broker_session::{self, BrokerSessionConfig};
use crate::controller::quorum::controller_link::{self, ControllerLink};
use crate::controller::quorum::state_machine::MetadataView;
use crate::controller::quorum::{active, QuorumConfig, QuorumError, QuorumNode, METADATA_LOG_DIR};
use crate::controller::records::Endpoint;
use crate::metadata::meta_properties::{
    cluster_id_from_uuid, MetaProperties, MetaPropertiesError, META_PROPERTIES_FILE,
};
use crate::model::BrokerId;
use crate::model::MetadataOffset;
use crate::partition::replica_manager::{ReplicaManager, ReplicaSettings};
use crate::runtime::{self, Task, TcpListener};
use crate::shard::cluster_admin::ClusterAdmin;
use crate::shard::group_routing::GroupRoles;
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;

#[derive(Debug, thiserror::Error)]
pub enum ClusterStartError {
    #[error("cluster configuration: {0}")]
    Config(#[from] KraftConfigError),
    #[error("{path}: {source}")]
    MetaProperties {
        path: PathBuf,
        source: MetaPropertiesError,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot resolve {host}:{port}: {reason}")]
    Resolve {
        host: String,
        port: u16,
        reason: String,
    },
    #[error("cannot listen on the controller listener {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Quorum(#[from] QuorumError),
}

/// What the checks before the shards start found; shared by every shard.
#[derive(Debug)]
pub struct ClusterSetup {
    pub kraft: KraftConfig,
    /// From `meta.properties` (or `cluster.id`): fixed for the life of the process.
    pub cluster_id: String,
    /// This process's registration id (a restart is a new incarnation): partitions lead
    /// only once the applied metadata holds this registration.
    pub incarnation: uuid::Uuid,
}

/// The cluster configuration of `config` checked as a whole, without touching the data
/// directory (`serve --check-config`); `None` on a single-node broker.
pub fn check(config: &BrokerConfig) -> Result<Option<KraftConfig>, ClusterStartError> {
    Ok(KraftConfig::from_properties(&config.cluster_properties())?)
}

/// The cluster configuration of `config`, with its data directory claimed; `None` on a
/// single-node broker.
pub fn prepare(config: &BrokerConfig) -> Result<Option<ClusterSetup>, ClusterStartError> {
    let Some(kraft) = check(config)? else {
        return Ok(None);
    };
    let cluster_id = claim_data_dir(&config.data_dir, &kraft)?;
    tracing::info!(
        cluster_id = %cluster_id,
        node_id = kraft.node_id.0,
        voters = kraft.voters.len(),
        controller = kraft.roles.controller,
        "cluster mode"
    );
    Ok(Some(ClusterSetup {
        kraft,
        cluster_id,
        incarnation: crate::util::entropy::uuid_v4(),
    }))
}

/// Reads `meta.properties` and refuses a directory of another cluster or node; writes it
/// (durably) into a new directory. Returns the cluster id.
fn claim_data_dir(dir: &Path, kraft: &KraftConfig) -> Result<String, ClusterStartError> {
    let path = dir.join(META_PROPERTIES_FILE);
    let meta_err = |source| ClusterStartError::MetaProperties {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let found = MetaProperties::parse(&text).map_err(meta_err)?;
            let expected = kraft.cluster_id.as_deref().unwrap_or(&found.cluster_id);
            found.check(expected, kraft.node_id).map_err(meta_err)?;
            Ok(found.cluster_id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let cluster_id = kraft
                .cluster_id
                .clone()
                .unwrap_or_else(|| cluster_id_of_voters(kraft));
            let props = MetaProperties {
                cluster_id: cluster_id.clone(),
                node_id: kraft.node_id,
                other: Default::default(),
            };
            write_durably(&path, props.format().as_bytes())
                .map_err(|source| ClusterStartError::Io { path, source })?;
            Ok(cluster_id)
        }
        Err(source) => Err(ClusterStartError::Io { path, source }),
    }
}

/// Without `cluster.id`, every voter of a new quorum must come up with the same id: it is
/// derived from the voter list (a stable hash), which they all share.
fn cluster_id_of_voters(kraft: &KraftConfig) -> String {
    let mut voters: Vec<String> = kraft
        .voters
        .iter()
        .map(|v| format!("{}@{}:{}", v.id, v.address.host, v.address.port))
        .collect();
    voters.sort();
    let text = voters.join(",");
    let mut id: u128 = 0;
    for seed in 0u32..4 {
        let part = crc32c::crc32c_append(seed.wrapping_mul(0x9e37_79b9), text.as_bytes());
        id = (id << 32) | u128::from(part);
    }
    cluster_id_from_uuid(uuid::Uuid::from_u128(id))
}

/// Before the runtime starts (plain std I/O): temporary file, fsync, rename, directory fsync.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}

/// Every voter with its resolved CONTROLLER address.
fn voter_addresses(kraft: &KraftConfig) -> Result<Vec<(BrokerId, String)>, ClusterStartError> {
    kraft
        .voters
        .iter()
        .map(|v| Ok((v.id, resolve(&v.address)?.to_string())))
        .collect()
}

fn resolve(address: &HostPort) -> Result<SocketAddr, ClusterStartError> {
    let err = |reason: String| ClusterStartError::Resolve {
        host: address.host.clone(),
        port: address.port,
        reason,
    };
    let host = if address.host.is_empty() {
        "0.0.0.0"
    } else {
        address.host.as_str()
    };
    (host, address.port)
        .to_socket_addrs()
        .map_err(|e| err(e.to_string()))?
        .next()
        .ok_or_else(|| err("no address".to_string()))
}

/// The tasks of cluster mode on shard 0.
pub struct ClusterTasks {
    node: Option<Rc<QuorumNode>>,
    /// The broker's session, stopped first: its farewell heartbeat may need this node's
    /// own controller loop.
    session: Option<(Task<()>, Rc<ShutdownSignal>)>,
    tasks: Vec<Task<()>>,
    shutdown: Rc<ShutdownSignal>,
}

/// Starts the voter (if this node is one) and the controller loop, or the metadata follower
/// (if it is not), then what every broker runs: the copy of the applied metadata into the
/// shards and its publication, the broker's session and the creation of the offsets topic.
/// Shard 0 only.
pub async fn start(
    setup: &ClusterSetup,
    shard: &Rc<Shard>,
) -> Result<ClusterTasks, ClusterStartError> {
    let config = &shard.config;
    let kraft = &setup.kraft;
    let shutdown = Rc::new(ShutdownSignal::new());
    let voters = voter_addresses(kraft)?;
    let heartbeat_interval = Duration::from_millis(kraft.heartbeat_interval_ms);
    let mut tasks = Vec::new();
    let node = if kraft.roles.controller {
        let listener = kraft
            .listeners
            .iter()
            .find(|l| kraft.controller_listener_names.contains(&l.name))
            .ok_or(KraftConfigError::Missing("a controller listener"))?;
        let addr = resolve(&listener.address)?;
        let listener = TcpListener::bind_exclusive(addr)
            .map_err(|source| ClusterStartError::Listen { addr, source })?;
        let (calls_tx, calls_rx) = runtime::local_channel(64);
        let quorum = QuorumConfig {
            election_timeout_ms: kraft.election_timeout_ms,
            heartbeat_interval_ms: (kraft.election_timeout_ms / 5).max(1),
            ..QuorumConfig::new(
                kraft.node_id,
                voters.clone(),
                config.data_dir.join(METADATA_LOG_DIR),
            )
        };
        let node = Rc::new(QuorumNode::start(quorum, listener, Some(Rc::new(calls_tx))).await?);
        let controller = ControllerConfig {
            session_timeout_ms: kraft.session_timeout_ms,
            default_replication_factor: kraft.default_replication_factor,
            default_partitions: config.num_partitions,
            followers_replicate: true,
            ..ControllerConfig::default()
        };
        // Sessions are checked twice per heartbeat interval: a silent broker is fenced
        // within half an interval of its session running out.
        let tick = (heartbeat_interval / 2).max(Duration::from_millis(10));
        tasks.push(runtime::spawn(active::run(
            Rc::clone(&node),
            calls_rx,
            controller,
            tick,
            Rc::clone(&shutdown),
        )));
        Some(node)
    } else {
        None
    };
    let view = match &node {
        Some(n) => Rc::clone(n.view()),
        None => {
            // Its own connections: the follower's long polls do not delay forwarded requests.
            let view = Rc::new(MetadataView::new(ClusterMetadata::new()));
            tasks.push(runtime::spawn(controller_link::follow_metadata(
                Rc::new(ControllerLink::new(voters.clone())),
                Rc::clone(&view),
                Rc::clone(&shutdown),
            )));
            view
        }
    };
    shard.attach_cluster_admin(ClusterAdmin::new(Rc::new(ControllerLink::new(
        voters.clone(),
    ))));
    tasks.push(runtime::spawn(follow_applied(
        Rc::clone(shard),
        Rc::clone(&view),
        node.clone(),
        setup.cluster_id.clone(),
        Rc::clone(&shutdown),
    )));
    let mut session_task = None;
    if kraft.roles.broker {
        let name = kraft
            .advertised_listeners
            .first()
            .map_or("PLAINTEXT".to_string(), |l| l.name.clone());
        let session = BrokerSessionConfig {
            broker_id: kraft.node_id,
            incarnation: setup.incarnation,
            // BrokerConfig resolved the client listener (port 0 included).
            endpoints: vec![Endpoint {
                name,
                host: config.advertised_host.clone(),
                port: config.advertised_port,
            }],
            rack: kraft.rack.clone(),
            voters,
            heartbeat_interval,
            request_timeout: heartbeat_interval.max(Duration::from_millis(100)),
        };
        let stop = Rc::new(ShutdownSignal::new());
        let applied = Rc::clone(&view);
        let task = runtime::spawn(broker_session::run(
            session,
            move || applied.applied_offset(),
            Rc::clone(&stop),
        ));
        session_task = Some((task, stop));
        tasks.push(runtime::spawn(create_offsets_topic(
            Rc::clone(shard),
            Rc::clone(&view),
            kraft.offsets_topic_replication_factor,
            Rc::clone(&shutdown),
        )));
    }
    Ok(ClusterTasks {
        node,
        session: session_task,
        tasks,
        shutdown,
    })
}

/// Starts the shard's replication (every shard): partitions lead or follow as the published
/// metadata says, followers fetch, leaders ask the controller for ISR changes.
pub fn start_replication(setup: &ClusterSetup, shard: &Rc<Shard>) -> Result<(), ClusterStartError> {
    let kraft = &setup.kraft;
    let voters = voter_addresses(kraft)?;
    let settings = ReplicaSettings {
        replica_lag_time_max_ms: kraft.replica_lag_time_max_ms,
        replica_fetch_wait_max_ms: kraft.replica_fetch_wait_max_ms,
        replica_fetch_max_bytes: kraft.replica_fetch_max_bytes,
        replica_fetch_response_max_bytes: kraft.replica_fetch_response_max_bytes,
    };
    let manager = Rc::new(ReplicaManager::new(
        kraft.node_id,
        setup.incarnation,
        settings,
        Rc::new(ControllerLink::new(voters)),
        Rc::clone(&shard.partitions),
        Rc::clone(&shard.metadata_cache),
        Rc::new(GroupRoles(Rc::downgrade(shard))),
    ));
    if shard.replicas.set(Rc::clone(&manager)).is_ok() {
        manager.start();
    }
    Ok(())
}

/// After every change of the applied metadata: saves this broker's copy (when the placement
/// of its logs changed), has every shard apply the new image (logs placed, roles applied),
/// then publishes it (so a shard that sees a partition led here finds its log open and
/// leading). A voter also publishes leader changes.
async fn follow_applied(
    shard: Rc<Shard>,
    view: Rc<MetadataView>,
    node: Option<Rc<QuorumNode>>,
    cluster_id: String,
    shutdown: Rc<ShutdownSignal>,
) {
    let mut applied = view.subscribe();
    let mut last_published: Option<(Option<MetadataOffset>, Option<BrokerId>)> = None;
    // Publication order for the shards' caches (the empty image before it is 0).
    let mut version = 0u64;
    while !shutdown.is_triggered() {
        let offset = view.applied_offset();
        // Until the view has caught up with what this broker saved before it stopped,
        // nothing is saved (a topic missing from an older view is not deleted) nor
        // published (the shards keep the logs they placed by the saved copy).
        let caught_up = !shard.behind_copied(offset);
        let leader = node.as_ref().and_then(|n| n.status().leader);
        let metadata_moved = last_published.is_none_or(|(o, _)| o != offset);
        if caught_up && metadata_moved {
            // Cloned out of the borrowed view before the save awaits (an `Arc` per topic).
            let meta = view.get().clone();
            if let Err(e) = shard.save_applied_copy(&meta).await {
                tracing::error!(code = e.code, error = %e.message, "cannot save the cluster's metadata on this broker; retrying");
                futures_lite::future::or(runtime::sleep(Duration::from_secs(1)), shutdown.wait())
                    .await;
                continue;
            }
        }
        // The leader is polled every half second; the image (the metadata's maps, sharing
        // its topics) is only built when something changed.
        if caught_up && last_published != Some((offset, leader)) {
            version += 1;
            let image = Arc::new(shard_image(
                &view.get(),
                version,
                cluster_id.clone(),
                leader,
            ));
            // Applied first: a client told of a new leader finds it leading.
            if metadata_moved {
                shard.apply_everywhere(&image).await;
            }
            shard.publish_everywhere(image).await;
            last_published = Some((offset, leader));
            if let Some(o) = offset {
                shard.note_published(o);
            }
        }
        applied.borrow_and_update();
        let metadata_changed = async {
            let _ = applied.changed().await;
        };
        let leader_changed = async {
            match &node {
                Some(n) => n.changed(Duration::from_millis(500)).await,
                None => runtime::sleep(Duration::from_millis(500)).await,
            }
        };
        futures_lite::future::or(
            metadata_changed,
            futures_lite::future::or(leader_changed, shutdown.wait()),
        )
        .await;
    }
}

/// Creates `__consumer_offsets` through the controller once this broker is part of the
/// cluster (Kafka creates it on the first FindCoordinator): retried until some broker's
/// attempt committed. Only with `offsets.topic.replication.factor` live brokers, as Kafka:
/// a topic created with fewer replicas would stay under-replicated (nothing adds replicas to
/// a partition), so every group's offsets would live on fewer brokers than the operator asked
/// for. Until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE and the operator is told
/// why, every [`OFFSETS_TOPIC_WARN_EVERY`].
async fn create_offsets_topic(
    shard: Rc<Shard>,
    view: Rc<MetadataView>,
    wanted: i32,
    shutdown: Rc<ShutdownSignal>,
) {
    let mut warned: Option<std::time::Instant> = None;
    while !shutdown.is_triggered() {
        // Read and released before any await (the view is a borrowed cell).
        let (existing_rf, live) = {
            let meta = view.get();
            let existing_rf = meta
                .topic_by_name(crate::group::api::OFFSETS_TOPIC)
                .map(|t| t.partitions.iter().map(|p| p.replicas.len()).min());
            (
                existing_rf,
                meta.brokers().filter(|b| !b.fenced).count() as i32,
            )
        };
        if let Some(rf) = existing_rf {
            // Earlier releases capped the factor by the live brokers; such a topic cannot be
            // repaired until partition reassignment exists, so say so once.
            if let Some(rf) = rf.filter(|rf| (*rf as i32) < wanted) {
                tracing::warn!(
                    replicas = rf,
                    wanted,
                    "{} has fewer replicas than offsets.topic.replication.factor; it was created so by an earlier release",
                    crate::group::api::OFFSETS_TOPIC
                );
            }
            return;
        }
        if live >= wanted {
            // A stopping broker does not wait for the controller's answer (up to twice the
            // 30 s forward timeout when a voter hangs): the stop would outlast its
            // supervisor's patience.
            futures_lite::future::or(shard.ensure_offsets_topic(wanted), shutdown.wait()).await;
        } else if live > 0 && warned.is_none_or(|at| at.elapsed() >= OFFSETS_TOPIC_WARN_EVERY) {
            warned = Some(std::time::Instant::now());
            tracing::warn!(
                live,
                wanted,
                "{} is not created yet: offsets.topic.replication.factor={wanted} needs {wanted} live brokers, {live} registered; consumer groups answer COORDINATOR_NOT_AVAILABLE until then",
                crate::group::api::OFFSETS_TOPIC
            );
        }
        futures_lite::future::or(runtime::sleep(Duration::from_secs(1)), shutdown.wait()).await;
    }
}

/// How often a broker waiting for enough live brokers for `__consumer_offsets` says so.
const OFFSETS_TOPIC_WARN_EVERY: Duration = Duration::from_secs(30);

impl ClusterTasks {
    /// Stops the tasks, then the Raft node.
    pub async fn stop(self) {
        if let Some((task, stop)) = self.session {
            stop.trigger();
            task.await;
        }
        tracing::debug!("broker session ended");
        self.shutdown.trigger();
        for task in self.tasks {
            task.await;
        }
        tracing::debug!("cluster tasks ended; stopping the raft node");
        if let Some(node) = self.node {
            match Rc::try_unwrap(node) {
                Ok(node) => node.shutdown().await,
                Err(_) => tracing::warn!("the raft node is still in use at shutdown"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kraft(cluster_id: Option<&str>, node: i32) -> KraftConfig {
        let mut props = std::collections::BTreeMap::new();
        props.insert("node.id".to_string(), node.to_string());
        props.insert(
            "controller.quorum.voters".to_string(),
            "1@127.0.0.1:29091,2@127.0.0.1:29092".to_string(),
        );
        props.insert(
            "listeners".to_string(),
            format!("PLAINTEXT://127.0.0.1:1909{node},CONTROLLER://127.0.0.1:2909{node}"),
        );
        if let Some(id) = cluster_id {
            props.insert("cluster.id".to_string(), id.to_string());
        }
        KraftConfig::from_properties(&props)
            .expect("valid")
            .expect("cluster")
    }

    #[test]
    fn a_data_dir_is_claimed_once_and_another_cluster_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let id = claim_data_dir(dir.path(), &kraft(None, 1)).expect("claimed");
        assert_eq!(
            id,
            claim_data_dir(tempfile::tempdir().expect("t").path(), &kraft(None, 2))
                .expect("claimed"),
            "voters of one quorum derive the same id"
        );
        assert_eq!(
            claim_data_dir(dir.path(), &kraft(None, 1)).expect("again"),
            id
        );
        assert_eq!(
            claim_data_dir(dir.path(), &kraft(Some(&id), 1)).expect("same id"),
            id
        );
        let other = claim_data_dir(dir.path(), &kraft(Some("another-cluster"), 1))
            .expect_err("another cluster");
        assert!(other.to_string().contains("belongs to cluster"), "{other}");
        let node = claim_data_dir(dir.path(), &kraft(None, 2)).expect_err("another node");
        assert!(node.to_string().contains("node 1"), "{node}");
    }
}

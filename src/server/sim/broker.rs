//! One broker of a simulated cluster: the cluster-mode half of `serve`'s shard (one shard,
//! no mesh) on a simulated host, started, crashed (its tasks dropped, as `kill -9` does) and
//! started again on the same data directory.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use super::super::{accept, cluster_mode, connection, housekeeping_loop};
use crate::config::BrokerConfig;
use crate::metadata::MetadataImage;
use crate::runtime::fault::{FaultScope, PowerLoss, PowerLossReport};
use crate::runtime::sim::{self, net::host_ip, NodeId};
use crate::runtime::{self, ShardContext, Task, TcpListener};
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;

/// The client port of every simulated broker (each has a host of its own).
pub const CLIENT_PORT: u16 = 9092;
/// The controller port of every simulated voter.
pub const CONTROLLER_PORT: u16 = 9093;

/// Broker `id` lives on simulated node `id`.
pub fn node_of(id: i32) -> NodeId {
    NodeId(id as u32)
}

pub fn client_addr(id: i32) -> SocketAddr {
    SocketAddr::new(host_ip(node_of(id)), CLIENT_PORT)
}

/// `controller.quorum.voters` for brokers `ids`, each a voter.
pub fn voters(ids: &[i32]) -> String {
    ids.iter()
        .map(|&i| format!("{i}@{}:{CONTROLLER_PORT}", host_ip(node_of(i))))
        .collect::<Vec<_>>()
        .join(",")
}

/// The configuration of broker `id` (broker and controller) with `extra` properties set.
pub fn config(
    id: i32,
    data_dir: &Path,
    voters: &str,
    extra: &[(&str, &str)],
) -> Result<BrokerConfig, String> {
    let ip = host_ip(node_of(id));
    let mut c = BrokerConfig::default();
    c.set_data_dir(data_dir.to_path_buf());
    c.shards = 1;
    let listeners = format!("PLAINTEXT://{ip}:{CLIENT_PORT},CONTROLLER://{ip}:{CONTROLLER_PORT}");
    let advertised = format!("PLAINTEXT://{ip}:{CLIENT_PORT}");
    let id_text = id.to_string();
    let base = [
        ("node.id", id_text.as_str()),
        ("process.roles", "broker,controller"),
        ("controller.quorum.voters", voters),
        ("listeners", listeners.as_str()),
        ("advertised.listeners", advertised.as_str()),
        ("ringbroker.metrics.listen", "none"),
    ];
    for (k, v) in base.iter().chain(extra.iter()) {
        c.set(k, v).map_err(|e| format!("{k}={v}: {e}"))?;
    }
    Ok(c)
}

/// A broker of the simulation: its configuration and, while it runs, its task and shard.
pub struct SimBroker {
    pub id: i32,
    pub data_dir: PathBuf,
    config: BrokerConfig,
    running: Option<Running>,
    /// How many times it was started.
    pub starts: u32,
    /// Tracks what of the data directory is durable, for power losses (None: untracked).
    disk: Option<FaultScope>,
}

struct Running {
    task: Task<Result<(), String>>,
    stop: Rc<ShutdownSignal>,
    shard: Rc<RefCell<Option<Rc<Shard>>>>,
}

impl SimBroker {
    /// A broker of `config` on `data_dir`; `power`: its disk tracked, so that it can lose
    /// power. Untracked by default: with the tracking on, runs of one seed are not exact
    /// replays (about one in four differs by a task poll; the cause is not found yet).
    pub fn new(id: i32, data_dir: PathBuf, config: BrokerConfig, power: bool) -> SimBroker {
        let disk = power.then(|| FaultScope::install(&data_dir));
        SimBroker {
            id,
            data_dir,
            config,
            running: None,
            starts: 0,
            disk,
        }
    }

    pub fn is_up(&self) -> bool {
        self.running.is_some()
    }

    /// Starts the broker's process on its host.
    pub fn start(&mut self) {
        if self.running.is_some() {
            return;
        }
        self.starts += 1;
        let stop = Rc::new(ShutdownSignal::new());
        let shard = Rc::new(RefCell::new(None));
        let (config, out, signal, id) = (
            self.config.clone(),
            Rc::clone(&shard),
            Rc::clone(&stop),
            self.id,
        );
        let task = sim::spawn_on(node_of(self.id), async move {
            // As `serve` does before anything else.
            let result = match std::fs::create_dir_all(&config.data_dir) {
                Ok(()) => run(config, out, signal).await,
                Err(e) => Err(format!("cannot create {}: {e}", config.data_dir.display())),
            };
            if let Err(e) = &result {
                tracing::error!(broker = id, error = %e, "the simulated broker failed");
            }
            result
        });
        self.running = Some(Running { task, stop, shard });
    }

    /// Kills the process: every task of its host is dropped, its connections reset; its
    /// files keep what was written to them.
    pub fn crash(&mut self) {
        if let Some(r) = self.running.take() {
            r.shard.borrow_mut().take();
            sim::crash(node_of(self.id));
            drop(r.task);
        }
    }

    /// The host loses power: the process is killed and its data directory keeps only what
    /// was made durable (fsynced files, synced directory entries), or with `KeepSome` a
    /// seeded share of the rest too (write-back in any order).
    pub fn power_loss(&mut self, mode: PowerLoss) -> Result<PowerLossReport, String> {
        self.crash();
        let disk = self
            .disk
            .as_ref()
            .ok_or(format!("broker {}: its disk is not tracked", self.id))?;
        disk.power_loss(mode)
            .map_err(|e| format!("broker {}: power loss: {e}", self.id))
    }

    /// SIGSTOP: the process keeps its memory and connections, and runs nothing.
    pub fn pause(&self) {
        sim::pause(node_of(self.id));
    }

    /// SIGCONT.
    pub fn resume(&self) {
        sim::resume(node_of(self.id));
    }

    /// Stops the broker as SIGTERM does; returns what its run returned.
    pub async fn stop(&mut self) -> Result<(), String> {
        let Some(r) = self.running.take() else {
            return Ok(());
        };
        r.stop.trigger();
        let result = r.task.await;
        r.shard.borrow_mut().take();
        result
    }

    /// The running broker's shard (its partitions, for the checks), once started.
    pub fn shard(&self) -> Option<Rc<Shard>> {
        self.running.as_ref()?.shard.borrow().clone()
    }
}

/// The broker's process: start-up as `serve` does it in cluster mode, then serving until
/// `stop`, then the orderly stop.
async fn run(
    config: BrokerConfig,
    shard_out: Rc<RefCell<Option<Rc<Shard>>>>,
    stop: Rc<ShutdownSignal>,
) -> Result<(), String> {
    let setup = cluster_mode::prepare(&config)
        .map_err(|e| e.to_string())?
        .ok_or("not a cluster configuration")?;
    crate::log::tail_cache::set_shard_budget(config.tail_cache_bytes);
    let listen = config.listen;
    let (shard, inboxes, _recovery) = Shard::start(ShardContext::single(), config)
        .await
        .map_err(|e| e.to_string())?;
    shard.serve_mesh(inboxes);
    shard.publish_offline_partitions().await;
    shard
        .metadata_cache
        .publish(Arc::new(MetadataImage::empty(setup.cluster_id.clone())));
    cluster_mode::start_replication(&setup, &shard).map_err(|e| e.to_string())?;
    let tasks = cluster_mode::start(&setup, &shard)
        .await
        .map_err(|e| e.to_string())?;
    *shard_out.borrow_mut() = Some(Rc::clone(&shard));
    let listener =
        TcpListener::bind(listen, 1).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let shutdown = Rc::new(ShutdownSignal::new());
    let accept_task = {
        let (shard, shutdown) = (Rc::clone(&shard), Rc::clone(&shutdown));
        runtime::spawn(async move {
            while let Some(stream) =
                accept::accept_until_shutdown(&listener, &shutdown, "kafka").await
            {
                let peer = stream
                    .peer_addr()
                    .map_or_else(|_| "unknown".to_string(), |a| a.to_string());
                let (shard, shutdown) = (Rc::clone(&shard), Rc::clone(&shutdown));
                runtime::spawn_detached(connection::serve(shard, stream, peer, shutdown));
            }
        })
    };
    {
        let shutdown = Rc::clone(&shutdown);
        shard
            .groups
            .spawn_ticker(shard.group_host(), move || shutdown.is_triggered());
    }
    let housekeeping = housekeeping_loop::spawn(Rc::clone(&shard), Rc::clone(&shutdown));
    stop.wait().await;
    shutdown.trigger();
    shard.begin_stop();
    shard.groups.close();
    if let Some(replicas) = shard.replicas.get() {
        replicas.stop();
    }
    tasks.stop().await;
    accept_task.await;
    housekeeping.await;
    shard.partitions.close_all().await;
    Ok(())
}

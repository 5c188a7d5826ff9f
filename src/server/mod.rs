//! `ringbroker serve`: the broker process.
//!
//! Before any shard starts: take the data directory's lock and make sure nothing else listens
//! on the port (glommio binds with SO_REUSEPORT, which would otherwise let a second broker
//! share the port silently). Then one shard per core, each with its own listener on the same
//! address; a connection lives on the shard that accepted it. SIGTERM/SIGINT stop accepting,
//! let in-flight requests finish, close every log cleanly and exit 0.

pub mod accept;
pub mod cluster_mode;
pub mod connection;
pub mod connection_limits;
mod connection_timeouts;
pub mod handlers;
mod housekeeping_loop;
pub mod metrics_endpoint;
mod refusal_log;
mod response_writer;
pub mod sim;
mod startup_log;
pub mod stop;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use self::connection_limits::ConnectionLimits;
use self::refusal_log::RefusalLog;
use self::startup_log::StartupInfo;
use self::stop::{Phase, Progress, StopCause, StopSupervisor};
use crate::config::BrokerConfig;

use crate::runtime::{self, ShardContext, ShardsConfig, TcpListener};

use crate::shard::messages::MeshMessage;
use crate::shard::Shard;
use crate::util::shutdown::ShutdownSignal;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot use data directory {dir}: {source}")]
    DataDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("data directory {0} is in use by another ringbroker process (lock file {0}/.lock)")]
    DataDirInUse(PathBuf),
    #[error("cannot listen on {addr}: {source} (is another broker running on this port?)")]
    PortInUse {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error(transparent)]
    Runtime(#[from] runtime::RuntimeError),
    #[error(transparent)]
    Metrics(#[from] metrics_endpoint::EndpointError),
    #[error("shard {shard} failed: {reason}")]
    Shard { shard: usize, reason: String },
    #[error("stopped after a failure: {0}")]
    Stopped(String),
    #[error(transparent)]
    Cluster(#[from] cluster_mode::ClusterStartError),
}

/// The signals that stop the broker cleanly.
const STOP_SIGNALS: [i32; 2] = [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT];
/// How long shutdown waits for connections to finish their in-flight requests. Long polls
/// and acks=all waits are answered at once when the broker stops, so this is for clients
/// slow to read their answers; it stays well inside `ringbroker.shutdown.timeout.ms`.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Holds an exclusive `flock` on `<data dir>/.lock` for the life of the process.
struct DataDirLock {
    _file: std::fs::File,
}

impl DataDirLock {
    fn acquire(dir: &Path) -> Result<DataDirLock, ServerError> {
        use std::os::fd::AsRawFd;
        std::fs::create_dir_all(dir).map_err(|source| ServerError::DataDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(".lock"))
            .map_err(|source| ServerError::DataDir {
                dir: dir.to_path_buf(),
                source,
            })?;
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(ServerError::DataDirInUse(dir.to_path_buf()));
        }
        Ok(DataDirLock { _file: file })
    }
}

/// Binds the address once without SO_REUSEPORT: this fails if any socket (another broker
/// included) already listens there. Returns the address with the real port (for port 0).
///
/// Retries for a moment: after a broker is SIGKILLed the kernel releases its listening
/// sockets only once the io_uring teardown finished (a few hundred ms), and a supervisor
/// restarting it right away should not fail on that.
fn check_port_free(addr: SocketAddr) -> Result<SocketAddr, ServerError> {
    let deadline = std::time::Instant::now() + PORT_RELEASE_WAIT;
    let probe = loop {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => break l,
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(source) => return Err(ServerError::PortInUse { addr, source }),
        }
    };
    probe
        .local_addr()
        .map_err(|source| ServerError::PortInUse { addr, source })
}

/// How long [`check_port_free`] waits for a port still held by a process that just died.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(2);

/// Runs the broker until SIGTERM or SIGINT.
pub fn serve(mut config: BrokerConfig) -> Result<(), ServerError> {
    let started = std::time::Instant::now();
    let _lock = DataDirLock::acquire(&config.data_dir)?;
    let _fsync_failpoint = fsync_failpoint(&config.data_dir);
    // Cluster mode is checked (and the data dir claimed) before anything listens.
    let cluster = cluster_mode::prepare(&config)?.map(Arc::new);
    let listen = check_port_free(config.listen)?;
    // Held (bound, never listening) until the process ends: the shards listen only after
    // their start-up, in shard order, and meanwhile an outgoing connection of this host must
    // not take the port as its source port (seen with port 0 under many connections).
    let _port_hold = TcpListener::hold_port(listen).map_err(|source| ServerError::PortInUse {
        addr: listen,
        source,
    })?;
    if config.listen.port() == 0 && config.advertised_follows_listeners() {
        config.advertised_port = listen.port();
    }
    config.listen = listen;
    // Resolved once, so that every shard gets the same limit and the log says which.
    config.produce_memory_max_bytes = Some(config.produce_memory_limit());
    let metrics = metrics_endpoint::reserve(&config)?;
    config.metrics_listen = metrics.as_ref().map(|(addr, _)| *addr);
    let metrics = Arc::new(metrics.map(|(_, reserved)| reserved));
    let shards = ShardsConfig {
        pin: config.pin_shards,
        ..ShardsConfig::unpinned(config.shards)
    };
    let progress = Arc::new(Progress::new(shards.shards));
    let stop = Arc::new(AtomicBool::new(false));
    let supervisor = StopSupervisor::start(
        &STOP_SIGNALS,
        Arc::clone(&stop),
        Duration::from_millis(config.shutdown_timeout_ms),
        Arc::clone(&progress),
    )
    .map_err(ServerError::Signals)?;
    tracing::info!(
        listen = %listen,
        data_dir = %config.data_dir.display(),
        shards = shards.shards,
        pinned = shards.pin,
        node_id = config.node_id,
        produce_memory_per_shard = config.produce_memory_limit(),
        "starting"
    );
    // The "listening on" line is printed by the last shard to bind: from then on every shard
    // accepts connections (scripts and tests wait for this line).
    let banner = format!(
        "ringbroker {} listening on {} (advertised {}:{}), data dir {}, {} shards",
        env!("CARGO_PKG_VERSION"),
        listen,
        config.advertised_host,
        config.advertised_port,
        config.data_dir.display(),
        shards.shards
    );
    let ready = Arc::new(Ready {
        shards: shards.shards,
        bound: AtomicUsize::new(0),
        settled: (0..shards.shards)
            .map(|_| std::sync::atomic::AtomicBool::new(false))
            .collect(),
        banner,
        startup: StartupInfo::new(&config, started),
    });
    let limits = ConnectionLimits::new(
        config.max_connections,
        config.max_connections_per_ip,
        &config.max_connections_per_ip_overrides,
    );
    stop_on_panic();
    let started_shards = Started {
        stop,
        ready,
        limits,
        cluster,
        metrics,
        progress,
    };
    let results = runtime::run_shards(&shards, move |ctx: ShardContext<MeshMessage>| {
        let id = ctx.id();
        async move {
            let progress = Arc::clone(&started_shards.progress);
            let ready = Arc::clone(&started_shards.ready);
            let result = shard_main(ctx, config, started_shards).await;
            ready.settle(id);
            progress.set_phase(id, Phase::Stopped);
            if let Err(reason) = &result {
                // Never half alive: the other shards stop as on SIGTERM, and the process
                // exits non-zero. The supervisor logs the first cause only.
                stop::request_stop(format!("shard {id} failed: {reason}"));
            }
            result
        }
    })?;
    for (shard, r) in results.into_iter().enumerate() {
        r.map_err(|reason| ServerError::Shard { shard, reason })?;
    }
    // Every shard stopped cleanly; a failure elsewhere (a panicked thread) still fails.
    if let Some(StopCause::Failure(reason)) = supervisor.cause() {
        return Err(ServerError::Stopped(reason));
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// What every shard starts with, besides its context and the configuration.
#[derive(Clone)]
struct Started {
    /// Set on the first stop cause (signal handler or supervisor).
    stop: Arc<AtomicBool>,
    ready: Arc<Ready>,
    limits: Arc<ConnectionLimits>,
    cluster: Option<Arc<cluster_mode::ClusterSetup>>,
    /// The metrics port bound before the shards started (shard 0 serves it).
    metrics: Arc<Option<metrics_endpoint::Reserved>>,
    progress: Arc<Progress>,
}

/// A panic on any thread is logged and stops the broker (the panicking shard is gone; the
/// others close their logs cleanly), so a supervisor sees the process exit, non-zero.
fn stop_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed").to_string();
        tracing::error!(
            thread = %name,
            panic = %info,
            "a broker thread panicked; stopping the broker"
        );
        previous(info);
        stop::request_stop(format!("thread {name} panicked: {info}"));
    }));
}

/// Test hooks: `RINGBROKER_FAILPOINT=shard-start:N` makes shard N fail to start,
/// `shard-panic:N` makes it panic once it serves, `shard-hold:N` holds its start-up until the
/// broker stops, and `stop-hang:N` makes its stop never finish, so tests can check how the
/// process ends.
fn failpoint(kind: &str, shard: usize) -> bool {
    std::env::var("RINGBROKER_FAILPOINT")
        .is_ok_and(|v| v.split(',').any(|f| f == format!("{kind}:{shard}")))
}

/// Test hook `RINGBROKER_FAILPOINT=fsync-eio:<topic>-<partition>`: every fsync of that
/// partition's segment files fails with EIO (through the fault layer, which then tracks only
/// that directory), so tests see a storage failure end to end.
fn fsync_failpoint(data_dir: &std::path::Path) -> Option<crate::runtime::fault::FaultScope> {
    use crate::runtime::fault::{FaultRule, FaultScope, FileOp};
    let value = std::env::var("RINGBROKER_FAILPOINT").ok()?;
    let partition = value
        .split(',')
        .find_map(|f| f.strip_prefix("fsync-eio:"))?;
    let scope = FaultScope::install(&data_dir.join(partition));
    scope.add_rule(
        FaultRule::on(FileOp::Fsync)
            .matching(".log")
            .errno(libc::EIO),
    );
    tracing::warn!(
        partition,
        "test failpoint: every fsync of this partition's segments fails with EIO"
    );
    Some(scope)
}

/// The connections of one shard that are still being served; shutdown waits for none.
#[derive(Default)]
struct OpenConnections {
    count: std::cell::Cell<usize>,
    none_left: crate::util::notify::Notify,
}

impl OpenConnections {
    fn opened(&self) {
        self.count.set(self.count.get() + 1);
    }

    fn closed(&self) {
        self.count.set(self.count.get().saturating_sub(1));
        if self.count.get() == 0 {
            self.none_left.notify();
        }
    }

    fn count(&self) -> usize {
        self.count.get()
    }

    /// Resolves once no connection is open.
    async fn all_closed(&self) {
        while self.count.get() > 0 {
            self.none_left.notified().await;
        }
    }
}

/// How often a shard looks whether the shards before it listen (startup only).
const LISTEN_TURN_POLL: Duration = Duration::from_millis(2);

/// Counts shards whose listener is bound; the last one announces the broker.
struct Ready {
    shards: usize,
    bound: AtomicUsize,
    /// Per shard: past its start-up (listening, stopped before listening, or failed). A shard
    /// in start-up may still ask the others (metadata, topic creation), so none ends before
    /// every shard is settled: one that stopped early used to leave another waiting for ever
    /// on a reply it would never send.
    settled: Vec<std::sync::atomic::AtomicBool>,
    banner: String,
    /// The startup line's settings and every shard's recovery results.
    startup: StartupInfo,
}

impl Ready {
    /// Resolves `true` once every shard before `shard` listens (each takes its turn with
    /// [`Ready::shard_bound`]), or `false` if the broker is stopping meanwhile (a signal, or
    /// another shard failed: a knock-on, not a failure of this shard).
    async fn wait_turn_to_listen(&self, shard: usize, stop: &AtomicBool) -> bool {
        while self.bound.load(Ordering::Acquire) < shard {
            if stop.load(Ordering::Acquire) {
                return false;
            }
            runtime::sleep(LISTEN_TURN_POLL).await;
        }
        !stop.load(Ordering::Acquire)
    }

    fn settle(&self, shard: usize) {
        if let Some(s) = self.settled.get(shard) {
            s.store(true, Ordering::Release);
        }
    }

    /// Resolves once every shard is past its start-up (bounded by the stop's deadline).
    async fn all_settled(&self) {
        while !self.settled.iter().all(|s| s.load(Ordering::Acquire)) {
            runtime::sleep(LISTEN_TURN_POLL).await;
        }
    }

    fn shard_bound(&self) {
        if self.bound.fetch_add(1, Ordering::AcqRel) + 1 == self.shards {
            use std::io::Write;
            // Before the banner: whoever waits for `listening on` finds the startup line
            // already in the log.
            self.startup.log();
            println!("{}", self.banner);
            let _ = std::io::stdout().flush();
        }
    }
}

async fn shard_main(
    ctx: ShardContext<MeshMessage>,
    config: BrokerConfig,
    started: Started,
) -> Result<(), String> {
    let Started {
        stop,
        ready,
        limits,
        cluster,
        metrics,
        progress,
    } = started;
    let listen = config.listen;
    if failpoint("shard-start", ctx.id()) {
        return Err("failpoint shard-start".to_string());
    }
    // Before the logs open: their caches share this budget.
    crate::log::tail_cache::set_shard_budget(config.tail_cache_bytes);
    let (shard, inboxes, recovery) = Shard::start(ctx, config).await.map_err(|e| e.to_string())?;
    if failpoint("shard-hold", shard.id) {
        // A start-up that takes long (a large recovery) until the broker is told to stop.
        while !stop.load(Ordering::Acquire) {
            runtime::sleep(LISTEN_TURN_POLL).await;
        }
    }
    ready.startup.add_shard(&recovery);
    shard.serve_mesh(inboxes);
    shard.publish_offline_partitions().await;
    // In cluster mode the controller creates it (server/cluster_mode.rs). Not while stopping:
    // the other shards may be gone.
    if cluster.is_none() && !stop.load(Ordering::Acquire) {
        shard.ensure_offsets_topic(-1).await;
    }
    let mut cluster_tasks = None;
    if let Some(setup) = &cluster {
        // Answers name the cluster from the start; brokers and topics come with the first
        // publication of the applied metadata log.
        shard
            .metadata_cache
            .publish(Arc::new(crate::metadata::MetadataImage::empty(
                setup.cluster_id.clone(),
            )));
        cluster_mode::start_replication(setup, &shard).map_err(|e| e.to_string())?;
        if shard.id == 0 {
            let tasks = cluster_mode::start(setup, &shard)
                .await
                .map_err(|e| e.to_string())?;
            cluster_tasks = Some(tasks);
        }
    }
    // In shard order: the steering program picks listeners by their place in the group.
    progress.set_phase(shard.id, Phase::WaitingToListen);
    if !ready.wait_turn_to_listen(shard.id, &stop).await {
        // Stopped during start-up (a signal, or another shard failed): nothing was served,
        // the logs close as on any stop.
        tracing::info!(shard = shard.id, "stopped before listening");
        ready.settle(shard.id);
        progress.set_phase(shard.id, Phase::StoppingTasks);
        shard.begin_stop();
        if let Some(replicas) = shard.replicas.get() {
            replicas.stop();
        }
        if let Some(tasks) = cluster_tasks {
            tasks.stop().await;
        }
        ready.all_settled().await;
        progress.set_phase(shard.id, Phase::ClosingLogs);
        shard.partitions.close_all().await;
        return Ok(());
    }
    let listener = TcpListener::bind(listen, ready.shards)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let metrics_listener = metrics_endpoint::bind(shard.id, (*metrics).as_ref());
    ready.shard_bound();
    ready.settle(shard.id);
    progress.set_phase(shard.id, Phase::Serving);
    if failpoint("shard-panic", shard.id) {
        runtime::spawn_detached(async { panic!("failpoint shard-panic") });
    }
    let shutdown = Rc::new(ShutdownSignal::new());
    if let Some(l) = metrics_listener {
        metrics_endpoint::spawn(l, Rc::clone(&shard), Rc::clone(&shutdown));
    }
    let connections = Rc::new(OpenConnections::default());

    let accept_task = {
        let shard = Rc::clone(&shard);
        let shutdown = Rc::clone(&shutdown);
        let connections = Rc::clone(&connections);
        let progress = Arc::clone(&progress);
        runtime::spawn(async move {
            let refusals = RefusalLog::default();
            while let Some(stream) =
                accept::accept_until_shutdown(&listener, &shutdown, "kafka").await
            {
                let peer_addr = stream.peer_addr().ok();
                let peer = peer_addr
                    .map(|a| a.to_string())
                    .unwrap_or_else(|| "unknown".to_string());
                let ip = peer_addr.map_or(std::net::Ipv4Addr::UNSPECIFIED.into(), |a| a.ip());
                let admitted = match limits.admit(ip) {
                    Ok(admitted) => admitted,
                    Err(refusal) => {
                        // Kafka closes such a connection without a word; so does dropping it.
                        refusals.record(&refusal, &peer);
                        drop(stream);
                        continue;
                    }
                };
                connections.opened();
                progress.set_connections(shard.id, connections.count());
                let shard = Rc::clone(&shard);
                let shutdown = Rc::clone(&shutdown);
                let connections = Rc::clone(&connections);
                let progress = Arc::clone(&progress);
                runtime::spawn_detached(async move {
                    let id = shard.id;
                    connection::serve(shard, stream, peer, shutdown).await;
                    connections.closed();
                    progress.set_connections(id, connections.count());
                    drop(admitted);
                });
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

    // The signal wakes this shard through its own ring; the flag covers a signal that came
    // before the listener was registered.
    let mut signals = runtime::SignalListener::register(&STOP_SIGNALS)
        .map_err(|e| format!("cannot listen for signals: {e}"))?;
    if !stop.load(Ordering::Acquire) {
        if let Err(e) = signals.wait().await {
            tracing::error!(shard = shard.id, error = %e, "lost the signal listener; stopping");
        }
    }
    tracing::info!(shard = shard.id, "shutting down: no new connections");
    progress.set_phase(shard.id, Phase::StoppingTasks);
    shutdown.trigger();
    shard.begin_stop();
    shard.groups.close();
    if let Some(replicas) = shard.replicas.get() {
        replicas.stop();
    }
    if let Some(tasks) = cluster_tasks {
        tasks.stop().await;
    }
    tracing::debug!(shard = shard.id, "cluster tasks stopped");
    accept_task.await;
    housekeeping.await;
    tracing::debug!(shard = shard.id, "waiting for open connections to finish");
    progress.set_phase(shard.id, Phase::Draining);
    let drained = connections.all_closed();
    if futures_lite::future::or(
        async {
            drained.await;
            true
        },
        async {
            runtime::sleep(DRAIN_TIMEOUT).await;
            false
        },
    )
    .await
    {
        tracing::debug!(shard = shard.id, "every connection closed");
    } else {
        tracing::warn!(
            shard = shard.id,
            open = connections.count(),
            "connections still open after {DRAIN_TIMEOUT:?}; closing the logs under them"
        );
    }
    // A shard still starting may need this one's answers (it stops at its turn to listen).
    ready.all_settled().await;
    progress.set_phase(shard.id, Phase::ClosingLogs);
    if failpoint("stop-hang", shard.id) {
        // A stop that never finishes: the deadline (or a second signal) must end it.
        std::future::pending::<()>().await;
    }
    shard.partitions.close_all().await;
    Ok(())
}

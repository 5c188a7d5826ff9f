//! The runtime: the only module that imports glommio.
//!
//! Everything else in ringbroker reads as plain single-threaded async Rust: it spawns tasks,
//! sleeps, talks to other shards through [`ShardContext`] and does file I/O through [`File`]. If
//! the runtime is ever swapped (tokio-uring, monoio), this file is what changes.
//!
//! Shards: one glommio `LocalExecutor` per shard, each with its own io_uring. `serve` pins
//! each shard to a core of its own only with `ringbroker.pin.shards=true` (default: unpinned,
//! the OS places the threads); tests run unpinned because the CI machine has only two cores
//! and several brokers may run at once.
//!
//! Memory: glommio registers `io_memory` bytes per executor with io_uring, which counts against
//! `RLIMIT_MEMLOCK` (8 MiB on the machines we run on, shared by every executor of the user), so
//! the default here is small. Direct segment writes keep their own pool of aligned buffers
//! (`buffer_pool.rs`), on the heap: the registered pool is only used by glommio internals.

mod buffer_pool;
pub mod durable_file;
pub mod fault;
mod file;
mod file_io;
pub mod port_steering;
pub mod raft_runtime;
pub mod sim;
pub mod stall;
pub mod stream_halves;
pub mod write_buffer;

pub use file::{remove_file, rename, sync_dir, File};
pub use file_io::FileIo;
pub use write_buffer::{WriteBuffer, WrittenBuffer};

use std::future::Future;
use std::io;
use std::time::Duration;

use glommio::channels::channel_mesh::{MeshBuilder, Receivers, Senders};
use glommio::{LocalExecutorBuilder, LocalExecutorPoolBuilder, Placement, PoolPlacement};

/// Registered I/O memory per executor. glommio needs at least 64 KiB. It registers this buffer
/// with each of the executor's three rings, so an unprivileged user needs about 1.5 MiB of
/// RLIMIT_MEMLOCK per executor (8 MiB holds five; beyond, glommio skips the registration with a
/// warning); with CAP_IPC_LOCK (root) nothing is counted. Measured: tuning/README.md.
pub const DEFAULT_IO_MEMORY: usize = 512 * 1024;

/// Errors starting or joining shards.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "could not start the shard executors: {0} (is `ulimit -l` at least 512 KiB per shard?)"
    )]
    Start(io::Error),
    #[error("shard {shard} stopped abnormally: {reason}")]
    ShardFailed { shard: usize, reason: String },
    #[error("shard {shard} could not join the channel mesh")]
    MeshJoin { shard: usize },
}

/// A message could not be delivered to another shard.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SendError {
    #[error("shard {shard} is not reachable through the channel mesh")]
    Unreachable { shard: usize },
}

/// How to start the shards.
#[derive(Debug, Clone)]
pub struct ShardsConfig {
    /// Number of shards (executors). At least 1.
    pub shards: usize,
    /// Pin shard i to CPU i (serving and benches) or let the OS place threads (tests).
    pub pin: bool,
    /// io_uring registered memory per executor, bytes.
    pub io_memory: usize,
    /// Capacity of each shard-to-shard channel, in messages. A full channel makes the sender
    /// wait: that is the backpressure between shards.
    pub mesh_capacity: usize,
    /// Thread name prefix.
    pub name: String,
}

impl ShardsConfig {
    pub fn unpinned(shards: usize) -> Self {
        ShardsConfig {
            shards: shards.max(1),
            pin: false,
            io_memory: DEFAULT_IO_MEMORY,
            mesh_capacity: 1024,
            name: "ringbroker-shard".to_string(),
        }
    }

    pub fn pinned(shards: usize) -> Self {
        ShardsConfig {
            pin: true,
            ..ShardsConfig::unpinned(shards)
        }
    }
}

/// What a shard knows about itself and how it reaches the others.
///
/// Owned by one shard. Messages to other shards go through glommio's channel mesh; a shard
/// never sends to itself through the mesh (it calls its own code directly).
pub struct ShardContext<M: Send + 'static> {
    id: usize,
    count: usize,
    /// `None` for a broker of one shard without a mesh ([`ShardContext::single`]).
    mesh: Option<(Senders<M>, Receivers<M>)>,
}

impl<M: Send + 'static> ShardContext<M> {
    /// The context of a broker's only shard, with no peers to reach (a simulated broker).
    pub fn single() -> ShardContext<M> {
        ShardContext {
            id: 0,
            count: 1,
            mesh: None,
        }
    }

    pub fn id(&self) -> usize {
        self.id
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Sends `msg` to shard `to`, waiting while that channel is full. Fails if the peer has
    /// stopped or `to` is this shard.
    pub async fn send_to(&self, to: usize, msg: M) -> Result<(), SendError> {
        if to == self.id || to >= self.count {
            return Err(SendError::Unreachable { shard: to });
        }
        let Some((senders, _)) = &self.mesh else {
            return Err(SendError::Unreachable { shard: to });
        };
        senders
            .send_to(to, msg)
            .await
            .map_err(|_| SendError::Unreachable { shard: to })
    }

    /// Takes the inbound channels, one per peer shard. Call once; each [`Inbox`] is usually
    /// drained by its own task.
    pub fn take_inboxes(&mut self) -> Vec<Inbox<M>> {
        let Some((_, receivers)) = &mut self.mesh else {
            return Vec::new();
        };
        receivers
            .streams()
            .into_iter()
            .map(|(from, receiver)| Inbox { from, receiver })
            .collect()
    }
}

/// Messages from one peer shard.
pub struct Inbox<M: Send + 'static> {
    from: usize,
    receiver: glommio::channels::shared_channel::ConnectedReceiver<M>,
}

impl<M: Send + 'static> Inbox<M> {
    /// The shard these messages come from.
    pub fn from(&self) -> usize {
        self.from
    }

    /// The next message, or `None` once the peer has stopped.
    pub async fn recv(&self) -> Option<M> {
        self.receiver.recv().await
    }
}

/// Starts `config.shards` executors joined by a full channel mesh, runs `shard_main` on each
/// and waits for all of them. Returns each shard's result in shard order.
pub fn run_shards<M, G, F, T>(config: &ShardsConfig, shard_main: G) -> Result<Vec<T>, RuntimeError>
where
    M: Send + 'static,
    G: FnOnce(ShardContext<M>) -> F + Clone + Send + 'static,
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let count = config.shards.max(1);
    let placement = if config.pin {
        PoolPlacement::MaxSpread(count, None)
    } else {
        PoolPlacement::Unbound(count)
    };
    let mesh: MeshBuilder<M, _> = MeshBuilder::full(count, config.mesh_capacity.max(1));
    let handles = LocalExecutorPoolBuilder::new(placement)
        .name(&config.name)
        .io_memory(config.io_memory)
        .on_all_shards(move || async move {
            let (senders, receivers) = mesh.join().await.map_err(|_| ())?;
            let ctx = ShardContext {
                id: senders.peer_id(),
                count,
                mesh: Some((senders, receivers)),
            };
            let id = ctx.id;
            Ok::<(usize, T), ()>((id, stall::Timed::new(shard_main(ctx)).await))
        })
        .map_err(|e| RuntimeError::Start(e.into()))?;
    let mut results: Vec<Option<T>> = (0..count).map(|_| None).collect();
    for (index, joined) in handles.join_all().into_iter().enumerate() {
        match joined {
            Ok(Ok((id, value))) => results[id.min(count - 1)] = Some(value),
            Ok(Err(())) => return Err(RuntimeError::MeshJoin { shard: index }),
            Err(e) => {
                return Err(RuntimeError::ShardFailed {
                    shard: index,
                    reason: e.to_string(),
                })
            }
        }
    }
    results
        .into_iter()
        .enumerate()
        .map(|(shard, r)| {
            r.ok_or(RuntimeError::ShardFailed {
                shard,
                reason: "no result".to_string(),
            })
        })
        .collect()
}

/// Runs one future on a fresh, unpinned executor in the current thread. For tools and tests.
pub fn block_on<T>(future: impl Future<Output = T>) -> Result<T, RuntimeError> {
    let executor = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(DEFAULT_IO_MEMORY)
        .make()
        .map_err(|e| RuntimeError::Start(e.into()))?;
    Ok(executor.run(future))
}

/// A task handle: awaiting it yields the task's output; dropping it cancels the task.
pub struct Task<T>(TaskInner<T>);

enum TaskInner<T> {
    Glommio(glommio::Task<T>),
    Sim(async_task::Task<T>),
}

impl<T> Task<T> {
    fn sim(task: async_task::Task<T>) -> Task<T> {
        Task(TaskInner::Sim(task))
    }

    /// Lets the task run to completion on its own.
    pub fn detach(self) {
        match self.0 {
            TaskInner::Glommio(t) => {
                t.detach();
            }
            TaskInner::Sim(t) => t.detach(),
        }
    }
}

impl<T> Future for Task<T> {
    type Output = T;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<T> {
        match &mut self.0 {
            TaskInner::Glommio(t) => std::pin::Pin::new(t).poll(cx),
            TaskInner::Sim(t) => std::pin::Pin::new(t).poll(cx),
        }
    }
}

/// Spawns a task on the current shard (its polls are timed: [`stall`]).
#[track_caller]
pub fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> Task<T> {
    if sim::active() {
        return Task(TaskInner::Sim(sim::spawn(future)));
    }
    Task(TaskInner::Glommio(glommio::spawn_local(stall::Timed::new(
        future,
    ))))
}

/// Spawns a task on the current shard that runs to completion on its own.
#[track_caller]
pub fn spawn_detached(future: impl Future<Output = ()> + 'static) {
    spawn(future).detach();
}

/// Runs `work` on the shard's blocking thread pool (blocking file-system calls, large
/// decompressions) so the reactor keeps serving; resolves with its result. In a simulation it
/// runs inline (nothing else shares the thread's time that a simulation measures).
pub async fn spawn_blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    if sim::active() {
        return work();
    }
    glommio::executor().spawn_blocking(work).await
}

/// Waits for `duration` on the current shard's timer wheel.
pub async fn sleep(duration: Duration) {
    if sim::active() {
        return sim::sleep(duration).await;
    }
    glommio::timer::sleep(duration).await;
}

/// `future`'s output, or `None` if `duration` passes first.
pub async fn timeout<T>(duration: Duration, future: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(future.await) }, async {
        sleep(duration).await;
        None
    })
    .await
}

/// Lets other tasks on this shard run if this one has used its time slice (in a simulation:
/// always, so that long loops interleave with the rest).
pub async fn yield_if_needed() {
    if sim::active() {
        return sim::yield_now().await;
    }
    glommio::yield_if_needed().await;
}

/// Wall-clock milliseconds since the Unix epoch, as Kafka timestamps are (in a simulation:
/// its start date plus virtual time).
pub fn now_ms() -> i64 {
    if sim::active() {
        return sim::start_unix_ms() + sim::now().as_millis() as i64;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A point of monotonic time: the process's clock, or a simulation's virtual one. Decisions
/// (deadlines, timeouts, lag) use this; measurements reported as metrics may use
/// `std::time::Instant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

static PROCESS_START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

impl Instant {
    pub fn now() -> Instant {
        if sim::active() {
            return Instant(sim::now());
        }
        let base = *PROCESS_START.get_or_init(std::time::Instant::now);
        Instant(base.elapsed())
    }

    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        self.0.checked_add(d).map(Instant)
    }
}

impl std::ops::Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d))
    }
}

impl std::ops::AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d);
    }
}

impl std::ops::Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(d))
    }
}

impl std::ops::Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, other: Instant) -> Duration {
        self.0.saturating_sub(other.0)
    }
}

/// A TCP connection; read and write it with the `futures_lite` I/O traits.
pub struct TcpStream(StreamInner);

enum StreamInner {
    Glommio(glommio::net::TcpStream),
    Sim(sim::net::SimStream),
}

impl TcpStream {
    fn from_glommio(stream: glommio::net::TcpStream) -> TcpStream {
        TcpStream(StreamInner::Glommio(stream))
    }

    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.0 {
            StreamInner::Glommio(s) => Ok(s.peer_addr()?),
            StreamInner::Sim(s) => s.peer_addr(),
        }
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.0 {
            StreamInner::Glommio(s) => Ok(s.local_addr()?),
            StreamInner::Sim(s) => s.local_addr(),
        }
    }
}

impl futures_lite::AsyncRead for TcpStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut [u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_read(cx, buf),
        }
    }

    fn poll_read_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &mut [io::IoSliceMut<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_read_vectored(cx, bufs),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_read_vectored(cx, bufs),
        }
    }
}

impl futures_lite::AsyncWrite for TcpStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_flush(cx),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        match &mut self.0 {
            StreamInner::Glommio(s) => std::pin::Pin::new(s).poll_close(cx),
            StreamInner::Sim(s) => std::pin::Pin::new(s).poll_close(cx),
        }
    }
}

/// Opens a TCP connection (no Nagle: requests are small and wait for their answers), giving
/// up after `timeout`.
pub async fn connect(addr: std::net::SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    if sim::active() {
        return Ok(TcpStream(StreamInner::Sim(
            sim::net::connect(addr, timeout).await?,
        )));
    }
    let stream = glommio::net::TcpStream::connect_timeout(addr, timeout).await?;
    stream.set_nodelay(true)?;
    Ok(TcpStream(StreamInner::Glommio(stream)))
}

/// A TCP socket for `addr`'s family with SO_REUSEADDR, not yet bound.
fn tcp_socket(addr: std::net::SocketAddr) -> io::Result<socket2::Socket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    Ok(socket)
}

/// A listening socket of the current shard. glommio binds with SO_REUSEPORT, so every shard
/// binds the same address and the kernel spreads connections across them.
pub struct TcpListener {
    inner: ListenerInner,
}

enum ListenerInner {
    Glommio(glommio::net::TcpListener),
    Sim(sim::net::SimListener),
}

impl TcpListener {
    /// Binds with SO_REUSEPORT (every shard listens on the same address) and SO_REUSEADDR
    /// (a restarted broker can bind while connections of the previous one linger in
    /// TIME_WAIT or FIN_WAIT). Neither lets a second broker in unnoticed: the server probes
    /// the port without SO_REUSEPORT first. With more than one of `shards`, connections are
    /// steered to shards by source port ([`port_steering`]): the shards must bind in shard
    /// order.
    pub fn bind(addr: std::net::SocketAddr, shards: usize) -> io::Result<TcpListener> {
        if sim::active() {
            return TcpListener::bind_sim(addr);
        }
        TcpListener::listen(addr, true, 1024, shards)
    }

    /// Binds `addr` the way [`TcpListener::bind`] does but does not listen: the port stays
    /// this process's (no outgoing connection gets it as its source port) while the shards'
    /// listeners join it; the socket takes no connections.
    pub fn hold_port(addr: std::net::SocketAddr) -> io::Result<socket2::Socket> {
        let socket = tcp_socket(addr)?;
        socket.set_reuse_port(true)?;
        socket.bind(&addr.into())?;
        Ok(socket)
    }

    /// Takes over a listening socket bound elsewhere (before the shards started).
    pub fn from_std(listener: std::net::TcpListener) -> TcpListener {
        use std::os::fd::{FromRawFd, IntoRawFd};
        // SAFETY: the descriptor is a bound, listening TCP socket whose ownership moves here.
        let inner = unsafe { glommio::net::TcpListener::from_raw_fd(listener.into_raw_fd()) };
        TcpListener {
            inner: ListenerInner::Glommio(inner),
        }
    }

    fn bind_sim(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
        Ok(TcpListener {
            inner: ListenerInner::Sim(sim::net::bind(addr)?),
        })
    }

    /// Binds for one shard alone (SO_REUSEADDR only): a second listener on the address, in
    /// this process or another, fails with `AddrInUse` instead of sharing the connections.
    /// For endpoints a single shard serves (metrics).
    pub fn bind_exclusive(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
        if sim::active() {
            return TcpListener::bind_sim(addr);
        }
        TcpListener::listen(addr, false, 128, 1)
    }

    /// A listening socket with SO_REUSEADDR, and SO_REUSEPORT if `reuse_port`; with more
    /// than one of `steered_shards`, the group's connections are steered by source port.
    fn listen(
        addr: std::net::SocketAddr,
        reuse_port: bool,
        backlog: i32,
        steered_shards: usize,
    ) -> io::Result<Self> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let socket = tcp_socket(addr)?;
        if reuse_port {
            socket.set_reuse_port(true)?;
        }
        socket.bind(&addr.into())?;
        socket.listen(backlog)?;
        if reuse_port && steered_shards > 1 {
            port_steering::steer_by_source_port(&socket, steered_shards)?;
        }
        // SAFETY: the descriptor is a bound, listening TCP socket that we own and hand over.
        let inner = unsafe { glommio::net::TcpListener::from_raw_fd(socket.into_raw_fd()) };
        Ok(TcpListener {
            inner: ListenerInner::Glommio(inner),
        })
    }

    pub async fn accept(&self) -> io::Result<TcpStream> {
        match &self.inner {
            ListenerInner::Glommio(l) => {
                let stream = l.accept().await?;
                stream.set_nodelay(true)?;
                Ok(TcpStream(StreamInner::Glommio(stream)))
            }
            ListenerInner::Sim(l) => Ok(TcpStream(StreamInner::Sim(l.accept().await?))),
        }
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        match &self.inner {
            ListenerInner::Glommio(l) => Ok(l.local_addr()?),
            ListenerInner::Sim(l) => Ok(l.local_addr()),
        }
    }
}

/// Wakes the current shard when the process receives one of a set of signals.
///
/// The signal handler writes a byte to a socket pair (async-signal-safe); the shard reads the
/// other end through its own ring. Nothing polls a flag and no other thread has to wake the
/// executor. Each shard registers its own; dropping it unregisters.
pub struct SignalListener {
    stream: glommio::net::UnixStream,
    registrations: Vec<signal_hook::SigId>,
}

impl SignalListener {
    pub fn register(signals: &[i32]) -> io::Result<SignalListener> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let (read, write) = std::os::unix::net::UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        let mut registrations = Vec::with_capacity(signals.len());
        for &signal in signals {
            registrations.push(signal_hook::low_level::pipe::register(
                signal,
                write.try_clone()?,
            )?);
        }
        // SAFETY: the descriptor is one end of a socket pair that we own and hand over.
        let stream = unsafe { glommio::net::UnixStream::from_raw_fd(read.into_raw_fd()) };
        Ok(SignalListener {
            stream,
            registrations,
        })
    }

    /// Resolves once one of the signals arrived since registration (at once if one did).
    pub async fn wait(&mut self) -> io::Result<()> {
        use futures_lite::AsyncReadExt;
        let mut byte = [0u8; 1];
        self.stream.read(&mut byte).await.map(|_| ())
    }
}

impl Drop for SignalListener {
    fn drop(&mut self) {
        for id in self.registrations.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// The sending half of a bounded single-shard channel.
pub struct LocalSender<T> {
    inner: glommio::channels::local_channel::LocalSender<T>,
}

/// The receiving half of a bounded single-shard channel.
pub struct LocalReceiver<T> {
    inner: glommio::channels::local_channel::LocalReceiver<T>,
}

/// A bounded channel between tasks of one shard: a full channel makes the sender wait.
pub fn local_channel<T>(capacity: usize) -> (LocalSender<T>, LocalReceiver<T>) {
    let (tx, rx) = glommio::channels::local_channel::new_bounded(capacity.max(1));
    (LocalSender { inner: tx }, LocalReceiver { inner: rx })
}

impl<T> LocalSender<T> {
    /// Sends, waiting for room; fails (giving nothing back) when the receiver is gone.
    pub async fn send(&self, item: T) -> Result<(), ChannelClosed> {
        self.inner.send(item).await.map_err(|_| ChannelClosed)
    }
}

impl<T> LocalReceiver<T> {
    /// The next item, or `None` once every sender is gone.
    pub async fn recv(&self) -> Option<T> {
        self.inner.recv().await
    }

    /// The next item if one is queued now, without waiting for one.
    pub async fn try_recv(&self) -> Option<T> {
        futures_lite::future::poll_once(self.inner.recv())
            .await
            .flatten()
    }
}

/// The other end of a channel has gone away.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("channel closed")]
pub struct ChannelClosed;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_exchange_messages_over_the_mesh() {
        let config = ShardsConfig::unpinned(3);
        let results = run_shards(&config, |mut ctx: ShardContext<(usize, u64)>| async move {
            let inboxes = ctx.take_inboxes();
            assert_eq!(inboxes.len(), ctx.count() - 1);
            for to in 0..ctx.count() {
                if to != ctx.id() {
                    ctx.send_to(to, (ctx.id(), 10 * ctx.id() as u64))
                        .await
                        .expect("peer is up");
                }
            }
            assert!(
                ctx.send_to(ctx.id(), (0, 0)).await.is_err(),
                "no self-sends"
            );
            let mut got = Vec::new();
            for inbox in &inboxes {
                let (from, value) = inbox.recv().await.expect("a message");
                assert_eq!(from, inbox.from());
                got.push(value);
            }
            got.sort();
            (ctx.id(), got)
        })
        .expect("shards run");
        assert_eq!(results.len(), 3);
        for (i, (id, got)) in results.iter().enumerate() {
            assert_eq!(*id, i, "results come back in shard order");
            let expected: Vec<u64> = (0..3).filter(|&j| j != i).map(|j| 10 * j as u64).collect();
            assert_eq!(got, &expected);
        }
    }

    /// Writes, reads, truncates, syncs and removes a file in `dir` (both backends run it).
    pub(super) async fn file_round_trip(dir: &std::path::Path) {
        let path = dir.join("f");
        let f = File::open_or_create(&path).await.expect("create");
        f.write_all_at(b"hello world".to_vec(), 0)
            .await
            .expect("write");
        f.fdatasync().await.expect("sync");
        assert_eq!(f.read_at(6, 100).await.expect("read"), b"world");
        f.truncate(5).await.expect("truncate");
        assert_eq!(f.size().await.expect("size"), 5);
        f.close().await.expect("close");
        let moved = path.with_extension("moved");
        rename(&path, &moved).await.expect("rename");
        sync_dir(dir).await.expect("sync dir");
        remove_file(&moved).await.expect("remove");
        remove_file(&moved).await.expect("removing twice is fine");
    }

    #[test]
    fn files_write_read_truncate() {
        let dir = tempfile::tempdir().expect("tempdir");
        block_on(file_round_trip(dir.path())).expect("executor");
    }
}

//! The simulated network: hosts (one per node, `10.x.y.z`), listeners by address, connections
//! as two in-memory byte pipes with a seeded delivery delay, and the faults a test injects:
//! partitions between two hosts (bytes held, as TCP retransmits them, until healed; new
//! connections time out), connection resets, and a crashed host's connections reset.

use crate::util::hash::{HashMap, HashSet};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures_lite::{AsyncRead, AsyncWrite};

use super::executor::{current_node, state, NodeId};

thread_local! {
    static NETWORK: RefCell<Option<Rc<Network>>> = const { RefCell::new(None) };
}

/// The network of the simulation running on this thread.
fn network() -> Rc<Network> {
    NETWORK.with(|n| {
        n.borrow()
            .as_ref()
            .map(Rc::clone)
            .expect("runtime::sim: no simulated network on this thread")
    })
}

/// Installs a fresh network for a simulation starting on this thread.
pub(super) fn install() {
    NETWORK.with(|n| *n.borrow_mut() = Some(Rc::new(Network::default())));
}

/// Removes the network once the simulation's tasks are gone.
pub(super) fn uninstall() {
    if let Some(n) = NETWORK.with(|n| n.borrow_mut().take()) {
        n.clear();
    }
}

/// The address of `node`'s host.
pub fn host_ip(node: NodeId) -> IpAddr {
    let n = node.0 + 1;
    IpAddr::V4(Ipv4Addr::new(10, (n >> 16) as u8, (n >> 8) as u8, n as u8))
}

/// The host of the test's own driver (tasks of no node).
const DRIVER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 255, 255, 254));

fn local_ip() -> IpAddr {
    current_node().map_or(DRIVER_IP, host_ip)
}

fn pair(a: IpAddr, b: IpAddr) -> (IpAddr, IpAddr) {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

#[derive(Default)]
struct Pipe {
    /// (visible from, bytes), in order.
    chunks: VecDeque<(Duration, Vec<u8>)>,
    /// Read position in the first chunk.
    read_pos: usize,
    reader: Option<Waker>,
    writer_closed: bool,
    reader_gone: bool,
    reset: bool,
    /// Partitioned: nothing is delivered until healed.
    held: bool,
    /// When the last chunk becomes visible (delivery keeps the pipe's order).
    last_visible: Duration,
}

impl Pipe {
    fn wake(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

struct Connection {
    hosts: (IpAddr, IpAddr),
    pipes: [Weak<RefCell<Pipe>>; 2],
}

struct Listener {
    owner: Option<NodeId>,
    pending: RefCell<VecDeque<SimStream>>,
    acceptor: RefCell<Option<Waker>>,
}

/// The network of one simulation.
struct Network {
    listeners: RefCell<HashMap<SocketAddr, Rc<Listener>>>,
    connections: RefCell<Vec<Connection>>,
    partitions: RefCell<HashSet<(IpAddr, IpAddr)>>,
    next_port: Cell<u16>,
    /// Each write's delivery delay is drawn from [min, max].
    delay: Cell<(Duration, Duration)>,
}

impl Default for Network {
    fn default() -> Network {
        Network {
            listeners: RefCell::new(HashMap::default()),
            connections: RefCell::new(Vec::new()),
            partitions: RefCell::new(HashSet::default()),
            next_port: Cell::new(40_000),
            delay: Cell::new((Duration::from_micros(50), Duration::from_micros(500))),
        }
    }
}

impl Network {
    fn clear(&self) {
        self.listeners.borrow_mut().clear();
        self.connections.borrow_mut().clear();
    }

    /// A crashed host: its listeners close and its connections reset.
    fn crash_host(&self, node: NodeId) {
        let ip = host_ip(node);
        self.listeners
            .borrow_mut()
            .retain(|_, l| l.owner != Some(node));
        self.reset_where(|(a, b)| a == ip || b == ip);
    }

    fn reset_where(&self, mut matches: impl FnMut((IpAddr, IpAddr)) -> bool) {
        self.connections.borrow_mut().retain(|c| {
            let alive = c.pipes.iter().any(|p| p.strong_count() > 0);
            if alive && matches(c.hosts) {
                for p in c.pipes.iter().filter_map(Weak::upgrade) {
                    let mut p = p.borrow_mut();
                    p.reset = true;
                    p.wake();
                }
                return false;
            }
            alive
        });
    }

    fn set_held(&self, hosts: (IpAddr, IpAddr), held: bool) {
        self.connections.borrow_mut().retain(|c| {
            let alive = c.pipes.iter().any(|p| p.strong_count() > 0);
            if alive && pair(c.hosts.0, c.hosts.1) == hosts {
                for p in c.pipes.iter().filter_map(Weak::upgrade) {
                    let mut p = p.borrow_mut();
                    p.held = held;
                    if !held {
                        p.wake();
                    }
                }
            }
            alive
        });
    }

    fn partitioned(&self, a: IpAddr, b: IpAddr) -> bool {
        self.partitions.borrow().contains(&pair(a, b))
    }
}

/// A crashed host: its listeners close, its connections reset.
pub(super) fn crash_host(node: NodeId) {
    network().crash_host(node);
}

/// Cuts the link between two nodes' hosts: bytes in flight and written from now on are held
/// (delivered once healed, as TCP's retransmissions would), new connections time out.
pub fn partition(a: NodeId, b: NodeId) {
    let net = network();
    let hosts = pair(host_ip(a), host_ip(b));
    net.partitions.borrow_mut().insert(hosts);
    net.set_held(hosts, true);
}

/// Heals a partition made by [`partition`].
pub fn heal(a: NodeId, b: NodeId) {
    let net = network();
    let hosts = pair(host_ip(a), host_ip(b));
    net.partitions.borrow_mut().remove(&hosts);
    net.set_held(hosts, false);
}

/// Heals every partition.
pub fn heal_all() {
    let net = network();
    let all: Vec<_> = net.partitions.borrow_mut().drain().collect();
    for hosts in all {
        net.set_held(hosts, false);
    }
}

/// Resets every connection between two nodes' hosts (as a peer's RST would).
pub fn reset(a: NodeId, b: NodeId) {
    let hosts = pair(host_ip(a), host_ip(b));
    network().reset_where(|(x, y)| pair(x, y) == hosts);
}

/// Sets the range each write's delivery delay is drawn from.
pub fn set_delay(min: Duration, max: Duration) {
    network().delay.set((min, max.max(min)));
}

fn draw_delay() -> Duration {
    let st = state();
    let (min, max) = network().delay.get();
    let span = (max - min).as_nanos() as u64;
    if span == 0 {
        return min;
    }
    min + Duration::from_nanos(st.random() % (span + 1))
}

/// One end of a simulated TCP connection.
pub struct SimStream {
    incoming: Rc<RefCell<Pipe>>,
    outgoing: Rc<RefCell<Pipe>>,
    local: SocketAddr,
    peer: SocketAddr,
}

impl SimStream {
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        // `try_`: a stream dropped while a panic unwinds out of its own poll.
        if let Ok(mut out) = self.outgoing.try_borrow_mut() {
            out.writer_closed = true;
            out.wake();
        }
        if let Ok(mut incoming) = self.incoming.try_borrow_mut() {
            incoming.reader_gone = true;
        }
    }
}

impl AsyncRead for SimStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut p = self.incoming.borrow_mut();
        if p.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        let st = state();
        let now = st.now.get();
        let mut n = 0;
        while n < buf.len() && !p.held {
            let pos = p.read_pos;
            let Some((visible, chunk)) = p.chunks.front() else {
                break;
            };
            if *visible > now {
                break;
            }
            let take = (chunk.len() - pos).min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&chunk[pos..pos + take]);
            n += take;
            if pos + take == chunk.len() {
                p.chunks.pop_front();
                p.read_pos = 0;
            } else {
                p.read_pos = pos + take;
            }
        }
        if n > 0 {
            return Poll::Ready(Ok(n));
        }
        if p.chunks.is_empty() && p.writer_closed {
            return Poll::Ready(Ok(0));
        }
        if !p.held {
            if let Some((visible, _)) = p.chunks.front() {
                // In flight: wake when it arrives.
                st.timers
                    .borrow_mut()
                    .insert((*visible, st.next_id()), cx.waker().clone());
            }
        }
        p.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut p = self.outgoing.borrow_mut();
        if p.reset {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        if p.reader_gone || p.writer_closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let visible = (state().now.get() + draw_delay()).max(p.last_visible);
        p.last_visible = visible;
        p.chunks.push_back((visible, buf.to_vec()));
        p.wake();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
        self.poll_write(cx, &all)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut p = self.outgoing.borrow_mut();
        p.writer_closed = true;
        p.wake();
        Poll::Ready(Ok(()))
    }
}

/// A listening address of the simulated network.
pub struct SimListener {
    addr: SocketAddr,
    inner: Rc<Listener>,
}

/// Listens on `addr` (an unspecified IP is the current node's host; port 0 picks one).
pub fn bind(addr: SocketAddr) -> io::Result<SimListener> {
    let net = network();
    let ip = if addr.ip().is_unspecified() {
        local_ip()
    } else {
        addr.ip()
    };
    let port = if addr.port() == 0 {
        let p = net.next_port.get();
        net.next_port.set(p.wrapping_add(1).max(40_000));
        p
    } else {
        addr.port()
    };
    let addr = SocketAddr::new(ip, port);
    let mut listeners = net.listeners.borrow_mut();
    if listeners.contains_key(&addr) {
        return Err(io::ErrorKind::AddrInUse.into());
    }
    let inner = Rc::new(Listener {
        owner: current_node(),
        pending: RefCell::new(VecDeque::new()),
        acceptor: RefCell::new(None),
    });
    listeners.insert(addr, Rc::clone(&inner));
    Ok(SimListener { addr, inner })
}

impl SimListener {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub async fn accept(&self) -> io::Result<SimStream> {
        futures_lite::future::poll_fn(|cx| {
            if let Some(s) = self.inner.pending.borrow_mut().pop_front() {
                return Poll::Ready(Ok(s));
            }
            *self.inner.acceptor.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        if let Some(net) = NETWORK.with(|n| n.borrow().clone()) {
            let mut listeners = net.listeners.borrow_mut();
            if listeners
                .get(&self.addr)
                .is_some_and(|l| Rc::ptr_eq(l, &self.inner))
            {
                listeners.remove(&self.addr);
            }
        }
    }
}

/// Connects to `addr`: refused when nothing listens there, timed out after `timeout` when the
/// hosts are partitioned.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> io::Result<SimStream> {
    let from = local_ip();
    // The handshake's round trip.
    super::time::sleep(draw_delay() * 2).await;
    let net = network();
    if net.partitioned(from, addr.ip()) {
        super::time::sleep(timeout).await;
        return Err(io::ErrorKind::TimedOut.into());
    }
    let listener = net.listeners.borrow().get(&addr).map(Rc::clone);
    let Some(listener) = listener else {
        return Err(io::ErrorKind::ConnectionRefused.into());
    };
    let port = net.next_port.get();
    net.next_port.set(port.wrapping_add(1).max(40_000));
    let local = SocketAddr::new(from, port);
    let up = Rc::new(RefCell::new(Pipe::default()));
    let down = Rc::new(RefCell::new(Pipe::default()));
    net.connections.borrow_mut().push(Connection {
        hosts: (from, addr.ip()),
        pipes: [Rc::downgrade(&up), Rc::downgrade(&down)],
    });
    let server = SimStream {
        incoming: Rc::clone(&up),
        outgoing: Rc::clone(&down),
        local: addr,
        peer: local,
    };
    listener.pending.borrow_mut().push_back(server);
    if let Some(w) = listener.acceptor.borrow_mut().take() {
        w.wake();
    }
    Ok(SimStream {
        incoming: down,
        outgoing: up,
        local,
        peer: addr,
    })
}

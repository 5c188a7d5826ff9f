//! Steers each TCP connection to a shard by its source port, so that follower shard `s`
//! reaches leader shard `s` (CLUSTER.md, thread-per-core placement) and replication crosses
//! no core boundary on the leader either.
//!
//! Every shard listens on the same address (SO_REUSEPORT). A classic BPF program attached to
//! the group (SO_ATTACH_REUSEPORT_CBPF, no privilege needed) picks the listener at index
//! `(source port / 2) mod shards`; the shards start listening in shard order, so index and
//! shard agree. A follower shard binds a local port that maps to its own index
//! ([`connect_steered`]). Other clients' ports fall where they fall: the kernel hands
//! `connect()` even ports from a random start (odd ones go to `bind()`), so the port is halved
//! first, or every kernel-chosen port would map to an even shard.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// asm-generic/socket.h (x86-64, arm64); not exported by the libc crate for glibc targets.
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// The shard a connection from source `port` lands on in a broker of `shards` shards.
pub fn shard_for_port(port: u16, shards: usize) -> usize {
    (usize::from(port) >> 1) % shards.max(1)
}

fn insn(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The program: `A = source port of the TCP header; return (A >> 1) % shards`. The skb's data
/// starts past the TCP header when it runs, so the port is read relative to the network
/// header (SKF_NET_OFF): after the IPv4 header (its length from IHL) or the fixed IPv6 one.
fn program(shards: usize) -> Vec<libc::sock_filter> {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_B, BPF_H, BPF_IMM, BPF_IND, BPF_JA, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD,
        BPF_LDX, BPF_MOD, BPF_MSH, BPF_RET, BPF_RSH,
    };
    let net = libc::SKF_NET_OFF as u32;
    vec![
        // A = IP version.
        insn(BPF_LD | BPF_B | BPF_ABS, 0, 0, net),
        insn(BPF_ALU | BPF_RSH | BPF_K, 0, 0, 4),
        insn(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 6),
        // IPv4: X = header length.
        insn(BPF_LDX | BPF_B | BPF_MSH, 0, 0, net),
        insn(BPF_JMP | BPF_JA, 0, 0, 1),
        // IPv6: X = 40 (TCP right after the fixed header).
        insn(BPF_LDX | BPF_IMM, 0, 0, 40),
        // A = source port (first half-word of the TCP header).
        insn(BPF_LD | BPF_H | BPF_IND, 0, 0, net),
        insn(BPF_ALU | BPF_RSH | BPF_K, 0, 0, 1),
        insn(BPF_ALU | BPF_MOD | BPF_K, 0, 0, shards.max(1) as u32),
        insn(BPF_RET | libc::BPF_A, 0, 0, 0),
    ]
}

/// Attaches the steering program to the reuseport group of `socket` (a listening socket).
/// It applies to the whole group; the listeners must join it in shard order.
pub fn steer_by_source_port(socket: &impl std::os::fd::AsRawFd, shards: usize) -> io::Result<()> {
    let mut filter = program(shards);
    let fprog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: setsockopt with a pointer to a correctly sized sock_fprog whose filter array
    // outlives the call (the kernel copies it).
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The ephemeral port range (`net.ipv4.ip_local_port_range`), or Linux's default.
fn local_port_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .filter(|(low, high)| low < high)
        .unwrap_or((32768, 60999))
}

/// Up to this many local ports are tried before letting the kernel choose one.
const PORT_TRIES: usize = 16;

/// Candidate local ports for `shard` of `shards`: from a pseudo-random start in the ephemeral
/// range, the ports that [`shard_for_port`] maps to `shard`.
fn candidate_ports(shard: usize, shards: usize, seed: u64) -> impl Iterator<Item = u16> {
    let (low, high) = local_port_range();
    let span = u64::from(high - low) + 1;
    let start = u64::from(low) + seed % span;
    (0..span)
        .map(move |i| (u64::from(low) + (start - u64::from(low) + i) % span) as u16)
        .filter(move |p| shard_for_port(*p, shards) == shard)
        .take(PORT_TRIES)
}

/// Opens a connection to `addr` from a local port that a broker running `shards` shards steers
/// to `shard`; if no such port can be had, from any port (the leader then routes by partition
/// owner over its mesh, one hop). Gives up after `timeout`.
pub async fn connect_steered(
    addr: SocketAddr,
    shard: usize,
    shards: usize,
    timeout: Duration,
) -> io::Result<super::TcpStream> {
    if shards > 1 {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
            .unwrap_or(0);
        for port in candidate_ports(shard, shards, seed) {
            match connect_from(addr, port, timeout).await {
                Ok(stream) => return Ok(stream),
                Err(e) if port_taken(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        tracing::debug!(%addr, shard, "no free steered local port; connecting from any port");
    }
    super::connect(addr, timeout).await
}

fn port_taken(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::AddrInUse | io::ErrorKind::AddrNotAvailable
    )
}

/// Connects from local port `port`. The connect is started non-blocking; the stream's first
/// (empty) write then waits for it through the ring: TCP refuses to send before the handshake
/// ends (EAGAIN), and reports a failed one as the socket's error.
async fn connect_from(
    addr: SocketAddr,
    port: u16,
    timeout: Duration,
) -> io::Result<super::TcpStream> {
    use futures_lite::AsyncWriteExt;
    use std::os::fd::{FromRawFd, IntoRawFd};
    let socket = super::tcp_socket(addr)?;
    let local: SocketAddr = match addr {
        SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, port).into(),
        SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, port).into(),
    };
    socket.bind(&local.into())?;
    socket.set_nonblocking(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        Err(e) => return Err(e),
    }
    socket.set_nodelay(true)?;
    // SAFETY: a TCP socket we own, connecting; glommio takes it over.
    let mut stream = super::TcpStream::from_glommio(unsafe {
        glommio::net::TcpStream::from_raw_fd(socket.into_raw_fd())
    });
    let handshake = async {
        stream.write(&[]).await?;
        Ok::<(), io::Error>(())
    };
    let timed_out = async {
        super::sleep(timeout).await;
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "connection timed out",
        ))
    };
    futures_lite::future::or(handshake, timed_out).await?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_chosen_ports_spread_over_shards() {
        // connect() takes even ports in steps of two: halving keeps consecutive ones apart.
        let shards = 4;
        let mut seen = [0usize; 4];
        for port in (40_000u16..40_800).step_by(2) {
            seen[shard_for_port(port, shards)] += 1;
        }
        assert!(seen.iter().all(|n| *n == 100), "{seen:?}");
    }

    #[test]
    fn candidates_map_to_their_shard_and_stay_in_range() {
        let (low, high) = local_port_range();
        for shards in 2..6 {
            for shard in 0..shards {
                let ports: Vec<u16> = candidate_ports(shard, shards, 12345).collect();
                assert_eq!(ports.len(), PORT_TRIES);
                for p in ports {
                    assert!(p >= low && p <= high);
                    assert_eq!(shard_for_port(p, shards), shard);
                }
            }
        }
    }

    /// Listeners of one reuseport group, joined in order, with the program attached.
    fn group(shards: usize, addr: SocketAddr) -> Vec<socket2::Socket> {
        let mut listeners: Vec<socket2::Socket> = Vec::new();
        let mut addr = addr;
        for _ in 0..shards {
            let s = socket2::Socket::new(
                socket2::Domain::for_address(addr),
                socket2::Type::STREAM,
                None,
            )
            .expect("socket");
            s.set_reuse_port(true).expect("reuseport");
            s.bind(&addr.into()).expect("bind");
            s.listen(64).expect("listen");
            s.set_nonblocking(true).expect("nonblocking");
            addr = s.local_addr().expect("addr").as_socket().expect("inet");
            listeners.push(s);
        }
        steer_by_source_port(&listeners[0], shards).expect("attach");
        listeners
    }

    /// Connects from each candidate port of each shard and checks which listener got it.
    fn lands_on_its_shard(shards: usize, any: SocketAddr) {
        let listeners = group(shards, any);
        let addr = listeners[0]
            .local_addr()
            .expect("addr")
            .as_socket()
            .expect("inet");
        for shard in 0..shards {
            for port in candidate_ports(shard, shards, 777 + shard as u64).take(4) {
                let c = socket2::Socket::new(
                    socket2::Domain::for_address(addr),
                    socket2::Type::STREAM,
                    None,
                )
                .expect("socket");
                c.set_reuse_address(true).expect("reuseaddr");
                let local: SocketAddr = match addr {
                    SocketAddr::V4(_) => (std::net::Ipv4Addr::LOCALHOST, port).into(),
                    SocketAddr::V6(_) => (std::net::Ipv6Addr::LOCALHOST, port).into(),
                };
                if c.bind(&local.into()).is_err() {
                    continue; // taken on this machine right now
                }
                c.connect(&addr.into()).expect("connect");
                // The handshake completed at connect(): the accept queue has it now.
                let landed: Vec<usize> = (0..shards)
                    .filter(|i| listeners[*i].accept().is_ok())
                    .collect();
                assert_eq!(landed, vec![shard], "port {port} of {shards} shards");
            }
        }
    }

    #[test]
    fn the_kernel_steers_ipv4_connections_by_source_port() {
        for shards in [2, 3] {
            lands_on_its_shard(shards, "127.0.0.1:0".parse().expect("addr"));
        }
    }

    #[test]
    fn the_kernel_steers_ipv6_connections_by_source_port() {
        if std::net::TcpListener::bind("[::1]:0").is_err() {
            return; // no IPv6 loopback here
        }
        lands_on_its_shard(2, "[::1]:0".parse().expect("addr"));
    }
}

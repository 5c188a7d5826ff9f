//! Cluster nodes for integration tests: `ringbroker serve` processes on loopback ports with
//! short controller and session timeouts, their settings, free ports, and bounded polls of
//! their Metadata.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponsePartition};
use kafka_protocol::messages::ApiKey;

use super::{parse_listen_line, stdout_lines, Client, START_WAIT, WAIT};

/// Polls of a condition, [`POLL`] apart.
pub const MAX_POLLS: usize = 300;
pub const POLL: Duration = Duration::from_millis(100);

/// Free loopback ports: bound once (without SO_REUSEPORT) and released together, so no two
/// are the same; the broker's own probe refuses a port someone else took meanwhile. They come
/// from RINGBROKER_TEST_PORT_RANGE=LOW-HIGH (a machine shared with other tests that keep to
/// ranges of their own), else from the ports just below the kernel's ephemeral range: a port
/// the kernel picked and this test released was seen taken by an outgoing connection of
/// another test's brokers before the node that was to listen on it started.
pub fn free_ports(n: usize) -> Vec<u16> {
    let range = port_range().unwrap_or_else(below_ephemeral_ports);
    range_listeners(range, n)
        .iter()
        .map(|l| l.local_addr().expect("addr").port())
        .collect()
}

pub fn port_range() -> Option<std::ops::RangeInclusive<u16>> {
    let text = std::env::var("RINGBROKER_TEST_PORT_RANGE").ok()?;
    let (low, high) = text
        .split_once('-')
        .expect("RINGBROKER_TEST_PORT_RANGE is LOW-HIGH");
    let parse = |s: &str| s.trim().parse::<u16>().expect("a port number");
    Some(parse(low)..=parse(high))
}

/// The 10,000 ports below `ip_local_port_range` (32768 by default): never handed out for an
/// outgoing connection or a bind to port 0.
pub fn below_ephemeral_ports() -> std::ops::RangeInclusive<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|&low| low > 11_024)
        .unwrap_or(32_768);
    (low - 10_000)..=(low - 1)
}

/// `n` listeners on free ports of `range`; the tests of this process (run in parallel)
/// share one cursor, so that one does not take the ports another just released.
pub fn range_listeners(range: std::ops::RangeInclusive<u16>, n: usize) -> Vec<TcpListener> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let (low, size) = (*range.start(), range.len());
    // Runs one after another start at different places, away from ports still closing.
    let _ = NEXT.compare_exchange(
        0,
        std::process::id() as usize * 97 % size + 1,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut held = Vec::new();
    for _ in 0..size {
        let offset = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % size;
        if let Ok(l) = TcpListener::bind(("127.0.0.1", low + offset as u16)) {
            held.push(l);
            if held.len() == n {
                return held;
            }
        }
    }
    panic!("fewer than {n} free ports in {range:?}");
}

/// One `ringbroker serve` process of a cluster; stopped (SIGTERM, then SIGKILL) on drop.
pub struct Node {
    pub id: i32,
    pub child: Option<Child>,
    pub addr: SocketAddr,
    pub data: PathBuf,
    pub log: PathBuf,
}

pub fn spawn(
    id: i32,
    data: &Path,
    log: &Path,
    settings: &[String],
) -> Result<(Child, SocketAddr), String> {
    spawn_sharded(id, data, log, settings, 1)
}

/// [`spawn`] with `shards` shards (unpinned).
pub fn spawn_sharded(
    id: i32,
    data: &Path,
    log: &Path,
    settings: &[String],
    shards: usize,
) -> Result<(Child, SocketAddr), String> {
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringbroker"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data)
        .arg("--shards")
        .arg(shards.to_string());
    // Never the default metrics port (tests run side by side); a node that serves metrics
    // names its port in `settings`.
    if !settings
        .iter()
        .any(|s| s.starts_with("ringbroker.metrics.listen="))
    {
        cmd.arg("--set").arg("ringbroker.metrics.listen=none");
    }
    for s in settings {
        cmd.arg("--set").arg(s);
    }
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info,openraft=warn");
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .spawn()
        .expect("spawn ringbroker");
    let rx = stdout_lines(&mut child);
    loop {
        match rx.recv_timeout(START_WAIT) {
            Ok(line) => {
                if let Some(addr) = parse_listen_line(&line) {
                    return Ok((child, addr));
                }
            }
            Err(_) => {
                let stacks = super::diagnostics::backtraces(child.id() as i32);
                let _ = child.kill();
                let status = child.wait().ok();
                return Err(format!(
                    "node {id} did not start (exit {status:?})\n{stacks}"
                ));
            }
        }
    }
}

/// Starts node `id` over `<root>/data-<id>`, logging to `<root>/node-<id>.log`.
pub fn start_node(root: &Path, id: i32, settings: &[String]) -> Node {
    start_node_sharded(root, id, settings, 1)
}

/// [`start_node`] with `shards` shards.
pub fn start_node_sharded(root: &Path, id: i32, settings: &[String], shards: usize) -> Node {
    let data = root.join(format!("data-{id}"));
    let log = root.join(format!("node-{id}.log"));
    let (child, addr) = spawn_sharded(id, &data, &log, settings, shards).unwrap_or_else(|e| {
        panic!(
            "{e}: {}",
            String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default())
        )
    });
    Node {
        id,
        child: Some(child),
        addr,
        data,
        log,
    }
}

/// The three voters: node i+1's controller listener on `ports[3 + i]`.
pub fn voters(ports: &[u16]) -> String {
    (0..3)
        .map(|i| format!("{}@127.0.0.1:{}", i + 1, ports[3 + i]))
        .collect::<Vec<_>>()
        .join(",")
}

/// Nodes 1, 2 and 3, node i+1 on `ports[i]` (node 1 also serving metrics on `metrics`).
pub fn start_three(root: &Path, ports: &[u16], voters: &str, metrics: Option<u16>) -> Vec<Node> {
    start_three_with(root, ports, voters, metrics, &[])
}

/// [`start_three`] with `extra` settings on every node.
pub fn start_three_with(
    root: &Path,
    ports: &[u16],
    voters: &str,
    metrics: Option<u16>,
    extra: &[&str],
) -> Vec<Node> {
    (0..3)
        .map(|i| {
            let id = i as i32 + 1;
            let metrics = metrics.filter(|_| i == 0);
            let mut node_settings =
                settings_with_metrics(id, ports[i], ports[3 + i], voters, metrics);
            node_settings.extend(extra.iter().map(|s| s.to_string()));
            start_node(root, id, &node_settings)
        })
        .collect()
}

impl Node {
    pub fn metadata(&self) -> Option<MetadataResponse> {
        // A node that is down or restarting does not answer: that is a `None`, not a panic.
        std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(500)).ok()?;
        let mut client = Client::connect(self.addr);
        let request = MetadataRequest::default();
        Some(client.call(ApiKey::Metadata, 12, &request))
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGTERM, ...) to the process, if it runs.
    pub fn signal(&self, signal: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// SIGTERM and a bounded wait for a clean exit; SIGKILL if it does not come.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }

    /// A bounded wait for the exit of a process already signalled (a second SIGTERM would
    /// end its stop at once); SIGKILL, with every thread's stack printed, if it does not come.
    pub fn wait_exit(&mut self) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        for _ in 0..(WAIT.as_millis() / 20) {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // What every thread was doing is what explains a stop that hung.
        let pid = child.id() as i32;
        eprintln!(
            "node {} did not stop within {WAIT:?} of SIGTERM; threads: {}\n{}",
            self.id,
            super::diagnostics::thread_states(pid),
            super::diagnostics::backtraces(pid)
        );
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    pub fn log_tail(&self) -> String {
        let log = std::fs::read(&self.log).unwrap_or_default();
        String::from_utf8_lossy(&log[log.len().saturating_sub(4000)..]).into_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!("node {} log:\n{}", self.id, self.log_tail());
        }
    }
}

/// The partitions of `topic` as `node` tells them (all topics' Metadata v12), in partition
/// order; `None` if the node does not answer or does not know the topic.
pub fn topic_partitions(node: &Node, topic: &str) -> Option<Vec<MetadataResponsePartition>> {
    std::net::TcpStream::connect_timeout(&node.addr, POLL).ok()?;
    let mut all_topics = MetadataRequest::default();
    all_topics.topics = None;
    let m: MetadataResponse = Client::connect(node.addr).call(ApiKey::Metadata, 12, &all_topics);
    let t = m
        .topics
        .into_iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))?;
    let mut partitions = t.partitions;
    partitions.sort_by_key(|p| p.partition_index);
    Some(partitions)
}

pub fn broker_ids(m: &MetadataResponse) -> Vec<i32> {
    let mut ids: Vec<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort();
    ids
}

/// Polls until `check` holds on the Metadata of every node in `on`.
pub fn wait_for(
    nodes: &[Node],
    on: &[usize],
    what: &str,
    check: impl Fn(&MetadataResponse) -> bool,
) {
    for _ in 0..MAX_POLLS {
        if on
            .iter()
            .all(|i| nodes[*i].metadata().is_some_and(|m| check(&m)))
        {
            return;
        }
        std::thread::sleep(POLL);
    }
    let seen: Vec<_> = on
        .iter()
        .map(|i| {
            nodes[*i]
                .metadata()
                .map(|m| (broker_ids(&m), m.controller_id.0))
        })
        .collect();
    panic!("{what}: not reached after {MAX_POLLS} polls; (brokers, controller) seen: {seen:?}");
}

pub fn settings(id: i32, port: u16, controller_port: u16, voters: &str) -> Vec<String> {
    settings_with_metrics(id, port, controller_port, voters, None)
}

pub fn settings_with_metrics(
    id: i32,
    port: u16,
    controller_port: u16,
    voters: &str,
    metrics_port: Option<u16>,
) -> Vec<String> {
    let metrics = metrics_port.map_or("none".to_string(), |p| format!("127.0.0.1:{p}"));
    vec![
        format!("node.id={id}"),
        format!("listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"),
        format!("controller.quorum.voters={voters}"),
        "controller.quorum.election.timeout.ms=300".to_string(),
        "broker.heartbeat.interval.ms=200".to_string(),
        "broker.session.timeout.ms=2000".to_string(),
        format!("ringbroker.metrics.listen={metrics}"),
    ]
}

//! Every SIGTERM stops the broker cleanly and promptly, whatever its clients are doing.
//!
//! Each cycle starts a broker, puts live work on it — acks=all producers, a long poll on a
//! partition nobody writes to, a JoinGroup held by the initial rebalance delay,
//! a metrics scraper and a metrics connection that says nothing — and sends SIGTERM. The stop
//! must answer the long poll and the join at once (not at their timeouts), and the process
//! must exit 0. A stop that hangs fails with every thread's stack (the harness). The cores are
//! kept busy meanwhile: stuck stops showed only under contention.
//!
//! CI runs [`CI_CYCLES`] of each kind; `STOP_SOAK_CYCLES=1000 cargo test --release --test
//! stop_soak -- --nocapture` is the long run (figures in docs/shutdown.md). The stop times are
//! reported, not asserted (a busy machine is slow, not wrong).

mod broker;

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::ApiKey;
use ringbroker::protocol::batch_builder::BatchBuilder;

use broker::cluster::{
    broker_ids, free_ports, settings_with_metrics, start_node, topic_partitions, voters, wait_for,
    Node, MAX_POLLS, POLL,
};
use broker::cpu_load::CpuLoad;
use broker::{Broker, Client};

const TOPIC: &str = "stops";
const PARTITIONS: i32 = 3;
/// Producers write to partitions below this one; the long poll waits on it.
const IDLE_PARTITION: i32 = PARTITIONS - 1;
const CI_CYCLES: usize = 3;
const GROUP: &str = "stop-soak";
/// Threads whose panics are expected (their broker went away mid-request): not printed.
const LOAD_THREAD: &str = "stop-soak-load";

fn cycles() -> usize {
    std::env::var("STOP_SOAK_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_CYCLES)
}

/// Load threads end by panicking when the broker closes their connection; keep those quiet.
fn quiet_load_thread_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() != Some(LOAD_THREAD) {
            previous(info);
        }
    }));
}

/// The work a broker has in flight when it is told to stop.
struct Live {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// A metrics connection that never sends a request.
    _silent: Option<TcpStream>,
}

impl Live {
    /// acks=all producers to each written partition's leader, and a metrics scraper.
    fn start(leaders: &[SocketAddr], metrics: Option<SocketAddr>) -> Live {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (partition, &leader) in leaders.iter().enumerate().take(IDLE_PARTITION as usize) {
            let stop = Arc::clone(&stop);
            threads.push(load_thread(move || {
                let mut c = Client::connect(leader);
                while !stop.load(Ordering::Relaxed) {
                    let mut b = BatchBuilder::new(1_700_000_000_000);
                    b.push(None, Some(&[7u8; 512]), 1_700_000_000_000, &[]);
                    c.produce_records(9, -1, TOPIC, partition as i32, b.build());
                }
            }));
        }
        if let Some(addr) = metrics {
            let stop = Arc::clone(&stop);
            threads.push(load_thread(move || {
                while !stop.load(Ordering::Relaxed) {
                    broker::metrics::scrape(addr);
                }
            }));
        }
        Live {
            stop,
            threads,
            _silent: metrics.and_then(|m| TcpStream::connect(m).ok()),
        }
    }

    /// Waits (bounded: each thread's client times out) for the load threads to end.
    fn end(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn load_thread(work: impl FnOnce() + Send + 'static) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(LOAD_THREAD.into())
        .spawn(work)
        .expect("spawn a load thread")
}

/// A node that leads a partition, as some node's metadata names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Leader {
    id: i32,
    epoch: i32,
    addr: SocketAddr,
}

/// A long poll at the end of the idle partition, sent to its leader and not yet answered.
///
/// `leader()` is asked before every try, as a Kafka client refreshes its metadata after
/// NOT_LEADER_OR_FOLLOWER: leadership may move after the metadata was read. (Seen: a node
/// restarted serves the metadata of its previous life at first, which can name a leader with
/// every replica in sync; a node whose previous registration was left unfenced at the stop
/// registers again once the new controller's grace ran out, which fences the old
/// registration and moves its leaderships to another replica in sync, where they stay.)
/// Fails, showing what it was told and `report()`, if no leader serves the partition within
/// [`MAX_POLLS`] tries.
fn send_long_poll(
    mut leader: impl FnMut() -> Option<Leader>,
    report: impl FnOnce() -> String,
) -> (Client, i32) {
    let started = Instant::now();
    let mut connected: Option<(SocketAddr, Client)> = None;
    // Each change of (leader named, its answer).
    let mut seen: Vec<(Duration, Option<Leader>, Option<i16>)> = Vec::new();
    for _ in 0..MAX_POLLS {
        let named = leader();
        let mut answer = None;
        if let Some(l) = named {
            if connected.as_ref().is_none_or(|(addr, _)| *addr != l.addr) {
                connected = Some((l.addr, Client::connect(l.addr)));
            }
            let (_, c) = connected.as_mut().expect("connected");
            let (code, _, end, _) = c.fetch(TOPIC, IDLE_PARTITION, 0);
            if code == 0 {
                let mut req =
                    broker::fetch_request(TOPIC, &[(IDLE_PARTITION, end)], 1 << 20, 1 << 20);
                req.max_wait_ms = 60_000;
                req.min_bytes = 1;
                let correlation = c.send(ApiKey::Fetch, 11, &req);
                let (_, c) = connected.expect("connected");
                return (c, correlation);
            }
            answer = Some(code);
        }
        if seen
            .last()
            .is_none_or(|(_, l, a)| (*l, *a) != (named, answer))
        {
            seen.push((started.elapsed(), named, answer));
        }
        std::thread::sleep(POLL);
    }
    let seen: Vec<String> = seen
        .iter()
        .map(|(at, named, answer)| match (named, answer) {
            (Some(l), Some(code)) => format!(
                "  +{at:.1?}: node {} ({}) named leader at epoch {}, answered error {code}",
                l.id, l.addr, l.epoch
            ),
            _ => format!("  +{at:.1?}: no leader named"),
        })
        .collect();
    panic!(
        "no leader served {TOPIC}-{IDLE_PARTITION} within {MAX_POLLS} tries {POLL:?} apart:\n{}\n{}",
        seen.join("\n"),
        report()
    );
}

/// The leader of `partition` of [`TOPIC`] as node 1's metadata names it (another node's while
/// node 1 names none).
fn partition_leader(nodes: &[Node], partition: i32) -> Option<Leader> {
    nodes.iter().find_map(|n| {
        let p = topic_partitions(n, TOPIC)?
            .into_iter()
            .find(|p| p.partition_index == partition)?;
        let leader = nodes.iter().find(|l| l.id == p.leader_id.0)?;
        Some(Leader {
            id: leader.id,
            epoch: p.leader_epoch,
            addr: leader.addr,
        })
    })
}

/// What each node says of topic [`TOPIC`] (per partition: leader, leader epoch, ISR) and of
/// the live brokers, then each node's log of its current life: why a partition had no
/// serving leader.
fn cluster_report(nodes: &[Node]) -> String {
    let mut out = String::new();
    for n in nodes {
        // A node that went away mid-answer is a line of the report, not a second panic.
        let view = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let brokers = n.metadata().map(|m| broker_ids(&m));
            let partitions = topic_partitions(n, TOPIC).map(|ps| {
                ps.iter()
                    .map(|p| {
                        let isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                        format!(
                            "p{} leader {} epoch {} isr {isr:?} error {}",
                            p.partition_index, p.leader_id.0, p.leader_epoch, p.error_code
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            });
            format!("live brokers {brokers:?}; {TOPIC}: {partitions:?}")
        }))
        .unwrap_or_else(|_| "no answer".into());
        out.push_str(&format!("node {} ({}): {view}\n", n.id, n.addr));
    }
    for n in nodes {
        out.push_str(&format!(
            "--- node {} since its last start (some lines left out):\n{}\n",
            n.id,
            this_life_log(n)
        ));
    }
    out
}

/// The last lines of `node`'s log since it last started (the file holds every cycle's
/// lives), without openraft's and the offsets topic's, whose vote and replication retries and
/// 50 partitions' role and ISR changes would fill a tail, and with repeats counted. (Each
/// node's raw tail is printed when it is dropped in the panic.)
fn this_life_log(node: &Node) -> String {
    const LINES: usize = 80;
    let log = std::fs::read(&node.log).unwrap_or_default();
    let log = String::from_utf8_lossy(&log);
    let life = log
        .rfind("ringbroker::server: starting")
        .and_then(|at| log[..at].rfind('\n'))
        .map_or(&log[..], |at| &log[at + 1..]);
    // A line repeating the one before but for its time (a registration retried every 50 ms)
    // is counted, not shown.
    let text = |l: &str| l.split_once(' ').map_or(l, |(_, rest)| rest).to_owned();
    let mut lines: Vec<(String, usize)> = Vec::new();
    let shown = |l: &&str| {
        !["openraft", "__consumer_offsets", "group_service"]
            .iter()
            .any(|noise| l.contains(noise))
    };
    for l in life.lines().filter(shown) {
        match lines.last_mut() {
            Some((last, n)) if text(last) == text(l) => *n += 1,
            _ => lines.push((l.to_owned(), 0)),
        }
    }
    lines[lines.len().saturating_sub(LINES)..]
        .iter()
        .map(|(l, again)| match again {
            0 => l.clone(),
            n => format!("{l} (and {n} more times)"),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the broker answered the long poll (rather than closing the connection on it).
fn long_poll_answered(mut c: Client, correlation: i32) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _: FetchResponse = c.receive(ApiKey::Fetch, 11, correlation);
    }))
    .is_ok()
}

/// A JoinGroup the group's coordinator (one of `brokers`) holds — its initial rebalance delay
/// is long — sent.
fn send_held_join(brokers: &[SocketAddr]) -> (Client, i32) {
    const MEMBER_ID_REQUIRED: i16 = 79;
    let mut clients: Vec<Client> = brokers.iter().map(|&a| Client::connect(a)).collect();
    for _ in 0..MAX_POLLS {
        for i in 0..clients.len() {
            let resp: JoinGroupResponse =
                clients[i].call(ApiKey::JoinGroup, 5, &broker::join_group_request(GROUP, ""));
            if resp.error_code == MEMBER_ID_REQUIRED {
                let mut c = clients.swap_remove(i);
                let correlation = c.send(
                    ApiKey::JoinGroup,
                    5,
                    &broker::join_group_request(GROUP, &resp.member_id),
                );
                return (c, correlation);
            }
            // Elsewhere NOT_COORDINATOR; at the coordinator, loading or not yet available.
        }
        std::thread::sleep(POLL);
    }
    panic!("no broker coordinated group {GROUP}");
}

/// The held join's answer: NOT_COORDINATOR, so the client looks for the coordinator again.
fn assert_join_released(mut join: Client, correlation: i32, cycle: usize) {
    const NOT_COORDINATOR: i16 = 16;
    let joined: JoinGroupResponse = join.receive(ApiKey::JoinGroup, 5, correlation);
    assert_eq!(
        joined.error_code, NOT_COORDINATOR,
        "cycle {cycle}: the held join"
    );
}

/// p50, p90, p99 and max of `times`.
fn distribution(mut times: Vec<Duration>) -> String {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:?}, p90 {:?}, p99 {:?}, max {:?} over {}",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        times.len()
    )
}

#[test]
fn sigterm_stops_a_busy_single_node_broker() {
    quiet_load_thread_panics();
    let cycles = cycles();
    let _load = CpuLoad::start(1, Duration::from_secs(120 + 10 * cycles as u64));
    let mut broker = Broker::start(&[
        "ringbroker.metrics.listen=127.0.0.1:0",
        "group.initial.rebalance.delay.ms=600000",
    ]);
    broker.client().create_topic(TOPIC, PARTITIONS, &[]);
    let mut stops = Vec::new();
    for cycle in 0..cycles {
        if cycle > 0 {
            broker.spawn();
        }
        let leaders = vec![broker.addr; PARTITIONS as usize];
        let live = Live::start(&leaders, broker.metrics_addr);
        let addr = broker.addr;
        let only = move || {
            Some(Leader {
                id: 1,
                epoch: -1,
                addr,
            })
        };
        let (poll, poll_id) = send_long_poll(only, || broker.log());
        let (join, join_id) = send_held_join(&[broker.addr]);
        std::thread::sleep(Duration::from_millis(100));

        let asked = Instant::now();
        broker.signal(libc::SIGTERM);
        let answered = long_poll_answered(poll, poll_id);
        assert_join_released(join, join_id, cycle);
        let status = broker.wait_exit();
        let took = asked.elapsed();
        live.end();
        let Some(status) = status else {
            panic!("cycle {cycle}: SIGTERM did not stop the broker");
        };
        assert!(
            status.success(),
            "cycle {cycle}: exit {status}:\n{}",
            broker.log()
        );
        assert!(
            answered,
            "cycle {cycle}: the long poll was not answered before the broker closed it:\n{}",
            broker.log()
        );
        stops.push(took);
    }
    eprintln!("single node, {cycles} stops: {}", distribution(stops));
}

/// The leader of each partition once all three replicas are in sync.
fn leaders_in_sync(node: &Node, nodes: &[Node]) -> Option<Vec<SocketAddr>> {
    let partitions = topic_partitions(node, TOPIC)?;
    if partitions.len() != PARTITIONS as usize || partitions.iter().any(|p| p.isr_nodes.len() != 3)
    {
        return None;
    }
    partitions
        .iter()
        .map(|p| nodes.iter().find(|n| n.id == p.leader_id.0).map(|n| n.addr))
        .collect()
}

#[test]
fn sigterm_stops_every_node_of_a_busy_cluster() {
    quiet_load_thread_panics();
    let cycles = cycles();
    let _load = CpuLoad::start(1, Duration::from_secs(180 + 20 * cycles as u64));
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(7);
    let voters = voters(&ports[..6]);
    let metrics_port = ports[6];
    let node_settings = |i: usize| {
        // Node 1 serves metrics (scraped, and one silent connection held open).
        let metrics = Some(metrics_port).filter(|_| i == 0);
        let mut s = settings_with_metrics(i as i32 + 1, ports[i], ports[3 + i], &voters, metrics);
        s.push("group.initial.rebalance.delay.ms=600000".into());
        s
    };
    let mut stops = Vec::new();
    for cycle in 0..cycles {
        let mut nodes: Vec<Node> = (0..3)
            .map(|i| start_node(root.path(), i as i32 + 1, &node_settings(i)))
            .collect();
        wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
            m.brokers.len() == 3 && m.controller_id.0 > 0
        });
        if cycle == 0 {
            let created = Client::connect(nodes[0].addr).try_create_replicated_topic(
                TOPIC,
                PARTITIONS,
                3,
                &[],
                false,
            );
            assert_eq!(created.error_code, 0, "create: {:?}", created.error_message);
        }
        let mut leaders = None;
        for _ in 0..MAX_POLLS {
            leaders = leaders_in_sync(&nodes[0], &nodes);
            if leaders.is_some() {
                break;
            }
            std::thread::sleep(POLL);
        }
        let leaders = leaders.expect("every partition led with three replicas in sync");
        let metrics = SocketAddr::from(([127, 0, 0, 1], metrics_port));
        let live = Live::start(&leaders, Some(metrics));
        // Node 1's metadata again at every try: the leaders found above may have moved since.
        let (poll, poll_id) = send_long_poll(
            || partition_leader(&nodes, IDLE_PARTITION),
            || cluster_report(&nodes),
        );
        let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
        let (join, join_id) = send_held_join(&addrs);
        std::thread::sleep(Duration::from_millis(200));

        // All at once, as when a whole deployment is stopped.
        let asked = Instant::now();
        for n in &nodes {
            n.signal(libc::SIGTERM);
        }
        let answered = long_poll_answered(poll, poll_id);
        assert_join_released(join, join_id, cycle);
        for n in &mut nodes {
            let id = n.id;
            let status = n.wait_exit();
            let took = asked.elapsed();
            let Some(status) = status else {
                panic!("cycle {cycle}: SIGTERM did not stop node {id}");
            };
            assert!(
                status.success(),
                "cycle {cycle}: node {id} exited {status}:\n{}",
                n.log_tail()
            );
            stops.push(took);
        }
        live.end();
        assert!(
            answered,
            "cycle {cycle}: the long poll was not answered before the broker closed it"
        );
    }
    eprintln!("3-node cluster, {cycles} cycles: {}", distribution(stops));
}

//! Three `ringbroker serve` processes as one cluster (all three voters of the metadata
//! quorum) on loopback ports with short timeouts: Metadata lists the three brokers; after a
//! kill -9 of the active controller the other two elect a new one, keep answering Metadata,
//! and fence the dead broker once its session ran out; a node of another cluster is refused.
//! Every wait is a bounded number of polls; every process is stopped at the end (and by
//! `Drop` on a failure).

mod broker;

use std::process::Command;

use ringbroker::protocol::batch_builder::BatchBuilder;

use broker::cluster::{
    broker_ids, free_ports, settings, spawn, start_three, voters, wait_for, Node, MAX_POLLS, POLL,
};
use broker::{Client, WAIT};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::ApiKey;

/// `ringbroker cluster status --format json` against a CONTROLLER listener.
fn cluster_status(controller_port: u16) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["cluster", "status", "--format", "json", "--timeout", "5"])
        .arg("--controller")
        .arg(format!("127.0.0.1:{controller_port}"))
        .output()
        .expect("run cluster status");
    assert!(
        out.status.success(),
        "cluster status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics endpoint");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response");
    body
}

#[test]
fn three_voters_list_every_broker_and_survive_a_kill9_of_the_controller() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(7);
    let metrics_port = ports[6];
    let voters = voters(&ports);
    let mut nodes = start_three(root.path(), &ports, &voters, Some(metrics_port));
    for node in &nodes {
        assert!(
            node.data.join("meta.properties").exists(),
            "node {} recorded its cluster",
            node.id
        );
        assert!(node.data.join("__cluster_metadata-0").join("log").exists());
    }
    let all = [0, 1, 2];
    wait_for(&nodes, &all, "three live brokers", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let first = nodes[0].metadata().expect("metadata");
    let cluster_id = first.cluster_id.clone().expect("cluster id");
    for node in &nodes {
        let m = node.metadata().expect("metadata");
        assert_eq!(m.cluster_id.as_ref(), Some(&cluster_id), "one cluster id");
        let me = m
            .brokers
            .iter()
            .find(|b| b.node_id.0 == node.id)
            .expect("lists itself");
        assert_eq!(
            me.port,
            i32::from(node.addr.port()),
            "its advertised endpoint"
        );
    }
    wait_for(&nodes, &all, "one agreed controller", |m| {
        m.controller_id == first.controller_id
    });
    let controller = first.controller_id.0;

    // `cluster status` asked of any voter reports the leader's view: three voters, three
    // live brokers; the metrics say the same.
    let status = cluster_status(ports[3 + 1]);
    assert_eq!(status["leader"], serde_json::json!(controller), "{status}");
    assert_eq!(
        status["voters"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );
    let brokers = status["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 3, "{status}");
    assert!(brokers.iter().all(|b| b["fenced"] == false), "{status}");
    let described: DescribeClusterResponse = Client::connect(nodes[2].addr).call(
        ApiKey::DescribeCluster,
        0,
        &DescribeClusterRequest::default(),
    );
    let mut described_ids: Vec<i32> = described.brokers.iter().map(|b| b.broker_id.0).collect();
    described_ids.sort();
    assert_eq!(
        described_ids,
        vec![1, 2, 3],
        "DescribeCluster lists them too"
    );
    assert_eq!(described.cluster_id.to_string(), cluster_id.to_string());
    check_routing(&nodes);
    let metrics = http_get(metrics_port, "/metrics");
    assert!(metrics.contains("ringbroker_brokers_live 3"), "{metrics}");
    assert!(
        metrics.contains("ringbroker_leaderless_partitions 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!("ringbroker_controller_leader {controller}")),
        "{metrics}"
    );

    // kill -9 of the active controller: the other two elect a new one and fence the dead
    // broker once its session ran out.
    let dead = (controller - 1) as usize;
    nodes[dead].kill9();
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != dead).collect();
    let survivor_ids: Vec<i32> = survivors.iter().map(|i| *i as i32 + 1).collect();
    wait_for(
        &nodes,
        &survivors,
        "a new controller among the survivors",
        |m| survivor_ids.contains(&m.controller_id.0),
    );
    wait_for(&nodes, &survivors, "the dead broker fenced", |m| {
        broker_ids(m) == survivor_ids
    });

    // The dead node comes back from its files and is live again (a new registration).
    let (child, addr) = spawn(
        controller,
        &nodes[dead].data,
        &nodes[dead].log,
        &settings(controller, ports[dead], ports[3 + dead], &voters),
    )
    .expect("restarts");
    nodes[dead].child = Some(child);
    nodes[dead].addr = addr;
    wait_for(&nodes, &all, "three live brokers again", |m| {
        broker_ids(m) == vec![1, 2, 3]
    });

    for (i, node) in nodes.iter_mut().enumerate() {
        let status = node.stop();
        assert!(
            status.is_some_and(|s| s.success()),
            "node {} stops cleanly ({status:?}):\n{}",
            node.id,
            node.log_tail()
        );
        if i == 0 {
            // The other two still form a quorum: the farewell heartbeat is committed.
            assert!(
                // The whole log: later lines may push it out of the tail.
                std::fs::read_to_string(&node.log)
                    .unwrap_or_default()
                    .contains("controlled shutdown: the controller fences this broker"),
                "controlled shutdown:\n{}",
                node.log_tail()
            );
        }
    }
}

/// A topic created through one node is placed over all three; each partition takes
/// produce requests at its leader only (NOT_LEADER_OR_FOLLOWER elsewhere), and a group's
/// calls at the leader of its offsets partition only (NOT_COORDINATOR elsewhere).
fn check_routing(nodes: &[Node]) {
    Client::connect(nodes[1].addr).create_topic("routed", 3, &[]);
    let leaders_now = || -> Option<Vec<i32>> {
        let mut all_topics = MetadataRequest::default();
        all_topics.topics = None;
        let m: MetadataResponse =
            Client::connect(nodes[2].addr).call(ApiKey::Metadata, 12, &all_topics);
        let t = m
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "routed"))?;
        let leaders: Vec<i32> = t.partitions.iter().map(|p| p.leader_id.0).collect();
        (leaders.len() == 3 && leaders.iter().all(|l| *l > 0)).then_some(leaders)
    };
    let leaders: Vec<i32> = (0..MAX_POLLS)
        .find_map(|_| {
            let found = leaders_now();
            if found.is_none() {
                std::thread::sleep(POLL);
            }
            found
        })
        .expect("the topic's leaders are known to every node");
    let mut sorted = leaders.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![1, 2, 3],
        "partition i on broker i mod n: {leaders:?}"
    );
    for (partition, leader) in leaders.iter().enumerate() {
        for node in nodes {
            // Until a node has applied the topic it answers UNKNOWN_TOPIC_OR_PARTITION, and
            // the leader NOT_LEADER_OR_FOLLOWER until its partition has taken the role (a
            // moment after the metadata names it).
            let want = if node.id == *leader { 0 } else { 6 };
            let code = (0..MAX_POLLS)
                .map(|_| {
                    Client::connect(node.addr)
                        .produce("routed", partition as i32, 3, 10)
                        .0
                })
                .find(|c| {
                    let settling = *c == 3 || (*c == 6 && want == 0);
                    !settling || {
                        std::thread::sleep(POLL);
                        false
                    }
                })
                .expect("the topic is applied everywhere");
            assert_eq!(
                code, want,
                "produce to partition {partition} at node {} (leader {leader})",
                node.id
            );
            if node.id != *leader {
                // KIP-951 (Produce v10+): where to go instead.
                let mut b = BatchBuilder::new(1_700_000_000_000);
                b.push(None, Some(b"hint"), 1_700_000_000_000, &[]);
                let resp = Client::connect(node.addr).produce_response(
                    10,
                    -1,
                    "routed",
                    partition as i32,
                    b.build(),
                );
                let p = &resp.responses[0].partition_responses[0];
                assert_eq!(
                    p.current_leader.leader_id.0, *leader,
                    "the hint names the leader"
                );
                let hinted: Vec<(i32, i32)> = resp
                    .node_endpoints
                    .iter()
                    .map(|e| (e.node_id.0, e.port))
                    .collect();
                let leader_port = i32::from(nodes[(*leader - 1) as usize].addr.port());
                assert_eq!(hinted, vec![(*leader, leader_port)], "and its endpoint");
            }
        }
    }
    let find_coordinators = || -> Vec<(i16, i32)> {
        nodes
            .iter()
            .map(|node| {
                let mut req = FindCoordinatorRequest::default();
                req.key = kafka_protocol::protocol::StrBytes::from_static_str("routing-group");
                let resp: FindCoordinatorResponse =
                    Client::connect(node.addr).call(ApiKey::FindCoordinator, 2, &req);
                (resp.error_code, resp.node_id.0)
            })
            .collect()
    };
    // COORDINATOR_NOT_AVAILABLE (15) until `__consumer_offsets` is created and applied
    // everywhere; clients retry it, and so does this check (bounded).
    let mut coordinators = find_coordinators();
    for _ in 0..MAX_POLLS {
        if coordinators.iter().all(|c| c.0 != 15) {
            break;
        }
        std::thread::sleep(POLL);
        coordinators = find_coordinators();
    }
    let coordinator = coordinators[0].1;
    assert!(
        coordinators.iter().all(|c| *c == (0, coordinator)) && coordinator > 0,
        "every node names the same coordinator: {coordinators:?}"
    );
    for node in nodes {
        let mut req = OffsetFetchRequest::default();
        req.group_id = kafka_protocol::messages::GroupId(
            kafka_protocol::protocol::StrBytes::from_static_str("routing-group"),
        );
        let fetch = || -> OffsetFetchResponse {
            Client::connect(node.addr).call(ApiKey::OffsetFetch, 3, &req)
        };
        let mut resp = fetch();
        // The named coordinator may still be loading the partition (14) or, its own view a
        // step behind the others', not lead it yet (16): clients retry both (bounded).
        for _ in 0..MAX_POLLS {
            if node.id != coordinator || ![14, 16].contains(&resp.error_code) {
                break;
            }
            std::thread::sleep(POLL);
            resp = fetch();
        }
        let want = if node.id == coordinator { 0 } else { 16 };
        assert_eq!(
            resp.error_code, want,
            "OffsetFetch at node {} (coordinator {coordinator})",
            node.id
        );
    }
}

#[test]
fn a_data_dir_of_another_cluster_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(2);
    let voters = format!("1@127.0.0.1:{}", ports[1]);
    let data = root.path().join("data");
    let log = root.path().join("node.log");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("meta.properties"),
        "version=1\ncluster.id=someOtherCluster\nnode.id=1\n",
    )
    .expect("write");
    let mut s = settings(1, ports[0], ports[1], &voters);
    s.push("cluster.id=thisCluster".to_string());
    let err = spawn(1, &data, &log, &s).map(|(mut c, _)| {
        let _ = c.kill();
        let _ = c.wait();
    });
    assert!(err.is_err(), "a node of another cluster must not start");
    let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
    assert!(
        text.contains("belongs to cluster someOtherCluster"),
        "the error names the other cluster:\n{text}"
    );
}

/// `ringbroker topic describe ... --format json` at `bootstrap`: the listed partitions as
/// (topic, partition), sorted.
fn described(bootstrap: &str, args: &[&str]) -> Vec<(String, i64)> {
    let d = describe_cli(bootstrap, args, "json");
    let d: serde_json::Value = serde_json::from_str(&d).expect("JSON");
    let mut listed: Vec<(String, i64)> = d["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .map(|p| {
            let topic = p["topic"].as_str().expect("topic").to_string();
            (topic, p["partition"].as_i64().expect("partition"))
        })
        .collect();
    listed.sort();
    listed
}

fn describe_cli(bootstrap: &str, args: &[&str], format: &str) -> String {
    let mut all = vec!["--format", format];
    all.extend_from_slice(args);
    topic_cli(bootstrap, "describe", &all)
}

fn create_cli(bootstrap: &str, args: &[&str]) {
    topic_cli(bootstrap, "create", args);
}

/// `ringbroker topic <command> <args>` at `bootstrap`, which must succeed: its stdout.
fn topic_cli(bootstrap: &str, command: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
        .args(["topic", command, "--timeout", "5s", "-b", bootstrap])
        .args(args)
        .output()
        .expect("run ringbroker topic");
    assert!(
        out.status.success(),
        "topic {command} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Every partition of every topic, as (topic, partition, replicas), from `node`'s Metadata.
fn all_partitions(node: &Node) -> Vec<(String, i64, Vec<i32>)> {
    let mut all_topics = MetadataRequest::default();
    all_topics.topics = None;
    let m: MetadataResponse = Client::connect(node.addr).call(ApiKey::Metadata, 12, &all_topics);
    m.topics
        .iter()
        .flat_map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            t.partitions.iter().map(move |p| {
                let replicas = p.replica_nodes.iter().map(|r| r.0).collect();
                (name.clone(), i64::from(p.partition_index), replicas)
            })
        })
        .collect()
}

/// Polls `describe` until it lists what `want` says; the last listing when it never does.
fn wait_listed(
    describe: impl Fn() -> Vec<(String, i64)>,
    want: impl Fn() -> Vec<(String, i64)>,
) -> Result<(), Vec<(String, i64)>> {
    let mut seen = Vec::new();
    for _ in 0..MAX_POLLS {
        seen = describe();
        if seen == want() {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
    Err(seen)
}

/// kill -9 of a broker that is not the controller: once it is fenced it leaves the ISRs,
/// and `topic describe --under-replicated-partitions` lists exactly the partitions it was a
/// replica of (of every topic, or of the one named); none before the fault. A topic on it
/// alone is unavailable (and under min ISR, as Kafka counts a partition without a leader);
/// one of min.insync.replicas=2 at RF 3 is at min ISR, one without the dead broker is in
/// no listing.
#[test]
fn describe_filters_list_the_partitions_a_killed_broker_left_behind() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(6);
    let mut nodes = start_three(root.path(), &ports, &voters(&ports), None);
    let all = [0, 1, 2];
    wait_for(&nodes, &all, "three live brokers and a controller", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let controller = nodes[0].metadata().expect("metadata").controller_id.0;
    // Not the controller: the test is of describe, not of a controller failover.
    let dead_id = (1..=3)
        .rev()
        .find(|id| *id != controller)
        .expect("a broker");
    let dead = (dead_id - 1) as usize;
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != dead).collect();
    let (a, b) = (survivors[0] as i32 + 1, survivors[1] as i32 + 1);
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr.to_string()).collect();
    let before = addrs.join(",");
    let after = format!("{},{}", addrs[survivors[0]], addrs[survivors[1]]);
    create_cli(
        &before,
        &[
            "spread",
            "-p",
            "3",
            "-r",
            "3",
            "-c",
            "min.insync.replicas=2",
        ],
    );
    create_cli(
        &before,
        &["pair", "--replica-assignment", &format!("{a}:{b},{b}:{a}")],
    );
    create_cli(
        &before,
        &["solo", "--replica-assignment", &dead_id.to_string()],
    );

    let under_replicated = |at: &str, topic: Option<&str>| {
        let mut args: Vec<&str> = topic.into_iter().collect();
        args.push("--under-replicated-partitions");
        described(at, &args)
    };
    // A new topic's ISR is its replicas: nothing is listed without a fault (a bounded wait,
    // for other topics, __consumer_offsets, may still be placed).
    if let Err(seen) = wait_listed(|| under_replicated(&before, None), Vec::new) {
        panic!("under-replicated before any fault: {seen:?}");
    }
    assert_eq!(described(&before, &["--unavailable-partitions"]), []);
    assert_eq!(described(&before, &["--under-min-isr-partitions"]), []);
    assert_eq!(
        described(&before, &["spread", "--at-min-isr-partitions"]),
        []
    );
    let healthy = describe_cli(&before, &["--under-replicated-partitions"], "table");
    assert_eq!(
        healthy, "",
        "a table of nothing is no output, as kafka-topics.sh"
    );

    nodes[dead].kill9();
    // The partitions the dead broker shares with others lose it from their ISR. Which those
    // are is read with each poll: __consumer_offsets may be created meanwhile.
    let affected = || {
        let mut affected: Vec<(String, i64)> = all_partitions(&nodes[survivors[0]])
            .into_iter()
            .filter(|(_, _, replicas)| replicas.len() > 1 && replicas.contains(&dead_id))
            .map(|(topic, partition, _)| (topic, partition))
            .collect();
        affected.sort();
        affected
    };
    if let Err(seen) = wait_listed(|| under_replicated(&after, None), affected) {
        panic!(
            "under-replicated after a kill -9 of broker {dead_id}: {seen:?}, want {:?}",
            affected()
        );
    }
    let spread: Vec<(String, i64)> = (0..3).map(|p| ("spread".to_string(), p)).collect();
    assert_eq!(under_replicated(&after, Some("spread")), spread);
    assert_eq!(under_replicated(&after, Some("pair")), []);
    assert_eq!(
        under_replicated(&after, Some("solo")),
        [],
        "its one replica is its ISR"
    );
    let solo = vec![("solo".to_string(), 0)];
    // Leadership moved off the dead broker where another replica was in sync.
    assert_eq!(described(&after, &["--unavailable-partitions"]), solo);
    // spread: ISR 2 of min.insync.replicas 2; pair: 2 of the broker default, 1.
    assert_eq!(
        described(&after, &["spread", "--at-min-isr-partitions"]),
        spread
    );
    assert_eq!(described(&after, &["pair", "--at-min-isr-partitions"]), []);
    assert_eq!(
        described(&after, &["--under-min-isr-partitions"]),
        solo,
        "no leader counts as under min ISR"
    );

    // The table flags them, and so does the full description.
    let table = describe_cli(
        &after,
        &["spread", "--under-replicated-partitions"],
        "table",
    );
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        rows.iter().all(|r| r.ends_with("under-replicated")),
        "{table}"
    );
    let full = describe_cli(&after, &["spread"], "json");
    let full: serde_json::Value = serde_json::from_str(&full).expect("JSON");
    for p in full["partitions"].as_array().expect("partitions") {
        assert_eq!(p["under_replicated"], true, "{p}");
        assert_eq!(p["unavailable"], false, "{p}");
        assert_eq!(p["at_min_isr"], true, "{p}");
        let isr = p["isr"].as_array().expect("isr");
        assert!(!isr.contains(&serde_json::json!(dead_id)), "{p}");
    }
}

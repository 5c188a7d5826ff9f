//! Thread-per-core replication (CLUSTER.md placement): with two shards per broker, follower
//! shard s fetches from leader shard s. Each follower shard connects from a local port the
//! leader's listeners steer to the same shard, so no follower fetch needs a mesh hop on the
//! leader: every broker's `ringbroker_replica_fetch_partitions_forwarded_total` stays 0 while
//! `..._local_total` grows. Without the steering each replication connection lands on either
//! shard (SO_REUSEPORT's hash), and with four such connections into each broker at least one
//! lands wrong almost always. Followers fetch in fetch sessions (KIP-227), which the leaders'
//! `ringbroker_fetch_sessions` show. Every wait is a bounded number of polls; every process is
//! stopped at the end (and by `Drop` on a failure).

mod broker;

use std::net::SocketAddr;

use broker::cluster::{
    broker_ids, free_ports, settings_with_metrics, start_node_sharded, topic_partitions, voters,
    wait_for, Node, MAX_POLLS, POLL,
};
use broker::metrics::{scrape, sum};
use broker::Client;

const TOPIC: &str = "steered";
const PARTITIONS: i32 = 4;
const SHARDS: usize = 2;

/// Leader of each partition of the topic, if every partition has all three replicas in sync.
fn leaders_in_sync(node: &Node) -> Option<Vec<i32>> {
    let partitions = topic_partitions(node, TOPIC)?;
    (partitions.len() == PARTITIONS as usize
        && partitions
            .iter()
            .all(|p| p.leader_id.0 > 0 && p.isr_nodes.len() == 3))
    .then(|| partitions.iter().map(|p| p.leader_id.0).collect())
}

#[test]
fn follower_shards_fetch_from_the_same_shard_of_the_leader() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(9);
    let voters = voters(&ports);
    let metrics: Vec<SocketAddr> = (0..3)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], ports[6 + i])))
        .collect();
    let nodes: Vec<Node> = (0..3)
        .map(|i| {
            let id = i as i32 + 1;
            let settings =
                settings_with_metrics(id, ports[i], ports[3 + i], &voters, Some(ports[6 + i]));
            start_node_sharded(root.path(), id, &settings, SHARDS)
        })
        .collect();
    wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
        broker_ids(m) == vec![1, 2, 3] && m.controller_id.0 > 0
    });
    let created = Client::connect(nodes[0].addr).try_create_replicated_topic(
        TOPIC,
        PARTITIONS,
        3,
        &[],
        false,
    );
    assert_eq!(created.error_code, 0, "create: {:?}", created.error_message);
    let mut leaders = None;
    for _ in 0..MAX_POLLS {
        leaders = leaders_in_sync(&nodes[0]);
        if leaders.is_some() {
            break;
        }
        std::thread::sleep(POLL);
    }
    let leaders = leaders.expect("every partition led with three replicas in sync");
    let at = |id: i32| nodes.iter().find(|n| n.id == id).expect("node").addr;

    // acks=all: each answer means both followers fetched the batch.
    for round in 0..5 {
        for (partition, &leader) in leaders.iter().enumerate() {
            let mut acked = false;
            for _ in 0..MAX_POLLS {
                let (code, _) =
                    Client::connect(at(leader)).produce(TOPIC, partition as i32, 10, 50);
                if code == 0 {
                    acked = true;
                    break;
                }
                std::thread::sleep(POLL);
            }
            assert!(
                acked,
                "round {round}: partition {partition} never acknowledged"
            );
        }
    }

    for (node, metrics) in nodes.iter().zip(&metrics) {
        let text = scrape(*metrics);
        let local = sum(&text, "ringbroker_replica_fetch_partitions_local_total", "");
        let forwarded = sum(
            &text,
            "ringbroker_replica_fetch_partitions_forwarded_total",
            "",
        );
        let leads = leaders.contains(&node.id);
        assert!(
            !leads || local > 0.0,
            "node {} leads a partition but served no follower fetch locally",
            node.id
        );
        // Followers fetch in KIP-227 sessions: each leader holds theirs.
        let sessions = sum(&text, "ringbroker_fetch_sessions", "");
        assert!(
            !leads || sessions >= 1.0,
            "node {} leads a partition but holds no follower fetch session",
            node.id
        );
        assert_eq!(
            forwarded, 0.0,
            "node {}: follower fetches crossed shards ({local} partitions read locally)",
            node.id
        );
    }
}

//! `__consumer_offsets` in cluster mode is created with `offsets.topic.replication.factor`
//! replicas, never fewer (Kafka's rule; issue 32, finding 7): with two of three brokers up it
//! is not created (FindCoordinator answers COORDINATOR_NOT_AVAILABLE, a warning says why),
//! and once the third registers it is created with three replicas per partition. Before, the
//! factor was capped by the live brokers after 10 s, leaving every group's offsets on two
//! brokers for good. Every wait is a bounded number of polls; every process is stopped at the
//! end (and by `Drop` on a failure).

mod broker;

use broker::cluster::{
    broker_ids, free_ports, settings, start_node, topic_partitions, voters, wait_for, Node,
    MAX_POLLS, POLL,
};
use broker::Client;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use kafka_protocol::messages::ApiKey;

const OFFSETS_TOPIC: &str = "__consumer_offsets";
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// Longer than the 10 s after which the earlier release created the topic anyway.
const WAIT_WITH_TWO: std::time::Duration = std::time::Duration::from_secs(15);

fn find_coordinator(node: &Node) -> i16 {
    let mut req = FindCoordinatorRequest::default();
    req.key = kafka_protocol::protocol::StrBytes::from_static_str("offsets-topic-group");
    let resp: FindCoordinatorResponse =
        Client::connect(node.addr).call(ApiKey::FindCoordinator, 2, &req);
    resp.error_code
}

#[test]
fn offsets_topic_waits_for_its_replication_factor() {
    let root = tempfile::tempdir().unwrap();
    let ports = free_ports(6);
    let voters = voters(&ports);
    let node_settings = |i: usize| settings(i as i32 + 1, ports[i], ports[3 + i], &voters);
    let mut nodes: Vec<Node> = (0..2)
        .map(|i| start_node(root.path(), i as i32 + 1, &node_settings(i)))
        .collect();
    wait_for(&nodes, &[0, 1], "brokers 1 and 2 registered", |m| {
        broker_ids(m) == [1, 2]
    });

    let until = std::time::Instant::now() + WAIT_WITH_TWO;
    while std::time::Instant::now() < until {
        for node in &nodes {
            if let Some(partitions) = topic_partitions(node, OFFSETS_TOPIC) {
                let replicas: Vec<usize> =
                    partitions.iter().map(|p| p.replica_nodes.len()).collect();
                panic!(
                    "{OFFSETS_TOPIC} created with two of three brokers live: replicas {replicas:?}"
                );
            }
            assert_eq!(find_coordinator(node), COORDINATOR_NOT_AVAILABLE);
        }
        std::thread::sleep(POLL);
    }
    let log: String = nodes
        .iter()
        .map(|n| std::fs::read_to_string(&n.log).unwrap_or_default())
        .collect();
    assert!(
        log.contains("needs 3 live brokers"),
        "no line tells the operator why groups are unavailable"
    );

    nodes.push(start_node(root.path(), 3, &node_settings(2)));
    let three_replicas = |node: &Node| {
        topic_partitions(node, OFFSETS_TOPIC).is_some_and(|partitions| {
            !partitions.is_empty() && partitions.iter().all(|p| p.replica_nodes.len() == 3)
        })
    };
    let mut created = false;
    for _ in 0..MAX_POLLS {
        created = nodes.iter().all(three_replicas);
        if created {
            break;
        }
        std::thread::sleep(POLL);
    }
    assert!(
        created,
        "{OFFSETS_TOPIC} with three replicas not seen everywhere after {MAX_POLLS} polls"
    );
    for node in &nodes {
        let mut answered = COORDINATOR_NOT_AVAILABLE;
        for _ in 0..MAX_POLLS {
            answered = find_coordinator(node);
            if answered != COORDINATOR_NOT_AVAILABLE {
                break;
            }
            std::thread::sleep(POLL);
        }
        assert_eq!(answered, 0, "FindCoordinator on node {}", node.id);
    }
    for node in &mut nodes {
        node.stop();
    }
}

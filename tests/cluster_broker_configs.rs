//! Dynamic broker configs in cluster mode (Kafka's `kafka-configs --entity-type brokers`): a
//! change sent to any broker is decided by the controller, becomes metadata records, and
//! reaches every broker: the cluster-wide default (`--entity-default`) on all of them, a
//! broker's own only on it; both survive a restart. Every wait is a bounded number of polls;
//! every process is stopped at the end (and by `Drop` on a failure).

mod broker;

use broker::cluster::{
    broker_ids, free_ports, start_three, voters, wait_for, Node, MAX_POLLS, POLL,
};
use broker::{s, Client};
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::IncrementalAlterConfigsResponse;
use kafka_protocol::messages::ApiKey;

const BROKER: i8 = 4;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const SET: i8 = 0;
const NAME: &str = "log.retention.ms";

/// What each node describes once the default and broker 2's own are set.
const BOTH_SET: &[(usize, &str, i8)] = &[
    (0, "111111", DYNAMIC_DEFAULT_BROKER_CONFIG),
    (1, "222222", DYNAMIC_BROKER_CONFIG),
    (2, "111111", DYNAMIC_DEFAULT_BROKER_CONFIG),
];

/// IncrementalAlterConfigs of `NAME` on broker resource `resource` ("" the default), sent to
/// `node`: its error code.
fn set(node: &Node, resource: &str, value: &str) -> i16 {
    let mut cfg = AlterableConfig::default();
    cfg.name = s(NAME);
    cfg.config_operation = SET;
    cfg.value = Some(s(value));
    let mut r = AlterConfigsResource::default();
    r.resource_type = BROKER;
    r.resource_name = s(resource);
    r.configs = vec![cfg];
    let mut req = IncrementalAlterConfigsRequest::default();
    req.resources = vec![r];
    let resp: IncrementalAlterConfigsResponse =
        Client::connect(node.addr).call(ApiKey::IncrementalAlterConfigs, 1, &req);
    resp.responses[0].error_code
}

/// `NAME` as `node` describes itself: (value, source).
fn described(node: &Node) -> Option<(String, i8)> {
    std::net::TcpStream::connect_timeout(&node.addr, POLL).ok()?;
    let mut r = DescribeConfigsResource::default();
    r.resource_type = BROKER;
    r.resource_name = s(&node.id.to_string());
    r.configuration_keys = Some(vec![s(NAME)]);
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![r];
    let resp: DescribeConfigsResponse =
        Client::connect(node.addr).call(ApiKey::DescribeConfigs, 4, &req);
    let result = resp.results.into_iter().next()?;
    let c = result
        .configs
        .into_iter()
        .find(|c| c.name.as_str() == NAME)?;
    Some((c.value?.to_string(), c.config_source))
}

/// Polls until every node in `expected` describes `NAME` as given.
fn wait_described(nodes: &[Node], expected: &[(usize, &str, i8)]) {
    for _ in 0..MAX_POLLS {
        if expected
            .iter()
            .all(|(i, v, source)| described(&nodes[*i]) == Some((v.to_string(), *source)))
        {
            return;
        }
        std::thread::sleep(POLL);
    }
    let seen: Vec<_> = expected
        .iter()
        .map(|(i, ..)| described(&nodes[*i]))
        .collect();
    panic!("expected {expected:?}, described {seen:?} after {MAX_POLLS} polls");
}

#[test]
fn dynamic_broker_configs_reach_every_broker_and_survive_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let ports = free_ports(6);
    let voters = voters(&ports);
    let mut nodes = start_three(root.path(), &ports, &voters, None);
    wait_for(&nodes, &[0, 1, 2], "three live brokers", |m| {
        broker_ids(m) == [1, 2, 3]
    });
    assert_eq!(set(&nodes[0], "", "111111"), 0, "the cluster-wide default");
    wait_described(
        &nodes,
        &[
            (0, "111111", DYNAMIC_DEFAULT_BROKER_CONFIG),
            (1, "111111", DYNAMIC_DEFAULT_BROKER_CONFIG),
            (2, "111111", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ],
    );
    // Broker 2's own, sent to it (Kafka refuses another broker's id).
    assert_eq!(set(&nodes[1], "2", "222222"), 0, "broker 2's own");
    wait_described(&nodes, BOTH_SET);
    for node in nodes.iter_mut() {
        node.stop();
    }
    let mut nodes = start_three(root.path(), &ports, &voters, None);
    wait_for(&nodes, &[0, 1, 2], "three live brokers again", |m| {
        broker_ids(m) == [1, 2, 3]
    });
    wait_described(&nodes, BOTH_SET);
    for node in nodes.iter_mut() {
        node.stop();
    }
}

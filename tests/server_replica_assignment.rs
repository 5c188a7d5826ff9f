//! Manual replica assignments against the real broker, over raw requests: CreateTopics with
//! `assignments` (librdkafka's `replica_assignment`) and CreatePartitions with `assignments`
//! are checked as Kafka's controller checks them and honoured; `validate_only` answers without
//! creating anything. Every wait is bounded; the broker is stopped by Drop.

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicResult, CreateTopicsResponse,
};
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::ResponseError;

mod broker;
use broker::{topic_name, Broker, Client};

const NONE: i16 = 0;

/// (partition, brokers) of a manual assignment.
type Assignment<'a> = &'a [(i32, &'a [i32])];

/// A refused creation: (topic, num_partitions, replication_factor, assignment, code, message).
type Refused<'a> = (&'a str, i32, i16, Assignment<'a>, i16, &'a str);

/// CreateTopics v7 of one topic with a manual assignment (partition, brokers).
fn create(
    c: &mut Client,
    name: &str,
    partitions: i32,
    replication_factor: i16,
    assignment: Assignment,
    validate_only: bool,
) -> CreatableTopicResult {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = replication_factor;
    t.assignments = assignment
        .iter()
        .map(|(p, brokers)| {
            let mut a = CreatableReplicaAssignment::default();
            a.partition_index = *p;
            a.broker_ids = brokers.iter().copied().map(BrokerId).collect();
            a
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 5000;
    req.validate_only = validate_only;
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    resp.topics.into_iter().next().expect("one result")
}

fn message(r: &CreatableTopicResult) -> String {
    r.error_message
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default()
}

#[test]
fn create_topics_with_a_replica_assignment() {
    let broker = Broker::start(&["node.id=3"]);
    let mut c = broker.client();
    let three: Assignment = &[(0, &[3]), (1, &[3]), (2, &[3])];

    // validate_only: the answer a creation would get, and nothing created.
    let r = create(&mut c, "manual", -1, -1, three, true);
    assert_eq!(r.error_code, NONE, "{}", message(&r));
    assert_eq!((r.num_partitions, r.replication_factor), (3, 1));
    let (code, _, _) = c.topic_metadata("manual");
    assert_eq!(code, ResponseError::UnknownTopicOrPartition.code());

    let r = create(&mut c, "manual", -1, -1, three, false);
    assert_eq!(r.error_code, NONE, "{}", message(&r));
    assert_eq!((r.num_partitions, r.replication_factor), (3, 1));
    let (code, partitions, _) = c.topic_metadata("manual");
    assert_eq!((code, partitions), (NONE, 3));
    for p in 0..3 {
        assert_eq!(c.produce("manual", p, 1, 10).0, NONE, "partition {p}");
    }

    let invalid_assignment = ResponseError::InvalidReplicaAssignment.code();
    let cases: &[Refused] = &[
        (
            "counts-too",
            3,
            -1,
            three,
            ResponseError::InvalidRequest.code(),
            "Both numPartitions or replicationFactor and replicasAssignments were set",
        ),
        (
            "rf-too",
            -1,
            1,
            three,
            ResponseError::InvalidRequest.code(),
            "cannot be used at the same time",
        ),
        (
            "twice",
            -1,
            -1,
            &[(0, &[3]), (0, &[3])],
            invalid_assignment,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            "gap",
            -1,
            -1,
            &[(0, &[3]), (2, &[3])],
            invalid_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            "from-one",
            -1,
            -1,
            &[(1, &[3])],
            invalid_assignment,
            "consecutive 0-based",
        ),
        (
            "unknown-broker",
            -1,
            -1,
            &[(0, &[3, 4])],
            invalid_assignment,
            "includes broker 4, but no such broker is registered",
        ),
        (
            "duplicate-replica",
            -1,
            -1,
            &[(0, &[3, 3])],
            invalid_assignment,
            "includes the broker 3 more than once",
        ),
        (
            "empty",
            -1,
            -1,
            &[(0, &[])],
            invalid_assignment,
            "empty replica list",
        ),
    ];
    for (name, partitions, rf, assignment, code, says) in cases {
        for validate_only in [true, false] {
            let r = create(&mut c, name, *partitions, *rf, assignment, validate_only);
            assert_eq!(r.error_code, *code, "{name}: {}", message(&r));
            assert!(message(&r).contains(says), "{name}: {}", message(&r));
            assert_eq!(r.num_partitions, -1, "{name}");
        }
        let (code, _, _) = c.topic_metadata(name);
        assert_eq!(
            code,
            ResponseError::UnknownTopicOrPartition.code(),
            "{name}"
        );
    }
}

#[test]
fn create_partitions_with_assignments() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("grow", 1, &[]);

    let (code, msg) = c.create_partitions("grow", 3, Some(vec![vec![0], vec![0]]), true);
    assert_eq!(code, NONE, "{msg:?}");
    assert_eq!(c.topic_metadata("grow").1, 1, "validate_only adds nothing");

    let invalid_assignment = ResponseError::InvalidReplicaAssignment.code();
    for (assignment, says) in [
        (
            vec![vec![0]],
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            vec![vec![0], vec![1]],
            "includes broker 1, but no such broker is registered",
        ),
        (
            vec![vec![0], vec![0, 0]],
            "includes the broker 0 more than once",
        ),
        (vec![vec![0], vec![]], "empty replica list"),
    ] {
        let (code, msg) = c.create_partitions("grow", 3, Some(assignment), false);
        let msg = msg.unwrap_or_default();
        assert_eq!(code, invalid_assignment, "{msg}");
        assert!(msg.contains(says), "{msg}");
    }
    assert_eq!(c.topic_metadata("grow").1, 1);

    let (code, msg) = c.create_partitions("grow", 3, Some(vec![vec![0], vec![0]]), false);
    assert_eq!(code, NONE, "{msg:?}");
    assert_eq!(c.topic_metadata("grow").1, 3);
    assert_eq!(c.produce("grow", 2, 1, 10).0, NONE);
}

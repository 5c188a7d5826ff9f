//! A partition whose log cannot be opened is offline: the broker still starts and serves every
//! other partition, that one answers KAFKA_STORAGE_ERROR, Metadata lists it without a leader
//! and with this broker offline, and CreateTopics says which partitions could not be opened.
//! Every wait is bounded; the broker is stopped with SIGTERM and must exit 0.

use std::path::Path;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::{MetadataResponse, MetadataResponsePartition};
use kafka_protocol::messages::{ApiKey, BrokerId};
use ringbroker::protocol::batch_builder::BatchBuilder;

mod broker;
use broker::{topic_name, Broker, Client};

const NONE: i16 = 0;
const LEADER_NOT_AVAILABLE: i16 = 5;
const KAFKA_STORAGE_ERROR: i16 = 56;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// Metadata v12 for one topic: its partitions, by index.
fn partitions(c: &mut Client, topic: &str) -> Vec<MetadataResponsePartition> {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(topic_name(topic));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let resp: MetadataResponse = c.call(ApiKey::Metadata, 12, &req);
    let mut parts = resp.topics[0].partitions.clone();
    parts.sort_by_key(|p| p.partition_index);
    parts
}

/// Every request kind on `partition` answers `code`.
fn assert_partition_answers(c: &mut Client, topic: &str, partition: i32, code: i16) {
    assert_eq!(c.produce(topic, partition, 1, 10).0, code, "produce");
    assert_eq!(c.fetch(topic, partition, 0).0, code, "fetch");
    assert_eq!(c.list_offset(topic, partition, -1).0, code, "list offsets");
    assert_eq!(
        c.delete_records(topic, partition, 0).0,
        code,
        "delete records"
    );
}

/// Makes a partition's log one that recovery refuses: a second segment starting inside the
/// first one.
fn make_unrecoverable(dir: &Path) {
    let first = dir.join(format!("{:020}.log", 0));
    let overlapping = dir.join(format!("{:020}.log", 1));
    std::fs::copy(&first, &overlapping).expect("copy a segment over an overlapping offset");
}

#[test]
fn a_partition_that_cannot_open_is_offline_and_the_others_are_served() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("t", 4, &[]);
    for p in 0..4 {
        assert_eq!(c.produce("t", p, 3, 10), (NONE, 0), "partition {p}");
    }
    drop(c);
    broker.assert_clean_stop();
    make_unrecoverable(&broker.data_dir().join("t-1"));

    // Before: the first log that failed stopped its shard, and with it the broker.
    broker.spawn();
    let mut c = broker.client();
    for p in [0, 2, 3] {
        assert_eq!(
            c.produce("t", p, 1, 10),
            (NONE, 3),
            "partition {p} still takes writes"
        );
        let (code, _, hw, bytes) = c.fetch("t", p, 0);
        assert_eq!((code, hw), (NONE, 4), "partition {p}");
        assert!(bytes > 0, "partition {p} serves its records");
    }
    assert_partition_answers(&mut c, "t", 1, KAFKA_STORAGE_ERROR);
    // Kafka's metadata for a partition whose only replica is offline: no leader.
    let parts = partitions(&mut c, "t");
    assert_eq!(parts.len(), 4);
    let node = parts[0].leader_id;
    for p in &parts {
        if p.partition_index == 1 {
            assert_eq!(p.error_code, LEADER_NOT_AVAILABLE);
            assert_eq!(p.leader_id, BrokerId(-1));
            assert_eq!(p.offline_replicas, vec![node]);
        } else {
            assert_eq!((p.error_code, p.leader_id), (NONE, node), "{p:?}");
            assert!(p.offline_replicas.is_empty());
        }
    }
    let log = broker.full_log();
    assert!(log.contains("partition is OFFLINE"), "{log}");
    assert!(
        log.contains("before the previous segment ends"),
        "the cause: {log}"
    );
    assert!(log.contains("offline_partitions=1"), "startup line: {log}");

    // The partition stays out of the way of a clean stop.
    drop(c);
    broker.stop_cleanly();
}

#[test]
fn create_topics_reports_partitions_that_cannot_be_opened() {
    let broker = Broker::start(&[]);
    // A plain file where partition 1's directory must go.
    std::fs::write(broker.data_dir().join("new-1"), b"not a directory").expect("write");
    let mut c = broker.client();
    let mut topic = CreatableTopic::default();
    topic.name = topic_name("new");
    topic.num_partitions = 3;
    topic.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.topics = vec![topic];
    req.timeout_ms = 5000;
    let resp: CreateTopicsResponse = c.call(ApiKey::CreateTopics, 7, &req);
    let result = &resp.topics[0];
    // Before: NONE, as if every partition could be written.
    assert_eq!(result.error_code, KAFKA_STORAGE_ERROR, "{result:?}");
    let message = result.error_message.as_ref().map(|m| m.to_string());
    let message = message.unwrap_or_default();
    assert!(
        message.contains("partition(s) 1 could not be opened") && message.contains("new-1"),
        "{message}"
    );

    // The topic exists; its other partitions are served.
    assert_eq!(c.produce("new", 0, 2, 10), (NONE, 0));
    assert_eq!(c.produce("new", 2, 2, 10), (NONE, 0));
    assert_partition_answers(&mut c, "new", 1, KAFKA_STORAGE_ERROR);
    let parts = partitions(&mut c, "new");
    let codes: Vec<i16> = parts.iter().map(|p| p.error_code).collect();
    assert_eq!(codes, vec![NONE, LEADER_NOT_AVAILABLE, NONE]);

    // CreatePartitions says so too.
    std::fs::write(broker.data_dir().join("new-4"), b"not a directory").expect("write");
    let (code, message) = c.create_partitions("new", 5, None, false);
    let message = message.unwrap_or_default();
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{message}");
    assert!(
        message.contains("partition(s) 4 could not be opened"),
        "{message}"
    );
    assert_eq!(
        c.produce("new", 3, 1, 10),
        (NONE, 0),
        "the other new partition"
    );

    // Deleting the topic forgets the offline partition; a new topic of the name is whole.
    let (code, _) = c.delete_topic(Some("new"), uuid::Uuid::nil());
    assert_eq!(code, NONE);
    assert!(
        !broker.data_dir().join("new-1").exists(),
        "renamed for deletion"
    );
    c.create_topic("new", 5, &[]);
    for p in 0..5 {
        assert_eq!(c.produce("new", p, 1, 10), (NONE, 0), "partition {p}");
    }
    drop(c);
    broker.stop_cleanly();
}

/// A failed fsync while serving (injected with `RINGBROKER_FAILPOINT=fsync-eio:t-1`): the
/// produce that needed it fails with KAFKA_STORAGE_ERROR, the partition goes offline (every
/// later request answers 56, Metadata has no leader for it), the other partition keeps
/// serving, and the broker stops cleanly.
#[test]
fn a_failed_fsync_takes_the_partition_offline_while_the_others_serve() {
    let broker = Broker::start_with_args(
        &[],
        &[("RINGBROKER_FAILPOINT", "fsync-eio:t-1")],
        &["ringbroker.acks.all.fsync=true"],
    );
    let mut c = broker.client();
    c.create_topic("t", 2, &[]);
    assert_eq!(c.produce("t", 0, 2, 10), (NONE, 0), "partition 0 syncs");
    let (code, _) = c.produce("t", 1, 2, 10);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "the produce whose fsync failed");
    // The next fsync would not fail the same way on a real disk, but may vouch for lost
    // pages: the partition stays offline.
    assert_partition_answers(&mut c, "t", 1, KAFKA_STORAGE_ERROR);
    // Produce v3 predates KAFKA_STORAGE_ERROR (KIP-112): NOT_LEADER_OR_FOLLOWER, as Kafka.
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(None, Some(b"v"), 1_700_000_000_000, &[]);
    assert_eq!(
        c.produce_records(3, -1, "t", 1, b.build()).0,
        NOT_LEADER_OR_FOLLOWER
    );
    // So does Fetch v5 (KAFKA_STORAGE_ERROR from v6 on).
    assert_eq!(c.fetch_v("t", 1, 0, 5).0, NOT_LEADER_OR_FOLLOWER);
    assert_eq!(
        c.produce("t", 0, 1, 10),
        (NONE, 2),
        "partition 0 still serves"
    );
    let parts = partitions(&mut c, "t");
    let node = parts[0].leader_id;
    assert_eq!(parts[1].error_code, LEADER_NOT_AVAILABLE);
    assert_eq!(parts[1].leader_id, BrokerId(-1));
    assert_eq!(parts[1].offline_replicas, vec![node]);
    assert_eq!((parts[0].error_code, parts[0].leader_id), (NONE, node));
    let log = broker.full_log();
    assert!(log.contains("storage failure"), "{log}");
    drop(c);
    broker.stop_cleanly();
}

//! OffsetForLeaderEpoch, DescribeLogDirs and DescribeProducers over the wire, against Kafka's
//! answers for a one-node cluster whose only leader epoch is 0.

use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::describe_log_dirs_request::{
    DescribableLogDirTopic, DescribeLogDirsRequest,
};
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::describe_producers_request::{
    DescribeProducersRequest, TopicRequest,
};
use kafka_protocol::messages::describe_producers_response::DescribeProducersResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderEpochRequest, OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::OffsetForLeaderEpochResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::ResponseError;

mod broker;
use broker::{topic_name, Broker, Client};
use ringbroker::protocol::batch_builder::BatchBuilder;

/// OffsetForLeaderEpoch v2+ for partitions of one topic, each (partition, current epoch,
/// epoch): per partition (error, leader epoch, end offset).
fn epoch_end(
    c: &mut Client,
    version: i16,
    topic: &str,
    partitions: &[(i32, i32, i32)],
) -> Vec<(i16, i32, i64)> {
    let mut t = OffsetForLeaderTopic::default();
    t.topic = topic_name(topic);
    for &(partition, current, epoch) in partitions {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = partition;
        p.current_leader_epoch = current;
        p.leader_epoch = epoch;
        t.partitions.push(p);
    }
    let mut req = OffsetForLeaderEpochRequest::default();
    req.replica_id = kafka_protocol::messages::BrokerId(-1);
    req.topics = vec![t];
    let resp: OffsetForLeaderEpochResponse = c.call(ApiKey::OffsetForLeaderEpoch, version, &req);
    assert_eq!(resp.topics.len(), 1);
    resp.topics[0]
        .partitions
        .iter()
        .zip(partitions)
        .map(|(r, &(partition, ..))| {
            assert_eq!(r.partition, partition);
            (r.error_code, r.leader_epoch, r.end_offset)
        })
        .collect()
}

/// OffsetForLeaderEpoch v0/v1 (hand-coded) for partition 0 of `topic`: (error, leader epoch
/// (v1 only, else -1), end offset).
fn epoch_end_legacy(c: &mut Client, version: i16, topic: &str, epoch: i32) -> (i16, i32, i64) {
    let mut b = BytesMut::new();
    b.put_i32(1);
    b.put_i16(topic.len() as i16);
    b.put_slice(topic.as_bytes());
    b.put_i32(1);
    b.put_i32(0);
    b.put_i32(epoch);
    let mut r = c.call_raw(ApiKey::OffsetForLeaderEpoch, version, &b);
    assert_eq!(r.get_i32(), 1);
    let n = r.get_i16() as usize;
    r.advance(n);
    assert_eq!(r.get_i32(), 1);
    let error = r.get_i16();
    assert_eq!(r.get_i32(), 0);
    let leader_epoch = if version >= 1 { r.get_i32() } else { -1 };
    let end = r.get_i64();
    assert!(r.is_empty(), "{} bytes left", r.len());
    (error, leader_epoch, end)
}

#[test]
fn offset_for_leader_epoch_answers_the_log_end_for_epoch_zero_in_every_version() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("ep", 2, &[]);
    assert_eq!(c.produce("ep", 0, 5, 10).0, 0);
    assert_eq!(c.produce("ep", 0, 2, 10).0, 0);

    let unknown_epoch = ResponseError::UnknownLeaderEpoch.code();
    let fenced = ResponseError::FencedLeaderEpoch.code();
    for version in 2..=4 {
        assert_eq!(
            epoch_end(
                &mut c,
                version,
                "ep",
                &[(0, -1, 0), (1, 0, 0), (0, 0, 3), (0, 1, 0), (0, -2, 0)]
            ),
            vec![
                // Epoch 0 is the current one: it ends at the log end.
                (0, 0, 7),
                (0, 0, 0),
                // Newer than any epoch: undefined.
                (0, -1, -1),
                // The client believes in a newer leader epoch, or an older one.
                (unknown_epoch, -1, -1),
                (fenced, -1, -1),
            ],
            "v{version}"
        );
    }
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        epoch_end(&mut c, 4, "ep", &[(9, -1, 0)]),
        vec![(unknown, -1, -1)]
    );
    assert_eq!(
        epoch_end(&mut c, 4, "nope", &[(0, -1, 0)]),
        vec![(unknown, -1, -1)]
    );
    assert_eq!(epoch_end_legacy(&mut c, 0, "ep", 0), (0, -1, 7));
    assert_eq!(epoch_end_legacy(&mut c, 1, "ep", 0), (0, 0, 7));
    assert_eq!(epoch_end_legacy(&mut c, 1, "ep", 2), (0, -1, -1));
    assert_eq!(epoch_end_legacy(&mut c, 1, "nope", 0), (unknown, -1, -1));
    // DeleteRecords moves the log start, not the end of epoch 0.
    assert_eq!(c.delete_records("ep", 0, 4), (0, 4));
    assert_eq!(epoch_end(&mut c, 4, "ep", &[(0, 0, 0)]), vec![(0, 0, 7)]);
    broker.stop_cleanly();
}

/// DescribeLogDirs: the one log dir's (error, path, total, usable) and its (topic,
/// partition, size) entries, sorted.
#[allow(clippy::type_complexity)]
fn log_dirs(
    c: &mut Client,
    version: i16,
    topics: Option<&[(&str, &[i32])]>,
) -> ((i16, String, i64, i64), Vec<(String, i32, i64)>) {
    let mut req = DescribeLogDirsRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|(name, partitions)| {
                let mut t = DescribableLogDirTopic::default();
                t.topic = topic_name(name);
                t.partitions = partitions.to_vec();
                t
            })
            .collect()
    });
    // v0 is v1 on the wire; the crate knows v1+.
    let resp: DescribeLogDirsResponse = if version == 0 {
        let mut body = BytesMut::new();
        req.encode(&mut body, 1).unwrap();
        let mut raw = c.call_raw(ApiKey::DescribeLogDirs, 0, &body);
        DescribeLogDirsResponse::decode(&mut raw, 1).unwrap()
    } else {
        c.call(ApiKey::DescribeLogDirs, version, &req)
    };
    assert_eq!(resp.error_code, 0);
    assert_eq!(resp.results.len(), 1, "one log dir");
    let dir = &resp.results[0];
    let mut sizes = Vec::new();
    for t in &dir.topics {
        for p in &t.partitions {
            assert_eq!((p.offset_lag, p.is_future_key), (0, false));
            sizes.push((t.name.0.to_string(), p.partition_index, p.partition_size));
        }
    }
    sizes.sort();
    (
        (
            dir.error_code,
            dir.log_dir.to_string(),
            dir.total_bytes,
            dir.usable_bytes,
        ),
        sizes,
    )
}

#[test]
fn describe_log_dirs_reports_partition_sizes_that_grow_with_produce() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("ld", 2, &[]);
    let only_ld: &[(&str, &[i32])] = &[("ld", &[0, 1, 7]), ("missing", &[0])];
    let (dir, sizes) = log_dirs(&mut c, 4, Some(only_ld));
    assert_eq!(dir.0, 0);
    let data_dir = std::fs::canonicalize(broker.data_dir()).unwrap();
    assert_eq!(
        std::fs::canonicalize(&dir.1).unwrap(),
        data_dir,
        "the log dir is the data dir"
    );
    assert!(
        dir.2 > 0 && dir.3 > 0 && dir.3 <= dir.2,
        "v4 space: {dir:?}"
    );
    // Unknown partitions and topics are left out, as Kafka does.
    assert_eq!(sizes, vec![("ld".into(), 0, 0), ("ld".into(), 1, 0)]);

    assert_eq!(c.produce("ld", 0, 10, 100).0, 0);
    let (_, after_one) = log_dirs(&mut c, 4, Some(only_ld));
    let first = after_one[0].2;
    assert!(first > 1000, "ten 100-byte records: {after_one:?}");
    assert_eq!(after_one[1], ("ld".into(), 1, 0));
    assert_eq!(c.produce("ld", 0, 10, 100).0, 0);
    for version in 0..=4 {
        let (dir, sizes) = log_dirs(&mut c, version, Some(only_ld));
        assert!(sizes[0].2 > first, "v{version}: the size grew: {sizes:?}");
        if version < 4 {
            assert_eq!((dir.2, dir.3), (-1, -1), "v{version} has no space fields");
        }
    }
    // Null topics: every partition, internal topics too.
    let (_, all) = log_dirs(&mut c, 4, None);
    assert!(
        all.iter()
            .any(|(t, p, size)| t == "ld" && *p == 0 && *size > first),
        "{all:?}"
    );
    assert!(
        all.iter().any(|(t, ..)| t == "__consumer_offsets"),
        "{all:?}"
    );
    broker.stop_cleanly();
}

/// DescribeProducers v0 of partitions of one topic: per partition (error, [(producer id,
/// epoch, last sequence, last timestamp, coordinator epoch, txn start)]).
#[allow(clippy::type_complexity)]
fn producers(
    c: &mut Client,
    topic: &str,
    partitions: &[i32],
) -> Vec<(i16, Vec<(i64, i32, i32, i64, i32, i64)>)> {
    let mut t = TopicRequest::default();
    t.name = topic_name(topic);
    t.partition_indexes = partitions.to_vec();
    let mut req = DescribeProducersRequest::default();
    req.topics = vec![t];
    let resp: DescribeProducersResponse = c.call(ApiKey::DescribeProducers, 0, &req);
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let mut active: Vec<_> = p
                .active_producers
                .iter()
                .map(|a| {
                    (
                        a.producer_id.0,
                        a.producer_epoch,
                        a.last_sequence,
                        a.last_timestamp,
                        a.coordinator_epoch,
                        a.current_txn_start_offset,
                    )
                })
                .collect();
            active.sort();
            (p.error_code, active)
        })
        .collect()
}

#[test]
fn describe_producers_lists_the_idempotent_producers_of_a_partition() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("dp", 2, &[]);
    let resp: InitProducerIdResponse = c.call(
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(resp.error_code, 0);
    let (pid, epoch) = (resp.producer_id.0, resp.producer_epoch);
    let base_ts = 1_700_000_000_000;
    for (seq, count) in [(0, 3), (3, 2)] {
        let mut b = BatchBuilder::new(base_ts).producer(pid, epoch, seq);
        for i in 0..count {
            b.push(None, Some(b"v"), base_ts + i64::from(seq) + i, &[]);
        }
        assert_eq!(c.produce_records(9, -1, "dp", 0, b.build()).0, 0);
    }
    // A plain produce is no producer.
    assert_eq!(c.produce("dp", 1, 2, 10).0, 0);
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        producers(&mut c, "dp", &[0, 1, 5]),
        vec![
            (0, vec![(pid, i32::from(epoch), 4, base_ts + 4, -1, -1)]),
            (0, vec![]),
            (unknown, vec![]),
        ]
    );
    assert_eq!(producers(&mut c, "nope", &[0]), vec![(unknown, vec![])]);
    broker.stop_cleanly();
}

#[test]
fn an_offline_partition_answers_kafka_storage_error() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("off", 2, &[]);
    for p in 0..2 {
        assert_eq!(c.produce("off", p, 3, 10).0, 0);
    }
    drop(c);
    broker.assert_clean_stop();
    // A second segment starting inside the first: recovery refuses the log.
    let dir = broker.data_dir().join("off-1");
    std::fs::copy(
        dir.join(format!("{:020}.log", 0)),
        dir.join(format!("{:020}.log", 1)),
    )
    .unwrap();
    broker.spawn();
    let mut c = broker.client();
    let storage = ResponseError::KafkaStorageError.code();
    assert_eq!(
        epoch_end(&mut c, 4, "off", &[(0, 0, 0), (1, 0, 0)]),
        vec![(0, 0, 3), (storage, -1, -1)]
    );
    let status: Vec<i16> = producers(&mut c, "off", &[0, 1])
        .into_iter()
        .map(|(code, _)| code)
        .collect();
    assert_eq!(status, vec![0, storage]);
    // DescribeLogDirs leaves the offline partition out: its size cannot be read.
    let (_, sizes) = log_dirs(&mut c, 4, Some(&[("off", &[0, 1])]));
    assert_eq!(sizes.len(), 1, "{sizes:?}");
    assert_eq!(sizes[0].1, 0);
    drop(c);
    broker.stop_cleanly();
}

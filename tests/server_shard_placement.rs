//! Partition placement across restarts with a different shard count: a data directory written
//! by a broker with N shards is fully served by one with M shards (every partition opened,
//! every record readable, every group's committed offsets fetchable), in both directions.

use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::offset_fetch_request::{OffsetFetchRequest, OffsetFetchRequestTopic};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::BatchHeader;

mod broker;
use broker::{fetch_request, s, topic_name, until_coordinator_ready, Broker, Client};

const PARTITIONS: i32 = 4;
const BATCHES: i64 = 25;
const RECORDS_PER_BATCH: i64 = 10;
/// Enough groups that their `__consumer_offsets` partitions fall on every shard.
const GROUPS: usize = 12;

/// Produces `BATCHES` batches to each partition of `topic` (acks=1); every one must succeed.
fn produce_everywhere(c: &mut Client, topic: &str) {
    for p in 0..PARTITIONS {
        for _ in 0..BATCHES {
            let mut b = BatchBuilder::new(1_700_000_000_000);
            for i in 0..RECORDS_PER_BATCH {
                b.push(None, Some(b"value"), 1_700_000_000_000 + i, &[]);
            }
            let (code, _) = c.produce_records(7, 1, topic, p, b.build());
            assert_eq!(code, 0, "produce to {topic}-{p}");
        }
    }
}

/// Reads `topic`-`partition` from offset 0 to its end: (error code, records read).
fn read_all(c: &mut Client, topic: &str, partition: i32) -> (i16, i64) {
    let mut offset = 0i64;
    let mut records = 0i64;
    for _ in 0..1000 {
        let req = fetch_request(topic, &[(partition, offset)], 1 << 20, 1 << 20);
        let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
        let r = &resp.responses[0].partitions[0];
        if r.error_code != 0 {
            return (r.error_code, records);
        }
        let mut data: &[u8] = r.records.as_deref().unwrap_or_default();
        if data.is_empty() {
            return (0, records);
        }
        while let Ok(h) = BatchHeader::parse(data) {
            if h.total_len() > data.len() {
                break;
            }
            records += i64::from(h.record_count);
            offset = h.next_offset();
            data = &data[h.total_len()..];
        }
    }
    panic!("{topic}-{partition} did not end within 1000 fetches");
}

fn commit(c: &mut Client, group: &str, topic: &str, offset: i64) -> Result<(), i16> {
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = (0..PARTITIONS)
        .map(|p| {
            let mut part = OffsetCommitRequestPartition::default();
            part.partition_index = p;
            part.committed_offset = offset + i64::from(p);
            part.committed_leader_epoch = -1;
            part
        })
        .collect();
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
    match resp.topics[0].partitions.iter().find(|p| p.error_code != 0) {
        Some(p) => Err(p.error_code),
        None => Ok(()),
    }
}

fn committed(c: &mut Client, group: &str, topic: &str) -> Result<Vec<i64>, i16> {
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(topic);
    t.partition_indexes = (0..PARTITIONS).collect();
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(s(group));
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req);
    if resp.error_code != 0 {
        return Err(resp.error_code);
    }
    let mut out: Vec<(i32, i64)> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    out.sort_unstable();
    Ok(out.into_iter().map(|(_, o)| o).collect())
}

fn group(g: usize) -> String {
    format!("placement-group-{g}")
}

/// Every partition of every topic is served with all its records, and every group's offsets
/// are there.
fn check_everything_served(broker: &Broker, topics: &[(&str, i64)], shards: usize) {
    let mut c = broker.client();
    for (topic, batches) in topics {
        for p in 0..PARTITIONS {
            let (code, records) = read_all(&mut c, topic, p);
            assert_eq!(code, 0, "{shards} shards: fetch {topic}-{p}");
            assert_eq!(
                records,
                batches * RECORDS_PER_BATCH,
                "{shards} shards: records of {topic}-{p}"
            );
        }
    }
    for g in 0..GROUPS {
        let offsets = until_coordinator_ready(|| committed(&mut c, &group(g), "orders"));
        let expected: Vec<i64> = (0..PARTITIONS)
            .map(|p| g as i64 * 100 + i64::from(p))
            .collect();
        assert_eq!(offsets, expected, "{shards} shards: group {g}");
    }
}

#[test]
fn restarts_with_fewer_then_more_shards_serve_every_partition() {
    let mut broker = Broker::start(&[
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
    ]);
    let mut c = broker.client();
    c.create_topic("orders", PARTITIONS, &[]);
    produce_everywhere(&mut c, "orders");
    for g in 0..GROUPS {
        until_coordinator_ready(|| commit(&mut c, &group(g), "orders", g as i64 * 100));
    }
    check_everything_served(&broker, &[("orders", BATCHES)], 2);

    // 2 → 1: the partitions (and offsets partitions) of shard 1 move to shard 0.
    broker.set_shards(1);
    broker.restart();
    check_everything_served(&broker, &[("orders", BATCHES)], 1);
    let mut c = broker.client();
    produce_everywhere(&mut c, "orders");
    c.create_topic("created-on-one", PARTITIONS, &[]);
    produce_everywhere(&mut c, "created-on-one");

    // 1 → 3: spread over more shards than the data was written with.
    broker.set_shards(3);
    broker.restart();
    check_everything_served(
        &broker,
        &[("orders", 2 * BATCHES), ("created-on-one", BATCHES)],
        3,
    );
    let mut c = broker.client();
    produce_everywhere(&mut c, "created-on-one");
    check_everything_served(
        &broker,
        &[("orders", 2 * BATCHES), ("created-on-one", 2 * BATCHES)],
        3,
    );
    broker.stop_cleanly();
}

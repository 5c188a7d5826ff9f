//! When a Fetch is held (a long poll) and when it is answered at once, by Kafka's rules
//! (`ReplicaManager.fetchMessages`, `DelayedFetch`): held until `max_wait_ms`, however long,
//! unless `min_bytes` are readable, and ended early by data produced meanwhile; answered at
//! once with min_bytes 0. The requests are the ones kafka-go's `Conn` sends (Fetch v10,
//! sessionless, leader epoch -1) and Debian's kafka-go 0.2.1 (Fetch v2, hand-encoded).
//! The elapsed-time checks are correctness bounds (not before the max wait), with room for
//! a loaded machine on the other side.

use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId};
use ringbroker::protocol::batch_builder::BatchBuilder;

mod broker;
use broker::{fetch_request, Broker, Client};

/// kafka-go's `Conn.ReadBatchWith` at Fetch v10: replica -1, session 0 / epoch -1, leader
/// epoch -1, max bytes the same for the response and the partition.
fn kafka_go_fetch(
    topic: &str,
    partition: i32,
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
) -> FetchRequest {
    let mut req = fetch_request(topic, &[(partition, 0)], max_bytes, max_bytes);
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = min_bytes;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics[0].partitions[0].current_leader_epoch = -1;
    req
}

/// Sends `req` at Fetch v10 and waits for its answer: (elapsed, bytes of records).
fn timed_fetch(c: &mut Client, req: &FetchRequest) -> (Duration, usize) {
    let started = Instant::now();
    let resp: FetchResponse = c.call(ApiKey::Fetch, 10, req);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0, "fetch error");
    (started.elapsed(), p.records.as_ref().map_or(0, |r| r.len()))
}

fn produce_one(c: &mut Client, topic: &str, partition: i32, value: &[u8]) {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(None, Some(value), 1_700_000_000_000, &[]);
    assert_eq!(c.produce_records(7, 1, topic, partition, b.build()).0, 0);
}

/// At least 80% of `max_wait`: the answer did not come before the max wait.
fn held_until(elapsed: Duration, max_wait: Duration, what: &str) {
    assert!(
        elapsed >= max_wait.mul_f64(0.8),
        "{what}: answered after {elapsed:?}, before the max wait of {max_wait:?}"
    );
}

#[test]
fn an_empty_partition_holds_the_fetch_until_its_max_wait() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    // Two partitions on two shards: one served by this connection's shard, one by the other.
    c.create_topic("empty", 2, &[]);
    let max_wait = Duration::from_millis(600);
    for partition in [0, 1] {
        let req = kafka_go_fetch("empty", partition, 600, 1, 130);
        let (elapsed, bytes) = timed_fetch(&mut c, &req);
        assert_eq!(bytes, 0);
        held_until(elapsed, max_wait, &format!("v10, partition {partition}"));

        // kafka-go 0.2.1: Fetch v2 (replica, max wait, min bytes, one topic, one partition).
        let mut b = BytesMut::new();
        b.put_i32(-1);
        b.put_i32(600);
        b.put_i32(1);
        b.put_i32(1);
        b.put_i16(5);
        b.put_slice(b"empty");
        b.put_i32(1);
        b.put_i32(partition);
        b.put_i64(0);
        b.put_i32(130);
        let started = Instant::now();
        c.call_raw(ApiKey::Fetch, 2, &b);
        held_until(
            started.elapsed(),
            max_wait,
            &format!("v2, partition {partition}"),
        );
    }
}

#[test]
fn data_produced_during_the_wait_ends_it() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("arrives", 2, &[]);
    for partition in [0, 1] {
        let mut producer = broker.client();
        let req = kafka_go_fetch("arrives", partition, 20_000, 1, 1 << 20);
        let correlation = c.send(ApiKey::Fetch, 10, &req);
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        produce_one(&mut producer, "arrives", partition, b"now");
        let resp: FetchResponse = c.receive(ApiKey::Fetch, 10, correlation);
        let elapsed = started.elapsed();
        let p = &resp.responses[0].partitions[0];
        assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
        assert!(
            elapsed < Duration::from_secs(10),
            "partition {partition}: the produce did not end the wait ({elapsed:?})"
        );
    }
}

/// min_bytes is a floor on what is read, not capped by the response's max_bytes: one record
/// larger than max_bytes (answered whole) is still fewer bytes than min_bytes, so the fetch
/// is held for its max wait, as Kafka holds it.
#[test]
fn min_bytes_above_max_bytes_still_waits() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("floor", 1, &[]);
    produce_one(&mut c, "floor", 0, &[7u8; 300]);
    let req = kafka_go_fetch("floor", 0, 800, 10_000, 100);
    let (elapsed, bytes) = timed_fetch(&mut c, &req);
    assert!(bytes > 300, "the record, whole: {bytes} bytes");
    held_until(elapsed, Duration::from_millis(800), "min_bytes 10000");
}

/// min_bytes 0 is always met: Kafka answers at once, even an empty partition.
#[test]
fn min_bytes_zero_answers_at_once() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("zero", 1, &[]);
    let req = kafka_go_fetch("zero", 0, 10_000, 0, 1 << 20);
    let (elapsed, bytes) = timed_fetch(&mut c, &req);
    assert_eq!(bytes, 0);
    assert!(
        elapsed < Duration::from_secs(5),
        "held {elapsed:?} for min_bytes 0"
    );
}

/// A max wait past 30 s is kept too (kafka-go's `Conn` sends i32::MAX ms when it has no
/// deadline): still held after 31 s, then answered by a produce.
#[test]
fn a_long_max_wait_is_not_cut_short() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("long", 1, &[]);
    let mut producer = broker.client();
    let req = kafka_go_fetch("long", 0, i32::MAX, 1, 1 << 20);
    let correlation = c.send(ApiKey::Fetch, 10, &req);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(31));
    produce_one(&mut producer, "long", 0, b"late");
    let resp: FetchResponse = c.receive(ApiKey::Fetch, 10, correlation);
    let p = &resp.responses[0].partitions[0];
    assert!(
        p.records.as_ref().is_some_and(|r| !r.is_empty()),
        "answered empty after {:?}, before the data came",
        started.elapsed()
    );
}

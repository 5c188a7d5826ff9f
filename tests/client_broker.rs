//! The project's own client (src/client) against the real broker binary: every codec round
//! trips (produce with codec X, consume, equal records, and the stored batch says codec X),
//! acks 0/1/all, idempotent producers, batching by size, consumers from earliest/latest/offset,
//! and typed errors. Every wait is bounded.

mod broker;

use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use broker::{Broker, WAIT};
use ringbroker::client::admin::ensure_topic;
use ringbroker::client::cluster::{EARLIEST, LATEST};
use ringbroker::client::compression::parse_compression;
use ringbroker::client::{
    ClientConfig, ClientError, Cluster, Consumer, ConsumerConfig, ConsumerRecord, DeliveryResult,
    OffsetSpec, Producer, ProducerConfig, ProducerRecord, RecordMetadata,
};

fn cluster(broker: &Broker) -> Cluster {
    let mut config = ClientConfig::new(&broker.addr.to_string());
    config.request_timeout = WAIT;
    Cluster::connect(config).expect("connect to the broker")
}

/// Sends `values` to `partition`, flushes, and returns each record's outcome in send order.
fn produce_all(
    producer: &Producer,
    topic: &str,
    partition: i32,
    values: &[Vec<u8>],
) -> Vec<DeliveryResult> {
    let results = Arc::new(Mutex::new(vec![None; values.len()]));
    for (i, v) in values.iter().enumerate() {
        let results = results.clone();
        let headers: [(&str, &[u8]); 1] = [("index", &v[..1])];
        producer
            .send(
                ProducerRecord::new(topic, v)
                    .partition(partition)
                    .key(b"key")
                    .headers(&headers),
                Box::new(move |r| results.lock().unwrap()[i] = Some(r)),
            )
            .expect("send");
    }
    assert_eq!(producer.flush(WAIT), 0, "every record completes");
    let results = results.lock().unwrap();
    results
        .iter()
        .map(|r| r.clone().expect("callback called"))
        .collect()
}

/// Reads until `n` records arrived (bounded).
fn consume_n(consumer: &mut Consumer, n: usize) -> Vec<ConsumerRecord> {
    let deadline = std::time::Instant::now() + WAIT;
    let mut out = Vec::new();
    while out.len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of {n} records",
            out.len()
        );
        out.extend(consumer.poll(Duration::from_millis(500)).expect("poll"));
    }
    out
}

fn values(n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut v = format!("{i:06}-").into_bytes();
            v.resize(len, b'a' + (i % 26) as u8);
            v
        })
        .collect()
}

#[test]
fn every_codec_round_trips_through_the_broker() {
    let broker = Broker::start(&[]);
    let admin = cluster(&broker);
    for name in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let codec = parse_compression(name).unwrap();
        let topic = format!("codec-{name}");
        assert_eq!(ensure_topic(&admin, &topic, 2).unwrap(), 2);
        let config = ProducerConfig {
            compression: codec,
            linger: Duration::from_millis(20),
            batch_size: 8 << 10,
            ..ProducerConfig::default()
        };
        let producer = Producer::new(cluster(&broker), config).unwrap();
        let sent = values(300, 200);
        let results = produce_all(&producer, &topic, 1, &sent);
        let offsets: Vec<i64> = results
            .iter()
            .map(|r| r.as_ref().expect("delivered").offset)
            .collect();
        assert_eq!(offsets, (0..300).collect::<Vec<i64>>(), "{name}");

        let mut consumer = Consumer::new(cluster(&broker), ConsumerConfig::default()).unwrap();
        consumer.keep_batches(true);
        consumer.assign(&topic, &[1], OffsetSpec::Earliest).unwrap();
        let got = consume_n(&mut consumer, 300);
        assert_eq!(got.len(), 300, "{name}");
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.value.as_ref(), Some(&sent[i]), "{name} record {i}");
            assert_eq!(r.key.as_deref(), Some(&b"key"[..]));
            assert_eq!(
                r.headers,
                vec![("index".to_string(), Some(sent[i][..1].to_vec()))]
            );
        }
        let batches = consumer.take_batches();
        assert!(
            batches.len() > 1,
            "{name}: several batches (batch size 8 KiB)"
        );
        for b in &batches {
            assert_eq!(
                b.header.compression().unwrap(),
                codec,
                "{name}: stored codec"
            );
        }
        assert_eq!(
            admin.list_offsets(&topic, &[0, 1], LATEST).unwrap(),
            vec![0, 300]
        );
    }
}

#[test]
fn acks_idempotence_and_offsets() {
    let broker = Broker::start(&[]);
    let admin = cluster(&broker);
    ensure_topic(&admin, "acks", 1).unwrap();
    for acks in [0i16, 1, -1] {
        let producer = Producer::new(
            cluster(&broker),
            ProducerConfig {
                acks,
                ..ProducerConfig::default()
            },
        )
        .unwrap();
        let results = produce_all(&producer, "acks", 0, &values(50, 10));
        for r in &results {
            let meta = r.as_ref().expect("delivered");
            assert_eq!(meta.partition, 0);
            if acks == 0 {
                assert_eq!(meta.offset, -1, "acks=0 has no offsets");
            }
        }
    }
    // acks=0 is fire and forget: wait (bounded) until the broker stored those records.
    let deadline = std::time::Instant::now() + WAIT;
    while admin.list_offsets("acks", &[0], LATEST).unwrap() != vec![150] {
        assert!(std::time::Instant::now() < deadline, "150 records stored");
        std::thread::sleep(Duration::from_millis(20));
    }

    let producer = Producer::new(
        cluster(&broker),
        ProducerConfig {
            idempotence: true,
            batch_size: 1 << 10,
            ..ProducerConfig::default()
        },
    )
    .unwrap();
    assert!(producer.producer_id().is_some_and(|(id, _)| id >= 0));
    let results = produce_all(&producer, "acks", 0, &values(400, 50));
    let offsets: Vec<i64> = results.iter().map(|r| r.as_ref().unwrap().offset).collect();
    assert_eq!(offsets, (150..550).collect::<Vec<i64>>());

    let mut consumer = Consumer::new(cluster(&broker), ConsumerConfig::default()).unwrap();
    consumer.keep_batches(true);
    consumer
        .assign("acks", &[0], OffsetSpec::Offset(540))
        .unwrap();
    let got = consume_n(&mut consumer, 10);
    assert_eq!(got.first().map(|r| r.offset), Some(540));
    assert!(consumer
        .take_batches()
        .iter()
        .all(|b| b.header.has_producer_id()));
    assert_eq!(admin.list_offsets("acks", &[0], EARLIEST).unwrap(), vec![0]);

    // Latest: only what comes after.
    let mut tail = Consumer::new(cluster(&broker), ConsumerConfig::default()).unwrap();
    tail.assign("acks", &[0], OffsetSpec::Latest).unwrap();
    let one = produce_all(&producer, "acks", 0, &values(1, 5));
    assert!(matches!(
        one[0],
        Ok(RecordMetadata {
            partition: 0,
            offset: 550
        })
    ));
    assert_eq!(consume_n(&mut tail, 1)[0].offset, 550);
}

#[test]
fn errors_are_typed_and_named() {
    let broker = Broker::start(&[]);
    let admin = cluster(&broker);
    ensure_topic(&admin, "small", 1).unwrap();
    // A partition that does not exist is refused before anything is queued.
    let producer = Producer::new(cluster(&broker), ProducerConfig::default()).unwrap();
    let err = producer
        .send(
            ProducerRecord::new("small", b"x").partition(3),
            Box::new(|_| {}),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        ClientError::NoSuchPartition { partition: 3, .. }
    ));
    // A record over the broker's message.max.bytes: MESSAGE_TOO_LARGE, not retried.
    let (tx, rx) = mpsc::channel();
    let big = vec![7u8; 2 << 20];
    producer
        .send(
            ProducerRecord::new("small", &big).partition(0),
            Box::new(move |r| tx.send(r).unwrap()),
        )
        .unwrap();
    let outcome = rx.recv_timeout(WAIT).expect("callback");
    let err = outcome.expect_err("too large");
    assert_eq!(err.kind_name(), "MESSAGE_TOO_LARGE", "{err}");
    // Nothing listens on port 1: a bootstrap error that says so.
    let err = Cluster::connect(ClientConfig::new("127.0.0.1:1"))
        .err()
        .expect("no broker");
    assert!(matches!(err, ClientError::Bootstrap(_)), "{err}");
}

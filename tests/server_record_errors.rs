//! What topic configs do to produced batches, against the real broker over raw requests:
//! records without a key on a compacted topic and timestamps out of the allowed range fail
//! the whole batch with per-record errors (KIP-467, Produce v8+); `compression.type` makes
//! the broker store batches with the topic's codec, idempotent batches included. Every wait is
//! bounded; the broker is stopped by Drop.

use bytes::Bytes;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, ProduceResponse};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use ringbroker::client::compression::compress_batch;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::decompressed_records::decode_records_decompressed;
use ringbroker::protocol::record_batch::{validate, Compression};

mod broker;
use broker::{fetch_request, topic_name, Broker, Client};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}

/// One batch: (key, timestamp) per record.
fn batch(records: &[(Option<&[u8]>, i64)]) -> Bytes {
    let mut b = BatchBuilder::new(records[0].1);
    for (k, t) in records {
        b.push(*k, Some(b"value"), *t, &[]);
    }
    b.build()
}

/// `plain` with its records compressed with gzip.
fn gzipped(plain: &Bytes) -> Bytes {
    compress_batch(plain.clone(), Compression::Gzip).expect("gzip")
}

/// Produce of one batch to partition 0 at `version`, acks=1.
fn produce(c: &mut Client, version: i16, topic: &str, records: Bytes) -> PartitionProduceResponse {
    let mut p = PartitionProduceData::default();
    p.index = 0;
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = topic_name(topic);
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = 1;
    req.timeout_ms = 5000;
    req.topic_data = vec![t];
    let resp: ProduceResponse = c.call(ApiKey::Produce, version, &req);
    resp.responses[0].partition_responses[0].clone()
}

fn indexes(p: &PartitionProduceResponse) -> Vec<i32> {
    p.record_errors.iter().map(|e| e.batch_index).collect()
}

fn log_end(c: &mut Client, topic: &str) -> i64 {
    let (code, offset) = c.list_offset(topic, 0, -1);
    assert_eq!(code, 0);
    offset
}

/// The stored batches of partition 0 from offset 0 (one Fetch v11).
fn stored(c: &mut Client, topic: &str) -> Bytes {
    let req = fetch_request(topic, &[(0, 0)], 1 << 20, 1 << 20);
    let resp: kafka_protocol::messages::fetch_response::FetchResponse =
        c.call(ApiKey::Fetch, 11, &req);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.records.clone().unwrap_or_default()
}

#[test]
fn compacted_topics_refuse_records_without_keys() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("keys", 1, &[("cleanup.policy", "compact")]);
    let t = now_ms();
    let bad = batch(&[(Some(b"a"), t), (None, t), (Some(b"c"), t), (None, t)]);
    for records in [bad.clone(), gzipped(&bad)] {
        let p = produce(&mut c, 9, "keys", records);
        assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
        assert_eq!(indexes(&p), [1, 3]);
        let first = p.record_errors[0]
            .batch_index_error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert_eq!(
            first,
            "Compacted topic cannot accept message without key in topic partition keys-0."
        );
        let message = p.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(message.contains("2 record errors"), "{message}");
    }
    // v7 has neither field, but the batch fails all the same.
    let p = produce(&mut c, 7, "keys", bad);
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(
        log_end(&mut c, "keys"),
        0,
        "nothing of a refused batch is stored"
    );

    let good = batch(&[(Some(b"a"), t), (Some(b"b"), t)]);
    for records in [good.clone(), gzipped(&good)] {
        let p = produce(&mut c, 9, "keys", records);
        assert_eq!(p.error_code, 0, "{:?}", p.error_message);
        assert!(p.record_errors.is_empty());
    }
    assert_eq!(log_end(&mut c, "keys"), 4);
    // A topic that only deletes takes records without keys.
    c.create_topic("plain", 1, &[]);
    assert_eq!(
        produce(&mut c, 9, "plain", batch(&[(None, t)])).error_code,
        0
    );
}

#[test]
fn timestamps_out_of_range_are_invalid_timestamp() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let hour = 3_600_000;
    c.create_topic(
        "ts",
        1,
        &[
            ("message.timestamp.before.max.ms", "3600000"),
            ("message.timestamp.after.max.ms", "3600000"),
        ],
    );
    c.create_topic(
        "ts-old",
        1,
        &[("message.timestamp.difference.max.ms", "3600000")],
    );
    c.create_topic(
        "ts-lat",
        1,
        &[
            ("message.timestamp.before.max.ms", "3600000"),
            ("message.timestamp.type", "LogAppendTime"),
        ],
    );
    let t = now_ms();
    let bad = batch(&[
        (None, t),
        (None, t - 3 * hour),
        (None, t),
        (None, t + 3 * hour),
    ]);
    for topic in ["ts", "ts-old"] {
        for records in [bad.clone(), gzipped(&bad)] {
            let p = produce(&mut c, 9, topic, records);
            assert_eq!(
                p.error_code,
                ResponseError::InvalidTimestamp.code(),
                "{topic}"
            );
            assert_eq!(indexes(&p), [1, 3], "{topic}");
            let m = p.record_errors[0]
                .batch_index_error_message
                .as_ref()
                .map(|m| m.to_string())
                .unwrap_or_default();
            assert!(m.contains(&format!("Timestamp {}", t - 3 * hour)), "{m}");
            assert!(m.contains("is out of range"), "{m}");
        }
        assert_eq!(log_end(&mut c, topic), 0);
        let ok = batch(&[(None, t), (None, t - hour / 2)]);
        assert_eq!(produce(&mut c, 9, topic, ok).error_code, 0, "{topic}");
    }
    // LogAppendTime topics stamp batches themselves: producer timestamps are not checked.
    assert_eq!(produce(&mut c, 9, "ts-lat", bad).error_code, 0);
}

#[test]
fn compression_type_recompresses_on_append() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("gz", 1, &[("compression.type", "gzip")]);
    c.create_topic("raw", 1, &[("compression.type", "uncompressed")]);
    let t = now_ms();
    let plain = batch(&[(Some(b"k1"), t), (None, t + 1), (Some(b"k3"), t + 2)]);
    let expected = decode_records_decompressed(&plain, 1 << 20).expect("decode");

    // An idempotent producer's batch keeps its producer id, epoch and sequence.
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = kafka_protocol::messages::ProducerId(-1);
    req.producer_epoch = -1;
    let init: InitProducerIdResponse = c.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let mut b = BatchBuilder::new(t).producer(pid, epoch, 0);
    for (i, r) in expected.iter().enumerate() {
        b.push(r.key.as_deref(), r.value.as_deref(), t + i as i64, &[]);
    }
    let idempotent = b.build();

    assert_eq!(produce(&mut c, 9, "gz", plain.clone()).error_code, 0);
    let p = produce(&mut c, 9, "gz", idempotent.clone());
    assert_eq!((p.error_code, p.base_offset), (0, 3));
    let retry = produce(&mut c, 9, "gz", idempotent);
    assert_eq!(
        (retry.error_code, retry.base_offset),
        (0, 3),
        "a retry is a duplicate"
    );
    assert_eq!(log_end(&mut c, "gz"), 6);

    let data = stored(&mut c, "gz");
    let first = validate(&data).expect("a valid stored batch");
    assert_eq!(first.compression(), Ok(Compression::Gzip));
    let second = validate(&data[first.total_len()..]).expect("second batch");
    assert_eq!(second.compression(), Ok(Compression::Gzip));
    assert_eq!(
        (
            second.producer_id,
            second.producer_epoch,
            second.base_sequence
        ),
        (pid, epoch, 0)
    );
    let decoded = decode_records_decompressed(&data, 1 << 20).expect("decode");
    let values: Vec<_> = decoded.iter().map(|r| (&r.key, &r.value)).collect();
    let want: Vec<_> = expected.iter().map(|r| (&r.key, &r.value)).collect();
    assert_eq!(values, want);

    // And the other way round: a gzip batch is stored uncompressed.
    assert_eq!(produce(&mut c, 9, "raw", gzipped(&plain)).error_code, 0);
    let data = stored(&mut c, "raw");
    assert_eq!(
        validate(&data).expect("stored").compression(),
        Ok(Compression::None)
    );
}

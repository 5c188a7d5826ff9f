//! Fetch v0–v3 (legacy message sets down-converted from the stored v2 batches, as Kafka does)
//! and Fetch v13+ (topics by id), over the wire against a running broker.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::codecs::{compress_records, CODEC_GZIP, CODEC_ZSTD};
use ringbroker::protocol::legacy::parse_message_set;
use ringbroker::protocol::record_batch::{
    compute_crc, ATTRIBUTES_OFFSET, BATCH_HEADER_LEN, BATCH_LENGTH_OFFSET, CRC_OFFSET, LOG_OVERHEAD,
};
use uuid::Uuid;

mod broker;
use broker::{Broker, Client};

/// A batch of `values` (keys "k<i>"), compressed with `codec` (0 = none).
fn batch(values: &[&str], codec: u8) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for (i, v) in values.iter().enumerate() {
        let key = format!("k{i}");
        b.push(
            Some(key.as_bytes()),
            Some(v.as_bytes()),
            1_700_000_000_000 + i as i64,
            &[],
        );
    }
    let plain = b.build();
    if codec == 0 {
        return plain;
    }
    let mut out = plain[..BATCH_HEADER_LEN].to_vec();
    out.extend(compress_records(codec, &plain[BATCH_HEADER_LEN..]).unwrap());
    let len = (out.len() - LOG_OVERHEAD) as i32;
    out[BATCH_LENGTH_OFFSET..BATCH_LENGTH_OFFSET + 4].copy_from_slice(&len.to_be_bytes());
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&i16::from(codec).to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(out)
}

fn put_str(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

/// A Fetch v0–v3 body for one partition.
fn fetch_body(version: i16, topic: &str, partition: i32, offset: i64) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(-1);
    b.put_i32(10);
    b.put_i32(0);
    if version >= 3 {
        b.put_i32(1 << 20);
    }
    b.put_i32(1);
    put_str(&mut b, topic);
    b.put_i32(1);
    b.put_i32(partition);
    b.put_i64(offset);
    b.put_i32(1 << 20);
    b.to_vec()
}

/// The one partition of a v0–v3 response: (error code, high watermark, message set).
fn parse_fetch(version: i16, mut r: Bytes) -> (i16, i64, Bytes) {
    if version >= 1 {
        r.get_i32();
    }
    assert_eq!(r.get_i32(), 1);
    let n = r.get_i16() as usize;
    r.advance(n);
    assert_eq!(r.get_i32(), 1);
    r.get_i32();
    let error = r.get_i16();
    let hw = r.get_i64();
    let len = r.get_i32() as usize;
    let set = r.split_to(len);
    assert!(r.is_empty(), "bytes after the fetch response");
    (error, hw, set)
}

/// (offset, magic) of each message of a legacy set.
fn offsets_and_magics(mut set: &[u8]) -> Vec<(i64, u8)> {
    let mut out = Vec::new();
    while set.len() >= 12 {
        let offset = i64::from_be_bytes(set[..8].try_into().unwrap());
        let size = i32::from_be_bytes(set[8..12].try_into().unwrap()) as usize;
        out.push((offset, set[12 + 4]));
        set = &set[12 + size..];
    }
    out
}

#[test]
fn fetch_v0_to_v3_get_legacy_message_sets_from_plain_and_gzip_batches() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("old-fetch", 1, &[]);
    let (e, _) = c.produce_records(7, -1, "old-fetch", 0, batch(&["a", "b"], 0));
    assert_eq!(e, 0);
    let (e, _) = c.produce_records(7, -1, "old-fetch", 0, batch(&["c", "d", "e"], CODEC_GZIP));
    assert_eq!(e, 0);

    for version in 0..=3i16 {
        let magic = if version <= 1 { 0 } else { 1 };
        let raw = c.call_raw(
            ApiKey::Fetch,
            version,
            &fetch_body(version, "old-fetch", 0, 1),
        );
        let (error, hw, set) = parse_fetch(version, raw);
        assert_eq!(error, 0, "v{version}");
        assert_eq!(hw, 5, "v{version}");
        // Offset 0 sits in the first batch below the fetch offset: left out, as Kafka does.
        let got = offsets_and_magics(&set);
        assert_eq!(
            got,
            (1..5).map(|o| (o, magic)).collect::<Vec<_>>(),
            "v{version}"
        );
        let (records, _) = parse_message_set(&set, 1 << 20, 0).expect("a valid message set");
        let values: Vec<&[u8]> = records
            .iter()
            .map(|r| r.value.as_deref().unwrap())
            .collect();
        assert_eq!(values, [&b"b"[..], b"c", b"d", b"e"], "v{version}");
        if magic == 1 {
            assert_eq!(records[0].timestamp, 1_700_000_000_001, "v{version}");
        }
    }

    let raw = c.call_raw(ApiKey::Fetch, 2, &fetch_body(2, "no-such-topic", 0, 0));
    let (error, _, set) = parse_fetch(2, raw);
    assert_eq!(error, ResponseError::UnknownTopicOrPartition.code());
    assert!(set.is_empty());
    broker.stop_cleanly();
}

#[test]
fn a_zstd_batch_is_unsupported_for_fetch_v2_as_in_kafka() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("old-zstd", 1, &[]);
    let (e, _) = c.produce_records(7, -1, "old-zstd", 0, batch(&["z"], CODEC_ZSTD));
    assert_eq!(e, 0);
    let raw = c.call_raw(ApiKey::Fetch, 2, &fetch_body(2, "old-zstd", 0, 0));
    let (error, _, set) = parse_fetch(2, raw);
    assert_eq!(error, ResponseError::UnsupportedCompressionType.code());
    assert!(set.is_empty());
    broker.stop_cleanly();
}

fn fetch_by_id(c: &mut Client, version: i16, id: Uuid) -> FetchResponse {
    let mut p = FetchPartition::default();
    p.partition = 0;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic_id = id;
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 10;
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    c.call(ApiKey::Fetch, version, &req)
}

#[test]
fn fetch_v13_to_v17_read_by_topic_id_and_refuse_unknown_ids() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("by-id", 1, &[]);
    let (e, _) = c.produce_records(9, -1, "by-id", 0, batch(&["x", "y"], 0));
    assert_eq!(e, 0);
    let (_, _, id) = c.topic_metadata("by-id");
    for version in 13..=17 {
        let r = fetch_by_id(&mut c, version, id);
        let t = &r.responses[0];
        assert_eq!(t.topic_id, id, "v{version}");
        assert_eq!(t.partitions[0].error_code, 0, "v{version}");
        assert_eq!(t.partitions[0].high_watermark, 2, "v{version}");
        assert!(!t.partitions[0].records.as_ref().unwrap().is_empty());

        let r = fetch_by_id(&mut c, version, Uuid::from_u128(42));
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            ResponseError::UnknownTopicId.code(),
            "v{version}"
        );
    }
    broker.stop_cleanly();
}

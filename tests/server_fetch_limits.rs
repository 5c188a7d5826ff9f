//! Fetch response limits (Kafka's KIP-74): one shared budget, `max_bytes` of the request capped
//! by the broker's `fetch.max.bytes`, spent on partitions in request order; each partition at
//! most `partition_max_bytes`; the first batch of the response whole even when it is larger.

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::ApiKey;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::BatchHeader;

mod broker;
use broker::{fetch_request, Broker, Client};

const VALUE_LEN: usize = 1000;
const BATCHES: usize = 10;
/// The broker's `fetch.max.bytes` in this test.
const BROKER_FETCH_MAX: usize = 5000;

fn one_record_batch(value_len: usize) -> Bytes {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    b.push(None, Some(&vec![b'v'; value_len]), 1_700_000_000_000, &[]);
    b.build()
}

/// Fetch v11 of partitions `0..partitions` of `topic` from offset 0: per partition (error
/// code, record bytes, sizes of the whole batches in them).
fn fetch(
    c: &mut Client,
    topic: &str,
    partitions: i32,
    max_bytes: i32,
    partition_max_bytes: i32,
) -> Vec<(i16, usize, Vec<usize>)> {
    let from_start: Vec<(i32, i64)> = (0..partitions).map(|p| (p, 0)).collect();
    let req = fetch_request(topic, &from_start, partition_max_bytes, max_bytes);
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    resp.responses[0]
        .partitions
        .iter()
        .map(|p| {
            let data: &[u8] = p.records.as_deref().unwrap_or_default();
            let mut sizes = Vec::new();
            let mut rest = data;
            while let Ok(h) = BatchHeader::parse(rest) {
                assert!(
                    h.total_len() <= rest.len(),
                    "a partial batch in the response"
                );
                sizes.push(h.total_len());
                rest = &rest[h.total_len()..];
            }
            assert!(rest.is_empty(), "bytes that are not whole batches");
            (p.error_code, data.len(), sizes)
        })
        .collect()
}

fn total(parts: &[(i16, usize, Vec<usize>)]) -> usize {
    parts.iter().map(|p| p.1).sum()
}

/// Creates `limits` with 4 partitions of `BATCHES` one-record batches; returns a batch's size.
fn fill(c: &mut Client) -> usize {
    c.create_topic("limits", 4, &[]);
    let batch = one_record_batch(VALUE_LEN);
    for p in 0..4 {
        for _ in 0..BATCHES {
            assert_eq!(c.produce_records(7, 1, "limits", p, batch.clone()).0, 0);
        }
    }
    batch.len()
}

#[test]
fn fetch_responses_keep_to_max_bytes_and_partition_max_bytes() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    let batch_len = fill(&mut c);
    let batch = one_record_batch(VALUE_LEN);
    // One partition whose first batch is larger than every limit below.
    c.create_topic("big-first", 2, &[]);
    let big = one_record_batch(20 * VALUE_LEN);
    assert_eq!(c.produce_records(7, 1, "big-first", 0, big.clone()).0, 0);
    assert_eq!(c.produce_records(7, 1, "big-first", 0, batch.clone()).0, 0);
    assert_eq!(c.produce_records(7, 1, "big-first", 1, batch.clone()).0, 0);

    // max_bytes of two and a half batches: two whole batches of partition 0, nothing after.
    let max = (batch_len * 5 / 2) as i32;
    let parts = fetch(&mut c, "limits", 4, max, 1 << 20);
    assert!(parts.iter().all(|p| p.0 == 0), "{parts:?}");
    assert_eq!(
        parts[0].2,
        vec![batch_len; 2],
        "partition 0 fills the budget"
    );
    for p in &parts[1..] {
        assert_eq!(
            p.1, 0,
            "later partitions are empty once the budget is spent"
        );
    }
    assert!(total(&parts) <= max as usize);

    // partition_max_bytes of one and a half batches: one batch from each partition.
    let parts = fetch(&mut c, "limits", 4, 1 << 20, (batch_len * 3 / 2) as i32);
    for p in &parts {
        assert_eq!(p.2, vec![batch_len], "one batch per partition");
    }

    // A first batch larger than max_bytes and partition_max_bytes comes whole, and alone.
    let parts = fetch(&mut c, "big-first", 2, 100, 100);
    assert_eq!(parts[0].2, vec![big.len()], "the first batch, whole");
    assert_eq!(parts[1].1, 0, "nothing after an oversized first batch");
    broker.stop_cleanly();
}

#[test]
fn the_broker_fetch_max_bytes_caps_the_request() {
    let broker = Broker::start(&[&format!("fetch.max.bytes={BROKER_FETCH_MAX}")]);
    let mut c = broker.client();
    let batch_len = fill(&mut c);
    let parts = fetch(&mut c, "limits", 4, i32::MAX, 1 << 20);
    assert!(
        total(&parts) <= BROKER_FETCH_MAX,
        "{} bytes for fetch.max.bytes={BROKER_FETCH_MAX}",
        total(&parts)
    );
    assert_eq!(
        total(&parts),
        (BROKER_FETCH_MAX / batch_len) * batch_len,
        "as many whole batches as fit"
    );
    broker.stop_cleanly();
}

#[test]
fn a_long_poll_below_min_bytes_wakes_on_new_data_and_answers_old_and_new() {
    let broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("poll", 2, &[]);
    let batch = one_record_batch(VALUE_LEN);
    assert_eq!(c.produce_records(7, 1, "poll", 0, batch.clone()).0, 0);
    // min_bytes of two batches: one is there, the poll waits for the second.
    let mut req = fetch_request("poll", &[(0, 0), (1, 0)], 1 << 20, 1 << 20);
    req.max_wait_ms = 15_000;
    req.min_bytes = (2 * batch.len()) as i32;
    let mut poller = broker.client();
    let correlation = poller.send(ApiKey::Fetch, 11, &req);
    assert_eq!(c.produce_records(7, 1, "poll", 1, batch.clone()).0, 0);
    let resp: FetchResponse = poller.receive(ApiKey::Fetch, 11, correlation);
    let lens: Vec<usize> = resp.responses[0]
        .partitions
        .iter()
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .collect();
    assert_eq!(
        lens,
        vec![batch.len(), batch.len()],
        "the first read's data and the new"
    );
    broker.stop_cleanly();
}

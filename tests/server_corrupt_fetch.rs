//! A batch damaged on disk after the broker trusted it (clean shutdown, no scan at start):
//! a Fetch at it answers CORRUPT_MESSAGE for that partition, at once and every time, and the
//! broker logs it once, instead of spinning or answering empty records forever.

use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use ringbroker::protocol::batch_builder::BatchBuilder;
use ringbroker::protocol::record_batch::BatchHeader;

mod broker;
use broker::{fetch_request, Broker, Client};

/// Fetch v11 of partitions 0 and 1 of `topic` at `offsets`: (error code, record bytes) each.
fn fetch(c: &mut Client, topic: &str, offsets: [i64; 2]) -> Vec<(i16, usize)> {
    let mut req = fetch_request(topic, &[(0, offsets[0]), (1, offsets[1])], 1 << 20, 1 << 20);
    req.max_wait_ms = 200;
    req.min_bytes = 1;
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    resp.responses[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.records.as_ref().map_or(0, |r| r.len())))
        .collect()
}

#[test]
fn a_corrupt_batch_at_the_fetch_offset_answers_corrupt_message_and_is_logged_once() {
    let mut broker = Broker::start(&[]);
    let mut c = broker.client();
    c.create_topic("damaged", 2, &[("segment.bytes", "16384")]);
    for p in 0..2 {
        for i in 0..60 {
            let mut b = BatchBuilder::new(1_700_000_000_000);
            b.push(None, Some(&[b'v'; 500]), 1_700_000_000_000 + i, &[]);
            assert_eq!(c.produce_records(7, 1, "damaged", p, b.build()).0, 0);
        }
    }
    broker.restart();
    // Damage the magic byte of a batch early in partition 0's first (sealed) segment.
    let log = broker
        .data_dir()
        .join("damaged-0")
        .join(format!("{:020}.log", 0));
    let mut data = std::fs::read(&log).expect("segment");
    let mut pos = 0usize;
    let mut victim = None;
    for _ in 0..5 {
        let h = BatchHeader::parse(&data[pos..]).expect("batch");
        victim = Some((pos, h.base_offset));
        pos += h.total_len();
    }
    let (at, offset) = victim.expect("a batch");
    data[at + 16] = 9;
    std::fs::write(&log, &data).expect("write back");

    let mut c = broker.client();
    for _ in 0..3 {
        let parts = fetch(&mut c, "damaged", [offset, 0]);
        assert_eq!(parts[0], (ResponseError::CorruptMessage.code(), 0));
        assert_eq!(parts[1].0, 0, "the other partition is served");
        assert!(parts[1].1 > 0);
    }
    // Offsets before the damage still read.
    assert_eq!(fetch(&mut c, "damaged", [0, 0])[0].0, 0);
    let warned = broker
        .full_log()
        .matches("corrupt data in the log at a fetch offset")
        .count();
    assert_eq!(warned, 1, "logged once:\n{}", broker.log());
    broker.stop_cleanly();
}

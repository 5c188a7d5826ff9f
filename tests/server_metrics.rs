//! The metrics endpoint against a real broker: Prometheus text that parses, counters that move
//! under a produce/fetch load, per-stage latencies recorded, partition offsets and group lag
//! that match what was produced and committed, the JSON breakdown, and bad HTTP refused.

mod broker;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use kafka_protocol::messages::{ApiKey, GroupId};
use kafka_protocol::ResponseError;
use ringbroker::protocol::batch_builder::BatchBuilder;

use broker::{s, topic_name, Broker, Client, WAIT};

const TOPIC: &str = "metered";
const RECORDS_PER_BATCH: usize = 5;
const PRODUCES: usize = 40;

/// Produce v9 (acks=all) of one batch; returns the partition's error code.
fn produce(c: &mut Client, partition: i32) -> i16 {
    let mut b = BatchBuilder::new(1_700_000_000_000);
    for i in 0..RECORDS_PER_BATCH {
        b.push(None, Some(b"value"), 1_700_000_000_000 + i as i64, &[]);
    }
    c.produce_records(9, -1, TOPIC, partition, b.build()).0
}

/// Fetch v11 from offset 0; returns the high watermark.
fn fetch(c: &mut Client, partition: i32) -> i64 {
    let mut p = FetchPartition::default();
    p.partition = partition;
    p.partition_max_bytes = 1 << 20;
    let mut t = FetchTopic::default();
    t.topic = topic_name(TOPIC);
    t.partitions = vec![p];
    let mut req = FetchRequest::default();
    req.max_wait_ms = 0;
    req.max_bytes = 1 << 20;
    req.topics = vec![t];
    let resp: FetchResponse = c.call(ApiKey::Fetch, 11, &req);
    let r = &resp.responses[0].partitions[0];
    assert_eq!(r.error_code, 0);
    r.high_watermark
}

/// OffsetCommit v8 outside group management, retried while the coordinator loads.
fn commit(c: &mut Client, group: &str, partition: i32, offset: i64) {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = partition;
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(s(group));
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let retriable = [
        ResponseError::CoordinatorNotAvailable.code(),
        ResponseError::CoordinatorLoadInProgress.code(),
    ];
    let deadline = Instant::now() + WAIT;
    loop {
        let resp: OffsetCommitResponse = c.call(ApiKey::OffsetCommit, 8, &req);
        let code = resp.topics[0].partitions[0].error_code;
        if code == 0 {
            return;
        }
        assert!(
            retriable.contains(&code) && Instant::now() < deadline,
            "commit failed with {code}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One HTTP exchange: (status code, headers, body). The server closes after answering.
fn http(addr: SocketAddr, request: &[u8]) -> (u16, String, String) {
    let mut stream = TcpStream::connect_timeout(&addr, WAIT).expect("connect to metrics");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    stream.write_all(request).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    let raw = String::from_utf8(raw).expect("a text answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete head");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    (status, head.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    http(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes(),
    )
}

/// A parsed exposition: (name, labels, value) per sample.
struct Scrape(Vec<(String, BTreeMap<String, String>, f64)>);

impl Scrape {
    fn take(addr: SocketAddr) -> Scrape {
        let (status, head, body) = get(addr, "/metrics");
        assert_eq!(status, 200, "{head}\n{body}");
        assert!(
            head.contains("Content-Type: text/plain; version=0.0.4"),
            "{head}"
        );
        Scrape::parse(&body)
    }

    /// Every non-comment line must be `name{labels} value` or `name value`.
    fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("no value: {line:?}"));
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("bad value: {line:?}"));
            let (name, labels) = match series.split_once('{') {
                None => (series, BTreeMap::new()),
                Some((name, rest)) => {
                    let inner = rest
                        .strip_suffix('}')
                        .unwrap_or_else(|| panic!("unclosed labels: {line:?}"));
                    let labels = inner
                        .split("\",")
                        .map(|pair| {
                            let (k, v) = pair
                                .split_once("=\"")
                                .unwrap_or_else(|| panic!("bad label in {line:?}"));
                            (k.to_string(), v.trim_end_matches('"').to_string())
                        })
                        .collect();
                    (name, labels)
                }
            };
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                "bad metric name in {line:?}"
            );
            samples.push((name.to_string(), labels, value));
        }
        Scrape(samples)
    }

    /// The sum of `name` over every series whose labels include `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.0
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }

    fn has(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.0.iter().any(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
        })
    }
}

#[test]
fn metrics_endpoint_tracks_a_produce_and_fetch_load() {
    let broker = Broker::start(&[
        "ringbroker.metrics.listen=127.0.0.1:0",
        "ringbroker.acks.all.fsync=true",
        "group.initial.rebalance.delay.ms=0",
    ]);
    let metrics = broker
        .metrics_addr
        .expect("the broker printed its metrics address");
    let before = Scrape::take(metrics);
    assert_eq!(before.sum("ringbroker_metrics_shards_reporting", &[]), 2.0);

    let mut c = broker.client();
    c.create_topic(TOPIC, 2, &[]);
    let produce_requests = |s: &Scrape| s.sum("ringbroker_requests_total", &[("api", "Produce")]);
    let mut last = produce_requests(&before);
    assert_eq!(last, 0.0);
    for i in 0..PRODUCES {
        assert_eq!(produce(&mut c, (i % 2) as i32), 0, "produce {i}");
        if i % 10 == 9 {
            // Scrapes during the load: the counter only moves forward.
            let now = produce_requests(&Scrape::take(metrics));
            assert!(now > last, "{now} after {last}");
            last = now;
        }
    }
    let per_partition = (PRODUCES / 2 * RECORDS_PER_BATCH) as i64;
    for p in 0..2 {
        assert_eq!(fetch(&mut c, p), per_partition);
    }
    assert_eq!(
        produce(&mut c, 7),
        ResponseError::UnknownTopicOrPartition.code()
    );
    commit(&mut c, "lagging", 0, 30);

    let after = Scrape::take(metrics);
    assert_eq!(produce_requests(&after), (PRODUCES + 1) as f64);
    assert_eq!(
        after.sum(
            "ringbroker_request_latency_seconds_count",
            &[("api", "Produce")]
        ),
        (PRODUCES + 1) as f64
    );
    assert!(after.has(
        "ringbroker_request_latency_seconds",
        &[("api", "Produce"), ("quantile", "0.99")]
    ));
    assert_eq!(
        after.sum(
            "ringbroker_request_handle_latency_seconds_count",
            &[("api", "Produce")]
        ),
        (PRODUCES + 1) as f64
    );
    assert_eq!(
        after.sum("ringbroker_requests_total", &[("api", "Fetch")]),
        2.0
    );
    assert!(after.sum("ringbroker_request_bytes_total", &[("api", "Produce")]) > 0.0);
    assert!(after.sum("ringbroker_response_bytes_total", &[("api", "Produce")]) > 0.0);
    assert_eq!(
        after.sum(
            "ringbroker_partition_errors_total",
            &[("api", "Produce"), ("code", "3")]
        ),
        1.0
    );
    assert!(after.sum("ringbroker_connections_accepted_total", &[]) >= 1.0);
    assert!(after.sum("ringbroker_connections_open", &[]) >= 1.0);

    // Every stage of a produce saw it: two partitions on two shards, so one is a hop away,
    // and acks=all with ringbroker.acks.all.fsync syncs; the fetches read the logs.
    for stage in [
        "queue", "decode", "hop", "append", "fsync", "acks", "read", "encode", "write",
    ] {
        let count = after.sum(
            "ringbroker_stage_latency_seconds_count",
            &[("stage", stage)],
        );
        assert!(count > 0.0, "no {stage} samples");
        assert!(after.has(
            "ringbroker_stage_latency_seconds",
            &[("stage", stage), ("quantile", "0.5")]
        ));
    }
    assert!(
        after.sum(
            "ringbroker_stage_latency_seconds_count",
            &[("stage", "append")]
        ) >= PRODUCES as f64
    );

    for p in ["0", "1"] {
        let labels = [("topic", TOPIC), ("partition", p)];
        assert_eq!(
            after.sum("ringbroker_partition_high_watermark", &labels),
            per_partition as f64
        );
        assert_eq!(
            after.sum("ringbroker_partition_log_end_offset", &labels),
            per_partition as f64
        );
        assert_eq!(
            after.sum("ringbroker_partition_log_start_offset", &labels),
            0.0
        );
        assert!(after.sum("ringbroker_partition_size_bytes", &labels) > 0.0);
    }
    // The process's CPU by thread kind: every kind is reported, and no counter goes back.
    for kind in ["shard", "io_worker", "other"] {
        let labels = [("thread", kind)];
        assert!(
            after.has("ringbroker_process_cpu_seconds_total", &labels),
            "{kind}"
        );
        assert!(
            after.sum("ringbroker_process_cpu_seconds_total", &labels)
                >= before.sum("ringbroker_process_cpu_seconds_total", &labels),
            "{kind}"
        );
    }
    let group = [("group", "lagging"), ("topic", TOPIC), ("partition", "0")];
    assert_eq!(
        after.sum("ringbroker_consumer_group_committed_offset", &group),
        30.0
    );
    assert_eq!(
        after.sum("ringbroker_consumer_group_lag", &group),
        (per_partition - 30) as f64
    );

    let (status, head, body) = get(metrics, "/metrics/stages.json");
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("Content-Type: application/json"), "{head}");
    let json: serde_json::Value = serde_json::from_str(&body).expect("valid JSON");
    assert_eq!(json["shards"], 2);
    assert_eq!(json["apis"]["Produce"]["count"], PRODUCES + 1);
    assert_eq!(json["apis"]["Produce"]["partition_errors"], 1);
    assert_eq!(json["apis"]["Produce"]["handle"]["count"], PRODUCES + 1);
    let append = &json["stages"]["append"];
    assert!(append["count"].as_u64().expect("count") >= PRODUCES as u64);
    for stage in json["stages"].as_object().expect("stages").values() {
        let q = |k: &str| stage[k].as_u64().expect(k);
        assert!(q("p50_us") <= q("p90_us") && q("p90_us") <= q("p99_us"));
        assert!(q("p99_us") <= q("p999_us") && q("p999_us") <= q("max_us"));
    }
}

#[test]
fn metrics_endpoint_refuses_bad_requests_and_keeps_serving() {
    let broker = Broker::start(&["ringbroker.metrics.listen=127.0.0.1:0"]);
    let metrics = broker.metrics_addr.expect("metrics address");
    assert_eq!(get(metrics, "/nope").0, 404);
    assert_eq!(http(metrics, b"BLAH\r\n\r\n").0, 400);
    assert_eq!(http(metrics, b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 20_000));
    assert_eq!(http(metrics, &huge).0, 400);
    // A client that connects and says nothing does not hold up others.
    let _silent = TcpStream::connect(metrics).expect("connect");
    let (status, _, body) = get(metrics, "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("ringbroker_connections_open"));
}

#[test]
fn a_second_broker_on_a_metrics_port_in_use_is_refused() {
    // As on the Kafka port: two brokers answering scrapes on one port would report each
    // other's figures (the default port included; tests use port 0 so they never share it).
    let first = Broker::start(&["ringbroker.metrics.listen=127.0.0.1:0"]);
    let port = first.metrics_addr.expect("metrics address").port();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other_port = taken.local_addr().expect("addr").port();
    for port in [port, other_port] {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringbroker"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--shards",
                "2",
                "--data-dir",
            ])
            .arg(dir.path())
            .arg("--set")
            .arg(format!("ringbroker.metrics.listen=127.0.0.1:{port}"))
            .output()
            .expect("run the broker");
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("cannot serve metrics on 127.0.0.1:{port}"))
                && stderr.contains("another broker"),
            "{stderr}"
        );
    }
    // The first broker still serves its own scrapes.
    let (status, _, body) = get(first.metrics_addr.expect("metrics address"), "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("ringbroker_connections_open"));
    first.stop_cleanly();
}

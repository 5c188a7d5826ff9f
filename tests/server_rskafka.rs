//! rskafka (a third-party Rust Kafka client) against the real broker binary: create topics,
//! produce to every partition with every codec, fetch back, list offsets, delete records and
//! topics, then restart the broker on the same data dir and check that everything is still there.
//!
//! The broker runs as a child process (2 shards, free loopback port, temp data dir); a Drop
//! guard SIGTERMs it and waits. Every client call is bounded by a timeout.

use std::collections::BTreeMap;
use std::fs::File;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rskafka::chrono::{DateTime, TimeZone, Utc};
use rskafka::client::error::{Error as ClientError, ProtocolError};
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::{Record, RecordAndOffset};
use rskafka::BackoffConfig;

/// Bound for any single client call.
const CALL: Duration = Duration::from_secs(15);
/// Bound for the broker to start or stop.
const PROCESS: Duration = Duration::from_secs(20);

const TOPIC: &str = "rsk-orders";
const PARTITIONS: i32 = 3;
const BATCHES: usize = 5;
const PER_BATCH: usize = 10;

/// The broker process. Dropping it SIGTERMs the process and waits (SIGKILL after a bound).
struct Broker {
    child: Option<Child>,
    addr: String,
    log: PathBuf,
}

impl Broker {
    fn start(data_dir: &Path, port: u16, log: PathBuf) -> Broker {
        let addr = format!("127.0.0.1:{port}");
        let stderr = File::create(&log).expect("create the broker log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringbroker"))
            .args(["serve", "--listen", &addr, "--data-dir"])
            .arg(data_dir)
            .args(["--shards", "2"])
            // Never the default metrics port: parallel tests would share it.
            .args(["--set", "ringbroker.metrics.listen=none"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("spawn the broker");
        // Wait for the "listening on" line; keep draining stdout afterwards.
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        let mut broker = Broker {
            child: Some(child),
            addr,
            log,
        };
        if rx.recv_timeout(PROCESS).is_err() {
            let status = broker
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            panic!(
                "broker did not print 'listening on' within {PROCESS:?} (exit: {status:?}); log:\n{}",
                broker.log_tail()
            );
        }
        // The line is printed before the shards bind their listeners: wait until one accepts.
        let deadline = Instant::now() + PROCESS;
        while TcpStream::connect(&broker.addr).is_err() {
            assert!(
                Instant::now() < deadline,
                "broker does not accept connections on {}; log:\n{}",
                broker.addr,
                broker.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        broker
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// SIGTERM and wait (bounded); returns the exit status, or None if it had to be killed.
    fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped yet.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + PROCESS;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind an ephemeral port")
        .port()
}

/// Awaits a client call with a bound; panics with `what` on timeout or error.
async fn call<T, E: std::fmt::Debug>(what: &str, fut: impl Future<Output = Result<T, E>>) -> T {
    match tokio::time::timeout(CALL, fut).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => panic!("{what}: {e:?}"),
        Err(_) => panic!("{what}: no answer within {CALL:?}"),
    }
}

async fn connect(addr: &str) -> Client {
    let backoff = BackoffConfig {
        init_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_secs(1),
        base: 2.0,
        deadline: Some(Duration::from_secs(10)),
    };
    call(
        "connect",
        ClientBuilder::new(vec![addr.to_string()])
            .client_id("ringbroker-rskafka-test")
            .backoff_config(backoff)
            .build(),
    )
    .await
}

async fn partition(client: &Client, topic: &str, p: i32) -> PartitionClient {
    call(
        &format!("partition client {topic}/{p}"),
        client.partition_client(topic, p, UnknownTopicHandling::Retry),
    )
    .await
}

fn codecs() -> [Compression; 5] {
    [
        Compression::NoCompression,
        Compression::Gzip,
        Compression::Lz4,
        Compression::Snappy,
        Compression::Zstd,
    ]
}

/// Timestamps with millisecond precision, what Kafka keeps.
fn ts(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).unwrap()
}

fn record(p: i32, batch: usize, i: usize, base_ms: i64) -> Record {
    let n = batch * PER_BATCH + i;
    let mut headers = BTreeMap::new();
    headers.insert("batch".to_string(), batch.to_string().into_bytes());
    if i % 3 == 0 {
        headers.insert("third".to_string(), vec![0, 1, 2, 255]);
    }
    Record {
        key: (i % 4 != 3).then(|| format!("key-{}", i % 4).into_bytes()),
        // Compressible, partition-specific, and one null value per batch.
        value: (i != 5).then(|| format!("p{p}-n{n:04}-{}", "x".repeat(20 + i * 10)).into_bytes()),
        headers,
        timestamp: ts(base_ms + (batch * 1000 + i) as i64),
    }
}

/// Fetches [from, high watermark) with bounded fetches; returns records and the watermark.
async fn fetch_all(pc: &PartitionClient, from: i64) -> (Vec<RecordAndOffset>, i64) {
    let mut out: Vec<RecordAndOffset> = Vec::new();
    let mut next = from;
    let deadline = Instant::now() + CALL;
    loop {
        let (recs, high) = call(
            &format!("fetch {}/{} at {next}", pc.topic(), pc.partition()),
            pc.fetch_records(next, 1..1_000_000, 100),
        )
        .await;
        for r in recs {
            assert_eq!(r.offset, next, "offsets are dense");
            next = r.offset + 1;
            out.push(r);
        }
        if next >= high {
            return (out, high);
        }
        assert!(
            Instant::now() < deadline,
            "fetch did not reach the high watermark {high}"
        );
    }
}

fn expected(p: i32, base_ms: i64) -> Vec<Record> {
    (0..BATCHES)
        .flat_map(|b| (0..PER_BATCH).map(move |i| record(p, b, i, base_ms)))
        .collect()
}

#[tokio::test(flavor = "current_thread")]
async fn rskafka_produce_fetch_offsets_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let port = free_port();
    let mut broker = Broker::start(&data, port, dir.path().join("broker1.log"));
    let client = connect(&broker.addr).await;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let base_ms = (now_ms / 1000) * 1000 - 3_600_000;

    // --- topics
    let controller = client.controller_client().unwrap();
    call(
        "create topic",
        controller.create_topic(TOPIC, PARTITIONS, 1, 5_000),
    )
    .await;
    call(
        "create second topic",
        controller.create_topic("rsk-doomed", 2, 1, 5_000),
    )
    .await;
    let dup = tokio::time::timeout(CALL, controller.create_topic(TOPIC, 1, 1, 5_000))
        .await
        .expect("create duplicate: no answer");
    assert!(
        matches!(
            dup,
            Err(ClientError::ServerError {
                protocol_error: ProtocolError::TopicAlreadyExists,
                ..
            })
        ),
        "creating an existing topic: {dup:?}"
    );
    let topics = call("list topics", client.list_topics()).await;
    let t = topics
        .iter()
        .find(|t| t.name == TOPIC)
        .expect("topic listed");
    assert_eq!(
        t.partitions.iter().copied().collect::<Vec<_>>(),
        vec![0, 1, 2]
    );

    // --- produce: every partition gets a batch in every codec (rotated per partition)
    let mut pcs = Vec::new();
    for p in 0..PARTITIONS {
        let pc = partition(&client, TOPIC, p).await;
        for b in 0..BATCHES {
            let codec = codecs()[(b + p as usize) % codecs().len()];
            let records: Vec<Record> = (0..PER_BATCH).map(|i| record(p, b, i, base_ms)).collect();
            let offsets = call(
                &format!("produce {TOPIC}/{p} batch {b} ({codec:?})"),
                pc.produce(records, codec),
            )
            .await;
            let first = (b * PER_BATCH) as i64;
            assert_eq!(
                offsets,
                (first..first + PER_BATCH as i64).collect::<Vec<_>>(),
                "offsets of batch {b} on partition {p} ({codec:?})"
            );
        }
        pcs.push(pc);
    }

    // --- fetch back, offsets
    let total = (BATCHES * PER_BATCH) as i64;
    for (p, pc) in pcs.iter().enumerate() {
        let p = p as i32;
        let (recs, high) = fetch_all(pc, 0).await;
        assert_eq!(high, total, "high watermark of partition {p}");
        let got: Vec<Record> = recs.into_iter().map(|r| r.record).collect();
        assert_eq!(got, expected(p, base_ms), "records of partition {p}");

        // From the middle of a (possibly compressed) batch.
        let (recs, _) = fetch_all(pc, 23).await;
        assert_eq!(recs.first().map(|r| r.offset), Some(23));
        assert_eq!(recs.len() as i64, total - 23);

        assert_eq!(call("earliest", pc.get_offset(OffsetAt::Earliest)).await, 0);
        assert_eq!(call("latest", pc.get_offset(OffsetAt::Latest)).await, total);
        // The first record of batch 3 (a batch boundary: exact for every codec).
        let at = call(
            "offset for timestamp",
            pc.get_offset(OffsetAt::Timestamp(ts(base_ms + 3000))),
        )
        .await;
        assert_eq!(
            at,
            (3 * PER_BATCH) as i64,
            "offset for timestamp, partition {p}"
        );

        // Long poll at the end: an empty answer within the bound.
        let started = Instant::now();
        let (recs, high) = call(
            "fetch at the end",
            pc.fetch_records(total, 1..1_000_000, 300),
        )
        .await;
        assert!(
            recs.is_empty() && high == total,
            "fetch at the end: {} records, high {high}",
            recs.len()
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "long poll took {:?}",
            started.elapsed()
        );

        // Past the end: OFFSET_OUT_OF_RANGE.
        let r = tokio::time::timeout(CALL, pc.fetch_records(total + 100, 1..1_000_000, 100))
            .await
            .expect("fetch past the end: no answer");
        assert!(
            matches!(
                r,
                Err(ClientError::ServerError {
                    protocol_error: ProtocolError::OffsetOutOfRange,
                    ..
                })
            ),
            "fetch past the end: {r:?}"
        );
    }

    // --- delete records on partition 0, delete the second topic
    call("delete records", pcs[0].delete_records(7, 5_000)).await;
    assert_eq!(
        call(
            "earliest after delete",
            pcs[0].get_offset(OffsetAt::Earliest)
        )
        .await,
        7
    );
    let (recs, _) = fetch_all(&pcs[0], 7).await;
    assert_eq!(recs.len() as i64, total - 7);
    call("delete topic", controller.delete_topic("rsk-doomed", 5_000)).await;
    let topics = call("list topics", client.list_topics()).await;
    assert!(
        !topics.iter().any(|t| t.name == "rsk-doomed"),
        "deleted topic still listed"
    );

    // --- restart
    drop(pcs);
    drop(controller);
    drop(client);
    // Let the runtime run the dropped connections' tasks so that the client closes its sockets
    // first, as a client process that exits would. (A broker stopped while clients still hold
    // connections cannot rebind its port for a while: tests/interop/run.sh checks that case.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = broker
        .stop()
        .expect("broker did not stop within the bound after SIGTERM");
    assert!(
        status.success(),
        "broker exit status after SIGTERM: {status:?}"
    );
    let mut broker = Broker::start(&data, port, dir.path().join("broker2.log"));
    let client = connect(&broker.addr).await;
    let topics = call("list topics after restart", client.list_topics()).await;
    let t = topics
        .iter()
        .find(|t| t.name == TOPIC)
        .expect("topic listed after restart");
    assert_eq!(t.partitions.len(), PARTITIONS as usize);
    assert!(
        !topics.iter().any(|t| t.name == "rsk-doomed"),
        "deleted topic back after restart"
    );

    for p in 0..PARTITIONS {
        let pc = partition(&client, TOPIC, p).await;
        let start = if p == 0 { 7 } else { 0 };
        assert_eq!(
            call("earliest after restart", pc.get_offset(OffsetAt::Earliest)).await,
            start
        );
        assert_eq!(
            call("latest after restart", pc.get_offset(OffsetAt::Latest)).await,
            total
        );
        let (recs, high) = fetch_all(&pc, start).await;
        assert_eq!(high, total);
        let got: Vec<Record> = recs.into_iter().map(|r| r.record).collect();
        assert_eq!(
            got,
            expected(p, base_ms)[start as usize..],
            "records of partition {p} after restart"
        );
        let offsets = call(
            "produce after restart",
            pc.produce(vec![record(p, BATCHES, 0, base_ms)], Compression::Zstd),
        )
        .await;
        assert_eq!(
            offsets,
            vec![total],
            "append after restart continues at the old end"
        );
    }
    drop(client);
    let status = broker
        .stop()
        .expect("broker did not stop within the bound after SIGTERM");
    assert!(
        status.success(),
        "broker exit status after SIGTERM: {status:?}"
    );
}

//! One idempotent producer thread (its own producer id) owning a few partitions. It pipelines
//! up to [`WINDOW`] batches per partition on one connection, acks=all. On any error response
//! or lost connection it reconnects and resends every unacknowledged batch unchanged (same
//! producer id, epoch and sequence), first re-sending the last acknowledged batch of each
//! partition as a probe, which the broker must answer as a duplicate at its original offset.
//!
//! Since this producer is the only writer of its partitions and numbers records from 0, an
//! acknowledged batch must sit at an offset equal to its first record number.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::{ApiKey, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::records;
use super::wire::Connection;
use super::{Target, XorShift};

/// Batches in flight per partition. With the probe this keeps every batch a retry may send
/// among the broker's last 5 retained batches of the producer (Kafka's limit too).
pub const WINDOW: usize = 4;
const MAX_BATCH_RECORDS: u64 = 20;
const PRODUCE_VERSION: i16 = 9;
/// Pause after an error before reconnecting (the broker may be restarting).
const BACKOFF: Duration = Duration::from_millis(20);
/// After the stop signal: how long to keep retrying until every batch sent is acknowledged.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

struct Batch {
    first: i64,
    count: i32,
    bytes: Bytes,
}

/// The batches of one partition. Batch `i` (absolute index) is `batches[i - base]`; batches
/// older than the last acknowledged one are dropped to bound memory in long runs.
struct PartitionStream {
    partition: i32,
    batches: VecDeque<Batch>,
    base: usize,
    built: usize,
    acked: usize,
    next_to_send: usize,
    /// Highest index ever sent + 1: a send below it is a retry.
    sent_high: usize,
    next_number: i64,
}

impl PartitionStream {
    fn batch(&self, index: usize) -> &Batch {
        &self.batches[index - self.base]
    }

    fn build_next(&mut self, producer: (i64, i16), rng: &mut XorShift) {
        let count = rng.between(1, MAX_BATCH_RECORDS) as i32;
        let first = self.next_number;
        let bytes = records::batch(producer.0, producer.1, self.partition, first, count);
        self.batches.push_back(Batch {
            first,
            count,
            bytes,
        });
        self.built += 1;
        self.next_number += i64::from(count);
    }

    fn acknowledge(&mut self, index: usize) {
        if index + 1 > self.acked {
            self.acked = index + 1;
        }
        // Keep the last acknowledged batch: it is the probe after a reconnect.
        while self.base + 1 < self.acked {
            self.batches.pop_front();
            self.base += 1;
        }
    }

    fn acked_records(&self) -> i64 {
        if self.acked == 0 {
            0
        } else {
            let last = self.batch(self.acked - 1);
            last.first + i64::from(last.count)
        }
    }
}

struct InFlight {
    correlation: i32,
    stream: usize,
    index: usize,
    probe: bool,
}

/// What one producer saw; the ledgers are the ground truth of the final check.
#[derive(Debug, Default)]
pub struct ProducerReport {
    pub producer_id: i64,
    /// Per partition: (partition, records acknowledged, records in batches ever sent).
    pub ledgers: Vec<(i32, i64, i64)>,
    pub batches_acked: u64,
    pub retries: u64,
    pub probes: u64,
    pub connections: u64,
    /// Error responses by Kafka error code.
    pub errors: BTreeMap<i16, u64>,
    /// Broken guarantees seen on the wire (an ack at the wrong offset).
    pub violations: Vec<String>,
    /// Batches still unacknowledged when the drain timed out.
    pub unacked_at_end: usize,
}

pub struct ProducerConfig {
    pub topic: &'static str,
    pub partitions: Vec<i32>,
    pub seed: u64,
}

pub fn run(config: ProducerConfig, target: Target, stop: &AtomicBool) -> ProducerReport {
    let mut rng = XorShift::new(config.seed);
    let mut report = ProducerReport::default();
    let Some((producer_id, epoch)) = init_producer_id(&target, stop, &mut report) else {
        return report;
    };
    report.producer_id = producer_id;
    let mut streams: Vec<PartitionStream> = config
        .partitions
        .iter()
        .map(|p| PartitionStream {
            partition: *p,
            batches: VecDeque::new(),
            base: 0,
            built: 0,
            acked: 0,
            next_to_send: 0,
            sent_high: 0,
            next_number: 0,
        })
        .collect();
    let mut connection: Option<Connection> = None;
    let mut in_flight: VecDeque<InFlight> = VecDeque::new();
    let mut drain_deadline = None;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping {
            let deadline = *drain_deadline.get_or_insert_with(|| Instant::now() + DRAIN_TIMEOUT);
            if streams.iter().all(|s| s.acked == s.built) || Instant::now() > deadline {
                break;
            }
        }
        let conn = match connection.as_mut() {
            Some(c) => c,
            None => match Connection::open(target.get()) {
                Ok(c) => {
                    report.connections += 1;
                    in_flight.clear();
                    let c = connection.insert(c);
                    if send_probes(c, config.topic, &mut streams, &mut in_flight).is_err() {
                        connection = None;
                        std::thread::sleep(BACKOFF);
                    }
                    continue;
                }
                Err(_) => {
                    std::thread::sleep(BACKOFF);
                    continue;
                }
            },
        };
        if fill_window(
            conn,
            config.topic,
            &mut streams,
            &mut in_flight,
            (producer_id, epoch),
            &mut rng,
            stopping,
            &mut report,
        )
        .is_err()
        {
            lose_connection(&mut connection, &mut streams);
            continue;
        }
        let Some(sent) = in_flight.pop_front() else {
            continue;
        };
        let answer =
            conn.receive::<ProduceResponse>(ApiKey::Produce, PRODUCE_VERSION, sent.correlation);
        let (code, base_offset) = match answer {
            Ok(resp) => match resp
                .responses
                .first()
                .and_then(|t| t.partition_responses.first())
            {
                Some(p) => (p.error_code, p.base_offset),
                None => {
                    report
                        .violations
                        .push("a Produce response without a partition".to_string());
                    lose_connection(&mut connection, &mut streams);
                    continue;
                }
            },
            Err(_) => {
                lose_connection(&mut connection, &mut streams);
                continue;
            }
        };
        let stream = &mut streams[sent.stream];
        if code != 0 {
            *report.errors.entry(code).or_default() += 1;
            lose_connection(&mut connection, &mut streams);
            continue;
        }
        let batch = stream.batch(sent.index);
        if base_offset != batch.first {
            report.violations.push(format!(
                "partition {} batch {} (records {}..{}{}) acknowledged at offset {base_offset}",
                stream.partition,
                sent.index,
                batch.first,
                batch.first + i64::from(batch.count),
                if sent.probe {
                    ", resent as a probe"
                } else {
                    ""
                },
            ));
        }
        if sent.probe {
            report.probes += 1;
        } else {
            report.batches_acked += 1;
            stream.acknowledge(sent.index);
        }
    }
    report.ledgers = streams
        .iter()
        .map(|s| {
            let sent = if s.sent_high == 0 {
                0
            } else {
                let last = s.batch(s.sent_high - 1);
                last.first + i64::from(last.count)
            };
            (s.partition, s.acked_records(), sent)
        })
        .collect();
    report.unacked_at_end = streams.iter().map(|s| s.built - s.acked).sum();
    report
}

/// Forgets the connection; everything unacknowledged is resent on the next one.
fn lose_connection(connection: &mut Option<Connection>, streams: &mut [PartitionStream]) {
    *connection = None;
    for s in streams.iter_mut() {
        s.next_to_send = s.acked;
    }
    std::thread::sleep(BACKOFF);
}

fn send_probes(
    conn: &mut Connection,
    topic: &str,
    streams: &mut [PartitionStream],
    in_flight: &mut VecDeque<InFlight>,
) -> std::io::Result<()> {
    for (i, s) in streams.iter_mut().enumerate() {
        s.next_to_send = s.acked;
        if s.acked == 0 {
            continue;
        }
        let index = s.acked - 1;
        let correlation = send_batch(conn, topic, s.partition, &s.batch(index).bytes)?;
        in_flight.push_back(InFlight {
            correlation,
            stream: i,
            index,
            probe: true,
        });
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn fill_window(
    conn: &mut Connection,
    topic: &str,
    streams: &mut [PartitionStream],
    in_flight: &mut VecDeque<InFlight>,
    producer: (i64, i16),
    rng: &mut XorShift,
    stopping: bool,
    report: &mut ProducerReport,
) -> std::io::Result<()> {
    for (i, s) in streams.iter_mut().enumerate() {
        while s.next_to_send - s.acked < WINDOW {
            if s.next_to_send == s.built {
                if stopping {
                    break;
                }
                s.build_next(producer, rng);
            }
            let index = s.next_to_send;
            let correlation = send_batch(conn, topic, s.partition, &s.batch(index).bytes)?;
            in_flight.push_back(InFlight {
                correlation,
                stream: i,
                index,
                probe: false,
            });
            if index < s.sent_high {
                report.retries += 1;
            }
            s.next_to_send += 1;
            s.sent_high = s.sent_high.max(s.next_to_send);
        }
    }
    Ok(())
}

fn send_batch(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    batch: &Bytes,
) -> std::io::Result<i32> {
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(batch.clone());
    let mut t = TopicProduceData::default();
    t.name = TopicName(StrBytes::from_string(topic.to_string()));
    t.partition_data = vec![p];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 10_000;
    req.topic_data = vec![t];
    conn.send(ApiKey::Produce, PRODUCE_VERSION, &req)
}

/// A producer id (retried across restarts until it works or the soak stops).
fn init_producer_id(
    target: &Target,
    stop: &AtomicBool,
    report: &mut ProducerReport,
) -> Option<(i64, i16)> {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    while !stop.load(Ordering::Relaxed) {
        let answer = Connection::open(target.get())
            .and_then(|mut c| c.call::<_, InitProducerIdResponse>(ApiKey::InitProducerId, 4, &req));
        match answer {
            Ok(r) if r.error_code == 0 => return Some((r.producer_id.0, r.producer_epoch)),
            Ok(r) => *report.errors.entry(r.error_code).or_default() += 1,
            Err(_) => {}
        }
        std::thread::sleep(BACKOFF);
    }
    report
        .violations
        .push("no producer id before the soak ended".to_string());
    None
}

//! The consumer: manually assigned partitions, fetched from their leaders with one Fetch in
//! flight per broker at all times (the next one is sent as soon as a response's batch headers
//! tell where to continue, before its records are decoded). No consumer group (yet).

use crate::util::hash::HashMap;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::{ApiKey, BrokerId};
use kafka_protocol::ResponseError;

use super::accumulator::TopicPartition;
use super::cluster::{topic_name, Cluster, EARLIEST, LATEST};
use super::connection::decode_response;
use super::error::{ClientError, ClientResult, KafkaCode};
use crate::protocol::decompressed_records::decode_records_decompressed;
use crate::protocol::record_batch::{BatchHeader, BATCH_HEADER_LEN};

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Long-poll bound of each fetch (`fetch.max.wait.ms`).
    pub fetch_max_wait: Duration,
    /// `fetch.min.bytes`.
    pub fetch_min_bytes: i32,
    /// `fetch.max.bytes` (per response).
    pub fetch_max_bytes: i32,
    /// `max.partition.fetch.bytes`.
    pub partition_max_bytes: i32,
    /// Cap on one decompressed batch.
    pub max_decompressed_batch: usize,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            fetch_max_wait: Duration::from_millis(500),
            fetch_min_bytes: 1,
            fetch_max_bytes: 50 << 20,
            partition_max_bytes: 1 << 20,
            max_decompressed_batch: 64 << 20,
        }
    }
}

/// Where to start reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    Offset(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// What a fetch response brought for one partition (for callers that look at batches).
#[derive(Debug, Clone)]
pub struct FetchedBatch {
    pub tp: TopicPartition,
    /// The raw batch as stored by the broker.
    pub bytes: Bytes,
    pub header: BatchHeader,
}

struct InFlight {
    /// Partitions in the request.
    partitions: Vec<TopicPartition>,
    sent: Instant,
    /// The assignment epoch it was sent in: replies from before an unassign are dropped.
    epoch: u64,
}

type FetchReply = (i32, ClientResult<FetchResponse>);

pub struct Consumer {
    cluster: Cluster,
    config: ConsumerConfig,
    fetch_version: i16,
    positions: BTreeMap<TopicPartition, i64>,
    /// The high watermark of each assigned partition, from the last fetch response.
    high_watermarks: BTreeMap<TopicPartition, i64>,
    /// Bumped by [`Consumer::unassign`].
    epoch: u64,
    in_flight: HashMap<i32, InFlight>,
    replies_tx: mpsc::Sender<FetchReply>,
    replies: mpsc::Receiver<FetchReply>,
    /// Records decoded and not yet returned.
    buffered: VecDeque<ConsumerRecord>,
    /// Batches of the last response (when `keep_batches`).
    batches: Vec<FetchedBatch>,
    keep_batches: bool,
    /// Durations of completed fetches since the last `take_fetch_latencies`.
    fetch_latencies: Vec<Duration>,
}

impl Consumer {
    pub fn new(cluster: Cluster, config: ConsumerConfig) -> ClientResult<Consumer> {
        let fetch_version = cluster.version(ApiKey::Fetch)?;
        let (replies_tx, replies) = mpsc::channel();
        Ok(Consumer {
            cluster,
            config,
            fetch_version,
            positions: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            epoch: 0,
            in_flight: HashMap::default(),
            replies_tx,
            replies,
            buffered: VecDeque::new(),
            batches: Vec::new(),
            keep_batches: false,
            fetch_latencies: Vec::new(),
        })
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Keep the raw batches of each response for [`Consumer::take_batches`].
    pub fn keep_batches(&mut self, keep: bool) {
        self.keep_batches = keep;
    }

    /// Starts reading these partitions (in addition to those assigned already).
    pub fn assign(
        &mut self,
        topic: &str,
        partitions: &[i32],
        from: OffsetSpec,
    ) -> ClientResult<()> {
        if self.cluster.metadata().partition_count(topic).is_none() {
            self.cluster.wait_for_leaders(topic)?;
        }
        let offsets = match from {
            OffsetSpec::Offset(o) => vec![o; partitions.len()],
            OffsetSpec::Earliest => self.cluster.list_offsets(topic, partitions, EARLIEST)?,
            OffsetSpec::Latest => self.cluster.list_offsets(topic, partitions, LATEST)?,
        };
        let topic: Arc<str> = Arc::from(topic);
        for (&p, o) in partitions.iter().zip(offsets) {
            self.positions.insert(
                TopicPartition {
                    topic: topic.clone(),
                    partition: p,
                },
                o,
            );
        }
        Ok(())
    }

    /// Stops reading these partitions: their positions, buffered records and fetches in
    /// flight are dropped (a group member hands them over in a rebalance).
    pub fn unassign(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.positions.remove(tp);
            self.high_watermarks.remove(tp);
        }
        self.buffered.retain(|r| {
            !partitions
                .iter()
                .any(|tp| tp.partition == r.partition && tp.topic == r.topic)
        });
        self.epoch += 1;
    }

    /// The partition's high watermark as of the last fetch response that covered it.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.high_watermarks.get(tp).copied()
    }

    /// The next offset to read of each assigned partition.
    pub fn positions(&self) -> &BTreeMap<TopicPartition, i64> {
        &self.positions
    }

    /// Records fetched since the last call, waiting up to `timeout` for some. An empty vector
    /// means nothing arrived in time.
    pub fn poll(&mut self, timeout: Duration) -> ClientResult<Vec<ConsumerRecord>> {
        let deadline = Instant::now() + timeout;
        loop {
            if !self.buffered.is_empty() {
                return Ok(self.buffered.drain(..).collect());
            }
            self.send_fetches()?;
            let left = deadline.saturating_duration_since(Instant::now());
            match self.replies.recv_timeout(left) {
                Ok((leader, reply)) => self.handle_reply(leader, reply)?,
                Err(mpsc::RecvTimeoutError::Timeout) => return Ok(Vec::new()),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(ClientError::Closed),
            }
        }
    }

    /// The raw batches of the responses handled so far (with `keep_batches`).
    pub fn take_batches(&mut self) -> Vec<FetchedBatch> {
        std::mem::take(&mut self.batches)
    }

    /// How long each fetch took, request to response, since the last call.
    pub fn take_fetch_latencies(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.fetch_latencies)
    }

    /// Sends a fetch to every leader of assigned partitions that has none in flight.
    fn send_fetches(&mut self) -> ClientResult<()> {
        let md = self.cluster.metadata();
        let mut by_leader: HashMap<i32, Vec<TopicPartition>> = HashMap::default();
        let mut missing = Vec::new();
        for tp in self.positions.keys() {
            match md.leader(&tp.topic, tp.partition) {
                Some(l) => by_leader.entry(l).or_default().push(tp.clone()),
                None => missing.push(tp.topic.to_string()),
            }
        }
        if !missing.is_empty() {
            missing.dedup();
            let names: Vec<&str> = missing.iter().map(String::as_str).collect();
            self.cluster.refresh_metadata(&names)?;
        }
        for (leader, partitions) in by_leader {
            if self.in_flight.contains_key(&leader) {
                continue;
            }
            self.send_fetch(leader, partitions)?;
        }
        Ok(())
    }

    fn send_fetch(&mut self, leader: i32, partitions: Vec<TopicPartition>) -> ClientResult<()> {
        let mut topics: Vec<FetchTopic> = Vec::new();
        for tp in &partitions {
            let mut p = FetchPartition::default();
            p.partition = tp.partition;
            p.fetch_offset = self.positions[tp];
            p.partition_max_bytes = self.config.partition_max_bytes;
            p.current_leader_epoch = -1;
            p.last_fetched_epoch = -1;
            p.log_start_offset = -1;
            match topics.iter_mut().find(|t| t.topic.0.as_str() == &*tp.topic) {
                Some(t) => t.partitions.push(p),
                None => {
                    let mut t = FetchTopic::default();
                    t.topic = topic_name(&tp.topic);
                    t.partitions = vec![p];
                    topics.push(t);
                }
            }
        }
        let mut req = FetchRequest::default();
        req.replica_id = BrokerId(-1);
        req.max_wait_ms = self.config.fetch_max_wait.as_millis() as i32;
        req.min_bytes = self.config.fetch_min_bytes;
        req.max_bytes = self.config.fetch_max_bytes;
        req.isolation_level = 0;
        req.session_id = 0;
        req.session_epoch = -1;
        req.topics = topics;
        let conn = self.cluster.connection(leader)?;
        let tx = self.replies_tx.clone();
        let version = self.fetch_version;
        self.in_flight.insert(
            leader,
            InFlight {
                partitions,
                sent: Instant::now(),
                epoch: self.epoch,
            },
        );
        let handler = Box::new(move |frame: ClientResult<Bytes>| {
            let resp =
                frame.and_then(|f| decode_response::<FetchResponse>(f, ApiKey::Fetch, version));
            let _ = tx.send((leader, resp));
        });
        // Errors reach the handler too, and come back through `replies`.
        let _ = conn.send(ApiKey::Fetch, version, &req, Some(handler));
        Ok(())
    }

    fn handle_reply(
        &mut self,
        leader: i32,
        reply: ClientResult<FetchResponse>,
    ) -> ClientResult<()> {
        let Some(flight) = self.in_flight.remove(&leader) else {
            return Ok(());
        };
        self.fetch_latencies.push(flight.sent.elapsed());
        if flight.epoch != self.epoch {
            // Fetched for an assignment that changed since: positions may have moved back.
            return self.send_fetches();
        }
        let resp = reply?;
        if let Some(code) = KafkaCode::from_code(resp.error_code) {
            return Err(ClientError::Kafka {
                api: "Fetch",
                code,
                message: None,
            });
        }
        // First pass: where each partition continues, so the next fetch can go out at once.
        let mut fetched: Vec<(TopicPartition, i64, Bytes)> = Vec::new();
        let mut stale = false;
        for t in &resp.responses {
            for p in &t.partitions {
                let Some(tp) = flight.partitions.iter().find(|tp| {
                    tp.partition == p.partition_index && &*tp.topic == t.topic.0.as_str()
                }) else {
                    continue;
                };
                if let Some(code) = KafkaCode::from_code(p.error_code) {
                    if code.invalidates_metadata() {
                        stale = true;
                        continue;
                    }
                    if code.0 == ResponseError::OffsetOutOfRange.code() {
                        return Err(ClientError::Kafka {
                            api: "Fetch",
                            code,
                            message: Some(format!(
                                "{}-{} at offset {}",
                                tp.topic,
                                tp.partition,
                                self.positions.get(tp).copied().unwrap_or(-1)
                            )),
                        });
                    }
                    return Err(ClientError::Kafka {
                        api: "Fetch",
                        code,
                        message: Some(format!("{}-{}", tp.topic, tp.partition)),
                    });
                }
                if p.high_watermark >= 0 {
                    self.high_watermarks.insert(tp.clone(), p.high_watermark);
                }
                let Some(records) = &p.records else { continue };
                let Some(&start) = self.positions.get(tp) else {
                    continue;
                };
                let next = next_position(records, start);
                if next > start {
                    self.positions.insert(tp.clone(), next);
                    fetched.push((tp.clone(), start, records.clone()));
                }
            }
        }
        if stale {
            let topics: Vec<String> = flight
                .partitions
                .iter()
                .map(|tp| tp.topic.to_string())
                .collect();
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            self.cluster.refresh_metadata(&names)?;
        }
        self.send_fetches()?;
        for (tp, start, records) in fetched {
            self.decode(&tp, start, &records)?;
        }
        Ok(())
    }

    /// Decodes the complete batches of `records`, keeping records at or after `start` (a
    /// compressed batch may begin before it).
    fn decode(&mut self, tp: &TopicPartition, start: i64, records: &Bytes) -> ClientResult<()> {
        let mut pos = 0;
        while records.len() - pos >= BATCH_HEADER_LEN {
            let Ok(header) = BatchHeader::parse(&records[pos..]) else {
                break;
            };
            let end = pos + header.total_len();
            if end > records.len() {
                break; // a partial batch at the end of the response
            }
            let bytes = records.slice(pos..end);
            pos = end;
            if header.is_control() || header.next_offset() <= start {
                continue;
            }
            let decoded = decode_records_decompressed(&bytes, self.config.max_decompressed_batch)
                .map_err(|e| {
                ClientError::Batch(format!("{}-{}: {e}", tp.topic, tp.partition))
            })?;
            for r in decoded {
                if r.offset < start {
                    continue;
                }
                self.buffered.push_back(ConsumerRecord {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: r.offset,
                    timestamp: r.timestamp,
                    key: r.key,
                    value: r.value,
                    headers: r.headers,
                });
            }
            if self.keep_batches {
                self.batches.push(FetchedBatch {
                    tp: tp.clone(),
                    bytes,
                    header,
                });
            }
        }
        Ok(())
    }
}

/// The offset after the last complete batch in `records`, or `start` if there is none.
fn next_position(records: &[u8], start: i64) -> i64 {
    let mut pos = 0;
    let mut next = start;
    while records.len() - pos >= BATCH_HEADER_LEN {
        let Ok(header) = BatchHeader::parse(&records[pos..]) else {
            break;
        };
        let end = pos + header.total_len();
        if end > records.len() {
            break;
        }
        next = next.max(header.next_offset());
        pos = end;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::batch_builder::BatchBuilder;
    use crate::protocol::record_batch::set_base_offset;

    #[test]
    fn the_position_moves_past_complete_batches_only() {
        let mut first = BatchBuilder::new(0);
        first
            .push(None, Some(b"a"), 0, &[])
            .push(None, Some(b"b"), 0, &[]);
        let mut a = first.build().to_vec();
        set_base_offset(&mut a, 10);
        let mut b = BatchBuilder::new(0)
            .push(None, Some(b"c"), 0, &[])
            .build()
            .to_vec();
        set_base_offset(&mut b, 12);
        let mut both = a.clone();
        both.extend_from_slice(&b);
        assert_eq!(next_position(&both, 10), 13);
        // A cut-off second batch is not counted.
        assert_eq!(next_position(&both[..both.len() - 3], 10), 12);
        assert_eq!(next_position(&[], 7), 7);
    }
}

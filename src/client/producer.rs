//! The producer: `send` adds a record to its partition's batch (see [`super::accumulator`]); a
//! sender thread ships closed batches to partition leaders, one Produce request per broker
//! holding at most one batch per partition, pipelined up to the connection's max in flight.
//! Every record's delivery callback is called exactly once, with its offset or the error.
//!
//! Retriable errors (leader moves, timeouts, lost connections) put the batch back in front of
//! its partition's queue, unchanged (same producer id, epoch and sequence numbers, so the broker
//! drops a duplicate of an idempotent batch), up to `retries` times.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

use super::accumulator::{Accumulator, ReadyBatch, RecordRef, TopicPartition};
use super::cluster::{topic_name, Cluster};
use super::compression::{compress_batch, Compression};
use super::connection::decode_response;
use super::error::{ClientError, ClientResult, KafkaCode};

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    /// 0 (no response), 1 (leader wrote it) or -1 (all in-sync replicas).
    pub acks: i16,
    pub compression: Compression,
    /// Close a partition's batch at this many bytes (uncompressed).
    pub batch_size: usize,
    /// Wait this long for more records before sending a batch that is not full.
    pub linger: Duration,
    /// InitProducerId + sequence numbers: retries never duplicate records.
    pub idempotence: bool,
    /// Bytes of records accepted and not yet acknowledged; `send` waits beyond it.
    pub buffer_memory: usize,
    /// How long `send` may wait for buffer space.
    pub max_block: Duration,
    /// Sends of a batch after the first, for retriable errors.
    pub retries: u32,
    /// Pause before a retry.
    pub retry_backoff: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: -1,
            compression: Compression::None,
            batch_size: 16 << 10,
            linger: Duration::from_millis(5),
            idempotence: false,
            buffer_memory: 32 << 20,
            max_block: Duration::from_secs(60),
            retries: 5,
            retry_backoff: Duration::from_millis(100),
        }
    }
}

/// Where a record was stored. With acks=0 the offset is unknown (-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMetadata {
    pub partition: i32,
    pub offset: i64,
}

/// A record's outcome; the error is shared by the records of a batch.
pub type DeliveryResult = Result<RecordMetadata, Arc<ClientError>>;
pub type DeliveryCallback = Box<dyn FnOnce(DeliveryResult) + Send>;

/// A record to send. `partition: None` picks one: by key hash, or round robin without a key.
#[derive(Debug, Clone, Copy)]
pub struct ProducerRecord<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, &'a [u8])],
    /// CreateTime in ms since the epoch; now if `None`.
    pub timestamp_ms: Option<i64>,
}

impl<'a> ProducerRecord<'a> {
    pub fn new(topic: &'a str, value: &'a [u8]) -> ProducerRecord<'a> {
        ProducerRecord {
            topic,
            partition: None,
            key: None,
            value: Some(value),
            headers: &[],
            timestamp_ms: None,
        }
    }

    pub fn partition(mut self, partition: i32) -> ProducerRecord<'a> {
        self.partition = Some(partition);
        self
    }

    pub fn key(mut self, key: &'a [u8]) -> ProducerRecord<'a> {
        self.key = Some(key);
        self
    }

    pub fn headers(mut self, headers: &'a [(&'a str, &'a [u8])]) -> ProducerRecord<'a> {
        self.headers = headers;
        self
    }
}

struct State {
    acc: Accumulator<DeliveryCallback>,
    /// Bytes of records accepted and not completed.
    buffered: usize,
    /// Records accepted and not completed.
    unfinished: usize,
    closing: bool,
    flushing: usize,
    metadata_stale: bool,
    /// Next sequence number per partition (idempotence).
    sequences: HashMap<TopicPartition, i32>,
    topics: HashMap<String, Arc<str>>,
    round_robin: u32,
}

struct Inner {
    cluster: Cluster,
    config: ProducerConfig,
    /// (producer id, epoch) when idempotent.
    producer_id: Option<(i64, i16)>,
    produce_version: i16,
    state: Mutex<State>,
    /// Wakes the sender thread.
    wake: Condvar,
    /// Signalled when records complete (buffer space, flush).
    completed: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A Kafka producer. Dropping it flushes what was sent (bounded by the retries and request
/// timeouts) and stops its thread.
pub struct Producer {
    inner: Arc<Inner>,
    sender: Option<JoinHandle<()>>,
}

impl Producer {
    pub fn new(cluster: Cluster, config: ProducerConfig) -> ClientResult<Producer> {
        if !matches!(config.acks, -1..=1) {
            return Err(ClientError::Config(format!(
                "acks {} (0, 1 or -1)",
                config.acks
            )));
        }
        if config.idempotence && config.acks != -1 {
            return Err(ClientError::Config("idempotence needs acks=all".into()));
        }
        if config.idempotence && cluster.config().max_in_flight > 5 {
            return Err(ClientError::Config(
                "idempotence allows at most 5 requests in flight per connection".into(),
            ));
        }
        let producer_id = if config.idempotence {
            Some(cluster.init_producer_id()?)
        } else {
            None
        };
        let produce_version = cluster.version(ApiKey::Produce)?;
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                acc: Accumulator::new(config.batch_size, config.linger),
                buffered: 0,
                unfinished: 0,
                closing: false,
                flushing: 0,
                metadata_stale: false,
                sequences: HashMap::new(),
                topics: HashMap::new(),
                round_robin: 0,
            }),
            cluster,
            config,
            producer_id,
            produce_version,
            wake: Condvar::new(),
            completed: Condvar::new(),
        });
        let thread_inner = inner.clone();
        let sender = std::thread::Builder::new()
            .name("kafka-producer".into())
            .spawn(move || sender_loop(&thread_inner))
            .map_err(|e| ClientError::io("spawn the producer thread", e))?;
        Ok(Producer {
            inner,
            sender: Some(sender),
        })
    }

    pub fn cluster(&self) -> &Cluster {
        &self.inner.cluster
    }

    /// The producer id and epoch, when idempotent.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.inner.producer_id
    }

    /// Queues a record; `callback` gets its outcome later (on a client thread: keep it short).
    /// Waits (at most `max_block`) while the buffer is full. On an error returned here the
    /// callback is not called.
    pub fn send(&self, record: ProducerRecord<'_>, callback: DeliveryCallback) -> ClientResult<()> {
        let partitions = self.partition_count(record.topic)?;
        let timestamp_ms = record.timestamp_ms.unwrap_or_else(now_ms);
        let rec = RecordRef {
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp_ms,
        };
        let size = rec.estimated_size();
        let inner = &*self.inner;
        let deadline = Instant::now() + inner.config.max_block;
        let mut state = inner.lock();
        while state.buffered > 0 && state.buffered + size > inner.config.buffer_memory {
            if state.closing {
                return Err(ClientError::Closed);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ClientError::Timeout {
                    what: "buffer space in the producer".into(),
                    after: inner.config.max_block,
                });
            }
            state = inner
                .completed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        if state.closing {
            return Err(ClientError::Closed);
        }
        let partition = match record.partition {
            Some(p) if p >= 0 && (p as usize) < partitions => p,
            Some(p) => {
                return Err(ClientError::NoSuchPartition {
                    topic: record.topic.to_string(),
                    partition: p,
                })
            }
            None => match record.key {
                Some(key) => (fnv1a(key) % partitions as u32) as i32,
                None => {
                    state.round_robin = state.round_robin.wrapping_add(1);
                    (state.round_robin % partitions as u32) as i32
                }
            },
        };
        let topic = match state.topics.get(record.topic) {
            Some(t) => t.clone(),
            None => {
                let t: Arc<str> = Arc::from(record.topic);
                state.topics.insert(record.topic.to_string(), t.clone());
                t
            }
        };
        let tp = TopicPartition { topic, partition };
        state
            .acc
            .append(&tp, rec, callback, Instant::now())
            .map_err(|e| ClientError::Batch(e.to_string()))?;
        state.buffered += size;
        state.unfinished += 1;
        let wake = state.acc.has_ready() || inner.config.linger.is_zero();
        drop(state);
        if wake {
            inner.wake.notify_one();
        }
        Ok(())
    }

    fn partition_count(&self, topic: &str) -> ClientResult<usize> {
        if let Some(n) = self.inner.cluster.metadata().partition_count(topic) {
            return Ok(n);
        }
        let md = self.inner.cluster.refresh_metadata(&[topic])?;
        match md.topics.get(topic) {
            Some(t) if t.error.is_none() => Ok(t.partitions.len()),
            Some(t) => Err(ClientError::Kafka {
                api: "Metadata",
                code: t.error.unwrap_or(KafkaCode(-1)),
                message: Some(topic.to_string()),
            }),
            None => Err(ClientError::Kafka {
                api: "Metadata",
                code: KafkaCode(ResponseError::UnknownTopicOrPartition.code()),
                message: Some(topic.to_string()),
            }),
        }
    }

    /// Sends everything queued now (ignoring linger) and waits until every record sent so far
    /// has its outcome. Returns the number of records still unfinished at the timeout (0 when
    /// all completed).
    pub fn flush(&self, timeout: Duration) -> usize {
        let inner = &*self.inner;
        let deadline = Instant::now() + timeout;
        let mut state = inner.lock();
        state.flushing += 1;
        inner.wake.notify_one();
        while state.unfinished > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = inner
                .completed
                .wait_timeout(state, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            inner.wake.notify_one();
        }
        state.flushing -= 1;
        state.unfinished
    }

    /// Records accepted and not yet completed.
    pub fn unfinished(&self) -> usize {
        self.inner.lock().unfinished
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.inner.lock().closing = true;
        self.inner.wake.notify_all();
        self.inner.completed.notify_all();
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

/// FNV-1a: a stable key → partition hash (not Java's murmur2: keyed records land on other
/// partitions than the Java client would put them).
fn fnv1a(key: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in key {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn sender_loop(inner: &Arc<Inner>) {
    loop {
        let (batches, refresh) = {
            let mut state = inner.lock();
            loop {
                if state.metadata_stale {
                    state.metadata_stale = false;
                    break (Vec::new(), true);
                }
                let force = state.closing || state.flushing > 0;
                let now = Instant::now();
                let batches = state.acc.drain(now, force);
                if !batches.is_empty() {
                    break (batches, false);
                }
                if state.closing && state.unfinished == 0 {
                    return;
                }
                let wait = state
                    .acc
                    .next_deadline()
                    .map(|d| d.saturating_duration_since(now))
                    .unwrap_or(Duration::from_millis(100))
                    .min(Duration::from_millis(100));
                state = inner
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
        };
        if refresh {
            std::thread::sleep(inner.config.retry_backoff);
            let topics: Vec<String> = inner.lock().topics.keys().cloned().collect();
            let names: Vec<&str> = topics.iter().map(String::as_str).collect();
            // A failure here shows up again as a retriable error of the next send.
            let _ = inner.cluster.refresh_metadata(&names);
            continue;
        }
        send_batches(inner, batches);
    }
}

/// Groups batches into Produce requests (per leader, at most one batch per partition per
/// request, batches of a partition in order) and sends them.
fn send_batches(inner: &Arc<Inner>, batches: Vec<ReadyBatch<DeliveryCallback>>) {
    let md = inner.cluster.metadata();
    // leader → requests, each a list of batches.
    let mut requests: HashMap<i32, Vec<Vec<ReadyBatch<DeliveryCallback>>>> = HashMap::new();
    let mut placed: HashMap<TopicPartition, usize> = HashMap::new();
    for mut batch in batches {
        let Some(leader) = md.leader(&batch.tp.topic, batch.tp.partition) else {
            let e = ClientError::NoLeader {
                topic: batch.tp.topic.to_string(),
                partition: batch.tp.partition,
            };
            retry_or_fail(inner, vec![batch], e);
            continue;
        };
        if batch.encoded.is_none() {
            match encode_batch(inner, &mut batch) {
                Ok(bytes) => batch.encoded = Some(bytes),
                Err(e) => {
                    complete(inner, batch, Err(Arc::new(e)));
                    continue;
                }
            }
        }
        let slot = placed.entry(batch.tp.clone()).or_insert(0);
        let reqs = requests.entry(leader).or_default();
        if reqs.len() <= *slot {
            reqs.push(Vec::new());
        }
        reqs[*slot].push(batch);
        *slot += 1;
    }
    for (leader, reqs) in requests {
        for req in reqs {
            send_request(inner, leader, req);
        }
    }
}

/// Builds the wire batch: producer id/epoch/sequence when idempotent, then compression.
fn encode_batch(inner: &Inner, batch: &mut ReadyBatch<DeliveryCallback>) -> ClientResult<Bytes> {
    if let Some((id, epoch)) = inner.producer_id {
        let count = batch.payloads.len() as i32;
        let mut state = inner.lock();
        let next = state.sequences.entry(batch.tp.clone()).or_insert(0);
        let base = *next;
        // Sequences wrap at i32::MAX as Kafka's do.
        *next = next.wrapping_add(count) & i32::MAX;
        drop(state);
        let builder = std::mem::replace(
            &mut batch.builder,
            crate::protocol::batch_builder::BatchBuilder::new(0),
        );
        batch.builder = builder.producer(id, epoch, base);
    }
    compress_batch(batch.builder.build(), inner.config.compression)
}

fn send_request(inner: &Arc<Inner>, leader: i32, batches: Vec<ReadyBatch<DeliveryCallback>>) {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    for b in &batches {
        let mut p = PartitionProduceData::default();
        p.index = b.tp.partition;
        p.records = b.encoded.clone();
        match topics
            .iter_mut()
            .find(|t| t.name.0.as_str() == &*b.tp.topic)
        {
            Some(t) => t.partition_data.push(p),
            None => {
                let mut t = TopicProduceData::default();
                t.name = topic_name(&b.tp.topic);
                t.partition_data = vec![p];
                topics.push(t);
            }
        }
    }
    let mut req = ProduceRequest::default();
    req.acks = inner.config.acks;
    req.timeout_ms = inner.cluster.config().request_timeout.as_millis() as i32;
    req.topic_data = topics;
    let conn = match inner.cluster.connection(leader) {
        Ok(c) => c,
        Err(e) => {
            retry_or_fail(inner, batches, e);
            return;
        }
    };
    let version = inner.produce_version;
    if inner.config.acks == 0 {
        let sent = conn.send(ApiKey::Produce, version, &req, None);
        for b in batches {
            let outcome = match &sent {
                Ok(()) => Ok(-1),
                Err(e) => Err(Arc::new(e.duplicate())),
            };
            complete(inner, b, outcome.map(|_| -1));
        }
        return;
    }
    let handler_inner = inner.clone();
    let handler = Box::new(move |frame: ClientResult<Bytes>| {
        let resp =
            frame.and_then(|f| decode_response::<ProduceResponse>(f, ApiKey::Produce, version));
        handle_response(&handler_inner, batches, resp);
    });
    // The handler is called on every outcome, errors included.
    let _ = conn.send(ApiKey::Produce, version, &req, Some(handler));
}

fn handle_response(
    inner: &Inner,
    batches: Vec<ReadyBatch<DeliveryCallback>>,
    resp: ClientResult<ProduceResponse>,
) {
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            retry_or_fail(inner, batches, e);
            return;
        }
    };
    for batch in batches {
        let answer = resp
            .responses
            .iter()
            .filter(|t| t.name.0.as_str() == &*batch.tp.topic)
            .flat_map(|t| t.partition_responses.iter())
            .find(|p| p.index == batch.tp.partition);
        let Some(answer) = answer else {
            let e = ClientError::codec("Produce response", "a partition is missing");
            complete(inner, batch, Err(Arc::new(e)));
            continue;
        };
        match KafkaCode::from_code(answer.error_code) {
            None => {
                let base = answer.base_offset;
                complete(inner, batch, Ok(base));
            }
            Some(code) => {
                let e = ClientError::Kafka {
                    api: "Produce",
                    code,
                    message: answer.error_message.as_ref().map(|m| m.to_string()),
                };
                retry_or_fail(inner, vec![batch], e);
            }
        }
    }
}

/// Requeues batches for a retriable error with retries left; fails them otherwise.
fn retry_or_fail(inner: &Inner, batches: Vec<ReadyBatch<DeliveryCallback>>, e: ClientError) {
    let stale = match &e {
        ClientError::Kafka { code, .. } => code.invalidates_metadata(),
        ClientError::NoLeader { .. } | ClientError::Disconnected { .. } => true,
        _ => false,
    };
    let (retry, fail): (Vec<_>, Vec<_>) = batches
        .into_iter()
        .partition(|b| e.is_retriable() && b.attempts < inner.config.retries);
    if !retry.is_empty() {
        let mut state = inner.lock();
        let retry = retry
            .into_iter()
            .map(|mut b| {
                b.attempts += 1;
                b
            })
            .collect();
        state.acc.requeue_front(retry);
        state.metadata_stale |= stale;
        drop(state);
        inner.wake.notify_one();
    }
    if !fail.is_empty() {
        let shared = Arc::new(e);
        for b in fail {
            complete(inner, b, Err(shared.clone()));
        }
    }
}

/// Calls every record's callback (outside the lock) and releases its buffer space.
fn complete(
    inner: &Inner,
    batch: ReadyBatch<DeliveryCallback>,
    outcome: Result<i64, Arc<ClientError>>,
) {
    let partition = batch.tp.partition;
    let count = batch.payloads.len();
    for (i, callback) in batch.payloads.into_iter().enumerate() {
        let result = match &outcome {
            Ok(base) if *base >= 0 => Ok(RecordMetadata {
                partition,
                offset: base + i as i64,
            }),
            Ok(_) => Ok(RecordMetadata {
                partition,
                offset: -1,
            }),
            Err(e) => Err(e.clone()),
        };
        callback(result);
    }
    let mut state = inner.lock();
    state.buffered = state.buffered.saturating_sub(batch.bytes);
    state.unfinished = state.unfinished.saturating_sub(count);
    drop(state);
    inner.completed.notify_all();
    inner.wake.notify_one();
}

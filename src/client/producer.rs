//! The producer: `send` adds a record to its partition's batch (see [`super::accumulator`]); a
//! sender thread ships closed batches to partition leaders, one Produce request per broker
//! holding at most one batch per partition, pipelined up to the connection's max in flight.
//! Every record's outcome (offset or error) is reported exactly once: its delivery callback
//! is called, or, with [`Producer::with_handler`], its token comes back in a [`Delivered`]
//! batch (see [`super::delivery`]).
//!
//! Retriable errors (leader moves, timeouts, lost connections) put the batch back in front of
//! its partition's queue, unchanged (same producer id, epoch and sequence numbers, so the broker
//! drops a duplicate of an idempotent batch), up to `retries` times.

use crate::util::hash::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kafka_protocol::messages::produce_response::ProduceResponse;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;

use super::accumulator::{Accumulator, ReadyBatch, RecordRef, TopicPartition};
use super::cluster::Cluster;
use super::compression::{compress_batch, Compression};
use super::connection::decode_response;
use super::delivery::{call_each, Delivered, DeliveryCallback, DeliveryHandler};
use super::error::{ClientError, ClientResult, KafkaCode};
use super::partitioner::key_partition;
use super::produce_request::{self, TopicBatches};
use crate::protocol::batch_builder::BatchBuilder;

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

/// A record to send. `partition: None` picks one: by the key as Kafka's default partitioner
/// does (murmur2, see [`super::partitioner`]), or round robin without a key.
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

/// What `send` knows about a topic without asking the cluster again.
struct TopicInfo {
    name: Arc<str>,
    partitions: usize,
    /// The [`Cluster::metadata_generation`] `partitions` was read at.
    generation: u64,
}

struct State<T> {
    acc: Accumulator<T>,
    /// Bytes of records accepted and not completed.
    buffered: usize,
    /// Records accepted and not completed.
    unfinished: usize,
    closing: bool,
    flushing: usize,
    metadata_stale: bool,
    /// Next sequence number per partition (idempotence).
    sequences: HashMap<TopicPartition, i32>,
    topics: HashMap<String, TopicInfo>,
    round_robin: u32,
    /// The sender thread waits for `wake` (notifying costs a syscall: only when it waits).
    sender_waiting: bool,
    /// Threads waiting for `completed` (buffer space, flush).
    completion_waiters: usize,
}

struct Inner<T> {
    cluster: Cluster,
    config: ProducerConfig,
    /// (producer id, epoch) when idempotent.
    producer_id: Option<(i64, i16)>,
    produce_version: i16,
    handler: DeliveryHandler<T>,
    state: Mutex<State<T>>,
    /// Wakes the sender thread.
    wake: Condvar,
    /// Signalled when records complete (buffer space, flush).
    completed: Condvar,
}

impl<T> Inner<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the sender thread if it waits.
    fn wake_sender(&self, state: &State<T>) {
        if state.sender_waiting {
            self.wake.notify_one();
        }
    }
}

/// A Kafka producer. Dropping it flushes what was sent (bounded by the retries and request
/// timeouts) and stops its thread. `T` is what each record carries to its outcome: a callback
/// ([`Producer::new`]) or any token of the caller's handler ([`Producer::with_handler`]).
pub struct Producer<T: Send + 'static = DeliveryCallback> {
    inner: Arc<Inner<T>>,
    sender: Option<JoinHandle<()>>,
}

impl Producer<DeliveryCallback> {
    /// A producer whose records carry their own delivery callback.
    pub fn new(cluster: Cluster, config: ProducerConfig) -> ClientResult<Producer> {
        Producer::with_handler(cluster, config, Box::new(call_each))
    }
}

impl<T: Send + 'static> Producer<T> {
    /// A producer that hands each completed batch's tokens to `handler`, once per batch.
    pub fn with_handler(
        cluster: Cluster,
        config: ProducerConfig,
        handler: DeliveryHandler<T>,
    ) -> ClientResult<Producer<T>> {
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
                sequences: HashMap::default(),
                topics: HashMap::default(),
                round_robin: 0,
                sender_waiting: false,
                completion_waiters: 0,
            }),
            cluster,
            config,
            producer_id,
            produce_version,
            handler,
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

    /// Queues a record; its `token` (the callback, for [`Producer::new`]) gets the outcome
    /// later, on a client thread. Waits (at most `max_block`) while the buffer is full. On an
    /// error returned here the token is dropped, not delivered.
    pub fn send(&self, record: ProducerRecord<'_>, token: T) -> ClientResult<()> {
        let timestamp_ms = record.timestamp_ms.unwrap_or_else(now_ms);
        let rec = RecordRef {
            key: record.key,
            value: record.value,
            headers: record.headers,
            timestamp_ms,
        };
        let size = rec.estimated_size();
        let inner = &*self.inner;
        let now = Instant::now();
        let generation = inner.cluster.metadata_generation();
        let mut state = inner.lock();
        let cached = match state.topics.get(record.topic) {
            Some(t) if t.generation == generation => Some((t.name.clone(), t.partitions)),
            _ => None,
        };
        let (topic, partitions) = match cached {
            Some(c) => c,
            None => {
                // Rare (a new topic, or the metadata changed): ask without the lock.
                drop(state);
                let partitions = self.partition_count(record.topic)?;
                state = inner.lock();
                let name = match state.topics.get(record.topic) {
                    Some(t) => t.name.clone(),
                    None => Arc::from(record.topic),
                };
                let info = TopicInfo {
                    name: name.clone(),
                    partitions,
                    generation,
                };
                state.topics.insert(record.topic.to_string(), info);
                (name, partitions)
            }
        };
        let deadline = now + inner.config.max_block;
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
            state.completion_waiters += 1;
            state = inner
                .completed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.completion_waiters -= 1;
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
                Some(key) => key_partition(key, partitions),
                None => {
                    state.round_robin = state.round_robin.wrapping_add(1);
                    (state.round_robin % partitions as u32) as i32
                }
            },
        };
        let tp = TopicPartition { topic, partition };
        state
            .acc
            .append(&tp, rec, token, now)
            .map_err(|e| ClientError::Batch(e.to_string()))?;
        state.buffered += size;
        state.unfinished += 1;
        if state.acc.has_ready() || inner.config.linger.is_zero() {
            inner.wake_sender(&state);
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
            state.completion_waiters += 1;
            state = inner
                .completed
                .wait_timeout(state, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
            state.completion_waiters -= 1;
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

impl<T: Send + 'static> Drop for Producer<T> {
    fn drop(&mut self) {
        self.inner.lock().closing = true;
        self.inner.wake.notify_all();
        self.inner.completed.notify_all();
        if let Some(sender) = self.sender.take() {
            let _ = sender.join();
        }
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn sender_loop<T: Send + 'static>(inner: &Arc<Inner<T>>) {
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
                state.sender_waiting = true;
                state = inner
                    .wake
                    .wait_timeout(state, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                state.sender_waiting = false;
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
fn send_batches<T: Send + 'static>(inner: &Arc<Inner<T>>, batches: Vec<ReadyBatch<T>>) {
    let md = inner.cluster.metadata();
    // leader → requests, each a list of batches.
    let mut requests: HashMap<i32, Vec<Vec<ReadyBatch<T>>>> = HashMap::default();
    let mut placed: HashMap<TopicPartition, usize> = HashMap::default();
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

/// Builds the wire batch (in the builder's buffer, which it takes): producer id/epoch/sequence
/// when idempotent, then compression.
fn encode_batch<T>(inner: &Inner<T>, batch: &mut ReadyBatch<T>) -> ClientResult<Bytes> {
    let mut builder = std::mem::replace(&mut batch.builder, BatchBuilder::new(0));
    if let Some((id, epoch)) = inner.producer_id {
        let count = batch.payloads.len() as i32;
        let mut state = inner.lock();
        let next = state.sequences.entry(batch.tp.clone()).or_insert(0);
        let base = *next;
        // Sequences wrap at i32::MAX as Kafka's do.
        *next = next.wrapping_add(count) & i32::MAX;
        drop(state);
        builder = builder.producer(id, epoch, base);
    }
    compress_batch(builder.finish(), inner.config.compression)
}

fn send_request<T: Send + 'static>(
    inner: &Arc<Inner<T>>,
    leader: i32,
    batches: Vec<ReadyBatch<T>>,
) {
    let mut topics: Vec<TopicBatches<'_>> = Vec::new();
    for b in &batches {
        let data = (b.tp.partition, b.encoded.clone().unwrap_or_default());
        match topics.iter_mut().find(|t| t.topic == &*b.tp.topic) {
            Some(t) => t.batches.push(data),
            None => topics.push(TopicBatches {
                topic: &b.tp.topic,
                batches: vec![data],
            }),
        }
    }
    let version = inner.produce_version;
    let timeout_ms = inner.cluster.config().request_timeout.as_millis() as i32;
    let body = produce_request::encode_body(version, inner.config.acks, timeout_ms, topics);
    let conn = match inner.cluster.connection(leader) {
        Ok(c) => c,
        Err(e) => {
            retry_or_fail(inner, batches, e);
            return;
        }
    };
    if inner.config.acks == 0 {
        let sent = conn.send_segments(ApiKey::Produce, version, body, None);
        for b in batches {
            let outcome = match &sent {
                Ok(()) => Ok(-1),
                Err(e) => Err(Arc::new(e.duplicate())),
            };
            complete(inner, b, outcome);
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
    let _ = conn.send_segments(ApiKey::Produce, version, body, Some(handler));
}

fn handle_response<T>(
    inner: &Inner<T>,
    batches: Vec<ReadyBatch<T>>,
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
fn retry_or_fail<T>(inner: &Inner<T>, batches: Vec<ReadyBatch<T>>, e: ClientError) {
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
        inner.wake_sender(&state);
    }
    if !fail.is_empty() {
        let shared = Arc::new(e);
        for b in fail {
            complete(inner, b, Err(shared.clone()));
        }
    }
}

/// Hands the batch's outcome to the handler (outside the lock) and releases its buffer space.
fn complete<T>(inner: &Inner<T>, batch: ReadyBatch<T>, outcome: Result<i64, Arc<ClientError>>) {
    let count = batch.payloads.len();
    let bytes = batch.bytes;
    (inner.handler)(Delivered {
        partition: batch.tp.partition,
        outcome,
        tokens: batch.payloads,
    });
    let mut state = inner.lock();
    state.buffered = state.buffered.saturating_sub(bytes);
    state.unfinished = state.unfinished.saturating_sub(count);
    if state.completion_waiters > 0 {
        inner.completed.notify_all();
    }
    inner.wake_sender(&state);
}

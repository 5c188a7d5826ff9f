//! The workloads: produce, consume, and e2e (both at once). Each producer and consumer is its
//! own client instance on its own thread(s); each records into its own [`Recorder`], merged
//! at the end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::args::{BenchArgs, BenchCommand};
use super::payload::{stamp_of, PayloadPool};
use super::progress::{Live, Progress};
use super::rate::Schedule;
use super::rng::Rng;
use super::stats::Recorder;
use crate::client::cluster::{EARLIEST, LATEST};
use crate::client::{
    ClientConfig, ClientError, Cluster, Consumer, ConsumerConfig, Delivered, OffsetSpec, Producer,
    ProducerConfig, ProducerRecord,
};

/// Records per run when neither --records nor --duration is given.
pub const DEFAULT_RECORDS: u64 = 1_000_000;
/// After the producers finish, how long e2e consumers may take to read what was acknowledged.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a producer's final flush.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("chart: {0}")]
    Chart(String),
    #[error("a bench thread panicked")]
    Panicked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    Produce,
    Consume,
    EndToEnd,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Produce => "produce",
            Workload::Consume => "consume",
            Workload::EndToEnd => "e2e",
        }
    }
}

/// Everything a run measured.
pub struct Outcome {
    pub workload: Workload,
    pub args: BenchArgs,
    pub partitions: usize,
    pub open_loop: bool,
    pub started_unix_ms: u64,
    pub start: Instant,
    pub finished: Instant,
    /// Acknowledged produce requests' records (latency: acknowledgement).
    pub produced: Option<Recorder>,
    /// Records received by consumers (latency: end to end in e2e).
    pub consumed: Option<Recorder>,
    /// Fetch round trips (consume).
    pub fetches: Option<Recorder>,
    /// Records handed to the producers (accepted by `send`).
    pub records_sent: u64,
}

pub fn run(command: BenchCommand) -> Result<Outcome, BenchError> {
    let (workload, args) = match command {
        BenchCommand::Produce(a) => (Workload::Produce, a),
        BenchCommand::Consume(a) => (Workload::Consume, a),
        BenchCommand::E2e(a) => (Workload::EndToEnd, a),
    };
    args.validate(workload.name()).map_err(BenchError::Config)?;
    let admin = Cluster::connect(client_config(&args, "ringbroker-bench-admin"))?;
    let partitions = if workload == Workload::Consume {
        admin.wait_for_leaders(&args.topic)?
    } else {
        crate::client::admin::ensure_topic(&admin, &args.topic, args.partitions)?
    };
    let all: Vec<i32> = (0..partitions as i32).collect();
    let ends = admin.list_offsets(&args.topic, &all, LATEST)?;
    let starts = if workload == Workload::Consume {
        admin.list_offsets(&args.topic, &all, EARLIEST)?
    } else {
        ends.clone()
    };
    let args = Arc::new(args);
    let live = Arc::new(Live::default());

    // Consumers first, positioned before anything is produced.
    let mut consumers = Vec::new();
    if workload != Workload::Produce {
        for c in 0..args.consumers {
            let mine: Vec<usize> = (c..partitions).step_by(args.consumers).collect();
            if mine.is_empty() {
                continue;
            }
            let cluster = Cluster::connect(client_config(&args, "ringbroker-bench-consumer"))?;
            let mut consumer = Consumer::new(cluster, ConsumerConfig::default())?;
            for p in mine {
                consumer.assign(&args.topic, &[p as i32], OffsetSpec::Offset(starts[p]))?;
            }
            consumers.push(consumer);
        }
    }
    // How many records the consumers should read (u64::MAX: until stopped).
    let target = Arc::new(AtomicU64::new(u64::MAX));
    if workload == Workload::Consume {
        let available: i64 = ends.iter().zip(&starts).map(|(e, s)| e - s).sum();
        let limit = match (args.records, args.duration) {
            (Some(n), _) => n.min(available.max(0) as u64),
            (None, Some(_)) => u64::MAX,
            (None, None) => available.max(0) as u64,
        };
        if limit == 0 && args.duration.is_none() {
            return Err(BenchError::Config(format!(
                "topic {} holds no records to consume: run `ringbroker bench produce` first",
                args.topic
            )));
        }
        target.store(limit, Ordering::Relaxed);
    }

    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let start = Instant::now();
    let deadline = args.duration.map(|d| start + args.warmup + d);
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Progress::start(live.clone(), start, args.warmup, !args.quiet);

    let consumer_threads: Vec<JoinHandle<Result<(Recorder, Recorder), BenchError>>> = consumers
        .into_iter()
        .map(|consumer| {
            let ctx = ConsumerContext {
                args: args.clone(),
                start,
                end_to_end: workload == Workload::EndToEnd,
                stop: stop.clone(),
                target: target.clone(),
                live: live.clone(),
            };
            std::thread::spawn(move || consume(consumer, ctx))
        })
        .collect();

    let mut produced = None;
    let mut records_sent = 0;
    let schedule = Schedule::new(start, args.rate, args.producers);
    if workload != Workload::Consume {
        let total = match args.duration {
            Some(_) => u64::MAX,
            None => args.records.unwrap_or(DEFAULT_RECORDS),
        };
        let mut threads = Vec::new();
        for p in 0..args.producers {
            let quota = if total == u64::MAX {
                u64::MAX
            } else {
                total / args.producers as u64
                    + u64::from((p as u64) < total % args.producers as u64)
            };
            let cluster = Cluster::connect(client_config(&args, "ringbroker-bench-producer"))?;
            let recorder = Arc::new(Mutex::new(Recorder::new(start, args.warmup)));
            let handler = delivery_handler(recorder.clone(), live.clone(), start);
            let producer = Producer::with_handler(cluster, producer_config(&args), handler)?;
            let ctx = ProducerContext {
                recorder,
                index: p,
                args: args.clone(),
                start,
                schedule,
                deadline,
                quota,
                partitions,
                live: live.clone(),
            };
            threads.push(std::thread::spawn(move || produce(producer, ctx)));
        }
        let mut merged = Recorder::new(start, args.warmup);
        let mut first_error = None;
        for t in threads {
            match t.join() {
                Ok(Ok((rec, sent))) => {
                    merged.merge(&rec);
                    records_sent += sent;
                }
                Ok(Err(e)) => first_error = first_error.or(Some(e)),
                Err(_) => first_error = first_error.or(Some(BenchError::Panicked)),
            }
        }
        if let Some(e) = first_error {
            stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        if workload == Workload::EndToEnd {
            target.store(merged.total_records, Ordering::Relaxed);
        }
        produced = Some(merged);
    }

    // Consumers: until they read the target, the deadline passes, or (e2e) the drain timeout.
    if !consumer_threads.is_empty() {
        let drain_deadline = match workload {
            Workload::EndToEnd => Some(Instant::now() + DRAIN_TIMEOUT),
            _ => deadline,
        };
        loop {
            let done = live.consumed.load(Ordering::Relaxed) >= target.load(Ordering::Relaxed);
            let late = drain_deadline.is_some_and(|d| Instant::now() >= d);
            let all_exited = consumer_threads.iter().all(JoinHandle::is_finished);
            if done || late || all_exited {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
    }
    let mut consumed = None;
    let mut fetches = None;
    if workload != Workload::Produce {
        let mut records = Recorder::new(start, args.warmup);
        let mut fetch = Recorder::new(start, args.warmup);
        for t in consumer_threads {
            let (r, f) = t.join().map_err(|_| BenchError::Panicked)??;
            records.merge(&r);
            fetch.merge(&f);
        }
        consumed = Some(records);
        fetches = Some(fetch);
    }
    let finished = Instant::now();
    drop(progress);
    let args = Arc::try_unwrap(args).unwrap_or_else(|a| (*a).clone());
    Ok(Outcome {
        workload,
        open_loop: schedule.is_open_loop() && workload != Workload::Consume,
        args,
        partitions,
        started_unix_ms,
        start,
        finished,
        produced,
        consumed,
        fetches,
        records_sent,
    })
}

fn client_config(args: &BenchArgs, client_id: &str) -> ClientConfig {
    let mut c = ClientConfig::new(&args.bootstrap);
    c.client_id = client_id.to_string();
    c.max_in_flight = args.max_in_flight;
    c
}

fn producer_config(args: &BenchArgs) -> ProducerConfig {
    ProducerConfig {
        acks: args.acks,
        compression: args.compression,
        batch_size: args.batch_size,
        linger: Duration::from_millis(args.linger_ms),
        idempotence: args.idempotence,
        ..ProducerConfig::default()
    }
}

/// What a bench record carries to its acknowledgement: when it was due (or sent), in ns since
/// the run's start, and its value size.
#[derive(Debug, Clone, Copy)]
struct Sent {
    origin_ns: u64,
    size: u32,
}

/// Records a completed batch: one lock of the producer's recorder and one update of the live
/// counters per batch, not per record.
fn delivery_handler(
    recorder: Arc<Mutex<Recorder>>,
    live: Arc<Live>,
    start: Instant,
) -> crate::client::DeliveryHandler<Sent> {
    Box::new(move |batch: Delivered<Sent>| {
        let now = Instant::now();
        let mut rec = lock(&recorder);
        match &batch.outcome {
            Ok(_) => {
                let mut bytes = 0u64;
                for sent in &batch.tokens {
                    let origin = start + Duration::from_nanos(sent.origin_ns);
                    rec.record_ok(now, origin, sent.size as usize);
                    bytes += u64::from(sent.size);
                }
                drop(rec);
                Live::add(&live.produced, batch.tokens.len() as u64);
                Live::add(&live.produced_bytes, bytes);
            }
            Err(e) => {
                let n = batch.tokens.len() as u64;
                rec.record_error(now, &e.kind_name(), n);
                drop(rec);
                Live::add(&live.errors, n);
            }
        }
    })
}

struct ProducerContext {
    recorder: Arc<Mutex<Recorder>>,
    index: usize,
    args: Arc<BenchArgs>,
    start: Instant,
    schedule: Schedule,
    deadline: Option<Instant>,
    quota: u64,
    partitions: usize,
    live: Arc<Live>,
}

/// One producer's loop: returns its recorder and how many records `send` accepted.
fn produce(producer: Producer<Sent>, ctx: ProducerContext) -> Result<(Recorder, u64), BenchError> {
    let args = &ctx.args;
    let recorder = ctx.recorder.clone();
    let mut rng = Rng::new(args.seed ^ (ctx.index as u64).wrapping_mul(0x9E37_79B9));
    let pool = PayloadPool::new(args.record_size.max(), &mut rng);
    let mut value = Vec::with_capacity(args.record_size.max());
    let mut sent = 0u64;
    let mut i = 0u64;
    while i < ctx.quota {
        let origin = match ctx.schedule.due(i) {
            Some(due) => {
                if ctx.deadline.is_some_and(|d| due >= d) {
                    break;
                }
                sleep_until(due);
                due
            }
            None => Instant::now(),
        };
        if ctx.deadline.is_some_and(|d| origin >= d) {
            break;
        }
        let size = args.record_size.sample(&mut rng);
        let stamp = origin.saturating_duration_since(ctx.start).as_nanos() as u64;
        pool.fill(&mut value, size, stamp, &mut rng);
        let partition = ((i as usize + ctx.index) % ctx.partitions) as i32;
        let token = Sent {
            origin_ns: stamp,
            size: size as u32,
        };
        let record = ProducerRecord::new(&args.topic, &value).partition(partition);
        match producer.send(record, token) {
            Ok(()) => sent += 1,
            Err(e) => {
                lock(&recorder).record_error(Instant::now(), &e.kind_name(), 1);
                Live::add(&ctx.live.errors, 1);
            }
        }
        i += 1;
    }
    let unfinished = producer.flush(FLUSH_TIMEOUT);
    if unfinished > 0 {
        lock(&recorder).record_error(
            Instant::now(),
            "UNFINISHED_AT_FLUSH_TIMEOUT",
            unfinished as u64,
        );
    }
    drop(producer);
    let rec = lock(&recorder).clone();
    Ok((rec, sent))
}

fn lock(r: &Mutex<Recorder>) -> std::sync::MutexGuard<'_, Recorder> {
    r.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sleeps until `due`; short waits are left to the send path (sleep granularity is ~50 µs).
fn sleep_until(due: Instant) {
    let now = Instant::now();
    if due > now + Duration::from_micros(100) {
        std::thread::sleep(due - now);
    }
}

struct ConsumerContext {
    args: Arc<BenchArgs>,
    start: Instant,
    end_to_end: bool,
    stop: Arc<AtomicBool>,
    target: Arc<AtomicU64>,
    live: Arc<Live>,
}

/// One consumer's loop: (records recorder, fetch round-trip recorder).
fn consume(
    mut consumer: Consumer,
    ctx: ConsumerContext,
) -> Result<(Recorder, Recorder), BenchError> {
    let mut records = Recorder::new(ctx.start, ctx.args.warmup);
    let mut fetches = Recorder::new(ctx.start, ctx.args.warmup);
    while !ctx.stop.load(Ordering::Relaxed)
        && ctx.live.consumed.load(Ordering::Relaxed) < ctx.target.load(Ordering::Relaxed)
    {
        let polled = consumer.poll(Duration::from_millis(200));
        let now = Instant::now();
        for latency in consumer.take_fetch_latencies() {
            fetches.record_latency(now, latency);
        }
        let batch = match polled {
            Ok(b) => b,
            Err(e) => {
                records.record_error(now, &e.kind_name(), 1);
                Live::add(&ctx.live.errors, 1);
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let mut bytes = 0u64;
        for r in &batch {
            let size = r.value.as_ref().map_or(0, Vec::len);
            bytes += size as u64;
            let origin = match (ctx.end_to_end, r.value.as_deref().and_then(stamp_of)) {
                (true, Some(ns)) => ctx.start + Duration::from_nanos(ns),
                _ => now,
            };
            records.record_ok(now, origin, size);
        }
        Live::add(&ctx.live.consumed, batch.len() as u64);
        Live::add(&ctx.live.consumed_bytes, bytes);
    }
    Ok((records, fetches))
}

//! rskafka (a third-party Rust Kafka client, no idempotent producer) as the client of the
//! replication fault test: `tests/interop/replication_test.py --client rskafka` starts a 3-broker
//! cluster, runs this, kill -9s partition leaders meanwhile and checks the history with
//! `tests/interop/jepsen_checker.py`.
//!
//! ```sh
//! cargo run --example rskafka_failover -- --bootstrap 127.0.0.1:39001,127.0.0.1:39002 \
//!     --topic jepsen --partitions 3 --rate 50 --duration-ms 60000 --control none
//! ```
//!
//! One task per partition, each with its own `PartitionClient`, writes one numbered value at a
//! time (`rsk<p>-<seq>`, acks=all: rskafka's produce requests ask for -1) at `--rate` records/s.
//! rskafka's own retries are switched off (a backoff deadline of zero): every failed call comes
//! back here, and this program retries it as an application would, up to `--max-attempts` times
//! with a short backoff. rskafka has invalidated its cached leader by then (connection errors,
//! NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION), so the retry re-resolves the leader from
//! the metadata. Without a producer id a retried write whose acknowledgement was lost can be in
//! the log twice: every retry is printed, so the harness can tell such duplicates from others.
//!
//! Prints one JSON line per event to stdout:
//! `{"ack": {"value", "partition", "offset", "attempts"}}`,
//! `{"retry": {"value", "partition", "attempt", "error", "kind"}}` (a failed attempt),
//! `{"failed": {"value", "error"}}` (given up after `--max-attempts`),
//! `{"stopped": {"sent", "acked", "failed", "retries", "errors"}}`, then one
//! `{"read": {"partition", "start", "end", "complete", "records": [[offset, value]]}}` per
//! partition and `{"read_done": {"records", "seconds", "error"}}`.
//!
//! `--control stdin`: produces until a `stop` line on stdin (or `--duration-ms`), then waits for
//! a `read` line (the harness heals the cluster in between) before reading every partition from
//! its low to its high watermark; stdin closing ends the program. `--control none`: produces
//! for `--duration-ms`, then reads at once. Every call and every loop is bounded.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rskafka::chrono::Utc;
use rskafka::client::error::Error as ClientError;
use rskafka::client::partition::{Compression, OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use rskafka::record::Record;
use rskafka::{BackoffConfig, BackoffError};
use serde_json::json;

/// Bound for one client call (a produce waits for the high watermark: acks=all).
const CALL: Duration = Duration::from_secs(15);
/// Bound for finishing the value in flight once told to stop.
const STOP_WAIT: Duration = Duration::from_secs(60);
/// Bound for waiting for the `read` line.
const READ_WAIT: Duration = Duration::from_secs(300);

/// What stdin said: nothing yet, `stop`, `read`, or closed.
const RUN: u8 = 0;
const STOP: u8 = 1;
const READ: u8 = 2;
const CLOSED: u8 = 3;

struct Args {
    bootstrap: Vec<String>,
    topic: String,
    partitions: i32,
    rate: f64,
    duration: Duration,
    stdin_control: bool,
    read_timeout: Duration,
    max_attempts: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        bootstrap: vec!["127.0.0.1:9092".into()],
        topic: "jepsen".into(),
        partitions: 3,
        rate: 50.0,
        duration: Duration::from_secs(120),
        stdin_control: true,
        read_timeout: Duration::from_secs(40),
        max_attempts: 100,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let [name, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let num = |v: &str| v.parse::<f64>().map_err(|e| format!("{name} {v}: {e}"));
        match name.as_str() {
            "--bootstrap" => a.bootstrap = value.split(',').map(str::to_string).collect(),
            "--topic" => a.topic = value.clone(),
            "--partitions" => a.partitions = num(value)? as i32,
            "--rate" => a.rate = num(value)?.max(0.1),
            "--duration-ms" => a.duration = Duration::from_millis(num(value)? as u64),
            "--read-timeout-ms" => a.read_timeout = Duration::from_millis(num(value)? as u64),
            "--max-attempts" => a.max_attempts = (num(value)? as u32).max(1),
            "--control" => match value.as_str() {
                "stdin" => a.stdin_control = true,
                "none" => a.stdin_control = false,
                other => return Err(format!("--control {other}: stdin or none")),
            },
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

fn out(v: serde_json::Value) {
    // One line per event; stdout is line-buffered.
    println!("{v}");
}

/// A short name for an error: the protocol error's name, or the kind of failure.
fn kind(e: &ClientError) -> String {
    match e {
        ClientError::RetryFailed(BackoffError::DeadlineExceded { source, .. }) => {
            match source.downcast_ref::<ClientError>() {
                Some(inner) => kind(inner),
                None => "retry failed".into(),
            }
        }
        ClientError::ServerError { protocol_error, .. } => format!("{protocol_error:?}"),
        ClientError::Connection(_) => "connection".into(),
        ClientError::Request(_) => "request".into(),
        ClientError::InvalidResponse(_) => "invalid response".into(),
        ClientError::Timeout => "timeout".into(),
        _ => "other".into(),
    }
}

fn no_retries() -> BackoffConfig {
    BackoffConfig {
        init_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(500),
        base: 2.0,
        // Zero: the first error ends the call; this program does the retrying.
        deadline: Some(Duration::ZERO),
    }
}

async fn bounded<T>(
    what: &str,
    d: Duration,
    f: impl std::future::Future<Output = Result<T, ClientError>>,
) -> Result<T, (String, String)> {
    match tokio::time::timeout(d, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err((kind(&e), format!("{what}: {e}"))),
        Err(_) => Err((
            "call timeout".into(),
            format!("{what}: no answer within {d:?}"),
        )),
    }
}

/// A call retried until it succeeds or `attempts` run out (or `deadline` passes).
async fn retried<T, F, Fut>(
    what: &str,
    attempts: u32,
    deadline: Instant,
    mut f: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut last = String::new();
    for i in 0..attempts {
        match bounded(what, CALL, f()).await {
            Ok(v) => return Ok(v),
            Err((_, e)) => last = e,
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(backoff(i)).await;
    }
    Err(last)
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((50u64 << attempt.min(4)).min(800))
}

async fn connect(a: &Args, deadline: Instant) -> Result<Client, String> {
    retried("connect", 50, deadline, || {
        ClientBuilder::new(a.bootstrap.clone())
            .client_id("rskafka-failover")
            .backoff_config(no_retries())
            .build()
    })
    .await
}

#[derive(Default)]
struct Stats {
    sent: u64,
    acked: u64,
    failed: u64,
    retries: u64,
    errors: BTreeMap<String, u64>,
}

/// One partition's producer: sequential writes, paced to the rate.
async fn produce_loop(
    a: Rc<Args>,
    client: Rc<Client>,
    p: i32,
    control: Arc<AtomicU8>,
    stats: Rc<std::cell::RefCell<Stats>>,
    end: Instant,
) {
    let t_start = Instant::now();
    let stop_by = end + STOP_WAIT;
    let pc: PartitionClient = match retried("partition client", 50, end, || {
        client.partition_client(a.topic.clone(), p, UnknownTopicHandling::Retry)
    })
    .await
    {
        Ok(pc) => pc,
        Err(e) => {
            out(json!({"fatal": format!("partition {p}: {e}")}));
            return;
        }
    };
    let interval = Duration::from_secs_f64(1.0 / a.rate);
    let mut next = t_start;
    let mut seq: u64 = 0;
    while control.load(Ordering::Relaxed) == RUN && Instant::now() < end {
        let now = Instant::now();
        if now < next {
            tokio::time::sleep((next - now).min(Duration::from_millis(50))).await;
            continue;
        }
        // No catch-up burst after a stall.
        next = (next + interval).max(now - Duration::from_secs(1));
        let value = format!("rsk{p}-{seq:06}");
        seq += 1;
        stats.borrow_mut().sent += 1;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let record = Record {
                key: None,
                value: Some(value.clone().into_bytes()),
                headers: BTreeMap::new(),
                timestamp: Utc::now(),
            };
            let res = bounded(
                "produce",
                CALL,
                pc.produce(vec![record], Compression::NoCompression),
            )
            .await;
            match res {
                Ok(offsets) if offsets.len() == 1 => {
                    stats.borrow_mut().acked += 1;
                    out(
                        json!({"ack": {"value": value, "partition": p, "offset": offsets[0],
                                       "attempts": attempt}}),
                    );
                    break;
                }
                other => {
                    let (k, e) = match other {
                        Ok(offsets) => ("bad answer".to_string(), format!("offsets {offsets:?}")),
                        Err(ke) => ke,
                    };
                    {
                        let mut s = stats.borrow_mut();
                        s.retries += 1;
                        *s.errors.entry(k.clone()).or_default() += 1;
                    }
                    let e: String = e.chars().take(200).collect();
                    out(
                        json!({"retry": {"value": value, "partition": p, "attempt": attempt,
                                         "kind": k, "error": e}}),
                    );
                    if attempt >= a.max_attempts || Instant::now() >= stop_by {
                        stats.borrow_mut().failed += 1;
                        out(json!({"failed": {"value": value, "error": e}}));
                        break;
                    }
                    tokio::time::sleep(backoff(attempt - 1)).await;
                }
            }
        }
    }
}

/// Every partition from its low to its high watermark.
async fn read_all(a: &Args, client: &Client) {
    let t0 = Instant::now();
    let deadline = t0 + a.read_timeout;
    let mut total = 0usize;
    let mut error: Option<String> = None;
    for p in 0..a.partitions {
        let mut part =
            json!({"partition": p, "start": 0, "end": 0, "complete": false, "records": []});
        let res: Result<(), String> = async {
            let pc = retried("partition client", 20, deadline, || {
                client.partition_client(a.topic.clone(), p, UnknownTopicHandling::Retry)
            })
            .await?;
            let start = retried("earliest", 20, deadline, || {
                pc.get_offset(OffsetAt::Earliest)
            })
            .await?;
            let end = retried("latest", 20, deadline, || pc.get_offset(OffsetAt::Latest)).await?;
            part["start"] = json!(start);
            part["end"] = json!(end);
            let mut records = Vec::new();
            let mut next = start;
            while next < end && Instant::now() < deadline {
                let (recs, _high) = retried("fetch", 20, deadline, || {
                    pc.fetch_records(next, 1..1_000_000, 200)
                })
                .await?;
                for r in recs {
                    // Whole batches come back: skip what is below the offset asked for.
                    if r.offset < next {
                        continue;
                    }
                    let v = r
                        .record
                        .value
                        .map(|v| String::from_utf8_lossy(&v).into_owned())
                        .unwrap_or_default();
                    records.push(json!([r.offset, v]));
                    next = r.offset + 1;
                }
            }
            total += records.len();
            part["complete"] = json!(next >= end);
            part["records"] = json!(records);
            Ok(())
        }
        .await;
        if let Err(e) = res {
            error.get_or_insert(format!("partition {p}: {e}"));
        }
        out(json!({"read": part}));
    }
    out(
        json!({"read_done": {"records": total, "seconds": t0.elapsed().as_secs_f64(),
                             "error": error}}),
    );
}

async fn run(a: Args) -> Result<(), String> {
    let a = Rc::new(a);
    let control = Arc::new(AtomicU8::new(RUN));
    if a.stdin_control {
        let c = Arc::clone(&control);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                match line.trim() {
                    "stop" => {
                        let _ = c.compare_exchange(RUN, STOP, Ordering::Relaxed, Ordering::Relaxed);
                    }
                    "read" => c.store(READ, Ordering::Relaxed),
                    _ => {}
                }
            }
            c.store(CLOSED, Ordering::Relaxed);
        });
    }
    let end = Instant::now() + a.duration;
    let client = Rc::new(connect(&a, end).await?);
    let stats = Rc::new(std::cell::RefCell::new(Stats::default()));
    let t0 = Instant::now();
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let tasks: Vec<_> = (0..a.partitions)
                .map(|p| {
                    tokio::task::spawn_local(produce_loop(
                        Rc::clone(&a),
                        Rc::clone(&client),
                        p,
                        Arc::clone(&control),
                        Rc::clone(&stats),
                        end,
                    ))
                })
                .collect();
            for t in tasks {
                let _ = t.await;
            }
        })
        .await;
    {
        let s = stats.borrow();
        out(
            json!({"stopped": {"sent": s.sent, "acked": s.acked, "failed": s.failed,
                               "retries": s.retries, "errors": s.errors,
                               "seconds": t0.elapsed().as_secs_f64()}}),
        );
    }
    if a.stdin_control {
        let wait_until = Instant::now() + READ_WAIT;
        loop {
            match control.load(Ordering::Relaxed) {
                READ => break,
                CLOSED => return Ok(()),
                _ if Instant::now() >= wait_until => return Err("no `read` line".into()),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    read_all(&a, &client).await;
    Ok(())
}

fn main() -> ExitCode {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rskafka_failover: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rskafka_failover: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            out(json!({"fatal": e}));
            ExitCode::FAILURE
        }
    }
}
